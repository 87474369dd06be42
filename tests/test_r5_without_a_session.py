"""SPEC R5 holds with and without a session (fourth batch): a call that needed no
approval is never approved into running. With a session the ledger refuses an answer
to a call that was never put up for approval; the loop run without one (a
``FunctionInvokingChatClient`` driven by hand, its history kept by the caller) refuses
it the same way, before anything runs, instead of running the sibling. Real HTTP to a
loopback replay server."""

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalError, ApprovalRequiredTool,
                       ChatClientAgent, ChatMessage, FunctionInvokingChatClient,
                       OpenAIChatClient, ToolApprovalRequest, ToolApprovalResponse,
                       ToolResult, tool)
from agentflow.journal import Journal
from agentflow.policy import ApprovalPolicy
from agentflow.testing.replay import ReplayServer, chat_stream

TURN = chat_stream(text="On it.", tool_calls=[("c1", "note", '{"text": "hi"}'),
                                              ("c2", "transfer", '{"amount": 5}')])


class Desk:
    def __init__(self):
        self.ran = []

        @tool
        def note(text: str) -> str:
            """Write a note."""
            self.ran.append("note")
            return "noted"

        @tool
        def transfer(amount: float) -> str:
            """Send money."""
            self.ran.append("transfer")
            return f"sent {amount}"

        self.tools = [note, ApprovalRequiredTool(transfer)]


@pytest.fixture
def loop():
    """A loop without an agent or a session, and the history its caller keeps."""
    server = ReplayServer([TURN, chat_stream(text="Done.")]).start()
    desk = Desk()
    client = FunctionInvokingChatClient(
        OpenAIChatClient(model="m", base_url=server.base_url, api_key="sk-test",
                         max_retries=0), desk.tools)
    history = [ChatMessage.user("note it and pay")]
    journal = Journal()
    updates = list(client.run(history, journal=journal))
    assert [u.call_id for u in updates if isinstance(u, ToolApprovalRequest)] == ["c2"]
    history += journal.messages  # the caller keeps the turn
    yield client, history, desk
    server.stop()


def resume(client, history, *responses, policy=None):
    journal = Journal()
    options = AgentRunOptions(policy=policy).with_tool_approval_responses(list(responses))
    return list(client.run(list(history), options, journal=journal)), journal


def test_r5_without_a_session_an_approved_sibling_is_refused_not_run(loop):
    client, history, desk = loop
    with pytest.raises(ApprovalError, match=r"call\(s\) c1 were never put up for approval"):
        resume(client, history, ToolApprovalResponse("c2", True),
               ToolApprovalResponse("c1", True))
    assert desk.ran == []


def test_r5_without_a_session_the_sibling_is_rejected_and_the_approved_call_runs(loop):
    client, history, desk = loop
    updates, journal = resume(client, history, ToolApprovalResponse("c2", True))
    assert {u.call_id: u.result for u in updates if isinstance(u, ToolResult)} == {
        "c1": "Rejected: User denied", "c2": "sent 5"}
    assert desk.ran == ["transfer"]


def test_r5_without_a_session_a_call_a_policy_allows_cannot_be_answered(loop):
    """The gate judges the answered call again (no record to read): an allow rule
    means it did not ask, so its answer is refused as well."""
    client, history, desk = loop
    with pytest.raises(ApprovalError, match=r"call\(s\) c2 were never put up for approval"):
        resume(client, history, ToolApprovalResponse("c2", True),
               policy=ApprovalPolicy(allow=["transfer"]))
    assert desk.ran == []


def test_r5_with_a_session_the_same_answer_is_refused_the_same_way(make_agent):
    desk = Desk()
    agent, _ = make_agent([TURN], tools=desk.tools)
    session = AgentSession()
    list(agent.run("note it and pay", session))
    with pytest.raises(ApprovalError, match=r"call\(s\) c1 were never put up for approval"):
        list(agent.run([], session, AgentRunOptions().with_tool_approval_responses(
            [ToolApprovalResponse("c2", True), ToolApprovalResponse("c1", True)])))
    assert desk.ran == [] and isinstance(agent, ChatClientAgent)
