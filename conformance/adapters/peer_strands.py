"""Strands Agents behind the conformance protocol.

``Agent`` + ``OpenAIModel`` (its OpenAI-compatible provider, ``client_args`` pointing at
the replay server), streamed with ``Agent.stream_async``. Human approval is what the
Strands interrupts guide recommends (docs: user-guide/concepts/interrupts, "Hooks"): a
``HookProvider`` whose ``BeforeToolCallEvent`` callback calls ``event.interrupt(name,
reason=...)`` for a tool that needs approval, so the run stops with ``stop_reason ==
"interrupt"`` and ``result.interrupts``; the next run is ``agent([{"interruptResponse":
{"interruptId": ..., "response": ...}}, ...])``, where the second call of
``event.interrupt`` returns the response and a rejection sets ``event.cancel_tool`` to
SPEC R7's text (the tool result the model gets). Each case tool is a
``PythonAgentTool`` (a tool spec with the case's JSON schema). The conversation is kept
by a ``FileSessionManager`` (messages and interrupt state, in a temporary folder); a
reload builds the agent again from that folder. The history reported is the agent's
messages through ``OpenAIModel.format_request_messages``, the function its requests are
built with. Strands yields no single final finish: it is derived from
``AgentResult.stop_reason`` (README, "Derived fields").

Run in .conformance-venv-strands (requirements-strands.txt): Strands' openai extra takes
openai<3, which the other peers' pin excludes.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from importlib.metadata import version

from conformance.adapters.common import Peer, error_kind, rejection_text, serve, tool_body

os.environ.setdefault("OTEL_SDK_DISABLED", "true")

VERSION = f"strands-agents {version('strands-agents')}"
INTERRUPT = "conformance-approval"  # the interrupt's name; its id is the framework's own


def _text(result: dict) -> str:
    """A ``ToolResult``'s content as the OpenAI provider sends it (text blocks joined by a
    newline, json blocks dumped: models/openai.py:237-263)."""
    parts = [json.dumps(c["json"], ensure_ascii=False) if "json" in c else c.get("text", "")
             for c in result.get("content", [])]
    return "\n".join(parts)


def _tool(spec: dict, executions: list):
    """The case tool as a ``PythonAgentTool``: the spec Strands sends, a function taking the
    ``ToolUse`` and returning a ``ToolResult``; an exception propagates to Strands' executor,
    which makes it the call's error result (tools/executors/_executor.py:687-700)."""
    from strands.tools.tools import PythonAgentTool
    body = tool_body(spec, executions)

    def run(tool_use, **_state):
        value = body(**(tool_use.get("input") or {}))
        return {"toolUseId": tool_use["toolUseId"], "status": "success",
                "content": [{"text": value}]}
    return PythonAgentTool(spec["name"], {
        "name": spec["name"], "description": spec.get("description", ""),
        "inputSchema": {"json": spec.get("parameters") or {"type": "object", "properties": {}}}},
        run)


class Hooks:
    """The adapter's ``HookProvider``: the approval interrupt (the interrupts guide's
    ``ApprovalHook``), the tool results as they are out, and SPEC R13/R14's texts set on
    the ``AfterToolCallEvent.result`` that Strands lets a hook replace (hooks/events.py:
    308-309)."""

    def __init__(self, specs: dict, emit_box: list):
        self.specs, self.emit_box = specs, emit_box

    def register_hooks(self, registry, **kwargs) -> None:
        from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent
        registry.add_callback(BeforeToolCallEvent, self.approve)
        # AfterToolCallEvent callbacks run in reverse order (hooks/events.py:310-313): the
        # texts are set first, then the result is reported.
        registry.add_callback(AfterToolCallEvent, self.report)
        registry.add_callback(AfterToolCallEvent, self.error_text)

    def approve(self, event) -> None:
        use = event.tool_use
        if not self.specs.get(use["name"], {}).get("requires_approval"):
            return
        answer = event.interrupt(INTERRUPT, reason={
            "call_id": use["toolUseId"], "name": use["name"], "arguments": use.get("input")})
        if not answer.get("approved"):
            event.cancel_tool = rejection_text(answer.get("reason"))

    def error_text(self, event) -> None:
        if event.cancel_message is not None or event.exception is None:
            return
        if event.selected_tool is None:
            text = f"Error: unknown tool '{event.tool_use['name']}'"
        else:
            text = f"Error: {type(event.exception).__name__}: {event.exception}"
        event.result = {**event.result, "content": [{"text": text}]}

    def report(self, event) -> None:
        use = event.tool_use
        self.emit_box[0]({"type": "tool_result", "call_id": use["toolUseId"],
                          "name": use["name"], "result": _text(event.result)})


