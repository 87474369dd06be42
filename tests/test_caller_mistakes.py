"""A caller's easy mistakes get a typed error that says what to do, before anything
runs (found by trying the library as a newcomer)."""

import enum
import json

import pytest

from agentflow import (
    AgentRunOptions, AgentSession, ApprovalError, ApprovalRequiredTool, ChatMessage, FunctionInvokingChatClient, OpenAIChatClient, ProviderError,
    ToolApprovalResponse, ToolResult, tool)
from agentflow.errors import IncompleteStreamError, SessionError
from agentflow.testing.replay import Reply, ReplayServer, chat_stream


def test_approved_must_be_a_real_bool():
    """A "no" typed as a string is truthy; it must not approve a risky call (SPEC R4)."""
    for value in ("no", "false", 0, None):
        with pytest.raises(TypeError, match="approved must be True or False"):
            ToolApprovalResponse("c1", value)


def test_reason_must_be_text_and_responses_must_be_responses():
    with pytest.raises(TypeError, match="reason must be a str"):
        ToolApprovalResponse("c1", False, 123)
    with pytest.raises(TypeError, match="ToolApprovalResponse objects"):
        AgentRunOptions().with_tool_approval_responses([{"call_id": "c1", "approved": True}])


def test_wrong_argument_types_fail_at_the_call_not_later(make_agent):
    agent, server = make_agent([])
    with pytest.raises(TypeError, match="messages must be"):
        agent.run(42)
    with pytest.raises(TypeError, match="each message must be"):
        agent.run([ChatMessage.user("a"), 7])
    with pytest.raises(TypeError, match="session must be an AgentSession"):
        agent.run("hi", {"messages": []})
    with pytest.raises(TypeError, match="options must be AgentRunOptions"):
        agent.run("hi", AgentSession(), {"max_rounds": 3})
    assert server.requests == []


def test_openai_message_dicts_are_accepted_as_input(make_agent):
    agent, server = make_agent([chat_stream(text="ok")])
    list(agent.run([{"role": "user", "content": "hello"}, "and a plain string"]))
    assert server.requests[0].json["messages"] == [
        {"role": "user", "content": "hello"}, {"role": "user", "content": "and a plain string"}]


def test_resuming_without_the_session_says_so(make_agent):
    agent, _ = make_agent([])
    options = AgentRunOptions().with_tool_approval_responses([ToolApprovalResponse("c1", True)])
    with pytest.raises(ApprovalError, match="same AgentSession"):
        list(agent.run([], None, options))


def test_an_approved_call_whose_tool_is_gone_runs_nothing(make_agent):
    """Resuming in a process that forgot to register the approved tool is a caller
    error (like SPEC R11): ApprovalError, nothing executes, the session is unchanged."""
    ran = []

    @tool
    def run_command(command: str) -> str:
        """Run a command."""
        ran.append(command)
        return "ok"

    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "run_command", '{"command": "ls"}'),
                                                   ("c2", "run_command", '{"command": "pwd"}')])],
                          tools=[ApprovalRequiredTool(run_command)])
    session = AgentSession()
    list(agent.run("go", session))
    forgetful, _ = make_agent([chat_stream(text="never sent")])
    before = session.to_dict()
    options = AgentRunOptions().with_tool_approval_responses(
        [ToolApprovalResponse("c1", True), ToolApprovalResponse("c2", False)])
    with pytest.raises(ApprovalError, match="does not have") as info:
        list(forgetful.run([], session, options))
    assert info.value.call_ids == ["c1"]
    assert ran == [] and session.to_dict() == before


def test_tool_names_must_be_valid_and_unique():
    @tool
    def same(x: str) -> str:
        """One."""
        return x

    with pytest.raises(ValueError, match="share the name"):
        FunctionInvokingChatClient(None, [same, tool(same.func)])
    with pytest.raises(ValueError, match="not allowed"):
        tool(lambda x: x)  # "<lambda>"
    with pytest.raises(ValueError, match="not allowed"):
        tool(same.func, name="my tool")
    with pytest.raises(TypeError, match="decorates a function"):
        tool("not a function")


def test_arguments_of_the_wrong_json_type_become_an_error_result(make_agent):
    @tool
    def repeat(text: str, n: int = 1) -> str:
        """Repeat text."""
        return text * n

    agent, server = make_agent([chat_stream(tool_calls=[("c1", "repeat", '{"text": "a", "n": "five"}'),
                                                        ("c2", "repeat", '{"text": "b", "n": 2}'),
                                                        ("c3", "repeat", '{"text": "c", "n": true}')]),
                                chat_stream(text="ok")], tools=[repeat])
    results = {u.call_id: u.result for u in agent.run("go") if isinstance(u, ToolResult)}
    assert results == {"c1": "Error: TypeError: argument 'n' must be integer, got \"five\"",
                       "c2": "bb",
                       "c3": "Error: TypeError: argument 'n' must be integer, got true"}


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_enum_tuple_and_unannotated_parameters():
    @tool
    def paint(colour: Colour, at: tuple[int, int], coats=2) -> str:
        """Paint a pixel."""
        return f"{colour.name} at {at[0]},{at[1]} x{coats}"

    assert paint.parameters["properties"] == {
        "colour": {"enum": ["red", "blue"], "type": "string"},
        "at": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}],
               "minItems": 2, "maxItems": 2},
        "coats": {"type": "integer", "default": 2}}
    assert paint.invoke({"colour": "blue", "at": [1, 2]}) == "BLUE at 1,2 x2"


def test_a_bytes_result_is_sent_as_text():
    @tool
    def raw() -> bytes:
        """Raw bytes."""
        return "héllo".encode()

    assert raw.invoke({}) == "héllo"


def test_404_names_the_url_and_the_v1_hint():
    body = json.dumps({"error": {"message": "404 page not found"}})
    with ReplayServer([Reply(body, status=404, content_type="application/json")]) as server:
        root = server.base_url.removesuffix("/v1")
        client = OpenAIChatClient(base_url=root, api_key="k", max_retries=0)
        with pytest.raises(ProviderError) as info:
            list(client.run([ChatMessage.user("hi")]))
    assert info.value.status == 404
    assert root + "/chat/completions" in str(info.value)
    assert "/v1" in str(info.value)


def test_401_message_reads_cleanly():
    body = json.dumps({"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}})
    with ReplayServer([Reply(body, status=401, content_type="application/json")]) as server:
        client = OpenAIChatClient(base_url=server.base_url, api_key="sk-wrong-key-123")
        with pytest.raises(ProviderError) as info:
            list(client.run([ChatMessage.user("hi")]))
    assert "provided. Check the API key" in str(info.value)
    assert "provided.. " not in str(info.value)


def test_a_response_that_is_not_an_event_stream_says_so():
    with ReplayServer([Reply("Hello from a static file server", content_type="text/plain")]) as server:
        client = OpenAIChatClient(base_url=server.base_url, api_key="k")
        with pytest.raises(IncompleteStreamError, match=r"not answer with an event stream \(Content-Type: text/plain\)"):
            list(client.run([ChatMessage.user("hi")]))


def test_session_file_errors_name_the_path(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(SessionError, match="broken.json is not a saved session"):
        AgentSession.load(bad)
    target = tmp_path / "missing" / "s.json"
    with pytest.raises(FileNotFoundError, match="missing/s.json"):
        AgentSession().save(target)
