"""Which paths a sandbox shows, and how it keeps a file read-only (issue 37, SPEC R27):
the home folder by allowlist, and the files that decide the next run pinned.

Private to ``agentflow.builtin.sandbox``, which turns these into ``bwrap`` flags.

* ``home_folders``: what of the home folder commands see. Everything else there is an
  empty, private folder: a list of secrets to hide is never complete (``gh``'s token
  lay three levels down, below the two that were searched), so nothing is shown that
  is not asked for.
* ``protection``: how a file that must stay read-only (a session store, a policy
  file) is kept so where a command may write (the workspace). A read-only bind of
  the file itself is not enough: a command can rename the folder that holds it and
  put another file at the old path. Every folder between the writable root and the
  file is bound onto itself, which makes it a mount point, and a mount point cannot
  be renamed (``EBUSY``). A file that does not exist yet (a SQLite store's ``-wal``)
  is kept by making the folder that will hold it read-only; when that folder is the
  writable root itself, it cannot be, and the caller asks before every command.
"""

from __future__ import annotations

import os
import re
import sys

from ..commandline.patterns import pattern_source


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it.

    Args:
        path: a resolved path (str).
        folder: a resolved folder (str).

    Returns:
        bool: ``True`` for the folder itself and anything below it.
    """
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def home_folders(home: str, workspace: str, read=(), write=()) -> list[tuple]:
    """The folders of the home folder commands see, besides the workspace.

    Args:
        home: the home folder (str, resolved).
        workspace: the workspace (str, resolved): folders inside it are left to it.
        read: folders the person adds, read-only (iterable of str; ``~`` and paths
            relative to the home folder allowed).
        write: folders the person adds, writable.

    Returns:
        list[tuple]: ``(source, target, writable, depth)``, outermost first: where the
        folder really is, where commands see it (a ``PATH`` entry may be a symlink),
        whether they may write it, and how deep to search it for secret files
        (``None``: all of it; a folder the person adds could be anything).
    """
    found: dict = {}

    def add(path: str, writable: bool, depth, person: bool) -> None:
        if path == "~" or path.startswith("~/"):
            path = home + path[1:]
        target = os.path.abspath(os.path.join(home, path))
        source = os.path.realpath(target)
        if not os.path.isdir(source) or inside(target, workspace):
            return
        if not person and (not inside(target, home) or inside(home, source)):
            return  # not the home folder's, or the whole of it: never by default
        known = found.get(target)
        if known is not None:
            writable = writable or known[2]
            depth = None if None in (depth, known[3]) else max(depth, known[3])
        found[target] = (source, target, writable, depth)

    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            add(entry, False, 1, False)
            if os.path.basename(entry.rstrip("/")) == "shims":  # pyenv, rbenv: the tool
                add(os.path.dirname(entry.rstrip("/")), False, 1, False)
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        add(prefix, False, 1, False)  # the running Python, its environment
    for path in read:
        add(path, False, None, True)
    for path in write:
        add(path, True, None, True)
    shown: list = []
    for item in sorted(found.values(), key=lambda item: len(item[1])):
        if not any(inside(item[1], o[1]) and o[2] == item[2] and (
                o[3] is None or item[3] is not None) for o in shown):
            shown.append(item)  # not already shown, as writable, and searched as deep
    return shown


def protection(path: str, roots) -> tuple[list[str], str | None] | None:
    """How to keep ``path`` read-only where commands may write ``roots``.

    Args:
        path: the file or folder (str), existing or not.
        roots: the writable folders (iterable of resolved str).

    Returns:
        tuple | None: ``(pins, read_only)``: the folders to bind onto themselves,
        outermost first, and the one to bind read-only (the path, or the folder that
        will hold it); ``None`` when no root holds it (it is read-only already, or not
        shown); ``([], None)`` when it cannot be kept (it is a root, or would be
        created right in one).
    """
    real = os.path.realpath(path)
    holders = [r for r in roots if inside(real, r)]
    if not holders:
        return None
    root = max(holders, key=len)
    target = real
    while not os.path.lexists(target) and target != root:
        target = os.path.dirname(target)
    if target == root:
        return [], None
    pins, folder = [], os.path.dirname(target)
    while folder != root and inside(folder, root):
        pins.append(folder)
        folder = os.path.dirname(folder)
    return pins[::-1], target


def secret_regex(space) -> re.Pattern:
    """One regex for all of a workspace's secret-file patterns (a workspace may hold
    100 000 files), matched against a resolved path, ignoring case.

    Args:
        space: the ``Workspace`` (its ``root`` and ``secret_files``).

    Returns:
        re.Pattern: use ``fullmatch``.
    """
    return re.compile("|".join(
        f"(?:{pattern_source(p, 'path', space.root)})"
        for p, _ in space.secret_files) or "(?!)", re.DOTALL | re.IGNORECASE)
