"""The tools of ``agentflow chat``: run a command and write a file (both wait for
approval), read a file and list a folder (both capped in size; they run without asking
inside the workspace and ask outside it or for a secret file, ``workspace.py``).

Every tool works in the workspace: relative paths are opened from it (``~`` is the home
folder, as in policy rules: ``agentflow.commandline.paths``) and commands run in it. Each tool is a class (``RunCommand``, ``ReadFile``, ``ListDir``, ``WriteFile``)
whose method of the tool's name is what runs; ``builtin_tools()`` makes them. The
tools that always ask have ``preview(arguments)``, what the approval prompt shows
besides the arguments: the exact command line (with a warning for each path it names
outside the workspace or secret), or the diff a write would make; and
``preview_summary(arguments)``, the same in one line (the command; a write's path and
diff size) for lists of waiting calls. Each declares its subject for
approval policies (SPEC R19): ``run_command`` its command line (a shell subject), the
file tools their path.

``run_command`` kills everything a command started when it ends, when its timeout
passes, when the run is interrupted (Ctrl-C, ``SystemExit``) and when this process
dies, even by SIGKILL (SPEC R16, ``agentflow.builtin.commands``); it runs in a sandbox when one
is asked for and ``bwrap`` works (``agentflow.builtin.sandbox``), and without the API key's
variables (R26). ``read_file`` and ``list_dir`` are idempotent (R16).
"""

from __future__ import annotations

import difflib
import os

from .. import redact
from ..commandline.workspace import SECRET_FILES, Workspace
from ..tools import ApprovalRequiredTool, FunctionTool, Tool
from . import commands
from .sandbox import Sandbox

BUILTIN_NAMES = ("run_command", "read_file", "list_dir", "write_file")


def secrets_of(space: Workspace, names, sandbox: Sandbox | None = None) -> tuple[dict, list]:
    """The environment commands get, and the secrets no result may carry (SPEC R26,
    R27): the values of the variables commands do not get (the API key's, and those
    ``agentflow.builtin.environment`` leaves out: a command that reads agentflow's own
    environment, ``/proc/PID/environ`` outside the sandbox, or a file holding them must
    not hand them to the model, which could send them anywhere), and the values of the
    workspace's ``.env`` files (``agentflow.builtin.dotenv``: a copy read from git
    history carries them too).

    Args:
        space: the ``Workspace`` whose ``.env`` files count.
        names: the API key's variables (iterable of str), left out whatever the
            sandbox's lists say.
        sandbox: the ``Sandbox`` whose ``env_include`` / ``env_exclude`` apply.

    Returns:
        tuple: ``(environment, secrets)``: a dict of str, and a list of str.
    """
    from .dotenv import secret_values
    from .environment import command_environment, masked_values
    kept, removed = command_environment(
        os.environ, sandbox.env_include if sandbox else (),
        sandbox.env_exclude if sandbox else (), names)
    keys = [os.environ.get(name) for name in names]
    return kept, [k for k in keys if k] + masked_values(removed) + secret_values(space)


def _cap(data: bytes, limit: int, total: int | None = None, what: str = "output cap") -> str:
    """``data`` cut to ``limit`` bytes, saying how many of ``total`` were cut."""
    total = len(data) if total is None else total
    text = data[:limit].decode("utf-8", "replace")
    if total > limit:
        text += f"\n[... {total - limit} more bytes cut: the {what} is {limit} bytes]"
    return text


