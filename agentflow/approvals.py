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

from typing import TYPE_CHECKING, Callable, Collection, Mapping

from . import policy as policies
from .canonical import arguments_digest, canonical_json
from .errors import ApprovalError, PolicyError
from .tools import schema_errors
from .types import ToolApprovalRequest, ToolApprovalResponse, ToolCall

if TYPE_CHECKING:
    from .tools import Tool

EXPIRED_REASON = "approval expired"
DEFAULT_REJECTION_REASON = "User denied"  # SPEC R7


def utc_iso(timestamp: float) -> str:
    """A time for the audit trail.

    Args:
        timestamp: POSIX seconds (float).

    Returns:
        str: UTC ISO 8601 to the second, e.g. ``2026-11-30T08:40:00Z``.
    """
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
    without a TTL. ``why`` records why it needs approval, decided once at the gate
    (R18); ``rule`` and ``layer`` name the policy rule that asked, if one did (R19)."""

    call_id: str
    tool: str
    digest: str
    issued_at: float
    expires_at: float | None = None
    why: str | None = None
    rule: str | None = None
    layer: str | None = None


@dataclass
class Denial:
    """A call a policy rule denied at a gate that paused (R19): its resume answers it
    ``Rejected: denied by policy (<rule>)``."""

    call_id: str
    tool: str
    digest: str
    rule: str
    layer: str


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
    that of the arguments shown; ``grant`` the rule a human granted with the decision."""

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


