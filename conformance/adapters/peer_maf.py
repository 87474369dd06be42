"""Microsoft Agent Framework (Python) behind the conformance protocol.

``Agent`` + ``OpenAIChatCompletionClient`` against the replay server; a tool that needs
approval is a ``FunctionTool(approval_mode="always_require")``; approvals are answered
with ``to_function_approval_response(approved)`` of the run's
``function_approval_request`` contents (two answers for one id are two responses;
an id it never asked about gets a response built with ``Content.from_function_approval_response``).
Context providers are MAF's ``ContextProvider`` with ``before_run``. MAF streams no end-of-call event, no single
final finish and no result name: those are derived (README, "Derived fields").
"""

from __future__ import annotations

import json
import os
from importlib.metadata import version

from conformance.adapters.common import Peer, error_kind, serve, tool_body

os.environ.setdefault("ENABLE_OTEL", "false")

VERSION = (f"agent-framework-core {version('agent-framework-core')} + "
           f"agent-framework-openai {version('agent-framework-openai')}")

def to_openai(messages: list[dict]) -> list[dict]:
    """MAF's stored messages (``Message.to_dict()`` form) in OpenAI form; approval
    requests and responses are MAF's own bookkeeping and have no OpenAI form."""
    out = []
    for m in messages:
        contents = m.get("contents", [])
        text = "".join(c.get("text", "") for c in contents if c["type"] == "text")
        calls = [{"id": c["call_id"], "type": "function",
                  "function": {"name": c["name"], "arguments": c.get("arguments") or ""}}
                 for c in contents if c["type"] == "function_call"]
        results = [c for c in contents if c["type"] == "function_result"]
        if m["role"] == "tool" or results:
            out += [{"role": "tool", "content": _result_text(c), "tool_call_id": c["call_id"]}
                    for c in results]
        elif m["role"] == "assistant":
            out.append({"role": "assistant", "content": text or None,
                        **({"tool_calls": calls} if calls else {})})
        elif text or not contents or any(c["type"] == "text" for c in contents):
            out.append({"role": m["role"], "content": text})
    return out


def _result_text(content: dict) -> str:
    if content.get("exception"):
        return f"Error: {content['exception']}"
    result = content.get("result")
    return result if isinstance(result, str) else json.dumps(result)


def _context_provider(spec: dict, number: int):
    """A case's context provider as MAF's own ``ContextProvider``: ``before_run`` adds
    its instructions and messages to the run's ``SessionContext`` (SPEC R1)."""
    from agent_framework import Content, ContextProvider, Message

    class CaseContext(ContextProvider):
        async def before_run(self, *, agent, session, context, state):
            if spec.get("instructions"):
                context.extend_instructions(self.source_id, spec["instructions"])
            messages = [Message(role=m["role"], contents=[Content.from_text(m.get("content") or "")])
                        for m in spec.get("messages", [])]
            if messages:
                context.extend_messages(self, messages)
    return CaseContext(f"case-context-{number}")


