"""Gateways that send ``finish_reason`` early (issue 41, SPEC §6 fourth batch), over
real HTTP to a keep-alive ``ReplayServer`` on 127.0.0.1.

OpenWebUI, and LiteLLM's Gemini adapter, send ``stop`` on a chunk before the tool call
(LiteLLM on every intermediate chunk). Chunks that come after a finish reason continue
the turn; the last finish reason seen is the turn's; a silence of ``finish_wait``
seconds after one ends the turn (it is complete). The stalls here are a fraction of a
second and ``finish_wait`` is set short where the test needs it to pass; how long a
real stall takes is measured in bench, not here.
"""

from __future__ import annotations

import threading
import time

import pytest

from agentflow import ChatClientAgent, ChatMessage, OpenAIChatClient, tool
from agentflow.openai_client import FINISH_WAIT
from agentflow.testing.replay import Reply, ReplayServer, chat_stream, delta_event
from agentflow.types import (Finish, FinishReason, TextDelta, ToolCallArgs, ToolCallEnd,
                             ToolCallStart, ToolResult)


@tool
def list_files(folder: str) -> str:
    """List a folder."""
    return f"listed {folder}"


HEAD = (delta_event({"role": "assistant", "content": "Let me look."})
        + delta_event({}, "stop"))
CALL = (delta_event({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "list_files", "arguments": ""}}]})
        + delta_event({"tool_calls": [{"index": 0,
                                       "function": {"arguments": '{"folder": "src"}'}}]})
        + delta_event({}, "tool_calls") + b"data: [DONE]\n\n")


def client_for(server: ReplayServer, **settings) -> OpenAIChatClient:
    return OpenAIChatClient(model="m", base_url=server.base_url, api_key="sk-test",
                            max_retries=0, **settings)


def test_finish_wait_defaults_to_ten_seconds_and_never_exceeds_read_timeout():
    """The setting's documented default (README, the constructor's docstring) and its
    cap: a silence after the finish is never waited for longer than any silence."""
    assert FINISH_WAIT == 10.0
    assert OpenAIChatClient(base_url="http://127.0.0.1:9/v1").finish_wait == 10.0
    assert OpenAIChatClient(base_url="http://127.0.0.1:9/v1", read_timeout=3).finish_wait == 3
    assert OpenAIChatClient(base_url="http://127.0.0.1:9/v1", finish_wait=0.5).finish_wait == 0.5
    with pytest.raises(ValueError, match="finish_wait"):
        OpenAIChatClient(base_url="http://127.0.0.1:9/v1", finish_wait=0)


def test_a_call_after_an_early_stop_and_a_stall_is_kept_and_runs():
    """OpenWebUI's shape: text, ``stop``, a pause shorter than finish_wait, then the
    call. The turn goes on after the stop; the call is executed and the model's next
    turn answers (before the fix the caller saw a stop with the call dropped)."""
    def late_call():
        time.sleep(0.05)  # shorter than finish_wait (5 s here)
        return CALL

    with ReplayServer([Reply(chunks=[HEAD, late_call]), chat_stream(text="src has 3 files")],
                      keep_alive="chunked") as server:
        agent = ChatClientAgent(client_for(server, finish_wait=5), tools=[list_files])
        updates = list(agent.run("what is in src?"))
    assert [u.result for u in updates if isinstance(u, ToolResult)] == ["listed src"]
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)) == (
        "Let me look.src has 3 files")
    assert updates[-1].finish_reason is FinishReason.STOP
    second = server.requests[1].json["messages"]
    assert second[1]["tool_calls"][0]["function"] == {"name": "list_files",
                                                      "arguments": '{"folder": "src"}'}
    assert second[1]["content"] == "Let me look."


def test_a_stall_longer_than_finish_wait_ends_the_turn_at_its_stop():
    """The other side of the setting: a silence longer than finish_wait after the stop
    ends the turn there, complete, as a stop with its text (read_timeout is 60 s; the
    server holds the rest until the test lets go)."""
    released = threading.Event()

    def held():
        released.wait(8)
        return CALL

    with ReplayServer([Reply(chunks=[HEAD, held])], keep_alive="chunked") as server:
        client = client_for(server, read_timeout=60, finish_wait=0.1)
        updates = list(client.run([ChatMessage.user("what is in src?")], tools=[list_files]))
        released.set()
    assert updates[-1].finish_reason is FinishReason.STOP
    assert updates[-1].message.content == "Let me look." and not updates[-1].message.tool_calls


def test_stop_on_every_chunk_keeps_every_chunk():
    """LiteLLM's Gemini adapter: ``stop`` on each intermediate chunk, the call's
    included. Every chunk after a finish continues the turn; with calls present the
    turn ended with tool calls (SPEC §6)."""
    def arguments(fragment: str) -> dict:
        return {"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}

    header = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                              "function": {"name": "list_files", "arguments": ""}}]}
    body = b"".join(delta_event(delta, "stop") for delta in (
        {"role": "assistant", "content": "Looking"}, header, arguments('{"folder":'),
        arguments(' "src"}'))) + b"data: [DONE]\n\n"
    with ReplayServer([Reply(chunks=[body])], keep_alive="chunked") as server:
        updates = list(client_for(server).run([ChatMessage.user("hi")], tools=[list_files]))
    assert updates == [
        TextDelta("Looking"),
        ToolCallStart("call_1", "list_files", 0),
        ToolCallArgs("call_1", '{"folder":'), ToolCallArgs("call_1", ' "src"}'),
        ToolCallEnd("call_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_the_last_finish_reason_seen_is_the_turns():
    """SPEC §6 "the last finish reason seen is the turn's": ``stop``, more text, then
    ``length``: the turn was cut short, and says so."""
    body = (delta_event({"role": "assistant", "content": "One"}, "stop")
            + delta_event({"content": " two"}) + delta_event({}, "length")
            + b"data: [DONE]\n\n")
    with ReplayServer([Reply(chunks=[body])], keep_alive="chunked") as server:
        updates = list(client_for(server).run([ChatMessage.user("hi")]))
    assert updates[-1].finish_reason is FinishReason.LENGTH
    assert updates[-1].message.content == "One two"