@dataclass
class ApprovalLedger:
    """The pending approvals and the audit trail of one session."""

    pending: list[PendingApproval] = field(default_factory=list)
    audit: list[AuditRecord] = field(default_factory=list)
    denied: list[Denial] = field(default_factory=list)
    grants: list[SessionGrant] = field(default_factory=list)

    def issue(self, call: ToolCall, now: float, ttl: float | None = None,
              why: str | None = None, rule: str | None = None,
              layer: str | None = None) -> PendingApproval:
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

        Returns:
            PendingApproval: the record.
        """
        record = PendingApproval(call.id, call.name, arguments_digest(call.arguments), now,
                                 None if ttl is None else now + ttl, why, rule, layer)
        self.pending = [r for r in self.pending if r.call_id != call.id] + [record]
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

    def audit_verdicts(self, calls: list[ToolCall], verdicts: dict, pausing: bool,
                       now: float) -> None:
        """Audit the gate's automatic decisions on one turn (SPEC R18, R19): every
        policy rule's, and a risky tool its own check let run, unless the turn pauses
        (then it does not run, R5). An ask by the tool's own answer is not audited
        here: it is recorded with the pending approval (``issue``).

        Args:
            calls: the turn's ``ToolCall`` list, in call order.
            verdicts: call id (str) → ``agentflow.policy.GateVerdict``; a call without
                one (an unknown tool) is skipped.
            pausing: whether any call of the turn asks, so the turn pauses.
            now: the time of the decision (POSIX seconds).
        """
        for call in calls:
            verdict = verdicts.get(call.id)
            if verdict is None or (verdict.action == "run" and pausing):
                continue
            if verdict.rule is not None or verdict.action == "run" and verdict.why:
                outcome = {"run": "allowed", "deny": "denied", "ask": "asked"}[
                    verdict.action]
                self.automatic(call, outcome, now, verdict.why, verdict.rule,
                               verdict.layer)

    def hold_denials(self, calls: list[ToolCall], verdicts: dict) -> None:
        """Remember each call of a pausing turn that a policy denied, so the resume
        answers it ``Rejected: denied by policy (<rule>)`` without deciding again.

        Args:
            calls: the turn's ``ToolCall`` list.
            verdicts: call id (str) → ``agentflow.policy.GateVerdict``.
        """
        for call in calls:
            verdict = verdicts.get(call.id)
            if verdict is not None and verdict.action == "deny":
                self.hold_denial(call, verdict.rule, verdict.layer)

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
        edited = [i for i, r in records.items()
                  if i not in calls or calls[i].name != r.tool
                  or arguments_digest(calls[i].arguments) != r.digest]
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
        mismatched = [i for i, r in responses.items()
                      if r.digest is not None and r.digest != records[i].digest]
        if mismatched:
            raise ApprovalError(
                f"the digest of the response(s) for {', '.join(mismatched)} does not match "
                "the arguments that were put up for approval; the approver saw other "
                "arguments. Nothing was executed.", mismatched)

    def decide(self, call: ToolCall, response: ToolApprovalResponse | None,
               now: float, edited_digest: str | None = None) -> Decision:
        """Consume the record of ``call`` (which must have one) and log the decision.

        Args:
            call: the pending ``ToolCall``.
            response: the caller's ``ToolApprovalResponse`` for it, or ``None``.
            now: the time of the decision (POSIX seconds).
            edited_digest: the digest of the edited arguments the call will run with
                (R20), if the response edits them.

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
        granted = ("; ".join(g.rule for g in response.grants)
                   if may_run and response.grants else None)
        self.audit.append(AuditRecord(
            record.call_id, record.tool, record.digest, outcome, reason,
            response.approver if response is not None else None,
            utc_iso(record.issued_at), utc_iso(now), record.why, record.rule, record.layer,
            edited_digest if may_run else None, granted))
        return Decision(may_run, reason)

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
        ``"denied"`` and ``"grants"`` lists when they are not empty."""
        data = {"pending": [asdict(r) for r in self.pending],
                "audit": [asdict(r) for r in self.audit]}
        if self.denied:
            data["denied"] = [asdict(d) for d in self.denied]
        if self.grants:
            data["grants"] = [asdict(g) for g in self.grants]
        return data

    @classmethod
    def from_dict(cls, data: dict | None) -> "ApprovalLedger":
        """The inverse of ``to_dict``.

        Args:
            data: a dict from ``to_dict``; ``None`` gives an empty ledger.

        Returns:
            ApprovalLedger: the ledger.

        Raises:
            TypeError: a record has unknown or missing keys.
        """
        data = data or {}
        return cls([PendingApproval(**r) for r in data.get("pending", [])],
                   [AuditRecord(**r) for r in data.get("audit", [])],
                   [Denial(**d) for d in data.get("denied", [])],
                   [SessionGrant(**g) for g in data.get("grants", [])])


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


def rejection_text(reason: str | None) -> str:
    """The result text of a call that did not run (SPEC R7).

    Args:
        reason: the rejection reason (str), kept exactly; ``None`` or blank
            (whitespace-only) means ``User denied``.

    Returns:
        str: ``Rejected: <reason>``.
    """
    if reason is None or not reason.strip():
        reason = DEFAULT_REJECTION_REASON
    return f"Rejected: {reason}"


def check_responses(responses, pending: list[ToolCall], answered: set[str],
                    started: Collection[str] = ()) -> dict:
    """Match the caller's approval responses to the pending calls (SPEC R11, R17).

    Args:
        responses: the ``ToolApprovalResponse`` objects of the run's options.
        pending: the pending ``ToolCall`` list of the last tool-call turn.
        answered: ids (set of str) of that turn's calls that already have a result.
        started: ids (str) of calls an earlier run started and never finished (R16).

    Returns:
        dict: call id (str) → ``ToolApprovalResponse``.

    Raises:
        ApprovalError: a response matches no pending call (unknown, already answered,
            given twice, or started by a run that never finished; R11, R16), or two
            pending calls share an id (R17); the error names the ids.
    """
    ids = [call.id for call in pending]
    shared = sorted({i for i in ids if ids.count(i) > 1})
    if shared:
        raise ApprovalError(
            f"the paused turn has two or more calls with the id(s) {', '.join(shared)}; one "
            "answer cannot tell them apart, so none of them can run. Nothing was executed; "
            "fix the history or start a new session.", shared)
    pending_ids = set(ids)
    by_id: dict = {}
    unknown, already, twice, begun = [], [], [], []
    for response in responses:
        if response.call_id in by_id:
            twice.append(response.call_id)
        elif response.call_id in answered:
            already.append(response.call_id)
        elif response.call_id in pending_ids and response.call_id in started:
            begun.append(response.call_id)
        elif response.call_id not in pending_ids:
            unknown.append(response.call_id)
        else:
            by_id[response.call_id] = response
    problems = []
    if unknown:
        problems.append(f"no pending call has the id(s) {', '.join(unknown)}")
    if already:
        problems.append(f"call(s) {', '.join(already)} already have a result (they ran or "
                        "were answered before)")
    if twice:
        problems.append(f"call(s) {', '.join(twice)} were answered more than once")
    if begun:
        problems.append(f"call(s) {', '.join(begun)} already started in an earlier run that "
                        "never finished (R16): they are not run again; run with no responses, "
                        "run([], session), to answer them 'interrupted' and go on. (A store's "
                        "open() refuses a session whose run is still alive in another "
                        "worker; outside a store, make sure no process still runs them)")
    if problems:
        waiting = sorted(pending_ids - set(started))
        if waiting:
            hint = f"pending calls: {', '.join(waiting)}"
        elif already or begun:
            hint = ("nothing waits for approval any more; to go on after a failed model "
                    "call, run again with no responses: run([], session)")
        else:
            hint = ("the session has no pending call; resume with the same AgentSession "
                    "the run paused in")
        raise ApprovalError(f"approval responses do not fit the paused run: "
                            f"{'; '.join(problems)} ({hint}). Nothing was executed.",
                            unknown + already + twice + begun)
    return by_id


def check_approved_tools(responses: Mapping, pending: list[ToolCall],
                         tools: Mapping) -> None:
    """Refuse approvals of calls whose tool the agent does not have.

    Args:
        responses: call id (str) → ``ToolApprovalResponse``, as ``check_responses``
            returns them.
        pending: the pending ``ToolCall`` list of the last tool-call turn.
        tools: the agent's tools by name (mapping of str → ``Tool``).

    Raises:
        ApprovalError: an approved call names a tool that is not in ``tools`` (an
            agent resumed with other tools than the run paused with); it names the
            call ids, and nothing was executed. A rejected one is fine: it only gets
            its ``Rejected: …`` result.
    """
    orphans = [c for c in pending if c.id in responses
               and responses[c.id].approved and c.name not in tools]
    if orphans:
        raise ApprovalError(
            f"approved call(s) {', '.join(c.id for c in orphans)} name tool(s) "
            f"{', '.join(sorted({c.name for c in orphans}))} that this agent does not "
            "have; give it the tools the run paused with. Nothing was executed.",
            [c.id for c in orphans])


def check_edits(responses: dict, pending: list[ToolCall], tools: Mapping[str, "Tool"],
                ledger: "ApprovalLedger | None", layers: Callable[[], list]) -> None:
    """Refuse, before anything runs, what an approval carries that cannot be used:
    edited arguments that do not fit the tool's schema or that a policy denies (SPEC
    R20), and grants that can never match or have no session to go to (R19).

    Args:
        responses: call id (str) → ``ToolApprovalResponse``, from ``check_responses``.
        pending: the pending ``ToolCall`` list, in call order.
        tools: tool name (str) → ``Tool`` of the agent.
        ledger: the session's ``ApprovalLedger``, or ``None`` without a session.
        layers: returns the ``ApprovalPolicy`` layers in order (``layers_in_order``);
            called only when an answer edits arguments.

    Raises:
        ApprovalError: naming the call and the problem; nothing was executed.
    """
    for call in pending:
        response = responses.get(call.id)
        if response is None or not response.approved:
            continue
        tool = tools.get(call.name)
        if response.grants:
            if ledger is None:
                raise ApprovalError(f"the answer to {call.id} carries a grant, but there "
                                    "is no session to keep it in. Nothing was executed.",
                                    [call.id])
            try:
                policies.ApprovalPolicy(allow=[g.rule for g in response.grants]).check(tools)
            except PolicyError as exc:
                raise ApprovalError(f"the grant with the answer to {call.id} cannot be "
                                    f"used: {exc}. Nothing was executed.",
                                    [call.id]) from None
        if response.arguments is None:
            continue
        problems = schema_errors(tool.parameters, response.arguments)
        if problems:
            raise ApprovalError(
                f"the edited arguments for {call.id} ({call.name}) do not fit the tool: "
                f"{'; '.join(problems)}. Nothing was executed.", [call.id])
        verdict, _ = policies.decide(layers(), tool, response.arguments)
        if verdict is not None and verdict.effect == "deny":
            raise ApprovalError(
                f"the edited arguments for {call.id} ({call.name}) are denied by policy "
                f"({verdict.rule}, {verdict.layer}). Nothing was executed.", [call.id])


def resume_decision(ledger: "ApprovalLedger | None", call: ToolCall,
                    response: ToolApprovalResponse | None, now: float) -> Decision:
    """Whether one pending call runs on resume, and why not (SPEC R4, R5, R19, R20).

    A call denied by policy at the gate stays denied; a sibling that needed no
    approval runs only if approved (R5); a call with an approval record is decided by
    the ledger (expiry, audit). An approved edit rewrites ``call.arguments`` to the
    canonical JSON (RFC 8785) of the edited arguments, so the stored history shows what
    ran (R20); an approved answer's grants join the ledger (R19).

    Args:
        ledger: the session's ``ApprovalLedger``, or ``None`` (then only the response
            counts).
        call: the pending ``ToolCall``; its ``arguments`` may be rewritten.
        response: the caller's ``ToolApprovalResponse`` for it, or ``None``.
        now: the time of the decision (POSIX seconds).

    Returns:
        Decision: ``may_run`` and the rejection ``reason`` (str or ``None``).
    """
    if ledger is None:
        return Decision(response is not None and response.approved,
                        response.reason if response else None)
    denial = ledger.take_denial(call)
    if denial is not None:
        return Decision(False, f"denied by policy ({denial.rule})")
    if not ledger.awaits(call.id):  # a sibling that needed no approval (R5)
        return Decision(response is not None and response.approved,
                        response.reason if response else None)
    edited = None
    if response is not None and response.arguments is not None:
        edited = canonical_json(response.arguments)
    decision = ledger.decide(call, response, now,
                             edited and arguments_digest(edited))
    if decision.may_run and edited is not None:
        call.arguments = edited  # R20: the stored call shows what really ran
    for grant in response.grants if decision.may_run else ():
        ledger.grant(grant.rule, now, grant.ttl, response.approver, call.id)
    return decision
