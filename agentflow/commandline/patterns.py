"""The wildcards of rule patterns as regular expressions (SPEC R19): one reading for the
policy's rules, the workspace's secret files and the sandbox's hidden files.

``*`` is any characters (in a path: but ``/``), ``**`` any characters, ``/`` too, and
``**/`` any folders or none; a pattern ending in `` *`` or ``:*`` is a prefix at a word
boundary (a path's: ``/``); ``\\*`` is a literal star, ``\\\\`` a backslash. A relative
path pattern is relative to a root; ``~/`` is the home folder.

Patterns match in time linear in the text (SPEC R19 addendum): a policy file of the
repository may hold a hostile deny pattern (``*a*a*a*a*a*a*c``) that a backtracking
regex takes seconds on, so rules are matched by ``Glob``, which never backtracks.
``pattern_regex`` (C speed) stays for the workspace's own secret-file patterns, which
come from code, never from a policy file (``path_matches``, ``builtin/sandbox_paths.py``).
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


_WILDCARDS = re.compile(r"(\*\*/|\*\*|\*)")


def glob_regex(body: str, star: str) -> str:
    """The regex of a wildcard pattern.

    Args:
        body: the pattern (str), ``protect``-ed, without its prefix suffix.
        star: the regex of one ``*`` (``.*`` for text and commands, ``[^/]*`` for paths).

    Returns:
        str: the regex source.
    """
    out = []
    # split at the wildcards (the leftmost first, "**/" before "**" before "*"), so the
    # text between them is escaped as one run rather than character by character
    for index, piece in enumerate(_WILDCARDS.split(body)):
        if index % 2 == 0:
            out.append(re.escape(piece.replace(STAR, "*").replace(BACKSLASH, "\\")))
        elif piece == "**/" and star != ".*":
            out.append("(?:.*/)?")
        elif piece.startswith("**"):
            out.append(".*" + re.escape(piece[2:]))
        else:
            out.append(star)
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
        re.Pattern: to ``fullmatch`` the value (a resolved absolute path, or the text),
        compiled with ``re.DOTALL`` (and ``re.IGNORECASE`` with ``ignore_case``).
    """
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    return re.compile(pattern_source(pattern, kind, root), flags)


def pattern_source(pattern: str, kind: str, root: str) -> str:
    """The source of ``pattern_regex``, for a caller that joins many patterns into one
    regex and compiles that once (compiling each first costs as much again).

    Args:
        pattern: the pattern as written (str).
        kind: ``"path"`` or ``"text"``.
        root: the folder a relative path pattern starts from (str).

    Returns:
        str: the regex source, meant for ``re.DOTALL``.
    """
    body, prefix = split_prefix(protect(pattern))
    if kind == "text":
        return glob_regex(body, ".*") + ("(?: .*)?" if prefix else "")
    head, body = _path_head(body, root)
    return re.escape(head) + glob_regex(body, "[^/]*") + ("(?:/.*)?" if prefix else "")


def _path_head(body: str, root: str) -> tuple[str, str]:
    """A path pattern's literal start (the root, for a relative one) and its body."""
    body = paths.expand_home(body)
    absolute = body.startswith("/")
    body = posixpath.normpath(body) if body not in ("", ".") else ""
    return ("" if absolute else root.rstrip("/") + "/" if body else root), body


_ANY, _NOSLASH, _DIRS = "any", "noslash", "dirs"  # .*, [^/]*, (?:.*/)?


