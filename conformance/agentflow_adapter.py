"""agentflow's side of the conformance protocol.

``CaseDriver`` sets agentflow up for one case and runs its turns, answering in the
protocol's JSON shapes (conformance/README.md). The runner uses it in-process; run as
a program (``python -m conformance.agentflow_adapter``) it is the reference adapter:
the same driver behind the JSON-lines stdin/stdout protocol, so the protocol itself
is tested end to end.
"""

from __future__ import annotations

import json
import sys

import agentflow
from agentflow import (AgentRunOptions, AgentSession, ChatClientAgent, ChatMessage, Context,
                       ContextProvider, OpenAIChatClient, Tool, ToolApprovalResponse)
from agentflow.types import (Finish, ReasoningDelta, TextDelta, ToolApprovalRequest,
                             ToolCallArgs, ToolCallEnd, ToolCallStart, ToolResult)

_OPTION_NAMES = ("max_rounds", "temperature", "tool_choice", "parallel_tool_calls",
                 "max_tokens", "model")


class CaseTool(Tool):
    """A tool with one of the fixed behaviours of the case format."""

    def __init__(self, spec: dict, executions: list):
        self.name = spec["name"]
        self.description = spec.get("description", "")
        self.parameters = spec.get("parameters") or {"type": "object", "properties": {}}
        self._approval = bool(spec.get("requires_approval"))
        self._behaviour = spec.get("behaviour") or {"kind": "return", "value": "ok"}
        self._executions = executions

    def requires_approval(self) -> bool:
        return self._approval

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
    def __init__(self, spec: dict):
        self.context = Context(spec.get("instructions"),
                               [ChatMessage.from_openai(m) for m in spec.get("messages", [])])

    def on_invoking(self, messages, session):
        return self.context


def canonical_json(value) -> str:
    """Keys sorted, no whitespace, non-ASCII escaped: the ``echo`` behaviour's text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def update_to_json(update) -> dict:
    """An agentflow update in the protocol's JSON shape."""
    if isinstance(update, TextDelta):
        return {"type": "text", "text": update.text}
    if isinstance(update, ReasoningDelta):
        return {"type": "reasoning", "text": update.text}
    if isinstance(update, ToolCallStart):
        return {"type": "tool_call_start", "call_id": update.call_id, "name": update.name,
                "index": update.index}
    if isinstance(update, ToolCallArgs):
        return {"type": "tool_call_args", "call_id": update.call_id, "delta": update.delta}
    if isinstance(update, ToolCallEnd):
        return {"type": "tool_call_end", "call_id": update.call_id}
    if isinstance(update, ToolResult):
        return {"type": "tool_result", "call_id": update.call_id, "name": update.name,
                "result": update.result}
    if isinstance(update, ToolApprovalRequest):
        return {"type": "approval_request", "call_id": update.call_id, "name": update.name,
                "arguments": update.arguments, "description": update.description,
                "digest": update.digest}
    if isinstance(update, Finish):
        usage = update.usage
        return {"type": "finish", "finish_reason": update.finish_reason.value,
                "usage": None if usage is None else {
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "total_tokens": usage.total_tokens}}
    return {"type": type(update).__name__}


class CaseDriver:
    """Drives agentflow through one case: ``setup`` then ``run`` per turn."""

    def setup(self, message: dict) -> dict:
        self.executions: list = []
        client = OpenAIChatClient(model=message.get("model", "conformance-model"),
                                  base_url=message["base_url"],
                                  api_key=message.get("api_key", ""))
        self.agent = ChatClientAgent(
            client, instructions=message.get("instructions"),
            tools=[CaseTool(t, self.executions) for t in message.get("tools", [])],
            context_providers=[StaticContext(c) for c in message.get("context_providers", [])])
        self.session = AgentSession()
        return {"type": "ready", "implementation": f"agentflow {agentflow.__version__}"}

    def run(self, message: dict, emit) -> dict:
        """Run one turn, calling ``emit(update_json)`` per update; return the ``end``
        message."""
        del self.executions[:]
        if message.get("reload_session"):  # R15: only the JSON form survives
            self.session = AgentSession.from_dict(json.loads(json.dumps(self.session.to_dict())))
        options = AgentRunOptions(**{k: v for k, v in (message.get("options") or {}).items()
                                     if k in _OPTION_NAMES})
        responses = [ToolApprovalResponse(a["call_id"], a["approved"], a.get("reason"),
                                          a.get("digest"), a.get("approver"))
                     for a in message.get("approvals", [])]
        if responses:
            options = options.with_tool_approval_responses(responses)
        error = None
        try:
            for update in self.agent.run(
                    [ChatMessage.from_openai(m) for m in message.get("input", [])],
                    self.session, options):
                emit(update_to_json(update))
        except agentflow.AgentflowError as exc:
            error = {"kind": _error_kind(exc), "message": str(exc)}
        return {"type": "end", "error": error,
                "history": self.session.to_dict()["messages"],
                "executions": list(self.executions)}


def _error_kind(exc: Exception) -> str:
    for kind in ("ApprovalError", "IncompleteStreamError", "ProviderError"):
        if isinstance(exc, getattr(agentflow, kind)):
            return kind
    return type(exc).__name__


def main() -> int:
    """The JSON-lines loop: one request per stdin line, answers on stdout."""
    driver = CaseDriver()

    def send(message: dict) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if message["type"] == "setup":
            send(driver.setup(message))
        elif message["type"] == "run":
            send(driver.run(message, lambda u: send({"type": "update", "update": u})))
        elif message["type"] == "exit":
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
