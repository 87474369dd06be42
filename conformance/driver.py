"""agentflow driven through one case: its tools and providers built from the case's
JSON, its turns run one by one, every update in the protocol's JSON form
(``agentflow.types.update_to_json``). Used in-process by the runner, by the reference
adapter (``conformance/agentflow_adapter.py``) and by ``agentflow replay``.
"""

from __future__ import annotations

import contextlib
import json

import agentflow
import agentflow.errors
from agentflow import (AgentSession, ChatClientAgent, Context, ContextProvider,
                       OpenAIChatClient, Tool)
from agentflow.canonical import canonical_json
from agentflow.journal import Journal
from agentflow.policy import ApprovalPolicy
from agentflow.stores.answers import record_answers
from agentflow.types import (AgentRunOptions, ChatMessage, ToolApprovalResponse, ToolResult,
                             update_to_json)

_OPTION_NAMES = ("max_rounds", "temperature", "tool_choice", "parallel_tool_calls",
                 "max_tokens", "model")


class CaseTool(Tool):
    """A tool with one of the fixed behaviours of the case format (README, "BEHAVIOUR"):
    ``return`` a value, ``echo`` the arguments as RFC 8785 canonical JSON, or ``raise``
    an error of a named type. Each execution is appended to ``executions``."""

    def __init__(self, spec: dict, executions: list):
        self.name = spec["name"]
        self.description = spec.get("description", "")
        self.parameters = spec.get("parameters") or {"type": "object", "properties": {}}
        self._approval = bool(spec.get("requires_approval"))
        self._when = spec.get("approval_when")  # agentflow suite (R18)
        self.subject = spec.get("subject")  # agentflow suite (R19)
        self.subject_kind = spec.get("subject_kind", "text")
        self._behaviour = spec.get("behaviour") or {"kind": "return", "value": "ok"}
        self._executions = executions

    def requires_approval(self) -> bool:
        return self._approval

    def needs_approval(self, arguments: dict):
        when = self._when
        if not self._approval or when is None:
            return self._approval
        if "raise" in when:
            raise type(when["raise"]["type"], (Exception,), {})(when["raise"]["message"])
        return arguments[when["argument"]] > when["above"]

    def invoke(self, arguments: dict) -> str:
        self._executions.append({"tool": self.name, "arguments": arguments})
        kind = self._behaviour["kind"]
        if kind == "return":
            return self._behaviour["value"]
        if kind == "echo":
            return canonical_json(arguments)
        if kind == "raise":
            error_type = type(self._behaviour["type"], (Exception,), {})
            raise error_type(self._behaviour["message"])
        raise ValueError(f"unknown tool behaviour {kind!r}")


class StaticContext(ContextProvider):
    """A case's context provider: the same instructions and messages on every run."""

    def __init__(self, spec: dict):
        self.context = Context(spec.get("instructions"),
                               [ChatMessage.from_openai(m) for m in spec.get("messages", [])])

    def on_invoking(self, messages, session):
        return self.context