class MAF(Peer):
    def setup(self, message: dict) -> dict:
        from agent_framework import Agent, FunctionTool
        from agent_framework.openai import OpenAIChatCompletionClient
        from openai import AsyncOpenAI
        self.executions: list = []
        self.specs = {t["name"]: t for t in message.get("tools", [])}
        tools = [FunctionTool(name=t["name"], description=t.get("description", ""),
                              func=tool_body(t, self.executions),
                              input_model=t.get("parameters") or {"type": "object",
                                                                   "properties": {}},
                              approval_mode=("always_require" if t.get("requires_approval")
                                             else "never_require"))
                 for t in message.get("tools", [])]
        self.client = OpenAIChatCompletionClient(
            model=message["model"], async_client=AsyncOpenAI(
                base_url=message["base_url"], api_key=message["api_key"], max_retries=0))
        config = self.client.function_invocation_configuration
        config["include_detailed_errors"] = True        # the nearest to SPEC R13's text
        config["allow_concurrent_invocation"] = False   # SPEC R2: in the model's order
        config["max_consecutive_errors_per_request"] = 3  # SPEC R13
        providers = [_context_provider(c, n)
                     for n, c in enumerate(message.get("context_providers", []))]
        self.agent = Agent(client=self.client, instructions=message.get("instructions"),
                           tools=tools or None, context_providers=providers or None)
        self.session = self.agent.create_session()
        self.pending: dict = {}
        return {"type": "ready", "implementation": VERSION, "suites": ["core"],
                "derives": ["tool_call_end", "finish", "index", "result_name"],
                "configured": [
                    "context providers: ContextProvider.before_run adds their instructions "
                    "and messages",
                    "tool errors: function_invocation_configuration include_detailed_errors=True "
                    "(the rejection text is fixed: _tools.py 'Error: Tool call invocation was "
                    "rejected by user.')",
                    "call order: allow_concurrent_invocation=False",
                    "failing rounds: max_consecutive_errors_per_request=3"],
                "cannot": {"resume_counts_a_round": "max_iterations \"Limits the number of LLM roundtrips\" (agent_framework/_tools.py:1878; the FunctionInvocationConfiguration reference and the \"Using function tools with human in the loop approvals\" guide, learn.microsoft.com/agent-framework/agents/tools/tool-approval, give no other limit): running approved calls on resume is no roundtrip"}}

    def _responses(self, approvals: list[dict]):
        from agent_framework import Content
        out = []
        for a in approvals:
            request = self.pending.get(a["call_id"])
            if request is not None:
                out.append(request.to_function_approval_response(bool(a["approved"])))
            else:  # an id MAF never asked about: the nearest thing a caller can send
                call = Content.from_function_call(a["call_id"], "unknown", arguments="{}")
                out.append(Content.from_function_approval_response(
                    bool(a["approved"]), id=a["call_id"], function_call=call))
        return out

    async def run(self, message: dict, emit) -> dict:
        from agent_framework import AgentSession, Content, Message
        del self.executions[:]
        if message.get("reload_session"):
            self.session = AgentSession.from_dict(json.loads(json.dumps(
                self.session.to_dict())))
        options = message.get("options") or {}
        # SPEC R8's limit, 40 when the turn gives none (a turn's limit must not outlive it)
        self.client.function_invocation_configuration["max_iterations"] = options.get(
            "max_rounds", 40)
        inputs = []
        responses = self._responses(message.get("approvals", []))
        if responses:
            inputs.append(Message(role="user", contents=responses))
        inputs += [Message(role=m["role"], contents=[Content.from_text(m.get("content") or "")])
                   for m in message.get("input", [])]
        names, open_calls, usage, error = {}, [], None, None
        self.pending = {}

        def close_calls():
            for call_id in open_calls:
                emit({"type": "tool_call_end", "call_id": call_id})
            open_calls.clear()

        try:
            stream = self.agent.run(inputs or None, stream=True, session=self.session)
            async for update in stream:
                for c in update.contents:
                    if c.type == "function_call":
                        if c.name and c.call_id not in names:
                            names[c.call_id] = c.name
                            open_calls.append(c.call_id)
                            emit({"type": "tool_call_start", "call_id": c.call_id,
                                  "name": c.name,
                                  "index": (c.additional_properties or {}).get("tool_call_index")})
                        if c.arguments:
                            emit({"type": "tool_call_args", "call_id": c.call_id,
                                  "delta": c.arguments if isinstance(c.arguments, str)
                                  else json.dumps(c.arguments)})
                        continue
                    close_calls()
                    if c.type == "text" and c.text:
                        emit({"type": "text", "text": c.text})
                    elif c.type == "text_reasoning" and c.text:
                        emit({"type": "reasoning", "text": c.text})
                    elif c.type == "usage":
                        d = c.usage_details or {}
                        usage = usage or {"prompt_tokens": 0, "completion_tokens": 0,
                                          "total_tokens": 0}
                        usage["prompt_tokens"] += d.get("input_token_count") or 0
                        usage["completion_tokens"] += d.get("output_token_count") or 0
                        usage["total_tokens"] += d.get("total_token_count") or 0
                    elif c.type == "function_result":
                        emit({"type": "tool_result", "call_id": c.call_id,
                              "name": names.get(c.call_id),
                              "result": _result_text(c.to_dict())})
                    elif c.type == "function_approval_request":
                        call = c.function_call
                        self.pending[call.call_id] = c
                        try:
                            arguments = json.loads(call.arguments) if isinstance(
                                call.arguments, str) else call.arguments
                        except ValueError:
                            arguments = None
                        emit({"type": "approval_request", "call_id": call.call_id,
                              "name": call.name, "arguments": arguments,
                              "description": self.specs.get(call.name, {}).get("description")})
            close_calls()
            final = await stream.get_final_response()
            reason = ("awaiting_approval" if final.user_input_requests
                      else str(getattr(final.finish_reason, "value", final.finish_reason)
                               or "stop"))
            emit({"type": "finish", "finish_reason": reason, "usage": usage})
        except Exception as exc:
            error = {"kind": error_kind(exc), "message": f"{type(exc).__name__}: {exc}"}
        messages = self.session.to_dict().get("state", {}).get("in_memory", {}).get("messages", [])
        return {"type": "end", "error": error, "history": to_openai(messages),
                "executions": list(self.executions)}


if __name__ == "__main__":
    raise SystemExit(serve(MAF()))
