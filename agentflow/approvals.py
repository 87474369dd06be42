"""Approvals you can trust: bound to the exact call, used once, expiring, audited.

When a run pauses, the loop *issues* one ``PendingApproval`` per call that waits for a
human: the call's id, its tool, a SHA-256 digest of its canonical arguments and the
time. The ledger lives in the session (``AgentSession.approvals``), so it travels with
the history to disk and to another process.

On resume the ledger is checked before anything runs (``check``):

* every record must still match its call in the history: same id, same tool, same
  arguments digest. Otherwise the history was edited after the pause, and nothing
  runs;
* every approval response must name a call that was put up for approval (a sibling
  that needed none cannot be approved into running), and a response that carries a
  ``digest`` must carry the recorded one.

Then each record is *decided* exactly once (``decide``) and leaves the ledger for the
audit trail: approved, rejected, expired (``approval_ttl`` passed: a rejection with
reason ``approval expired``) or unanswered. A second resume with the same responses
finds no record and no pending call: ``ApprovalError``, nothing runs (SPEC R11, R12).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import NamedTuple

from .canonical import arguments_digest
from .errors import ApprovalError
from .types import ToolApprovalRequest, ToolApprovalResponse, ToolCall

EXPIRED_REASON = "approval expired"


def utc_iso(timestamp: float) -> str:
    """A POSIX timestamp (seconds) as UTC ISO 8601, e.g. ``2026-11-30T08:40:00Z``."""
    moment = datetime.fromtimestamp(timestamp, timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


class Decision(NamedTuple):
    """Whether a pending call may run; ``reason`` is what a rejection sends (``None``:
    the default, SPEC R7)."""

    may_run: bool
    reason: str | None = None


@dataclass
class PendingApproval:
    """A call waiting for a human. Times are POSIX seconds; ``expires_at`` is ``None``
    without a TTL."""

    call_id: str
    tool: str
    digest: str
    issued_at: float
    expires_at: float | None = None


@dataclass
class AuditRecord:
    """One decision. ``outcome`` is ``approved``, ``rejected``, ``expired`` or
    ``unanswered``; ``reason`` the rejection reason as sent (or ``None``); ``approver``
    the response's ``approver`` string; times are UTC ISO 8601 strings."""

    call_id: str
    tool: str
    digest: str
    outcome: str
    reason: str | None
    approver: str | None
    issued_at: str
    decided_at: str


@dataclass
class ApprovalLedger:
    """The pending approvals and the audit trail of one session."""

    pending: list[PendingApproval] = field(default_factory=list)
    audit: list[AuditRecord] = field(default_factory=list)

    def issue(self, call: ToolCall, now: float, ttl: float | None = None) -> PendingApproval:
        """Record that ``call`` waits for approval from ``now`` (POSIX seconds) for
        ``ttl`` seconds (``None``: no expiry)."""
        record = PendingApproval(call.id, call.name, arguments_digest(call.arguments), now,
                                 None if ttl is None else now + ttl)
        self.pending = [r for r in self.pending if r.call_id != call.id] + [record]
        return record

    def check(self, pending_calls: list[ToolCall],
              responses: dict[str, ToolApprovalResponse]) -> None:
        """Refuse, with ``ApprovalError`` and before anything runs, a history that no
        longer matches its records, a response for a call that was never put up for
        approval, and a response whose digest is not the recorded one."""
        records = {r.call_id: r for r in self.pending}
        calls = {c.id: c for c in pending_calls}
        edited = [i for i, r in records.items()
                  if i not in calls or calls[i].name != r.tool
                  or arguments_digest(calls[i].arguments) != r.digest]
        if edited:
            raise ApprovalError(
                f"the stored history no longer matches the approval record of call(s) "
                f"{', '.join(edited)} (tool or arguments changed, or the call is gone): "
                "the session was edited after the run paused. Nothing was executed.", edited)
        never_asked = [i for i in responses if i not in records]
        if never_asked:
            asked = ", ".join(records) or "none"
            raise ApprovalError(
                f"call(s) {', '.join(never_asked)} were never put up for approval (awaiting "
                f"approval: {asked}); only those can be answered. Nothing was executed.",
                never_asked)
        mismatched = [i for i, r in responses.items()
                      if r.digest is not None and r.digest != records[i].digest]
        if mismatched:
            raise ApprovalError(
                f"the digest of the response(s) for {', '.join(mismatched)} does not match "
                "the arguments that were put up for approval; the approver saw other "
                "arguments. Nothing was executed.", mismatched)

    def decide(self, call: ToolCall, response: ToolApprovalResponse | None,
               now: float) -> Decision:
        """Consume the record of ``call`` (which must have one) and log the decision.

        Args:
            call: the pending ``ToolCall``.
            response: the caller's ``ToolApprovalResponse`` for it, or ``None``.
            now: the time of the decision (POSIX seconds).

        Returns:
            A ``Decision``; an expired record is a rejection with reason
            ``approval expired`` whatever the response says.
        """
        record = next(r for r in self.pending if r.call_id == call.id)
        self.pending.remove(record)
        if record.expires_at is not None and now > record.expires_at:
            outcome, may_run, reason = "expired", False, EXPIRED_REASON
        elif response is None:
            outcome, may_run, reason = "unanswered", False, None
        elif response.approved:
            outcome, may_run, reason = "approved", True, None
        else:
            outcome, may_run, reason = "rejected", False, response.reason
        self.audit.append(AuditRecord(
            record.call_id, record.tool, record.digest, outcome, reason,
            response.approver if response is not None else None,
            utc_iso(record.issued_at), utc_iso(now)))
        return Decision(may_run, reason)

    def awaits(self, call_id: str) -> bool:
        """Whether ``call_id`` (str) has a pending record."""
        return any(r.call_id == call_id for r in self.pending)

    def to_dict(self) -> dict:
        """JSON-safe form: ``{"pending": [record dicts], "audit": [record dicts]}``."""
        return {"pending": [asdict(r) for r in self.pending],
                "audit": [asdict(r) for r in self.audit]}

    @classmethod
    def from_dict(cls, data: dict | None) -> "ApprovalLedger":
        """The inverse of ``to_dict``; ``None`` gives an empty ledger."""
        data = data or {}
        return cls([PendingApproval(**r) for r in data.get("pending", [])],
                   [AuditRecord(**r) for r in data.get("audit", [])])


def approval_request(call: ToolCall, description: str,
                     record: PendingApproval | None = None) -> ToolApprovalRequest:
    """The ``ToolApprovalRequest`` a human sees for ``call`` (SPEC R3, §3).

    Args:
        call: the ``ToolCall`` waiting for approval.
        description: the tool's description (str).
        record: its ``PendingApproval``, whose digest the request carries; without one
            the digest is computed from the call's arguments.

    Returns:
        The request; its ``arguments`` are the parsed JSON, or ``None`` when the
        model's text is not valid JSON.
    """
    try:
        arguments = json.loads(call.arguments)
    except (ValueError, RecursionError):
        arguments = None
    digest = record.digest if record is not None else arguments_digest(call.arguments)
    return ToolApprovalRequest(call.id, call.name, arguments, description, digest)