class CaseDriver:
    """Drives agentflow through one case: ``setup`` once, then ``run`` per turn; a
    second ``setup`` starts the next case from nothing.

    Args:
        on_transition: handed to the loop as ``FunctionInvokingChatClient.on_transition``
            (called as ``on_transition(old, event, new)``), or ``None``.
    """

    def __init__(self, on_transition=None):
        self.on_transition = on_transition

    def setup(self, message: dict) -> dict:
        """Build the agent and an empty session from a ``setup`` message (README,
        "Adapters"). Returns the ``ready`` message."""
        self.executions: list = []
        client = OpenAIChatClient(model=message.get("model", "conformance-model"),
                                  base_url=message["base_url"],
                                  api_key=message.get("api_key", ""),
                                  profile=message.get("profile"))
        policy = message.get("policy")  # agentflow suite (R19)
        self.agent = ChatClientAgent(
            client, instructions=message.get("instructions"),
            tools=[CaseTool(t, self.executions) for t in message.get("tools", [])],
            context_providers=[StaticContext(c) for c in message.get("context_providers", [])],
            policy=ApprovalPolicy.from_dict(policy) if policy else None)
        self.agent.chat_client.on_transition = self.on_transition
        # "session": false (README, "A run without a session"): no AgentSession and so
        # no approval ledger; the loop runs without an agent's session, as journal.py's
        # ``Journal`` does, and this driver carries the messages each run returned.
        self.session = AgentSession() if message.get("session", True) is not False else None
        self.history: list[ChatMessage] = []
        return {"type": "ready", "implementation": f"agentflow {agentflow.__version__}",
                "suites": ["core", "agentflow"], "derives": [], "cannot": {},
                "can": ["stop_after", "no_session", "recorded_answers"]}

    def run(self, message: dict, emit) -> dict:
        """Run one turn from a ``run`` message, calling ``emit(update_json)`` per update.
        With ``stop_after`` N, the person stops the run once it yielded its N-th
        ``tool_result``: the generator is closed there, as a UI's Ctrl-C does (README,
        "Stopping a run"). ``recorded_answers`` are recorded in the session first, as an
        inbox records a person's answers (``stores.answers.record_answers``); the run
        itself is handed only ``approvals``. Returns the ``end`` message: the error
        (``None`` or ``{"kind", "message"}``), the whole history (the session's, or
        without a session the messages carried from run to run) and this turn's
        executions.

        Raises:
            ValueError: ``reload_session`` or ``recorded_answers`` in a case without a
                session.
        """
        del self.executions[:]
        if message.get("reload_session"):  # R15: only the JSON form survives
            if self.session is None:
                raise ValueError("reload_session needs a session; the case has none")
            self.session = AgentSession.from_dict(json.loads(json.dumps(self.session.to_dict())))
        options = AgentRunOptions(**{k: v for k, v in (message.get("options") or {}).items()
                                     if k in _OPTION_NAMES})
        responses = [_response(a) for a in message.get("approvals", [])]
        recorded = [_response(a) for a in message.get("recorded_answers", [])]
        if recorded and self.session is None:
            raise ValueError("recorded_answers need a session; the case has none")
        if responses:
            options = options.with_tool_approval_responses(responses)
        new_input = [ChatMessage.from_openai(m) for m in message.get("input", [])]
        stop_after = message.get("stop_after")
        results, error = 0, None
        try:
            if recorded:  # an inbox's answers, before the run (SPEC R23, fourth batch)
                record_answers(self.session, "conformance", recorded)
            updates = (self.agent.run(new_input, self.session, options)
                       if self.session is not None else self._without_session(new_input, options))
            with contextlib.closing(updates):  # closing it is how a caller stops a run
                for update in updates:
                    emit(update_to_json(update))
                    results += isinstance(update, ToolResult)
                    if stop_after is not None and results == stop_after:
                        break
        except agentflow.errors.AgentflowError as exc:
            error = {"kind": _error_kind(exc), "message": str(exc)}
        history = self.session.messages if self.session is not None else self.history
        return {"type": "end", "error": error,
                "history": [_as_sent_next(m) for m in history],
                "executions": list(self.executions)}

    def _without_session(self, new_input: list[ChatMessage], options: AgentRunOptions):
        """The agent's loop run with no session (SPEC §8: a framework that keeps none is
        saved the way its documentation shows): the prompt the agent would build, the
        history this driver carries, an in-memory ``Journal`` without a ledger; what
        the run stored joins the history however it ends (R10: what it returned)."""
        journal = Journal()
        try:
            yield from self.agent.chat_client.run(
                self.agent._prompt(new_input, None) + self.history, options, journal,
                new_input)
        finally:
            self.history += journal.messages


def _response(answer: dict) -> ToolApprovalResponse:
    """A case's approval (README, "TURN") as agentflow's ``ToolApprovalResponse``."""
    return ToolApprovalResponse(answer["call_id"], answer["approved"], answer.get("reason"),
                                answer.get("digest"), answer.get("approver"),
                                answer.get("arguments"), answer.get("grant"),
                                answer.get("request_id"))


def _as_sent_next(message: ChatMessage) -> dict:
    """A stored message in the form the next request sends it (README, "EXPECT": the
    history is what the implementation would send next): a call whose arguments are
    not a JSON object goes as ``{}`` (SPEC §6), while the session keeps the text."""
    data = message.to_openai()
    for call, wire in zip(message.tool_calls, data.get("tool_calls", ())):
        wire["function"] = {**wire["function"], "arguments": call.sent_arguments()}
    return data


def _error_kind(exc: Exception) -> str:
    for kind in ("ApprovalError", "IncompleteStreamError", "ProviderError"):
        if isinstance(exc, getattr(agentflow.errors, kind)):
            return kind
    return type(exc).__name__
