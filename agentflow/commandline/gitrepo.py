"""The workspace's git repository as git would find it, read without running git (SPEC
R19 addendum: a repository that is not the workspace's asks; R27: a work tree's patch
prints the index's copy of a secret file). Running git to ask would run what its
settings name (``core.fsmonitor``), so the folder and the index are read here.
"""

from __future__ import annotations

import os
import re
import struct


def git_folder(root: str) -> str | None:
    """The workspace's own git folder (SPEC R19 addendum: a repository that is not the
    workspace's asks).

    Args:
        root: the workspace (str, absolute, resolved).

    Returns:
        str | None: ``root/.git``, or the folder a ``.git`` file names outside the
        workspace (a worktree's, a submodule's); ``None`` for none, or for a ``.git``
        file naming a folder inside it (a repository shipped as plain files, whose
        settings are the repository's).
    """
    dot = os.path.join(root, ".git")
    if os.path.islink(dot):
        return None
    if os.path.isdir(dot):
        return dot
    try:
        with open(dot, encoding="utf-8") as handle:
            found = re.fullmatch(r"gitdir: (.+?)\s*", handle.read(4096))
    except (OSError, UnicodeDecodeError):
        return None
    if found is None:
        return None
    target = os.path.realpath(os.path.join(root, found.group(1)))
    return None if target.startswith(root.rstrip("/") + "/") else target


def around(root: str) -> bool:
    """Whether git, started in ``root`` (which has no ``.git``), would find the
    repository of a folder above it (SPEC R19 addendum): its settings and its files
    outside the workspace.

    Args:
        root: the workspace (str, absolute, resolved).

    Returns:
        bool: a folder above holds ``.git`` or is a bare repository.
    """
    folder = os.path.dirname(root.rstrip("/")) or "/"
    while True:
        if os.path.lexists(os.path.join(folder, ".git")) or os.path.isfile(
                os.path.join(folder, "HEAD")) and os.path.isdir(os.path.join(folder,
                                                                            "objects")):
            return True
        if folder == "/":
            return False
        folder = os.path.dirname(folder)


def tracked(folder: str) -> list | None:
    """The paths git's index holds, read as git 2.x writes it (versions 2–4, SHA-1 or
    SHA-256 ids; SPEC R27: a work tree's patch prints the index's copy).

    Args:
        folder: the git folder (str), holding ``index`` and ``config``.

    Returns:
        list | None: the paths (str, relative to the work tree); ``[]`` without an
        index, ``None`` when it cannot be read.
    """
    try:
        with open(os.path.join(folder, "index"), "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    except OSError:
        return None
    try:
        with open(os.path.join(folder, "config"), encoding="utf-8", errors="replace") as h:
            hashlen = 32 if re.search(r"objectformat\s*=\s*sha256", h.read(), re.I) else 20
    except OSError:
        hashlen = 20
    try:
        version, count = struct.unpack(">II", data[4:12])
        if data[:4] != b"DIRC" or version not in (2, 3, 4):
            return None
        names, previous, position = [], b"", 12
        for _ in range(count):
            start = position
            position += 40 + hashlen
            flags = struct.unpack(">H", data[position:position + 2])[0]
            position += 4 if version >= 3 and flags & 0x4000 else 2
            if version == 4:  # the name: how much of the previous one to drop, the rest
                byte = data[position]
                drop, position = byte & 127, position + 1
                while byte & 128:
                    byte = data[position]
                    drop, position = ((drop + 1) << 7) | (byte & 127), position + 1
                end = data.index(b"\0", position)
                name = previous[:len(previous) - drop] + data[position:end]
                position = end + 1
            else:
                end = data.index(b"\0", position)
                name = data[position:end]
                position = start + (end - start + 8) // 8 * 8
            names.append(name.decode("utf-8", "surrogateescape"))
            previous = name
        while position + 8 <= len(data) - hashlen:  # the extensions after the entries
            signature = data[position:position + 4]
            if signature == b"link":  # a split index: most entries are in another file
                return None
            position += 8 + struct.unpack(">I", data[position + 4:position + 8])[0]
        return names
    except (struct.error, IndexError, ValueError):
        return None
