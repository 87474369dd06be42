"""The approval gate. Everything that decides whether a call runs lives here.

A call the model makes runs only when this module says so, and it says so once per
call, in one of two places:

* **At the pause** (the loop's ``AT_GATE``, SPEC R3, R5, R18, R19). ``gate_turn`` gives
  every call of a model turn its ``GateVerdict``: the policy's rules first (``deny``,
  then ``ask``, then ``allow``, over the layers in their fixed order:
  ``layers_in_order``), else the tool's own answer, its predicate asked once with the
  parsed arguments and failing closed (``gate_verdict``). When any call asks, the
  whole turn waits: one pending-approval record per asking call and one held denial
  per denied call go into the session's ledger, all before the first
  ``ToolApprovalRequest`` is handed out (R23), and nothing of the turn runs. Otherwise
  every call runs except the denied ones (``answer_at_gate``).
* **At the resume** (``START`` and ``RESUMING``, R4, R11, R16, R17, R20). Before
  anything runs, ``check_answers`` refuses answers that fit no pending call, answers
  to an ambiguous turn, approvals of tools the agent lacks, edits that do not fit the
  tool or that a policy denies, and grants that can never match; the ledger refuses a
  history edited since the pause. Then ``answer_on_resume`` settles each pending call
  in order: a call cut short by a crash is answered ``interrupted`` (R16), a held
  denial stays denied, a recorded call is decided by its answer (``settle``: this
  *consumes* the record, and an approved edit *rewrites* the stored call's arguments,
  R20), and a sibling that needed no approval is rejected unless approved (R5).

The loop (``function_invoking.py``) owns the order of the steps; the ledger
(``approvals.py``) keeps the records; the rule language and its matcher are in
``policy.py``. Nothing here does I/O but what the tools do when asked (a predicate,
a preview kept with a pending record for an inbox).
"""

from __future__ import annotations

import uuid
from typing import Callable, Collection, Iterable, Mapping, NamedTuple

from . import policy
from .approvals import PREVIEW_CAP, ApprovalLedger, Settlement, approval_request
from .canonical import arguments_digest, canonical_json
from .errors import ApprovalError, PolicyError, Setting
from .policy import ApprovalPolicy
from .schema import schema_errors
from .tools import Tool, bad_call_text, interrupted_text
from .types import (Decision, ToolApprovalRequest, ToolApprovalResponse, ToolCall,
                    json_object)

DEFAULT_REJECTION_REASON = "User denied"  # SPEC R7


# -- the verdict on one call (SPEC R18, R19) ------------------------------------------

class GateVerdict(NamedTuple):
    """What the gate decided for one call: ``action`` a ``Decision``; ``why`` why it
    asks or runs unasked (str or ``None``); ``rule`` and ``layer`` the policy rule that
    decided, if one did (SPEC R18, R19)."""

    action: Decision
    why: str | None = None
    rule: str | None = None
    layer: str | None = None


def checked_layers(layers, tools: Mapping) -> list:
    """A client's configured policies as a list of layers, each checked (SPEC R19).

    Args:
        layers: ``None``, an ``ApprovalPolicy``, or an iterable of them in layer order.
        tools: the client's tools by name (mapping of str → ``Tool``).

    Returns:
        list[ApprovalPolicy]: the layers, in the order given (empty for ``None``).

    Raises:
        TypeError: an item is not an ``ApprovalPolicy``.
        PolicyError: a rule can never match these tools (``ApprovalPolicy.check``).
    """
    layers = [] if layers is None else [layers] if isinstance(
        layers, ApprovalPolicy) else list(layers)
    for layer in layers:
        if not isinstance(layer, ApprovalPolicy):
            raise TypeError(f"policy must be an ApprovalPolicy or a list of them, got "
                            f"{type(layer).__name__}")
        layer.check(tools)
    return layers


def layers_in_order(run_policy, ledger: ApprovalLedger | None, configured: Iterable,
                    now: float) -> list:
    """The policy layers in their fixed order (SPEC R19): the run's own, the session's
    grants, then the client's (project file, user file …).

    Args:
        run_policy: the run's own ``ApprovalPolicy`` (``AgentRunOptions.policy``), or
            ``None``.
        ledger: the session's ``ApprovalLedger``, whose grants that hold at ``now``
            become a layer named ``session``; ``None`` for none.
        configured: the client's layers (``FunctionInvokingChatClient.policies``), in
            order.
        now: the current time (POSIX seconds), for grant expiry.

    Returns:
        list[ApprovalPolicy]: the layers, first first.
    """
    layers = [] if run_policy is None else [run_policy]
    grants = ledger.active_grants(now) if ledger is not None else []
    if grants:
        layers.append(ApprovalPolicy(allow=[g.rule for g in grants], name="session"))
    return layers + list(configured)