class Glob:
    """A rule pattern, matched without backtracking (SPEC R19 addendum: time linear in
    the text, whatever the pattern).

    A pattern whose stars all mean "any characters" (a command or a text) is matched
    by finding its literal pieces left to right (``str.find``); one with path stars
    (``[^/]*``, ``**/``) by a set-of-states automaton over the text.

    Args:
        tokens: ``(kind, value)`` pairs: ``("lit", text)``, ``("star", "any" |
            "noslash")`` or ``("star", "dirs")``.
        prefix: the separator (``" "`` or ``"/"``) after which anything may follow (a
            pattern ending in `` *`` or ``:*``), or ``""``.
        ignore_case: compare without case.
    """

    def __init__(self, tokens: list, prefix: str = "", ignore_case: bool = False):
        self.prefix, self.ignore_case = prefix, ignore_case
        fold = str.lower if ignore_case else (lambda t: t)
        self.tokens = [(k, fold(v) if k == "lit" else v) for k, v in tokens]
        self.simple = all(v == _ANY for k, v in self.tokens if k == "star")
        self.pieces = [""]
        for kind, value in self.tokens:
            if kind == "lit":
                self.pieces[-1] += value
            else:
                self.pieces.append("")
        self.wild = len(self.pieces) > 1

    def fullmatch(self, text: str):
        """Whether the whole text matches: ``True``, or ``None`` (as ``re``'s).

        Args:
            text: the text (str).

        Returns:
            True | None.
        """
        if self.ignore_case:
            text = text.lower()
        found = self._pieces(text) if self.simple else self._states(text)
        return True if found else None

    def _pieces(self, text: str) -> bool:
        pieces, sep = self.pieces, self.prefix
        head = pieces[0]
        if not text.startswith(head):
            return False
        if len(pieces) == 1:
            return text == head or bool(sep) and text.startswith(head + sep)
        at = len(head)
        for piece in pieces[1:-1]:  # leftmost is best: it leaves the most to the rest
            at = text.find(piece, at)
            if at < 0:
                return False
            at += len(piece)
        last = pieces[-1]
        if not last or text.endswith(last) and len(text) - len(last) >= at:
            return True
        if not sep:
            return False
        start = text.find(last + sep, at)  # the body, then the separator and anything
        return start >= 0

    def _states(self, text: str) -> bool:
        # states: ("t", i) before token i (a literal: before its j-th character as
        # ("t", i, j)); ("in", i) inside the folders of a ``**/`` token; "end", "tail"
        tokens, count = self.tokens, len(self.tokens)

        def close(states):
            out, todo = set(), list(states)
            while todo:
                state = todo.pop()
                if state in out:
                    continue
                out.add(state)
                if state[0] == "t" and state[1] < count:
                    kind, value = tokens[state[1]]
                    if kind == "lit" and state[2] >= len(value):
                        todo.append(("t", state[1] + 1, 0))
                    elif kind == "star":
                        todo.append(("t", state[1] + 1, 0))
            return out

        states = close({("t", 0, 0)})
        for char in text:
            after = set()
            for state in states:
                if state == ("tail",):
                    after.add(state)
                    continue
                if state[0] == "in":
                    after.add(state)
                    if char == "/":
                        after.add(("t", state[1] + 1, 0))
                    continue
                index, offset = state[1], state[2]
                if index >= count:
                    if self.prefix and char == self.prefix:
                        after.add(("tail",))
                    continue
                kind, value = tokens[index]
                if kind == "lit":
                    if offset < len(value) and value[offset] == char:
                        after.add(("t", index, offset + 1))
                elif value == _ANY or (value == _NOSLASH and char != "/"):
                    after.add(state)
                elif value == _DIRS:
                    after.add(("in", index))
                    if char == "/":
                        after.add(("t", index + 1, 0))
            states = close(after)
            if not states:
                return False
        return ("tail",) in states or ("t", count, 0) in states


    def meets(self, other: list, budget: int = 200_000) -> bool:
        """Whether some text matches both this pattern (its stars "any") and the
        pattern ``other``: a word of a line that may expand to any words is such a
        star, and a deny rule that some expansion meets is met (SPEC R19 addendum).

        Args:
            other: ``(kind, value)`` tokens, each a literal or ``("star", "any")``.
            budget: the pairs of positions looked at before the answer is ``True``
                (it never fails open).

        Returns:
            bool: whether the two may match one text.
        """
        mine = [t for k, v in self.tokens for t in (
            [("lit", c) for c in v] if k == "lit" else [(k, v)])]
        theirs = [t for k, v in other for t in (
            [("lit", c) for c in v] if k == "lit" else [(k, v)])]
        if self.prefix:  # the body alone, or the body, the separator and anything
            return _meet(mine, theirs, budget) or _meet(
                mine + [("lit", self.prefix), ("star", _ANY)], theirs, budget)
        return _meet(mine, theirs, budget)


def _meet(a: list, b: list, budget: int) -> bool:
    """Whether two token lists of literal characters and any-stars share a text: a walk
    over pairs of positions, each seen once."""
    head = 0
    while head < min(len(a), len(b)) and a[head][0] == b[head][0] == "lit":
        if a[head] != b[head]:
            return False  # their literal starts differ: ls vs rm
        head += 1
    if len(a) * len(b) > budget:
        return True
    seen, todo = set(), [(head, head)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        star_a = i < len(a) and a[i][0] == "star"
        star_b = j < len(b) and b[j][0] == "star"
        if star_a:
            todo.append((i + 1, j))
        if star_b:
            todo.append((i, j + 1))
        if i < len(a) and j < len(b):
            if star_a and not star_b:
                todo.append((i, j + 1))
            elif star_b and not star_a:
                todo.append((i + 1, j))
            elif not star_a and a[i] == b[j]:
                todo.append((i + 1, j + 1))
    return False


def glob_tokens(body: str, star: str) -> list:
    """The tokens of a wildcard pattern for ``Glob`` (as ``glob_regex`` reads it).

    Args:
        body: the pattern (str), ``protect``-ed, without its prefix suffix.
        star: ``"any"`` (text and commands) or ``"noslash"`` (paths).

    Returns:
        list: ``(kind, value)`` pairs.
    """
    out, i = [], 0
    while i < len(body):
        if body.startswith("**/", i) and star != _ANY:
            out.append(("star", _DIRS))
            i += 3
        elif body.startswith("**", i):
            out.append(("star", _ANY))
            i += 2
        elif body[i] == "*":
            out.append(("star", star))
            i += 1
        else:
            out.append(("lit", {STAR: "*", BACKSLASH: "\\"}.get(body[i], body[i])))
            i += 1
    return out


@functools.lru_cache(maxsize=1024)
def pattern_glob(pattern: str, kind: str, root: str, ignore_case: bool = False) -> Glob:
    """A path or text pattern read as ``pattern_regex`` reads it (the same arguments),
    as a ``Glob``, matched in time linear in the text (SPEC R19 addendum).

    Returns:
        Glob: to ``fullmatch`` the value (a resolved absolute path, or the text).
    """
    body, prefix = split_prefix(protect(pattern))
    if kind == "text":
        return Glob(glob_tokens(body, _ANY), " " if prefix else "")
    head, body = _path_head(body, root)
    tokens = [("lit", c) for c in head] + glob_tokens(body, _NOSLASH)
    return Glob(tokens, "/" if prefix else "", ignore_case)


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
