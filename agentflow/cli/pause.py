"""What a chat prints when it stops with calls waiting: each call in one line, and the
command that answers them (SPEC R4)."""

from __future__ import annotations

import shlex

from .flags import EXIT_PAUSED


def paused(chat) -> int:
    """Say which calls wait and how to answer them (``--json``: one ``paused`` object).

    Args:
        chat: the ``Chat`` whose session is paused.

    Returns:
        int: ``EXIT_PAUSED``.
    """
    requests = chat.pending_requests()
    if chat.args.json:
        chat.out.emit({"type": "paused", "pending": [r.call_id for r in requests]})
        return EXIT_PAUSED
    count = (f"{len(requests)} call waits" if len(requests) == 1
             else f"{len(requests)} calls wait")
    chat.say(f"paused: {count} for approval:")
    width = max([len(r.call_id) for r in requests] + [0])
    tool_width = max([len(r.name) for r in requests] + [0])
    for request in requests:
        chat.say(f"  {request.call_id:<{width}}  {request.name:<{tool_width}}  "
                 f"{chat.summary(request)}")
    if chat.args.session:
        answers = " ".join(f"--respond {shlex.quote(r.call_id)}=yes" for r in requests)
        store = f"--store {shlex.quote(chat.args.store)} " if chat.args.store else ""
        chat.say("Answer each call: CALL_ID=yes runs it, CALL_ID=no:REASON rejects it.")
        chat.say(f"Resume with: agentflow chat {store}--session "
                 f"{shlex.quote(chat.args.session)} {answers}")
    else:
        chat.say("Without --session FILE this pause cannot be resumed later: run again "
                 "with --session FILE, and answer on a terminal or with --approve-all / "
                 "--deny-all.")
    return EXIT_PAUSED
