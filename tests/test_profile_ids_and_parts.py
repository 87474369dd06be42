"""SPEC R21, two kinds of provider fidelity (issue 30).

Call ids a provider refuses: the session keeps the ids it was given; a profile whose
provider limits them (``call_id_limit``; OpenAI: 40 characters, vLLM sends 46) sends a
short id derived from each, on the call and on its tool result, the same in every
request; ids agentflow makes itself stay within the limit.

Fields streamed in parts: a profile names the delta keys its provider streams in parts
(``accumulates``; OpenRouter's ``reasoning_details``), joined as that provider documents;
every other key that changes from delta to delta stays dropped.
"""

import json
import re

import pytest

from agentflow import (AgentRunOptions, ChatClientAgent, FinishReason, FunctionTool,
                       OpenAIChatClient)
from agentflow.assembler import ChunkAssembler, completion_updates, stream_updates
from agentflow.errors import ProviderError
from agentflow.profiles import PROFILES, OpenRouter, Profile
from agentflow.session import AgentSession
from agentflow.testing.replay import RecordedRequest, ReplayServer
from agentflow.testing.strict import strict_check
from agentflow.types import ChatMessage, Finish, ToolCall
from tests.helpers_streams import streams_dir

OPENAI = PROFILES["openai"]
VLLM_A = "chatcmpl-tool-" + "3b9e0c7d5a1f4e2b8c6d0a9f7e5b3c1d"  # 46 characters, vLLM's form
VLLM_B = "chatcmpl-tool-" + "3b9e0c7d5a1f4e2b8c6d0a9f7e5b3c2e"  # the same first 27 and more
VLLM_C = "chatcmpl-tool-" + "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"


def chunk(delta: dict, finish=None, **top) -> bytes:
    return ("data: " + json.dumps({"object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": delta, "finish_reason": finish}], **top}) + "\n\n").encode()


def calls_body(*ids: str) -> bytes:
    """A turn calling ``disk_usage`` once per id, in one chunk each, as vLLM streams."""
    return b"".join([chunk({"role": "assistant", "content": ""}), *[
        chunk({"tool_calls": [{"index": n, "id": i, "type": "function",
                               "function": {"name": "disk_usage", "arguments": "{}"}}]})
        for n, i in enumerate(ids)], chunk({}, "tool_calls"), b"data: [DONE]\n\n"])


def text_body(text: str) -> bytes:
    return chunk({"role": "assistant", "content": text}, "stop") + b"data: [DONE]\n\n"


def disk_usage() -> str:
    """How full the disk is."""
    return "71% used"


def openai_agent(server: ReplayServer) -> ChatClientAgent:
    return ChatClientAgent(OpenAIChatClient("m", base_url=server.base_url, api_key="sk-test",
                                            profile="openai"), tools=[FunctionTool(disk_usage)])


def sent_ids(request) -> list[tuple[str, str]]:
    """Every (where, id) of a recorded request: calls and tool results, in order."""
    out = []
    for message in request.json["messages"]:
        out += [("call", c["id"]) for c in message.get("tool_calls", [])]
        if "tool_call_id" in message:
            out.append(("result", message["tool_call_id"]))
    return out


# -- call ids over the limit ------------------------------------------------------------

