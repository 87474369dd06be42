"""Answers recorded for later: an approval inbox answers a paused call in one
process, a worker resumes the session in another (SPEC R4, R20, R22, R24).

``record_answers`` checks answers against the session's pending records and adds them
to its ledger (``ApprovalLedger.answers``); nothing runs. Each answer is bound to the
request the person was shown: it must carry that request's digest (and its
``request_id``, where the record has one), an edit must fit the tool's parameter schema
kept with the record, and a call already answered is refused, naming who answered.
``ready_responses`` gives a worker the ``ToolApprovalResponse`` list to resume with,
once every pending call of the session has an answer. The run consumes the records
and their answers together (``ApprovalLedger.consume``), so a resume that crashed
before its first write leaves the answers in place for the next worker.
"""

from __future__ import annotations

import time

from .. import tracing
from ..approvals import AuditRecord, PendingApproval, RecordedAnswer, utc_iso
from ..errors import ApprovalError, PolicyError
from ..schema import schema_errors
from ..session import AgentSession
from ..types import ToolApprovalResponse


def who(answer: RecordedAnswer | AuditRecord) -> str:
    """How a refusal names an earlier answer (SPEC R24).

    Args:
        answer: the recorded answer, or the audit record of a settled call.

    Returns:
        str: e.g. ``dana at 2026-12-01T20:41:02Z (approved)``.
    """
    if isinstance(answer, RecordedAnswer):
        when, outcome = utc_iso(answer.answered_at), (
            "approved" if answer.approved else "rejected")
    else:
        when, outcome = answer.decided_at, answer.outcome
    return f"{answer.approver or 'an unnamed approver'} at {when} ({outcome})"


def record_answers(session: AgentSession, session_id: str, responses,
                   now: float | None = None) -> list[RecordedAnswer]:
    """Check answers against the pending records and record them in the session's
    ledger, all or none (SPEC R4, R20, R24); nothing runs.

    Args:
        session: the ``AgentSession``, as loaded from its store.
        session_id: its id (str), for messages.
        responses: ``ToolApprovalResponse`` objects, one per call answered.
        now: POSIX seconds of the answer (default: the clock).

    Returns:
        list[RecordedAnswer]: the answers recorded, in the order given.

    Raises:
        ApprovalError: nothing was recorded: a response names no waiting call, a call
            already has an answer (or was settled: "already answered by …"), it lacks
            the digest shown or carries another one, its ``request_id`` is another
            pause's, its request expired, an edit does not fit the recorded schema
            (or none was recorded), or a grant is not a rule.
        TypeError: an item is not a ``ToolApprovalResponse``.
    """
    now = time.time() if now is None else now
    ledger = session.approvals
    records = {r.call_id: r for r in ledger.pending}
    given = {a.call_id: a for a in ledger.answers if a.refused is None}
    recorded, seen = [], set()
    for response in responses:
        if not isinstance(response, ToolApprovalResponse):
            raise TypeError(f"answers are ToolApprovalResponse objects, got "
                            f"{type(response).__name__}")
        call_id = response.call_id
        if call_id in seen:
            raise _refused(call_id, "answered twice in one request")
        seen.add(call_id)
        if call_id in given:
            raise _refused(call_id, f"already answered by {who(given[call_id])}")
        record = records.get(call_id)
        if record is None:
            settled = [a for a in ledger.audit if a.call_id == call_id
                       and a.outcome in ("approved", "rejected", "expired", "unanswered")]
            if settled:
                raise _refused(call_id, f"already answered by {who(settled[-1])}")
            waiting = ", ".join(records) or "none"
            raise _refused(call_id, f"it does not wait for approval in session {session_id!r} "
                                    f"(waiting: {waiting})")
        answer = _checked(record, response, now)
        answer.traceparent = tracing.answer_span(
            record.traceparent, call_id, record.tool, answer.approved, answer.approver,
            answer.arguments is not None, now - record.issued_at)
        recorded.append(answer)
    ledger.answers = [a for a in ledger.answers if a.call_id not in seen] + recorded
    return recorded


def _checked(record: PendingApproval, response: ToolApprovalResponse,
             now: float) -> RecordedAnswer:
    call_id = response.call_id
    if response.digest is None:
        raise _refused(call_id, "the answer carries no digest: an answer recorded for a worker "
                                "must carry the digest of the request the person was shown "
                                "(request.approve() and .reject() copy it)")
    if response.digest != record.digest:
        raise _refused(call_id, "the answer carries a digest other than the recorded one: the "
                                "person was shown other arguments")
    request_id = getattr(response, "request_id", None)  # SPEC R24, where it exists
    held = getattr(record, "request_id", None)
    if request_id is not None and held is not None and request_id != held:
        raise _refused(call_id, f"the answer carries request_id {request_id!r}, which is "
                                f"another pause's (this one is {held!r})")
    if record.expires_at is not None and now > record.expires_at:
        raise _refused(call_id, f"its request expired at {utc_iso(record.expires_at)}; the run "
                                "will answer it 'approval expired'")
    if response.arguments is not None:
        if record.parameters is None:
            raise _refused(call_id, "it cannot be edited here: its pending record keeps no "
                                    "parameter schema to check the edit against; edit it "
                                    "where the agent runs")
        problems = schema_errors(record.parameters, response.arguments)
        if problems:
            raise _refused(call_id, f"the edited arguments do not fit {record.tool}'s "
                                    f"schema: {'; '.join(problems)}")
    grants = [{"rule": g.rule, "ttl": g.ttl} for g in response.grants] or None
    if grants:
        from ..policy import ApprovalPolicy
        try:
            ApprovalPolicy(allow=[g["rule"] for g in grants])
        except PolicyError as exc:
            raise _refused(call_id, f"the grant is not a rule: {exc}") from None
    return RecordedAnswer(call_id, record.digest, response.approved, now, response.reason,
                          response.approver, response.arguments, grants,
                          request_id if request_id is not None else held)


def _refused(call_id: str, problem: str) -> ApprovalError:
    return ApprovalError(f"call {call_id}: {problem}. Nothing was recorded.", [call_id])


def answer_for(session: AgentSession, call_id: str) -> RecordedAnswer | None:
    """The answer recorded for a pending call, refused ones included (SPEC R22).

    Args:
        session: the ``AgentSession``.
        call_id: the call's id (str).

    Returns:
        RecordedAnswer | None: the latest answer, or ``None``.
    """
    found = [a for a in session.approvals.answers if a.call_id == call_id]
    return found[-1] if found else None


def ready_responses(session: AgentSession) -> list[ToolApprovalResponse]:
    """The responses a worker resumes the session with, once every pending call has
    an answer that no worker refused (SPEC R4, R22).

    Args:
        session: the ``AgentSession``.

    Returns:
        list[ToolApprovalResponse]: one per pending record, in call order; empty while
        a call still waits for its answer (or when nothing waits: another worker
        resumed it first).
    """
    records = session.approvals.pending
    answers = {a.call_id: a for a in session.approvals.answers
               if a.refused is None and any(r.call_id == a.call_id and r.digest == a.digest
                                            for r in records)}
    if not records or any(r.call_id not in answers for r in records):
        return []
    order = [c.id for c in session.pending_tool_calls]
    return [answers[i].response() for i in order if i in answers]


def refuse_answers(session: AgentSession, reason: str) -> None:
    """Mark the session's answers as refused by a worker (its own checks failed,
    SPEC R20), so the calls wait for new answers and no worker retries these.

    Args:
        session: the ``AgentSession``.
        reason: why (str), shown in the inbox.
    """
    for answer in session.approvals.answers:
        if answer.refused is None:
            answer.refused = reason
