"""``agentflow pending --store URL``: the approval inbox of a session store, as a table
or JSON lines (SPEC R22)."""

from __future__ import annotations

import json
import sys
from urllib.parse import urlsplit

from ..stores import open_store


def pending_command(url: str, as_json: bool = False, out=None) -> int:
    """``agentflow pending --store URL``: print the approval inbox, oldest first
    (SPEC R22).

    Args:
        url: the store URL (str), as for ``open_store``.
        as_json: print one JSON object a line instead of a table.
        out: a text stream to write to; default ``sys.stdout``.

    Returns:
        int: the exit status, 0.

    Raises:
        ValueError: ``url`` names no store ``open_store`` knows.
    """
    out = out or sys.stdout
    with open_store(url) as store:
        entries = store.pending()
    if as_json:
        for e in entries:
            out.write(json.dumps({"session": e.session_id, "call_id": e.call_id,
                                  "tool": e.tool, "arguments": e.arguments,
                                  "digest": e.digest, "issued_at": e.issued_at,
                                  "expires_at": e.expires_at, "age": round(e.age, 3)}) + "\n")
        return 0
    if not entries:
        out.write("nothing waits for approval\n")
        return 0
    out.write(f"{'AGE':>8}  {'SESSION':<20} {'CALL':<16} {'TOOL':<14} ARGUMENTS\n")
    for e in entries:
        arguments = json.dumps(e.arguments, ensure_ascii=False) if e.arguments is not None \
            else "(not valid JSON)"
        if len(arguments) > 60:
            arguments = arguments[:59] + "…"
        out.write(f"{_age(e.age):>8}  {e.session_id:<20} {e.call_id:<16} {e.tool:<14} "
                  f"{arguments}\n")
    first = entries[0]
    out.write(f"\nanswer with: agentflow chat --store {_without_password(url)} --session "
              f"{first.session_id} "
              f"--respond {first.call_id}=yes (or =no:REASON)\n")
    return 0


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")).geturl()


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
