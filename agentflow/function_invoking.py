"""The tool loop and the approval gate: ``FunctionInvokingChatClient`` and ``LoopState``.

Theory of operation
-------------------
``FunctionInvokingChatClient`` wraps a provider client (anything with
``run(messages, options, tools)`` yielding updates) and runs the tools the model
calls. One ``run`` is one walk through a small state machine::

    START ──calls pending──▶ RESUMING ──results added──▶ CALLING_MODEL
      └────nothing pending──────────────────────────────────▲  │
                                                            │  ├─turn ended──────▶ DONE
                              INVOKING_TOOLS ◀─tools called─┼──┤
                                    └──results added────────┘  ├─approval needed─▶ AWAITING_APPROVAL
                                                               └─round limit─────▶ DONE

* **START.** If the last assistant message with tool calls still has calls without
  a ``tool`` result, the run is a resume (SPEC R4); otherwise the model is called.
  The caller's approval responses are checked first: one that names no pending call
  is an ``ApprovalError`` before anything runs (R11).
* **RESUMING.** Each pending call, in call order: approved → executed; anything else
  → ``Rejected: <reason>`` (R4, R5, R7). Results go right after the assistant
  message they answer, before any new input (R6). That counts as one round.
* **CALLING_MODEL.** One round: stream one model turn, forwarding text, reasoning and
  tool-call updates as they come, but not the provider's ``Finish`` (R9). When the
  round counter has reached ``max_rounds``, end with ``MAX_ROUNDS`` instead (R8).
* **The approval gate** sits at the end of a model turn: if any called tool requires
  approval, persist the assistant message, emit one ``ToolApprovalRequest`` per such
  call and end with ``AWAITING_APPROVAL``; nothing of that turn runs (R3, R5).
* **INVOKING_TOOLS.** Otherwise run every call in order (R2); failures and bad calls
  become ``Error: …`` results (R13, R14); then call the model again.

Every message is handed to the ``on_message`` callback as soon as its step completes
(R10), which is how ``ChatClientAgent`` persists the session. A model call that fails
hands over nothing. ``TRANSITIONS`` below is the whole machine: ``fire`` refuses any
other move with ``LoopStateError``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import time
from typing import Callable, Iterable, Iterator, Sequence

from .approvals import ApprovalLedger, arguments_digest
from .assembler import TextBuffer
from .errors import ApprovalError, LoopStateError
from .tools import FunctionTool, Tool
from .types import (AgentResponseUpdate, AgentRunOptions, ChatMessage, Finish,
                    FinishReason, MessageRole, TextDelta, ToolApprovalRequest, ToolCall,
                    ToolCallArgs, ToolCallStart, ToolResult, Usage)

DEFAULT_REJECTION_REASON = "User denied"
MAX_CONSECUTIVE_FAILED_ROUNDS = 3  # SPEC R13


class LoopState(enum.Enum):
    START = "start"
    RESUMING = "resuming"
    CALLING_MODEL = "calling_model"
    INVOKING_TOOLS = "invoking_tools"
    AWAITING_APPROVAL = "awaiting_approval"
    DONE = "done"
    FAILED = "failed"


class LoopEvent(enum.Enum):
    CALLS_PENDING = "calls pending"          # the history ends with unanswered calls
    NOTHING_PENDING = "nothing pending"
    RESULTS_ADDED = "results added"          # one round of tool results is in
    ROUND_LIMIT = "round limit"              # R8
    TURN_ENDED = "turn ended"                # stop, length, content_filter
    TOOLS_CALLED = "tools called"            # R2
    APPROVAL_NEEDED = "approval needed"      # R3
    ERROR = "error"                          # an exception left the loop


TRANSITIONS: dict[tuple[LoopState, LoopEvent], LoopState] = {
    (LoopState.START, LoopEvent.CALLS_PENDING): LoopState.RESUMING,
    (LoopState.START, LoopEvent.NOTHING_PENDING): LoopState.CALLING_MODEL,
    (LoopState.RESUMING, LoopEvent.RESULTS_ADDED): LoopState.CALLING_MODEL,
    (LoopState.CALLING_MODEL, LoopEvent.ROUND_LIMIT): LoopState.DONE,
    (LoopState.CALLING_MODEL, LoopEvent.TURN_ENDED): LoopState.DONE,
    (LoopState.CALLING_MODEL, LoopEvent.TOOLS_CALLED): LoopState.INVOKING_TOOLS,
    (LoopState.CALLING_MODEL, LoopEvent.APPROVAL_NEEDED): LoopState.AWAITING_APPROVAL,
    (LoopState.INVOKING_TOOLS, LoopEvent.RESULTS_ADDED): LoopState.CALLING_MODEL,
    **{(state, LoopEvent.ERROR): LoopState.FAILED
       for state in (LoopState.START, LoopState.RESUMING, LoopState.CALLING_MODEL,
                     LoopState.INVOKING_TOOLS)},
}


class LoopMachine:
    """The state of one run. ``fire(event)`` moves along ``TRANSITIONS`` or raises
    ``LoopStateError``; ``on_transition(old, event, new)`` sees every move."""

    def __init__(self, on_transition: Callable | None = None):
        self.state = LoopState.START
        self._on_transition = on_transition

    def fire(self, event: LoopEvent) -> LoopState:
        new = TRANSITIONS.get((self.state, event))
        if new is None:
            raise LoopStateError(f"illegal transition: {event.value!r} in state "
                                 f"{self.state.name}")
        old, self.state = self.state, new
        if self._on_transition is not None:
            self._on_transition(old, event, new)
        return new


def pending_calls(messages: Sequence[ChatMessage]) -> tuple[int, list[ToolCall], set[str]]:
    """Find the calls still waiting for a result (SPEC R4).

    Returns ``(insert_at, pending, answered)``: the position right after the last
    assistant tool-call message and the ``tool`` results that follow it (where new
    results belong, R6); its calls that have no result yet, in call order; and the
    ids of those that have one. ``(len(messages), [], set())`` when there is none.
    """
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role is MessageRole.ASSISTANT and message.tool_calls:
            ids = {call.id for call in message.tool_calls}
            insert_at = position + 1
            answered: set[str] = set()
            while (insert_at < len(messages) and messages[insert_at].role is MessageRole.TOOL
                   and messages[insert_at].tool_call_id in ids):
                answered.add(messages[insert_at].tool_call_id)
                insert_at += 1
            pending = [call for call in message.tool_calls if call.id not in answered]
            return insert_at, pending, answered
    return len(messages), [], set()


def rejection_text(reason: str | None) -> str:
    """``Rejected: <reason>``, the reason exactly as given; a missing or blank
    (whitespace-only) reason is ``User denied`` (SPEC R7)."""
    if reason is None or not reason.strip():
        reason = DEFAULT_REJECTION_REASON
    return f"Rejected: {reason}"


class FunctionInvokingChatClient:
    """Runs the model's tool calls and pauses for approval (SPEC §4).

    Args:
        inner: the provider client, e.g. ``OpenAIChatClient``.
        tools: the ``Tool`` objects offered to the model (plain functions are wrapped
            in ``FunctionTool``).
        on_transition: optional callback ``(old: LoopState, event: LoopEvent,
            new: LoopState)`` called on every state change, for tracing.
        approval_ttl: seconds an approval request stays valid; an answer after that
            counts as a rejection with reason ``approval expired``. ``None``: forever.
    """

    def __init__(self, inner, tools: Iterable = (), on_transition: Callable | None = None,
                 approval_ttl: float | None = None):
        self.inner = inner
        self.approval_ttl = approval_ttl
        self.clock = time.time  # POSIX seconds; replaceable in tests
        self.tools = [t if isinstance(t, Tool) else FunctionTool(t) for t in tools]
        names = [t.name for t in self.tools]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"two tools share the name(s) {', '.join(doubled)}; the model "
                             "could not tell them apart")
        self.on_transition = on_transition

    def _tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def run(self, messages: Sequence[ChatMessage], options: AgentRunOptions | None = None,
            on_message: Callable[[ChatMessage], None] | None = None,
            approvals: ApprovalLedger | None = None) -> Iterator[AgentResponseUpdate]:
        """Run the loop over ``messages`` (the full prompt, oldest first).

        Yields the caller-visible updates; the last is always one ``Finish`` whose
        reason is ``STOP``, ``LENGTH``, ``CONTENT_FILTER``, ``AWAITING_APPROVAL`` or
        ``MAX_ROUNDS`` (R9). ``on_message(message)`` receives each new assistant and
        tool message as its step completes (R10). ``approvals``, the session's
        ``ApprovalLedger``, binds each decision to the call it was asked for
        (``approvals.py``); without it only the history is checked.

        Raises ``ApprovalError`` (R11) before anything executes, and lets the provider
        client's errors through (``ProviderError`` and its subclasses).
        """
        options = options or AgentRunOptions()
        machine = LoopMachine(self.on_transition)
        try:
            yield from self._loop(list(messages), options, machine,
                                  on_message or (lambda m: None), approvals)
        except BaseException:
            if machine.state not in (LoopState.DONE, LoopState.AWAITING_APPROVAL,
                                     LoopState.FAILED):
                machine.fire(LoopEvent.ERROR)
            raise

    def _loop(self, messages: list[ChatMessage], options: AgentRunOptions,
              machine: LoopMachine, on_message, approvals: ApprovalLedger | None
              ) -> Iterator[AgentResponseUpdate]:
        insert_at, pending, answered = pending_calls(messages)
        responses = _check_responses(options.tool_approval_responses, pending, answered)
        if approvals is not None:
            approvals.check(pending, responses)
        orphans = [c for c in pending if c.id in responses and responses[c.id].approved
                   and self._tool(c.name) is None]
        if orphans:
            raise ApprovalError(
                f"approved call(s) {', '.join(c.id for c in orphans)} name tool(s) "
                f"{', '.join(sorted({c.name for c in orphans}))} that this agent does not "
                "have; give it the tools the run paused with. Nothing was executed.",
                [c.id for c in orphans])
        options = options.with_tool_approval_responses(())
        usage: Usage | None = None
        rounds = failed_rounds = 0  # R8; R13
        tools_enabled = True

        if pending:  # R4: answer the calls of the paused turn before anything else
            machine.fire(LoopEvent.CALLS_PENDING)

            def decide(call: ToolCall) -> tuple[bool, str | None]:
                response = responses.get(call.id)
                if approvals is not None and approvals.awaits(call.id):
                    return approvals.decide(call, response, self.clock())
                return (response is not None and response.approved,
                        response.reason if response else None)

            outcomes = yield from self._answer(pending, decide, messages, insert_at, on_message)
            rounds, failed_rounds = 1, 1 if outcomes and all(outcomes) else 0
            machine.fire(LoopEvent.RESULTS_ADDED)
        else:
            machine.fire(LoopEvent.NOTHING_PENDING)

        while True:
            if rounds >= options.max_rounds:
                machine.fire(LoopEvent.ROUND_LIMIT)
                yield Finish(FinishReason.MAX_ROUNDS, usage)
                return
            if failed_rounds >= MAX_CONSECUTIVE_FAILED_ROUNDS:
                tools_enabled = False  # R13: one last call that may not use tools
            turn_options = options if tools_enabled else _without_tools(options)
            text = TextBuffer()
            calls: dict[str, ToolCall] = {}
            finish = Finish(FinishReason.STOP)
            for update in self.inner.run(messages, turn_options, tools=self.tools):
                if isinstance(update, Finish):
                    finish = update  # R9: the provider's finish is ours to interpret
                    continue
                if isinstance(update, TextDelta):
                    text.append(update.text)
                elif isinstance(update, ToolCallStart):
                    calls[update.call_id] = ToolCall(update.call_id, update.name, "")
                elif isinstance(update, ToolCallArgs):
                    calls[update.call_id].arguments += update.delta
                yield update
            if finish.usage is not None:
                usage = finish.usage + usage
            content = str(text) or None

            if (not calls or finish.finish_reason is FinishReason.LENGTH
                    or not tools_enabled):
                # R14: calls cut off by length are dropped; R13: tools were disabled.
                message = ChatMessage.assistant(content)
                messages.append(message)
                on_message(message)
                machine.fire(LoopEvent.TURN_ENDED)
                reason = finish.finish_reason
                if reason is FinishReason.TOOL_CALLS:
                    reason = FinishReason.STOP
                yield Finish(reason, usage)
                return

            message = ChatMessage.assistant(content, list(calls.values()))
            messages.append(message)
            on_message(message)

            gated = [c for c in message.tool_calls
                     if (tool := self._tool(c.name)) is not None and tool.requires_approval()]
            if gated:  # the approval gate (R3): nothing of this turn runs
                machine.fire(LoopEvent.APPROVAL_NEEDED)
                now = self.clock()
                records = [approvals.issue(call, now, self.approval_ttl)
                           if approvals is not None else None for call in gated]
                for call, record in zip(gated, records):
                    yield ToolApprovalRequest(call.id, call.name, _parse_or_none(call.arguments),
                                              self._tool(call.name).description,
                                              record.digest if record else
                                              arguments_digest(call.arguments))
                yield Finish(FinishReason.AWAITING_APPROVAL, usage)
                return

            machine.fire(LoopEvent.TOOLS_CALLED)
            outcomes = yield from self._answer(message.tool_calls, lambda call: (True, None),
                                               messages, len(messages), on_message)
            rounds += 1
            failed_rounds = failed_rounds + 1 if outcomes and all(outcomes) else 0
            machine.fire(LoopEvent.RESULTS_ADDED)

    def _answer(self, calls: list[ToolCall], decide, messages: list[ChatMessage],
                position: int, on_message) -> Iterator[AgentResponseUpdate]:
        """Give each call, in order, its one result: run it if ``decide(call)`` says
        ``(True, _)``, else ``Rejected: <reason>``. Each result goes into ``messages``
        at ``position`` onwards and to ``on_message`` at once (R6, R10). Returns, per
        call that ran, whether it failed (R13)."""
        outcomes = []
        for call in calls:
            may_run, reason = decide(call)
            if may_run:
                result, failed = self._invoke(call)
                outcomes.append(failed)
            else:
                result = rejection_text(reason)
            message = ChatMessage.tool(result, call.id)
            messages.insert(position, message)
            position += 1
            on_message(message)
            yield ToolResult(call.id, call.name, result)
        return outcomes

    def _invoke(self, call: ToolCall) -> tuple[str, bool]:
        """Run one call; return ``(result text, failed)`` (R13, R14)."""
        tool = self._tool(call.name)
        if tool is None:
            return f"Error: unknown tool '{call.name}'", True
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError as exc:
            return f"Error: arguments are not valid JSON: {exc}", True
        if not isinstance(arguments, dict):
            return ("Error: arguments are not valid JSON: expected an object, got "
                    f"{type(arguments).__name__}"), True
        try:
            result = tool.invoke(arguments)
        except Exception as exc:  # the model hears about it; the loop goes on (R13)
            return f"Error: {type(exc).__name__}: {exc}", True
        return (result if isinstance(result, str) else str(result)), False


def _check_responses(responses, pending: list[ToolCall], answered: set[str]) -> dict:
    """Map call_id → response, refusing any response that matches no pending call
    (unknown, already answered or given twice) with ``ApprovalError`` (R11)."""
    pending_ids = {call.id for call in pending}
    by_id: dict = {}
    unknown, already, twice = [], [], []
    for response in responses:
        if response.call_id in by_id:
            twice.append(response.call_id)
        elif response.call_id in answered:
            already.append(response.call_id)
        elif response.call_id not in pending_ids:
            unknown.append(response.call_id)
        else:
            by_id[response.call_id] = response
    problems = []
    if unknown:
        problems.append(f"no pending call has the id(s) {', '.join(unknown)}")
    if already:
        problems.append(f"call(s) {', '.join(already)} already have a result")
    if twice:
        problems.append(f"call(s) {', '.join(twice)} were answered more than once")
    if problems:
        hint = (f"pending calls: {', '.join(sorted(pending_ids))}" if pending_ids
                else "the session has no pending call; resume with the same AgentSession "
                     "the run paused in")
        raise ApprovalError(f"approval responses do not fit the paused run: "
                            f"{'; '.join(problems)} ({hint}). Nothing was executed.",
                            unknown + already + twice)
    return by_id


def _without_tools(options: AgentRunOptions) -> AgentRunOptions:
    return dataclasses.replace(options, tool_choice="none")


def _parse_or_none(arguments: str):
    try:
        return json.loads(arguments)
    except ValueError:
        return None
