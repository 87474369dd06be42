"""Tool call headers in pieces (issue 41, SPEC §6 fourth batch), over real HTTP to
``agentflow.testing.replay.ReplayServer``: a function name split in pieces
(``get_wea`` + ``ther``, reported for Gemini and others) is joined, a name re-sent in
full is kept, and where the two readings differ the one naming an offered tool wins;
a header without ``index`` followed by fragments naming ``index: 0`` (term-llm PR #314)
is one call, as its slot took the next unused index.

Each body is hand-written in OpenAI's ``chat.completion.chunk`` format and shows one
deviation; the expected updates are worked out from its bytes.
"""

from __future__ import annotations

from agentflow import ChatMessage, OpenAIChatClient
from agentflow.assembler import ChunkAssembler, stream_updates
from agentflow.testing.replay import ReplayServer
from agentflow.tools import Tool
from agentflow.types import (Finish, FinishReason, ToolCall, ToolCallArgs, ToolCallEnd,
                             ToolCallStart)
from test_openai_client import delta, sse


class Named(Tool):
    description = "A tool of the given name."
    parameters = {"type": "object", "properties": {}}

    def __init__(self, name: str):
        self.name = name

    def invoke(self, arguments):
        return "ok"


def run(body: bytes, *tool_names: str) -> list:
    """Serve ``body``; the updates of one client turn offering ``tool_names``."""
    with ReplayServer([body]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key="sk-test",
                                  max_retries=0)
        return list(client.run([ChatMessage.user("hi")],
                               tools=[Named(name) for name in tool_names]))


def calls(*tool_calls) -> dict:
    return delta({"tool_calls": list(tool_calls)})


def named(piece: str, **header) -> dict:
    return {**header, "function": {"name": piece}}


def args(fragment: str, **header) -> dict:
    return {**header, "function": {"arguments": fragment}}


END = (delta({}, "tool_calls"), "[DONE]")


# -- names in pieces ----------------------------------------------------------------

