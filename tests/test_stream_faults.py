"""Issue 12, provider side: faults found by running agentflow against other people's
OpenAI-compatible servers (SPEC §6). Each example of the issue is a test over real
HTTP on 127.0.0.1 (``agentflow.testing.replay.ReplayServer``) with the issue's bytes, next to
variants of the same kind. The seeded random test over the recorded streams is in
test_stream_fuzz.py.

Helpers (``sse``, ``delta``, ``run_body``) come from test_openai_client.py and
(``calls``, ``ok``, ``Recorder``) from test_stream_quirks.py.
"""

from __future__ import annotations

import json
import threading

import pytest

from agentflow import AgentSession, ChatMessage
from agentflow.assembler import ChunkAssembler, stream_updates
from agentflow.errors import BadRequestError, IncompleteStreamError, ProviderError
from agentflow.openai_client import MAX_RETRY_WAIT, OpenAIChatClient
from agentflow.testing.replay import Reply, ReplayServer, chat_stream
from agentflow.types import (Finish, FinishReason, ReasoningDelta, TextDelta, ToolCall,
                             ToolCallArgs, ToolCallEnd, ToolCallStart, ToolResult, Usage)
from test_openai_client import HoldingServer, collect, delta, sse
from test_stream_quirks import Recorder, calls


@pytest.fixture(scope="module")
def server():
    """One loopback server for the module; each test queues the one reply it reads."""
    with ReplayServer() as shared:
        yield shared


def serve(server, reply, **client_args):
    """Queue ``reply``, run a client on it (retries off); return (updates, error)."""
    server.queue(reply)
    client = OpenAIChatClient(model="m", base_url=server.base_url,
                              **{"api_key": "sk-test-key-0001", "max_retries": 0, **client_args})
    return collect(client)


def ok(server, reply, **client_args):
    """Serve ``reply``; return the updates, failing the test if an error was raised."""
    updates, error = serve(server, reply, **client_args)
    assert error is None, f"unexpected {type(error).__name__}: {error}"
    return updates


def finish_of(updates) -> Finish:
    assert isinstance(updates[-1], Finish)
    return updates[-1]


def starts(updates) -> list:
    return [u for u in updates if isinstance(u, ToolCallStart)]


# -- 1. two calls on one index ----------------------------------------------------------

def write_call(call_id, path, **extra):
    return {"index": 0, "id": call_id, "type": "function",
            "function": {"name": "write", "arguments": json.dumps({"path": path})}, **extra}


ONE_INDEX = sse(delta({"role": "assistant", "content": None}),
                calls(write_call("call_a", "a.txt")),
                calls(write_call("call_b", "b.txt")),
                delta({}, "tool_calls"), "[DONE]")


def test_two_calls_on_index_0_are_two_calls(server):
    """SPEC §6: a different non-empty id *and* a name on an index whose slot already
    has an id is a new call (the issue's bytes; Ollama puts every call on index 0).
    The second call gets the next position as its index."""
    updates = ok(server, ONE_INDEX)
    assert updates == [
        ToolCallStart("call_a", "write", 0), ToolCallArgs("call_a", '{"path": "a.txt"}'),
        ToolCallStart("call_b", "write", 1), ToolCallArgs("call_b", '{"path": "b.txt"}'),
        ToolCallEnd("call_a"), ToolCallEnd("call_b"),
        Finish(FinishReason.TOOL_CALLS, None)]
    assert finish_of(updates).message.tool_calls == [
        ToolCall("call_a", "write", '{"path": "a.txt"}'),
        ToolCall("call_b", "write", '{"path": "b.txt"}')]


def test_two_calls_on_index_0_both_run(make_agent):
    """The same bytes through the tool loop: both calls run, each with its own
    arguments, and the next request answers both."""
    writer = Recorder("write")
    agent, server = make_agent([ONE_INDEX, chat_stream("Written.")], tools=[writer])
    list(agent.run("write a and b"))
    assert writer.invocations == [{"path": "a.txt"}, {"path": "b.txt"}]
    sent = server.requests[1].json["messages"]
    assert [m.get("tool_call_id") for m in sent[2:]] == ["call_a", "call_b"]