object_or_none = json_object  # the gate's name for it: None means it cannot run (R14)


def gate_verdict(tool: Tool, arguments, layers) -> GateVerdict:
    """The gate's decision on one call (SPEC R18, R19): the policy's rules, else the
    tool's own answer, asked once and failing closed.

    Args:
        tool: the ``Tool`` called.
        arguments: the parsed arguments (dict), or ``None`` when the model's text is
            not a JSON object.
        layers: the ``ApprovalPolicy`` layers, first first.

    Returns:
        A ``GateVerdict``.
    """
    observe = getattr(tool, "observe", None)
    if observe is not None and arguments is not None:
        observe(arguments)  # a tool that opens a path later judges it now (R26)
    decided, note = policy.decide(layers, tool, arguments)
    if decided is not None:
        why = f"policy: {decided.effect} rule {decided.rule} ({decided.layer})"
        return GateVerdict(decided.effect, why, decided.rule, decided.layer)
    if not tool.requires_approval():
        return GateVerdict(Decision.ALLOW)
    note = f"; {note}" if note else ""
    if arguments is None:
        return GateVerdict(Decision.ASK,
                           "its arguments are not a JSON object, so it asks" + note)
    try:
        answer = tool.needs_approval(arguments)
    except Exception as exc:  # fail closed (R18)
        return GateVerdict(Decision.ASK, f"the approval check failed ({type(exc).__name__}: "
                                         f"{exc}), so it asks{note}")
    if not answer:
        return GateVerdict(Decision.ALLOW, "its approval check let it run without asking")
    if isinstance(answer, str) and answer.strip():
        return GateVerdict(Decision.ASK, answer.strip() + note)
    if getattr(tool, "when", None) is not None:
        return GateVerdict(Decision.ASK, "its approval check asked" + note)
    return GateVerdict(Decision.ASK, f"{tool.name} always asks" + note)


# -- at the pause (SPEC R3, R5, R23) --------------------------------------------------

class TurnVerdict(NamedTuple):
    """The gate's answer for one model turn.

    Attributes:
        verdicts: call id (str) → ``GateVerdict``; a call of an unknown tool or with
            arguments that are not a JSON object has none (it is answered as such,
            never run and never put to a person, R14, R18).
        requests: the ``ToolApprovalRequest`` list, in call order, of the calls that
            ask; empty when the turn runs.
    """

    verdicts: dict
    requests: list


def gate_turn(calls: list[ToolCall], tools: Mapping[str, Tool], layers: list,
              ledger: ApprovalLedger | None, now: float, ttl: float | None = None,
              started: Collection[str] = ()) -> TurnVerdict:
    """Judge every call of a turn once (SPEC R3, R18, R19) and, when any asks, record
    the pause in the ledger: a pending-approval record per asking call, a held denial
    per denied call, all before any request is handed out (R23). The automatic
    decisions go to the audit trail (not those of calls that would have run: a pausing
    turn runs nothing, R5).

    Args:
        calls: the turn's ``ToolCall`` list, in call order.
        tools: the agent's tools by name.
        layers: the ``ApprovalPolicy`` layers in order (``layers_in_order``).
        ledger: the session's ``ApprovalLedger``, or ``None`` without one.
        now: the time of the decision (POSIX seconds).
        ttl: how long an approval request holds (seconds), or ``None``.
        started: ids of calls an earlier run started (R16): not judged again, they
            are answered ``interrupted`` (a re-gated turn, R23).

    Returns:
        TurnVerdict: the verdicts and the requests to hand out.
    """
    verdicts = {}
    for call in calls:
        tool = tools.get(call.name)
        arguments = object_or_none(call.arguments)
        # A call that cannot run (R14) is never put to a person (R18): no verdict, it
        # gets its result when the turn runs or at the resume.
        if tool is not None and call.id not in started and arguments is not None:
            verdicts[call.id] = gate_verdict(tool, arguments, layers)
    asked = [c for c in calls if c.id in verdicts and verdicts[c.id].action is Decision.ASK]
    if ledger is None:
        return TurnVerdict(verdicts, [approval_request(c, tools[c.name].description)
                                      for c in asked])
    for call in calls:
        verdict = verdicts.get(call.id)
        if verdict is None or (verdict.action is Decision.ALLOW and asked):
            continue
        if verdict.rule is not None or verdict.action is Decision.ALLOW and verdict.why:
            ledger.automatic(call, verdict.action.audited, now, verdict.why, verdict.rule,
                             verdict.layer)
    requests = []
    pause = uuid.uuid4().hex if asked else None  # R24: one id for this pause
    for call in asked:
        verdict = verdicts[call.id]
        record = ledger.issue(call, now, ttl, verdict.why, verdict.rule, verdict.layer,
                              pause, shown_with_record(tools[call.name], call))
        requests.append(approval_request(call, tools[call.name].description, record))
    if asked:
        for call in calls:
            verdict = verdicts.get(call.id)
            if verdict is not None and verdict.action is Decision.DENY:
                ledger.hold_denial(call, verdict.rule, verdict.layer)
    return TurnVerdict(verdicts, requests)


