"""``run_command`` under bubblewrap (issue 27, SPEC R26, R27): what a rule lets run
cannot leave the workspace, nor change what decides the next run.

Rules about command lines are a tripwire; the sandbox is the wall behind them. It is
`bubblewrap <https://github.com/containers/bubblewrap>`_ (``bwrap``, packaged by
Debian, Ubuntu, Fedora and Arch), not sandbox code of our own: this module only
chooses its flags. The modes:

* ``workspace-write``: the workspace read-write, except every ``.git`` and
  ``.agentflow`` in it (read-only: a hook or a config written there would run outside
  the sandbox later; an empty ``.agentflow`` is made where there is none, so that no
  command can write the policy file the next run reads), and the files the caller
  names as ``protected`` (the session store and its sibling files, ``--policy`` and
  ``--session`` files: read-only wherever they lie, R27); the rest of the file system
  read-only; the home folder empty, but for an allowlist (``home_folders``: the
  folders on ``PATH`` and of the running Python that lie under it, read-only, and the
  person's ``home_read`` / ``home_write``); secret files (``SECRET_FILES``) in what is
  shown hidden, as are files hard-linked to them, agentflow's own configuration folder
  and the caller's ``hidden`` files (keys), whatever the allowlist says; ``/run``
  (where the sockets of docker, the session bus and the key agents live) empty; a
  private ``/tmp``; no network.
* ``read-only``: the same, with the workspace read-only too.
* ``off``: no sandbox.

Every sandbox drops every capability and has a user namespace of its own, in which
no further one can be made (``--cap-drop ALL --unshare-user --disable-userns``): run
by root, ``bwrap`` would otherwise keep root's capabilities, and a command could
remount ``/`` read-write or unmount what hides a secret. A folder that holds a
protected file is bound onto itself, up to the workspace, so that no command can
rename it away and put another file in its place (a mount point cannot be renamed).
It has its own process ids (``--unshare-pid``) and dies with its parent
(``--die-with-parent``), so what the sandboxed shell starts dies with it.
``Sandbox.network`` lets the network in. Whether ``bwrap`` can start here (installed,
and user namespaces allowed) is found out once per process (``unavailable``); where it
cannot, an unrequired sandbox falls back to running commands as before and says why,
and a ``required`` one refuses (``SandboxError``).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass

from . import sandbox_paths as paths
from ..errors import SandboxError

MODES = ("workspace-write", "read-only", "off")
# agentflow itself (this module sits in agentflow/builtin/): read-only when in the workspace
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUARDED = (".git", ".agentflow")  # read-only even in a writable workspace
_PROBE = "agentflow-probe"  # a name inside a folder: is the folder itself secret?
_unavailable: list = []  # [reason or None], once found out
_bwrap: list = []  # [absolute path or None], once found out
_userns_flag: list = []  # [["--disable-userns"] or []], once found out


def unavailable() -> str | None:
    """Why ``bwrap`` cannot run a sandbox here, found out once per process.

    Returns:
        str | None: ``None`` when it works; else a sentence: not installed, or
        installed but unable to start (typically: user namespaces are off), with
        bwrap's own words.
    """
    if not _unavailable:
        _unavailable.append(_probe())
    return _unavailable[0]


def _probe() -> str | None:
    if os.name != "posix" or not bwrap():
        return "bubblewrap (bwrap) is not installed"
    try:
        done = subprocess.run([bwrap(), *_namespaces(False), "--ro-bind", "/", "/",
                               "--dev", "/dev", "--proc", "/proc", "--", "/bin/sh", "-c", ":"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot start here ({exc})"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return (f"bwrap cannot start here ({said[-1] if said else f'exit status {done.returncode}'}"
                "; user namespaces may be off)")
    return None


def fix(reason: str) -> str:
    """What makes the sandbox work here (issue 34).

    Args:
        reason: what ``unavailable()`` said (str).

    Returns:
        str: the package to install, per distribution, when bwrap is missing; else how
        to allow the user namespaces bwrap needs.
    """
    if "not installed" in reason:
        return ("install bubblewrap (Debian, Ubuntu: apt-get install bubblewrap; Fedora: "
                "dnf install bubblewrap; Arch: pacman -S bubblewrap; Alpine: apk add "
                "bubblewrap)")
    return ("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
            "on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0; in a container, "
            "a seccomp profile that allows them)")


def bwrap() -> str | None:
    """The absolute path of ``bwrap``, found on ``PATH`` once per process (a command run
    later by name would be looked up again, and a sandboxed command can put a ``bwrap``
    of its own in a workspace folder on ``PATH``, such as ``.venv/bin``).

    Returns:
        str | None: the resolved path, or ``None`` when it is not installed.
    """
    if not _bwrap:
        found = shutil.which("bwrap")
        _bwrap.append(os.path.realpath(found) if found else None)
    return _bwrap[0]


def _namespaces(network: bool) -> list[str]:
    # --unshare-all only tries a user namespace, and as root skips it: root's
    # capabilities stayed, and `mount -o remount,rw /` worked (issue 37, item 3)
    return ["--unshare-all", "--unshare-user", *_no_more_userns(),
            *(["--share-net"] if network else []), "--cap-drop", "ALL",
            "--die-with-parent", "--new-session"]


def _no_more_userns() -> list[str]:
    """``--disable-userns`` where this ``bwrap`` has it (0.8 and later): a command
    cannot make a user namespace of its own (in which it would hold capabilities,
    though over mounts the kernel then locks)."""
    if not _userns_flag:
        try:
            said = subprocess.run([bwrap() or "bwrap", "--help"], capture_output=True,
                                  timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            said = b""
        _userns_flag.append(["--disable-userns"] if b"--disable-userns" in said else [])
    return _userns_flag[0]


@dataclass(frozen=True)
class Sandbox:
    """How ``run_command`` runs its commands (issue 27).

    Args:
        mode: ``"workspace-write"``, ``"read-only"`` or ``"off"`` (``MODES``).
        network: let the network in (bool; default no network).
        required: refuse to run commands unsandboxed where ``bwrap`` cannot start
            (bool); else they run as without a sandbox, and ``note`` says why.
        auto_allow: sandboxed calls run without asking (bool); a call that asks to
            leave the sandbox (``sandbox: false``), or that runs unsandboxed because
            ``bwrap`` cannot start, still asks. Policy rules decide first (SPEC R19).
        home_read: folders of the home folder commands see, read-only (tuple of str;
            ``~`` is the home folder), besides those on ``PATH`` and the running
            Python's (a policy's ``sandbox.home_read``, SPEC R27).
        home_write: folders of the home folder commands see and may write (tuple of
            str), e.g. ``~/.cache/pip``.
        env_include: name patterns of variables commands get although their names
            look secret (``agentflow.builtin.environment``); the API key's never. They apply
            with mode ``off`` too.
        env_exclude: name patterns of variables commands do not get.
        protected: files and folders read-only to every command, wherever they lie,
            also before they exist (tuple of str: the session store's folder; SPEC
            R27); see ``unprotected``.
        read_only: files read-only to every command once they exist (tuple of str:
            the ``--policy`` and ``--session`` files, which agentflow replaces
            whole, never appends to).
        hidden: files and folders no command can read (tuple of str: the store's key).

    Raises:
        ValueError: an unknown mode.
    """

    mode: str = "workspace-write"
    network: bool = False
    required: bool = False
    auto_allow: bool = False
    home_read: tuple = ()
    home_write: tuple = ()
    env_include: tuple = ()
    env_exclude: tuple = ()
    protected: tuple = ()
    read_only: tuple = ()
    hidden: tuple = ()

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown sandbox mode {self.mode!r}; the modes are "
                             f"{', '.join(MODES)}")

    @property
    def active(self) -> bool:
        """Whether commands really run sandboxed: a mode other than ``off``, and
        ``bwrap`` works here.

        Raises:
            SandboxError: ``required``, and ``bwrap`` cannot start here.
        """
        if self.mode == "off":
            return False
        reason = unavailable()
        if reason and self.required:
            raise SandboxError(f"the sandbox is required, but {reason}: {fix(reason)}, or "
                               "run without requiring the sandbox")
        return reason is None

    @property
    def note(self) -> str | None:
        """Why commands run unsandboxed although a sandbox was asked for (str), for
        the person to read once; ``None`` when they run as asked."""
        if self.mode == "off" or self.active:
            return None
        return (f"sandbox: {unavailable()}, so commands run unsandboxed; {fix(unavailable())}"
                ", or give --sandbox off to run them unsandboxed without this note")

    def describe(self, leaves: bool = False) -> str:
        """How a call runs, for the approval prompt and the pause listing.

        Args:
            leaves: the call asks to run outside the sandbox (``sandbox: false``).

        Returns:
            str: ``sandboxed (<mode>, no network)`` (or ``network``); ``not
            sandboxed`` with mode ``off``; ``not sandboxed (<why bwrap cannot start>)``;
            ``not sandboxed (the call asks to leave the sandbox)``.
        """
        if leaves and self.active:
            return "not sandboxed (the call asks to leave the sandbox)"
        if not self.active:
            return "not sandboxed" + (f" ({unavailable()})" if self.mode != "off" else "")
        return f"sandboxed ({self.mode}, {'network' if self.network else 'no network'})"

    def argv(self, command: str, workspace: str, secret_files, home: str | None = None
             ) -> list[str]:
        """The ``bwrap`` command line that runs ``command`` with ``/bin/sh -c`` in the
        sandbox, the workspace its current folder.

        Args:
            command: the command line (str).
            workspace: the workspace folder (str, resolved).
            secret_files: ``(pattern, kind)`` pairs (``SECRET_FILES``) to hide.
            home: the home folder (str; default ``~``).

        Returns:
            list[str]: the argument vector, ``bwrap``'s absolute path first.

        Raises:
            SandboxError: the ``bwrap`` found on ``PATH`` is inside the workspace.
        """
        from ..commandline.workspace import Workspace
        from ..policy import user_policy_path
        space = Workspace(workspace, secret_files)
        program = bwrap() or "bwrap"  # not installed: the line is still shown, never run
        if bwrap() and os.path.commonpath([program, space.root]) == space.root:
            raise SandboxError(f"the bwrap found on PATH ({program}) is inside the workspace, "
                               "where sandboxed commands can write it, so it cannot sandbox "
                               "them: put the system's bwrap first on PATH")
        home = os.path.realpath(home or os.path.expanduser("~"))
        writable = self.mode == "workspace-write"
        args = [program, *_namespaces(self.network), "--ro-bind", "/", "/",
                "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        # The private /tmp hides everything under it, also the Python environment this
        # agentflow runs in when it lives there (a checkout in /tmp): kept, read-only.
        for prefix in sorted({os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}):
            if prefix.startswith("/tmp/") and os.path.isdir(prefix):
                args += ["--ro-bind", prefix, prefix]
        for run in ("/run", "/var/run"):  # sockets: a read-only mount still connects
            if os.path.isdir(run) and not os.path.islink(run):
                args += ["--tmpfs", run]
        if self.network:  # /etc/resolv.conf may point there
            args += ["--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve"]
        shown = self._home(home, space.root)
        mounts = ["--bind" if writable else "--ro-bind", space.root, space.root]
        home_args = [] if shown is None else ["--tmpfs", home] + [
            flag for source, target, rw, _ in shown
            for flag in ("--bind" if rw else "--ro-bind", source, target)]
        # the home folder's allowlist over the workspace when the home lies in it
        args += home_args + mounts if not paths.inside(home, space.root) else mounts + home_args
        secrets = _Hidden(space)
        secrets.remember(home)
        for _, target, _, depth in shown or ():
            secrets.search(target, depth)
        secrets.hide(os.path.dirname(user_policy_path()))  # the user's trust and keys
        for path in self.hidden:
            secrets.hide(path)
        if writable:
            try:  # else a command could write the policy file the next run reads
                os.mkdir(os.path.join(space.root, ".agentflow"))
            except OSError:
                pass  # there already, or the workspace cannot be written at all
        guarded = secrets.search(space.root, None)
        # What runs outside the sandbox later (this Python, its environment, agentflow
        # itself, the supervisor read from disk for every call) must not be writable
        # from inside it when it lives in the workspace (an in-project .venv, an
        # editable install): read-only, as .git is; and what decides the next run (R27).
        own = {os.path.realpath(p) for p in (
            sys.prefix, sys.base_prefix, _PACKAGE)}
        keep = [p for p in own if space.inside(p) and p != space.root and os.path.isdir(p)]
        pins, read_only = set(), set()
        present = [p for p in self.read_only if os.path.lexists(p)]
        for path in [*guarded, *keep, *self.protected, *present]:
            found = paths.protection(path, self._roots(space.root, shown))
            if found and found[1]:
                pins.update(found[0])
                read_only.add(found[1])
        for path in sorted(pins, key=len):  # a mount point cannot be renamed away
            args += ["--bind", path, path]
        for path in sorted(read_only, key=len):
            args += ["--ro-bind", path, path]
        def visible(path: str) -> bool:  # what the empty home hides needs no more hiding
            return (shown is None or not paths.inside(path, home) or space.inside(path)
                    or any(paths.inside(path, target) for _, target, _, _ in shown))
        args += secrets.args(visible)
        return args + ["--chdir", space.root, "--", "/bin/sh", "-c", command]

    def _home(self, home: str, workspace: str) -> list[tuple] | None:
        """What of the home folder is shown (``sandbox_paths.home_folders``), or
        ``None`` when it is not hidden: ``/``, missing, or the workspace itself."""
        if home in ("/", workspace) or not os.path.isdir(home):
            return None
        return paths.home_folders(home, workspace, self.home_read, self.home_write)

    def _roots(self, workspace: str, shown) -> list[str]:
        """The folders commands may write that outlive them."""
        roots = [workspace] if self.mode == "workspace-write" else []
        return roots + [source for source, _, rw, _ in shown or () if rw]

    def unprotected(self, workspace: str) -> list[str]:
        """The ``protected`` paths this sandbox cannot keep read-only (SPEC R27): a
        path that is a writable folder itself, or that would be made right in one
        (a SQLite store's ``-wal`` file beside a store in the workspace's top folder).
        Commands must ask while there is one (``RunCommand``).

        Args:
            workspace: the workspace folder (str).

        Returns:
            list[str]: those paths, as given; empty when the sandbox is not active.
        """
        if not self.active:
            return []
        root = os.path.realpath(workspace)
        home = os.path.realpath(os.path.expanduser("~"))
        roots = self._roots(root, self._home(home, root))
        return [p for p in self.protected if paths.protection(p, roots) == ([], None)]


class _Hidden:
    """The secret files and folders to hide, found by walking folders."""

    def __init__(self, space):
        self.pattern = paths.secret_regex(space)
        self.space = space
        self.paths: dict[str, bool] = {}  # path → is a folder
        self.inodes: set = set()  # (device, inode) of hidden files: their hard links too
        self.linked: list = []  # (path, device, inode) of other files with hard links

    def hide(self, path: str, hidden: bool = True) -> None:
        real = os.path.realpath(path)
        try:
            info = os.stat(real)
        except OSError:
            return
        folder = os.path.isdir(real)
        if hidden:
            self.paths[real] = folder
        if not folder:
            self.inodes.add((info.st_dev, info.st_ino))
            return
        for top, _, files in os.walk(real):
            for name in files:
                try:
                    found = os.stat(os.path.join(top, name), follow_symlinks=False)
                except OSError:
                    continue
                self.inodes.add((found.st_dev, found.st_ino))

    def secret(self, path: str, folder: bool, link: bool) -> bool:
        match = self.pattern.fullmatch
        return bool(match(path) or (link and match(os.path.realpath(path)))
                    or (folder and match(os.path.join(path, _PROBE))))

    def remember(self, home: str) -> None:
        """Note the secret files of the home folder, without hiding them (it is not
        shown), so that a hard link to one elsewhere is hidden: those two levels down,
        and each ``SECRET_FILES`` path without a wildcard (``.config/gh/hosts.yml``)."""
        self.search(home, 2, hidden=False)
        for pattern, _ in self.space.secret_files:
            rest = pattern[4:].removesuffix("/**") if pattern.startswith("/**/") else ""
            if rest and not any(c in rest for c in "*?[{"):
                self.hide(os.path.join(home, rest), hidden=False)

    def search(self, root: str, depth: int | None, hidden: bool = True) -> list[str]:
        """Hide what is secret under ``root`` (``depth`` levels, ``None``: all; only
        note it, with ``hidden`` false); returns the ``GUARDED`` folders and files
        found, outermost first."""
        guarded, todo = [], [(root, 0)]
        while todo:
            folder, level = todo.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.name in GUARDED and depth is None:
                    guarded.append(entry.path)
                    continue  # read-only; not searched
                if self.secret(entry.path, is_dir, entry.is_symlink()) or stat.S_ISSOCK(info.st_mode):
                    self.hide(entry.path, hidden)
                elif is_dir and (depth is None or level + 1 < depth):
                    todo.append((entry.path, level + 1))
                elif not is_dir and info.st_nlink > 1:
                    self.linked.append((entry.path, info.st_dev, info.st_ino))
        return sorted(guarded, key=len)

    def args(self, visible) -> list[str]:
        """The ``bwrap`` flags that hide what was found, where ``visible(path)``."""
        for path, device, inode in self.linked:  # a hard link to a secret is the secret
            if (device, inode) in self.inodes:
                self.paths[path] = False
        args = []
        for path, folder in sorted(self.paths.items(), key=lambda item: len(item[0])):
            if visible(path):
                args += ["--tmpfs", path] if folder else ["--ro-bind", "/dev/null", path]
        return args


def widened(sandbox: Sandbox, layers) -> Sandbox:
    """``sandbox`` with the ``sandbox`` settings of policy layers (``auto_allow``,
    ``network``, which widen what runs, SPEC R26; the lists ``home_read``,
    ``home_write``, ``env_include``, ``env_exclude``, R27).

    Args:
        sandbox: the ``Sandbox`` the flags asked for.
        layers: ``ApprovalPolicy`` layers as they apply (``None`` items skipped): the
            ``--policy`` file and the user's own are the person's; a project file's
            must have been through ``agentflow.cli.trust.trusted_project``, which keeps
            its settings only once its contents were trusted.

    Returns:
        Sandbox: a copy with ``auto_allow`` and ``network`` set where a layer sets them
        true (a false setting never undoes a flag), and each list the layers' lists
        added to the flags', in layer order.
    """
    import dataclasses
    from ..policy import SANDBOX_LISTS
    wider: dict = {}
    for layer in layers:
        for key, value in (layer.sandbox.items() if layer is not None else ()):
            if key in SANDBOX_LISTS:
                wider[key] = wider.get(key, getattr(sandbox, key)) + tuple(value)
            elif value:
                wider[key] = True
    return dataclasses.replace(sandbox, **wider) if wider else sandbox
