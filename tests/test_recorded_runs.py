"""The approval flow end to end on recorded multi-turn provider sequences (issue 4):
one tool of each recording wrapped in ApprovalRequiredTool; pause, approve, resume."""

import hashlib
import json

from helpers_streams import streams_dir

from agentflow import (AgentRunOptions, AgentSession, ApprovalRequiredTool, ChatClientAgent,
                       FinishReason, OpenAIChatClient, TextDelta, ToolApprovalRequest,
                       Tool, ToolApprovalResponse, ToolResult, tool)
from agentflow.testing.replay import ReplayServer, chat_stream


def approve(requests):
    return AgentRunOptions().with_tool_approval_responses(
        [ToolApprovalResponse(r.call_id, True) for r in requests])


def test_openrouter_kimi_header_twice_then_final_text():
    """Kimi K2 via OpenRouter: the call header sent twice, id "0", no finish_reason;
    then the recorded turn after the tool result."""
    folder = streams_dir()
    ran = []

    @tool
    def llm_version() -> str:
        """Return the installed version of llm"""
        ran.append(True)
        return "0.fixed-version"

    bodies = [(folder / "openrouter-kimi-tool-header-twice.sse").read_bytes(),
              (folder / "openrouter-kimi-after-tool.sse").read_bytes()]
    with ReplayServer(bodies) as server:
        agent = ChatClientAgent(OpenAIChatClient("gpt-4.1-mini", base_url=server.base_url,
                                                 api_key="sk-kimi-test"),
                                tools=[ApprovalRequiredTool(llm_version)])
        session = AgentSession()
        first = list(agent.run("What is the current llm version?", session))
        requests = [u for u in first if isinstance(u, ToolApprovalRequest)]
        assert requests == [ToolApprovalRequest("0", "llm_version", {},
                                                "Return the installed version of llm",
                                                hashlib.sha256(b"{}").hexdigest(),
                                                session.approvals.pending[0].request_id)]
        assert first[-1].finish_reason is FinishReason.AWAITING_APPROVAL
        assert ran == []
        second = list(agent.run([], session, approve(requests)))
        sent = server.requests[1].json
    recorded = json.loads((folder / "openrouter-kimi-after-tool.request.json").read_text())
    # the request that produced the recorded reply carried the same call and result
    assert sent["messages"][-1] == recorded["messages"][-1] == {
        "role": "tool", "tool_call_id": "0", "content": "0.fixed-version"}
    assert sent["messages"][1]["tool_calls"] == recorded["messages"][2]["tool_calls"]
    assert ran == [True]
    assert "".join(u.text for u in second if isinstance(u, TextDelta)) == \
        "The current version of *llm* is **0.fixed-version**."
    assert second[-1].finish_reason is FinishReason.STOP
    assert second[-1].usage.total_tokens == 122


def test_openai_agent_three_steps_with_two_pauses():
    """OpenAI gpt-4o, a three-step agent run: two parallel calls, one call, a final
    call. get_country and final_result need approval; the closing text turn after the
    recording is ours (the recording ends with the final_result call)."""
    folder = streams_dir()
    ran = []

    class Recorded(Tool):
        """A tool that takes whatever arguments the recording's calls carry."""

        def __init__(self, name, result):
            self.name, self.result = name, result
            self.description = f"The {name.replace('_', ' ')}."

        def invoke(self, arguments):
            ran.append((self.name, arguments))
            return self.result

    make = Recorded

    get_country = ApprovalRequiredTool(make("get_country", "Mexico"))
    get_product_name = make("get_product_name", "Logfire")
    get_weather = make("get_weather", "sunny")
    final_result = ApprovalRequiredTool(make("final_result", "accepted"))
    bodies = [(folder / f"openai-agent-step{n}.sse").read_bytes() for n in (1, 2, 3)]
    bodies.append(chat_stream(text="Here is your summary."))
    with ReplayServer(bodies) as server:
        agent = ChatClientAgent(OpenAIChatClient("gpt-4o", base_url=server.base_url, api_key="sk-t"),
                                tools=[get_country, get_product_name, get_weather, final_result])
        session = AgentSession()
        first = list(agent.run("Tell me: the capital of the country, the weather there, "
                               "the product name", session))
        asked = [u for u in first if isinstance(u, ToolApprovalRequest)]
        assert [(r.call_id, r.name) for r in asked] == [("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country")]
        assert ran == []

        second = list(agent.run([], session, approve(asked)))
        results = [(u.name, u.result) for u in second if isinstance(u, ToolResult)]
        # R5: the sibling that needed no approval is answered, not run; then step 2 runs
        assert results == [("get_country", "Mexico"), ("get_product_name", "Rejected: User denied"),
                           ("get_weather", "sunny")]
        assert ran == [("get_country", {}), ("get_weather", {"city": "Mexico City"})]
        asked = [u for u in second if isinstance(u, ToolApprovalRequest)]
        assert [r.name for r in asked] == ["final_result"]
        assert asked[0].arguments["answers"][0] == {
            "label": "Capital", "answer": "The capital of Mexico is Mexico City."}
        assert second[-1].finish_reason is FinishReason.AWAITING_APPROVAL

        third = list(agent.run([], session, approve(asked)))
        assert third[-1].finish_reason is FinishReason.STOP
        assert ran[-1][0] == "final_result"
        sent = [r.json["messages"] for r in server.requests]
    assert [m["role"] for m in sent[1]] == ["user", "assistant", "tool", "tool"]
    assert [m["role"] for m in sent[3]] == ["user", "assistant", "tool", "tool",
                                            "assistant", "tool", "assistant", "tool"]
    # every call in the history has exactly one result (what strict providers demand)
    calls = [c["id"] for m in sent[3] for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in sent[3] if m["role"] == "tool"]
    assert calls == answered and len(set(calls)) == 4
