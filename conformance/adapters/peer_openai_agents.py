"""The OpenAI Agents SDK behind the conformance protocol.

``Agent`` + ``OpenAIChatCompletionsModel`` against the replay server, run with
``Runner.run_streamed``; a tool that needs approval is a ``FunctionTool`` with
``needs_approval=True``. A paused run leaves ``result.interruptions`` (its
``ToolApprovalItem`` objects) and ``result.to_state()``; the next run answers them with
``state.approve(item)`` / ``state.reject(item, rejection_message=...)`` and resumes the
``RunState`` (with ``state.add_input()`` for new input); an answer for a call it did not
pause on gets a ``ToolApprovalItem`` built for that call id. The conversation is kept
by the SDK's ``Session`` (an ``SQLiteSession`` passed to every run); its items, in OpenAI
form by the SDK's own ``Converter.items_to_messages``, are the history the adapter
reports. Texts
and hooks are configured as the SDK documents them (``configured`` in ``ready``). The
SDK has no call index, no single final finish and no result name: those are derived
(README, "Derived fields").
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from importlib.metadata import version

from conformance.adapters.common import Peer, error_kind, rejection_text, serve, tool_body

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

VERSION = f"openai-agents {version('openai-agents')}"


def failure_error_function(ctx, exc: Exception) -> str:
    """What ``function_tool(failure_error_function=...)`` lets a user set: SPEC R13's
    text instead of the SDK's "An error occurred while running the tool", and R14's for
    arguments the SDK could not parse (it hands those over as ``ModelBehaviorError``)."""
    from agents import ModelBehaviorError
    if isinstance(exc, ModelBehaviorError):
        return f"Error: arguments are not valid JSON: {exc}"
    return f"Error: {type(exc).__name__}: {exc}"


def _parse(arguments):
    try:
        return json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return None


class OpenAIAgents(Peer):
    def setup(self, message: dict) -> dict:
        from agents import (Agent, FunctionTool, ModelBehaviorError,
                            OpenAIChatCompletionsModel, set_tracing_disabled)
        from openai import AsyncOpenAI
        set_tracing_disabled(True)
        self.executions: list = []
        self.specs = {t["name"]: t for t in message.get("tools", [])}

        def invoker(spec):
            body = tool_body(spec, self.executions)

            async def on_invoke_tool(ctx, arguments: str):
                try:  # function_tool parses first and hands a parse failure to the formatter
                    parsed = json.loads(arguments or "{}")
                    if not isinstance(parsed, dict):
                        raise ModelBehaviorError(f"not a JSON object: {arguments}")
                except ValueError as exc:
                    return failure_error_function(ctx, ModelBehaviorError(str(exc)))
                except ModelBehaviorError as exc:
                    return failure_error_function(ctx, exc)
                try:
                    return body(**parsed)
                except Exception as exc:  # function_tool(failure_error_function=...)
                    return failure_error_function(ctx, exc)
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
        from agents import SQLiteSession
        # The SDK's Session keeps the conversation (SQLite, in a file so a reload can
        # open it again); self.items is what it holds after the last run.
        folder = tempfile.mkdtemp(prefix="conformance-openai-agents-")
        atexit.register(shutil.rmtree, folder, True)
        self.db = os.path.join(folder, "session.db")
        self.session = SQLiteSession("conformance", self.db)
        self.items: list = []
        self.state = None         # the RunState of the last run (paused or finished)
        self.paused = False
        self.handles: dict = {}   # call id -> its ToolApprovalItem, from every pause seen
        providers = message.get("context_providers") or []
        self.extra_instructions = [p["instructions"] for p in providers if p.get("instructions")]
        self.extra_input = [{"role": m["role"], "content": m.get("content") or ""}
                            for p in providers for m in p.get("messages", [])]
        return {"type": "ready", "implementation": VERSION, "suites": ["core"],
                "derives": ["finish", "index", "result_name"],
                "configured": [
                    "session: SQLiteSession (Runner.run_streamed(session=...))",
                    "rejection text: RunState.reject(item, rejection_message=...)",
                    "tool errors: the failure_error_function of function_tool",
                    "unknown tools: RunConfig(tool_not_found_behavior="
                    "'return_error_to_model', tool_error_formatter=...)",
                    "context providers: RunConfig.call_model_input_filter adds their "
                    "instructions and messages to every model call",
                    "max_rounds: max_turns; MaxTurnsExceeded is the max_rounds finish",
                    "new input on a paused run: RunState.add_input()",
                    "answers for calls it did not pause on: a ToolApprovalItem built for "
                    "the call id"],
                "cannot": {"resume_counts_a_round": "max_turns: \"A turn is defined as one AI invocation\" (agents/run.py:321-322; the Running agents guide, docs/running_agents.md, \"The agent loop\" and \"Exceptions\": agent-loop turns are LLM calls): running approved calls on resume is no turn"}}

    def _input_filter(self, data):
        from agents.run_config import ModelInputData
        model = data.model_data
        instructions = "\n".join(filter(None, [model.instructions, *self.extra_instructions]))
        return ModelInputData(input=self.extra_input + list(model.input),
                              instructions=instructions or None)

    def _handle(self, call_id: str):
        """The call's ToolApprovalItem from a pause, or one built for the id."""
        from agents import ToolApprovalItem
        from openai.types.responses import ResponseFunctionToolCall
        if call_id not in self.handles:
            raw = ResponseFunctionToolCall(type="function_call", call_id=call_id,
                                           name="unknown", arguments="{}")
            self.handles[call_id] = ToolApprovalItem(agent=self.agent, raw_item=raw)
        return self.handles[call_id]

    async def _reload(self) -> None:
        """The SDK's documented persistence: the ``Session`` opened again from its file,
        and a paused run's ``RunState.to_string()`` / ``from_string``; the approval
        handles come back from the reloaded state."""
        from agents import RunState, SQLiteSession
        self.session = SQLiteSession("conformance", self.db)
        self.items = await self.session.get_items()
        self.handles = {}
        if self.state is not None:
            self.state = await RunState.from_string(self.agent, self.state.to_string())
            for item in self.state.get_interruptions():
                self.handles[item.raw_item.call_id] = item

    def _history(self) -> list[dict]:
        """The conversation (paused or finished) as the SDK would send it next."""
        from agents.models.chatcmpl_converter import Converter
        return [_plain(m) for m in Converter.items_to_messages(self.items)]

    async def run(self, message: dict, emit) -> dict:
        from agents import MaxTurnsExceeded, RunConfig, Runner
        del self.executions[:]
        if message.get("reload_session"):
            await self._reload()
        options = message.get("options") or {}
        inputs = [{"role": m["role"], "content": m.get("content") or ""}
                  for m in message.get("input", [])]
        approvals = message.get("approvals") or []
        if approvals or self.paused:
            if self.state is None:
                return {"type": "skip", "reason": "answers before any run: there is no "
                                                  "RunState to answer on yet"}
            for a in approvals:
                item = self._handle(a["call_id"])
                if a["approved"]:
                    self.state.approve(item)
                else:
                    self.state.reject(item, rejection_message=rejection_text(a.get("reason")))
            if inputs:  # README: input after the answers, in the same run
                self.state.add_input(inputs)
            start = self.state
        else:
            start = inputs
        kwargs = {"max_turns": options.get("max_rounds", 40)}  # SPEC R8's default
        names, by_index, open_calls, result, error = {}, {}, [], None, None

        try:
            result = Runner.run_streamed(
                self.agent, start, run_config=RunConfig(
                    tracing_disabled=True, call_model_input_filter=self._input_filter
                    if self.extra_instructions or self.extra_input else None,
                    tool_not_found_behavior="return_error_to_model",
                    tool_error_formatter=_unknown_tool_text), session=self.session, **kwargs)
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
                    elif kind == "response.output_item.done" and data.item.type == "function_call":
                        open_calls.remove(data.item.call_id)
                        emit({"type": "tool_call_end", "call_id": data.item.call_id})
                    elif kind == "response.output_text.delta":
                        emit({"type": "text", "text": data.delta})
                    elif kind in ("response.reasoning_text.delta",
                                  "response.reasoning_summary_text.delta"):
                        emit({"type": "reasoning", "text": data.delta})
                elif event.type == "run_item_stream_event" and event.name == "tool_output":
                    raw = event.item.raw_item
                    call_id = raw["call_id"] if isinstance(raw, dict) else raw.call_id
                    emit({"type": "tool_result", "call_id": call_id,
                          "name": names.get(call_id), "result": str(event.item.output)})
            interruptions = list(result.interruptions)
            for item in interruptions:
                raw = item.raw_item
                self.handles[raw.call_id] = item
                emit({"type": "approval_request", "call_id": raw.call_id, "name": raw.name,
                      "arguments": _parse(raw.arguments),
                      "description": self.specs.get(raw.name, {}).get("description")})
            u = result.context_wrapper.usage
            usage = ({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                      "total_tokens": u.total_tokens} if u.requests else None)
            emit({"type": "finish", "usage": usage,
                  "finish_reason": "awaiting_approval" if interruptions else "stop"})
            self.state, self.paused = result.to_state(), bool(interruptions)
        except MaxTurnsExceeded:  # the SDK's max-rounds signal (README, "Mapping")
            emit({"type": "finish", "finish_reason": "max_rounds", "usage": None})
            self.state, self.paused = None, False
        except Exception as exc:
            error = {"kind": error_kind(exc), "message": f"{type(exc).__name__}: {exc}"}
        self.items = await self.session.get_items()
        return {"type": "end", "error": error, "history": self._history(),
                "executions": list(self.executions)}


def _unknown_tool_text(args) -> str | None:
    """SPEC R14's answer to an unknown tool; the SDK's default text for anything else."""
    return f"Error: unknown tool '{args.tool_name}'" if args.kind == "tool_not_found" else None


def _plain(message) -> dict:
    """A chat-completions message param (a TypedDict or model) as a plain dict."""
    return json.loads(json.dumps(message, default=lambda o: o.model_dump()))


if __name__ == "__main__":
    raise SystemExit(serve(OpenAIAgents()))
