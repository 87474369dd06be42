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

Then each record is *consumed* exactly once (``consume``) and leaves the ledger for the
audit trail: approved, rejected, expired (``approval_ttl`` passed: a rejection with
reason ``approval expired``) or unanswered. A second resume with the same responses
finds no record and no pending call: ``ApprovalError``, nothing runs (SPEC R11, R12).

Decisions taken without a human are in the trail too (``automatic``): a call a policy
rule allowed, denied or put up for approval, and a call of an approval-requiring tool
that its predicate let run (R18, R19), each with the rule and the layer that decided
or the predicate's answer. A call denied at a gate that paused is remembered
(``denied``) so that the resume answers it ``Rejected: denied by policy (<rule>)``
without deciding again. The ledger also keeps the session's ``grants``: allow rules
a human added while approving, each optionally expiring (R19).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import NamedTuple

from .canonical import arguments_digest, schema2_arguments_digest
from .errors import ApprovalError
from .types import ChatMessage, Grant, ToolApprovalRequest, ToolApprovalResponse, ToolCall

EXPIRED_REASON = "approval expired"
OLD_SCHEME = "schema-2"  # the digest scheme of records a schema-2 session holds (R23)
# A pending record's inbox fields, left out of the stored form when unset.
_SHOWN = ("description", "parameters", "preview", "subject", "mcp_tool", "exact_rules",
          "traceparent")


