"""Pydantic AI behind the conformance protocol.

``Agent`` + ``OpenAIChatModel`` (``OpenAIProvider`` with an ``AsyncOpenAI`` client for the
replay server), run with ``run_stream_events``; each case tool is a ``Tool.from_schema``
with ``requires_approval=True`` where the case says so, and the agent's output types are
``[str, DeferredToolRequests]``. A run that stops for approval ends with a
``DeferredToolRequests`` output; the next run passes ``DeferredToolResults`` whose
``approvals`` map each call id to ``True`` or ``ToolDenied(message)`` with SPEC R7's
text (the message is what the model gets). The session is ``result.all_messages()``
as the next ``message_history``. Two documented hooks of a ``Hooks`` capability
(``Agent(capabilities=[...])``) set what SPEC chooses: ``tool_execute_error`` returns
SPEC R13's text as the failed call's result (a returned value "suppresses the error"),
and ``before_model_request`` puts the context providers' messages before the history of
each request only (``ModelRequestContext.messages`` is the request's own list), their
instructions after the agent's. Pydantic AI yields no single final finish, and it
ends a call's part when the next part starts, not when the model's turn ends: the finish
and the ``tool_call_end`` updates are derived (README, "Derived fields"); approval
requests are reported from the output.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from importlib.metadata import version

from conformance.adapters.common import (Peer, counting, error_kind, rejection_text, serve,
                                         tool_body)

VERSION = f"pydantic-ai-slim {version('pydantic-ai-slim')}"


def to_openai(messages) -> list[dict]:
    """Pydantic AI's ``ModelMessage`` list in OpenAI form (system prompts and
    instructions left out, as the README's history is)."""
    from pydantic_ai.messages import (ModelResponse, RetryPromptPart, TextPart, ToolCallPart,
                                      ToolReturnPart, UserPromptPart)
    out = []
    for m in messages:
        if isinstance(m, ModelResponse):
            text = "".join(p.content for p in m.parts if isinstance(p, TextPart))
            calls = [{"id": p.tool_call_id, "type": "function",
                      "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
                     for p in m.parts if isinstance(p, ToolCallPart)]
            out.append({"role": "assistant", "content": text or None,
                        **({"tool_calls": calls} if calls else {})})
            continue
        for p in m.parts:
            if isinstance(p, UserPromptPart):
                out.append({"role": "user", "content": p.content if isinstance(p.content, str)
                            else "".join(str(c) for c in p.content)})
            elif isinstance(p, ToolReturnPart):
                out.append({"role": "tool", "content": p.model_response_str(),
                            "tool_call_id": p.tool_call_id})
            elif isinstance(p, RetryPromptPart):
                out.append({"role": "tool", "content": p.model_response(),
                            "tool_call_id": p.tool_call_id} if p.tool_name
                           else {"role": "user", "content": p.model_response()})
    return out


def _result_text(part) -> str:
    from pydantic_ai.messages import RetryPromptPart
    return part.model_response() if isinstance(part, RetryPromptPart) \
        else part.model_response_str()


def _kind(exc: BaseException, refused: bool) -> str:
    """Pydantic AI refuses deferred tool results that do not fit the history with a
    ``UserError`` before anything runs: the README's ``ApprovalError`` behaviour."""
    from pydantic_ai.exceptions import UserError
    return "ApprovalError" if refused and isinstance(exc, UserError) else error_kind(exc)


def _hooks(providers: list[dict]):
    """The ``Hooks`` capability: SPEC R13's tool-error text, and R1's context-provider
    messages before the history of every request (never stored)."""
    from pydantic_ai.capabilities import Hooks
    from pydantic_ai.messages import (ModelRequest, ModelResponse, SystemPromptPart,
                                      TextPart, UserPromptPart)

    def tool_error(ctx, *, call, tool_def, args, error):
        return f"Error: {type(error).__name__}: {error}"

    made = {"user": lambda text: ModelRequest(parts=[UserPromptPart(text)]),
            "system": lambda text: ModelRequest(parts=[SystemPromptPart(text)]),
            "assistant": lambda text: ModelResponse(parts=[TextPart(text)])}
    extra = [made[m["role"]](m.get("content") or "")
             for p in providers for m in p.get("messages", [])]

    def add_context(ctx, request_context):
        request_context.messages = extra + request_context.messages
        return request_context
    return Hooks(tool_execute_error=tool_error,
                 before_model_request=add_context if extra else None)


class PydanticAI(Peer):
    def setup(self, message: dict) -> dict:
        from openai import AsyncOpenAI
        from pydantic_ai import Agent, DeferredToolRequests, Tool
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
        self.executions: list = []
        self.specs = {t["name"]: t for t in message.get("tools", [])}
        tools = []
        for t in message.get("tools", []):
            tool = Tool.from_schema(tool_body(t, self.executions), name=t["name"],
                                    description=t.get("description", ""),
                                    json_schema=t.get("parameters") or {
                                        "type": "object", "properties": {}})
            tool.requires_approval = bool(t.get("requires_approval"))
            tools.append(tool)
        model = OpenAIChatModel(message["model"], provider=OpenAIProvider(
            openai_client=AsyncOpenAI(base_url=message["base_url"],
                                      api_key=message["api_key"], max_retries=0)))
        providers = message.get("context_providers") or []
        instructions = [t for t in [message.get("instructions"),
                                    *(p.get("instructions") for p in providers)] if t]
        self.agent = Agent(model, tools=tools, instructions=instructions or None,
                           output_type=[str, DeferredToolRequests],
                           capabilities=[_hooks(providers)])
        self.agent.instrument = False
        self.messages: list = []
        # the agent keeps no session: every case is already run without one, the
        # message list carried from run to run (README, "A run without a session")
        return {"type": "ready", "implementation": VERSION, "suites": ["core"],
                "derives": ["tool_call_end", "finish"], "can": ["no_session"],
                "configured": ["rejection text: ToolDenied(message=...)",
                               "tool errors: Hooks(tool_execute_error=...) returns "
                               "'Error: <type>: <message>' as the call's result",
                               "context providers: instructions=[the agent's, the "
                               "providers'], Hooks(before_model_request=...) puts their "
                               "messages before the history of each request",
                               "call order: Agent.parallel_tool_call_execution_mode"
                               "('sequential')",
                               "max_rounds: UsageLimits(request_limit=...); "
                               "UsageLimitExceeded is the max_rounds finish, with the "
                               "messages of capture_run_messages()"],
                "cannot": {
                    "duplicate_approvals": "DeferredToolResults.approvals is a dict keyed "
                                           "by call id (pydantic_ai/_deferred.py:211-214), "
                                           "as the Deferred Tools guide (docs/deferred-"
                                           "tools.md) builds it: one answer per call",
                    "resume_counts_a_round": "UsageLimits.request_limit is \"the maximum "
                                             "number of model responses committed to the "
                                             "run's history\" (pydantic_ai/usage.py:559-560; "
                                             "the Agents guide, docs/agents.md, \"Usage "
                                             "Limits\"): running approved calls on resume is "
                                             "no response"}}

    def _reload(self) -> None:
        from pydantic_ai.messages import ModelMessagesTypeAdapter
        self.messages = ModelMessagesTypeAdapter.validate_json(
            ModelMessagesTypeAdapter.dump_json(self.messages))

    async def run(self, message: dict, emit) -> dict:
        from pydantic_ai import (AgentRunResultEvent, capture_run_messages, DeferredToolRequests,
                                 DeferredToolResults, FunctionToolResultEvent,
                                 PartDeltaEvent, PartEndEvent, PartStartEvent, TextPart,
                                 TextPartDelta, ThinkingPart, ThinkingPartDelta, ToolCallPart,
                                 ToolCallPartDelta, ToolDenied)
        from pydantic_ai.messages import ModelRequest, UserPromptPart
        from pydantic_ai.exceptions import UsageLimitExceeded
        from pydantic_ai.usage import UsageLimits
        del self.executions[:]
        if message.get("reload_session"):
            self._reload()
        options = message.get("options") or {}
        history = list(self.messages)
        prompts = [m.get("content") or "" for m in message.get("input", [])]
        history += [ModelRequest(parts=[UserPromptPart(p)]) for p in prompts[:-1]]
        approvals = message.get("approvals") or []
        # ToolDenied(message) is the text the model gets: SPEC R7's (README, "Mapping")
        results = DeferredToolResults(approvals={
            a["call_id"]: True if a["approved"] else ToolDenied(rejection_text(a.get("reason")))
            for a in approvals}) if approvals else None
        limits = UsageLimits(request_limit=options["max_rounds"]) if "max_rounds" in options \
            else None
        by_index, open_calls, error, output = {}, [], None, None
        emitted = []
        emit = counting(emit, emitted)

        def close_calls():  # a call's part ends when the next part starts: ends go last
            for call_id in open_calls:
                emit({"type": "tool_call_end", "call_id": call_id})
            open_calls.clear()

        modes = ExitStack()
        captured = modes.enter_context(capture_run_messages())
        # SPEC R2/R4 run calls in call order; pydantic_ai's default runs them in parallel
        modes.enter_context(self.agent.parallel_tool_call_execution_mode("sequential"))
        try:
            async with self.agent.run_stream_events(
                    prompts[-1] if prompts else None, message_history=history or None,
                    deferred_tool_results=results, usage_limits=limits) as events:
                async for event in events:
                    if not isinstance(event, (PartStartEvent, PartDeltaEvent, PartEndEvent)):
                        close_calls()
                    if isinstance(event, PartStartEvent):
                        part = event.part
                        if isinstance(part, ToolCallPart):
                            by_index[event.index] = part.tool_call_id
                            emit({"type": "tool_call_start", "call_id": part.tool_call_id,
                                  "name": part.tool_name, "index": event.index})
                            if part.args:
                                emit({"type": "tool_call_args", "call_id": part.tool_call_id,
                                      "delta": part.args if isinstance(part.args, str)
                                      else json.dumps(part.args)})
                        elif isinstance(part, TextPart) and part.content:
                            emit({"type": "text", "text": part.content})
                        elif isinstance(part, ThinkingPart) and part.content:
                            emit({"type": "reasoning", "text": part.content})
                    elif isinstance(event, PartDeltaEvent):
                        delta = event.delta
                        if isinstance(delta, TextPartDelta):
                            emit({"type": "text", "text": delta.content_delta})
                        elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
                            emit({"type": "reasoning", "text": delta.content_delta})
                        elif isinstance(delta, ToolCallPartDelta) and delta.args_delta:
                            emit({"type": "tool_call_args",
                                  "call_id": by_index.get(event.index, delta.tool_call_id),
                                  "delta": delta.args_delta if isinstance(delta.args_delta, str)
                                  else json.dumps(delta.args_delta)})
                    elif isinstance(event, PartEndEvent) and isinstance(event.part, ToolCallPart):
                        open_calls.append(event.part.tool_call_id)
                    elif isinstance(event, FunctionToolResultEvent):
                        part = event.part
                        emit({"type": "tool_result", "call_id": part.tool_call_id,
                              "name": part.tool_name, "result": _result_text(part)})
                    elif isinstance(event, AgentRunResultEvent):
                        output = event.result
            close_calls()
            requests = output.output if isinstance(output.output, DeferredToolRequests) else None
            for call in (requests.approvals if requests else []):
                try:
                    arguments = call.args_as_dict()
                except ValueError:
                    arguments = None
                emit({"type": "approval_request", "call_id": call.tool_call_id,
                      "name": call.tool_name, "arguments": arguments,
                      "description": self.specs.get(call.tool_name, {}).get("description")})
            u = output.usage
            usage = ({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                      "total_tokens": u.total_tokens} if u.total_tokens else None)
            reason = output.response.finish_reason
            emit({"type": "finish", "usage": usage,
                  "finish_reason": "awaiting_approval" if requests else (
                      reason if reason in ("length", "content_filter") else "stop")})
            self.messages = output.all_messages()
        except UsageLimitExceeded:  # its request limit: the max_rounds finish (README)
            close_calls()
            emit({"type": "finish", "finish_reason": "max_rounds", "usage": None})
            self.messages = list(captured)
        except Exception as exc:
            error = {"kind": _kind(exc, refused=not emitted and not self.executions),
                     "message": f"{type(exc).__name__}: {exc}"}
        finally:
            modes.close()
        return {"type": "end", "error": error, "history": to_openai(self.messages),
                "executions": list(self.executions)}


if __name__ == "__main__":
    raise SystemExit(serve(PydanticAI()))