def test_a_session_with_46_character_ids_continues_against_strict_openai():
    """The issue's example over HTTP: a session whose calls came from vLLM (46
    characters) continues on OpenAI, which refuses ids over 40; every request maps each
    long id the same way, on its call and on its result; the session keeps the ids."""
    replies = [calls_body(VLLM_A, VLLM_B), calls_body(VLLM_C), text_body("71% used."),
               text_body("Still 71%.")]
    server = ReplayServer(replies, strict="openai").start()
    try:
        agent, session = openai_agent(server), AgentSession()
        first = list(agent.run("How full is the disk?", session))
        session = AgentSession.from_dict(json.loads(json.dumps(session.to_dict())))
        again = list(agent.run("And now?", session))
    finally:
        server.stop()
    assert server.mismatches == []  # strict OpenAI took all four requests
    assert first[-1].finish_reason is again[-1].finish_reason is FinishReason.STOP
    stored = [c.id for m in session.messages for c in m.tool_calls]
    assert stored == [VLLM_A, VLLM_B, VLLM_C]  # R21: the ids it was given
    mapping = {long: OPENAI.short_call_id(long) for long in stored}
    assert all(len(short) <= 40 for short in mapping.values())
    assert len(set(mapping.values())) == 3  # VLLM_A and VLLM_B share 27 characters
    expected = [[], [("call", VLLM_A), ("call", VLLM_B), ("result", VLLM_A), ("result", VLLM_B)]]
    expected.append(expected[1] + [("call", VLLM_C), ("result", VLLM_C)])
    expected.append(expected[2])
    for request, wanted in zip(server.requests, expected):
        assert sent_ids(request) == [(where, mapping[i]) for where, i in wanted]
        assert VLLM_A.encode() not in request.body


def test_ids_within_the_limit_are_sent_as_they_are_and_one_over_it_is_mapped():
    forty, forty_one = "call_" + "x" * 35, "call_" + "x" * 36
    history = [ChatMessage.user("u"),
               ChatMessage.assistant(None, [ToolCall(forty, "f"), ToolCall(forty_one, "g")]),
               ChatMessage.tool("a", forty), ChatMessage.tool("b", forty_one)]
    sent = OPENAI.messages(history)
    short = OPENAI.short_call_id(forty_one)
    assert [c["id"] for c in sent[1]["tool_calls"]] == [forty, short]
    assert [m["tool_call_id"] for m in sent[2:]] == [forty, short]
    assert short.startswith(forty_one[:27] + "_") and len(short) == 40
    assert history[1].tool_calls[1].id == forty_one  # the stored message is unchanged
    assert strict_check("openai")(0, request(*sent)) is None


def test_a_mapped_id_never_equals_a_real_id_of_the_request():
    """A provider may have issued, as a real id, the very id a long one maps to (the
    mapping is public and deterministic): the long one then takes the next salt."""
    long = VLLM_A
    real = OPENAI.short_call_id(long)
    history = [ChatMessage.user("u"),
               ChatMessage.assistant(None, [ToolCall(real, "f"), ToolCall(long, "g")]),
               ChatMessage.tool("a", real), ChatMessage.tool("b", long)]
    sent = OPENAI.messages(history)
    ids = [c["id"] for c in sent[1]["tool_calls"]]
    assert ids == [real, OPENAI.short_call_id(long, 1)] and ids[0] != ids[1]
    assert [m["tool_call_id"] for m in sent[2:]] == ids
    assert sent == OPENAI.messages(history)  # and the same on every request


class Limit16(Profile):
    """A provider of our own whose ids may be 16 characters at most."""

    name = "limit16"
    call_id_limit = 16


def test_any_provider_limit_is_kept_by_the_mapping():
    """A variant of the kind: another limit, many ids sharing a long prefix."""
    profile = Limit16()
    ids = [f"toolu_01ABCDEFGHIJKLMNOP{n}" for n in range(50)]
    history = [ChatMessage.user("u"), ChatMessage.assistant(None, [ToolCall(i, "f") for i in ids]),
               *[ChatMessage.tool("ok", i) for i in ids]]
    sent = profile.messages(history)
    new = [c["id"] for c in sent[1]["tool_calls"]]
    assert len(set(new)) == 50 and all(len(i) <= 16 for i in new)
    assert [m["tool_call_id"] for m in sent[2:]] == new
    assert profile.messages(history) == sent


def test_strict_openai_refuses_an_id_over_40_on_a_call_or_a_result():
    def calls(call_id, result_id):
        return [{"role": "user", "content": "u"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "content": "ok", "tool_call_id": result_id}]
    status, body = refusal("openai", *calls(VLLM_A, VLLM_A))
    assert status == 400
    assert body["error"] == {
        "message": "Invalid 'messages[1].tool_calls[0].id': string too long. Expected a "
                   "string with maximum length 40, but got a string with length 46 instead.",
        "type": "invalid_request_error", "param": "messages[1].tool_calls[0].id",
        "code": "string_above_max_length"}
    messages = calls("c" * 40, "c" * 40)
    assert strict_check("openai")(0, request(*messages)) is None
    messages[2]["tool_call_id"] = "c" * 41  # a result alone: refused, as OpenAI does
    assert refusal("openai", *messages)[1]["error"]["param"] == "messages[2].tool_call_id"


