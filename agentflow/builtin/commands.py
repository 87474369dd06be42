"""Running one shell command for ``run_command``: nothing it starts outlives it, nor
agentflow (SPEC R16; issue 26, item 5).

On Linux the command's parent is a small supervisor (``agentflow/builtin/supervise.py``, its
own process: a child subreaper is process-wide, so it is never set in the process that
embeds agentflow). Whatever the command leaves behind (``cmd &``, ``nohup``,
``setsid``, a double fork) becomes the supervisor's child, and it kills them all when
the command ends, when it is stopped (a timeout, Ctrl-C), and when agentflow dies,
even by SIGKILL. In a sandbox (``agentflow.builtin.sandbox``) the command runs under
``bwrap`` below the supervisor, in process ids of its own.

Elsewhere on POSIX the command runs in a process group of its own, which a watcher
kills when this process dies, and a timeout or Ctrl-C kills; a ``setsid`` there
escapes. Commands never get the API key's environment variables (SPEC R26).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

SECRET_ENV = ("OPENAI_API_KEY",)  # variables commands never get (SPEC R26)
_SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supervise.py")
_GRACE = 5.0  # seconds the supervisor has to kill what is below it

# "$@" is the command; stdin is the read end of a pipe whose only writer is this
# process. A watcher in the command's process group waits for end of file there: when
# this process dies, even by SIGKILL, the watcher kills the group. The command gets
# /dev/null as stdin, not the pipe; when it ends, the watcher is stopped and its exit
# status returned.
_GUARDED = ('exec 3<&0 </dev/null; ( read -r _ <&3; kill -s KILL 0 ) & watcher=$!; '
            'exec 3<&-; "$@"; status=$?; kill "$watcher" 2>/dev/null; '
            'exit "$status"')


def supervised() -> bool:
    """Whether commands run below the supervisor here (Linux, with an interpreter to
    run it).

    Returns:
        bool: ``True`` on Linux when ``sys.executable`` is known.
    """
    return sys.platform.startswith("linux") and bool(sys.executable)


def run(argv: list[str], cwd: str, timeout: float, secret_env=SECRET_ENV,
        on_output=None, env: dict | None = None) -> tuple[int | None, bytes]:
    """Run ``argv`` (``/bin/sh -c COMMAND``, or the ``bwrap`` line that runs it) in the
    folder ``cwd``, its standard input ``/dev/null``, its output and errors together.

    Args:
        argv: the program and its arguments (list of str).
        cwd: the folder it runs in (str).
        timeout: seconds (float) before it and all it started are killed.
        secret_env: names of environment variables it does not get (iterable of str).
        env: its whole environment (dict of str), instead of this process's without
            ``secret_env`` (``RunCommand`` gives one without secrets, SPEC R27).
        on_output: ``None``, or a callable given each piece of output (bytes) as it
            comes (POSIX: one ``select`` loop in this thread; the library starts none).

    Returns:
        tuple: ``(status, output)``: the exit status (int; 128 + N for signal N), or
        ``None`` when the timeout killed it; and everything it wrote (bytes).

    Raises:
        KeyboardInterrupt, SystemExit: the run was interrupted meanwhile; the command
            and all it started were killed first (SPEC R16).
        OSError: the command could not be started.
    """
    if env is None:
        hidden = set(secret_env)
        env = {name: value for name, value in os.environ.items() if name not in hidden}
    process, lifeline = _start(argv, cwd, env)
    # POSIX: this thread's own select loop even without on_output, since after a Ctrl-C
    # communicate() waits 0.25 s for the child to take the SIGINT too, which a command
    # in its own session never gets
    live = os.name == "posix"
    try:
        if live:
            output = _read_live(process, timeout, on_output or (lambda piece: None))
        else:
            output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        # communicate keeps what it read before; the live loop hands it in the exception
        return None, ((exc.output or b"") if live else b"") + _stop(process, lifeline)
    except BaseException:  # Ctrl-C, SystemExit: the command stops with the run (R16)
        _stop(process, lifeline)
        raise
    finally:
        if lifeline is not None:
            os.close(lifeline)
    return process.returncode, output


def _read_live(process: subprocess.Popen, timeout: float, on_output) -> bytes:
    """The process's whole output, each piece handed to ``on_output`` as it arrives.

    Raises:
        subprocess.TimeoutExpired: it ran past ``timeout`` seconds (not yet stopped);
            its ``output`` is what was read.
    """
    import select
    import time
    deadline, pieces, fd = time.monotonic() + timeout, [], process.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(process.args, timeout, b"".join(pieces))
        if not select.select([fd], [], [], left)[0]:
            continue
        piece = os.read(fd, 65536)
        if not piece:
            break
        pieces.append(piece)
        on_output(piece)
    output = b"".join(pieces)
    try:
        process.wait(timeout=max(deadline - time.monotonic(), 0.001))
    except subprocess.TimeoutExpired:
        raise subprocess.TimeoutExpired(process.args, timeout, output) from None
    process.stdout.close()
    return output


def _start(argv, cwd, env) -> tuple[subprocess.Popen, int | None]:
    """The started process and the write end of its lifeline pipe (``None`` below the
    supervisor, or off POSIX)."""
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd, env=env)
    if os.name != "posix":  # argv is /bin/sh -c COMMAND: the system's shell runs COMMAND
        return subprocess.Popen(argv[-1], shell=True, stdin=subprocess.DEVNULL, **pipes), None
    if supervised():
        return subprocess.Popen([sys.executable, "-I", "-S", _SUPERVISOR, str(os.getpid()),
                                 *argv], stdin=subprocess.DEVNULL, start_new_session=True,
                                **pipes), None
    lifeline, keep = os.pipe()  # both close-on-exec: only the read end is handed over
    try:
        process = subprocess.Popen(["/bin/sh", "-c", _GUARDED, "sh", *argv],
                                   stdin=lifeline, start_new_session=True, **pipes)
    except BaseException:
        os.close(keep)
        raise
    finally:
        os.close(lifeline)
    return process, keep


def _stop(process: subprocess.Popen, lifeline) -> bytes:
    """Stop the command and all it started; returns what it wrote until then. The
    supervisor is asked (SIGTERM) to kill what is below it; the group is killed when
    it does not within ``_GRACE`` seconds, or without a supervisor."""
    if lifeline is None and supervised():
        process.terminate()
        try:
            return process.communicate(timeout=_GRACE)[0]
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()
    return process.communicate()[0]