def shown_with_record(tool: Tool, call: ToolCall) -> dict:
    """What a pending record keeps for an approval inbox in another process, which
    has none of the agent's tools (SPEC R20, R25): the tool's description and
    parameter schema (an edit is checked against it before it is accepted), its preview
    of the call (capped), its subject argument, for an MCP tool ``server.tool``, and
    the rules a grant of exactly this call would add (R19).

    Args:
        tool: the ``Tool`` called.
        call: the ``ToolCall`` that waits.

    Returns:
        dict: keyword arguments of ``PendingApproval`` (``description``,
        ``parameters``, ``preview``, ``subject``, ``mcp_tool``, ``exact_rules``: the
        grant that would allow exactly this call).
    """
    arguments = object_or_none(call.arguments)
    preview = getattr(tool, "preview", None)
    shown = None
    if preview is not None and arguments is not None:
        try:
            shown = preview(arguments)
        except Exception as exc:  # a preview is a courtesy; the call still asks
            shown = f"(no preview: {type(exc).__name__}: {exc})"
        if isinstance(shown, str) and len(shown) > PREVIEW_CAP:
            shown = shown[:PREVIEW_CAP] + f"\n[... preview cut at {PREVIEW_CAP} characters]"
    server = getattr(getattr(tool, "server", None), "name", None)
    mcp_name = getattr(tool, "mcp_name", None)
    return {"description": tool.description or None,
            "parameters": dict(tool.parameters) if tool.parameters else None,
            "preview": shown if isinstance(shown, str) else None,
            "subject": tool.subject,
            "mcp_tool": f"{server}.{mcp_name}" if server and mcp_name else None,
            "exact_rules": _exact_rules(tool, arguments)}


def _exact_rules(tool: Tool, arguments) -> list | None:
    try:
        return policy.exact_rules(tool, arguments) or None
    except Exception:  # no suggestion; a person may still write a rule
        return None


def unrecorded(pending: list[ToolCall], ledger: ApprovalLedger | None,
               started: Collection[str]) -> list[ToolCall]:
    """The pending calls that go through the gate again (SPEC R23): those of a turn
    that is not a recorded pause (no pending-approval record and no held denial for
    any of its calls) and that never started (R16). A turn saved without its records
    (a crash, an older version), a turn whose calls needed no approval and had not
    started, a turn imported by hand: none of them is answered for a human.

    Args:
        pending: the pending ``ToolCall`` list of the last tool-call turn.
        ledger: the session's ``ApprovalLedger``; ``None`` (no records are kept):
            nothing is judged again.
        started: ids of calls an earlier run started and never finished.

    Returns:
        list[ToolCall]: the calls to judge, in call order; empty for a recorded pause.
    """
    if ledger is None:
        return []
    ids = {call.id for call in pending}
    if any(r.call_id in ids for r in ledger.pending) or any(
            d.call_id in ids for d in ledger.denied):
        return []
    return [call for call in pending if call.id not in started]


