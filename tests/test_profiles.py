"""SPEC R21: what the provider gave, it gets back. Provider fields are kept on the
stored messages and survive save/load; provider profiles build each request from them
without changing them; the strict replay mode refuses what each provider refuses.

The bodies are the profile cases of conformance/profiles (INDEX.md there says where
each format comes from)."""

import itertools
import json

import pytest

from agentflow import (AgentRunOptions, ApprovalRequiredTool, ChatClientAgent, FinishReason,
                       FunctionTool, OpenAIChatClient)
from agentflow.assembler import ChunkAssembler, completion_updates, stream_updates
from agentflow.errors import ProviderError
from agentflow.profiles import PROFILES, Gemini, Profile, resolve_profile
from agentflow.testing.replay import RecordedRequest, ReplayServer
from agentflow.session import AgentSession
from agentflow.testing.strict import strict_check
from agentflow.types import ChatMessage, Finish, ToolApprovalRequest, ToolCall
from conformance.runner import InProcess, PROFILE_CASES, case_replies, load_cases, run_all

ALL_CASES = {case["id"]: case for case in load_cases(PROFILE_CASES)}
CASES: dict = {}  # each profile's first case, in file-name order
for _case in ALL_CASES.values():
    CASES.setdefault(_case["profile"], _case)
NAMES = list(PROFILES)
U1 = "My disk is full. Please free some space."
U2 = "Then empty the trash too."


def test_every_profile_has_a_case_and_a_strict_rule():
    assert sorted(CASES) == sorted(NAMES)
    for name in NAMES:
        strict_check(name)  # raises for a profile without a rule


# -- the two-turn loop of each profile, second request byte for byte ----------------------

def drive(case: dict, profile: str | None = None):
    """The case's two turns through agentflow (turn 2 after a save/load) with
    ``profile`` (default: the case's), against the replay server in the case profile's
    strict mode. Returns the server and the error of the last turn (or ``None``)."""
    server = ReplayServer(case_replies(case), strict=case["profile"]).start()
    driver = InProcess()
    try:
        driver.setup({"type": "setup", "base_url": server.base_url, "api_key": "sk-test",
                      "model": "conformance-model", "instructions": None,
                      "tools": case["tools"], "context_providers": [],
                      "profile": profile or case["profile"]})
        for turn in case["turns"]:
            end, _ = driver.run({"type": "run", "input": turn.get("input", []),
                                 "approvals": turn.get("approvals", []), "options": {},
                                 "reload_session": bool(turn.get("reload_session"))})
    finally:
        driver.close()
        server.stop()
    return server, end["error"]


@pytest.mark.parametrize("case_id", ALL_CASES)
def test_the_second_request_is_what_the_provider_requires_byte_for_byte(case_id):
    case = ALL_CASES[case_id]
    server, error = drive(case)
    assert (error, server.mismatches) == (None, [])  # the strict provider took both
    assert len(server.requests) == 2
    wanted = case["turns"][1]["model_calls"][0]["request"]["messages"]
    sent = server.requests[1]
    assert json.dumps(sent.json["messages"]) == json.dumps(wanted)
    assert json.dumps(wanted).encode() in sent.body  # the very bytes on the wire


def second_request(name: str) -> str:
    return drive(CASES[name])[0].requests[1].body.decode()


@pytest.mark.parametrize("name,wrong,says", [
    ("openai", "deepseek", "Unknown parameter: 'messages[1].reasoning_content'."),
    ("deepseek", "openai", "Missing `reasoning_content` field in the assistant message at "
                           "message index 1."),
    ("gemini", "groq", "Function call is missing a thought_signature in functionCall parts."),
    ("mistral", "openai", "Unexpected role 'user' after role 'tool'"),
    ("groq", "deepseek", "property 'reasoning_content' is unsupported"),
    ("openrouter", "openai", "Gemini models require OpenRouter reasoning details to be "
                             "preserved in each request."),
    ("openai-vllm-long-call-ids", "groq", "Invalid 'messages[1].tool_calls[0].id': string "
                                          "too long. Expected a string with maximum length 40")])
def test_with_another_profile_the_provider_refuses_the_second_request(name, wrong, says):
    """The strict mode makes each case fail the way its provider would."""
    server, error = drive(CASES.get(name) or ALL_CASES[name], wrong)
    assert error["kind"] == "ProviderError" and says in error["message"]
    assert len(server.mismatches) == 1 and says in server.mismatches[0]


