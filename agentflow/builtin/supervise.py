"""The parent of each command ``run_command`` starts on Linux (issue 26, item 5): no
command outlives the call that started it, nor agentflow.

Run as a script, never imported by agentflow (``python -I -S supervise.py PARENT_PID
ARGV...``): it makes itself a child subreaper, so that every process the command
starts and leaves behind (``cmd &``, ``nohup``, ``setsid``, a double fork) becomes its
child instead of init's; it runs ``ARGV``; when that exits, or when this process gets
SIGTERM, SIGINT or SIGHUP, or when agentflow dies (``PR_SET_PDEATHSIG`` sends SIGTERM,
even when agentflow is killed by SIGKILL), it kills every process below it and exits
with ``ARGV``'s exit status (128 + N for signal N, as ``sh`` reports it).

A subreaper is set for a whole process, so it is set here, in a process of its own,
and never in the process that embeds agentflow: that one's orphans would become its
zombies.
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


def _children() -> dict:
    """Every process's children, from ``/proc/*/stat``."""
    children: dict = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(name))
    return children


def kill_all() -> None:
    """SIGKILL every process below this one and reap them, until none is left: one
    that forks meanwhile leaves its child to this subreaper, and the next round kills it."""
    me = os.getpid()
    while True:
        children, todo = _children(), [me]
        while todo:
            for pid in children.get(todo.pop(), []):
                todo.append(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            os.waitpid(-1, 0)
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no child: nothing is left below, orphans come here


def _stop(signum, frame) -> None:
    kill_all()
    os._exit(128 + signum)


def main(argv) -> int:
    """Supervise one command (the module docstring).

    Args:
        argv: ``[PARENT_PID, PROGRAM, ARG...]`` (list of str): the pid of the agentflow
            process that started this one, then the command to run (``/bin/sh -c …``
            or ``bwrap … /bin/sh -c …``).

    Returns:
        int: the command's exit status, 128 + N when signal N ended it; 126 when this
        process cannot become a subreaper (nothing was run).
    """
    parent, command = int(argv[0]), argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.stderr.write("agentflow: cannot supervise the command (prctl failed), so it did "
                         "not run\n")
        return 126
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _stop)
    if os.getppid() != parent:  # agentflow died before PR_SET_PDEATHSIG was set
        return 128 + signal.SIGTERM
    pid = os.fork()
    if pid == 0:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"agentflow: cannot run {command[0]}: {exc.strerror}\n")
        finally:
            os._exit(127)
    while True:
        done, status = os.waitpid(-1, 0)
        if done == pid:
            break
    kill_all()
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
