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

``SECRET_FILES`` is data: ``(pattern, kind)`` pairs matched against the resolved path,
ignoring case (``.ENV`` is ``.env`` on a case-insensitive disk), in the syntax of path
rules (``/**/`` is any folder, ``*`` any name). Pass your own list to
``builtin_tools(secret_files=...)``, e.g. ``SECRET_FILES + (("/**/*.sqlite",
"databases"),)``.
"""

from __future__ import annotations

import os
import shlex

from . import shell
from .policy import path_matches

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
)


class Workspace:
    """The folder the built-in tools work in.

    Args:
        root: the workspace folder (str or path-like; ``None``: the current folder),
            resolved once, symlinks followed.
        secret_files: ``(pattern, kind)`` pairs, by default ``SECRET_FILES``.
    """

    def __init__(self, root=None, secret_files=SECRET_FILES):
        self.root = os.path.realpath(os.fspath(root) if root is not None else os.getcwd())
        self.secret_files = tuple(secret_files)

    def resolve(self, path: str) -> str:
        """``path`` as the OS will open it: absolute, ``..`` collapsed, symlinks followed.

        Args:
            path: a path relative to the workspace, or absolute (str).

        Returns:
            str: the resolved absolute path (it need not exist).

        Raises:
            ValueError: ``path`` contains a NUL character.
            OSError: the operating system refuses the path (``os.path.realpath``).
        """
        return os.path.realpath(os.path.join(self.root, path))

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
        for pattern, kind in self.secret_files:
            if path_matches(pattern, resolved, self.root, ignore_case=True):
                return kind
        return None

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
        try:
            resolved = self.resolve(path)
        except (ValueError, OSError) as exc:
            return f"{verb} {path!r}, which cannot be resolved ({exc})"
        shown = resolved if resolved == path else f"{path} (really {resolved})"
        kind = self.secret(resolved)
        if kind is not None:
            return f"{verb} {shown}: a secret file ({kind})"
        if not self.inside(resolved):
            return f"{verb} {shown}: outside the workspace {self.root}"
        return None

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
            command: a shell command line (str), split as ``agentflow.shell`` and
                ``shlex`` (POSIX rules) split it; a part that cannot be split is
                skipped.

        Returns:
            list[str]: one ``names <path>: …`` concern (see ``concern``) for each
            distinct word that looks like a path (contains ``/`` or starts with
            ``.`` or ``~``, ``~`` expanded) and lies outside the workspace or is a
            secret file, in order of appearance; empty when none.
        """
        warnings = []
        for command_part in shell.parse(command).every_command():
            try:
                words = shlex.split(command_part.text)
            except ValueError:
                continue
            for word in words:
                word = word.lstrip("0123456789<>&|")
                if not word or not ("/" in word or word.startswith((".", "~"))):
                    continue
                concern = self.concern(os.path.expanduser(word), "names")
                if concern and concern not in warnings:
                    warnings.append(concern)
        return warnings
