"""``--respond CALL_ID=yes|no[:REASON]``: answers to a paused session's calls, given on
the command line (SPEC R4, R11)."""

from __future__ import annotations

import shlex

from ..types import ToolApprovalResponse
from ..errors import UsageError
from .settings import user_name


def responses_from_flags(chat) -> list[ToolApprovalResponse]:
    """The ``--respond`` answers, checked against the calls that wait: an id that
    waits for nothing, or an id answered twice, is bad usage (before anything
    runs, the session unchanged, SPEC R11).

    Args:
        chat: the ``Chat`` whose session is paused.

    Returns:
        list[ToolApprovalResponse]: one per ``--respond``; calls left unanswered are
        rejected by the loop (said here).

    Raises:
        UsageError: an answer that cannot be read, an id that waits for nothing, an id
            answered twice, or a session that is not paused.
    """
    waiting = {r.call_id: r for r in chat.pending_requests()}
    session = shlex.quote(chat.args.session)
    if chat.args.store:
        session = f"{session} --store {shlex.quote(chat.args.store)}"
    begun = [c.id for c in chat.session.pending_tool_calls if c.id in chat.session.running]
    if not waiting and begun:  # SPEC R16
        raise UsageError(f"--respond: {', '.join(begun)} started in an earlier run that "
                         "never finished (it was killed), so it may have partly run and is "
                         "not run again; send a message to go on, and the model hears that "
                         f"it was interrupted: agentflow chat --session {session} "
                         "\"MESSAGE\"")
    if not waiting:
        raise UsageError(f"--respond: {chat.args.session} has no call waiting for "
                         "approval (it is not paused), so there is nothing to answer; "
                         f"send a message instead: agentflow chat --session {session} "
                         "\"MESSAGE\"")
    listing = "; ".join(f"{i} ({r.name} {chat.summary(r)})" for i, r in waiting.items())
    responses, seen = [], set()
    for item in chat.args.respond:
        call_id, sep, answer = item.partition("=")
        verdict, _, reason = answer.partition(":")
        call_id = call_id.strip()
        if not sep or verdict.strip().lower() not in ("yes", "y", "no", "n"):
            raise UsageError(f"--respond {item!r}: write CALL_ID=yes or CALL_ID=no[:REASON]")
        if call_id not in waiting:
            raise UsageError(f"--respond {item!r}: no call {call_id!r} waits for approval "
                             f"in {chat.args.session}. Waiting: {listing}")
        if call_id in seen:
            raise UsageError(f"--respond: {call_id} is answered twice; give one answer "
                             "per call")
        seen.add(call_id)
        request = waiting[call_id]
        responses.append(request.approve(user_name()) if verdict.strip().lower() in ("yes", "y")
                         else request.reject(reason or None, user_name()))
    unanswered = [i for i in waiting if i not in seen]
    if unanswered:
        chat.say(f"(no --respond for {', '.join(unanswered)}: rejected, as if you said no)")
    return responses
