"""What a stdio MCP server writes to its stderr, as the terminal shows it (issue 37,
item 7; SPEC R25).

The SDK hands the server agentflow's own stderr, so whatever the server wrote reached
the terminal raw: a screen clear, a fake prompt line, an OSC 52 write to the
clipboard. Here the server gets a pipe instead; each line it writes is shown through
``display.safe_text`` like every other text from outside, prefixed with the server's
name (``mcp fs: …``), at most ``MAX_LINE`` characters of it, and at most
``MAX_LINES`` lines per start (then one line saying the rest was cut).

Private to ``agentflow.mcp``: the pipe is read in the extra's one event loop
(``loop.add_reader``), no thread of its own.
"""

from __future__ import annotations

import contextlib
import os
import sys

from .display import safe_text

MAX_LINES = 200  # lines shown per start of a server
MAX_LINE = 1000  # characters shown of one line


class ServerStderr:
    """The pipe a stdio server's stderr goes to, and what shows its lines.

    Args:
        name: a callable giving the server's name (str) when a line is shown (an
            unnamed server is named once it answered).
        out: where the lines go (a text stream); default ``sys.stderr`` at the time.

    Attributes:
        file: the write end (a file object), for ``stdio_client(errlog=...)``.
    """

    def __init__(self, name, out=None):
        self.name, self.out = name, out
        self._fd, write = os.pipe()
        os.set_blocking(self._fd, False)
        self.file = os.fdopen(write, "w")
        self._partial, self._shown, self._cut, self._loop = b"", 0, 0, None

    def attach(self, loop) -> None:
        """Read the pipe in an event loop.

        Args:
            loop: the asyncio loop (running in this thread) that calls ``read``.
        """
        self._loop = loop
        loop.add_reader(self._fd, self.read)

    def read(self) -> None:
        """Show the complete lines that arrived (the loop calls it when the pipe is
        readable); at end of file, the rest."""
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self._show(line)
        if len(self._partial) > MAX_LINE * 4:  # a line without end: shown in parts
            self._show(self._partial)
            self._partial = b""

    def close(self) -> None:
        """Stop reading: what is left in the pipe is shown, then both ends closed."""
        if self._fd < 0:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        with _suppressed():
            self.file.close()
        while True:
            try:
                data = os.read(self._fd, 65536)
            except OSError:
                break
            if not data:
                break
            *lines, self._partial = (self._partial + data).split(b"\n")
            for line in lines:
                self._show(line)
        if self._partial:
            self._show(self._partial)
        os.close(self._fd)
        self._fd = -1
        if self._cut:
            self._write(f"({self._cut} more lines of its stderr not shown: at most "
                        f"{MAX_LINES} a start)")

    def _show(self, line: bytes) -> None:
        if self._shown >= MAX_LINES:
            self._cut += 1
            return
        self._shown += 1
        text = line.decode("utf-8", "replace").rstrip("\r")
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE] + f"… ({len(text) - MAX_LINE} more characters)"
        self._write(safe_text(text))

    def _write(self, text: str) -> None:
        out = self.out or sys.stderr
        with _suppressed():
            out.write(f"mcp {self.name() or 'server'}: {text}\n")
            out.flush()


def _suppressed():
    """Nothing a closed stream raises stops the server's shutdown."""
    return contextlib.suppress(OSError, ValueError)
