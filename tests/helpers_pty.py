"""Drive a command through a real pseudo-terminal (stdlib ``os.openpty``).

The child gets the pty as stdin, stdout and stderr *and as its controlling
terminal*, so the line discipline does what a user's terminal does: it echoes what
is typed, turns ``\\n`` into ``\\r\\n`` on output, and turns a typed ``\\x03`` into
SIGINT for the child's foreground process group (Ctrl-C).

A session leader gains a controlling terminal only by ``ioctl(TIOCSCTTY)``; that has
to happen in the child. Under ``CLI_TESTS_IN_SUBPROCESS=1`` (make test-slow, which CI
runs) the child is started as a tiny ``python -c`` that makes the pty its controlling
terminal and then ``exec``s ``python -m agentflow ARGS``: exactly the process a user
starts. In make test the fork server of ``tests/helpers_fork.py`` forks that child
instead, from an interpreter that has agentflow imported already: the same session,
terminal, folder, environment and streams, without the half second an interpreter
and its imports take.

Reading never relies on timing: ``expect`` reads until a text appears (or the
output ends), with a generous safety deadline only so that a broken prompt cannot
hang the suite.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

import helpers_fork
from helpers_fork import IN_SUBPROCESS

TIMEOUT = 60  # seconds; a safety net against hangs, never an assertion

_EXEC_ON_CONTROLLING_TTY = (
    "import fcntl, os, sys, termios\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'agentflow', *sys.argv[1:]])\n"
)


class PtyProcess:
    """``python -m agentflow *args`` on a pseudo-terminal.

    ``text`` is everything the terminal showed so far (``\\r\\n`` turned into
    ``\\n``). ``expect(s)`` waits for the next occurrence of ``s`` after the previous
    match and returns the text between the two matches.
    """

    def __init__(self, args, cwd, env):
        self.master, slave = os.openpty()
        # A wide window: readline on a dumb terminal scrolls a line longer than the
        # width sideways, which would cut the prompts the tests read.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
        try:
            if IN_SUBPROCESS:
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", _EXEC_ON_CONTROLLING_TTY, *args], cwd=cwd,
                    env=env, stdin=slave, stdout=slave, stderr=slave,
                    start_new_session=True, close_fds=True)
            else:
                self.proc = helpers_fork.popen(
                    [sys.executable, "-m", "agentflow", *args], cwd=cwd, env=env,
                    stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                    terminal=True)
        finally:
            os.close(slave)
        self.buffer = b""
        self._cursor = 0  # index in ``text`` just after the last match
        self._eof = False

    # -- reading ---------------------------------------------------------------------

    def _read_some(self, wait: float) -> bool:
        """Read what is available within ``wait`` seconds; False at end of output."""
        if self._eof:
            return False
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every holder of the slave side has closed it
            self._eof = True
            return False
        if not data:
            self._eof = True
            return False
        self.buffer += data
        return True

    @property
    def text(self) -> str:
        return self.buffer.decode("utf-8", "replace").replace("\r\n", "\n")

    def expect(self, wanted: str) -> str:
        """Read until ``wanted`` appears after the previous match; return the text
        from the previous match up to and including ``wanted``. Fails the test (with
        the output so far) when the output ends or the safety deadline passes."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            text = self.text
            found = text.find(wanted, self._cursor)
            if found >= 0:
                start, self._cursor = self._cursor, found + len(wanted)
                return text[start:self._cursor]
            if time.monotonic() > deadline or not self._read_some(0.5):
                self.close()
                pytest.fail(f"never saw {wanted!r}; the terminal showed:\n{self.text}")

    def rest(self) -> str:
        """The text after the last match."""
        return self.text[self._cursor:]

    # -- writing ---------------------------------------------------------------------

    def send(self, line: str) -> None:
        """Type ``line`` and Enter."""
        os.write(self.master, line.encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        os.write(self.master, data)

    # -- the end ---------------------------------------------------------------------

    def wait(self) -> int:
        """Read to the end of output and return the exit status."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and self._read_some(0.5):
            pass
        try:
            code = self.proc.wait(timeout=TIMEOUT)
        finally:
            self.close()
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass

