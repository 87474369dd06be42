"""Conformance cases, run by agentflow: a case's tools and providers built from its
JSON, its turns driven one by one, and every update as the JSON shape of the adapter
protocol (conformance/README.md). Used by ``agentflow replay CASE``, by the in-process
conformance runner and by the reference adapter (conformance/agentflow_adapter.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import agentflow
import agentflow.errors
from .agent import ChatClientAgent
from .agent import Context, ContextProvider
from .errors import AgentflowError
from .openai_client import OpenAIChatClient
from .policy import ApprovalPolicy
from .replay import Reply, ReplayServer
from .session import AgentSession
from .tools import Tool
from .types import (AgentRunOptions, ChatMessage, Finish, ReasoningDelta, TextDelta,
                    ToolApprovalRequest, ToolApprovalResponse, ToolCallArgs, ToolCallEnd,
                    ToolCallStart, ToolResult)

_OPTION_NAMES = ("max_rounds", "temperature", "tool_choice", "parallel_tool_calls",
                 "max_tokens", "model")


class CaseTool(Tool):
    """A tool with one of the fixed behaviours of the case format."""

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
    """Drives agentflow through one case: ``setup`` then ``run`` per turn.
    ``on_transition`` is handed to the loop (see ``FunctionInvokingChatClient``)."""

    def __init__(self, on_transition=None):
        self.on_transition = on_transition

    def setup(self, message: dict) -> dict:
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
                                          a.get("digest"), a.get("approver"),
                                          a.get("arguments"), a.get("grant"))
                     for a in message.get("approvals", [])]
        if responses:
            options = options.with_tool_approval_responses(responses)
        error = None
        try:
            for update in self.agent.run(
                    [ChatMessage.from_openai(m) for m in message.get("input", [])],
                    self.session, options):
                emit(update_to_json(update))
        except AgentflowError as exc:
            error = {"kind": _error_kind(exc), "message": str(exc)}
        return {"type": "end", "error": error,
                "history": self.session.to_dict()["messages"],
                "executions": list(self.executions)}


def _error_kind(exc: Exception) -> str:
    for kind in ("ApprovalError", "IncompleteStreamError", "ProviderError"):
        if isinstance(exc, getattr(agentflow.errors, kind)):
            return kind
    return type(exc).__name__


# -- ``agentflow replay CASE`` ---------------------------------------------------------------

def load_case(ref: str) -> dict:
    """A case from a path to its ``.json``, or from its id in ``conformance/cases``
    under the current folder. Raises ``FileNotFoundError`` naming both places."""
    path = Path(ref)
    if not path.suffix:
        path = Path("conformance") / "cases" / f"{ref}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no case {ref!r}: give the path of a case .json or the id "
                                "of one in conformance/cases (run from the repository root)")
    case = json.loads(path.read_text(encoding="utf-8"))
    case["_folder"] = path.parent
    return case


def case_replies(case: dict) -> list[Reply]:
    """The bodies a case serves, in order, as replay-server replies."""
    replies = []
    for turn in case["turns"]:
        for call in turn.get("model_calls", []):
            response = call["response"]
            if isinstance(response, str):
                replies.append(Reply((case["_folder"] / response).read_bytes()))
            else:
                body = json.dumps(response["json"]) if "json" in response else response.get("body", "")
                replies.append(Reply(body, status=response.get("status", 200),
                                     content_type=response.get("content_type", "application/json")))
    return replies


class SequenceDiagram:
    """Records what really happened in a run, as a Mermaid sequence diagram with the
    four actors of the design (caller, agent, decorator, provider)."""

    def __init__(self):
        self.lines = ["sequenceDiagram", "    actor Caller", "    participant Agent as ChatClientAgent",
                      "    participant FICC as FunctionInvokingChatClient",
                      "    participant LLM as LLM provider"]
        self._text = ""

    def add(self, line: str) -> None:
        self.lines.append("    " + line.replace(";", ","))

    def run_started(self, number: int, message: dict) -> None:
        approvals = message.get("approvals", [])
        what = [f"{len(message.get('input', []))} input message(s)"]
        if approvals:
            what.append(", ".join(f"{a['call_id']}={'approve' if a['approved'] else 'reject'}"
                                  for a in approvals))
        self.add(f"Note over Caller,LLM: run {number}")
        self.add(f"Caller->>Agent: run({'; '.join(what)})")
        self.add("Agent->>FICC: run(instructions + history + input)")

    def transition(self, old, event, new) -> None:
        self._flush_text()
        name = new.name
        if name == "RESUMING":
            self.add("FICC->>FICC: answer the pending calls (R4)")
        elif name == "CALLING_MODEL":
            self.add("FICC->>LLM: POST /chat/completions, stream=true")
        elif name == "AWAITING_APPROVAL":
            self.add("FICC->>FICC: approval gate: pause (R3)")
        elif event.name == "ROUND_LIMIT":
            self.add("FICC->>FICC: max_rounds reached (R8)")

    def update(self, update: dict) -> None:
        kind = update["type"]
        if kind == "text":
            self._text += update["text"]
            return
        self._flush_text()
        if kind == "tool_call_end":
            return
        if kind == "tool_call_start":
            self.add(f"LLM-->>FICC: tool call {update['name']} ({update['call_id']})")
        elif kind == "tool_result":
            verb = "rejected" if update["result"].startswith("Rejected:") else "ran"
            self.add(f"FICC->>FICC: {verb} {update['name']}: {_short(update['result'])}")
            self.add(f"FICC-->>Caller: ToolResult({update['call_id']})")
        elif kind == "approval_request":
            self.add(f"FICC-->>Caller: ToolApprovalRequest({update['call_id']}, "
                     f"{update['name']} {_short(json.dumps(update['arguments']))})")
        elif kind == "finish":
            self.add(f"FICC-->>Caller: Finish({update['finish_reason']})")

    def failed(self, error: dict) -> None:
        self._flush_text()
        self.add(f"FICC-->>Caller: {error['kind']}")

    def _flush_text(self) -> None:
        if self._text:
            self.add(f"LLM-->>FICC: text \"{_short(self._text)}\"")
            self.add("FICC-->>Caller: TextDelta...")
            self._text = ""

    def render(self) -> str:
        return "\n".join(self.lines) + "\n"


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split()).replace('"', "'").replace("#", "")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def replay(ref: str, trace: bool = False, mermaid: bool = False, out=None) -> int:
    """Run a conformance case against agentflow over loopback HTTP and print its updates
    per turn (``trace``: every ``LoopState`` transition too; ``mermaid``: instead, a
    Mermaid sequence diagram of the run). Returns 0, or 1 when a turn failed in a way
    its case did not expect."""
    import sys
    out = out or sys.stdout
    case = load_case(ref)
    diagram = SequenceDiagram() if mermaid else None

    def on_transition(old, event, new):
        if diagram:
            diagram.transition(old, event, new)
        elif trace:
            out.write(f"    [{old.name} --{event.value}--> {new.name}]\n")

    status = 0
    with ReplayServer(case_replies(case), strict=case.get("profile")) as server:
        driver = CaseDriver(on_transition)
        driver.setup({"base_url": server.base_url, "api_key": "sk-replay",
                      "model": case.get("model", "conformance-model"),
                      "instructions": case.get("instructions"), "tools": case.get("tools", []),
                      "context_providers": case.get("context_providers", []),
                      "profile": case.get("profile")})
        if not diagram:
            out.write(f"case {case['id']}: {case['title']} ({', '.join(case['rules'])})\n")
        for number, turn in enumerate(case["turns"], 1):
            message = {"input": turn.get("input", []), "approvals": turn.get("approvals", []),
                       "options": turn.get("options", {}),
                       "reload_session": bool(turn.get("reload_session"))}
            if diagram:
                diagram.run_started(number, message)
            else:
                out.write(f"\nturn {number}: input {json.dumps(message['input'])}"
                          + (f", approvals {json.dumps(message['approvals'])}" if message["approvals"] else "")
                          + "\n")
            emit = diagram.update if diagram else (lambda u: out.write(f"  {json.dumps(u)}\n"))
            end = driver.run(message, emit)
            if end["error"]:
                if diagram:
                    diagram.failed(end["error"])
                else:
                    out.write(f"  error {end['error']['kind']}: {end['error']['message']}\n")
                if turn.get("expect", {}).get("error") != end["error"]["kind"]:
                    status = 1
    if diagram:
        out.write(diagram.render())
    return status
