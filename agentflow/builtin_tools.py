"""The tools of ``agentflow chat``: run a command and write a file (both wait for
approval), read a file and list a folder (both capped in size; they run without asking
inside the workspace and ask outside it or for a secret file, ``workspace.py``).

Every tool works in the workspace: relative paths are opened from it and commands run
in it. Each tool's ``preview(arguments)`` is what the approval prompt shows besides the
arguments: the exact command line (with a warning for each path it names outside the
workspace or secret), or the diff a write would make. Each declares its subject for
approval policies (SPEC R19): ``run_command`` its command line (a shell subject), the
file tools their path.

``run_command`` starts the command in a process group of its own, so that a timeout
can kill everything it started; the same happens when the run is interrupted (Ctrl-C,
``SystemExit``), and, through a watcher that reads a pipe only this process holds open,
when this process dies, even by SIGKILL (SPEC R16): a command never outlives the run
that started it. ``read_file`` and ``list_dir`` are idempotent (R16).
"""

from __future__ import annotations

import difflib
import os
import signal
import subprocess

from .tools import ApprovalRequiredTool, FunctionTool, Tool
from .workspace import SECRET_FILES, Workspace

BUILTIN_NAMES = ("run_command", "read_file", "list_dir", "write_file")


def _cap(data: bytes, limit: int, total: int | None = None, what: str = "output cap") -> str:
    """``data`` cut to ``limit`` bytes, saying how many of ``total`` were cut."""
    total = len(data) if total is None else total
    text = data[:limit].decode("utf-8", "replace")
    if total > limit:
        text += f"\n[... {total - limit} more bytes cut: the {what} is {limit} bytes]"
    return text


# $1 is the command; stdin is the read end of a pipe whose only writer is this
# process. A watcher in the command's process group waits for end of file there: when
# this process dies, even by SIGKILL, the watcher kills the group. The command gets
# /dev/null as stdin, not the pipe; when it ends, the watcher is stopped and its exit
# status returned.
_GUARDED = ('exec 3<&0 </dev/null; ( read -r _ <&3; kill -s KILL 0 ) & watcher=$!; '
            'exec 3<&-; /bin/sh -c "$1"; status=$?; kill "$watcher" 2>/dev/null; '
            'exit "$status"')


def _start(command: str, cwd: str) -> tuple[subprocess.Popen, int | None]:
    """Start ``command`` in the folder ``cwd``, in a process group of its own that dies
    with this process; returns the process and the write end of its lifeline pipe
    (``None`` off POSIX)."""
    if os.name != "posix":
        return subprocess.Popen(command, shell=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                cwd=cwd), None
    lifeline, keep = os.pipe()  # both close-on-exec: only the read end is handed over
    try:
        process = subprocess.Popen(["/bin/sh", "-c", _GUARDED, "sh", command],
                                   stdin=lifeline, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   cwd=cwd)
    except BaseException:
        os.close(keep)
        raise
    finally:
        os.close(lifeline)
    return process, keep


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()


class _Previewed(ApprovalRequiredTool):
    def __init__(self, tool: Tool, preview, when=None):
        super().__init__(tool, when)
        self._preview = preview

    def preview(self, arguments: dict) -> str | None:
        try:
            return self._preview(arguments)
        except (KeyError, TypeError, OSError) as exc:
            return f"(no preview: {exc})"


def builtin_tools(names=BUILTIN_NAMES, command_timeout: float = 30.0,
                  output_cap: int = 16_000, read_cap: int = 64_000,
                  list_cap: int = 500, workspace=None,
                  secret_files=SECRET_FILES) -> list[Tool]:
    """The built-in tools.

    Args:
        names: an iterable of names from ``BUILTIN_NAMES``.
        command_timeout: seconds a command may run before it is killed.
        output_cap: bytes of a command's output sent to the model.
        read_cap: bytes of a file ``read_file`` returns.
        list_cap: entries ``list_dir`` returns.
        workspace: the folder the tools work in (default: the current folder).
        secret_files: ``(pattern, kind)`` pairs of files that always ask
            (``agentflow.workspace.SECRET_FILES``).

    Returns:
        list[Tool]: in the order of ``names``.

    Raises:
        ValueError: an unknown name.
    """
    space = Workspace(workspace, secret_files)
    root = space.root

    def run_command(command: str) -> str:
        """Run a shell command on this machine and return its exit status and output.

        Args:
            command: the command line, run by the system shell.
        """
        process, lifeline = _start(command, root)
        try:
            output, _ = process.communicate(timeout=command_timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            output, _ = process.communicate()
            return f"timed out after {command_timeout:g} s (killed)\n" + _cap(output, output_cap)
        except BaseException:  # Ctrl-C, SystemExit: the command stops with the run (R16)
            _kill_group(process)
            process.wait()
            raise
        finally:
            if lifeline is not None:
                os.close(lifeline)
        return f"exit status {process.returncode}\n" + _cap(output, output_cap)

    def read_file(path: str) -> str:
        """Read a text file.

        Args:
            path: the file's path.
        """
        with open(os.path.join(root, path), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(read_cap)
        return _cap(data, read_cap, max(size, len(data)), "read cap")

    def list_dir(path: str = ".") -> str:
        """List a folder: one entry a line, folders ending in '/'.

        Args:
            path: the folder's path.
        """
        entries = sorted(os.scandir(os.path.join(root, path)), key=lambda e: e.name)
        lines = [e.name + ("/" if e.is_dir() else "") for e in entries[:list_cap]]
        if len(entries) > list_cap:
            lines.append(f"[... {len(entries) - list_cap} more entries]")
        return "\n".join(lines) or "(empty)"

    def write_file(path: str, content: str) -> str:
        """Write a text file, replacing what it held.

        Args:
            path: the file's path.
            content: the whole new content.
        """
        with open(os.path.join(root, path), "w", encoding="utf-8") as handle:
            handle.write(content)
        return f"wrote {len(content.encode('utf-8'))} bytes to {path}"

    def command_preview(arguments: dict) -> str:
        warnings = space.command_warnings(arguments["command"])
        return "\n".join([f"$ {arguments['command']}"]
                         + [f"warning: it {concern}" for concern in warnings])

    def write_preview(arguments: dict) -> str:
        path, new = arguments["path"], arguments["content"]
        try:
            with open(os.path.join(root, path), encoding="utf-8") as handle:
                old = handle.read()
        except FileNotFoundError:
            old, label = "", "(new file)"
        else:
            label = path
        diff = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                    fromfile=label, tofile=path)
        return "".join(diff) or f"(no change to {path})"

    def made_in(func, subject, kind, idempotent=False):
        made = FunctionTool(func, idempotent=idempotent, subject=subject, subject_kind=kind)
        made.workspace = root
        return made

    made = {
        "run_command": _Previewed(made_in(run_command, "command", "shell"), command_preview),
        "read_file": ApprovalRequiredTool(made_in(read_file, "path", "path", idempotent=True),
                                          when=space.predicate("reads")),
        "list_dir": ApprovalRequiredTool(made_in(list_dir, "path", "path", idempotent=True),
                                         when=space.predicate("lists")),
        "write_file": _Previewed(made_in(write_file, "path", "path"), write_preview,
                                 when=space.predicate("writes", "write_file always asks")),
    }
    unknown = [n for n in names if n not in made]
    if unknown:
        raise ValueError(f"unknown tool(s) {', '.join(unknown)}; the built-in tools are "
                         f"{', '.join(BUILTIN_NAMES)}")
    return [made[n] for n in names]