def utc_iso(timestamp: float) -> str:
    """A time for the audit trail.

    Args:
        timestamp: POSIX seconds (float).

    Returns:
        str: UTC ISO 8601 to the second, e.g. ``2026-11-30T08:40:00Z``.
    """
    moment = datetime.fromtimestamp(timestamp, timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


class Settlement(NamedTuple):
    """Whether a pending call runs on resume; ``reason`` is what a rejection sends
    (``None``: the default, SPEC R7)."""

    may_run: bool
    reason: str | None = None


@dataclass
class PendingApproval:
    """A call waiting for a human. Times are POSIX seconds; ``expires_at`` is ``None``
    without a TTL. ``why`` records why it needs approval, decided once at the gate
    (R18); ``rule`` and ``layer`` name the policy rule that asked, if one did (R19).

    What an approval inbox in another process shows and checks, kept from the gate
    since that process has none of the agent's tools (SPEC R20, R25): the tool's
    ``description`` and parameter schema (``parameters``, a JSON Schema dict, to check
    an edit before it is accepted), its ``preview`` of the call (the command line, a
    write's diff; at most ``PREVIEW_CAP`` characters), the name of its ``subject``
    argument (R19), for an MCP tool ``mcp_tool`` (``server.tool``), and the
    ``exact_rules`` that would allow exactly this call from now on (a grant, R19).
    An inbox lists it as a ``stores.PendingEntry``, which carries this record."""

    call_id: str
    tool: str
    digest: str
    issued_at: float
    expires_at: float | None = None
    why: str | None = None
    rule: str | None = None
    layer: str | None = None
    scheme: str | None = None  # "schema-2": recorded by an older agentflow (SPEC R23)
    request_id: str | None = None  # the pause's (SPEC R24); None in older records
    description: str | None = None
    parameters: dict | None = None
    preview: str | None = None
    subject: str | None = None
    mcp_tool: str | None = None
    exact_rules: list | None = None
    traceparent: str | None = None  # the pausing run's trace (W3C), for tracing.py

    def matches(self, call: ToolCall) -> bool:
        """Whether the record is still that of ``call``: same id, tool and arguments
        digest, computed as the version that wrote the record computed it (SPEC R23).

        Args:
            call: the pending ``ToolCall``.

        Returns:
            bool: ``False`` when the history was edited after the pause.
        """
        return (call.id == self.call_id and call.name == self.tool
                and self.digest in _digests(call.arguments, self.scheme))



def _digests(arguments: str, scheme: str | None) -> tuple:
    """The digests a record written under ``scheme`` may hold for ``arguments``: a
    schema-2 agentflow wrote the JSON dump digest before RFC 8785, or RFC 8785's."""
    if scheme == OLD_SCHEME:
        return arguments_digest(arguments), schema2_arguments_digest(arguments)
    return (arguments_digest(arguments),)


PREVIEW_CAP = 16_000  # characters of a tool's preview kept in a pending record


@dataclass
class RecordedAnswer:
    """A human's answer to a pending call, recorded in the session for a worker to
    resume with (an approval inbox's durable answer, SPEC R4, R22, R24).

    ``digest`` (and ``request_id``, where the pending record has one) bind it to the
    request the person was shown; ``answered_at`` is POSIX seconds; ``reason``,
    ``approver``, ``arguments`` (an edit, R20) and ``grant`` (a list of ``{"rule": str,
    "ttl": seconds or null}``, R19) are as on ``ToolApprovalResponse``. ``refused`` is
    set by a worker that could not use the answer (its own checks, R20): the call
    waits for a new answer."""

    call_id: str
    digest: str
    approved: bool
    answered_at: float
    reason: str | None = None
    approver: str | None = None
    arguments: dict | None = None
    grant: list | None = None
    request_id: str | None = None
    refused: str | None = None
    traceparent: str | None = None  # the answer's span (W3C), for tracing.py

    def response(self) -> ToolApprovalResponse:
        """The ``ToolApprovalResponse`` a resume runs with (SPEC R4).

        Returns:
            ToolApprovalResponse: carrying the digest, approver, edit and grants.
        """
        grants = [Grant(g["rule"], g.get("ttl")) for g in self.grant or ()] or None
        return ToolApprovalResponse(self.call_id, self.approved,
                                    None if self.approved else self.reason, self.digest,
                                    self.approver, self.arguments if self.approved else None,
                                    grants if self.approved else None,
                                    request_id=self.request_id)


@dataclass
class Denial:
    """A call a policy rule denied at a gate that paused (R19): its resume answers it
    ``Rejected: denied by policy (<rule>)``."""

    call_id: str
    tool: str
    digest: str
    rule: str
    layer: str
    scheme: str | None = None  # as in PendingApproval


@dataclass
class SessionGrant:
    """An allow rule a human granted while approving call ``call_id`` (R19). Times are
    POSIX seconds; ``expires_at`` is ``None`` for a grant without a TTL."""

    rule: str
    granted_at: float
    expires_at: float | None = None
    approver: str | None = None
    call_id: str | None = None

    def active(self, now: float) -> bool:
        """Whether the grant still holds (SPEC R19).

        Args:
            now: the current time (POSIX seconds).

        Returns:
            bool: ``True`` without expiry or until ``expires_at`` inclusive.
        """
        return self.expires_at is None or now <= self.expires_at


@dataclass
class AuditRecord:
    """One decision. ``outcome`` is ``approved``, ``rejected``, ``expired`` or
    ``unanswered`` for a human's (or the lack of one), and ``allowed``, ``denied`` or
    ``asked`` for one taken without a human (R18, R19); ``reason`` the rejection reason
    as sent (or ``None``); ``approver`` the response's ``approver`` string; times are
    UTC ISO 8601 strings. ``why`` says why the call needed approval or ran without
    it; ``rule`` and ``layer`` name the policy rule that decided; ``edited_digest`` is
    the digest of the arguments a human edited the call to (R20), ``digest`` staying
    that of the arguments shown; ``grant`` the rule a human granted with the decision;
    ``request_id`` the pause the decided record belonged to (SPEC R23, R24: a pause
    whose other records are still pending was cut short in the middle of its resume)."""

    call_id: str
    tool: str
    digest: str
    outcome: str
    reason: str | None
    approver: str | None
    issued_at: str
    decided_at: str
    why: str | None = None
    rule: str | None = None
    layer: str | None = None
    edited_digest: str | None = None
    grant: str | None = None
    request_id: str | None = None

    def to_dict(self) -> dict:
        """JSON-safe form: the fields, ``request_id`` only when it has one (records
        written before it existed read and write the same)."""
        data = asdict(self)
        if data["request_id"] is None:
            del data["request_id"]
        return data


@dataclass
class ApprovalLedger:
    """The pending approvals and the audit trail of one session."""

    pending: list[PendingApproval] = field(default_factory=list)
    audit: list[AuditRecord] = field(default_factory=list)
    denied: list[Denial] = field(default_factory=list)
    grants: list[SessionGrant] = field(default_factory=list)
    answers: list[RecordedAnswer] = field(default_factory=list)
    held: list = field(default_factory=list)  # OpenAI message dicts (SPEC R23)

    def hold(self, messages) -> None:
        """Keep a run's input behind a pause that judged a stored turn again (SPEC
        R6, R23); the resume stores it after the results.

        Args:
            messages: the ``ChatMessage`` objects (the run's input not yet stored).
        """
        self.held += [m.to_openai() for m in messages]

    def take_held(self) -> list:
        """The input held behind the pause, taken out of the ledger (SPEC R23).

        Returns:
            list[ChatMessage]: oldest first.
        """
        held, self.held = self.held, []
        return [ChatMessage.from_openai(m) for m in held]

    def issue(self, call: ToolCall, now: float, ttl: float | None = None,
              why: str | None = None, rule: str | None = None,
              layer: str | None = None, request_id: str | None = None,
              shown: dict | None = None) -> PendingApproval:
        """Record that a call waits for approval (SPEC R3), replacing an older record
        of the same id.

        Args:
            call: the ``ToolCall``; its arguments' digest is recorded (RFC 8785 JCS,
                SHA-256).
            now: when it was put up (POSIX seconds).
            ttl: how long the approval request holds (seconds); ``None``: no expiry.
            why: why it asks (str), shown and audited.
            rule: the policy rule that asked, if one did (R19).
            layer: the policy layer of that rule.
            request_id: the pause's id (str), which its answers must carry if they
                carry one (R24).
            shown: what an inbox shows and checks (``PendingApproval``'s
                ``description``, ``parameters``, ``preview``, ``subject``, ``mcp_tool``,
                ``exact_rules``).

        Returns:
            PendingApproval: the record.
        """
        record = PendingApproval(call.id, call.name, arguments_digest(call.arguments), now,
                                 None if ttl is None else now + ttl, why, rule, layer,
                                 request_id=request_id, **(shown or {}))
        self.pending = [r for r in self.pending if r.call_id != call.id] + [record]
        self.answers = [a for a in self.answers if a.call_id != call.id]  # a new pause
        return record

    def automatic(self, call: ToolCall, outcome: str, now: float, why: str | None = None,
                  rule: str | None = None, layer: str | None = None) -> None:
        """Log a decision taken without a human (SPEC R18, R19).

        Args:
            call: the ``ToolCall`` decided.
            outcome: ``"allowed"``, ``"denied"`` or ``"asked"``.
            now: when (POSIX seconds).
            why: the reason (str), e.g. ``policy: allow rule … (project)``.
            rule: the deciding policy rule, if one decided.
            layer: its policy layer.
        """
        moment = utc_iso(now)
        self.audit.append(AuditRecord(call.id, call.name, arguments_digest(call.arguments),
                                      outcome, None, None, moment, moment, why, rule, layer))

    def hold_denial(self, call: ToolCall, rule: str, layer: str) -> None:
        """Remember that a policy denied a call at a gate that paused, for its resume
        (SPEC R19).

        Args:
            call: the denied ``ToolCall``.
            rule: the deny rule (str).
            layer: its policy layer (str).
        """
        self.denied = [d for d in self.denied if d.call_id != call.id] + [
            Denial(call.id, call.name, arguments_digest(call.arguments), rule, layer)]

    def take_denial(self, call: ToolCall) -> Denial | None:
        """Take a held denial out of the ledger.

        Args:
            call: the pending ``ToolCall`` (matched by id and tool name).

        Returns:
            Denial | None: its denial, now removed, or ``None``.
        """
        for denial in self.denied:
            if denial.call_id == call.id and denial.tool == call.name:
                self.denied.remove(denial)
                return denial
        return None

    def grant(self, rule: str, now: float, ttl: float | None = None,
              approver: str | None = None, call_id: str | None = None) -> SessionGrant:
        """Add an allow rule to the session's grants (SPEC R19).

        Args:
            rule: the allow rule (str), e.g. ``run_command(git status)``.
            now: when it was granted (POSIX seconds).
            ttl: how long it holds (seconds); ``None``: as long as the session.
            approver: who granted it (str), or ``None``.
            call_id: the call whose approval carried it (str), or ``None``.

        Returns:
            SessionGrant: the grant.
        """
        grant = SessionGrant(rule, now, None if ttl is None else now + ttl, approver, call_id)
        self.grants.append(grant)
        return grant

    def active_grants(self, now: float) -> list[SessionGrant]:
        """The grants that hold now (SPEC R19).

        Args:
            now: the current time (POSIX seconds).

        Returns:
            list[SessionGrant]: oldest first.
        """
        return [g for g in self.grants if g.active(now)]

    def check(self, pending_calls: list[ToolCall],
              responses: dict[str, ToolApprovalResponse]) -> None:
        """Check the responses against the records before anything runs (SPEC R11,
        R17).

        Args:
            pending_calls: the pending ``ToolCall`` list of the history.
            responses: call id (str) → ``ToolApprovalResponse``.

        Raises:
            ApprovalError: the history no longer matches its records (edited after
                the pause); a response approves a call that was never put up for
                approval; a response's digest is not the recorded one.
        """
        records = {r.call_id: r for r in self.pending}
        calls = {c.id: c for c in pending_calls}
        edited = [i for i, r in records.items() if i not in calls or not r.matches(calls[i])]
        if edited:
            raise ApprovalError(
                f"the stored history no longer matches the approval record of call(s) "
                f"{', '.join(edited)} (tool or arguments changed, or the call is gone): "
                "the session was edited after the run paused. Nothing was executed.", edited)
        denied = {d.call_id: d for d in self.denied}
        refused = [i for i in responses if i in denied and i not in records]
        if refused:
            raise ApprovalError(
                f"call(s) {', '.join(refused)} were denied by policy ("
                f"{'; '.join(denied[i].rule for i in refused)}), so no answer can let them "
                "run. Nothing was executed.", refused)
        never_asked = [i for i in responses if i not in records]
        if never_asked:
            asked = ", ".join(records) or "none"
            raise ApprovalError(
                f"call(s) {', '.join(never_asked)} were never put up for approval (awaiting "
                f"approval: {asked}); only those can be answered. Nothing was executed.",
                never_asked)
        elsewhere = [i for i, r in responses.items() if r.request_id is not None
                     and r.request_id != records[i].request_id]
        if elsewhere:
            raise ApprovalError(
                f"the answer(s) for {', '.join(elsewhere)} were given to another pause (or "
                "another session) than the one waiting here: their request_id is not this "
                "pause's. Answer the requests of this session's pause "
                "(session.approval_requests()). Nothing was executed.", elsewhere)
        mismatched = [i for i, r in responses.items()
                      if r.digest is not None and r.digest != records[i].digest]
        if mismatched:
            raise ApprovalError(
                f"the digest of the response(s) for {', '.join(mismatched)} does not match "
                "the arguments that were put up for approval; the approver saw other "
                "arguments. Nothing was executed.", mismatched)

    def consume(self, call: ToolCall, response: ToolApprovalResponse | None,
                now: float, edited_digest: str | None = None) -> Settlement:
        """Take the record of ``call`` (which must have one) out of the pending list and
        log the human's decision on it in the audit trail.

        Args:
            call: the pending ``ToolCall``.
            response: the caller's ``ToolApprovalResponse`` for it, or ``None``.
            now: the time of the decision (POSIX seconds).
            edited_digest: the digest of the edited arguments the call will run with
                (R20), if the response edits them.

        Returns:
            A ``Settlement``; an expired record is a rejection with reason
            ``approval expired`` whatever the response says.
        """
        record = next(r for r in self.pending if r.call_id == call.id)
        self.pending.remove(record)
        self.answers = [a for a in self.answers if a.call_id != call.id]
        if record.expires_at is not None and now > record.expires_at:
            outcome, may_run, reason = "expired", False, EXPIRED_REASON
        elif response is None:
            outcome, may_run, reason = "unanswered", False, None
        elif response.approved:
            outcome, may_run, reason = "approved", True, None
        else:
            outcome, may_run, reason = "rejected", False, response.reason
        granted = ("; ".join(g.rule for g in response.grants)
                   if may_run and response.grants else None)
        self.audit.append(AuditRecord(
            record.call_id, record.tool, record.digest, outcome, reason,
            response.approver if response is not None else None,
            utc_iso(record.issued_at), utc_iso(now), record.why, record.rule, record.layer,
            edited_digest if may_run else None, granted, record.request_id))
        return Settlement(may_run, reason)

    def awaits(self, call_id: str) -> bool:
        """Whether a call has a pending approval record.

        Args:
            call_id: the call's id (str).

        Returns:
            bool: ``False`` for a sibling that needed no approval (R5).
        """
        return any(r.call_id == call_id for r in self.pending)

    def to_dict(self) -> dict:
        """JSON-safe form: ``{"pending": [record dicts], "audit": [record dicts]}``, with
        ``"denied"``, ``"grants"``, ``"answers"`` and ``"held"`` lists when they are not
        empty; a pending record's inbox fields only when set."""
        data = {"pending": [{k: v for k, v in _record(r).items()
                             if v is not None or k not in _SHOWN} for r in self.pending],
                "audit": [r.to_dict() for r in self.audit]}
        if self.denied:
            data["denied"] = [_record(d) for d in self.denied]
        if self.grants:
            data["grants"] = [asdict(g) for g in self.grants]
        if self.answers:
            data["answers"] = [{k: v for k, v in asdict(a).items()
                                if v is not None or k != "traceparent"} for a in self.answers]
        if self.held:
            data["held"] = [dict(m) for m in self.held]
        return data

    @classmethod
    def from_dict(cls, data: dict | None, schema_version: int = 3) -> "ApprovalLedger":
        """The inverse of ``to_dict``.

        Args:
            data: a dict from ``to_dict``; ``None`` gives an empty ledger.
            schema_version: the session schema it was written in (int); the records
                of a schema-2 session are honoured by that version's digests (R23).

        Returns:
            ApprovalLedger: the ledger.

        Raises:
            TypeError: a record has unknown or missing keys.
        """
        data = data or {}
        ledger = cls([PendingApproval(**r) for r in data.get("pending", [])],
                     [AuditRecord(**r) for r in data.get("audit", [])],
                     [Denial(**d) for d in data.get("denied", [])],
                     [SessionGrant(**g) for g in data.get("grants", [])],
                     answers=[RecordedAnswer(**a) for a in data.get("answers", [])],
                     held=[dict(m) for m in data.get("held", [])])
        if schema_version < 3:
            for record in ledger.pending + ledger.denied:
                record.scheme = record.scheme or OLD_SCHEME
        return ledger


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
    request_id = (record.request_id or "") if record is not None else ""
    return ToolApprovalRequest(call.id, call.name, arguments, description, digest, request_id)


def _record(record) -> dict:
    """A record's dict; ``scheme`` only when an older version wrote it, ``request_id``
    only when it has one."""
    data = asdict(record)
    for key in ("scheme", "request_id"):
        if data.get(key) is None:
            data.pop(key, None)
    return data
