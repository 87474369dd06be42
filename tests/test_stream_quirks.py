"""Provider stream quirks (SPEC §6, with the SSE rules of §7 they lean on), one small
hand-written body per quirk, over real HTTP to ``agentflow.testing.replay.ReplayServer``.

Each test asserts the exact updates (or the exact error) ``OpenAIChatClient.run``
yields for its body. The bodies are written here, in OpenAI's
``chat.completion.chunk`` format, so that each one shows exactly one deviation.
``ChunkAssembler.quirks`` is checked sans-IO (``stream_updates``) at the end.

Helpers (``sse``, ``delta``, ``run_body``, ``KEY``) come from test_openai_client.py,
which holds the broader client tests; this file does not repeat those.
"""

from __future__ import annotations

import json
import time

import pytest

from agentflow import AgentSession
from agentflow.assembler import ChunkAssembler, stream_updates
from agentflow.errors import IncompleteStreamError, ProviderError, ProviderTimeoutError
from agentflow.testing.replay import Reply, chat_stream
from agentflow.tools import Tool
from agentflow.types import (Finish, FinishReason, ReasoningDelta, TextDelta, ToolCall,
                             ToolCallArgs, ToolCallEnd, ToolCallStart, ToolResult, Usage)
from test_openai_client import delta, run_body, sse


def calls(*tool_calls, finish=None, **extra) -> dict:
    """A chunk whose delta carries only ``tool_calls`` (dicts, as given)."""
    return delta({"tool_calls": list(tool_calls)}, finish, **extra)


def ok(body, **client_args):
    """Serve ``body``; return the updates, failing the test if an error was raised."""
    updates, error, _ = run_body(body, **client_args)
    assert error is None, f"unexpected {type(error).__name__}: {error}"
    return updates


def usage(prompt: int, completion: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


class Recorder(Tool):
    """A tool that records each call's arguments and answers "ok"."""

    description = "Records its calls."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}

    def __init__(self, name: str):
        self.name = name
        self.invocations: list[dict] = []

    def invoke(self, arguments):
        self.invocations.append(arguments)
        return "ok"


# -- tool call slots: index -------------------------------------------------------------