@pytest.mark.parametrize("limit", [40, 16])
def test_a_renamed_duplicate_id_stays_within_the_limit(limit):
    """A 40-character id sent again in a later turn is renamed; the new id is unique
    and no longer than the limit (it used to gain ``_0``: 42 characters)."""
    same = "call_" + "Q" * 35
    assembler = ChunkAssembler({same, same[:limit - 2] + "_0"}, id_limit=limit)
    message = [u for u in stream_updates([calls_body(same, same)], assembler)
               if isinstance(u, Finish)][-1].message
    ids = [c.id for c in message.tool_calls]
    assert len(set(ids)) == 2 and same not in ids and same[:limit - 2] + "_0" not in ids
    assert all(len(i) <= limit for i in ids)
    assert ids == [same[:limit - 4] + "_0_2", same[:limit - 2] + "_1"]


def test_the_client_renames_within_its_profiles_limit_and_openai_takes_the_next_request():
    same = "call_" + "Q" * 35
    replies = [calls_body(same), calls_body(same), text_body("done")]
    server = ReplayServer(replies, strict="openai").start()
    try:
        session = AgentSession()
        list(openai_agent(server).run("How full is the disk?", session))
    finally:
        server.stop()
    assert server.mismatches == []
    ids = [c.id for m in session.messages for c in m.tool_calls]
    assert ids == [same, same[:38] + "_0"]
    assert [i for _, i in sent_ids(server.requests[2])] == [same, same, ids[1], ids[1]]


# -- fields streamed in parts -------------------------------------------------------------

def assemble(body: bytes, profile: Profile):
    assembler = ChunkAssembler(accumulate=profile.accumulates)
    finish = [u for u in stream_updates([body], assembler) if isinstance(u, Finish)][-1]
    return finish.message, assembler


def test_the_recorded_minimax_stream_through_openrouter_joins_its_text_details():
    """openrouter-error-in-chunk.sse: two reasoning.text parts of index 0, then an
    empty list, then an error chunk; the details so far are one block."""
    body = (streams_dir() / "openrouter-error-in-chunk.sse").read_bytes()
    assembler = ChunkAssembler(accumulate=OpenRouter.accumulates)
    with pytest.raises(ProviderError, match="Token limit reached"):
        list(stream_updates([body], assembler))
    assert assembler.accumulated == {"reasoning_details": [
        {"type": "reasoning.text", "text": "We need to respond to a greeting. The user",
         "index": 0, "format": None}]}
    assert assembler.reasoning == "We need to respond to a greeting. The user"
    plain = ChunkAssembler()  # the openai profile: the key changes per chunk, dropped
    with pytest.raises(ProviderError):
        list(stream_updates([body], plain))
    assert plain.extra == {} and any("reasoning_details" in q for q in plain.quirks)


def test_the_recorded_o3_stream_through_openrouter_keeps_its_encrypted_detail():
    """openrouter-reasoning-keepalives.sse: one reasoning.encrypted detail (1164
    characters of data), kept as sent and sent back by the openrouter profile only."""
    body = (streams_dir() / "openrouter-reasoning-keepalives.sse").read_bytes()
    message, assembler = assemble(body, OpenRouter())
    details = message.extra["reasoning_details"]
    assert [(d["type"], d["id"], d["format"], d["index"]) for d in details] == [
        ("reasoning.encrypted", "rs_0aa4f2c435e6d1dc0169082486816c8193a029b5fc4ef1764f",
         "openai-responses-v1", 0)]
    data = re.search(rb'"data":"([^"]+)"', body).group(1).decode()
    assert details[0]["data"] == data and len(data) == 1164
    assert message.content.startswith("I\u2019m ChatGPT")
    assert PROFILES["openrouter"].message(message)["reasoning_details"] == details
    assert "reasoning_details" not in OPENAI.message(message)