def _messages(inputs: list[dict]) -> list[dict]:
    """The case's input messages as Strands ``Message`` objects."""
    return [{"role": m["role"], "content": [{"text": m.get("content") or ""}]} for m in inputs]


class Strands(Peer):
    def setup(self, message: dict) -> dict:
        self.message = message
        self.executions: list = []
        self.specs = {t["name"]: t for t in message.get("tools", [])}
        self.emit_box = [lambda update: None]
        self.folder = tempfile.mkdtemp(prefix="conformance-strands-")
        atexit.register(shutil.rmtree, self.folder, True)
        self.handles: dict = {}   # call id -> its interrupt id, from every pause seen
        self.agent = self._agent()
        return {"type": "ready", "implementation": VERSION, "suites": ["core"],
                "derives": ["finish"],
                "configured": [
                    "approval: a HookProvider's BeforeToolCallEvent callback raises "
                    "event.interrupt(name, reason=...) for a tool that needs approval; "
                    "answers are interruptResponse blocks (docs: concepts/interrupts)",
                    "rejection text: BeforeToolCallEvent.cancel_tool = 'Rejected: <reason>'",
                    "tool errors and unknown tools: an AfterToolCallEvent callback sets "
                    "event.result to SPEC R13/R14's text",
                    "context providers: system_prompt as SystemContentBlocks (the agent's "
                    "instructions, then the providers'), an InvokeModelStage.Input "
                    "middleware puts their messages before the history of each model call",
                    "max_rounds: stream_async(limits={'turns': N}); stop_reason "
                    "'limit_turns' is the max_rounds finish",
                    "session: FileSessionManager (messages and interrupt state)",
                    "OpenAIModel(client_args={base_url, api_key, max_retries: 0})"],
                # Searched for each: the Interrupts guide (strandsagents.com/docs/user-guide/
                # concepts/interrupts: hooks, components, rules, session management), the
                # Hooks and Agent Loop pages, and the pinned source named in each reason.
                "cannot": {
                    "unknown_call_ids": "an interruptResponse names an interrupt id, which "
                                        "is opaque: \"do not parse or construct it\" "
                                        "(strands/interrupt.py:21-22); an id of no pause "
                                        "has none, and the Interrupts guide "
                                        "(concepts/interrupts) builds answers only from "
                                        "result.interrupts",
                    "answers_without_a_pause": "an interruptResponse needs the interrupt id "
                                               "of a pause (strands/interrupt.py:21-22), "
                                               "which an unpaused session has not given "
                                               "(the Interrupts guide answers only "
                                               "result.interrupts)",
                    "stop_after": "Agent.cancel() / stream_async(cancel_signal=) stop "
                                  "\"before tool execution\" (agent/agent.py:653-657), but "
                                  "the documented default ConcurrentToolExecutor "
                                  "(agent/agent.py:577) runs a batch's calls in parallel "
                                  "tasks (tools/executors/concurrent.py:54-72), so a stop "
                                  "between two calls races them; the SequentialToolExecutor "
                                  "stops a batch at its first interrupt "
                                  "(tools/executors/sequential.py:50-71), one approval per "
                                  "pause"}}

    def _agent(self):
        """The agent of the case, its conversation read from the session folder."""
        from strands import Agent
        from strands.middleware.stages import InvokeModelStage
        from strands.models.openai import OpenAIModel
        from strands.session import FileSessionManager
        m = self.message
        providers = m.get("context_providers") or []
        system = [t for t in [m.get("instructions"), *(p.get("instructions") for p in providers)]
                  if t]
        system += [x.get("content") or "" for p in providers for x in p.get("messages", [])
                   if x["role"] == "system"]
        extra = _messages([x for p in providers for x in p.get("messages", [])
                           if x["role"] != "system"])
        model = OpenAIModel(client_args={"base_url": m["base_url"], "api_key": m["api_key"],
                                         "max_retries": 0}, model_id=m["model"])
        agent = Agent(model=model, tools=[_tool(t, self.executions) for t in m.get("tools", [])],
                      system_prompt=[{"text": t} for t in system] or None,
                      hooks=[Hooks(self.specs, self.emit_box)], callback_handler=None,
                      session_manager=FileSessionManager(session_id="conformance",
                                                         storage_dir=self.folder))
        if extra:
            def add_context(context):  # per call only: never in the stored messages
                return context.replace(messages=extra + list(context.messages))
            agent.add_middleware(InvokeModelStage.Input, add_context)
        return agent

    def _history(self) -> list[dict]:
        from strands.models.openai import OpenAIModel
        return OpenAIModel.format_request_messages(self.agent.messages)

    async def run(self, message: dict, emit) -> dict:
        del self.executions[:]
        emitted: list = []

        def counted(update: dict) -> None:
            emitted.append(update)
            emit(update)
        self.emit_box[0] = counted
        if message.get("reload_session"):
            self.agent = self._agent()  # FileSessionManager restores messages and interrupts
        options = message.get("options") or {}
        inputs = message.get("input") or []
        approvals = message.get("approvals") or []
        if approvals and inputs:
            return {"type": "skip", "reason": "a resumed run takes interruptResponse blocks "
                                              "only (strands/interrupt.py:133-142; the "
                                              "Interrupts guide resumes with agent(responses)): "
                                              "no input next to answers"}
        if approvals:
            prompt = [{"interruptResponse": {
                "interruptId": self.handles.get(a["call_id"], a["call_id"]),
                "response": {"approved": a["approved"], "reason": a.get("reason")}}}
                for a in approvals]
        else:
            prompt = _messages(inputs)
        limits = {"turns": options.get("max_rounds", 40)}  # SPEC R8's default
        error, result, call_id, index = None, None, None, 0
        try:
            async for event in self.agent.stream_async(prompt, limits=limits):
                if "result" in event:
                    result = event["result"]
                chunk = event.get("event")
                if not isinstance(chunk, dict):
                    continue
                if "messageStart" in chunk:
                    index = 0
                elif "contentBlockStart" in chunk:
                    use = chunk["contentBlockStart"].get("start", {}).get("toolUse")
                    if use:
                        call_id = use["toolUseId"]
                        counted({"type": "tool_call_start", "call_id": call_id,
                                 "name": use["name"], "index": index})
                        index += 1
                elif "contentBlockDelta" in chunk:
                    delta = chunk["contentBlockDelta"]["delta"]
                    if "text" in delta:
                        counted({"type": "text", "text": delta["text"]})
                    elif "toolUse" in delta and call_id and isinstance(
                            delta["toolUse"].get("input"), str) and delta["toolUse"]["input"]:
                        # the provider's own text; anything else is Strands' to refuse
                        counted({"type": "tool_call_args", "call_id": call_id,
                                 "delta": delta["toolUse"]["input"]})
                    elif "reasoningContent" in delta and delta["reasoningContent"].get("text"):
                        counted({"type": "reasoning", "text": delta["reasoningContent"]["text"]})
                elif "contentBlockStop" in chunk and call_id:
                    counted({"type": "tool_call_end", "call_id": call_id})
                    call_id = None
            for interrupt in result.interrupts or []:
                reason = interrupt.reason or {}
                self.handles[reason.get("call_id")] = interrupt.id
                counted({"type": "approval_request", "call_id": reason.get("call_id"),
                         "name": reason.get("name"), "arguments": reason.get("arguments"),
                         "description": self.specs.get(reason.get("name"), {}).get(
                             "description")})
            invocation = result.metrics.latest_agent_invocation
            u = invocation.usage if invocation else {}
            usage = ({"prompt_tokens": u["inputTokens"], "completion_tokens": u["outputTokens"],
                      "total_tokens": u["totalTokens"]} if u.get("totalTokens") else None)
            finish = {"interrupt": "awaiting_approval", "limit_turns": "max_rounds",
                      "max_tokens": "length", "content_filtered": "content_filter"}.get(
                          result.stop_reason, "stop")
            counted({"type": "finish", "finish_reason": finish, "usage": usage})
        except Exception as exc:
            # An answer Strands refuses before anything ran (an interrupt id it does not
            # hold: interrupt.py:149-150; answers to an agent not paused: agent/agent.py:
            # 1997-2002) is the README's ApprovalError behaviour.
            refused = approvals and not emitted and not self.executions and isinstance(
                exc, (KeyError, ValueError))
            error = {"kind": "ApprovalError" if refused else error_kind(exc),
                     "message": f"{type(exc).__name__}: {exc}"}
        return {"type": "end", "error": error, "history": self._history(),
                "executions": list(self.executions)}


if __name__ == "__main__":
    raise SystemExit(serve(Strands()))
