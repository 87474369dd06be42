"""The tool loop: ``FunctionInvokingChatClient`` and ``LoopState``.

Theory of operation
-------------------
``FunctionInvokingChatClient`` wraps a provider client (anything whose
``run(messages, options, tools)`` yields updates ending in a ``Finish`` that carries
the turn's assembled message) and runs the tools the model calls. One ``run`` is one
walk through the state machine below. Whether a call runs is the gate's to say
(``gate.py``); when things happen is this file's. Everything that changes the state
lives here: the current state picks the step to run (``_STEPS``), the step does its I/O and
returns an event, and ``TRANSITIONS`` alone says where that event leads. A move the
table does not list raises ``LoopStateError``::

        ┌─────────────────── the caller's previous run paused (saved session) ◀────────┐
        ▼                                                                               │
      START ──calls pending──▶ RESUMING ──round limit──────────────────────▶ DONE      │
        │                         │                                          ▲  ▲       │
        │ nothing pending         │ results added                turn ended │  │       │
        ▼                         ▼                                          │  │       │
      CALLING_MODEL ◀─────────────┴──────────────results added─┐             │  │       │
        │  │                                                    │             │  │       │
        │  └────────────────────────────────────────────────────┼─────────────┘  │       │
        │ tools called                                          │  round limit   │       │
        ▼                                                       │                │       │
      AT_GATE ──no approval needed──▶ INVOKING_TOOLS ───────────┴────────────────┘       │
        │                                                                                │
        └──approval needed──▶ AWAITING_APPROVAL ────────────────────────────────────────┘

      any non-final state ──error (an exception left the step)──▶ FAILED
      START ──calls unrecorded──▶ AT_GATE;  START ──asked again──▶ AWAITING_APPROVAL  (R23)

* **START** (``_start``). The caller's approval responses are checked before anything
  runs: one that names no pending call is an ``ApprovalError`` (SPEC R11), and so is
  an ambiguous pending turn (R17), edited arguments that do not fit the tool's schema
  or that a policy denies (R20), and a grant that can never match (R19). Answers a
  person gave that are recorded in the session (an inbox's) count as given, for the
  calls the caller's responses leave out. Calls of the last tool-call turn without a
  result mean the previous run paused: resume. But a run without answers of its own
  whose pause was stopped part way through its resume (or that goes on from recorded
  answers) asks again about the calls nobody answered, emitting their requests
  (``asked again`` → AWAITING_APPROVAL), since an approval given only to the stopped
  run is not in the session (R23). Otherwise this run's input joins the prompt.
* **RESUMING** (``_resume``). Each pending call, in call order: started by an earlier
  run that never finished → ``Error: interrupted: …`` (R16, below); approved → run,
  with the edited arguments if the answer has them (the stored call is rewritten to
  them, R20), and its grant joins the session (R19); denied by policy at the gate →
  ``Rejected: denied by policy (<rule>)``; anything else → ``Rejected: <reason>`` (R4,
  R5, R7). Then the run's input joins the prompt, after those results (R6). That was
  one round; at ``max_rounds`` the run ends (R8) without calling the model.
* **CALLING_MODEL** (``_call_model``). One round: stream one model turn, forwarding
  text, reasoning and tool-call updates as they come, but not the provider's
  ``Finish`` (R9). A turn without calls, cut by ``length`` or stopped by the content
  filter (R14), or made while tools are disabled (R13), ends the run.
* **AT_GATE** (``_gate``, which asks ``gate.gate_turn``), the approval gate. Each call gets its verdict once, here:
  the policy's rules first (deny, ask, allow over the layers: run options, session
  grants, the client's policies; R19), else the tool's own answer, its predicate asked
  once with the parsed arguments, failing closed (R18). Automatic decisions go to the
  audit trail. If any call must ask, emit one ``ToolApprovalRequest`` per such call
  and stop; nothing of that turn runs (R3, R5). The verdicts are stored with the
  pending approvals (why each asks, which were denied), so the resume never decides
  again. The gate makes those records first and then stores the assistant message, in
  one write, before the first request is yielded: the pause is a saved state.
* **INVOKING_TOOLS** (``_invoke_all``). Run every call in order (R2), except those a
  policy denied (``Rejected: denied by policy (<rule>)``); failures and bad calls
  become ``Error: …`` results (R13, R14). Then the model again, unless the round limit
  is reached.
* **DONE / AWAITING_APPROVAL** end the run with exactly one ``Finish`` (R9). The step
  across runs is not a transition: a paused run's state *is* its saved session, and
  the next run's ``START`` finds the pending calls there.
* **FAILED**: an exception left a step. Every step stored so far stays stored and the
  failed step stored nothing (R10). A caller that stops iterating (closes the
  generator) is not a failure: the machine simply goes no further.

What is stored when
-------------------
The loop writes through one ``Journal`` (``journal.py``; ``ChatClientAgent`` passes a
``SessionJournal``, which saves the session after each write), at these moments only:

* START stores nothing; the run's input waits (``unsaved``). Except when a stopped
  resume asks again (R23) and the run has input: it is held in the ledger and
  ``records()`` is called before the first request is yielded.
* RESUMING: for each pending call, ``call_started(call)`` right before its tool runs
  (never for a call answered without running), then ``message(result)`` (R10, R16);
  then the input an earlier run gave while its pause was made (R23), as messages.
* CALLING_MODEL: a turn that ends the run (no calls, or calls that never run, R13,
  R14) is stored at once: the run's input first, then the turn, one ``message`` each.
  A turn with calls to judge is not stored here.
* AT_GATE: the gate writes its records into ``journal.approvals`` first; then the
  turn is stored (the input first, then the turn): records and turn reach the journal
  before any request is yielded. A stored turn judged again (R23) that pauses holds
  the run's input in the ledger instead, and ``records()`` is called.
* INVOKING_TOOLS: per call, ``call_started(call)`` before its tool runs, then
  ``message(result)``; a result given without running (denied, interrupted) is
  only the ``message``.
* The end: the input not yet stored (no model turn completed), then ``finished()``,
  then the ``Finish`` is yielded. A step that fails stores nothing more (R10).

At most once, across crashes (R16). Running a tool is the one step that cannot be
undone, so it is written ahead: ``call_started`` records durably that the call
started (the agent saves ``session.running``); its result, stored as usual, closes
that record. A crash in between leaves a call that started and has no result; the
next run is told so (``journal.started``) and, in RESUMING, answers it
``Error: interrupted: <tool> may have partly run and was not run again`` instead of
running it, unless the tool is idempotent. ``KeyboardInterrupt`` or ``SystemExit``
inside a tool store that same result before they propagate. The loop never knows
where sessions live: persisting is the journal's business.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

from . import gate, tracing
from .approvals import ApprovalLedger, approval_request
from .errors import LoopStateError, ProviderError
from .journal import Journal
from .policy import ApprovalPolicy
from .session import pending_calls
from .tools import FunctionTool, Outcome, Tool, interrupted_text, run_tool
from .types import (AgentResponseUpdate, AgentRunOptions, ChatMessage, Finish,
                    FinishReason, MessageRole, ToolApprovalResponse, ToolCall, ToolResult,
                    Usage)

MAX_CONSECUTIVE_FAILED_ROUNDS = 3  # SPEC R13


class LoopState(enum.Enum):
    """Where one run of the tool loop is (see the module's theory of operation).

    ``DONE``, ``AWAITING_APPROVAL`` and ``FAILED`` are final: no transition leaves them.
    """

    START = "start"
    RESUMING = "resuming"
    CALLING_MODEL = "calling_model"
    AT_GATE = "at_gate"
    INVOKING_TOOLS = "invoking_tools"
    AWAITING_APPROVAL = "awaiting_approval"
    DONE = "done"
    FAILED = "failed"


class LoopEvent(enum.Enum):
    """What a step reports when it ends; ``TRANSITIONS`` maps it to the next state."""

    CALLS_PENDING = "calls pending"            # the history ends with unanswered calls (R4)
    CALLS_UNRECORDED = "calls unrecorded"      # ... that no recorded pause holds (R23)
    ASKED_AGAIN = "asked again"                # a stopped resume's unanswered calls (R23)
    NOTHING_PENDING = "nothing pending"
    RESULTS_ADDED = "results added"            # one round of tool results is in (R2)
    ROUND_LIMIT = "round limit"                # the next model call would exceed max_rounds (R8)
    TURN_ENDED = "turn ended"                  # stop, length, content_filter (R14)
    TOOLS_CALLED = "tools called"              # the model's turn ended with calls
    APPROVAL_NEEDED = "approval needed"        # R3
    NO_APPROVAL_NEEDED = "no approval needed"  # R2
    ERROR = "error"                            # an exception left the step


TERMINAL = frozenset({LoopState.DONE, LoopState.AWAITING_APPROVAL, LoopState.FAILED})

TRANSITIONS: dict[tuple[LoopState, LoopEvent], LoopState] = {
    (LoopState.START, LoopEvent.CALLS_PENDING): LoopState.RESUMING,
    (LoopState.START, LoopEvent.NOTHING_PENDING): LoopState.CALLING_MODEL,
    (LoopState.START, LoopEvent.CALLS_UNRECORDED): LoopState.AT_GATE,
    (LoopState.START, LoopEvent.ASKED_AGAIN): LoopState.AWAITING_APPROVAL,
    (LoopState.RESUMING, LoopEvent.RESULTS_ADDED): LoopState.CALLING_MODEL,
    (LoopState.RESUMING, LoopEvent.ROUND_LIMIT): LoopState.DONE,
    (LoopState.CALLING_MODEL, LoopEvent.TURN_ENDED): LoopState.DONE,
    (LoopState.CALLING_MODEL, LoopEvent.TOOLS_CALLED): LoopState.AT_GATE,
    (LoopState.AT_GATE, LoopEvent.APPROVAL_NEEDED): LoopState.AWAITING_APPROVAL,
    (LoopState.AT_GATE, LoopEvent.NO_APPROVAL_NEEDED): LoopState.INVOKING_TOOLS,
    (LoopState.INVOKING_TOOLS, LoopEvent.RESULTS_ADDED): LoopState.CALLING_MODEL,
    (LoopState.INVOKING_TOOLS, LoopEvent.ROUND_LIMIT): LoopState.DONE,
    **{(state, LoopEvent.ERROR): LoopState.FAILED
       for state in LoopState if state not in TERMINAL},
}


class LoopMachine:
    """The state of one run, moved only by ``fire``.

    Args:
        on_transition: optional callback ``(old: LoopState, event: LoopEvent,
            new: LoopState) -> None`` called after every move, for tracing.
    """

    def __init__(self, on_transition: Callable | None = None):
        self.state = LoopState.START
        self._on_transition = on_transition

    def fire(self, event: LoopEvent) -> LoopState:
        """Move along ``TRANSITIONS``: the only place a run's state changes.

        Args:
            event: what the step that just ended reports (``LoopEvent``).

        Returns:
            LoopState: the new state.

        Raises:
            LoopStateError: the table has no move for ``event`` in the current state.
        """
        new = TRANSITIONS.get((self.state, event))
        if new is None:
            raise LoopStateError(f"illegal transition: {event.value!r} in state "
                                 f"{self.state.name}")
        old, self.state = self.state, new
        if self._on_transition is not None:
            self._on_transition(old, event, new)
        return new


@dataclass
class RunState:
    """Everything one run knows besides its ``LoopState``; only the steps change it.

    ``messages`` is the prompt the model sees next; ``later`` what joins it once the
    pending calls are answered (R6); ``unsaved`` the run's input not yet handed to
    the ``journal`` (R10), which also holds the ledger (``approvals``) and the ids of
    calls an earlier run started and never finished (``started``, R16). ``rounds`` counts model rounds (R8), ``failed_rounds``
    consecutive rounds in which every call failed (R13); ``usage`` sums tokens.
    """

    messages: list[ChatMessage]
    options: AgentRunOptions
    journal: Journal
    later: list[ChatMessage] = field(default_factory=list)
    unsaved: list[ChatMessage] = field(default_factory=list)
    pending: list[ToolCall] = field(default_factory=list)
    responses: dict[str, ToolApprovalResponse] = field(default_factory=dict)
    verdicts: dict[str, gate.GateVerdict] = field(default_factory=dict)  # the gate's, by call id
    turn: ChatMessage | None = None  # a model turn not stored yet, whose calls are at hand
    calls: list[ToolCall] = field(default_factory=list)  # the calls at the gate
    held: list[ChatMessage] = field(default_factory=list)  # input held by a pause (R23)
    rounds: int = 0
    failed_rounds: int = 0
    usage: Usage | None = None
    finish_reason: FinishReason = FinishReason.STOP

    @property
    def approvals(self) -> ApprovalLedger | None:
        """The journal's ``ApprovalLedger``, or ``None`` (only the history is checked)."""
        return self.journal.approvals

    @property
    def started(self) -> frozenset:
        """Ids (str) of calls an earlier run started and never finished (R16)."""
        return self.journal.started

    def store(self, message: ChatMessage) -> None:
        """Add a message to the prompt and hand it over for persisting (SPEC R10); the
        run's input goes first, with the first completed model turn.

        Args:
            message: the completed step's ``ChatMessage`` (assistant turn or tool
                result).
        """
        if message.role is MessageRole.ASSISTANT:
            self.store_input()
        self.messages.append(message)
        self.journal.message(message)

    def record_start(self, call: ToolCall) -> None:
        """The write-ahead record (SPEC R16), before the call's tool runs.

        Args:
            call: the ``ToolCall`` about to run; ``journal.call_started`` saves that
                it started. An exception from it stops the run before the tool runs.
        """
        self.journal.call_started(call)

    def store_input(self) -> None:
        """Hand the run's input not yet persisted to the journal, once (SPEC R10)."""
        for message in self.unsaved:
            self.journal.message(message)
        self.unsaved.clear()

    def next_round(self) -> "LoopEvent":
        """``RESULTS_ADDED`` while another model call fits in ``max_rounds``, else
        ``ROUND_LIMIT`` (R8)."""
        if self.rounds >= self.options.max_rounds:
            self.finish_reason = FinishReason.MAX_ROUNDS
            return LoopEvent.ROUND_LIMIT
        return LoopEvent.RESULTS_ADDED


class FunctionInvokingChatClient:
    """Runs the model's tool calls and pauses for approval (SPEC §4).

    Args:
        inner: the provider client, e.g. ``OpenAIChatClient``: ``run(messages,
            options, tools)`` yields updates, the last a ``Finish`` whose ``message``
            is the turn's assembled assistant message.
        tools: the ``Tool`` objects offered to the model (plain functions are wrapped
            in ``FunctionTool``).
        on_transition: optional callback ``(old: LoopState, event: LoopEvent,
            new: LoopState)`` called on every state change, for tracing.
        approval_ttl: seconds an approval request stays valid; an answer after that
            counts as a rejection with reason ``approval expired``. ``None``: forever.
        policy: an ``agentflow.policy.ApprovalPolicy``, or a list of them in layer
            order (e.g. ``agentflow.policy.standard_layers()``: the project file, then
            the user file); they come after a run's own policy and the session's
            grants (SPEC R19).

    Raises:
        ValueError: two tools share a name.
        TypeError: ``policy`` holds something that is not an ``ApprovalPolicy``.
        PolicyError: a policy rule that can never match these tools (R19).
    """

    def __init__(self, inner, tools: Iterable = (), on_transition: Callable | None = None,
                 approval_ttl: float | None = None, policy=None):
        self.inner = inner
        self.approval_ttl = approval_ttl
        self.clock = time.time  # POSIX seconds; replaceable in tests
        self.tools = [t if isinstance(t, Tool) else FunctionTool(t) for t in tools]
        names = [t.name for t in self.tools]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"two tools share the name(s) {', '.join(doubled)}; the model "
                             "could not tell them apart")
        self._by_name = {t.name: t for t in self.tools}
        self.on_transition = on_transition
        self.policies = gate.checked_layers(policy, self._by_name)

    def add_policy(self, layer: ApprovalPolicy, before: str | None = None) -> None:
        """Add a policy layer to the client's, or replace the layer of the same name
        (SPEC R19), checked against the tools first.

        Args:
            layer: the ``ApprovalPolicy``; a layer with its ``name`` is replaced in place.
            before: the name (str) of the layer it goes in front of when it is new;
                ``None``, or a name no layer has: it goes first.

        Raises:
            PolicyError: a rule of ``layer`` can never match the tools.
        """
        layer.check(self._by_name)
        names = [l.name for l in self.policies]
        if layer.name in names:
            self.policies[names.index(layer.name)] = layer
        else:
            self.policies.insert(names.index(before) if before in names else 0, layer)

    def layers(self, run_policy: ApprovalPolicy | None = None,
               approvals: ApprovalLedger | None = None) -> list:
        """The policy layers a call of a run meets, in their fixed order (SPEC R19):
        the run's own, the session's active grants, the client's.

        Args:
            run_policy: the run's ``AgentRunOptions.policy``, or ``None``.
            approvals: the session's ``ApprovalLedger`` (for its grants), or ``None``.

        Returns:
            list[ApprovalPolicy]: first first.
        """
        return gate.layers_in_order(run_policy, approvals, self.policies, self.clock())

    def _tool(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def run(self, messages: Sequence[ChatMessage], options: AgentRunOptions | None = None,
            journal: Journal | None = None,
            new_messages: Sequence[ChatMessage] = ()) -> Iterator[AgentResponseUpdate]:
        """Run the loop; a generator of updates.

        Args:
            messages: the prompt so far, oldest first (instructions, context, history).
            options: ``AgentRunOptions``; its ``tool_approval_responses`` answer a
                paused turn (R4).
            journal: the ``Journal`` the run writes to and reads the ledger and the
                started calls from (the module docstring says what is stored when);
                ``None``: a fresh in-memory ``Journal()``, without a ledger.
            new_messages: this run's input; placed after the results of any pending
                calls, never between a tool-call message and its results (R6), and
                stored with the first completed model turn (R10).

        Yields:
            The caller-visible updates; the last is always one ``Finish`` whose reason
            is ``STOP``, ``LENGTH``, ``CONTENT_FILTER``, ``AWAITING_APPROVAL`` or
            ``MAX_ROUNDS`` (R9).

        Raises:
            ApprovalError: responses that fit no pending call, or an ambiguous pending
                turn (R11, R17), edited arguments that do not fit (R20), a grant that
                can never match (R19); before anything executes.
            PolicyError: ``options.policy`` has a rule that can never match (R19).
            ProviderError: from the provider client; what completed before is stored.
            KeyboardInterrupt, SystemExit: from inside a tool, after its
                ``Error: interrupted: …`` result was stored (R16).
        """
        run = RunState(list(messages), options or AgentRunOptions(),
                       journal if journal is not None else Journal(),
                       unsaved=list(new_messages))
        machine = LoopMachine(self.on_transition)
        try:
            while machine.state not in TERMINAL:
                event = yield from self._STEPS[machine.state](self, run)
                machine.fire(event)
        except GeneratorExit:
            raise  # the caller stopped reading: not a failure
        except BaseException:
            machine.fire(LoopEvent.ERROR)
            raise
        run.store_input()
        run.journal.finished()
        yield Finish(run.finish_reason, run.usage)

    # -- the steps, one per state ------------------------------------------------------

    def _start(self, run: RunState) -> Iterator[AgentResponseUpdate]:
        insert_at, pending, answered = pending_calls(run.messages)
        given = list(run.options.tool_approval_responses)
        recorded = gate.recorded_responses(run.approvals, pending, given, run.started)
        run.responses = gate.check_answers(
            given + recorded, pending, answered, run.started,
            self._by_name, run.approvals, run.options.policy, lambda: self._layers(run))
        run.options = run.options.with_tool_approval_responses(())
        run.later = run.messages[insert_at:] + run.unsaved
        del run.messages[insert_at:]
        run.pending = pending
        if pending and gate.unrecorded(pending, run.approvals, run.started):
            run.calls = pending  # R23: judged as if the model had just made them
            return LoopEvent.CALLS_UNRECORDED
        again = gate.asked_again(pending, run.approvals, run.responses, bool(given))
        if again:  # R23: a resume stopped part way; its unanswered calls ask again
            if run.unsaved:  # R6: the run's input waits behind the pause
                run.approvals.hold(run.unsaved)
                run.unsaved.clear()
                run.journal.records()
            calls = {c.id: c for c in pending}
            for record in again:
                tool = self._tool(record.tool)
                yield approval_request(calls[record.call_id],
                                       tool.description if tool else record.description or "",
                                       record)
            run.finish_reason = FinishReason.AWAITING_APPROVAL
            return LoopEvent.ASKED_AGAIN
        if pending:
            if run.approvals is not None:
                run.held = run.approvals.take_held()
            return LoopEvent.CALLS_PENDING
        run.messages += run.later
        run.later = []
        return LoopEvent.NOTHING_PENDING

    def _layers(self, run: RunState) -> list:
        return self.layers(run.options.policy, run.approvals)

    def _resume(self, run: RunState) -> Iterator[AgentResponseUpdate]:
        def answer_without_running(call: ToolCall) -> str | None:
            return gate.answer_on_resume(call, self._tool(call.name), run.started,
                                         run.approvals, run.responses.get(call.id),
                                         self.clock())

        failed = yield from self._answer(run, run.pending, answer_without_running)
        for message in run.held:  # input an earlier run gave while its pause was made
            run.store(message)
        run.messages += run.later  # R6: the input goes after the results
        run.later = []
        run.rounds = 1
        run.failed_rounds = 1 if failed else 0
        return run.next_round()

    def _call_model(self, run: RunState) -> Iterator[AgentResponseUpdate]:
        tools_enabled = run.failed_rounds < MAX_CONSECUTIVE_FAILED_ROUNDS  # R13
        options = (run.options if tools_enabled
                   else dataclasses.replace(run.options, tool_choice="none"))
        finish = None
        updates = self.inner.run(run.messages, options, tools=self.tools)
        traced = tracing.current()
        if traced is not None:
            updates = traced.chat(updates, options)
        for update in updates:
            if isinstance(update, Finish):
                finish = update  # R9: the provider's finish is ours to interpret
            else:
                yield update
        if finish is None or finish.message is None:
            raise ProviderError(f"the provider client {self.inner!r} ended a turn without "
                                "a Finish carrying the assembled message (Finish.message)")
        if finish.usage is not None:
            run.usage = finish.usage + run.usage
        message, reason = finish.message, finish.finish_reason
        if (message.tool_calls and tools_enabled
                and reason not in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER)):
            run.turn, run.calls = message, list(message.tool_calls)  # stored at the gate
            return LoopEvent.TOOLS_CALLED
        if message.tool_calls:
            # R14: calls cut off or filtered never run; R13: tools were disabled. The
            # history keeps the text only, so every stored call has a result.
            message = ChatMessage.assistant(message.content or "")
        run.store(message)
        run.finish_reason = FinishReason.STOP if reason is FinishReason.TOOL_CALLS else reason
        return LoopEvent.TURN_ENDED

    def _gate(self, run: RunState) -> Iterator[AgentResponseUpdate]:
        run.verdicts, requests = gate.gate_turn(run.calls, self._by_name, self._layers(run),
                                                run.approvals, self.clock(),
                                                self.approval_ttl, run.started)
        traced = tracing.current()
        if requests and traced is not None:  # its context goes into the pause's records
            traced.paused(run.approvals, requests)
        if run.turn is not None:  # R23: the turn and its records in one write
            run.store(run.turn)
        elif requests and run.approvals is not None:
            # R23, R6: a re-gated turn pauses; the run's input waits behind the pause
            run.approvals.hold(run.unsaved)
            run.later = [m for m in run.later if all(m is not u for u in run.unsaved)]
            run.unsaved.clear()
            run.journal.records()
        if not requests:
            return LoopEvent.NO_APPROVAL_NEEDED
        yield from requests  # R3: nothing of this turn runs
        run.finish_reason = FinishReason.AWAITING_APPROVAL
        return LoopEvent.APPROVAL_NEEDED

    def _invoke_all(self, run: RunState) -> Iterator[AgentResponseUpdate]:
        def answer_without_running(call: ToolCall) -> str | None:
            return gate.answer_at_gate(run.verdicts.get(call.id), call,
                                       self._tool(call.name), run.started)

        failed = yield from self._answer(run, run.calls, answer_without_running)
        run.turn = None
        run.messages += run.later  # R6: after the results of a re-gated turn
        run.later = []
        run.rounds += 1
        run.failed_rounds = run.failed_rounds + 1 if failed else 0
        return run.next_round()

    _STEPS = {
        LoopState.START: _start,
        LoopState.RESUMING: _resume,
        LoopState.CALLING_MODEL: _call_model,
        LoopState.AT_GATE: _gate,
        LoopState.INVOKING_TOOLS: _invoke_all,
    }

    # -- answering calls ---------------------------------------------------------------

    def _answer(self, run: RunState, calls: list[ToolCall],
                answer_without_running: Callable[[ToolCall], str | None]
                ) -> Iterator[AgentResponseUpdate]:
        """Give each call, in order, its one result: the text
        ``answer_without_running(call)`` returns (a rejection, R4, R7; an interruption,
        R16), or, when it returns ``None``, what running the call gives. Each result
        is stored at once (R10). Returns whether calls ran and every one of them
        failed (R13)."""
        ran = failures = 0
        for call in calls:
            text = answer_without_running(call)
            if text is None:
                outcome = self._invoke(run, call)
                ran += 1
                failures += outcome.failed
                text = outcome.text
            run.store(ChatMessage.tool(text, call.id))
            yield ToolResult(call.id, call.name, text)
        return ran > 0 and failures == ran

    def _invoke(self, run: RunState, call: ToolCall) -> Outcome:
        """Run one call (R13, R14), written ahead (R16): ``run_tool`` with this run's
        write-ahead record, and the interrupted result stored if the tool is stopped."""
        tool = self._tool(call.name)
        traced = tracing.current()
        if traced is None:
            return run_tool(tool, call, run.record_start, lambda: run.store(
                ChatMessage.tool(interrupted_text(call.name), call.id)))
        with traced.tool_started(call, tool) as span:
            outcome = run_tool(tool, call, run.record_start, lambda: run.store(
                ChatMessage.tool(interrupted_text(call.name), call.id)))
            span.done(outcome)
        return outcome