def details_body(*parts) -> bytes:
    return b"".join([*[chunk({"reasoning_details": p}) for p in parts],
                     chunk({"content": "ok"}, "stop"), b"data: [DONE]\n\n"])


def test_parts_join_by_type_and_index_and_the_signature_arrives_last():
    """Variants of the kind: text and summary parts join; a new index is a new block;
    an encrypted detail is never joined; the first non-empty value of other keys wins."""
    text = {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}
    body = details_body(
        [{**text, "text": "Check ", "signature": None, "id": None}],
        [{**text, "text": "the disk.", "signature": None, "id": "rt-1"}],
        [{**text, "text": "", "signature": "c2lnLTE=", "id": "rt-1"}],
        [{**text, "index": 1, "text": "Then answer."}],
        [{"type": "reasoning.summary", "summary": "Checked ", "index": 2},
         {"type": "reasoning.summary", "summary": "the disk.", "index": 2}],
        [{"type": "reasoning.encrypted", "data": "AAA", "index": 3}],
        [{"type": "reasoning.encrypted", "data": "BBB", "index": 3}], [])
    message, _ = assemble(body, OpenRouter())
    assert message.extra["reasoning_details"] == [
        {**text, "text": "Check the disk.", "signature": "c2lnLTE=", "id": "rt-1"},
        {**text, "index": 1, "text": "Then answer."},
        {"type": "reasoning.summary", "summary": "Checked the disk.", "index": 2},
        {"type": "reasoning.encrypted", "data": "AAA", "index": 3},
        {"type": "reasoning.encrypted", "data": "BBB", "index": 3}]


def test_only_empty_parts_keep_nothing_and_a_body_keeps_its_details_as_sent():
    message, _ = assemble(details_body([], []), OpenRouter())
    assert message.extra == {}
    whole = [{"type": "reasoning.text", "text": "a", "index": 0},
             {"type": "reasoning.text", "text": "b", "index": 0}]
    finish = completion_updates({"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "ok", "reasoning_details": whole}}]},
        ChunkAssembler(accumulate=OpenRouter.accumulates))[-1]
    assert finish.message.extra == {"reasoning_details": whole}  # a whole value, unjoined


@pytest.mark.parametrize("value,expected", [
    ("text", "a list of reasoning detail objects"), ([1], "a list of reasoning detail objects"),
    ([{"type": "reasoning.text", "text": 3}], "a string in each reasoning.text detail's 'text'")])
def test_a_malformed_streamed_part_is_a_provider_error_naming_event_and_field(value, expected):
    with pytest.raises(ProviderError) as caught:
        assemble(details_body(value), OpenRouter())
    assert str(caught.value).startswith(
        "malformed stream event 1: choices[0].delta.reasoning_details is ")
    assert f"expected {expected}" in str(caught.value)


class Citations:
    """Our own accumulator: lists joined end to end."""

    def __init__(self):
        self.items = []

    def add(self, value):
        if type(value) is not list:
            raise ValueError("a list")
        self.items += value

    def value(self):
        return list(self.items)


class CitesInParts(Profile):
    """A provider of our own that streams ``citations`` in parts."""

    name = "cites"
    accumulates = {"citations": Citations}


def test_any_field_a_profile_lists_is_accumulated_and_others_stay_dropped():
    body = b"".join([chunk({"content": "a", "citations": ["u1"], "token_id": 1}),
                     chunk({"content": "b", "citations": ["u2", "u3"], "token_id": 2}),
                     chunk({}, "stop"), b"data: [DONE]\n\n"])
    message, assembler = assemble(body, CitesInParts())
    assert message.extra == {"citations": ["u1", "u2", "u3"]}  # token_id is per chunk
    assert assembler.quirks == ["delta field 'token_id' changes from chunk to chunk "
                                "(not kept with the message) at event 2"]
    message, _ = assemble(body, OPENAI)
    assert message.extra == {}


# -- strict OpenRouter ----------------------------------------------------------------------

def request(*messages, model="m") -> RecordedRequest:
    body = {"model": model, "messages": list(messages), "stream": True}
    return RecordedRequest("POST", "/v1/chat/completions", {}, json.dumps(body).encode(), body)


def refusal(profile: str, *messages, replies=(), model="m") -> tuple[int, dict]:
    reply = strict_check(profile, replies)(0, request(*messages, model=model))
    assert reply is not None, f"{profile} took a request it refuses"
    return reply.status, json.loads(reply.body)


SIGNED = {"type": "reasoning.encrypted", "data": "c2lnbmVk", "id": "tool_f_1",
          "format": "google-gemini-v1", "index": 0}


def gemini_step(**extra) -> list[dict]:
    return [{"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "tool_f_1", "type": "function",
                 "function": {"name": "run_command", "arguments": "{}"}}], **extra},
            {"role": "tool", "content": "ok", "tool_call_id": "tool_f_1"}]