def test_gemini_sends_the_signature_back_on_its_call_only():
    body = second_request("gemini")
    signature = ('"extra_content": {"google": {"thought_signature": "YWdlbnRmbG93IGZpeHR1cmU6'
                 'IG5vdCBhIHJlYWwgc2lnbmF0dXJlOyBzdGVwIDEgb2YgdHVybiAx"}}')
    assert body.count(signature) == 1
    assert body.index('"function-call-4113370361"') < body.index(signature) < body.index(
        '"function-call-4113370362"')
    assert Gemini.PLACEHOLDER not in body


def test_deepseek_sends_the_reasoning_of_the_tool_call_turn_only():
    messages = json.loads(second_request("deepseek"))["messages"]
    assert messages[1]["reasoning_content"].startswith("The disk is full.")
    assert [m for m in messages if "reasoning_content" in m] == [messages[1]]


def test_mistral_gets_an_assistant_message_between_tool_results_and_user():
    roles = [m["role"] for m in json.loads(second_request("mistral"))["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]


@pytest.mark.parametrize("name", ["openai", "groq", "mistral"])
def test_reasoning_is_stored_but_not_sent_back(name):
    body = second_request(name)
    assert "reasoning" not in body
    assert '"channel"' not in body  # Groq's own key, which Groq refuses back


def test_the_profile_cases_pass_the_conformance_runner():
    outcomes = run_all(InProcess, list(ALL_CASES.values()))
    assert {o.case_id: o.detail for o in outcomes if not o.passed} == {}


# -- the strict mode refuses what each provider refuses ----------------------------------

def request(*messages) -> RecordedRequest:
    body = {"model": "m", "messages": list(messages), "stream": True}
    return RecordedRequest("POST", "/v1/chat/completions", {}, json.dumps(body).encode(), body)


def call(call_id="call_1", **extra) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": "run_command", "arguments": "{}"}, **extra}


def refusal(profile: str, *messages, replies=()) -> tuple[int, dict]:
    reply = strict_check(profile, replies)(0, request(*messages))
    assert reply is not None, f"{profile} took a request it refuses"
    return reply.status, json.loads(reply.body)


USER = {"role": "user", "content": U1}


def loop(*calls, assistant_extra=None, call_ids=None):
    """user, assistant with ``calls``, a tool result per call, user."""
    return [USER, {"role": "assistant", "content": None, "tool_calls": list(calls),
                   **(assistant_extra or {})},
            *[{"role": "tool", "content": "ok", "tool_call_id": c["id"]} for c in calls],
            {"role": "user", "content": U2}]


def test_strict_openai_refuses_a_key_of_another_provider():
    status, body = refusal("openai", *loop(call(extra_content={"google": {}})))
    assert status == 400
    assert body["error"]["message"] == "Unknown parameter: 'messages[1].tool_calls[0].extra_content'."
    assert body["error"]["code"] == "unknown_parameter"
    assert refusal("openai", *loop(call(), assistant_extra={"reasoning_content": "x"}))[
        1]["error"]["param"] == "messages[1].reasoning_content"


def test_strict_deepseek_refuses_a_tool_call_turn_without_its_reasoning():
    status, body = refusal("deepseek", *loop(call()))
    assert status == 400
    assert body["error"]["message"].startswith(
        "Missing `reasoning_content` field in the assistant message at message index 1.")
    assert strict_check("deepseek")(0, request(*loop(
        call(), assistant_extra={"reasoning_content": ""}))) is None


def test_strict_gemini_refuses_a_current_step_without_a_signature_or_with_a_changed_one():
    messages = [USER, {"role": "assistant", "content": None, "tool_calls": [call()]},
                {"role": "tool", "content": "ok", "tool_call_id": "call_1"}]
    status, body = refusal("gemini", *messages)
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["message"].startswith(
        "Function call is missing a thought_signature in functionCall parts.")
    # a step of an earlier turn is not checked (Google: "only the current turn")
    assert strict_check("gemini")(0, request(*loop(call()))) is None
    signed = call(extra_content={"google": {"thought_signature": "c2lnbmVk"}})
    messages[1]["tool_calls"] = [signed]
    assert strict_check("gemini", ['data: {"thought_signature": "c2lnbmVk"}'])(
        0, request(*messages)) is None
    assert "not one this API returned" in refusal("gemini", *messages)[1]["error"]["message"]
    signed["extra_content"]["google"]["thought_signature"] = Gemini.PLACEHOLDER
    assert strict_check("gemini")(0, request(*messages)) is None


def test_strict_mistral_refuses_user_after_tool_foreign_ids_and_extra_fields():
    status, body = refusal("mistral", *loop(call("Kq3vT8wZp")))
    assert (status, body["message"], body["code"]) == (
        400, "Unexpected role 'user' after role 'tool'", "3230")
    bridged = loop(call("Kq3vT8wZp"))
    bridged.insert(3, {"role": "assistant", "content": "(tool results received)"})
    assert strict_check("mistral")(0, request(*bridged)) is None
    bridged[1]["tool_calls"][0]["id"] = "call_1"
    assert refusal("mistral", *bridged)[1]["message"] == (
        "Tool call id was call_1 but must be a-z, A-Z, 0-9, with a length of 9.")
    bridged[1]["tool_calls"][0]["id"] = "Kq3vT8wZp"
    bridged[1]["reasoning_content"] = "x"
    status, body = refusal("mistral", *bridged)
    assert status == 422
    assert body["detail"][0]["type"] == "extra_forbidden"
    assert body["detail"][0]["loc"] == ["body", "messages", 1, "reasoning_content"]


def test_strict_groq_refuses_any_property_outside_its_schema():
    status, body = refusal("groq", *loop(call(), assistant_extra={"reasoning_content": "x"}))
    assert status == 400
    assert body["error"]["message"] == (
        "'messages.1' : for 'role:assistant' the following must be satisfied"
        "[('messages.1' : property 'reasoning_content' is unsupported)]")


def test_every_strict_mode_refuses_a_tool_call_without_its_result():
    for name in NAMES:
        assistant = {"role": "assistant", "content": None, "tool_calls": [call("Kq3vT8wZp")]}
        if name == "deepseek":
            assistant["reasoning_content"] = ""
        if name == "gemini":
            assistant["tool_calls"][0]["extra_content"] = {
                "google": {"thought_signature": Gemini.PLACEHOLDER}}
        _, body = refusal(name, USER, assistant, {"role": "user", "content": U2})
        assert "Kq3vT8wZp" in json.dumps(body), name


class SendsEverything(Profile):
    """A client that sends every stored key back, reasoning included."""

    name = "everything"

    def message(self, message):
        return message.to_openai()


def test_over_http_the_client_raises_the_providers_error_and_the_server_keeps_it():
    case = CASES["mistral"]
    server = ReplayServer(case_replies(case), strict="mistral").start()
    try:
        client = OpenAIChatClient("m", base_url=server.base_url, api_key="sk-test",
                                  profile=SendsEverything())
        history = [ChatMessage.user(U1), ChatMessage.assistant(None, [ToolCall("call_1", "f")]),
                   ChatMessage.tool("ok", "call_1"), ChatMessage.user(U2)]
        with pytest.raises(ProviderError) as caught:
            list(client.run(history))
    finally:
        server.stop()
    assert caught.value.status == 400
    assert "Unexpected role 'user' after role 'tool'" in str(caught.value)
    assert len(server.mismatches) == 1 and "invalid_request_message_order" in server.mismatches[0]


# -- a session recorded with one profile, continued with another -------------------------

def run_command(command: str) -> str:
    """Run a shell command."""
    return "removed 3 files, 2.1 GB freed"


def disk_usage() -> str:
    """How full the disk is."""
    return "71% used"


TOOLS = [ApprovalRequiredTool(FunctionTool(run_command)),
         ApprovalRequiredTool(FunctionTool(disk_usage))]


@pytest.mark.parametrize("first,then", [p for p in itertools.permutations(NAMES, 2)])
def test_a_session_recorded_with_one_profile_continues_with_another(first, then):
    """Turn 1 with ``first``'s provider; the session is saved and loaded; turn 2 (an
    approval, and for Mistral a new message) with ``then``'s profile, which its strict
    provider accepts; no stored message changes. Gemini's resume adds no message, so
    the recorded call is in its current turn, which Gemini checks."""
    recorded, continued = case_replies(CASES[first])[0], case_replies(CASES[then])[1]
    strict_first, strict_then = strict_check(first, [recorded]), strict_check(then, [continued])
    server = ReplayServer([recorded, continued], check=lambda n, r: (
        strict_first if n == 0 else strict_then)(n, r)).start()
    try:
        def agent(profile):
            return ChatClientAgent(OpenAIChatClient(
                "m", base_url=server.base_url, api_key="sk-test", profile=profile), tools=TOOLS)
        session = AgentSession()
        requests = [u for u in agent(first).run(U1, session) if isinstance(u, ToolApprovalRequest)]
        before = json.dumps(session.to_dict()["messages"])
        session = AgentSession.from_dict(json.loads(json.dumps(session.to_dict())))
        new = [U2] if then == "mistral" else []
        updates = list(agent(then).run(new, session, AgentRunOptions(
            tool_approval_responses=[r.approve() for r in requests])))
    finally:
        server.stop()
    assert server.mismatches == []
    assert updates[-1].finish_reason is FinishReason.STOP
    after = session.to_dict()["messages"]
    assert json.dumps(after).startswith(before[:-1])  # the recorded turn, unchanged
    sent = server.requests[1].json["messages"]
    if then == "gemini" and first != "gemini":
        assert sent[1]["tool_calls"][0]["extra_content"] == {
            "google": {"thought_signature": Gemini.PLACEHOLDER}}
        assert "extra_content" not in json.dumps(after[1])


# -- kept on the stored messages, through save and load ------------------------------------

def assemble(body: bytes) -> tuple[ChatMessage, ChunkAssembler]:
    assembler = ChunkAssembler()
    finish = [u for u in stream_updates([body], assembler) if isinstance(u, Finish)][-1]
    return finish.message, assembler


def chunk(delta: dict, finish=None) -> bytes:
    return ("data: " + json.dumps({"choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": finish}]}) + "\n\n").encode()


