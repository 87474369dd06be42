"""LangChain 1.x's ``HumanInTheLoopMiddleware`` behind the conformance protocol.

``create_agent(ChatOpenAI(...), tools, middleware=[...], checkpointer=InMemorySaver())``,
as the middleware's documentation shows it: a tool that needs approval is listed in
``interrupt_on`` (all decisions allowed); a turn with such calls ends with one LangGraph
``interrupt`` whose ``HITLRequest.action_requests`` list them in call order, and the
next run is ``Command(resume={"decisions": [...]})``, one decision per listed call,
matched **by position** (a decision names no call id). The conversation is the
checkpointer's thread, read back with ``agent.get_state(config)`` and sent in OpenAI
form by langchain-openai's own ``_convert_message_to_dict``.

Configured through the framework's own parameters (README, "Mapping a framework"):
tool failures through ``ToolErrorMiddleware(on_error=...)`` as SPEC R13's text; the
round limit through ``ModelCallLimitMiddleware(run_limit=N, exit_behavior="error")``,
whose ``ModelCallLimitExceededError`` is the ``max_rounds`` finish; context providers
through a ``wrap_model_call`` middleware; ``reload_session`` through the checkpointer's
own serialiser (``saver.serde.dumps_typed`` of every ``CheckpointTuple`` that
``saver.list`` gives, written again into a new saver with ``put`` and ``put_writes``).
LangChain streams no end-of-call event and no single finish: those are derived.
"""

from __future__ import annotations

import base64
import json
import uuid
from importlib.metadata import version

from conformance.adapters.common import error_kind, json_lines, tool_body

VERSION = (f"langchain {version('langchain')} + langgraph {version('langgraph')} + "
           f"langchain-openai {version('langchain-openai')}")
DEFAULT_ROUNDS = 40  # SPEC R8


def _tool(spec: dict, executions: list):
    from langchain_core.tools import StructuredTool
    body = tool_body(spec, executions)
    return StructuredTool.from_function(
        func=lambda **arguments: body(**arguments), name=spec["name"],
        description=spec.get("description", ""),
        args_schema=spec.get("parameters") or {"type": "object", "properties": {}})


def _context_middleware(providers: list[dict]):
    """R1's context providers as a ``wrap_model_call`` middleware: their instructions
    after the agent's, their messages before the history, on every model call."""
    from langchain.agents.middleware import wrap_model_call
    from langchain_core.messages import HumanMessage, SystemMessage, AIMessage

    kinds = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}
    texts = [p["instructions"] for p in providers if p.get("instructions")]
    extra = [kinds[m["role"]](content=m.get("content") or "")
             for p in providers for m in p.get("messages", [])]

    @wrap_model_call
    def add_context(request, handler):
        system = "\n".join(filter(None, [request.system_message.text
                                         if request.system_message else None, *texts]))
        return handler(request.override(system_message=SystemMessage(content=system)
                                        if system else None,
                                        messages=extra + list(request.messages)))
    return add_context


