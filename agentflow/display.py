"""Untrusted text made safe to show to a person (SPEC R25).

Text from a model, a tool, an MCP server, a provider or a file may hold characters a
terminal or a page acts on instead of showing: ESC starts a sequence that moves the
cursor, erases a line, sets the title or the clipboard (OSC 52); a carriage return or
backspace overwrites what was shown; a bidirectional override reorders it; a zero-width
character or a line separator hides or splits it. ``safe_text`` replaces each such
character by a visible escape (``\\x1b``, ``\\u202e``), so what a person reads is what
runs. What is kept: every printable character, a space, and (where a view shows several
lines) the newline and the tab. Escaping is idempotent: an escape is printable ASCII.

The characters escaped are those of the Unicode categories Cc (C0 and C1 controls,
DEL), Cf (format: bidi embeddings, overrides and isolates, zero-width spaces and
joiners, the byte order mark, tag characters), Zl and Zp (line and paragraph
separators) and Cs (lone surrogates, as ``os.fsdecode`` makes of bytes that are not
UTF-8).
"""

from __future__ import annotations

import re
import unicodedata

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
# Every character outside printable ASCII is a candidate; most are then kept.
_CANDIDATE = re.compile(r"[^\x20-\x7e]")
_CANDIDATE_MULTILINE = re.compile(r"[^\x20-\x7e\n\t]")


def _escape(match: re.Match) -> str:
    char = match.group()
    if unicodedata.category(char) not in _UNSAFE_CATEGORIES:
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe_text(text: str, multiline: bool = False) -> str:
    """``text`` with every character a terminal could act on shown as an escape
    (SPEC R25).

    Args:
        text: untrusted text (str): an argument, a preview, a description, a tool name,
            a result, a call id, a model's words.
        multiline: keep newlines and tabs (a view of several lines, e.g. a diff); when
            false (one line: a table cell, a field) they are escaped too (``\\n``,
            ``\\t``). A carriage return is escaped either way.

    Returns:
        str: the text to show; equal to ``text`` when nothing needed escaping.
    """
    pattern = _CANDIDATE_MULTILINE if multiline else _CANDIDATE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)


def needs_escaping(text: str, multiline: bool = False) -> bool:
    """Whether ``safe_text`` would change ``text``: an approval prompt says so (SPEC R25).

    Args:
        text: the text (str).
        multiline: as for ``safe_text``.

    Returns:
        bool: ``True`` when ``text`` holds a character ``safe_text`` escapes.
    """
    return safe_text(text, multiline) != text