def test_missing_index_two_calls_told_apart_only_by_id():
    """SPEC §6 "when `index` is missing, a new non-empty `id` opens a new slot and
    anything else continues the last slot": two calls without index, distinguished
    only by their ids; the continuation deltas carry neither index nor id."""
    body = sse(
        calls({"id": "call_a", "type": "function",
               "function": {"name": "read_file", "arguments": ""}}),
        calls({"function": {"arguments": '{"path":'}}),
        calls({"function": {"arguments": '"a.txt"}'}}),
        calls({"id": "call_b", "type": "function",
               "function": {"name": "list_dir", "arguments": ""}}),
        calls({"function": {"arguments": '{"dir":"."}'}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("call_a", "read_file", 0),
        ToolCallArgs("call_a", '{"path":'),
        ToolCallArgs("call_a", '"a.txt"}'),
        ToolCallStart("call_b", "list_dir", 1),
        ToolCallArgs("call_b", '{"dir":"."}'),
        ToolCallEnd("call_a"), ToolCallEnd("call_b"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_missing_index_two_whole_calls_in_one_delta():
    """SPEC §6 missing `index`: two complete calls without index in one delta's
    `tool_calls` list are two slots (each has a new non-empty id)."""
    body = sse(
        calls({"id": "call_a", "function": {"name": "f", "arguments": '{"x":1}'}},
              {"id": "call_b", "function": {"name": "g", "arguments": '{"y":2}'}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("call_a", "f", 0), ToolCallArgs("call_a", '{"x":1}'),
        ToolCallStart("call_b", "g", 1), ToolCallArgs("call_b", '{"y":2}'),
        ToolCallEnd("call_a"), ToolCallEnd("call_b"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_index_starting_at_1():
    """SPEC §6 "A tool call's slot is its `index`": the only call has index 1 (as
    Anthropic's compatibility endpoint sends after text); ToolCallStart carries 1."""
    body = sse(
        delta({"role": "assistant", "content": "Reading."}),
        calls({"index": 1, "id": "toolu_1", "type": "function",
               "function": {"name": "read_file", "arguments": ""}}),
        calls({"index": 1, "function": {"arguments": '{"path":"a.txt"}'}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        TextDelta("Reading."),
        ToolCallStart("toolu_1", "read_file", 1),
        ToolCallArgs("toolu_1", '{"path":"a.txt"}'),
        ToolCallEnd("toolu_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_index_gap_0_then_2():
    """SPEC §6 "A tool call's slot is its `index`": indexes 0 then 2 (no 1) are two
    calls in slots 0 and 2; fragments for index 0 sent after index 2 opened still go
    to call 0."""
    body = sse(
        calls({"index": 0, "id": "c0", "function": {"name": "f", "arguments": '{"a":'}}),
        calls({"index": 2, "id": "c2", "function": {"name": "g", "arguments": '{"b":2}'}}),
        calls({"index": 0, "function": {"arguments": "1}"}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("c0", "f", 0), ToolCallArgs("c0", '{"a":'),
        ToolCallStart("c2", "g", 2), ToolCallArgs("c2", '{"b":2}'),
        ToolCallArgs("c0", "1}"),
        ToolCallEnd("c0"), ToolCallEnd("c2"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


# -- tool call headers re-sent ----------------------------------------------------------

def test_header_resent_empty_on_later_deltas():
    """SPEC §6 "`id`, `name` and `type` may be re-sent on later deltas, empty ...: the
    first non-empty value wins": later deltas with id "", type "" and name "" change
    nothing."""
    body = sse(
        calls({"index": 0, "id": "call_1", "type": "function",
               "function": {"name": "read_file", "arguments": ""}}),
        calls({"index": 0, "id": "", "type": "",
               "function": {"name": "", "arguments": '{"path":'}}),
        calls({"index": 0, "id": "", "type": "",
               "function": {"name": "", "arguments": '"a.txt"}'}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("call_1", "read_file", 0),
        ToolCallArgs("call_1", '{"path":'), ToolCallArgs("call_1", '"a.txt"}'),
        ToolCallEnd("call_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_header_resent_in_full_is_never_concatenated():
    """SPEC §6 "`id`, `name` and `type` may be re-sent on later deltas, ... in full: the
    first non-empty value wins, they are never concatenated": the name stays
    `read_file` (not `read_fileread_file`), the id `call_1`, one ToolCallStart."""
    header = {"index": 0, "id": "call_1", "type": "function"}
    body = sse(
        calls({**header, "function": {"name": "read_file", "arguments": ""}}),
        calls({**header, "function": {"name": "read_file", "arguments": '{"path":'}}),
        calls({**header, "function": {"name": "read_file", "arguments": '"a.txt"}'}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("call_1", "read_file", 0),
        ToolCallArgs("call_1", '{"path":'), ToolCallArgs("call_1", '"a.txt"}'),
        ToolCallEnd("call_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]
    # The assembled turn (what ChunkAssembler reports after the stream) agrees.
    assembler = ChunkAssembler()
    list(stream_updates([body], assembler))
    assert assembler.tool_calls == [ToolCall("call_1", "read_file", '{"path":"a.txt"}')]


def test_name_resent_in_full_before_the_id_arrives():
    """SPEC §6 "`id`, `name` and `type` may be re-sent ... in full: ... never
    concatenated": the name comes twice before the id does (so the call is not yet
    announced when it is re-sent); it is announced once, as `read_file`."""
    body = sse(
        calls({"index": 0, "type": "function",
               "function": {"name": "read_file", "arguments": ""}}),
        calls({"index": 0, "id": "call_1", "type": "function",
               "function": {"name": "read_file", "arguments": '{"path":"a"}'}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("call_1", "read_file", 0),
        ToolCallArgs("call_1", '{"path":"a"}'),
        ToolCallEnd("call_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_header_resent_in_full_without_index():
    """SPEC §6 re-sent headers, combined with a missing `index`: the same id re-sent in
    full is not a *new* id, so it continues its slot rather than opening a second
    call, and the name is not concatenated."""
    header = {"id": "call_1", "type": "function"}
    body = sse(
        calls({**header, "function": {"name": "read_file", "arguments": ""}}),
        calls({**header, "function": {"name": "read_file", "arguments": '{"path":"a"}'}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("call_1", "read_file", 0),
        ToolCallArgs("call_1", '{"path":"a"}'),
        ToolCallEnd("call_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_name_empty_first_then_sent_later():
    """SPEC §6 "the first non-empty value wins": a first delta with the id but an empty
    name, the name arriving on the next delta. The call is announced with its real
    name, never as "", and no fragment is lost."""
    body = sse(
        calls({"index": 0, "id": "call_1", "type": "function",
               "function": {"name": "", "arguments": '{"pa'}}),
        calls({"index": 0, "function": {"name": "read_file", "arguments": 'th":"a"}'}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("call_1", "read_file", 0),
        ToolCallArgs("call_1", '{"pa'), ToolCallArgs("call_1", 'th":"a"}'),
        ToolCallEnd("call_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


# -- tool call arguments ----------------------------------------------------------------

def test_arguments_as_json_object_taken_whole():
    """SPEC §6 "an argument **object** (not a string) is taken as the whole arguments,
    serialised": one ToolCallArgs whose text is JSON for that object."""
    arguments = {"city": "Rome", "days": [1, 2]}
    body = sse(calls({"index": 0, "id": "c1",
                      "function": {"name": "weather", "arguments": arguments}}),
               delta({}, "tool_calls"), "[DONE]")
    updates = ok(body)
    assert len(updates) == 4
    start, args, end, finish = updates
    assert start == ToolCallStart("c1", "weather", 0)
    assert type(args) is ToolCallArgs and args.call_id == "c1"
    assert isinstance(args.delta, str)
    assert json.loads(args.delta) == arguments
    assert end == ToolCallEnd("c1")
    assert finish == Finish(FinishReason.TOOL_CALLS, None)


def test_arguments_null_is_skipped():
    """SPEC §6 "`null` is skipped": null fragments (on the header and between string
    fragments) add nothing; the string fragments are concatenated."""
    body = sse(
        calls({"index": 0, "id": "c1", "function": {"name": "f", "arguments": None}}),
        calls({"index": 0, "function": {"arguments": '{"k":'}}),
        calls({"index": 0, "function": {"arguments": None}}),
        calls({"index": 0, "function": {"arguments": "2}"}}),
        delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("c1", "f", 0),
        ToolCallArgs("c1", '{"k":'), ToolCallArgs("c1", "2}"),
        ToolCallEnd("c1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_arguments_whole_in_one_delta():
    """SPEC §6 "`arguments` fragments are concatenated": a call whose arguments come
    whole on the header delta (Groq does this) is one fragment."""
    body = sse(calls({"index": 0, "id": "c1", "type": "function",
                      "function": {"name": "f", "arguments": '{"q":"x y"}'}}),
               delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("c1", "f", 0), ToolCallArgs("c1", '{"q":"x y"}'),
        ToolCallEnd("c1"), Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_arguments_empty_at_the_end_mean_empty_object():
    """SPEC §6 "empty at the end means `{}`": a call whose only arguments were "" gets
    the fragment "{}" before its ToolCallEnd."""
    body = sse(calls({"index": 0, "id": "c1", "type": "function",
                      "function": {"name": "now", "arguments": ""}}),
               calls({"index": 0, "function": {"arguments": ""}}),
               delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == [
        ToolCallStart("c1", "now", 0), ToolCallArgs("c1", "{}"),
        ToolCallEnd("c1"), Finish(FinishReason.TOOL_CALLS, None),
    ]


# -- duplicate call ids -----------------------------------------------------------------

DUPLICATE_IDS = sse(
    calls({"index": 0, "id": "call_1", "type": "function",
           "function": {"name": "read_file", "arguments": '{"path":"a"}'}}),
    calls({"index": 1, "id": "call_1", "type": "function",
           "function": {"name": "read_file", "arguments": '{"path":'}}),
    calls({"index": 1, "id": "call_1", "function": {"arguments": '"b"}'}}),
    delta({}, "tool_calls"), "[DONE]")


def test_duplicate_call_ids_across_indexes_are_made_unique():
    """SPEC §6 tool call slots, and the library's rule for a provider that gives two
    slots the same id: the first keeps "call_1", the later one becomes
    "<id>_<index>" = "call_1_1", so every call id of the turn is unique. The id
    re-sent on slot 1's continuation still routes its fragment to "call_1_1"."""
    updates = ok(DUPLICATE_IDS)
    assert updates == [
        ToolCallStart("call_1", "read_file", 0), ToolCallArgs("call_1", '{"path":"a"}'),
        ToolCallStart("call_1_1", "read_file", 1), ToolCallArgs("call_1_1", '{"path":'),
        ToolCallArgs("call_1_1", '"b"}'),
        ToolCallEnd("call_1"), ToolCallEnd("call_1_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]
    ids = [u.call_id for u in updates if isinstance(u, ToolCallStart)]
    assert len(ids) == len(set(ids))


def test_duplicate_call_ids_reach_the_history_unique(make_agent):
    """SPEC §6 duplicate ids across indexes, end to end: through a ChatClientAgent both
    calls run, and the next request's history answers "call_1" and "call_1_1", one
    tool message each (an ambiguous history would be refused by strict providers)."""
    reader = Recorder("read_file")
    agent, server = make_agent([DUPLICATE_IDS, chat_stream("Both read.")], tools=[reader])
    updates = list(agent.run("read a and b"))
    assert [u for u in updates if isinstance(u, ToolResult)] == [
        ToolResult("call_1", "read_file", "ok"), ToolResult("call_1_1", "read_file", "ok")]
    assert reader.invocations == [{"path": "a"}, {"path": "b"}]
    assert updates[-1] == Finish(FinishReason.STOP, Usage(10, 5, 15))
    sent = server.requests[1].json["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_1", "call_1_1"]
    assert [(m["role"], m["tool_call_id"]) for m in sent[2:]] == [
        ("tool", "call_1"), ("tool", "call_1_1")]


# -- usage ------------------------------------------------------------------------------

def test_usage_alone_on_a_chunk_with_empty_choices():
    """SPEC §6 "`usage` may arrive on its own chunk": OpenAI's include_usage chunk, with
    empty choices, after the finish chunk."""
    body = sse(delta({"content": "Hi"}), delta({}, "stop"),
               {"object": "chat.completion.chunk", "choices": [], "usage": usage(3, 2)},
               "[DONE]")
    assert ok(body) == [TextDelta("Hi"), Finish(FinishReason.STOP, Usage(3, 2, 5))]


def test_usage_on_the_finish_chunk():
    """SPEC §6 "`usage` may arrive ... on the finish chunk"."""
    body = sse(delta({"content": "Hi"}), delta({}, "stop", usage=usage(4, 1)), "[DONE]")
    assert ok(body) == [TextDelta("Hi"), Finish(FinishReason.STOP, Usage(4, 1, 5))]


def test_usage_twice_keeps_the_last():
    """SPEC §6 "`usage` may arrive ... twice ...: keep the last one seen": the last is
    smaller than the first (so it is not a max), and a later `"usage": null` is not a
    usage and does not erase it."""
    body = sse(delta({"content": "Hi"}, usage=usage(50, 20)),
               delta({}, "stop", usage=usage(7, 3)),
               delta({}, usage=None),
               "[DONE]")
    assert ok(body) == [TextDelta("Hi"), Finish(FinishReason.STOP, Usage(7, 3, 10))]


def test_usage_under_x_groq():
    """SPEC §6 "`usage` may arrive ... under `x_groq.usage`" (Groq's last chunk)."""
    body = sse(delta({"content": "Hi"}),
               delta({}, "stop", x_groq={"id": "req_01", "usage": {
                   "queue_time": 0.01, "prompt_tokens": 9, "completion_tokens": 4,
                   "total_tokens": 13}}),
               "[DONE]")
    assert ok(body) == [TextDelta("Hi"), Finish(FinishReason.STOP, Usage(9, 4, 13))]


# -- empty choices ----------------------------------------------------------------------

EMPTY = {"object": "chat.completion.chunk", "choices": [],
         "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]}


@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_empty_choices(position):
    """SPEC §6 "`choices` may be empty (first, middle or last chunk): ... skip the
    rest": a chunk with `choices: []` (and no usage) yields nothing, wherever it is."""
    chunks = [delta({"content": "Hel"}), delta({"content": "lo"}), delta({}, "stop")]
    at = {"first": 0, "middle": 1, "last": 3}[position]
    chunks.insert(at, EMPTY)
    body = sse(*chunks, "[DONE]")
    assert ok(body) == [TextDelta("Hel"), TextDelta("lo"), Finish(FinishReason.STOP, None)]


# -- content shapes ---------------------------------------------------------------------

def test_content_list_of_text_parts_is_text():
    """SPEC §6 "`content` may be ... a list of typed parts (text parts are text ...)":
    each text part is one TextDelta, in order; an empty text part yields nothing."""
    body = sse(delta({"content": [{"type": "text", "text": "Hel"},
                                  {"type": "text", "text": ""},
                                  {"type": "text", "text": "lo"}]}),
               delta({}, "stop"), "[DONE]")
    assert ok(body) == [TextDelta("Hel"), TextDelta("lo"), Finish(FinishReason.STOP, None)]


def test_content_list_thinking_part_is_reasoning():
    """SPEC §6 "thinking parts are reasoning": Mistral's
    `{"type":"thinking","thinking":[{"type":"text","text":...}]}` is a ReasoningDelta,
    and a text part after it in the same list is text, in list order."""
    body = sse(delta({"content": [{"type": "thinking",
                                   "thinking": [{"type": "text", "text": "2+2 is 4."}]},
                                  {"type": "text", "text": "4"}]}),
               delta({}, "stop"), "[DONE]")
    assert ok(body) == [ReasoningDelta("2+2 is 4."), TextDelta("4"),
                        Finish(FinishReason.STOP, None)]


def test_refusal_is_text():
    """SPEC §6 "`refusal` text is shown as text" (content null beside it)."""
    body = sse(delta({"role": "assistant", "content": None,
                      "refusal": "I can't help with that."}),
               delta({}, "stop"), "[DONE]")
    assert ok(body) == [TextDelta("I can't help with that."),
                        Finish(FinishReason.STOP, None)]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields_are_reasoning(field):
    """SPEC §6 content shapes / §3 ReasoningDelta: `reasoning_content` (DeepSeek) and
    `reasoning` (Groq, OpenRouter) are reasoning, not text."""
    body = sse(delta({field: "Think."}), delta({field: " Done."}),
               delta({"content": "Answer"}), delta({}, "stop"), "[DONE]")
    assert ok(body) == [ReasoningDelta("Think."), ReasoningDelta(" Done."),
                        TextDelta("Answer"), Finish(FinishReason.STOP, None)]


# -- finish_reason ----------------------------------------------------------------------

ONE_CALL = calls({"index": 0, "id": "c1", "type": "function",
                  "function": {"name": "read_file", "arguments": '{"path":"a"}'}})
ONE_CALL_UPDATES = [ToolCallStart("c1", "read_file", 0),
                    ToolCallArgs("c1", '{"path":"a"}'), ToolCallEnd("c1")]


def test_finish_reason_missing_with_done_is_stop():
    """SPEC §6 "`finish_reason` may be missing": [DONE] ends the turn; no tool calls →
    STOP."""
    body = sse(delta({"content": "Hi"}), "[DONE]")
    assert ok(body) == [TextDelta("Hi"), Finish(FinishReason.STOP, None)]


def test_finish_reason_missing_with_done_and_calls_is_tool_calls():
    """SPEC §6 "`finish_reason` may be missing ...: tool calls present → the turn ended
    with tool calls"."""
    body = sse(ONE_CALL, "[DONE]")
    assert ok(body) == ONE_CALL_UPDATES + [Finish(FinishReason.TOOL_CALLS, None)]


def test_finish_reason_repeated():
    """SPEC §6 "`finish_reason` may be ... repeated": one Finish, one ToolCallEnd per
    call, however often the reason comes."""
    body = sse(delta({"content": "Hi"}, "stop"), delta({}, "stop"), delta({}, "stop"),
               "[DONE]")
    assert ok(body) == [TextDelta("Hi"), Finish(FinishReason.STOP, None)]
    body = sse(ONE_CALL, delta({}, "tool_calls"), delta({}, "tool_calls"), "[DONE]")
    assert ok(body) == ONE_CALL_UPDATES + [Finish(FinishReason.TOOL_CALLS, None)]


def test_stop_with_tool_calls_is_tool_calls():
    """SPEC §6 "`stop` although tools were called: tool calls present → the turn ended
    with tool calls"."""
    body = sse(ONE_CALL, delta({}, "stop"), "[DONE]")
    assert ok(body) == ONE_CALL_UPDATES + [Finish(FinishReason.TOOL_CALLS, None)]


LENGTH_CUT = sse(
    delta({"role": "assistant", "content": "Reading"}),
    calls({"index": 0, "id": "c1", "type": "function",
           "function": {"name": "read_file", "arguments": '{"path": "a'}}),
    delta({}, "length"), "[DONE]")


def test_length_with_tool_calls_stays_length():
    """SPEC §6 "tool calls present → the turn ended with tool calls (unless it was
    `length`)": a call cut off by length ends the turn with LENGTH."""
    assert ok(LENGTH_CUT) == [
        TextDelta("Reading"),
        ToolCallStart("c1", "read_file", 0), ToolCallArgs("c1", '{"path": "a'),
        ToolCallEnd("c1"),
        Finish(FinishReason.LENGTH, None),
    ]


def test_length_with_tool_calls_executes_nothing(make_agent):
    """SPEC §6 `length` with tool calls (and R14): through a ChatClientAgent that has
    the tool, the cut-off call is not executed, no second model call is made, the run
    ends Finish(LENGTH), and the assistant message is kept with its text only."""
    reader = Recorder("read_file")
    agent, server = make_agent([LENGTH_CUT], tools=[reader])
    session = AgentSession()
    updates = list(agent.run("read a", session))
    assert updates == [
        TextDelta("Reading"),
        ToolCallStart("c1", "read_file", 0), ToolCallArgs("c1", '{"path": "a'),
        ToolCallEnd("c1"),
        Finish(FinishReason.LENGTH, None),
    ]
    assert reader.invocations == []
    assert len(server.requests) == 1
    last = session.messages[-1]
    assert (last.role.value, last.content, last.tool_calls) == ("assistant", "Reading", [])


# -- errors in the stream ---------------------------------------------------------------

def test_error_object_in_chunk():
    """SPEC §6 "A chunk with an `error` object ... raises `ProviderError` carrying the
    provider's message and code, after the updates before it": OpenRouter's shape,
    with a numeric code and a choices list beside the error."""
    body = sse(delta({"content": "Hel"}),
               {"object": "chat.completion.chunk",
                "error": {"code": 502, "message": "Upstream provider returned error"},
                "choices": [{"index": 0, "delta": {"content": ""},
                             "finish_reason": "error"}]},
               delta({"content": "lo"}), delta({}, "stop"), "[DONE]")
    updates, error, _ = run_body(body)
    assert updates == [TextDelta("Hel")]
    assert type(error) is ProviderError
    assert "Upstream provider returned error" in error.message
    assert error.code == 502


@pytest.mark.parametrize("data", [
    {"error": {"message": "Rate limit reached upstream", "code": "rate_limit_exceeded"}},
    {"message": "Rate limit reached upstream", "code": "rate_limit_exceeded"},
], ids=["wrapped", "bare"])
def test_error_event(data):
    """SPEC §6 "an SSE event of type `error`, raises `ProviderError` carrying the
    provider's message and code, after the updates before it" (the data as
    `{"error": {...}}` or as the error object itself)."""
    body = (sse(delta({"reasoning": "Hmm."}), delta({"content": "Hi"}))
            + b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
            + sse(delta({}, "stop"), "[DONE]"))
    updates, error, _ = run_body(body)
    assert updates == [ReasoningDelta("Hmm."), TextDelta("Hi")]
    assert type(error) is ProviderError
    assert "Rate limit reached upstream" in error.message
    assert error.code == "rate_limit_exceeded"


# -- how the stream ends ----------------------------------------------------------------

def test_eof_without_done_after_finish_reason_is_fine():
    """SPEC §6 "The stream may end without `data: [DONE]`: fine when a finish reason
    arrived" (here a tool-call turn)."""
    body = sse(ONE_CALL, delta({}, "tool_calls", usage=usage(2, 2)))
    assert ok(body) == ONE_CALL_UPDATES + [Finish(FinishReason.TOOL_CALLS, Usage(2, 2, 4))]


def test_eof_without_done_before_finish_reason_is_incomplete():
    """SPEC §6 "The stream may end without `data: [DONE]` ... otherwise raise
    `IncompleteStreamError`": cut in the middle of a call's arguments. The updates
    that arrived were yielded; no ToolCallEnd and no Finish follow."""
    body = sse(delta({"content": "Hi"}),
               calls({"index": 0, "id": "c1", "function": {"name": "f",
                                                           "arguments": '{"a":'}}))
    updates, error, _ = run_body(body)
    assert updates == [TextDelta("Hi"), ToolCallStart("c1", "f", 0), ToolCallArgs("c1", '{"a":')]
    assert type(error) is IncompleteStreamError


@pytest.mark.parametrize("tail", [b"\n", b"", b"\r\n"], ids=["LF", "none", "CRLF"])
def test_eof_inside_the_finish_event_is_incomplete(tail):
    """SPEC §7 "At end of stream, an event without its closing blank line is
    discarded", hence SPEC §6 IncompleteStreamError: the finish chunk arrives without
    its blank line, so no finish reason ever arrived."""
    body = (sse(delta({"content": "Hi"}))
            + b"data: " + json.dumps(delta({}, "stop")).encode() + tail)
    updates, error, _ = run_body(body)
    assert updates == [TextDelta("Hi")]
    assert type(error) is IncompleteStreamError


@pytest.mark.parametrize("tail", [b"data: [DONE]", b"data: [DONE]\n", b"data: [DONE]\r"],
                         ids=["no-newline", "LF", "CR"])
def test_done_without_blank_line_after_finish_reason(tail):
    """SPEC §7 an unterminated last event is discarded, so `data: [DONE]` without its
    blank line at EOF is as if no [DONE] came; SPEC §6: that is fine because the finish
    reason arrived."""
    body = sse(delta({"content": "Hi"}), delta({}, "stop")) + tail
    assert ok(body) == [TextDelta("Hi"), Finish(FinishReason.STOP, None)]


def test_done_without_blank_line_and_no_finish_reason_is_incomplete():
    """SPEC §7 "At end of stream, an event without its closing blank line is discarded"
    applies to `data: [DONE]` too, so with no finish reason either, SPEC §6 says
    IncompleteStreamError."""
    body = sse(delta({"content": "Hi"})) + b"data: [DONE]\n"
    updates, error, _ = run_body(body)
    assert updates == [TextDelta("Hi")]
    assert type(error) is IncompleteStreamError


# -- SSE framing as providers send it ---------------------------------------------------

def test_keepalive_comments_before_between_and_after_events():
    """SPEC §7 "a line starting with `:` is a comment", as OpenRouter sends
    `: OPENROUTER PROCESSING` keepalives: before the first event, between events,
    inside an event (between its data line and its blank line), after the last chunk
    and after [DONE]."""
    keepalive = b": OPENROUTER PROCESSING\n\n"
    body = (keepalive + keepalive
            + sse(delta({"content": "Hel"}))
            + keepalive
            + b"data: " + json.dumps(delta({"content": "lo"})).encode()
            + b"\n: OPENROUTER PROCESSING\n\n"
            + sse(delta({}, "stop"))
            + keepalive
            + sse("[DONE]")
            + keepalive)
    assert ok(body) == [TextDelta("Hel"), TextDelta("lo"), Finish(FinishReason.STOP, None)]


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"], ids=["CRLF", "bare-CR"])
def test_line_endings(ending):
    """SPEC §7 "Lines end in CRLF, LF or CR": the whole body (comments included) with
    CRLF, then with bare CR."""
    body = (b": keepalive\n\n"
            + sse(delta({"content": "Hi"}), delta({}, "stop", usage=usage(1, 1)), "[DONE]")
            ).replace(b"\n", ending)
    assert ok(body) == [TextDelta("Hi"), Finish(FinishReason.STOP, Usage(1, 1, 2))]


def test_crlf_split_across_network_writes_is_one_line_ending():
    """SPEC §7 "a CR at the end of one chunk and LF at the start of the next are one
    line ending": one event whose JSON spans two data lines (joined with LF, which is
    JSON whitespace), the CRLF after the first line split between two writes. Counted
    twice, it would make a blank line and dispatch half the JSON."""
    line1 = b'data: {"choices": [{"index": 0, "delta": {"content": "Hi"},\r'
    line2 = (b'\ndata: "finish_reason": null}]}\r\n\r\n'
             + sse(delta({}, "stop"), "[DONE]").replace(b"\n", b"\r\n"))
    reply = Reply(chunks=[line1, line2], delay=0.02)
    assert ok(reply) == [TextDelta("Hi"), Finish(FinishReason.STOP, None)]


def _content_event(text: str) -> bytes:
    chunk = {"object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode("utf-8")


@pytest.mark.parametrize("char, cut", [("é", 1), ("€", 1), ("€", 2),
                                       ("😀", 1), ("😀", 2), ("😀", 3)])
def test_multibyte_character_split_across_network_writes(char, cut):
    """SPEC §7 "a multi-byte character split across two network chunks decodes
    correctly": the raw UTF-8 bytes (not a \\u escape) of the character are split
    after `cut` bytes, between two server writes; the TextDelta is exact."""
    text = f"caf{char}!"
    body = _content_event(text) + sse(delta({}, "stop"), "[DONE]")
    encoded = char.encode("utf-8")
    at = body.index(encoded) + cut
    assert 0 < cut < len(encoded)
    reply = Reply(chunks=[body[:at], body[at:]], delay=0.02)
    assert ok(reply) == [TextDelta(text), Finish(FinishReason.STOP, None)]


# -- a stream that stalls ---------------------------------------------------------------

def test_stall_mid_body_times_out_and_is_not_retried():
    """SPEC §6 (updates yielded as their bytes arrive) with run()'s read_timeout: the
    server writes one event, then is silent for longer than read_timeout=0.1 s.
    ProviderTimeoutError naming read_timeout is raised after the first TextDelta was
    yielded, and, since updates already reached the caller, the call is not retried
    even with max_retries=2: the server got exactly one request."""
    def stalling():
        yield sse(delta({"role": "assistant", "content": "Hi"}))
        time.sleep(1.5)
        yield sse(delta({}, "stop"), "[DONE]")

    reply = Reply(chunks=stalling())
    updates, error, server = run_body(reply, read_timeout=0.1, max_retries=2,
                                      retry_backoff=0.01)
    assert updates == [TextDelta("Hi")]
    assert type(error) is ProviderTimeoutError
    assert "read_timeout" in str(error)
    assert len(server.requests) == 1


# -- ChunkAssembler.quirks --------------------------------------------------------------

def quirks_of(body: bytes) -> list[str]:
    assembler = ChunkAssembler()
    list(stream_updates([body], assembler))
    return assembler.quirks


def test_quirk_missing_index_names_event():
    """SPEC §6 missing `index`, as ChunkAssembler.quirks reports it: "tool call without
    index at event N" with N the chunk's number (1-based)."""
    body = sse(delta({"content": "Hi"}),
               calls({"id": "c1", "function": {"name": "f", "arguments": "{}"}}),
               delta({}, "tool_calls"), "[DONE]")
    quirks = quirks_of(body)
    assert "tool call without index at event 2" in quirks
    assert not any("without index" in q and "event 2" not in q for q in quirks)


def test_quirk_usage_under_x_groq_names_event():
    """SPEC §6 usage under `x_groq.usage`, as ChunkAssembler.quirks reports it, with the
    event number."""
    body = sse(delta({"content": "Hi"}),
               delta({}, "stop", x_groq={"usage": usage(1, 1)}), "[DONE]")
    quirks = quirks_of(body)
    assert [q for q in quirks if "x_groq" in q] == ["usage under x_groq at event 2"]


def test_quirk_empty_choices_names_event():
    """SPEC §6 empty `choices`, as ChunkAssembler.quirks reports it: each such chunk,
    with its event number (first and last here)."""
    body = sse(EMPTY, delta({"content": "Hi"}), delta({}, "stop"),
               {"choices": [], "usage": usage(1, 1)}, "[DONE]")
    quirks = quirks_of(body)
    assert [q for q in quirks if "empty choices" in q] == [
        "chunk with empty choices at event 1", "chunk with empty choices at event 4"]


def test_quirk_duplicate_id_names_event():
    """SPEC §6 tool call slots / duplicate ids, as ChunkAssembler.quirks reports it: the
    quirk names the duplicate id, its new name and the event number."""
    quirks = quirks_of(DUPLICATE_IDS)
    duplicate = [q for q in quirks if "duplicate" in q]
    assert len(duplicate) == 1
    assert "call_1" in duplicate[0] and "call_1_1" in duplicate[0]
    assert duplicate[0].endswith("at event 2")