class _Builtin(ApprovalRequiredTool):
    """A built-in tool: the method ``method`` of the subclass as a ``FunctionTool``
    (its name, docstring and signature are what the model is told), working in a
    ``Workspace``, and waiting for approval when ``when`` says so (SPEC R3, R18)."""

    verb = ""  # the file tools: the word of their concern ("reads"), see observe

    def __init__(self, method, space: Workspace, subject: str, kind: str,
                 idempotent: bool = False, when=None):
        made = FunctionTool(method, idempotent=idempotent, subject=subject, subject_kind=kind)
        made.workspace = space.root
        super().__init__(made, when)
        self.space = space
        self.secret_files = space.secret_files  # what no wildcard rule lifts (R19 addendum)

    def observe(self, arguments: dict) -> None:
        """The gate's hook, called when it judges a call, whatever decides it (SPEC
        R26): a file tool judges its path now, so that opening it later refuses a path
        that leads elsewhere by then (``Workspace.open``).

        Args:
            arguments: the call's arguments (dict).
        """
        if self.verb and isinstance(arguments, dict):
            self.space.concern(arguments.get("path", "."), self.verb)

    def _open(self, path: str, flags: int) -> int:
        return self.space.open(path, flags, self.verb)


class RunCommand(_Builtin):
    """``run_command``: a shell command run in the workspace, always asked for. Its
    subject for policies is the command line (a shell subject, SPEC R19).

    In a sandbox (issue 27) the model may pass ``sandbox: false`` to run a command
    outside it: such a call always asks, and no allow rule lets it run (``allow_refusal``);
    with ``Sandbox.auto_allow`` the sandboxed calls run without asking.

    Args:
        space: the ``Workspace`` the command runs in.
        timeout: seconds (float) the command may run before it is killed, with all it
            started.
        output_cap: bytes (int) of its output sent to the model.
        sandbox: a ``Sandbox``, or a mode (str, ``agentflow.builtin.sandbox.MODES``).
        secret_env: names of environment variables commands do not get (iterable of
            str; SPEC R26).

    Raises:
        ValueError: an unknown sandbox mode.
        SandboxError: the sandbox is required and ``bwrap`` cannot start here.

    Attributes:
        on_output: ``None``, or a callable given each piece of the command's output
            (bytes) as it comes, for a person watching it run (POSIX; the model still
            gets the whole capped output at the end). It runs in the caller's thread.
    """

    def __init__(self, space: Workspace, timeout: float = 30.0, output_cap: int = 16_000,
                 sandbox: Sandbox | str = "off", secret_env=commands.SECRET_ENV):
        self.timeout, self.output_cap = timeout, output_cap
        self.sandbox = sandbox if isinstance(sandbox, Sandbox) else Sandbox(sandbox)
        self.sandboxed, self.secret_env = self.sandbox.active, tuple(secret_env)
        self.on_output = None
        super().__init__(self.run_command, space, "command", "shell",
                         when=self._asks if self.sandboxed else None)
        if not self.sandboxed:  # nothing to leave: the model is not offered the choice
            del self.parameters["properties"]["sandbox"]

    def run_command(self, command: str, sandbox: bool = True) -> str:
        """Run a shell command on this machine and return its exit status and output.

        Args:
            command: the command line, run by the system shell.
            sandbox: false to run it outside the sandbox (it then always asks); only
                for a command that cannot work inside (it must write outside the
                workspace or reach the network).
        """
        inside = self.sandboxed and sandbox is not False
        argv = (self.sandbox.argv(command, self.space.root, self.space.secret_files)
                if inside else ["/bin/sh", "-c", command])
        env, secrets = secrets_of(self.space, self.secret_env, self.sandbox)
        live, show = None, self.on_output
        if show is not None:  # what a person watches live holds no secret either (R27)
            screen = redact.StreamScrubber(secrets)

            def live(piece: bytes) -> None:
                text = screen.feed(piece.decode("utf-8", "surrogateescape"))
                if text:
                    show(text.encode("utf-8", "surrogateescape"))
        try:
            status, output = commands.run(argv, self.space.root, self.timeout, (), live, env)
        finally:
            if show is not None and screen.held:
                show(screen.finish().encode("utf-8", "surrogateescape"))
        head = (f"timed out after {self.timeout:g} s (killed)" if status is None
                else f"exit status {status}")
        return redact.scrub_all(f"{head}\n" + _cap(output, self.output_cap), secrets)

    def _asks(self, arguments: dict) -> bool | str:
        if self.allow_refusal(arguments):
            return self.allow_refusal(arguments)
        if not self.sandbox.auto_allow:
            return "run_command always asks"
        command = arguments.get("command") if isinstance(arguments, dict) else None
        return bool(isinstance(command, str) and self.names_secret(command)) and (
            f"auto_allow does not cover it: it {self.names_secret(command)}")

    def names_secret(self, command: str) -> str | None:
        """Whether a command line names a secret file in any of its words: as a path,
        after a ``:`` (git's ``REV:PATH``, ``git show HEAD~1:.env``, which prints a
        removed ``.env`` from history the sandbox cannot hide) or after a ``=``
        (``--env-file=.env``). Such a call asks even with ``auto_allow`` (SPEC R27).

        Args:
            command: the command line (str).

        Returns:
            str | None: ``names <word>: a secret file (<kind>)``, for the first one.
        """
        from ..commandline import shell
        for part in shell.parse(command).every_command():
            words = part.words or part.text.split()
            for word in words + [target for _, _, target in part.redirects]:
                word = word.lstrip("0123456789<>&|")
                for path in {word, word.partition(":")[2], word.partition("=")[2]} - {""}:
                    try:
                        kind = self.space.secret(self.space.resolve(path))
                    except (ValueError, OSError):
                        continue
                    if kind:
                        return f"names {word}: a secret file ({kind})"
        return None

    def allow_refusal(self, arguments) -> str | None:
        """Why no allow rule may let this call run (SPEC R19, issue 27).

        Args:
            arguments: the call's arguments (dict).

        Returns:
            str | None: ``it asks to run outside the sandbox (sandbox: false)`` for such
            a call in a sandbox; ``the sandbox cannot keep <path> read-only …`` while a
            file that decides the next run lies where sandboxed commands could write
            it (``Sandbox.unprotected``, SPEC R27); else ``None``.
        """
        if self._leaves(arguments):
            return "it asks to run outside the sandbox (sandbox: false)"
        unprotected = self.sandbox.unprotected(self.space.root) if self.sandboxed else []
        if unprotected:
            return (f"the sandbox cannot keep {', '.join(unprotected)} read-only (it lies in "
                    "the workspace's top folder, where commands may create its files): "
                    "every command asks; keep the store outside the workspace")
        return None

    def _leaves(self, arguments) -> bool:
        return bool(self.sandboxed and isinstance(arguments, dict)
                    and arguments.get("sandbox") is False)

    def preview(self, arguments: dict) -> str:
        """What the approval prompt shows besides the arguments (SPEC R25).

        Args:
            arguments: the call's arguments (dict).

        Returns:
            str: ``$ <command>``, then a ``warning: it …`` line for each path it names
            outside the workspace or secret, then whether it runs sandboxed
            (``Sandbox.describe``); ``(no preview: …)`` when the arguments lack the
            command.
        """
        return _previewed(lambda: self._preview(arguments))

    def preview_summary(self, arguments: dict) -> str:
        """One line that lets a person judge the call without the prompt.

        Args:
            arguments: the call's arguments (dict).

        Returns:
            str: the preview's lines (the command line, its warnings, whether it runs
            sandboxed) joined by `` ⏎ ``.
        """
        return " ⏎ ".join(self.preview(arguments).split("\n"))

    def _preview(self, arguments: dict) -> str:
        warnings = self.space.command_warnings(arguments["command"])
        leaves = self._leaves(arguments)
        return "\n".join([f"$ {arguments['command']}"]
                         + [f"warning: it {concern}" for concern in warnings]
                         + [self.sandbox.describe(leaves)])


