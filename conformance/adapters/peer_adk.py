"""Google ADK behind the conformance protocol.

An ``LlmAgent`` whose model is ADK's ``LiteLlm`` wrapper pointed at the replay server
(``LiteLlm(model="openai/<model>", api_base=..., api_key=...)``, as ADK's "LiteLLM model
connector" page shows for an OpenAI-compatible endpoint), run by a ``Runner`` with
``RunConfig(streaming_mode=StreamingMode.SSE)``. A tool that needs approval is a
``FunctionTool(..., require_confirmation=True)`` (ADK's "Get action confirmation for ADK
Tools", boolean confirmation): its call is answered with a placeholder and an
``adk_request_confirmation`` function call that carries the original call; the next run
sends a user message of ``FunctionResponse(name="adk_request_confirmation",
id=<that call's id>, response={"confirmed": ...})`` parts, and ADK runs the confirmed
calls before its next model call. Tool errors and unknown tools are answered by
``LlmAgent(on_tool_error_callback=...)``, the context providers added by
``before_model_callback``. The conversation is ADK's ``Session``, kept by a
``SqliteSessionService`` in a file (the service ADK's ``sqlite://`` session URI makes,
google/adk/cli/service_registry.py:270; a reload opens the file again); the history the
adapter reports is what ADK would send next: the session's events through ADK's own
contents builder and LiteLlm's own message converter, without the placeholder results of
the pause (``_pause_markers``). ADK streams a call's id and name as it starts, but its
arguments only as JSON-path pieces and the whole call in the model turn's final event,
with no single final finish and no index: ``tool_call_end`` (with the arguments), the
finish and ``index`` are derived (README, "Derived fields").
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import shutil
import tempfile
import uuid
from importlib.metadata import version

from conformance.adapters.common import Peer, counting, error_kind, serve, tool_body

os.environ.setdefault("ADK_DISABLE_TELEMETRY", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import

VERSION = f"google-adk {version('google-adk')} (litellm {version('litellm')})"
APP, USER = "conformance", "conformance-user"
CONFIRMATION = "adk_request_confirmation"


def _function(spec: dict, executions: list):
    """The case tool as the Python function a ``FunctionTool`` wraps: named as the tool,
    documented by its description, and with a signature of the schema's properties
    (``FunctionTool`` passes a function only the arguments its signature names)."""
    body = tool_body(spec, executions)

    def tool(**arguments):
        return body(**arguments)
    properties = (spec.get("parameters") or {}).get("properties") or {}
    tool.__name__ = tool.__qualname__ = spec["name"]
    tool.__doc__ = spec.get("description", "")
    tool.__signature__ = inspect.Signature([
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None)
        for name in properties])
    return tool


def _case_tool(spec: dict, executions: list):
    """A ``FunctionTool`` with ADK's confirmation where the case asks for approval; its
    declaration is the case's JSON schema as is (``parameters_json_schema``), which
    LiteLlm sends unchanged, instead of one ADK would build from a Python signature."""
    from google.adk.tools import FunctionTool
    from google.genai import types

    class CaseTool(FunctionTool):
        def _get_declaration(self):
            return types.FunctionDeclaration(
                name=spec["name"], description=spec.get("description", ""),
                parameters_json_schema=spec.get("parameters") or {
                    "type": "object", "properties": {}})
    return CaseTool(_function(spec, executions),
                    require_confirmation=bool(spec.get("requires_approval")))


def _tool_error(tool, args, tool_context, error):
    """``LlmAgent(on_tool_error_callback=...)``: what the model gets for a tool that
    raised (SPEC R13's text) or a call naming no tool (R14's: ADK hands the callback a
    stand-in ``BaseTool(description="Tool not found")``, flows/llm_flows/tools/_caller.py
    :446-452); the callback's dict is the call's response, under ``result`` as ADK puts
    a tool's own value (_caller.py:63-67)."""
    if tool.description == "Tool not found":
        return {"result": f"Error: unknown tool '{tool.name}'"}
    return {"result": f"Error: {type(error).__name__}: {error}"}


