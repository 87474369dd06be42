"""What the inbox marks as risky in a waiting call (issue 39), so that a ``curl … | sh``
at the end of a long line stands out: pipes into a shell or interpreter, downloads,
deletes, root, warnings the gate wrote (a path outside the workspace, a secret file)
and ``sandbox: false``.

The marks only draw a person's eye: every call shown waits for a person anyway, and a
call with no mark is not thereby safe (the page never says so). They are found in the
text as shown (made visible, SPEC R25), so each mark's span is text on the page.
"""

from __future__ import annotations

import re

_END = r"[^|;&\n]*"  # up to the next pipe, list operator or line
_SHELLS = r"(?:sh|bash|dash|zsh|ksh|fish|python[0-9.]*|perl|ruby|node|php|osascript)"
_FIND = [
    ("pipes into a shell", re.compile(
        r"\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+(?:\S+=\S*\s+)*)?(?:\S*/)?" + _SHELLS
        + r"\b" + _END)),
    ("runs downloaded code", re.compile(
        r"\b(?:source|\.|eval|" + _SHELLS + r")\s+(?:-c\s+)?[\"']?(?:\$\(|`|<\()\s*"
        r"(?:curl|wget)[^)`]*[)`]?")),
    ("downloads", re.compile(r"\b(?:curl|wget|aria2c|scp|rsync|ncat|nc|ftp|sftp)\b" + _END)),
    ("deletes", re.compile(r"\b(?:rm|rmdir|shred|unlink|truncate|mkfs(?:\.\w+)?|dd|wipefs)\s"
                           + _END + r"|\bfind\b" + _END + r"-delete\b"
                           r"|\bgit\s+(?:clean|reset\s+--hard|push\s+\S*\s*--force)\b" + _END)),
    ("runs as root", re.compile(r"\b(?:sudo|doas|su)\b" + _END)),
    ("writes outside the workspace or to a secret", re.compile(r"^warning: it .*$", re.M)),
]


def risk_spans(text: str) -> list[tuple[int, int, str]]:
    """The risky spans of a text as shown, left to right, not overlapping.

    Args:
        text: a preview or argument as the page shows it (str).

    Returns:
        list: ``(start, end, kind)`` tuples; ``kind`` says what it does (str).
    """
    found = sorted((m.start(), -m.end(), kind) for kind, pattern in _FIND
                   for m in pattern.finditer(text) if m.end() > m.start())
    spans, reach = [], 0
    for start, end, kind in found:
        if start >= reach:
            spans.append((start, -end, kind))
            reach = -end
    return spans


def risks(text: str, arguments) -> list[tuple[str, str]]:
    """What a call does that a person should look at twice.

    Args:
        text: its preview as shown (str).
        arguments: its arguments (dict, or anything else when not an object).

    Returns:
        list: ``(kind, the text that does it)`` pairs, in the order of the text;
        ``sandbox: false`` first.
    """
    marks = []
    if isinstance(arguments, dict) and arguments.get("sandbox") is False:
        marks.append(("runs outside the sandbox", "sandbox: false"))
    return marks + [(kind, text[start:end].strip()) for start, end, kind in risk_spans(text)]