def test_three_calls_on_index_0_in_fragments(server):
    """Variant: three calls on index 0, each header followed by fragments without id;
    a fragment goes to the call opened last on that index."""
    body = sse(
        calls({"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}),
        calls({"index": 0, "function": {"arguments": '{"n":1}'}}),
        calls({"index": 0, "id": "b", "function": {"name": "g", "arguments": '{"n":'}}),
        calls({"index": 0, "function": {"arguments": "2}"}}),
        calls({"index": 0, "id": "c", "function": {"name": "h", "arguments": '{"n":3}'}}),
        delta({}, "tool_calls"), "[DONE]")
    message = finish_of(ok(server, body)).message
    assert message.tool_calls == [ToolCall("a", "f", '{"n":1}'), ToolCall("b", "g", '{"n":2}'),
                                  ToolCall("c", "h", '{"n":3}')]


def test_a_different_id_without_a_name_is_a_resent_header(server):
    """SPEC §6: a different id without a name on an occupied index is a re-sent
    header; the first id wins and there is one call."""
    body = sse(
        calls({"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x":'}}),
        calls({"index": 0, "id": "other", "function": {"arguments": "1}"}}),
        delta({}, "tool_calls"), "[DONE]")
    assert finish_of(ok(server, body)).message.tool_calls == [ToolCall("a", "f", '{"x":1}')]


def test_the_same_id_and_name_resent_on_index_0_is_one_call(server):
    """A header re-sent in full with the *same* id is not a new call."""
    body = sse(calls(write_call("call_a", "a.txt")),
               calls({"index": 0, "id": "call_a", "function": {"name": "write"}}),
               delta({}, "tool_calls"), "[DONE]")
    assert len(finish_of(ok(server, body)).message.tool_calls) == 1


def test_two_calls_without_index_second_one_with_id(server):
    """The issue's variant without `index`: a whole call without id, then a whole call
    with id "b": two calls (a call that already has its name and arguments is whole)."""
    body = sse(calls({"function": {"name": "f", "arguments": '{"x": 1}'}}),
               calls({"id": "b", "function": {"name": "f", "arguments": '{"x": 2}'}}),
               delta({}, "tool_calls"), "[DONE]")
    message = finish_of(ok(server, body)).message
    assert [(c.name, c.arguments) for c in message.tool_calls] == [
        ("f", '{"x": 1}'), ("f", '{"x": 2}')]
    assert message.tool_calls[1].id == "b" and message.tool_calls[0].id != "b"


def test_without_index_an_id_after_a_bare_name_completes_the_call(server):
    """The counterpart: a header sent in pieces without index (name, then id with the
    arguments) is one call."""
    body = sse(calls({"function": {"name": "f", "arguments": ""}}),
               calls({"id": "b", "function": {"name": "f", "arguments": '{"x": 2}'}}),
               delta({}, "tool_calls"), "[DONE]")
    assert finish_of(ok(server, body)).message.tool_calls == [ToolCall("b", "f", '{"x": 2}')]


# -- 2. call order ----------------------------------------------------------------------

LATE_NAME = sse(
    calls({"index": 0, "id": "c0", "type": "function", "function": {"name": "", "arguments": ""}}),
    calls({"index": 1, "id": "c1", "type": "function",
           "function": {"name": "second", "arguments": '{"path": "2"}'}}),
    calls({"index": 0, "function": {"name": "first", "arguments": '{"path": "1"}'}}),
    delta({}, "tool_calls"), "[DONE]")


def test_calls_start_in_the_order_their_slots_opened(server):
    """SPEC §6: calls are kept in the order their slots were first opened. Index 0's
    name arrives after index 1 opened: index 1 waits, so the updates, the message and
    the ends all say 0 then 1."""
    updates = ok(server, LATE_NAME)
    assert updates == [
        ToolCallStart("c0", "first", 0), ToolCallArgs("c0", '{"path": "1"}'),
        ToolCallStart("c1", "second", 1), ToolCallArgs("c1", '{"path": "2"}'),
        ToolCallEnd("c0"), ToolCallEnd("c1"), Finish(FinishReason.TOOL_CALLS, None)]
    assert [c.id for c in finish_of(updates).message.tool_calls] == ["c0", "c1"]


def test_calls_run_and_are_stored_in_slot_order(make_agent):
    """The same bytes through the loop: "first" runs before "second" and the stored
    message and results keep that order."""
    order = []
    first, second = Recorder("first"), Recorder("second")
    first.invoke = lambda arguments: order.append("first") or "ok"
    second.invoke = lambda arguments: order.append("second") or "ok"
    agent, server = make_agent([LATE_NAME, chat_stream("Done.")], tools=[first, second])
    session = AgentSession()
    list(agent.run("go", session))
    assert order == ["first", "second"]
    assert [c.id for c in session.messages[1].tool_calls] == ["c0", "c1"]
    assert [m.tool_call_id for m in session.messages[2:4]] == ["c0", "c1"]


def test_a_late_fragment_of_an_earlier_call_does_not_move_it(server):
    """SPEC §6: a later fragment of an earlier call never moves it."""
    body = sse(
        calls({"index": 0, "id": "c0", "function": {"name": "f", "arguments": '{"a":'}}),
        calls({"index": 1, "id": "c1", "function": {"name": "g", "arguments": "{}"}}),
        calls({"index": 0, "id": "c0", "function": {"name": "f", "arguments": "1}"}}),
        delta({}, "tool_calls"), "[DONE]")
    assert finish_of(ok(server, body)).message.tool_calls == [ToolCall("c0", "f", '{"a":1}'),
                                                      ToolCall("c1", "g", "{}")]


# -- 3. ids unique across the conversation ------------------------------------------------

def no_id_call(name, arguments):
    return sse(calls({"index": 0, "type": "function",
                      "function": {"name": name, "arguments": arguments}}),
               delta({}, "tool_calls"), "[DONE]")


def test_invented_ids_never_repeat_across_turns(make_agent):
    """SPEC §6: a missing id is invented unique across the whole conversation. Two
    turns whose calls carry no id: the third request holds two different ids, each
    answered once."""
    echo = Recorder("echo")
    agent, server = make_agent([no_id_call("echo", '{"path": "1"}'),
                                no_id_call("echo", '{"path": "2"}'), chat_stream("Done.")],
                               tools=[echo])
    list(agent.run("go"))
    sent = server.requests[2].json["messages"]
    ids = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert len(ids) == 2 and len(set(ids)) == 2 and answered == ids


def test_a_provider_id_reused_from_an_earlier_turn_is_renamed(make_agent):
    """The same kind with ids the provider sent: a server numbering calls per turn
    ("call_0" twice) would also make the history ambiguous; the second becomes unique."""
    echo = Recorder("echo")
    agent, server = make_agent([chat_stream(tool_calls=[("call_0", "echo", '{"path": "1"}')]),
                                chat_stream(tool_calls=[("call_0", "echo", '{"path": "2"}')]),
                                chat_stream("Done.")], tools=[echo])
    list(agent.run("go"))
    sent = server.requests[2].json["messages"]
    ids = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    assert ids[0] == "call_0" and ids[1] != "call_0"
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


def test_the_client_avoids_ids_of_the_messages_it_is_given():
    """``OpenAIChatClient.run`` reads the ids of the conversation it sends: an
    invented id is none of them (here call_0 and call_1 are taken)."""
    history = [ChatMessage.user("go"),
               ChatMessage.assistant(None, [ToolCall("call_0", "echo", "{}"),
                                            ToolCall("call_1", "echo", "{}")]),
               ChatMessage.tool("ok", "call_0"), ChatMessage.tool("ok", "call_1")]
    with ReplayServer([no_id_call("echo", "{}")]) as server:
        client = OpenAIChatClient(base_url=server.base_url, api_key="k", max_retries=0)
        updates = list(client.run(history))
    assert starts(updates) == [ToolCallStart("call_2", "echo", 0)]


def test_a_numeric_id_becomes_a_string(make_agent):
    """SPEC §6: ids are strings; `"id": 7` is "7" in the updates, the stored
    message and the tool result."""
    echo = Recorder("echo")
    body = sse(calls({"index": 0, "id": 7, "type": "function",
                      "function": {"name": "echo", "arguments": "{}"}}),
               delta({}, "tool_calls"), "[DONE]")
    agent, server = make_agent([body, chat_stream("Done.")], tools=[echo])
    updates = list(agent.run("go"))
    assert starts(updates) == [ToolCallStart("7", "echo", 0)]
    assert [u for u in updates if isinstance(u, ToolResult)] == [ToolResult("7", "echo", "ok")]
    sent = server.requests[1].json["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "7" and sent[2]["tool_call_id"] == "7"


# -- 5. valid JSON of the wrong shape ---------------------------------------------------

def call_with(**fields):
    return {"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}, **fields}]}}]}


def function_with(**fields):
    return call_with(function={"name": "f", "arguments": "{}", **fields})


def delta_with(**fields):
    return {"choices": [{"index": 0, "delta": fields}]}


def choice_with(**fields):
    return {"choices": [{"index": 0, "delta": {}, **fields}]}


# (the chunk, the field the error must name)
WRONG_SHAPES = [
    ({"choices": [None]}, "choices[0]"),
    ({"choices": True}, "choices"),
    ({"choices": "x"}, "choices"),
    ({"choices": {"index": 0}}, "choices"),
    ({"choices": [1]}, "choices[0]"),
    ({"choices": [[]]}, "choices[0]"),
    (choice_with(delta="x"), "choices[0].delta"),
    (choice_with(delta=["x"]), "choices[0].delta"),
    (choice_with(index="0"), "choices[0].index"),
    (choice_with(index=-1), "choices[0].index"),
    (choice_with(index=1.5), "choices[0].index"),
    (choice_with(index=True), "choices[0].index"),
    (choice_with(finish_reason=1), "choices[0].finish_reason"),
    (choice_with(finish_reason={}), "choices[0].finish_reason"),
    (delta_with(content=5), "choices[0].delta.content"),
    (delta_with(content={"text": "x"}), "choices[0].delta.content"),
    (delta_with(content=[None]), "choices[0].delta.content[0]"),
    (delta_with(content=[5]), "choices[0].delta.content[0]"),
    (delta_with(content=[{"type": "text", "text": 5}]), "choices[0].delta.content[0].text"),
    (delta_with(content=[{"type": "thinking", "thinking": [{"text": []}]}]),
     "choices[0].delta.content[0].thinking[0].text"),
    (delta_with(refusal=1), "choices[0].delta.refusal"),
    (delta_with(reasoning_content=[]), "choices[0].delta.reasoning_content"),
    (delta_with(reasoning={"text": "x"}), "choices[0].delta.reasoning"),
    (delta_with(tool_calls=[None]), "choices[0].delta.tool_calls[0]"),
    (delta_with(tool_calls="x"), "choices[0].delta.tool_calls"),
    (delta_with(tool_calls={"index": 0}), "choices[0].delta.tool_calls"),
    (delta_with(tool_calls=[1]), "choices[0].delta.tool_calls[0]"),
    (call_with(function="x"), "choices[0].delta.tool_calls[0].function"),
    (call_with(function=[]), "choices[0].delta.tool_calls[0].function"),
    (call_with(index="0"), "choices[0].delta.tool_calls[0].index"),
    (call_with(index=-1), "choices[0].delta.tool_calls[0].index"),
    (call_with(index=1.5), "choices[0].delta.tool_calls[0].index"),
    (call_with(id={}), "choices[0].delta.tool_calls[0].id"),
    (call_with(id=True), "choices[0].delta.tool_calls[0].id"),
    (call_with(id=1.5), "choices[0].delta.tool_calls[0].id"),
    (function_with(name=5), "choices[0].delta.tool_calls[0].function.name"),
    (function_with(name=["f"]), "choices[0].delta.tool_calls[0].function.name"),
    (function_with(arguments=5), "choices[0].delta.tool_calls[0].function.arguments"),
    (function_with(arguments=True), "choices[0].delta.tool_calls[0].function.arguments"),
    ({"choices": [], "usage": "abc"}, "usage"),
    ({"choices": [], "usage": [1]}, "usage"),
    ({"choices": [], "usage": {"prompt_tokens": "n/a"}}, "usage.prompt_tokens"),
    ({"choices": [], "usage": {"completion_tokens": 1.5}}, "usage.completion_tokens"),
    ({"choices": [], "usage": {"total_tokens": -3}}, "usage.total_tokens"),
    ({"choices": [], "usage": {"prompt_tokens": True}}, "usage.prompt_tokens"),
    ({"choices": [], "x_groq": "x"}, "x_groq"),
    ({"choices": [], "x_groq": {"usage": "x"}}, "x_groq.usage"),
]


@pytest.mark.parametrize("chunk,field", WRONG_SHAPES, ids=[f for _, f in WRONG_SHAPES])
def test_wrong_shape_is_a_provider_error_naming_event_and_field(server, chunk, field):
    """SPEC §6: valid JSON of the wrong shape anywhere in a chunk raises ProviderError
    naming the event (here the 2nd) and the field; the update before it arrived."""
    body = sse(delta({"content": "Hi"}), chunk, delta({}, "stop"), "[DONE]")
    updates, error = serve(server, body)
    assert updates == [TextDelta("Hi")]
    assert type(error) is ProviderError, repr(error)
    assert f"malformed stream event 2: {field} is " in error.message


def test_the_issue_s_choices_null_leaves_the_session_as_it_was(make_agent):
    """The issue's `data: {"choices":[null]}` through the agent: ProviderError, and the
    session is exactly as it was before the run (SPEC R10)."""
    agent, _ = make_agent([sse({"choices": [None]})])
    session = AgentSession(messages=[ChatMessage.user("earlier"), ChatMessage.assistant("hi")])
    before = session.to_dict()
    with pytest.raises(ProviderError, match=r"stream event 1: choices\[0\] is null"):
        list(agent.run("new question", session))
    assert session.to_dict() == before


def test_json_nested_too_deeply_for_the_decoder(server):
    """SPEC §6: nesting deep enough to break a recursive decoder is a ProviderError
    naming the event, not a RecursionError."""
    deep = "[" * 100_000 + "]" * 100_000
    updates, error = serve(server, sse(delta({"content": "Hi"}), deep))
    assert updates == [TextDelta("Hi")]
    assert type(error) is ProviderError and "stream event 2" in error.message
    assert "nested too deeply" in error.message


def test_deep_nesting_in_an_error_event_or_an_http_error_body(server):
    """The same kind where the client reads JSON outside the chunks: an `event: error`
    and an HTTP error body nested too deeply are still ProviderErrors."""
    deep = "[" * 100_000 + "]" * 100_000
    _, error = serve(server, f"event: error\ndata: {deep}\n\n".encode())
    assert type(error) is ProviderError
    _, error = serve(server, Reply(deep, status=400, content_type="application/json"))
    assert type(error) is BadRequestError and error.status == 400  # its status's class


def test_arguments_object_nested_too_deeply_to_serialise():
    """An arguments *object* is serialised (SPEC §6); one nested beyond the encoder's
    recursion limit is a ProviderError naming the field (sans-IO: such a dict cannot
    come out of the decoder in the first place)."""
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ProviderError, match=r"tool_calls\[0\].function.arguments"):
        ChunkAssembler().feed(call_with(function={"name": "f", "arguments": {"a": deep}}))


NON_STREAMING_SHAPES = [
    ({"choices": [{"message": {"role": "assistant", "tool_calls": "INVALID"}}]},
     "choices[0].message.tool_calls"),
    ({"choices": [{"message": {"tool_calls": [None]}}]}, "choices[0].message.tool_calls[0]"),
    ({"choices": [{"message": "x"}]}, "choices[0].message"),
    ({"choices": [None]}, "choices[0]"),
    ({"choices": "x"}, "choices"),
    ({"choices": [{"message": {"content": 5}}]}, "choices[0].message.content"),
    ({"choices": [{"message": {"tool_calls": [{"function": "x"}]}}]},
     "choices[0].message.tool_calls[0].function"),
    ({"choices": [], "usage": "abc"}, "usage"),
    ([1], "the body"),
]


@pytest.mark.parametrize("body,field", NON_STREAMING_SHAPES,
                         ids=[f for _, f in NON_STREAMING_SHAPES])
def test_wrong_shape_in_a_non_streaming_body(server, body, field):
    """The same rule for a `chat.completion` body (stream=False): the issue's
    `message.tool_calls: "INVALID"` and its kin are ProviderErrors naming the field."""
    reply = Reply(json.dumps(body), content_type="application/json")
    updates, error = serve(server, reply, stream=False)
    assert updates == []
    assert type(error) is ProviderError, repr(error)
    assert f"malformed the response body: {field} is " in error.message


# -- 6. a finished turn survives the transport -----------------------------------------

FINISHED = chat_stream(text="All done.", usage=(7, 3), done=False)  # finish + usage, no [DONE]
CHUNKED_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")


def chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body)


@pytest.mark.parametrize("reply", [
    Reply(FINISHED, reset=True),
    Reply(raw=CHUNKED_HEAD + chunked(FINISHED)),
    Reply(raw=CHUNKED_HEAD + chunked(FINISHED) + b"40\r\ndata: [DO"),
    Reply(raw=CHUNKED_HEAD + chunked(FINISHED), reset=True),
    Reply(raw=b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 9999\r\n\r\n"
          + FINISHED),
], ids=["reset", "chunked-no-terminator", "chunked-cut-mid-chunk", "chunked-then-reset",
        "short-of-content-length"])
def test_a_finished_turn_is_complete_whatever_the_connection_does(server, reply):
    """SPEC §6: finish_reason and usage arrived, then the connection was reset or cut
    (also under chunked encoding) before [DONE]: the turn is complete, as after a
    clean close."""
    updates = ok(server, reply)
    assert updates == [TextDelta("All"), TextDelta(" done."),
                       Finish(FinishReason.STOP, Usage(7, 3, 10))]


def test_a_finished_turn_is_complete_after_a_stall():
    """The stall variant: the server holds the connection open after the usage chunk;
    after read_timeout the turn is complete rather than lost."""
    gate = threading.Event()
    with HoldingServer([FINISHED], [gate], wait=10) as server:
        client = OpenAIChatClient(base_url=server.base_url, api_key="k", max_retries=0,
                                  read_timeout=0.1)
        updates = list(client.run([ChatMessage.user("hi")]))
    assert finish_of(updates) == Finish(FinishReason.STOP, Usage(7, 3, 10))
    assert finish_of(updates).message.content == "All done."


@pytest.mark.parametrize("reply,cause", [
    (Reply(FINISHED[:60], reset=True), "the server reset the connection"),
    (Reply(raw=CHUNKED_HEAD + chunked(FINISHED[:60]) + b"40\r\nda"),
     "the server closed the connection before the end of the body"),
])
def test_a_turn_cut_before_its_finish_is_incomplete_in_words(server, reply, cause):
    """Before the finish reason, a broken connection is still IncompleteStreamError,
    saying what happened in words (not "IncompleteRead(0 bytes read)")."""
    _, error = serve(server, reply)
    assert type(error) is IncompleteStreamError
    assert cause in error.message and "IncompleteRead" not in error.message


# -- 7. the content filter's calls ------------------------------------------------------

@pytest.mark.parametrize("reason,expected", [("content_filter", FinishReason.CONTENT_FILTER),
                                             ("length", FinishReason.LENGTH)])
def test_a_cut_short_turn_keeps_its_reason_and_its_message_has_no_calls(server, reason, expected):
    """R14: a turn ended by content_filter (or length) with tool calls is that reason,
    not TOOL_CALLS; the assembled message keeps its text only, so nothing runs."""
    body = sse(delta({"content": "Let me"}),
               calls({"index": 0, "id": "c1", "function": {"name": "rm", "arguments": "{}"}}),
               delta({}, reason), "[DONE]")
    finish = finish_of(ok(server, body))
    assert finish.finish_reason is expected
    assert finish.message.to_openai() == {"role": "assistant", "content": "Let me"}


def test_the_calls_of_a_filtered_turn_never_run(make_agent):
    """R14 end to end: the run ends with CONTENT_FILTER, the tool never ran, and the
    session keeps the turn's text without its calls."""
    remover = Recorder("rm")
    body = sse(delta({"content": "Let me"}),
               calls({"index": 0, "id": "c1", "function": {"name": "rm", "arguments": "{}"}}),
               delta({}, "content_filter"), "[DONE]")
    agent, _ = make_agent([body], tools=[remover])
    session = AgentSession()
    updates = list(agent.run("clean up", session))
    assert finish_of(updates).finish_reason is FinishReason.CONTENT_FILTER
    assert remover.invocations == []
    assert session.messages[-1].to_openai() == {"role": "assistant", "content": "Let me"}


def test_a_filtered_turn_without_text_is_stored_with_empty_content(server):
    body = sse(calls({"index": 0, "id": "c1", "function": {"name": "rm", "arguments": "{}"}}),
               delta({}, "content_filter"), "[DONE]")
    assert finish_of(ok(server, body)).message.to_openai() == {"role": "assistant", "content": ""}


# -- 8. reasoning before text -----------------------------------------------------------

@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_comes_before_text_of_the_same_delta(server, field):
    """SPEC §6: when one delta carries both reasoning and text, the reasoning update
    comes first (also before a refusal)."""
    body = sse(delta({"content": "Answer.", field: "Thought.", "role": "assistant"}),
               delta({"refusal": "No.", field: "Why not."}), delta({}, "stop"), "[DONE]")
    assert ok(server, body)[:4] == [ReasoningDelta("Thought."), TextDelta("Answer."),
                            ReasoningDelta("Why not."), TextDelta("No.")]


# -- 9. empty turns ---------------------------------------------------------------------

def test_an_empty_turn_is_assembled_with_empty_content(server):
    """SPEC §6 (the issue's bytes): a turn with no text and no calls is assembled as
    content "", never null."""
    body = (b'data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}]}\n\n'
            b"data: [DONE]\n\n")
    finish = finish_of(ok(server, body))
    assert finish.message.to_openai() == {"role": "assistant", "content": ""}


# -- 10. retries before the first body byte ---------------------------------------------

def retry_run(replies, **client_args):
    """Serve ``replies``; return (updates, error, number of requests, sleeps asked)."""
    with ReplayServer(replies) as server:
        client = OpenAIChatClient(base_url=server.base_url, api_key="k", **client_args)
        sleeps: list = []
        client._sleep = sleeps.append
        updates, error = [], None
        try:
            updates.extend(client.run([ChatMessage.user("hi")]))
        except ProviderError as exc:
            error = exc
        return updates, error, len(server.requests), sleeps


GOOD = chat_stream("fine")


@pytest.mark.parametrize("bad", [
    Reply(raw=b"HTTP/1.1 200 OK\r\n", reset=True),
    Reply(raw=b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", reset=True),
    Reply(b""),
    Reply(b"", content_type="application/json"),
    Reply(raw=b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n"
              b"Connection: close\r\n\r\n"),
], ids=["reset-after-status-line", "reset-after-headers", "empty-200", "empty-200-json",
        "content-length-0"])
def test_failures_before_the_first_body_byte_are_retried(bad):
    """SPEC §6: a reset right after the status line or the headers, and a 200 with an
    empty body, are retried like a connection error."""
    updates, error, requests, sleeps = retry_run([bad, GOOD])
    assert error is None and requests == 2 and len(sleeps) == 1
    assert updates[0] == TextDelta("fine")


def test_an_empty_body_says_so_when_retries_run_out():
    """The last error names the empty body, not the Content-Type."""
    _, error, requests, _ = retry_run([Reply(b"", content_type="text/plain")] * 2, max_retries=1)
    assert requests == 2
    assert "HTTP 200 with an empty body" in error.message and "Content-Type" not in error.message


@pytest.mark.parametrize("status", [408, 409])
def test_408_and_409_are_retried(status):
    error = Reply(json.dumps({"error": {"message": "again"}}), status=status,
                  content_type="application/json")
    _, failure, requests, _ = retry_run([error, GOOD])
    assert failure is None and requests == 2


def busy(headers, status=429):
    return Reply(json.dumps({"error": {"message": "slow down", "code": "rate_limit"}}),
                 status=status, content_type="application/json", headers=headers)


def test_retry_after_ms_is_honoured():
    """SPEC §6: `retry-after-ms` (the issue: 0.2 s asked, 1 s waited) is honoured, and
    preferred to `Retry-After`."""
    _, error, _, sleeps = retry_run([busy({"retry-after-ms": "200", "Retry-After": "1"}), GOOD])
    assert error is None and sleeps == [0.2]


def test_an_invalid_retry_after_ms_falls_back_to_retry_after():
    _, error, _, sleeps = retry_run([busy({"retry-after-ms": "soon", "Retry-After": "3"}), GOOD])
    assert error is None and sleeps == [3.0]


@pytest.mark.parametrize("headers,named", [
    ({"Retry-After": "3600"}, "Retry-After: 3600"),
    ({"retry-after-ms": "120000"}, "retry-after-ms: 120000"),
])
def test_a_wait_beyond_the_cap_is_named_in_the_error(headers, named):
    """SPEC §6: a longer wait than the cap is not slept through but named, with the
    header that asked for it and the cap."""
    _, error, requests, sleeps = retry_run([busy(headers), GOOD])
    assert requests == 1 and sleeps == []
    assert error.status == 429 and error.code == "rate_limit"
    assert "slow down" in error.message and named in error.message
    assert f"MAX_RETRY_WAIT = {MAX_RETRY_WAIT:g} s" in error.message


def test_the_wait_asked_by_the_last_failure_is_named():
    """When retries run out, the error says how long the server asked to wait."""
    _, error, requests, sleeps = retry_run([busy({"Retry-After": "5"})] * 2, max_retries=1)
    assert requests == 2 and sleeps == [5.0]
    assert "asked to wait 5 s before a retry (Retry-After: 5)" in error.message


def test_an_error_body_framed_as_sse_is_parsed_like_json():
    """SPEC §6 (LiteLLM's 529): `data: {"error": …}` as an HTTP error body gives the
    provider's message and code."""
    body = ('data: {"error": {"message": "Overloaded", "type": "overloaded_error", '
            '"code": "529"}}\n\n')
    _, error, _, _ = retry_run([Reply(body, status=529)], max_retries=0)
    assert error.status == 529 and error.code == "529" and error.message == "Overloaded"


# -- 11. linear assembly: correctness of the pieces (timing is in make bench) -----------

def test_one_large_event_in_many_small_reads():
    """One 1 MB event delivered in 1 KiB reads (the SSE parser keeps its pieces and
    joins them once) decodes to the same text."""
    text = "abcdefghij" * 100_000
    body = sse(delta({"content": text}), delta({}, "stop"), "[DONE]")
    pieces = [body[i:i + 1024] for i in range(0, len(body), 1024)]
    assembler = ChunkAssembler()
    updates = list(stream_updates(pieces, assembler))
    assert updates[0] == TextDelta(text) and assembler.text == text


def test_many_argument_fragments_join_to_the_arguments():
    """2 100 fragments of 8 characters (past two of TextBuffer's blocks) join to the
    arguments, in order, in the message and the updates."""
    arguments = json.dumps({"data": "x" * 16_790})
    fragments = [arguments[i:i + 8] for i in range(0, len(arguments), 8)]
    body = sse(calls({"index": 0, "id": "c", "function": {"name": "f", "arguments": ""}}),
               *(calls({"index": 0, "function": {"arguments": f}}) for f in fragments),
               delta({}, "tool_calls"), "[DONE]")
    updates = list(stream_updates([body]))
    assert "".join(u.delta for u in updates if isinstance(u, ToolCallArgs)) == arguments
    assert finish_of(updates).message.tool_calls == [ToolCall("c", "f", arguments)]
