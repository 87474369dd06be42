"""Non-streaming mode (``stream=False``) for endpoints that cannot stream: one JSON
``chat.completion`` response gives the same updates a stream would (issue 4)."""

import json

import pytest

from agentflow import (
    AgentRunOptions, AgentSession, ApprovalRequiredTool, ChatClientAgent, ChatMessage,
    Finish, FinishReason, OpenAIChatClient, ProviderError, ReasoningDelta, TextDelta,
    ToolApprovalResponse, ToolCallArgs, ToolCallEnd, ToolCallStart, tool)
from agentflow.types import Usage
from agentflow.testing.replay import Reply, ReplayServer


def completion(content=None, tool_calls=(), finish="stop", usage=(20, 8), reasoning=None):
    message = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = [{"id": i, "type": "function",
                                  "function": {"name": n, "arguments": a}} for i, n, a in tool_calls]
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                      "total_tokens": sum(usage)}}
    return Reply(json.dumps(body), content_type="application/json")


def run(reply, **client_args):
    with ReplayServer([reply]) as server:
        client = OpenAIChatClient(base_url=server.base_url, api_key="k", max_retries=0,
                                  **client_args)
        return list(client.run([ChatMessage.user("hi")])), server.requests[0]


def test_the_request_asks_for_one_json_response():
    _, request = run(completion("Hello."), stream=False)
    assert request.json["stream"] is False
    assert "stream_options" not in request.json
    assert request.headers["accept"] == "application/json"


def test_text_reasoning_and_usage_become_the_same_updates():
    """SPEC §6: the reasoning update comes before the text of the same message."""
    updates, _ = run(completion("Hello.", reasoning="Greet back."), stream=False)
    assert updates == [ReasoningDelta("Greet back."), TextDelta("Hello."),
                       Finish(FinishReason.STOP, Usage(20, 8, 28))]


def test_tool_calls_become_start_args_end_and_finish():
    updates, _ = run(completion(None, [("c1", "search", '{"q": "a"}'), ("c2", "clock", "")],
                                finish="tool_calls"), stream=False)
    starts = [u for u in updates if isinstance(u, ToolCallStart)]
    assert starts == [ToolCallStart("c1", "search", 0), ToolCallStart("c2", "clock", 1)]
    arguments = {}
    for u in updates:
        if isinstance(u, ToolCallArgs):
            arguments[u.call_id] = arguments.get(u.call_id, "") + u.delta
    assert arguments == {"c1": '{"q": "a"}', "c2": "{}"}  # SPEC §6: empty means {}
    assert [u.call_id for u in updates if isinstance(u, ToolCallEnd)] == ["c1", "c2"]
    assert updates[-1] == Finish(FinishReason.TOOL_CALLS, Usage(20, 8, 28))


def test_a_server_that_ignores_stream_true_is_read_as_json():
    """A server that answers a streaming request with one JSON body still works."""
    updates, request = run(completion("Plain JSON."))
    assert request.json["stream"] is True
    assert updates == [TextDelta("Plain JSON."), Finish(FinishReason.STOP, Usage(20, 8, 28))]


def test_an_error_body_with_status_200_is_a_provider_error():
    reply = Reply(json.dumps({"error": {"message": "model overloaded", "code": "overloaded"}}),
                  content_type="application/json")
    with pytest.raises(ProviderError) as info:
        run(reply, stream=False)
    assert info.value.code == "overloaded" and "model overloaded" in str(info.value)


def test_a_body_that_is_not_json_is_a_provider_error():
    with pytest.raises(ProviderError, match="not JSON"):
        run(Reply("<html>oops</html>", content_type="application/json"), stream=False)


def test_the_approval_flow_works_without_streaming():
    ran = []

    @tool
    def run_command(command: str) -> str:
        """Run a command."""
        ran.append(command)
        return "done"

    with ReplayServer([completion("Checking.", [("c1", "run_command", '{"command": "df"}')],
                                  finish="tool_calls"),
                       completion("All good.")]) as server:
        agent = ChatClientAgent(OpenAIChatClient(base_url=server.base_url, api_key="k",
                                                 stream=False),
                                tools=[ApprovalRequiredTool(run_command)])
        session = AgentSession()
        first = list(agent.run("disk?", session))
        assert first[-1].finish_reason is FinishReason.AWAITING_APPROVAL
        options = AgentRunOptions().with_tool_approval_responses([ToolApprovalResponse("c1", True)])
        second = list(agent.run([], session, options))
    assert ran == ["df"]
    assert second[-1] == Finish(FinishReason.STOP, Usage(20, 8, 28))
    assert [m.role.value for m in session.messages] == ["user", "assistant", "tool", "assistant"]
