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


def secret_values(space) -> list[str]:
    """The values in the workspace's secret files, longest first.

    Args:
        space: the ``Workspace`` (its root and ``secret_files``).

    Returns:
        list[str]: each distinct value of 8 or more characters of a ``NAME=value``
        line in a file below the root named ``.env``, ``.env.*`` or ``*.env`` whose
        path is a secret file; ``.git`` folders are not searched, symlinks not
        followed.
    """
    found = set()
    for top, folders, files in os.walk(space.root):
        folders[:] = [f for f in folders if f != ".git"]
        for name in files:
            path = os.path.join(top, name)
            if not _DOTENV.fullmatch(name) or not space.secret(path) or os.path.islink(path):
                continue
            try:
                with open(path, "rb") as handle:
                    text = handle.read(FILE_CAP).decode("utf-8", "replace")
            except OSError:
                continue
            for line in text.splitlines():
                value = line_value(line)
                if value is not None and len(value) >= 8:
                    found.add(value)
    return sorted(found, key=len, reverse=True)