def recorded_responses(ledger: ApprovalLedger | None, pending: list[ToolCall],
                       given: Iterable[ToolApprovalResponse],
                       started: Collection[str]) -> list[ToolApprovalResponse]:
    """The answers recorded in the session (an inbox's, a worker's resume that was cut
    short) for the pending calls the caller's responses leave unanswered: a person said
    them, so a continued run uses them (SPEC R4, R22, R23).

    Args:
        ledger: the session's ``ApprovalLedger``, or ``None`` (then there are none).
        pending: the pending ``ToolCall`` list of the last tool-call turn.
        given: the caller's own ``ToolApprovalResponse`` objects; they win.
        started: ids of calls an earlier run started (R16): never answered again.

    Returns:
        list[ToolApprovalResponse]: in call order; only answers that no worker refused
        and that carry the digest of the call's pending record.
    """
    if ledger is None:
        return []
    answered = {r.call_id for r in given}
    records = {r.call_id: r for r in ledger.pending}
    answers = {a.call_id: a for a in ledger.answers if a.refused is None}
    return [answers[c.id].response() for c in pending
            if c.id in answers and c.id in records and c.id not in answered
            and c.id not in started and answers[c.id].digest == records[c.id].digest]


def asked_again(pending: list[ToolCall], ledger: ApprovalLedger | None,
                responses: Mapping[str, ToolApprovalResponse],
                caller_answered: bool) -> list:
    """The pending records of a recorded pause that a run with no answers from its
    caller asks about again instead of rejecting them (SPEC R23, fourth batch): the
    pause's resume was stopped part way (another record of the same pause was already
    decided) or the run continues from answers recorded in the session, and these
    calls have no answer, neither given nor recorded. An approval given only to the run
    that was stopped is not in the session, so its person is asked again; never
    ``Rejected: User denied`` for a person who said yes.

    Args:
        pending: the pending ``ToolCall`` list of the last tool-call turn.
        ledger: the session's ``ApprovalLedger``, or ``None`` (then: none).
        responses: call id → the responses the run goes on with (the caller's and
            the recorded ones).
        caller_answered: whether the caller gave responses of its own; then R4
            holds as always (a call it did not answer is rejected).

    Returns:
        list[PendingApproval]: the records to ask about again, in call order; empty
        when the run resumes.
    """
    if ledger is None or caller_answered:
        return []
    records = {r.call_id: r for r in ledger.pending}
    waiting = [records[c.id] for c in pending if c.id in records]
    unanswered = [r for r in waiting if r.call_id not in responses]
    if not unanswered:
        return []
    pauses = {r.request_id for r in waiting if r.request_id is not None}
    cut_short = any(a.request_id in pauses for a in ledger.audit if a.request_id)
    return unanswered if cut_short or responses else []


def answer_at_gate(verdict: GateVerdict | None, call: ToolCall | None = None,
                   tool: Tool | None = None, started: Collection[str] = ()) -> str | None:
    """The result of a call of a turn that runs, when it must not run (SPEC R16, R19).

    Args:
        verdict: the call's ``GateVerdict`` (``None`` for an unknown tool).
        call: the ``ToolCall``, when it may be one an earlier run started.
        tool: its ``Tool``, or ``None``.
        started: ids of calls an earlier run started and never finished (R16).

    Returns:
        str | None: ``Rejected: denied by policy (<rule>)`` for a denied call,
        ``Error: interrupted: …`` for a started one; ``None``: run it (an unknown
        tool's call is answered as such when run, R14).
    """
    if call is not None and call.id in started:
        return None if tool is not None and tool.idempotent else interrupted_text(call.name)
    if verdict is not None and verdict.action is Decision.DENY:
        return rejection_text(f"denied by policy ({verdict.rule})")
    return None


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


# -- at the resume: what the answers may carry (SPEC R11, R16, R17, R19, R20) --------