class ReadFile(_Builtin):
    """``read_file``: a file's first bytes; asks only for a path outside the workspace
    or a secret file (``Workspace.predicate``, SPEC R18). Idempotent (R16).

    Args:
        space: the ``Workspace`` relative paths are opened from.
        read_cap: bytes (int) returned at most.
    """

    verb = "reads"

    def __init__(self, space: Workspace, read_cap: int = 64_000):
        self.read_cap = read_cap
        super().__init__(self.read_file, space, "path", "path", idempotent=True,
                         when=space.predicate(self.verb))

    def read_file(self, path: str) -> str:
        """Read a text file.

        Args:
            path: the file's path.
        """
        with os.fdopen(self._open(path, os.O_RDONLY), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(self.read_cap)
        return redact.scrub_all(_cap(data, self.read_cap, max(size, len(data)), "read cap"),
                                secrets_of(self.space, self.space.secret_env)[1])


class ListDir(_Builtin):
    """``list_dir``: a folder's entries by name; asks only outside the workspace
    (``Workspace.predicate``, SPEC R18). Idempotent (R16).

    Args:
        space: the ``Workspace`` relative paths are opened from.
        list_cap: entries (int) returned at most.
    """

    verb = "lists"

    def __init__(self, space: Workspace, list_cap: int = 500):
        self.list_cap = list_cap
        super().__init__(self.list_dir, space, "path", "path", idempotent=True,
                         when=space.predicate(self.verb))

    def list_dir(self, path: str = ".") -> str:
        """List a folder: one entry a line, folders ending in '/'.

        Args:
            path: the folder's path.
        """
        fd = self._open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:  # an entry's is_dir() may stat it through the folder's descriptor
            entries = sorted(os.scandir(fd), key=lambda e: e.name)
            lines = [e.name + ("/" if e.is_dir() else "") for e in entries[:self.list_cap]]
        finally:
            os.close(fd)
        if len(entries) > self.list_cap:
            lines.append(f"[... {len(entries) - self.list_cap} more entries]")
        # a name can carry a secret too (a backup named after the token it holds)
        return redact.scrub_all("\n".join(lines) or "(empty)",
                                secrets_of(self.space, self.space.secret_env)[1])


class WriteFile(_Builtin):
    """``write_file``: replace a file's content; always asks, saying why when the path
    is outside the workspace or secret (SPEC R18). Its preview is the diff.

    Args:
        space: the ``Workspace`` relative paths are opened from.
    """

    verb = "writes"

    def __init__(self, space: Workspace):
        super().__init__(self.write_file, space, "path", "path",
                         when=space.predicate(self.verb, "write_file always asks"))

    def write_file(self, path: str, content: str) -> str:
        """Write a text file, replacing what it held.

        Args:
            path: the file's path.
            content: the whole new content.
        """
        fd = self._open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        return f"wrote {len(content.encode('utf-8'))} bytes to {path}"

    def preview(self, arguments: dict) -> str:
        """The unified diff the write would make (SPEC R25); nothing is written.

        Args:
            arguments: the call's arguments (dict with ``path`` and ``content``).

        Returns:
            str: the diff (``--- (new file)`` as its old side for a new file),
            ``(no change to <path>)``, or ``(no preview: …)``.
        """
        return _previewed(lambda: self._diff(arguments)[0])

    def preview_summary(self, arguments: dict) -> str:
        """One line that lets a person judge the call without the prompt.

        Args:
            arguments: the call's arguments (dict with ``path`` and ``content``).

        Returns:
            str: ``<path>: +N -M lines`` (``<path> (new file): …`` for a new file), or
            the preview when there is no diff (no change, no preview).
        """
        try:
            diff, new = self._diff(arguments)
        except _NO_PREVIEW as exc:
            return _no_preview(exc)
        if not diff.startswith("---"):
            return diff
        lines = diff.splitlines()[2:]
        added = sum(1 for line in lines if line.startswith("+"))
        removed = sum(1 for line in lines if line.startswith("-"))
        if new is None:  # too large to compare: what it held is replaced, unseen
            return f"{arguments['path']} (too large to compare): +{added} lines, all replaced"
        return f"{arguments['path']}{' (new file)' if new else ''}: +{added} -{removed} lines"

    def _diff(self, arguments: dict) -> tuple[str, bool | None]:
        path, new = arguments["path"], arguments["content"]
        try:
            old, size = preview_prefix(self.space.resolve(path))
        except FileNotFoundError:
            old, label = "", "(new file)"
        else:
            label = path
            if size > PREVIEW_CAP:  # a diff against a prefix would show a false removal
                old, label = "", f"{path} ({size} bytes now, too large to compare: all replaced)"
        diff = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                    fromfile=label, tofile=path)
        new_file = None if label.endswith("all replaced)") else label == "(new file)"
        return "".join(diff) or f"(no change to {path})", new_file