def _context(providers: list[dict]):
    """``LlmAgent(before_model_callback=...)``: R1's context providers on every model
    call, their instructions after the agent's and their messages before the history,
    in the request only (the session never holds them)."""
    from google.genai import types
    instructions = [p["instructions"] for p in providers if p.get("instructions")]
    roles = {"user": "user", "assistant": "model", "system": "user"}
    extra = [types.Content(role=roles[m["role"]], parts=[types.Part(text=m.get("content") or "")])
             for p in providers for m in p.get("messages", [])]

    def before_model(callback_context, llm_request):
        if instructions:
            llm_request.append_instructions(instructions)
        llm_request.contents = extra + list(llm_request.contents)
        return None
    return before_model


def _pause_markers(events: list) -> set:
    """The ids of the calls of the pause the session ends in. ADK answers each call it
    holds for confirmation with a placeholder response (an event whose
    ``actions.requested_tool_confirmations`` names the call) and replaces it with the
    call's result when the answer comes (flows/llm_flows/tools/_rearranger.py): at the
    pause it is no result, so the history ends with the calls (README, "the history it
    would send next"). A placeholder the model was sent afterwards (a call left
    unanswered while the run went on) is history like any tool message."""
    last_model = max((i for i, e in enumerate(events) if e.author != "user" and e.content
                      and any(p.text or (p.function_call and p.function_call.name
                                         != CONFIRMATION) for p in e.content.parts or [])),
                     default=-1)
    waiting, answered = set(), set()
    for event in events[last_model + 1:]:
        marked = set(event.actions.requested_tool_confirmations or {})
        waiting |= marked
        answered |= {r.id for r in event.get_function_responses() if r.id not in marked}
    return waiting - answered


def _handles(events: list) -> dict:
    """Call id -> the id of the ``adk_request_confirmation`` call ADK asked about it
    with, from every pause in the session (an answer names the latter); read from the
    session each run, so nothing is kept across a reload."""
    return {(c.args or {}).get("originalFunctionCall", {}).get("id"): c.id
            for e in events for c in e.get_function_calls() if c.name == CONFIRMATION}



# The finish reasons with which ADK ends a model turn in an event that also carries
# an error_code (LiteLlm's _finish_reason_to_error_message): the turn's end, not a
# failure of the run
_TURN_ENDS = {"MAX_TOKENS": "length", "SAFETY": "content_filter", "STOP": "stop"}


class _EventError(Exception):
    """A failure ADK reported as an event rather than raised: a node that raised is
    turned into ``Event(error_code=<its class name or status>, error_message=...)``
    (workflow/_node_runner.py:194-206) and the run ends."""

    def __init__(self, code: str, message: str | None):
        super().__init__(message or code)
        self.code = code


def _kind(exc: BaseException) -> str:
    """LiteLLM's exceptions (an HTTP error status, a stream that failed) are the
    provider's: ``ProviderError``; anything else as ``error_kind`` reads it."""
    if isinstance(exc, _EventError):
        import litellm.exceptions
        made = getattr(litellm.exceptions, exc.code, None)
        return "ProviderError" if isinstance(made, type) and issubclass(
            made, Exception) else exc.code
    seen = exc
    while seen is not None:
        if (type(seen).__module__ or "").startswith("litellm"):
            return "ProviderError"
        seen = seen.__cause__ or seen.__context__
    return error_kind(exc)