class LangChain:
    def setup(self, message: dict) -> dict:
        from langchain.agents import create_agent
        from langchain.agents.middleware import (HumanInTheLoopMiddleware,
                                                 ToolErrorMiddleware)
        from langchain_openai import ChatOpenAI
        from langgraph.checkpoint.memory import InMemorySaver
        self.executions: list = []
        self.message = message
        self.specs = {t["name"]: t for t in message.get("tools", [])}
        self.tools = [_tool(t, self.executions) for t in message.get("tools", [])]
        self.model = ChatOpenAI(model=message["model"], base_url=message["base_url"],
                                api_key=message["api_key"], streaming=True,
                                stream_usage=True, max_retries=0)
        self.middleware = [
            HumanInTheLoopMiddleware(interrupt_on={
                t["name"]: True for t in message.get("tools", []) if t.get("requires_approval")}),
            ToolErrorMiddleware(on_error=lambda exc, request:
                                f"Error: {type(exc).__name__}: {exc}"),
        ]
        if message.get("context_providers"):
            self.middleware.append(_context_middleware(message["context_providers"]))
        self.create_agent, self.saver = create_agent, InMemorySaver()
        self.config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        self.asked: list[str] = []  # the call ids of the open interrupt, in its order
        return {"type": "ready", "implementation": VERSION, "suites": ["core"],
                "derives": ["tool_call_end", "finish"],
                "configured": [
                    "tool errors: ToolErrorMiddleware(on_error=...) returns "
                    "'Error: <type>: <message>'",
                    "max_rounds: ModelCallLimitMiddleware(run_limit=N, exit_behavior='error'); "
                    "its ModelCallLimitExceededError is the max_rounds finish",
                    "context providers: a wrap_model_call middleware",
                    "reload_session: the checkpointer's serde (JsonPlusSerializer."
                    "dumps_typed) over saver.list(...), read back into a new InMemorySaver "
                    "with put / put_writes"],
                "cannot": {
                    "unknown_call_ids": "HITLResponse.decisions are matched by position to "
                                        "the interrupt's action_requests (human_in_the_loop."
                                        "py:821-846); a decision names no call id. The "
                                        "Human-in-the-loop guide (docs.langchain.com/oss/"
                                        "python/langchain/human-in-the-loop): \"Decisions "
                                        "must be provided in the same order as the actions "
                                        "appear\". Measured in that documented default "
                                        "(interrupt_mode='batched'); 'per_call' (only in the "
                                        "class docstring, lines 410-417) keys answers by "
                                        "interrupt id but pauses each call as it starts",
                    "duplicate_approvals": "HITLResponse.decisions are matched by position "
                                           "(human_in_the_loop.py:821-846; the Human-in-the-"
                                           "loop guide, docs.langchain.com/oss/python/"
                                           "langchain/human-in-the-loop): one decision per "
                                           "interrupted call, in either interrupt_mode",
                    "resume_counts_a_round": "ModelCallLimitMiddleware's run_limit is the "
                                             "\"Maximum number of model calls allowed per "
                                             "run\" (langchain/agents/middleware/"
                                             "model_call_limit.py:139; the Built-in "
                                             "middleware guide, docs.langchain.com/oss/python/"
                                             "langchain/middleware/built-in, \"Model call "
                                             "limit\"): the resume's tool step is no model "
                                             "call"}}

    def _agent(self, rounds: int):
        from langchain.agents.middleware import ModelCallLimitMiddleware
        return self.create_agent(
            self.model, tools=self.tools, system_prompt=self.message.get("instructions"),
            middleware=[*self.middleware, ModelCallLimitMiddleware(
                run_limit=rounds, exit_behavior="error")],
            checkpointer=self.saver)

    def _history(self, agent) -> list[dict]:
        from langchain_openai.chat_models.base import _convert_message_to_dict
        messages = agent.get_state(self.config).values.get("messages", [])
        out = []
        for m in messages:
            d = _convert_message_to_dict(m)
            if d.get("role") == "system":
                continue
            out.append(d)
        return out

    def _dump(self) -> str:
        """The thread as JSON text: each checkpoint, its metadata and its pending writes
        in the checkpointer's own serialised form (``serde.dumps_typed``)."""
        def typed(value):
            kind, data = self.saver.serde.dumps_typed(value)
            return [kind, base64.b64encode(data).decode("ascii")]
        return json.dumps([{"config": t.config, "parent": t.parent_config,
                            "checkpoint": typed(t.checkpoint), "metadata": typed(t.metadata),
                            "writes": [[task, channel, typed(value)]
                                       for task, channel, value in t.pending_writes or ()]}
                           for t in reversed(list(self.saver.list(self.config)))])

    def _reload(self) -> None:
        """R15: the thread built again from ``_dump``'s text alone, in a new saver."""
        from langgraph.checkpoint.memory import InMemorySaver
        text, self.saver = self._dump(), InMemorySaver()

        def typed(pair):
            return self.saver.serde.loads_typed((pair[0], base64.b64decode(pair[1])))
        for t in json.loads(text):
            checkpoint = typed(t["checkpoint"])
            parent = t["parent"] or {"configurable": {
                k: v for k, v in t["config"]["configurable"].items() if k != "checkpoint_id"}}
            self.saver.put(parent, checkpoint, typed(t["metadata"]),
                           checkpoint["channel_versions"])
            by_task: dict = {}
            for task, channel, value in t["writes"]:
                by_task.setdefault(task, []).append((channel, typed(value)))
            for task, writes in by_task.items():
                self.saver.put_writes(t["config"], writes, task)
        agent = self._agent(DEFAULT_ROUNDS)  # the open interrupt's calls, from the state
        state = agent.get_state(self.config)
        self.asked = []
        if state.interrupts:
            last = state.values["messages"][-1]
            self.asked = [c["id"] for c in getattr(last, "tool_calls", [])
                          if self.specs.get(c["name"], {}).get("requires_approval")]

    def run(self, message: dict, emit) -> dict:
        from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError
        from langchain_core.messages import AIMessageChunk, ToolMessage
        from langgraph.types import Command
        del self.executions[:]
        if message.get("reload_session"):
            self._reload()
        options = message.get("options") or {}
        agent = self._agent(options.get("max_rounds", DEFAULT_ROUNDS))
        answers = {a["call_id"]: a for a in message.get("approvals", [])}
        inputs = [{"role": m["role"], "content": m.get("content") or ""}
                  for m in message.get("input", [])]
        if self.asked and answers:
            decisions = [_decision(answers.get(call_id)) for call_id in self.asked]
            start = Command(resume={"decisions": decisions})
            if inputs:  # README: input after the answers, in the same run
                start = Command(resume={"decisions": decisions},
                                update={"messages": inputs})
        elif answers:  # answers with no interrupt open: a resume of nothing
            start = Command(resume={"decisions": [_decision(a) for a in answers.values()]})
        else:
            start = {"messages": inputs}
        calls, emitted, error, usage, finish = {}, [], None, None, "stop"
        interrupted, turn = None, None

        def send(update):
            emitted.append(update)
            emit(update)

        try:
            for mode, data in agent.stream(start, self.config,
                                           stream_mode=["messages", "updates"]):
                if mode == "updates":
                    if "__interrupt__" in data:
                        interrupted = data["__interrupt__"][0].value
                    continue
                chunk, meta = data
                if isinstance(chunk, AIMessageChunk):
                    step = (meta.get("langgraph_step"), chunk.id)
                    if step != turn:  # a new model turn: its calls' indexes restart
                        turn, calls = step, {}
                    if chunk.content and isinstance(chunk.content, str):
                        send({"type": "text", "text": chunk.content})
                    for part in chunk.tool_call_chunks or []:
                        index = part.get("index")
                        if part.get("id") and index not in calls:
                            calls[index] = part["id"]
                            send({"type": "tool_call_start", "call_id": part["id"],
                                  "name": part.get("name"), "index": index})
                        if part.get("args") and index in calls:
                            send({"type": "tool_call_args", "call_id": calls[index],
                                  "delta": part["args"]})
                    if chunk.usage_metadata:
                        u = chunk.usage_metadata
                        usage = usage or {"prompt_tokens": 0, "completion_tokens": 0,
                                          "total_tokens": 0}
                        usage["prompt_tokens"] += u.get("input_tokens", 0)
                        usage["completion_tokens"] += u.get("output_tokens", 0)
                        usage["total_tokens"] += u.get("total_tokens", 0)
                    reason = (chunk.response_metadata or {}).get("finish_reason")
                    if reason:
                        finish = reason
                elif isinstance(chunk, ToolMessage):
                    send({"type": "tool_result", "call_id": chunk.tool_call_id,
                          "name": chunk.name, "result": chunk.text})
            self.asked = []
            if interrupted:
                last = agent.get_state(self.config).values["messages"][-1]
                gated = [c["id"] for c in getattr(last, "tool_calls", [])
                         if self.specs.get(c["name"], {}).get("requires_approval")]
                for call_id, request in zip(gated, interrupted["action_requests"]):
                    self.asked.append(call_id)
                    send({"type": "approval_request", "call_id": call_id,
                          "name": request["name"], "arguments": request["args"],
                          "description": self.specs.get(request["name"], {}).get(
                              "description")})
            send({"type": "finish", "usage": usage,
                  "finish_reason": "awaiting_approval" if interrupted else
                  finish if finish in ("length", "content_filter") else "stop"})
        except ModelCallLimitExceededError:  # its max-rounds signal (README)
            send({"type": "finish", "finish_reason": "max_rounds", "usage": usage})
        except Exception as exc:
            kind = error_kind(exc)
            if type(exc) is ValueError and not emitted and not self.executions:
                kind = "ApprovalError"  # refused before anything ran (README, "error")
            error = {"kind": kind, "message": f"{type(exc).__name__}: {exc}"}
        return {"type": "end", "error": error, "history": self._history(agent),
                "executions": list(self.executions)}


def _decision(answer: dict | None) -> dict:
    """A case's answer as a HITL decision; no answer is a reject without a message."""
    if answer is None or not answer["approved"]:
        reason = (answer or {}).get("reason")
        return {"type": "reject", **({"message": reason} if reason else {})}
    return {"type": "approve"}


if __name__ == "__main__":
    peer = LangChain()
    raise SystemExit(json_lines(peer.setup, peer.run))