_NO_PREVIEW = (KeyError, TypeError, OSError)  # arguments a preview cannot read
PREVIEW_CAP = 64_000  # bytes of a file a preview reads at most (SPEC R25)


def preview_prefix(path: str) -> tuple[str, int]:
    """At most ``PREVIEW_CAP`` bytes of a regular file, for a preview (SPEC R25): it is
    opened without blocking, and anything but a regular file (a FIFO, a device such as
    ``/dev/zero``, a folder) is not read, so a preview always ends and a rejection is
    always possible.

    Args:
        path: the file's path (str).

    Returns:
        tuple: ``(text, size)``: the prefix decoded as UTF-8 (bytes that are not UTF-8
        replaced, str) and the file's size in bytes (int).

    Raises:
        FileNotFoundError: there is no such file.
        OSError: it cannot be opened, or is not a regular file (``strerror`` says so).
    """
    import stat
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
                 | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file, so it is not read")
        data = os.read(fd, PREVIEW_CAP)
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace"), info.st_size


def _no_preview(exc: Exception) -> str:
    return f"(no preview: {exc})"


def _previewed(make) -> str:
    try:
        return make()
    except _NO_PREVIEW as exc:
        return _no_preview(exc)


def builtin_tools(names=BUILTIN_NAMES, command_timeout: float = 30.0,
                  output_cap: int = 16_000, read_cap: int = 64_000,
                  list_cap: int = 500, workspace=None,
                  secret_files=SECRET_FILES, sandbox: Sandbox | str = "off",
                  secret_env=commands.SECRET_ENV) -> list[Tool]:
    """The built-in tools: ``RunCommand``, ``ReadFile``, ``ListDir``, ``WriteFile``
    sharing one ``Workspace``.

    Args:
        names: an iterable of names from ``BUILTIN_NAMES``.
        command_timeout: seconds a command may run before it is killed.
        output_cap: bytes of a command's output sent to the model.
        read_cap: bytes of a file ``read_file`` returns.
        list_cap: entries ``list_dir`` returns.
        workspace: the folder the tools work in (default: the current folder).
        secret_files: ``(pattern, kind)`` pairs of files that always ask
            (``agentflow.commandline.workspace.SECRET_FILES``), and that a sandbox hides.
        sandbox: how ``run_command`` runs commands: a mode (str:
            ``"workspace-write"``, ``"read-only"``, ``"off"``) or a ``Sandbox``
            (network, required, auto_allow; issue 27). Default ``"off"``.
        secret_env: names of environment variables commands do not get (SPEC R26;
            default ``OPENAI_API_KEY``).

    Returns:
        list[Tool]: in the order of ``names``.

    Raises:
        ValueError: an unknown name or sandbox mode.
        SandboxError: the sandbox is required and ``bwrap`` cannot start here.
    """
    space = Workspace(workspace, secret_files)
    space.secret_env = tuple(secret_env)  # read_file's results are scrubbed of them too
    made = {"run_command": lambda: RunCommand(space, command_timeout, output_cap, sandbox,
                                              secret_env),
            "read_file": lambda: ReadFile(space, read_cap),
            "list_dir": lambda: ListDir(space, list_cap),
            "write_file": lambda: WriteFile(space)}
    names = list(names)
    unknown = [n for n in names if n not in made]
    if unknown:
        raise ValueError(f"unknown tool(s) {', '.join(unknown)}; the built-in tools are "
                         f"{', '.join(BUILTIN_NAMES)}")
    return [made[n]() for n in names]
