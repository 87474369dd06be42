"""The OpenAI Agents SDK behind the conformance protocol.

``Agent`` + ``OpenAIChatCompletionsModel`` against the replay server, run with
``Runner.run_streamed``; a tool that needs approval is a ``FunctionTool`` with
``needs_approval=True`` and, as ``function_tool`` gives by default, a failure (of the
body or of its arguments) answered with ``default_tool_error_function``. A paused run leaves ``result.interruptions`` (its
``ToolApprovalItem`` objects) and ``result.to_state()``; the next run answers them with
``state.approve(item)`` / ``state.reject(item, rejection_message=reason)`` and resumes the
``RunState``. Between finished runs the conversation is ``result.to_input_list()``, sent in
OpenAI form by the SDK's own ``Converter.items_to_messages``, which is also the history
the adapter reports. The SDK has no end-of-call event for chat completions models, no
call index, no single final finish and no result name: those are derived (README,
"Derived fields"); approval requests are reported from ``result.interruptions`` when
the stream ends.
"""

from __future__ import annotations

import json
import os
from importlib.metadata import version

from conformance.adapters.common import Peer, error_kind, serve, tool_body

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

VERSION = f"openai-agents {version('openai-agents')}"


def _parse(arguments):
    try:
        return json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return None


class OpenAIAgents(Peer):
    def setup(self, message: dict) -> dict:
        from agents import (Agent, FunctionTool, OpenAIChatCompletionsModel,
                            default_tool_error_function, set_tracing_disabled)
        from openai import AsyncOpenAI
        set_tracing_disabled(True)
        self.executions: list = []
        self.specs = {t["name"]: t for t in message.get("tools", [])}

        def invoker(spec):
            body = tool_body(spec, self.executions)

            async def on_invoke_tool(ctx, arguments: str):
                try:
                    return body(**json.loads(arguments or "{}"))
                except Exception as exc:  # what function_tool does by default
                    return default_tool_error_function(ctx, exc)
            return on_invoke_tool

        tools = [FunctionTool(name=t["name"], description=t.get("description", ""),
                              params_json_schema=t.get("parameters") or {
                                  "type": "object", "properties": {}},
                              on_invoke_tool=invoker(t), strict_json_schema=False,
                              needs_approval=bool(t.get("requires_approval")))
                 for t in message.get("tools", [])]
        model = OpenAIChatCompletionsModel(
            model=message["model"], openai_client=AsyncOpenAI(
                base_url=message["base_url"], api_key=message["api_key"], max_retries=0))
        self.agent = Agent(name="conformance", model=model, tools=tools,
                           instructions=message.get("instructions"))
        self.items: list = []     # the conversation after the last run (to_input_list)
        self.state = None         # the RunState of a paused run
        self.interruptions: list = []
        return {"type": "ready", "implementation": VERSION, "suites": ["core"],
                "derives": ["tool_call_end", "finish", "index", "result_name"],
                "cannot": {
                    "unknown_call_ids": "approvals are RunState.approve/reject of the "
                                        "run's own ToolApprovalItem interruptions",
                    "answers_without_a_pause": "Runner.run resumes only a RunState that "
                                               "has interruptions",
                    "context_providers": "the SDK has no context providers (an agent has "
                                         "one instructions string)"}}

    async def _reload(self) -> None:
        from agents import RunState
        self.items = json.loads(json.dumps(self.items))
        if self.state is not None:
            self.state = await RunState.from_string(self.agent, self.state.to_string())
            self.interruptions = self.state.get_interruptions()

    def _history(self) -> list[dict]:
        """The conversation (paused or finished) as the SDK would send it next."""
        from agents.models.chatcmpl_converter import Converter
        return [_plain(m) for m in Converter.items_to_messages(self.items)]

    async def run(self, message: dict, emit) -> dict:
        from agents import RunConfig, Runner
        del self.executions[:]
        if message.get("reload_session"):
            await self._reload()
        options = message.get("options") or {}
        inputs = [{"role": m["role"], "content": m.get("content") or ""}
                  for m in message.get("input", [])]
        if self.state is not None:
            pending = {item.raw_item.call_id: item for item in self.interruptions}
            for a in message.get("approvals", []):
                item = pending[a["call_id"]]
                if a["approved"]:
                    self.state.approve(item)
                else:
                    self.state.reject(item, rejection_message=a.get("reason"))
            if inputs:  # the SDK resumes a state or starts from input, never both
                return {"type": "skip", "reason": "a paused RunState resumes without new "
                                                  "input; new messages next to a pause "
                                                  "cannot be given"}
            start = self.state
        else:
            if message.get("approvals"):
                return {"type": "skip", "reason": "approvals without a paused run: there "
                                                  "is no RunState to approve on"}
            start = self.items + inputs
        kwargs = {"max_turns": options["max_rounds"]} if "max_rounds" in options else {}
        names, by_index, open_calls, result, error = {}, {}, [], None, None

        def close_calls():
            for call_id in open_calls:
                emit({"type": "tool_call_end", "call_id": call_id})
            open_calls.clear()

        try:
            result = Runner.run_streamed(self.agent, start,
                                         run_config=RunConfig(tracing_disabled=True),
                                         **kwargs)
            async for event in result.stream_events():
                if event.type == "raw_response_event":
                    data, kind = event.data, event.data.type
                    if kind == "response.output_item.added" and data.item.type == "function_call":
                        names[data.item.call_id] = data.item.name
                        by_index[data.output_index] = data.item.call_id
                        open_calls.append(data.item.call_id)
                        emit({"type": "tool_call_start", "call_id": data.item.call_id,
                              "name": data.item.name})
                        if data.item.arguments:
                            emit({"type": "tool_call_args", "call_id": data.item.call_id,
                                  "delta": data.item.arguments})
                    elif kind == "response.function_call_arguments.delta":
                        emit({"type": "tool_call_args", "call_id": by_index[data.output_index],
                              "delta": data.delta})
                    elif kind == "response.output_text.delta":
                        close_calls()
                        emit({"type": "text", "text": data.delta})
                    elif kind in ("response.reasoning_text.delta",
                                  "response.reasoning_summary_text.delta"):
                        emit({"type": "reasoning", "text": data.delta})
                    elif kind == "response.completed":
                        close_calls()
                elif event.type == "run_item_stream_event" and event.name == "tool_output":
                    close_calls()
                    raw = event.item.raw_item
                    call_id = raw["call_id"] if isinstance(raw, dict) else raw.call_id
                    emit({"type": "tool_result", "call_id": call_id,
                          "name": names.get(call_id), "result": str(event.item.output)})
            close_calls()
            self.interruptions = list(result.interruptions)
            for item in self.interruptions:
                raw = item.raw_item
                emit({"type": "approval_request", "call_id": raw.call_id, "name": raw.name,
                      "arguments": _parse(raw.arguments),
                      "description": self.specs.get(raw.name, {}).get("description")})
            u = result.context_wrapper.usage
            usage = ({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                      "total_tokens": u.total_tokens} if u.requests else None)
            emit({"type": "finish", "usage": usage,
                  "finish_reason": "awaiting_approval" if self.interruptions else "stop"})
            self.items = result.to_input_list()
            self.state = result.to_state() if self.interruptions else None
        except Exception as exc:
            error = {"kind": error_kind(exc), "message": f"{type(exc).__name__}: {exc}"}
        return {"type": "end", "error": error, "history": self._history(),
                "executions": list(self.executions)}


def _plain(message) -> dict:
    """A chat-completions message param (a TypedDict or model) as a plain dict."""
    return json.loads(json.dumps(message, default=lambda o: o.model_dump()))


if __name__ == "__main__":
    raise SystemExit(serve(OpenAIAgents()))
