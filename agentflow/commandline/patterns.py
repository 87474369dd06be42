"""The wildcards of rule patterns as regular expressions (SPEC R19): one reading for the
policy's rules, the workspace's secret files and the sandbox's hidden files.

``*`` is any characters (in a path: but ``/``), ``**`` any characters, ``/`` too, and
``**/`` any folders or none; a pattern ending in `` *`` or ``:*`` is a prefix at a word
boundary (a path's: ``/``); ``\\*`` is a literal star, ``\\\\`` a backslash. A relative
path pattern is relative to a root; ``~/`` is the home folder.
"""

from __future__ import annotations

import functools
import posixpath
import re

from . import paths

STAR, BACKSLASH = "\x00", "\x01"  # ``\*`` and ``\\`` while a pattern is read


def split_prefix(pattern: str) -> tuple[str, bool]:
    """A pattern and whether it is a prefix.

    Args:
        pattern: the pattern (str), already ``protect``-ed.

    Returns:
        tuple[str, bool]: ``(body, prefix)``; a trailing `` *`` or ``:*`` makes a
        word-boundary prefix and is cut off.
    """
    for suffix in (" *", ":*"):
        if pattern.endswith(suffix) and len(pattern) > len(suffix):
            return pattern[:-len(suffix)], True
    return pattern, False


def protect(pattern: str) -> str:
    """A pattern with its escapes (``\\*``, ``\\\\``) hidden from the wildcard reader.

    Args:
        pattern: the pattern as written (str).

    Returns:
        str: ``\\\\`` as ``BACKSLASH`` and ``\\*`` as ``STAR``.
    """
    return pattern.replace("\\\\", BACKSLASH).replace("\\*", STAR)


def glob_regex(body: str, star: str) -> str:
    """The regex of a wildcard pattern.

    Args:
        body: the pattern (str), ``protect``-ed, without its prefix suffix.
        star: the regex of one ``*`` (``.*`` for text and commands, ``[^/]*`` for paths).

    Returns:
        str: the regex source.
    """
    out, i = [], 0
    while i < len(body):
        if body.startswith("**/", i) and star != ".*":
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append(star)
            i += 1
        else:
            out.append(re.escape({STAR: "*", BACKSLASH: "\\"}.get(body[i], body[i])))
            i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def pattern_regex(pattern: str, kind: str, root: str, ignore_case: bool = False) -> re.Pattern:
    """A path or text pattern as a regex over the whole value (SPEC R19).

    Args:
        pattern: the pattern as written (str).
        kind: ``"path"`` or ``"text"``.
        root: the folder a relative path pattern starts from (str).
        ignore_case: for names that mean the same file on a case-insensitive disk.

    Returns:
        re.Pattern: to ``fullmatch`` the value (a resolved absolute path, or the text).
    """
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    body, prefix = split_prefix(protect(pattern))
    if kind == "text":
        return re.compile(glob_regex(body, ".*") + ("(?: .*)?" if prefix else ""), flags)
    body = paths.expand_home(body)
    absolute = body.startswith("/")
    body = posixpath.normpath(body) if body not in ("", ".") else ""
    head = "" if absolute else re.escape(root.rstrip("/") + "/") if body else re.escape(root)
    return re.compile(head + glob_regex(body, "[^/]*") + ("(?:/.*)?" if prefix else ""), flags)


def path_matches(pattern: str, path: str, root: str = "/", ignore_case: bool = False) -> bool:
    """Whether a path matches a path pattern of a rule (SPEC R19).

    Args:
        pattern: the rule's pattern (str); relative patterns are relative to ``root``;
            ``*``, ``**``, ``~/`` as in rules.
        path: the absolute, resolved path (str).
        root: the folder relative patterns start from (str).
        ignore_case: for names that mean the same file on a case-insensitive disk.

    Returns:
        bool: whether it matches.
    """
    return pattern_regex(pattern, "path", root, ignore_case).fullmatch(path) is not None
