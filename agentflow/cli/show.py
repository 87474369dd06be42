"""``agentflow show --session FILE`` (or ``--store URL --session ID``): a saved
conversation as a person reads it: each message, each call with its subject, each
result, then the session's grants and the calls that wait. Read only: the session is
loaded, not locked or written. Everything in it came from a model, a tool or a file,
so it is shown safe (SPEC R25)."""

from __future__ import annotations

import sys
import time

from ..display import safe_text

RESULT_WIDTH = 300  # characters of a tool result shown; the session keeps it all


def show_command(session_path: str, store_url: str | None = None, out=None,
                 secret=None) -> int:
    """Print a saved session.

    Args:
        session_path: the ``--session`` file (str), or the session's id in the store.
        store_url: the ``--store`` URL (str), or ``None`` for a file.
        out: a text stream to write to; default ``sys.stdout``.
        secret: the store's key (bytes), or ``None`` for an unsigned store (SPEC R27).

    Returns:
        int: the exit status, 0.

    Raises:
        SessionError: the file or stored text is not a session.
        KeyError: the store has no session with that id.
        OSError, ValueError: the file or store cannot be read.
    """
    from ..session import AgentSession
    out = out or sys.stdout
    if store_url:
        from ..stores import open_store
        with open_store(store_url, secret) as store:
            session = store.load(session_path)
    else:
        session = AgentSession.load(session_path)
    for line in conversation_lines(session):
        out.write(line + "\n")
    return 0


def conversation_lines(session) -> list[str]:
    """The lines ``agentflow show`` prints for a session.

    Args:
        session: the ``AgentSession``.

    Returns:
        list[str]: the lines, safe to show, without newlines.
    """
    lines = []
    for message in session.messages:
        role = message.role.value
        if message.content:
            text = safe_text(message.content, multiline=True).replace("\n", "\n    ")
            lines.append(f"{role}> {text}" if role != "tool" else
                         f"  [{safe_text(message.tool_call_id or '')}] "
                         + _cut(safe_text(" ⏎ ".join(message.content.strip().split("\n")))))
        for call in message.tool_calls:
            lines.append(f"  → {safe_text(call.id)} {safe_text(call.name)} "
                         f"{safe_text(call.arguments)}")
    now = time.time()
    grants = session.approvals.grants
    lines.append("grants:" + ("" if grants else " none"))
    for number, grant in enumerate(grants, 1):
        state = "" if grant.active(now) else " (expired)"
        lines.append(f"  {number}. allow {safe_text(grant.rule)}{state}")
    pending = session.approvals.pending
    lines.append("waiting for approval:" + ("" if pending else " none"))
    for record in pending:
        lines.append(f"  {safe_text(record.call_id)}  {safe_text(record.tool)}"
                     + (f"  ({safe_text(record.why)})" if record.why else ""))
    return lines


def _cut(text: str) -> str:
    return text if len(text) <= RESULT_WIDTH else text[:RESULT_WIDTH - 1] + "…"