class ADK(Peer):
    def setup(self, message: dict) -> dict:
        from google.adk.agents import LlmAgent
        from google.adk.models.lite_llm import LiteLlm
        import litellm
        litellm.suppress_debug_info = True  # it prints to stdout, the protocol's channel
        self.executions: list = []
        self.specs = {t["name"]: t for t in message.get("tools", [])}
        tools = [_case_tool(t, self.executions) for t in message.get("tools", [])]
        providers = message.get("context_providers") or []
        self.model_name = f"openai/{message['model']}"
        self.agent = LlmAgent(
            name="conformance", model=LiteLlm(model=self.model_name,
                                              api_base=message["base_url"],
                                              api_key=message["api_key"]),
            instruction=message.get("instructions") or "", tools=tools,
            on_tool_error_callback=_tool_error,
            before_model_callback=_context(providers) if providers else None)
        folder = tempfile.mkdtemp(prefix="conformance-adk-")
        atexit.register(shutil.rmtree, folder, True)
        self.db = os.path.join(folder, "sessions.db")
        self.session_id = str(uuid.uuid4())
        self.runner = None
        return {"type": "ready", "implementation": VERSION, "suites": ["core"],
                "derives": ["tool_call_end", "index", "finish"],
                "configured": [
                    "model: LiteLlm(model='openai/<model>', api_base=..., api_key=...)",
                    "approval: FunctionTool(require_confirmation=True); answers are "
                    "FunctionResponse(name='adk_request_confirmation', "
                    "response={'confirmed': ...}) parts of the next user message",
                    "session: SqliteSessionService (a file; a reload opens it again)",
                    "tool errors and unknown tools: LlmAgent(on_tool_error_callback=...)",
                    "context providers: LlmAgent(before_model_callback=...) adds their "
                    "instructions and messages to every model request",
                    "max_rounds: RunConfig(max_llm_calls=...); LlmCallsLimitExceededError "
                    "is the max_rounds finish"],
                "cannot": {"resume_counts_a_round": "ADK's only round limit is "
                           "RunConfig.max_llm_calls (docs/runtime/runconfig.md, \"Runtime "
                           "Configuration\": LLM call limits), \"a limit on the total number "
                           "of llm calls for a given run\" (google/adk/agents/run_config.py:"
                           "271-279): running confirmed calls on resume is no LLM call"}}

    async def _runner(self):
        from google.adk.runners import Runner
        from google.adk.sessions.sqlite_session_service import SqliteSessionService
        if self.runner is None:
            service = SqliteSessionService(self.db)
            self.runner = Runner(app_name=APP, agent=self.agent, session_service=service)
            if await service.get_session(app_name=APP, user_id=USER,
                                         session_id=self.session_id) is None:
                await service.create_session(app_name=APP, user_id=USER,
                                             session_id=self.session_id)
        return self.runner

    async def _events(self) -> list:
        session = await self.runner.session_service.get_session(
            app_name=APP, user_id=USER, session_id=self.session_id)
        return session.events

    async def _history(self) -> list[dict]:
        """What ADK would send next: the session's events through its contents
        builder and LiteLlm's message converter (instructions left out)."""
        from google.adk.flows.llm_flows.context._contents import _get_contents
        from google.adk.models.lite_llm import _content_to_message_param
        session = await self.runner.session_service.get_session(
            app_name=APP, user_id=USER, session_id=self.session_id)
        contents = _get_contents(None, session.events, self.agent.name,
                                 preserve_function_call_ids=True)
        pending, out = _pause_markers(session.events), []
        for content in contents:
            made = await _content_to_message_param(content, provider="openai",
                                                   model=self.model_name)
            for m in made if isinstance(made, list) else [made] if made else []:
                if not (m.get("role") == "tool" and m.get("tool_call_id") in pending):
                    out.append(json.loads(json.dumps(m, default=str)))
        return out

    async def run(self, message: dict, emit) -> dict:
        from google.adk.agents.run_config import RunConfig, StreamingMode
        from google.adk.models.lite_llm import _safe_json_serialize
        from google.genai import types
        del self.executions[:]
        if message.get("reload_session"):
            self.runner = None  # the session service opened again from its file
        runner = await self._runner()
        options = message.get("options") or {}
        parts = []
        if message.get("approvals") and message.get("input"):
            return {"type": "skip", "reason": "Runner.run_async takes answers and new input "
                    "in separate runs only: ADK's \"Get action confirmation for ADK Tools\" "
                    "(docs/tools-custom/confirmation.md, \"Remote confirmation\") sends the "
                    "answer as a new_message of function_response parts, and one holding text "
                    "too raises \"Message cannot contain both function responses and text\" "
                    "(google/adk/runners.py:646-659); no other entry point takes input on a "
                    "paused invocation"}
        handles = _handles(await self._events())
        for a in message.get("approvals") or []:
            parts.append(types.Part(function_response=types.FunctionResponse(
                name=CONFIRMATION, id=handles.get(a["call_id"], a["call_id"]),
                response={"confirmed": bool(a["approved"])})))
        parts += [types.Part(text=m.get("content") or "") for m in message.get("input", [])]
        config = RunConfig(streaming_mode=StreamingMode.SSE,
                           max_llm_calls=options.get("max_rounds", 40))
        usage, finish, paused, streamed, error = None, "stop", False, False, None
        emitted, started = [], set()
        emit = counting(emit, emitted)
        before = len(await self._events())
        try:
            async for event in runner.run_async(
                    user_id=USER, session_id=self.session_id,
                    new_message=types.Content(role="user", parts=parts), run_config=config):
                reason = event.finish_reason.name if event.finish_reason else None
                if event.error_code and reason not in _TURN_ENDS:
                    raise _EventError(event.error_code, event.error_message)
                content = event.content
                awaiting = event.actions.requested_tool_confirmations or {}
                if event.partial:
                    for part in (content.parts if content and content.parts else []):
                        call = part.function_call
                        if call and call.id and call.id not in started:
                            started.add(call.id)
                            emit({"type": "tool_call_start", "call_id": call.id,
                                  "name": call.name})
                        elif part.text and not part.thought:
                            streamed = True
                            emit({"type": "text", "text": part.text})
                        elif part.text and part.thought:
                            streamed = True
                            emit({"type": "reasoning", "text": part.text})
                    continue
                for part in (content.parts if content and content.parts else []):
                    if part.text and not streamed and event.author != "user":
                        emit({"type": "reasoning" if part.thought else "text",
                              "text": part.text})
                    call = part.function_call
                    if call and call.name == CONFIRMATION:
                        original = (call.args or {}).get("originalFunctionCall") or {}
                        paused = True
                        emit({"type": "approval_request", "call_id": original.get("id"),
                              "name": original.get("name"),
                              "arguments": original.get("args"),
                              "description": self.specs.get(original.get("name"), {})
                              .get("description")})
                    elif call:
                        if call.id not in started:
                            started.add(call.id)
                            emit({"type": "tool_call_start", "call_id": call.id,
                                  "name": call.name})
                        emit({"type": "tool_call_end", "call_id": call.id,
                              "arguments": call.args})
                    response = part.function_response
                    if response and response.id not in awaiting \
                            and response.name != CONFIRMATION:
                        result = response.response
                        emit({"type": "tool_result", "call_id": response.id,
                              "name": response.name,
                              "result": result if isinstance(result, str)
                              else _safe_json_serialize(result)})
                streamed = False
                if event.usage_metadata and event.author != "user":
                    u = event.usage_metadata
                    usage = usage or {"prompt_tokens": 0, "completion_tokens": 0,
                                      "total_tokens": 0}
                    usage["prompt_tokens"] += u.prompt_token_count or 0
                    usage["completion_tokens"] += u.candidates_token_count or 0
                    usage["total_tokens"] += u.total_token_count or 0
                if reason:
                    finish = _TURN_ENDS.get(reason, "stop")
            emit({"type": "finish", "usage": usage,
                  "finish_reason": "awaiting_approval" if paused else finish})
        except Exception as exc:
            code = exc.code if isinstance(exc, _EventError) else type(exc).__name__
            if code == "LlmCallsLimitExceededError":  # RunConfig.max_llm_calls used up
                emit({"type": "finish", "finish_reason": "max_rounds", "usage": usage})
            else:
                refused = not emitted and not self.executions and len(
                    await self._events()) == before
                error = {"kind": "ApprovalError" if refused and code == "ValueError"
                         else _kind(exc), "message": f"{code}: {exc}"}
        return {"type": "end", "error": error, "history": await self._history(),
                "executions": list(self.executions)}


if __name__ == "__main__":
    raise SystemExit(serve(ADK()))
