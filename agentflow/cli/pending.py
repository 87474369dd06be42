"""``agentflow pending --store URL``: the approval inbox of a session store, as a table
or JSON lines (SPEC R22); a call answered with an approved edit shows the edit, which
is what runs (SPEC R20, R25). Ids, tools and arguments come from models: the table shows
them safe (SPEC R25), and the command it suggests is shell-quoted and holds no
password."""

from __future__ import annotations

import json
import sys

from ..display import safe_text
from ..stores import open_store
from ..stores.answers import who
from .paste import PASSWORD_NOTE, command, without_password
from .respond import answer_key

def pending_command(url: str, as_json: bool = False, out=None, secret=None,
                    key_flags=()) -> int:
    """``agentflow pending --store URL``: print the approval inbox, oldest first
    (SPEC R22).

    Args:
        url: the store URL (str), as for ``open_store``.
        as_json: print one JSON object a line instead of a table.
        out: a text stream to write to; default ``sys.stdout``.
        secret: the store's key (bytes), or ``None`` for an unsigned store
            (``store_key.store_secret``, SPEC R27).
        key_flags: the flags that gave the key (``--store-key FILE`` or
            ``--unsigned``), repeated in the suggested ``--respond`` command.

    Returns:
        int: the exit status, 0.

    Raises:
        ValueError: ``url`` names no store ``open_store`` knows.
    """
    out = out or sys.stdout
    with open_store(url, secret) as store:
        entries = store.pending()
    if as_json:
        for e in entries:
            out.write(json.dumps({"session": e.session_id, "call_id": e.call_id,
                                  "tool": e.tool, "arguments": e.arguments,
                                  "digest": e.digest, "issued_at": e.issued_at,
                                  "expires_at": e.expires_at, "age": round(e.age, 3),
                                  **({"error": e.error} if e.error else {}),
                                  **({"needs_run": e.needs_run} if e.needs_run else {}),
                                  **({"answered": who(e.answer)} if _answered(e) else {}),
                                  **({"edited_arguments": _edit(e)} if _edit(e) else {})})
                      + "\n")
        return 0
    if not entries:
        out.write("nothing waits for approval\n")
        return 0
    rows = [("AGE", "SESSION", "CALL", "TOOL", "ARGUMENTS")]
    for e in entries:
        arguments = json.dumps(e.arguments, ensure_ascii=False) if e.arguments is not None \
            else "(not valid JSON)"
        if e.error:  # a session the store cannot read (SPEC R22 addendum)
            arguments = f"(cannot be read: {e.error})"
        elif e.needs_run:  # cut short: a worker continues it (fourth batch)
            arguments = f"({e.needs_run})"
        arguments = safe_text(arguments)
        if len(arguments) > 60:
            arguments = arguments[:59] + "…"
        edit = _edit(e)
        if edit is not None:  # what runs is the edit (SPEC R20, R25): shown in its place
            arguments = safe_text("edited to " + json.dumps(edit, ensure_ascii=False))
            if len(arguments) > 60:
                arguments = arguments[:59] + "…"
        if _answered(e):  # an inbox answered it; a worker has yet to resume (SPEC R22)
            arguments += f"  (answered by {safe_text(who(e.answer))}; waits for a worker)"
        rows.append((_age(e.age), safe_text(e.session_id), safe_text(e.call_id),
                     safe_text(e.tool), arguments))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        out.write(f"{row[0]:>{widths[0]}}  " + "  ".join(
            f"{cell:<{width}}" for cell, width in zip(row[1:4], widths[1:])) + f"  {row[4]}\n")
    first = next((e for e in entries if not e.error and not e.needs_run
                  and not _answered(e)), None)
    if first is None:
        return 0
    store_url, had_password = without_password(url)
    position = [e.call_id for e in entries if e.session_id == first.session_id].index(
        first.call_id) + 1
    key = answer_key(first.call_id, position)
    out.write("\nanswer with: " + command("agentflow", "chat", "--store", store_url,
                                          *key_flags, "--session", first.session_id, "--respond",
                                          f"{key}=yes") + " (or =no:REASON)\n")
    if had_password:
        out.write(PASSWORD_NOTE + "\n")
    return 0


def _answered(entry) -> bool:
    return entry.answer is not None and entry.answer.refused is None


def _edit(entry) -> dict | None:
    """The arguments an approved edit runs the call with, else ``None``."""
    return entry.answer.arguments if _answered(entry) and entry.answer.approved else None


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