def test_unknown_keys_of_the_delta_and_the_calls_are_kept_as_sent():
    body = b"".join([
        chunk({"role": "assistant", "content": "", "vendor_state": {"step": 1}, "note": None}),
        chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                               "function": {"name": "f", "arguments": ""},
                               "extra_content": {"google": {"thought_signature": "c2ln"}}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"},
                               "extra_content": {"google": {"thought_signature": "c2ln"}}}],
               "vendor_state": {"step": 1}}),
        chunk({"annotations": [{"type": "url_citation"}]}, "tool_calls"), b"data: [DONE]\n\n"])
    message, assembler = assemble(body)
    assert message.extra == {"vendor_state": {"step": 1}}  # repeated alike: kept once
    assert message.tool_calls[0].extra == {
        "extra_content": {"google": {"thought_signature": "c2ln"}}}
    assert assembler.quirks == []


def test_a_key_that_changes_from_chunk_to_chunk_is_not_kept():
    body = b"".join([chunk({"content": "a", "token_id": 1}), chunk({"content": "b", "token_id": 2}),
                     chunk({"content": "c", "token_id": 3}, "stop"), b"data: [DONE]\n\n"])
    message, assembler = assemble(body)
    assert message.extra == {}
    assert assembler.quirks == ["delta field 'token_id' changes from chunk to chunk "
                                "(not kept with the message) at event 2"]


