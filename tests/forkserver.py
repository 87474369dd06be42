"""Start ``python ARGS`` without starting Python: fork an interpreter that has
agentflow imported already.

``python tests/forkserver.py SOCKET`` imports what agentflow's commands and the tests'
worker scripts import, once, and then, for each request on the Unix socket
``SOCKET``, forks a child that becomes ``python ARGS`` (``-c CODE``, ``-m MODULE`` or
a script, with their arguments): its standard streams the request's, made as the
interpreter makes them at start-up, its folder, exactly its environment, optionally a
new session, and a pseudo-terminal as its controlling terminal. Such a child skips the
start of an interpreter and its imports, most of the time of a test that runs
agentflow in another process; ``tests/helpers_fork.py`` sends the requests, in make
test only (make test-slow starts each process as a user does).

A request is a newline sent with the child's standard input, output and error
attached (SCM_RIGHTS), then one JSON object ``{"argv", "cwd", "env", "session",
"terminal"}`` up to the end of the test's writing side. The server answers on the same
connection with a line holding the child's pid and then, once the child has ended, a
line holding its wait status. Nothing here runs a thread, so forking is safe; the
server ends when its standard input closes (the test process is gone).
"""

import fcntl
import io
import json
import locale
import os
import runpy
import select
import signal
import socket
import sys
import termios
import types

# What a chat, a demo or a worker script imports (the MCP SDK, 1 s, only with --mcp):
# done once here, not in every child.
import getpass  # noqa: F401
import netrc  # noqa: F401

import requests  # noqa: F401

import agentflow.agent  # noqa: F401
import agentflow.builtin.builtin_tools  # noqa: F401
import agentflow.builtin.environment  # noqa: F401
import agentflow.cli.chat  # noqa: F401
import agentflow.cli.demo  # noqa: F401
import agentflow.cli.main  # noqa: F401
import agentflow.cli.spinner  # noqa: F401
import agentflow.cli.telemetry  # noqa: F401
import agentflow.cli.worker  # noqa: F401
import agentflow.openai_client  # noqa: F401
import agentflow.stores.files  # noqa: F401
import agentflow.stores.sql  # noqa: F401
try:
    import opentelemetry.trace.propagation.tracecontext  # noqa: F401 - agentflow.tracing
except ImportError:
    pass

# The command's parser holds no state between parses: built once here, not in every
# child (a third of a short command's time), as tests/helpers_cli.py does in-process.
_PARSER = agentflow.cli.main.build_parser()
agentflow.cli.main.build_parser = lambda: _PARSER


def serve(path: str) -> dict:
    """Answer requests until standard input closes; return only in a child, with the
    request it is to become."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the watchers below are reaped
    # what is imported is never collected: a child's collections, and ``end``'s look
    # for its open files, skip it (and its pages stay shared with this process)
    import gc
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            os._exit(0)
        if listener not in ready:
            continue
        connection, _ = listener.accept()
        message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
        while chunk := connection.recv(1 << 16):
            message += chunk
        if os.fork() == 0:  # the watcher: starts the child, reports its pid and its end
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            pid = os.fork()
            if pid == 0:
                connection.close()
                return dict(json.loads(message), fds=fds)
            for fd in fds:
                os.close(fd)
            try:
                connection.sendall(f"{pid}\n".encode())
                _, status = os.waitpid(pid, 0)
                connection.sendall(f"{status}\n".encode())
            finally:  # the test may have gone: nothing of the server's runs here
                os._exit(0)
        connection.close()
        for fd in fds:
            os.close(fd)


def _stream(fd: int, encoding: str, errors: str):
    """A standard stream as the interpreter opens it at start-up (line-buffered on a
    terminal, stderr always)."""
    raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
    buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, newline="\n",
                            line_buffering=fd == 2 or raw.isatty())


def become(request: dict) -> None:
    """Turn this process into ``python ARGV`` as the request asks, and run it."""
    if request["session"] or request["terminal"]:
        os.setsid()
    for fd, target in zip(request["fds"], (0, 1, 2)):
        os.dup2(fd, target)
    if request["terminal"]:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    locale.setlocale(locale.LC_CTYPE, "")
    encoding, _, errors = os.environ.get("PYTHONIOENCODING", "").partition(":")
    encoding = encoding or locale.getpreferredencoding(False)
    sys.stdin = sys.__stdin__ = _stream(0, encoding, errors or "strict")
    sys.stdout = sys.__stdout__ = _stream(1, encoding, errors or "strict")
    sys.stderr = sys.__stderr__ = _stream(2, encoding, "backslashreplace")
    argv = request["argv"]
    if argv[0] == "-m":
        sys.argv, sys.path[0] = ["-m", *argv[2:]], os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        sys.argv, sys.path[0] = ["-c", *argv[2:]], ""
        main = sys.modules["__main__"] = types.ModuleType("__main__")
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)
    else:  # a script
        sys.argv, sys.path[0] = argv, os.path.dirname(os.path.realpath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


def end(run) -> None:
    """Run ``run()`` and end the process as the interpreter ends ``python ARGS``, but
    without its finalization, which tears down every module this server imported
    (40 ms a child, longer than most commands take): non-daemon threads are joined,
    atexit functions run, files still open for writing and the standard streams are
    flushed, and the exit status is the interpreter's, 1 after an uncaught exception,
    120 when standard output cannot be flushed, death by SIGINT after an uncaught
    KeyboardInterrupt (Python's documentation, "sys.exit" and "Exit codes")."""
    import atexit
    import gc
    import threading
    import traceback
    code, interrupted = 0, False
    try:
        run()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code, interrupted = 1, isinstance(exc, KeyboardInterrupt)
    threading._shutdown()
    atexit._run_exitfuncs()
    for thing in gc.get_objects():  # the child's (serve froze the server's): what
        # finalization would close, and so flush
        if isinstance(thing, io.BufferedWriter) and thing not in (
                getattr(sys.stdout, "buffer", None), getattr(sys.stderr, "buffer", None)):
            try:
                thing.flush()
            except (OSError, ValueError):
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout:
                print(f"Exception ignored in: {stream!r}", file=sys.stderr)
                traceback.print_exc()
                code = 120
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    request = serve(sys.argv[1])
    end(lambda: become(request))
