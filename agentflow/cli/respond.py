"""``--respond CALL_ID=yes|no[:REASON]``: answers to a paused session's calls, given on
the command line (SPEC R4, R11)."""

from __future__ import annotations

import shlex

from ..display import safe_text
from ..types import ToolApprovalResponse
from .errors import UsageError
from .paste import without_password
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
    waiting = {r.call_id: r for r in chat.pending_requests()}  # in position order
    session = shlex.quote(chat.args.session)
    if chat.args.store:
        session = f"{session} --store {shlex.quote(without_password(chat.args.store)[0])}"
    begun = [safe_text(c.id) for c in chat.session.pending_tool_calls if c.id in chat.session.running]
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
    requests = list(waiting.values())
    listing = "; ".join(f"{answer_key(r.call_id, n)} ({safe_text(r.name)} {chat.summary(r)})"
                        for n, r in enumerate(requests, 1))
    responses, seen = [], set()
    for item in chat.args.respond:
        request, answer = _which(item, waiting, requests)
        verdict, _, reason = answer.partition(":")
        shown = safe_text(item)
        if request is None or verdict.strip().lower() not in ("yes", "y", "no", "n"):
            if request is None and "=" in item and verdict.strip().lower() in YES_NO:
                raise UsageError(f"--respond {shown!r}: no call {safe_text(_answer_id(item))!r} "
                                 f"waits for approval in {chat.args.session}. Waiting: "
                                 f"{listing}")
            raise UsageError(f"--respond {shown!r}: write CALL_ID=yes or CALL_ID=no[:REASON] "
                             "(or N=yes: the N-th call waiting)")
        if request.call_id in seen:
            raise UsageError(f"--respond: {safe_text(request.call_id)} is answered twice; "
                             "give one answer per call")
        seen.add(request.call_id)
        responses.append(request.approve(user_name()) if verdict.strip().lower() in ("yes", "y")
                         else request.reject(reason or None, user_name()))
    unanswered = [safe_text(i) for i in waiting if i not in seen]
    if unanswered:
        chat.say(f"(no --respond for {', '.join(unanswered)}: rejected, as if you said no)")
    return responses


YES_NO = ("yes", "y", "no", "n")


def answer_key(call_id: str, number: int) -> str:
    """How a printed command names a call that waits: its id when the id can be shown
    and pasted as it is, else its position (SPEC R25).

    Args:
        call_id: the call's ``tool_call_id`` (str).
        number: its position among the calls that wait (int, from 1).

    Returns:
        str: the call id, or ``str(number)`` for an id that needs escaping, holds
        ``=`` or whitespace, or is a number (which ``--respond`` reads as a position).
    """
    plain = (call_id and safe_text(call_id) == call_id and "=" not in call_id
             and not call_id.isdigit() and not any(c.isspace() for c in call_id))
    return call_id if plain else str(number)


def _answer_id(item: str) -> str:
    """The call id or position an answer names: what comes before its first ``=``."""
    return item.partition("=")[0].strip()


def _which(item: str, waiting: dict, requests: list) -> tuple:
    """``(request, answer)`` for one ``--respond`` value: a waiting id followed by
    ``=`` (the longest, so an id may hold ``=``), else a position ``N=``; ``request``
    is ``None`` when neither matches."""
    ids = [i for i in waiting if not i.isdigit() and item.startswith(i + "=")]
    if ids:
        call_id = max(ids, key=len)
        return waiting[call_id], item[len(call_id) + 1:]
    key, sep, answer = item.partition("=")
    key = key.strip()
    if not sep:
        return None, ""
    if key.isdigit():  # a number is always a position, never an id
        in_range = key.isascii() and 1 <= int(key) <= len(requests)
        return (requests[int(key) - 1] if in_range else None), answer
    return waiting.get(key), answer