def test_a_non_streamed_response_keeps_its_provider_fields_too():
    finish = completion_updates({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "reasoning_content": "think",
        "extra_content": {"google": {"thought_signature": "dGV4dA=="}},
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"},
                        "extra_content": {"google": {"thought_signature": "c2ln"}}}]}}]})[-1]
    message = finish.message
    assert message.reasoning_content == "think"
    assert message.extra == {"extra_content": {"google": {"thought_signature": "dGV4dA=="}}}
    assert message.tool_calls[0].extra == {"extra_content": {"google": {"thought_signature": "c2ln"}}}


def test_provider_fields_and_reasoning_survive_save_and_load(tmp_path):
    message, _ = assemble(case_replies(CASES["gemini"])[0].body)
    reasoned, _ = assemble(case_replies(CASES["groq"])[0].body)
    session = AgentSession(messages=[ChatMessage.user(U1), message, reasoned])
    session.save(tmp_path / "s.json")
    loaded = AgentSession.load(tmp_path / "s.json")
    assert loaded.messages == session.messages
    assert loaded.messages[1].tool_calls[0].extra["extra_content"]["google"]["thought_signature"]
    assert loaded.messages[2].reasoning_content == "Need space: clear the cache in /tmp."
    assert loaded.messages[2].extra == {"channel": "analysis"}


# -- profiles adapt the request only ----------------------------------------------------------

def test_no_profile_changes_a_stored_message():
    calls = [ToolCall("call_1", "f", "{}", {"extra_content": {"google": {"other": 1}}}),
             ToolCall("call_2", "g", "{}", {"extra_content": {"other": {}}})]
    history = [ChatMessage.user(U1),
               ChatMessage.assistant("x", calls, "thinking", {"channel": "analysis"}),
               ChatMessage.tool("ok", "call_1"), ChatMessage.tool("ok", "call_2"),
               ChatMessage.user(U2)]
    stored = json.dumps([m.to_openai() for m in history])
    sent = {name: profile.messages(history) for name, profile in PROFILES.items()}
    assert json.dumps([m.to_openai() for m in history]) == stored
    gemini_call = sent["gemini"][1]["tool_calls"][0]
    assert gemini_call["extra_content"] == {
        "google": {"other": 1, "thought_signature": Gemini.PLACEHOLDER}}
    assert sent["openai"][1] == {"role": "assistant", "content": "x", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}