def test_a_name_split_in_pieces_is_joined():
    """`get_wea` then `ther` on index 0, then the arguments: one call to get_weather,
    announced once with its whole name (it was `unknown tool 'get_wea'`)."""
    body = sse(
        calls({"index": 0, "id": "call_1", "type": "function",
               "function": {"name": "get_wea", "arguments": ""}}),
        calls(named("ther", index=0)),
        calls(args('{"city": "Rome"}', index=0)), *END)
    expected = [
        ToolCallStart("call_1", "get_weather", 0),
        ToolCallArgs("call_1", '{"city": "Rome"}'),
        ToolCallEnd("call_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]
    assert run(body) == expected
    assert run(body, "get_weather") == expected


def test_names_split_in_three_pieces_for_two_parallel_calls():
    """Two calls, each name in pieces: each is announced once with its whole name,
    and each keeps its own arguments."""
    body = sse(
        calls({"index": 0, "id": "a", "function": {"name": "read"}}),
        calls(named("_fi", index=0)), calls(named("le", index=0)),
        calls({"index": 1, "id": "b", "function": {"name": "list"}}),
        calls(named("_dir", index=1)),
        calls(args('{"path": "x"}', index=0)), calls(args("{}", index=1)), *END)
    assert run(body, "read_file", "list_dir") == [
        ToolCallStart("a", "read_file", 0), ToolCallArgs("a", '{"path": "x"}'),
        ToolCallStart("b", "list_dir", 1), ToolCallArgs("b", "{}"),
        ToolCallEnd("a"), ToolCallEnd("b"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]


def test_a_name_resent_in_full_after_its_pieces_is_kept_once():
    """`get_wea`, `ther`, then `get_weather` again with the arguments: a piece equal to
    the name so far is that name re-sent, never joined."""
    body = sse(
        calls({"index": 0, "id": "call_1", "function": {"name": "get_wea"}}),
        calls(named("ther", index=0)),
        calls({"index": 0, "function": {"name": "get_weather", "arguments": "{}"}}), *END)
    assert run(body)[0] == ToolCallStart("call_1", "get_weather", 0)


def test_a_repeated_piece_reads_as_the_offered_tool_it_names():
    """`bye` then `bye`: re-sent (`bye`) or joined (`byebye`). With `byebye` offered
    and no `bye`, the joined reading wins; with `bye` offered, or neither, the re-sent
    one does (SPEC §6: the reading naming a declared tool wins)."""
    body = sse(
        calls({"index": 0, "id": "call_1", "function": {"name": "bye"}}),
        calls(named("bye", index=0)), calls(args("{}", index=0)), *END)
    assert run(body, "byebye")[0] == ToolCallStart("call_1", "byebye", 0)
    assert run(body, "bye", "byebye")[0] == ToolCallStart("call_1", "bye", 0)
    assert run(body)[0] == ToolCallStart("call_1", "bye", 0)
    assembler = ChunkAssembler(tool_names=["byebye"])
    list(stream_updates([body], assembler))
    assert assembler.tool_calls == [ToolCall("call_1", "byebye", "{}")]
    assert any("byebye" in quirk for quirk in assembler.quirks)


def test_a_name_piece_after_the_arguments_began_changes_nothing():
    """A call is announced once: a piece arriving after its arguments began cannot
    rename it (the announced name and the stored one never differ)."""
    body = sse(
        calls({"index": 0, "id": "call_1", "function": {"name": "get", "arguments": "{"}}),
        calls(named("_weather", index=0)), calls(args("}", index=0)), *END)
    updates = run(body)
    assert updates[0] == ToolCallStart("call_1", "get", 0)
    assert updates[-1].message.tool_calls[0].name == "get"


# -- a header without index ---------------------------------------------------------

def test_a_header_without_index_then_fragments_on_index_0_are_one_call():
    """term-llm PR #314: the header has no `index`, its argument pieces say `index: 0`.
    The index-less slot took the next unused index, 0, so the pieces continue it: one
    call with the folder the model asked for (it was two calls: the named one with
    `{}`, and a nameless one)."""
    body = sse(
        calls({"id": "call_1", "type": "function",
               "function": {"name": "list_files", "arguments": ""}}),
        calls(args('{"folder":', index=0)), calls(args(' "src"}', index=0)), *END)
    updates = run(body, "list_files")
    assert updates == [
        ToolCallStart("call_1", "list_files", 0),
        ToolCallArgs("call_1", '{"folder":'), ToolCallArgs("call_1", ' "src"}'),
        ToolCallEnd("call_1"),
        Finish(FinishReason.TOOL_CALLS, None),
    ]
    assert updates[-1].message.tool_calls == [
        ToolCall("call_1", "list_files", '{"folder": "src"}')]


def test_an_index_less_header_after_an_indexed_call_takes_the_next_index():
    """Index 0 is taken by an indexed call, so a header without index takes 1, and
    fragments naming index 1 continue it, while index 0's go to the first call."""
    body = sse(
        calls({"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x":'}}),
        calls({"id": "b", "function": {"name": "g", "arguments": ""}}),
        calls(args('{"y": 2}', index=1)), calls(args(" 1}", index=0)), *END)
    message = run(body, "f", "g")[-1].message
    assert message.tool_calls == [ToolCall("a", "f", '{"x": 1}'),
                                  ToolCall("b", "g", '{"y": 2}')]


def test_two_index_less_headers_then_indexed_fragments():
    """Both headers without index (slots 0 and 1, in order), their fragments with
    index 1 first, then 0: each fragment goes to the call of its index."""
    body = sse(
        calls({"id": "a", "function": {"name": "f", "arguments": ""}},
              {"id": "b", "function": {"name": "g", "arguments": ""}}),
        calls(args('{"y": 2}', index=1)), calls(args('{"x": 1}', index=0)), *END)
    message = run(body, "f", "g")[-1].message
    assert message.tool_calls == [ToolCall("a", "f", '{"x": 1}'),
                                  ToolCall("b", "g", '{"y": 2}')]