def check_answers(responses, pending: list[ToolCall], answered: set[str],
                  started: Collection[str], tools: Mapping[str, Tool],
                  ledger: ApprovalLedger | None, run_policy,
                  layers: Callable[[], list]) -> dict:
    """Every check of a resume's answers, before anything runs (SPEC R11, R16, R17,
    R19, R20).

    Args:
        responses: the ``ToolApprovalResponse`` objects of the run's options.
        pending: the pending ``ToolCall`` list of the last tool-call turn.
        answered: ids (set of str) of that turn's calls that already have a result.
        started: ids (str) of calls an earlier run started and never finished (R16).
        tools: the agent's tools by name.
        ledger: the session's ``ApprovalLedger``, or ``None``.
        run_policy: the run's own ``ApprovalPolicy``, or ``None``.
        layers: returns the policy layers in order; called only for an edit.

    Returns:
        dict: call id (str) → ``ToolApprovalResponse``.

    Raises:
        ApprovalError: an answer that cannot be used (see ``check_responses``,
            ``ApprovalLedger.check``, ``check_approved_tools``, ``check_edits``).
        PolicyError: ``run_policy`` has a rule that can never match the tools.
    """
    by_id = check_responses(responses, pending, answered, started)
    if ledger is not None:
        ledger.check(pending, by_id)
    elif by_id:
        check_asked(by_id, pending, tools, layers())
    check_approved_tools(by_id, pending, tools)
    if run_policy is not None:
        run_policy.check(tools)
    check_edits(by_id, pending, tools, ledger, layers)
    return by_id


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
            hint: tuple = (f"pending calls: {', '.join(waiting)}",)
        elif already or begun:
            hint = ("nothing waits for approval any more; to go on after a failed model "
                    "call, run again with no responses: run([], session)",)
        else:
            hint = ("the session has no pending call; ", Setting("session"))
        raise ApprovalError.naming(f"approval responses do not fit the paused run: "
                                   f"{'; '.join(problems)} (", *hint,
                                   "). Nothing was executed.",
                                   call_ids=unknown + already + twice + begun)
    return by_id


def check_asked(responses: Mapping, pending: list[ToolCall], tools: Mapping[str, Tool],
                layers: list) -> None:
    """Without a session's ledger, refuse answers to calls that did not ask, as the
    ledger does (SPEC R5, R11): a sibling that needed no approval is never approved
    into running. With no record to read, the gate judges each answered call again
    (``gate_verdict``, the same rules, failing closed).

    Args:
        responses: call id (str) → ``ToolApprovalResponse``, from ``check_responses``.
        pending: the pending ``ToolCall`` list, in call order.
        tools: the agent's tools by name.
        layers: the ``ApprovalPolicy`` layers in order (``layers_in_order``).

    Raises:
        ApprovalError: naming the calls that would not ask (a tool that needs no
            approval, a policy's allow or deny, arguments that are not a JSON
            object); nothing was executed.
    """
    never_asked = []
    for call in pending:
        if call.id not in responses or call.name not in tools:
            continue  # an unknown tool's approval is check_approved_tools' to refuse
        arguments = object_or_none(call.arguments)
        if arguments is None or gate_verdict(tools[call.name], arguments,
                                              layers).action is not Decision.ASK:
            never_asked.append(call.id)
    if never_asked:
        raise ApprovalError(
            f"call(s) {', '.join(never_asked)} were never put up for approval (their tool "
            "needs none, a policy decided them, or their arguments are not a JSON object); "
            "only calls that asked can be answered (SPEC R5). Nothing was executed.",
            never_asked)


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


class EditRefusal(NamedTuple):
    """Why edited arguments cannot run (SPEC R20).

    Attributes:
        problems: what does not fit the tool's schema (list of str), empty when it fits.
        rule: the policy rule that denies the edited call (str), or ``None``.
        layer: that rule's layer (str), or ``None``.
    """

    problems: list
    rule: str | None = None
    layer: str | None = None


def edit_refusal(tool: Tool, arguments, layers: list) -> EditRefusal | None:
    """Whether edited arguments may replace a call's (SPEC R20): they must fit the
    tool's schema and no policy may deny them; the check the loop makes before a
    resume, for a UI to make before it sends the answer.

    Args:
        tool: the ``Tool`` called.
        arguments: the edited arguments (dict).
        layers: the ``ApprovalPolicy`` layers in order (``layers_in_order``).

    Returns:
        EditRefusal | None: why not, or ``None`` when they may.
    """
    problems = schema_errors(tool.parameters, arguments)
    if problems:
        return EditRefusal(problems)
    verdict, _ = policy.decide(layers, tool, arguments)
    if verdict is not None and verdict.effect is Decision.DENY:
        return EditRefusal([], verdict.rule, verdict.layer)
    return None


