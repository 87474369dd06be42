"""The values of the workspace's secret files, which no result sent to the model may
carry (issue 37, item 8; SPEC R27).

Hiding ``.env`` in the sandbox and asking before a tool reads it keeps the file from
the model, but not its values: a copy read from elsewhere carries them too (``git
show HEAD~1:.env`` reads the object git keeps, a backup, a log that printed them).
So the values of the ``NAME=value`` lines of every ``.env``-style file in the
workspace that is a secret file (``SECRET_FILES``: ``.env``, ``.env.local`` …) are
masked in the built-in tools' results, wherever they came from.

Values shorter than ``redact.MIN_SECRET`` (8) characters are left alone, as for the
API key: ``DEBUG=true`` is no secret, and masking ``true`` would garble every result.
"""

from __future__ import annotations

import os
import re
import stat
import time

FILE_CAP = 64_000  # bytes of a secret file read at most
_DOTENV = re.compile(r"\.env(\..*)?|.*\.env", re.IGNORECASE)  # the files of NAME=value lines
# NAME=value, NAME: value (YAML-ish .env), with an optional `export `
_LINE = re.compile(r"\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_.-]*\s*[=:]\s*(.*?)\s*")


def line_value(line: str) -> str | None:
    """The value of one ``NAME=value`` line, its quotes removed (and, unquoted, a
    trailing ``# comment``); ``None`` for a line of another kind.

    Args:
        line: one line (str), without its newline.

    Returns:
        str | None: the value.
    """
    found = _LINE.fullmatch(line)
    if found is None or line.lstrip().startswith("#"):
        return None
    value = found.group(1)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value.split(" #", 1)[0].strip()


def file_values(text: str) -> list[str]:
    """The values of a ``.env`` file's ``NAME=value`` lines, a quoted value running on
    over the next lines until its closing quote (python-dotenv and Node's dotenv read
    ``KEY="-----BEGIN …`` so: a private key's body lines are its value too).

    Args:
        text: the file's text (str).

    Returns:
        list[str]: the values in order, a multi-line one with its newlines.
    """
    values, lines, index = [], text.splitlines(), 0
    while index < len(lines):
        value = line_value(lines[index])
        index += 1
        if value is not None and value[:1] in "'\"" and not (
                len(value) >= 2 and value[-1] == value[0]):
            quote, parts = value[0], [value[1:]]
            while index < len(lines):
                line = lines[index].rstrip()
                index += 1
                if line.endswith(quote):
                    parts.append(line[:-1])
                    break
                parts.append(line)
            value = "\n".join(parts)
        if value is not None:
            values.append(value)
    return values


def secret_values(space) -> list[str]:
    """The values in the workspace's secret files, longest first: those there now and
    those read before in this process (a renamed file still holds them).

    Args:
        space: the ``Workspace`` (its root and ``secret_files``).

    Returns:
        list[str]: each distinct value of 8 or more characters of a ``NAME=value``
        line (a quoted one over the lines to its closing quote) in a file below the root named ``.env``, ``.env.*`` or ``*.env`` whose
        path is a secret file; ``.git`` folders are not searched, symlinks not
        followed.
    """
    scan = _SCANS.get(space.root)
    if scan is None:
        scan = _SCANS[space.root] = Scan(space.root)
    for path, values in scan.refresh():
        if space.secret(path):
            scan.seen.update(values)
    # A value once read stays masked: a .env renamed to a name no secret file has
    # (`mv .env notes.txt`) still holds it, and the next result must not carry it.
    return sorted(scan.seen, key=len, reverse=True)


class Scan:
    """The ``.env``-style files below a folder and their values, read again only where
    something changed: every tool call asks (a ``.env`` may appear at any time), and
    walking a workspace with a ``node_modules`` of 50,000 files took 0.45 s a call.

    A folder whose modification time is unchanged has the same entries (creating,
    removing or renaming an entry sets it), so only its ``stat`` is paid; a file whose
    time, size and inode are unchanged is not read again. As git does for its index, a
    time within ``RACY`` seconds of the scan is not trusted (a change in the same tick
    of a coarse clock would not move it), so such a folder or file is read again next
    time.

    Args:
        root: the folder (str).
    """

    RACY = 2.0  # seconds: the coarsest file-system clock in common use (FAT)

    def __init__(self, root: str):
        self.root = root
        self.folders: dict = {}  # path -> (mtime_ns, subfolders, .env-like files)
        self.files: dict = {}    # path -> ((mtime_ns, size, inode), values)
        self.seen: set = set()   # every value read from a secret file so far

    def refresh(self) -> list[tuple[str, list[str]]]:
        """Bring the scan up to date and give each ``.env``-like file with its values.

        Returns:
            list: ``(path, values)`` pairs: the file's path (str) and its values of 8
            or more characters (list of str).
        """
        now = time.time_ns()
        folders, files, found = {}, {}, []
        pending = [self.root]
        while pending:
            folder = pending.pop()
            try:
                mark = os.stat(folder).st_mtime_ns  # the root may be a link; no other is
            except OSError:
                continue
            known = self.folders.get(folder)
            if known is None or known[0] != mark:
                known = (mark, *_entries(folder))
            if now - mark < self.RACY * 1e9:
                known = (None, *known[1:])  # too recent to trust: listed again next time
            folders[folder] = known
            pending.extend(known[1])
            for path in known[2]:
                values = self._values(path, now)
                if values is not None:
                    files[path] = values
                    found.append((path, values[1]))
        self.folders, self.files = folders, files
        return found

    def _values(self, path: str, now: int):
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
            return None  # a link is not followed: it could point anywhere
        mark = (info.st_mtime_ns, info.st_size, info.st_ino)
        known = self.files.get(path)
        if known is not None and known[0] == mark:
            return known
        try:
            with open(path, "rb") as handle:
                text = handle.read(FILE_CAP).decode("utf-8", "replace")
        except OSError:
            return None
        values = [v for v in file_values(text) if len(v) >= 8]
        if now - info.st_mtime_ns < self.RACY * 1e9:
            mark = None  # written just now: read again next time
        return mark, values


def _entries(folder: str) -> tuple[list[str], list[str]]:
    """A folder's subfolders (``.git`` left out, links not followed) and its files
    named like ``.env`` files."""
    subfolders, files = [], []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != ".git":
                            subfolders.append(entry.path)
                    elif _DOTENV.fullmatch(entry.name):
                        files.append(entry.path)
                except OSError:
                    continue
    except OSError:
        pass
    return subfolders, files


_SCANS: dict = {}  # workspace root -> Scan
