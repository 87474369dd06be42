"""Where the built-in tools may go without asking: the workspace and the secret files
(issue 19).

Whatever ``read_file`` or ``list_dir`` return is sent to the model provider, and a model
steered by text it read (prompt injection) can ask for any path. So a path is judged
as the operating system will open it — absolute, ``..`` collapsed, symlinks followed —
and:

* inside the workspace (the current folder, or ``--workspace DIR``), reads and listings
  run without asking, as before;
* outside it, or through a symlink that leads outside, every built-in asks, and says
  where the path really leads;
* a secret file asks even inside the workspace, and says which kind it is.

The judgement is the tools' approval predicate (SPEC R18): it runs once at the gate,
its answer is recorded with the pending approval and the audit trail, and an approval
policy (R19) can still widen it (``allow: ["read_file(/etc/hosts)"]``) or narrow it
(``deny: ["read_file(**/*.log)"]``).

The judgement is also kept (in this process) and checked again when the tool opens the
path (SPEC R26): a path judged inside the workspace that leads elsewhere by then (a
``git checkout`` earlier in the turn replaced it with a symlink, another process flipped
a link) is refused, not opened. A path is opened the way it was judged: every folder on
the way with ``O_NOFOLLOW``, so no symlink is followed that the check did not see, and
the opened file is checked again (its hard links). A file with more than one hard link
(another name of it may be a secret file) and a path whose resolution cannot be checked
(a link loop, a name longer than the system allows) ask. A secret folder (``.ssh``)
matches itself as well as what it holds.

``SECRET_FILES`` is data: ``(pattern, kind)`` pairs matched against the resolved path,
ignoring case (``.ENV`` is ``.env`` on a case-insensitive disk), in the syntax of path
rules (``/**/`` is any folder, ``*`` any name). Pass your own list to
``builtin_tools(secret_files=...)``, e.g. ``SECRET_FILES + (("/**/*.sqlite",
"databases"),)``.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat

from . import paths, shell
from .patterns import pattern_source

AGENTFLOW_SETTINGS = "agentflow's own settings (user policy, trust records, signing key)"
SECRET_FILES = (
    ("/**/.ssh/**", "SSH keys and settings"),
    ("/**/.gnupg/**", "GnuPG keys"),
    ("/**/.aws/**", "AWS credentials"),
    ("/**/.azure/**", "Azure credentials"),
    ("/**/.config/gcloud/**", "Google Cloud credentials"),
    ("/**/.kube/config", "Kubernetes credentials"),
    ("/**/.docker/config.json", "Docker registry credentials"),
    ("/**/.env", ".env files"),
    ("/**/.env.*", ".env files"),
    ("/**/.netrc", "login credentials (.netrc)"),
    ("/**/_netrc", "login credentials (.netrc)"),
    ("/**/.pgpass", "database passwords (.pgpass)"),
    ("/**/.git-credentials", "git credentials"),
    ("/**/.npmrc", "package registry tokens"),
    ("/**/.pypirc", "package registry tokens"),
    ("/proc/*/environ", "process environments, which hold every secret"),
    ("/proc/*/task/*/environ", "process environments, which hold every secret"),
    ("/**/id_rsa", "private keys"),
    ("/**/id_dsa", "private keys"),
    ("/**/id_ecdsa", "private keys"),
    ("/**/id_ed25519", "private keys"),
    ("/**/*.pem", "private keys and certificates"),
    ("/**/*.key", "private keys"),
    ("/**/*.p12", "private keys and certificates"),
    ("/**/*.pfx", "private keys and certificates"),
    ("/**/*.kdbx", "password databases"),
    ("/**/.password-store/**", "password databases"),
    ("/**/.local/share/keyrings/**", "password databases"),
    ("/**/.config/gh/hosts.yml", "GitHub CLI token"),
    ("/**/.config/hub", "GitHub CLI token"),
    ("/**/.config/glab-cli/config.yml", "GitLab CLI token"),
    ("/**/.vault-token", "Vault token"),
    ("/**/.cargo/credentials", "package registry tokens"),
    ("/**/.cargo/credentials.toml", "package registry tokens"),
    ("/**/.gem/credentials", "package registry tokens"),
    ("/**/.yarnrc.yml", "package registry tokens"),
    ("/**/.m2/settings.xml", "package registry tokens"),
    ("/**/.gradle/gradle.properties", "package registry tokens"),
    ("/**/.terraformrc", "Terraform credentials"),
    ("/**/.terraform.d/credentials.tfrc.json", "Terraform credentials"),
    ("/**/.config/containers/auth.json", "container registry credentials"),
    ("/**/.dockercfg", "container registry credentials"),
    ("/**/.boto", "cloud credentials"),
    ("/**/.s3cfg", "cloud credentials"),
    ("/**/.oci/**", "cloud credentials"),
    ("/**/.databrickscfg", "cloud credentials"),
    ("/**/.config/rclone/rclone.conf", "cloud credentials"),
    ("/**/.*_history", "shell and database histories (passwords typed on command lines)"),
    # what decides what runs unasked: a write here grants, or lifts a deny, next time
    ("/**/.config/agentflow/**", AGENTFLOW_SETTINGS),
    ("/**/.agentflow/**", "agentflow's project policy (its deny rules, what it allows)"),
    ("/**/.git/config", "git settings (core.fsmonitor, aliases … run programs; remote "
     "URLs may hold tokens)"),
    ("/**/.git/hooks/**", "git hooks (programs git commands run)"),
    ("/**/.git", "a git folder or gitdir file (it decides which git settings apply)"),
)


@functools.lru_cache(maxsize=256)
def _secret_matcher(secret_files: tuple, root: str, home: str | None
                    ) -> tuple[re.Pattern, tuple]:
    """The patterns of ``Workspace.secret`` as one regex, each pattern a group, and the
    kind each group stands for: a path is one match at C speed, not some 60 calls (the
    gate judges every path an allowed command names). A regex alternation fullmatches
    with its first alternative that can, so the first pattern in order decides, as a
    loop over them would. ``$HOME`` is in the key: a ``~/`` pattern reads it.

    Args:
        secret_files: ``(pattern, kind)`` pairs (tuple of tuples).
        root: the folder relative patterns start from (str).
        home: ``$HOME`` (str or ``None``), what a ``~/`` pattern stands for.

    Returns:
        tuple[re.Pattern, tuple]: the regex (``fullmatch`` a resolved path, case
        ignored) and the kinds, ``kinds[int(match.lastgroup[1:])]``.
    """
    alternatives, kinds = [], []
    for pattern, kind in secret_files:
        # a secret folder is itself secret: listing .ssh shows its key files' names
        for each in [pattern] + ([pattern[:-3]] if pattern.endswith("/**") else []):
            # named, not numbered: a group inside a pattern's regex cannot shift the kinds
            alternatives.append(f"(?P<k{len(kinds)}>"
                                f"{pattern_source(each, 'path', root)})")
            kinds.append(kind)
    return (re.compile("|".join(alternatives) or "(?!)", re.DOTALL | re.IGNORECASE),
            tuple(kinds))


class Workspace:
    """The folder the built-in tools work in.

    Args:
        root: the workspace folder (str or path-like; ``None``: the current folder),
            resolved once, symlinks followed.
        secret_files: ``(pattern, kind)`` pairs, by default ``SECRET_FILES``.
    """

    def __init__(self, root=None, secret_files=SECRET_FILES):
        self.root = os.path.realpath(os.fspath(root) if root is not None else os.getcwd())
        self.secret_files = tuple(tuple(pair) for pair in secret_files)  # a cache key
        # variables whose values the tools' results never carry (builtin_tools, R26)
        self.secret_env: tuple = ("OPENAI_API_KEY",)
        # path argument -> resolved path, for each path judged no concern at the gate:
        # what the tool may open without asking (``open``)
        self._judged_safe: dict[str, str] = {}

    def resolve(self, path: str) -> str:
        """``path`` as the OS will open it: absolute, ``~`` the home folder, ``..``
        collapsed, symlinks followed (``agentflow.commandline.paths.resolve``, which the policy's
        rules use too, SPEC R19 addendum).

        Args:
            path: a path relative to the workspace, absolute, or under ``~`` (str).

        Returns:
            str: the resolved absolute path (it need not exist).

        Raises:
            ValueError: ``path`` contains a NUL character.
            OSError: the operating system refuses the path (``os.path.realpath``).
        """
        return paths.resolve(path, self.root)

    def inside(self, resolved: str) -> bool:
        """Whether a resolved path is the workspace or lies under it.

        Args:
            resolved: a path as ``resolve`` returns it (str).

        Returns:
            bool: ``True`` for the root itself and anything below it.
        """
        return resolved == self.root or resolved.startswith(self.root.rstrip("/") + "/")

    def secret(self, resolved: str) -> str | None:
        """The kind of secret file ``resolved`` is, matched ignoring case.

        Args:
            resolved: a path as ``resolve`` returns it (str).

        Returns:
            str | None: the ``kind`` of the first ``secret_files`` pattern it matches
            (e.g. ``"SSH keys and settings"``), or ``None``.
        """
        settings = os.path.realpath(os.path.dirname(paths.user_policy_path()))
        if resolved == settings or resolved.startswith(settings.rstrip("/") + "/"):
            return AGENTFLOW_SETTINGS  # $XDG_CONFIG_HOME/agentflow, wherever it is
        matcher, kinds = _secret_matcher(self.secret_files, self.root, os.environ.get("HOME"))
        found = matcher.fullmatch(resolved)
        return None if found is None else kinds[int(found.lastgroup[1:])]

    def concern(self, path, verb: str = "reads") -> str | None:
        """Why a built-in touching ``path`` should ask for approval (SPEC R18).

        Args:
            path: the tool's ``path`` argument (normally str; anything else is no
                concern, the tool refuses it, SPEC R13).
            verb: the word the reason starts with (str, e.g. ``"reads"``, ``"lists"``).

        Returns:
            str | None: ``<verb> <path>: a secret file (<kind>)``, ``<verb> <path>:
            outside the workspace <root>`` (the path shown with ``(really
            <resolved>)`` when it resolves elsewhere), ``<verb> '<path>', which
            cannot be resolved (<error>)``; or ``None`` when it may go ahead.
            Nothing is raised: a path that cannot be resolved is a concern.
        """
        if not isinstance(path, str):
            return None  # the tool refuses it (SPEC R13); nothing is opened
        concern, resolved = self._judge(path, verb)
        if concern is None:
            self._judged_safe[path] = resolved
        else:
            self._judged_safe.pop(path, None)
        return concern

    def _judge(self, path: str, verb: str) -> tuple[str | None, str | None]:
        """``(concern, resolved)`` for ``concern``."""
        try:
            resolved = self.resolve(path)
        except (ValueError, OSError) as exc:
            return f"{verb} {path!r}, which cannot be resolved ({exc})", None
        shown = resolved if resolved == path else f"{path} (really {resolved})"
        kind = self.secret(resolved)
        if kind is not None:
            return f"{verb} {shown}: a secret file ({kind})", resolved
        if not self.inside(resolved):
            return f"{verb} {shown}: outside the workspace {self.root}", resolved
        unchecked = _unresolved_part(resolved)
        if unchecked:
            return (f"{verb} {path!r}, whose resolution cannot be checked ({unchecked})",
                    resolved)
        links = _hard_links(resolved)
        if links > 1:
            return (f"{verb} {shown}: a file with {links} hard links (another name of it "
                    "may be a secret file or lie outside the workspace)", resolved)
        return None, resolved

    def open(self, path: str, flags: int, verb: str, mode: int = 0o666) -> int:
        """Open ``path`` for a built-in tool as it was judged (SPEC R26).

        A path judged no concern at the gate (``concern``, in this process) is judged
        again now, and refused when it leads elsewhere than it did or has become a
        concern; a path the gate asked about (a person approved it, or a policy
        allowed it) is opened where it leads now. Either way every folder on the way
        is opened with ``O_NOFOLLOW`` (the path was resolved just before: a symlink met
        now was put there since) and the opened file is checked again.

        Args:
            path: the tool's ``path`` argument (str), relative to the workspace or
                absolute.
            flags: ``os.open`` flags for the last component (``O_NOFOLLOW`` is added).
            verb: the word for messages (str, e.g. ``"reads"``).
            mode: permission bits (int) for a file ``O_CREAT`` makes.

        Returns:
            int: an open file descriptor, which the caller closes.

        Raises:
            PermissionError: the path changed since it was judged, or a symlink or a
                second hard link appeared on the way; the message says which.
            OSError: the operating system refuses to open it.
        """
        judged = self._judged_safe.get(path)
        concern, resolved = self._judge(path, verb)
        if judged is not None and (concern is not None or resolved != judged):
            raise PermissionError(
                f"{path} changed after it was judged: it was {judged}, inside the "
                f"workspace; now {concern or 'it leads to ' + str(resolved)}. Not opened; "
                "ask again for it")
        # O_NONBLOCK: a FIFO (or a device) must not hang the run in open(); it is
        # refused below, and the flag is cleared for the file that is kept
        try:
            fd = _open_no_follow(resolved, flags | os.O_NONBLOCK, mode)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # a FIFO without a reader, opened to write
                raise
            raise PermissionError(f"{path} is not a regular file (a FIFO, a device or a "
                                  "socket is never opened by a built-in tool)") from None
        try:
            info = os.fstat(fd)
            wanted = stat.S_ISDIR if flags & os.O_DIRECTORY else stat.S_ISREG
            if not wanted(info.st_mode):
                kind = "folder" if flags & os.O_DIRECTORY else "regular file"
                raise PermissionError(f"{path} is not a {kind} (a FIFO, a device or a "
                                      "socket is never opened by a built-in tool)")
            if judged is not None and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                raise PermissionError(f"{path} has {info.st_nlink} hard links now; it was "
                                      "judged with one. Not opened; ask again for it")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def predicate(self, verb: str, otherwise: bool | str = False):
        """The approval predicate of a tool whose ``path`` argument it judges (SPEC R18).

        Args:
            verb: passed to ``concern`` (str, e.g. ``"reads"``).
            otherwise: the answer when the path is no concern (bool, or a str reason
                to ask anyway).

        Returns:
            Callable[[dict], bool | str]: given the call's arguments, the concern
            about ``arguments["path"]`` (default ``"."``), else ``otherwise``.
        """
        return lambda arguments: self.concern(arguments.get("path", "."), verb) or otherwise

    def command_warnings(self, command: str) -> list[str]:
        """Warnings about the paths a shell command names.

        Args:
            command: a shell command line (str), read by ``agentflow.commandline.shell``.

        Returns:
            list[str]: one ``names <path>: …`` concern (see ``concern``) for each
            distinct word or redirection target that looks like a path (contains
            ``/`` or starts with ``.`` or ``~``) and lies outside the workspace or is
            a secret file, in order of appearance; empty when none.
        """
        warnings = []
        for command_part in shell.parse(command).every_command():
            words = command_part.words or command_part.text.split()
            for word in words + [target for _, _, target in command_part.redirects]:
                word = word.lstrip("0123456789<>&|")
                if not word or not ("/" in word or word.startswith((".", "~"))):
                    continue
                concern = self.concern(word, "names")
                if concern and concern not in warnings:
                    warnings.append(concern)
        return warnings


PATH_MAX = os.pathconf("/", "PC_PATH_MAX") if hasattr(os, "pathconf") else 4096


def _unresolved_part(resolved: str) -> str | None:
    """Why ``resolved`` (from ``os.path.realpath``) may not be where the path leads:
    ``realpath`` gives up silently on a link loop or a name past ``PATH_MAX`` and
    returns the rest unresolved. ``None`` when no folder on the way is a symlink and
    the name fits."""
    if len(os.fsencode(resolved)) >= PATH_MAX:
        return f"longer than PATH_MAX, {PATH_MAX} bytes"
    parts = resolved.split("/")
    for i in range(2, len(parts) + 1):
        try:
            if stat.S_ISLNK(os.lstat("/".join(parts[:i]) or "/").st_mode):
                return f"{'/'.join(parts[:i])} is a symlink left unresolved"
        except FileNotFoundError:
            return None  # nothing further exists: nothing there to follow
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _hard_links(resolved: str) -> int:
    """The hard-link count of a regular file (1 for anything else, or a missing file)."""
    try:
        info = os.lstat(resolved)
    except OSError:
        return 1
    return info.st_nlink if stat.S_ISREG(info.st_mode) else 1


def _open_no_follow(resolved: str, flags: int, mode: int) -> int:
    """Open the absolute, resolved path one component at a time, each folder with
    ``O_NOFOLLOW | O_DIRECTORY`` and the last with ``O_NOFOLLOW``: a symlink anywhere
    on the way fails (``ELOOP`` / ``ENOTDIR``) instead of being followed."""
    if os.name != "posix":
        return os.open(resolved, flags, mode)
    parts = [p for p in resolved.split("/") if p]
    nofollow = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | nofollow)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise PermissionError(f"{resolved}: {part} became a symlink after the "
                                          "path was judged; not followed") from None
                raise
            os.close(fd)
            fd = child
        if not parts:
            return os.dup(fd)
        try:
            return os.open(parts[-1], flags | nofollow, mode, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PermissionError(f"{resolved} became a symlink after the path was "
                                      "judged; not followed") from None
            raise
    finally:
        os.close(fd)