def check_edits(responses: dict, pending: list[ToolCall], tools: Mapping[str, Tool],
                ledger: ApprovalLedger | None, layers: Callable[[], list]) -> None:
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
                ApprovalPolicy(allow=[g.rule for g in response.grants]).check(tools)
            except PolicyError as exc:
                raise ApprovalError(f"the grant with the answer to {call.id} cannot be "
                                    f"used: {exc}. Nothing was executed.",
                                    [call.id]) from None
        if response.arguments is None:
            continue
        try:
            canonical_json(response.arguments)  # what the stored call is rewritten to
        except ValueError as exc:
            raise ApprovalError(f"the edited arguments for {call.id} ({call.name}) have no "
                                f"canonical JSON form: {exc}. Nothing was executed.",
                                [call.id]) from None
        refusal = edit_refusal(tool, response.arguments, layers())
        if refusal is not None and refusal.problems:
            raise ApprovalError(
                f"the edited arguments for {call.id} ({call.name}) do not fit the tool: "
                f"{'; '.join(refusal.problems)}. Nothing was executed.", [call.id])
        if refusal is not None:
            raise ApprovalError(
                f"the edited arguments for {call.id} ({call.name}) are denied by policy "
                f"({refusal.rule}, {refusal.layer}). Nothing was executed.", [call.id])


# -- at the resume: each pending call's answer (SPEC R4, R5, R16, R19, R20) ----------

def settle(ledger: ApprovalLedger | None, call: ToolCall,
           response: ToolApprovalResponse | None, now: float) -> Settlement:
    """Settle one pending call on resume, changing the session (SPEC R4, R5, R19, R20):
    a held denial is taken out of the ledger and stays a denial; a recorded call's
    record is *consumed* into the audit trail (expiry applies); an approved edit
    *rewrites* ``call.arguments`` to the canonical JSON (RFC 8785) of the edited
    arguments, so the stored history shows what ran; an approved answer's grants join
    the ledger. A sibling that needed no approval runs only if approved (R5).

    Args:
        ledger: the session's ``ApprovalLedger``, or ``None`` (then only the response
            counts).
        call: the pending ``ToolCall``; its ``arguments`` may be rewritten.
        response: the caller's ``ToolApprovalResponse`` for it, or ``None``.
        now: the time of the decision (POSIX seconds).

    Returns:
        Settlement: ``may_run`` and the rejection ``reason`` (str or ``None``).
    """
    if ledger is None:
        return Settlement(response is not None and response.approved,
                          response.reason if response else None)
    denial = ledger.take_denial(call)
    if denial is not None:
        return Settlement(False, f"denied by policy ({denial.rule})")
    if not ledger.awaits(call.id):  # a sibling that needed no approval (R5)
        return Settlement(response is not None and response.approved,
                          response.reason if response else None)
    edited = None
    if response is not None and response.arguments is not None:
        edited = canonical_json(response.arguments)
    may_run, reason = ledger.consume(call, response, now, edited and arguments_digest(edited))
    if may_run and edited is not None:
        call.arguments = edited  # R20: the stored call shows what really ran
    for grant in response.grants if may_run else ():
        ledger.grant(grant.rule, now, grant.ttl, response.approver, call.id)
    return Settlement(may_run, reason)


def answer_on_resume(call: ToolCall, tool: Tool | None, started: Collection[str],
                     ledger: ApprovalLedger | None, response: ToolApprovalResponse | None,
                     now: float) -> str | None:
    """The result of a pending call on resume when it must not run (SPEC R4, R5, R7,
    R16), settling it (``settle``).

    Args:
        call: the pending ``ToolCall``.
        tool: its ``Tool``, or ``None`` when the agent has none of that name.
        started: ids of calls an earlier run started and never finished (R16).
        ledger: the session's ``ApprovalLedger``, or ``None``.
        response: the caller's answer for it, or ``None``.
        now: the time of the decision (POSIX seconds).

    Returns:
        str | None: ``Error: interrupted: …``; the R14 result of a call that can
        never run and so never asked (R18); or ``Rejected: …``; ``None``: run it.
    """
    if call.id in started:  # R16: cut short by a crash; never run twice
        return None if tool is not None and tool.idempotent else interrupted_text(call.name)
    refused = bad_call_text(tool, call) if tool is not None else None
    if refused is not None and (ledger is None or not ledger.awaits(call.id)):
        return refused  # R14, R18: it never asked; it could never run
    may_run, reason = settle(ledger, call, response, now)
    return None if may_run else rejection_text(reason)