def test_mistral_ids_are_nine_alphanumerics_the_same_in_every_request():
    history = [ChatMessage.user(U1),
               ChatMessage.assistant(None, [ToolCall("call_1", "f"), ToolCall("Kq3vT8wZp", "g"),
                                            ToolCall("call_00_Vd3kLm8Q", "h")]),
               ChatMessage.tool("a", "call_1"), ChatMessage.tool("b", "Kq3vT8wZp"),
               ChatMessage.tool("c", "call_00_Vd3kLm8Q")]
    first, again = PROFILES["mistral"].messages(history), PROFILES["mistral"].messages(history)
    assert first == again
    ids = [c["id"] for c in first[1]["tool_calls"]]
    assert ids[1] == "Kq3vT8wZp" and len(set(ids)) == 3
    assert all(len(i) == 9 and i.isalnum() and i.isascii() for i in ids)
    assert [m["tool_call_id"] for m in first[2:]] == ids
    assert strict_check("mistral")(0, request(*first)) is None


@pytest.mark.parametrize("base_url,name", [
    ("https://api.openai.com/v1", "openai"), ("https://api.deepseek.com", "deepseek"),
    ("https://generativelanguage.googleapis.com/v1beta/openai/", "gemini"),
    ("https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/l/endpoints/openapi",
     "gemini"),
    ("https://api.mistral.ai/v1", "mistral"), ("https://api.groq.com/openai/v1", "groq"),
    ("https://openrouter.ai/api/v1", "openrouter"), ("http://localhost:11434/v1", "openai")])
def test_the_profile_is_guessed_from_the_base_url_and_says_so(base_url, name):
    client = OpenAIChatClient("m", base_url=base_url, api_key="")
    assert client.profile is PROFILES[name]
    assert client.profile_note.startswith(f"profile {name}")
    assert ("guessed" if "localhost" not in base_url else "the default") in client.profile_note


def test_a_profile_is_chosen_by_name_or_object_and_an_unknown_name_is_refused():
    assert OpenAIChatClient(base_url="https://api.mistral.ai/v1", api_key="",
                            profile="gemini").profile is PROFILES["gemini"]
    custom = SendsEverything()
    assert resolve_profile(custom, "")[0] is custom
    with pytest.raises(ValueError, match="choose one of openai, deepseek, gemini, mistral, groq, openrouter$"):
        OpenAIChatClient(api_key="", base_url="http://127.0.0.1:9/v1", profile="anthropic")


# -- the command line -------------------------------------------------------------------------

def test_inspect_stream_shows_the_kept_fields_and_the_turn_as_the_guessed_profile_sends_it(
        tmp_path, capsys):
    from agentflow.cli.main import main
    body = tmp_path / "turn.sse"
    body.write_bytes(case_replies(CASES["gemini"])[0].body)
    assert main(["inspect-stream", str(body), "--base-url",
                 "https://generativelanguage.googleapis.com/v1beta/openai/"]) == 0
    out = capsys.readouterr().out
    assert "provider fields kept (1):\n  call function-call-4113370361: {\"extra_content\"" in out
    assert "profile gemini, guessed from the base URL's host generativelanguage.googleapis.com" in out
    sent = json.loads(out.rstrip("\n").rsplit("\n", 1)[-1])
    assert sent == PROFILES["gemini"].message(assemble(body.read_bytes())[0])
    assert main(["inspect-stream", str(body), "--profile", "groq"]) == 0
    assert "extra_content" not in capsys.readouterr().out.rstrip("\n").rsplit("\n", 1)[-1]


def test_chat_takes_a_profile_and_the_session_remembers_it():
    import argparse
    from agentflow.cli.chat import Chat, add_arguments
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    session = AgentSession()
    chat = Chat(parser.parse_args(["--profile", "deepseek", "--base-url", "http://127.0.0.1:9/v1"]),
                session)
    assert chat.agent.chat_client.inner.profile is PROFILES["deepseek"]
    assert session.state["chat"]["profile"] == "deepseek"
    again = Chat(parser.parse_args([]), session)  # a later run with the same session
    assert again.agent.chat_client.inner.profile is PROFILES["deepseek"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--profile", "anthropic"])
