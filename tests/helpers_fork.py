"""``python ARGS`` in another process, forked from one that has agentflow imported
(``tests/forkserver.py``): for the tests whose point is another process (a paused run
resumed there, workers racing, a chat on a terminal), not the start of an interpreter,
which is most of such a process's time (0.3 s of CPU, agentflow's imports).

``popen([sys.executable, ...], **popen_arguments)`` is a ``subprocess.Popen`` whose
child the fork server made: ``-c CODE``, ``-m MODULE`` or a script, with pipes or files
as its standard streams, its folder and environment, ``start_new_session``, and
``terminal=True`` to make its standard input (a pty's slave side) its controlling
terminal. ``CLI_TESTS_IN_SUBPROCESS=1`` (make test-slow, which CI runs as well) starts
each process as a user does instead.
"""

from __future__ import annotations

import atexit
import json
import os
import pathlib
import select
import socket
import subprocess
import sys
import tempfile

IN_SUBPROCESS = os.environ.get("CLI_TESTS_IN_SUBPROCESS") == "1"
TIMEOUT = 60  # seconds for the server to start; only against hangs


class ForkServer:
    """``tests/forkserver.py``, started on first use and ended with this process."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="agentflow-fork-")
        self.path = os.path.join(self.folder, "socket")
        script = pathlib.Path(__file__).with_name("forkserver.py")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENAI_", "AGENTFLOW_"))}
        self.process = subprocess.Popen([sys.executable, str(script), self.path],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=env, cwd=self.folder)
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError(f"{script} did not start (status {self.process.wait()})")
        self.owner = os.getpid()
        atexit.register(self.stop)

    def stop(self) -> None:
        if os.getpid() != self.owner:  # a fork of the test process leaves it alone
            return
        self.process.stdin.close()  # the server ends at the end of its input
        self.process.wait(timeout=TIMEOUT)
        os.unlink(self.path)
        os.rmdir(self.folder)


_server: list = []


class Forked(subprocess.Popen):
    """A ``subprocess.Popen`` of ``python ARGS`` whose child the fork server forks."""

    def __init__(self, args, *, terminal: bool = False, **popen_arguments):
        self._terminal = terminal
        super().__init__(args, **popen_arguments)

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                       startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread,
                       c2pwrite, errread, errwrite, restore_signals, gid, gids, uid, umask,
                       start_new_session, process_group):
        args = [os.fspath(a) for a in args]
        if (args[0] != sys.executable or len(args) < 2 or args[1].startswith("-")
                and args[1] not in ("-c", "-m") or shell or executable or preexec_fn
                or pass_fds or process_group not in (None, -1) or uid or gid or gids):
            raise ValueError(f"the fork server runs python -c, -m or a script: {args}")
        if not _server:
            _server.append(ForkServer())
        fds = [p2cread, c2pwrite, errwrite]
        fds = [fd if fd != -1 else inherited for fd, inherited in zip(fds, (0, 1, 2))]
        request = {"argv": args[1:], "cwd": os.fspath(cwd or os.getcwd()),
                   "env": dict(os.environ if env is None else env),
                   "session": bool(start_new_session), "terminal": self._terminal}
        self._connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._connection.connect(_server[0].path)
            socket.send_fds(self._connection, [b"\n"], fds)
            self._connection.sendall(json.dumps(request).encode())
            self._connection.shutdown(socket.SHUT_WR)
            self._answers = self._connection.makefile("rb", buffering=0)  # select sees all
            self.pid = int(self._answers.readline())
            self._child_created = True
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _try_wait(self, wait_flags):
        """``(pid, wait status)`` once the server says the child ended, else ``(0, 0)``
        (with ``os.WNOHANG``); as ``os.waitpid`` answers ``subprocess.Popen``."""
        if wait_flags & os.WNOHANG and not select.select([self._connection], [], [], 0)[0]:
            return 0, 0
        status = int(self._answers.readline())
        self._answers.close()
        self._connection.close()
        return self.pid, status

    def _internal_poll(self, _deadstate=None, **_):
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None:
                    pid, status = self._try_wait(os.WNOHANG)
                    if pid == self.pid:
                        self._handle_exitstatus(status)
            finally:
                self._waitpid_lock.release()
        return self.returncode


def popen(args, **popen_arguments) -> subprocess.Popen:
    """``subprocess.Popen(args, ...)`` of ``[sys.executable, ...]``: forked by the fork
    server in make test, started as given under ``CLI_TESTS_IN_SUBPROCESS=1``."""
    if IN_SUBPROCESS:
        popen_arguments.pop("terminal", None)
        return subprocess.Popen(args, **popen_arguments)
    return Forked(args, **popen_arguments)


def run(args, *, input=None, timeout=None, check=False, **popen_arguments):
    """``subprocess.run`` with ``popen``."""
    if input is not None:
        popen_arguments["stdin"] = subprocess.PIPE
    if popen_arguments.pop("capture_output", False):
        popen_arguments["stdout"] = popen_arguments["stderr"] = subprocess.PIPE
    with popen(args, **popen_arguments) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except BaseException:
            process.kill()
            raise
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done