def test_strict_openrouter_refuses_a_gemini_step_without_its_details_or_with_changed_ones():
    issued = [chunk({"reasoning_details": [SIGNED]}).decode()]
    status, body = refusal("openrouter", *gemini_step(), replies=issued)
    assert status == 400 and body["error"]["message"] == "Provider returned error"
    raw = body["error"]["metadata"]["raw"]
    assert raw.startswith("Gemini models require OpenRouter reasoning details to be "
                          "preserved in each request.")
    assert "Function call is missing a thought_signature" in raw
    assert strict_check("openrouter", issued)(0, request(*gemini_step(
        reasoning_details=[SIGNED]))) is None
    changed = [{**SIGNED, "data": "Y2hhbmdlZA=="}]
    refusal("openrouter", *gemini_step(reasoning_details=changed), replies=issued)
    # a step of an earlier turn is not checked, as Gemini checks the current turn only
    earlier = gemini_step() + [{"role": "user", "content": "next"}]
    assert strict_check("openrouter", issued)(0, request(*earlier)) is None


def test_strict_openrouter_knows_a_gemini_step_by_the_model_too():
    messages = gemini_step()
    assert strict_check("openrouter")(0, request(*messages)) is None  # not Gemini's
    refusal("openrouter", *messages, model="google/gemini-3-flash-preview")
    assert strict_check("openrouter")(0, request(
        *gemini_step(reasoning_details=[SIGNED]), model="google/gemini-3-flash-preview")) is None


def test_the_openrouter_profile_sends_the_details_back_on_each_assistant_message():
    details = [SIGNED]
    turn = ChatMessage.assistant(None, [ToolCall("tool_f_1", "run_command")], "thinking",
                                 {"reasoning_details": details})
    sent = PROFILES["openrouter"].message(turn)
    assert sent == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "tool_f_1", "type": "function",
         "function": {"name": "run_command", "arguments": "{}"}}],
        "reasoning_details": details}
    for name in ("openai", "deepseek", "gemini", "groq", "mistral"):
        assert "reasoning_details" not in PROFILES[name].message(turn), name


def test_the_clients_request_carries_the_mapped_ids_and_its_options():
    client = OpenAIChatClient("m", base_url="https://api.openai.com/v1", api_key="")
    history = [ChatMessage.user("u"), ChatMessage.assistant(None, [ToolCall(VLLM_A, "f")]),
               ChatMessage.tool("ok", VLLM_A)]
    body = client.build_request(history, AgentRunOptions(temperature=0))
    assert body["messages"] == OPENAI.messages(history) and body["temperature"] == 0


def test_a_routers_upstream_error_is_in_the_message():
    """OpenRouter's own message for an upstream refusal is only "Provider returned
    error"; the upstream's words (metadata.raw) are what tells the user what to fix."""
    from agentflow.assembler import error_from_body
    error = error_from_body({"error": {"message": "Provider returned error", "code": 400,
                                       "metadata": {"raw": "Gemini models require ...",
                                                    "provider_name": "Google AI Studio"}}},
                            "fallback", 400)
    assert error.message == ("Provider returned error (Google AI Studio: Gemini models "
                             "require ...)")
    assert (error.status, error.code) == (400, 400)
