"""Malformed arguments never poison a session (SPEC §6 and R14, R18, fourth batch).

A call whose arguments are not a JSON object keeps them in the session as received,
goes back to the provider as ``{}`` (servers that parse old arguments, vLLM before its
PR #48922 and llama-server, answered 400 to every later request), and is never put to a
person: it cannot run. In a batch that pauses for another call, it gets its R14 result
at the resume. The server here is a real loopback replay server whose check refuses,
as vLLM did, any request holding arguments it cannot parse."""

import json

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalRequiredTool, FinishReason,
                       ToolApprovalRequest, ToolResult, tool)
from agentflow.testing.exchange import Reply
from agentflow.testing.replay import chat_stream

BAD = ["{\"text\": \"unterminated", "[1, 2]", "\"just a string\"", "{not json", "null",
       "[" * 5000 + "]" * 5000]


def vllm_check(number, request):
    """What vLLM before PR #48922 did: parse every earlier call's arguments, 400 if
    one does not parse as an object."""
    for message in request.json["messages"]:
        for call in message.get("tool_calls") or ():
            try:
                ok = isinstance(json.loads(call["function"]["arguments"]), dict)
            except (ValueError, RecursionError):
                ok = False
            if not ok:
                return Reply(json.dumps({"object": "error", "message": "Expecting value",
                                         "type": "BadRequestError", "code": 400}),
                             status=400, content_type="application/json")
    return None


class Desk:
    def __init__(self):
        self.ran = []

        @tool
        def note(text: str = "") -> str:
            """Write a note."""
            self.ran.append(("note", text))
            return "noted"

        @tool
        def transfer(amount: float) -> str:
            """Send money."""
            self.ran.append(("transfer", amount))
            return f"sent {amount}"

        self.tools = [note, ApprovalRequiredTool(transfer)]


def results(updates):
    return {u.call_id: u.result for u in updates if isinstance(u, ToolResult)}


def sent_calls(request):
    return [c for m in request.json["messages"] for c in m.get("tool_calls") or ()]


@pytest.mark.parametrize("bad", BAD, ids=["cut", "array", "string", "bare", "null", "deep"])
def test_malformed_arguments_are_kept_and_sent_back_as_an_empty_object(make_agent, bad):
    desk = Desk()
    agent, server = make_agent([chat_stream(tool_calls=[("c1", "note", bad)]),
                                chat_stream(text="Sorry."), chat_stream(text="Sure.")],
                               tools=desk.tools)
    server._check = vllm_check
    session = AgentSession()
    updates = list(agent.run("go", session))
    assert results(updates)["c1"].startswith("Error: arguments are not valid JSON: ")
    assert updates[-1].finish_reason is FinishReason.STOP and desk.ran == []
    assert session.messages[1].tool_calls[0].arguments == bad  # the session keeps it
    assert [c["function"]["arguments"] for c in sent_calls(server.requests[1])] == ["{}"]
    list(agent.run("and now?", session))  # the session can go on: no 400
    assert [c["function"]["arguments"] for c in sent_calls(server.requests[2])] == ["{}"]


@pytest.mark.parametrize("bad", BAD[:2], ids=["cut", "array"])
def test_malformed_arguments_of_a_tool_that_asks_are_never_put_to_a_person(make_agent, bad):
    desk = Desk()
    agent, server = make_agent([chat_stream(tool_calls=[("c1", "transfer", bad)]),
                                chat_stream(text="Sorry.")], tools=desk.tools)
    session = AgentSession()
    updates = list(agent.run("pay", session))
    assert not [u for u in updates if isinstance(u, ToolApprovalRequest)]
    assert results(updates)["c1"].startswith("Error: arguments are not valid JSON: ")
    assert session.approvals.pending == [] and desk.ran == []
    assert updates[-1].finish_reason is FinishReason.STOP


def test_in_a_batch_that_pauses_a_malformed_call_gets_its_r14_result_at_the_resume(
        make_agent):
    desk = Desk()
    agent, server = make_agent([chat_stream(tool_calls=[("c1", "transfer", BAD[0]),
                                                        ("c2", "transfer", '{"amount": 5}'),
                                                        ("c3", "note", BAD[1])]),
                                chat_stream(text="Done.")], tools=desk.tools)
    server._check = vllm_check
    session = AgentSession()
    asked = [u for u in agent.run("pay", session) if isinstance(u, ToolApprovalRequest)]
    assert [r.call_id for r in asked] == ["c2"]  # only the call that can run asks
    assert [r.call_id for r in session.approvals.pending] == ["c2"]
    updates = list(agent.run([], session, AgentRunOptions().with_tool_approval_responses(
        [asked[0].approve()])))
    done = results(updates)
    assert done["c1"].startswith("Error: arguments are not valid JSON: ")
    assert done["c3"] == "Error: arguments are not valid JSON: expected an object, got list"
    assert done["c2"] == "sent 5" and desk.ran == [("transfer", 5)]
    assert [c["function"]["arguments"] for c in sent_calls(server.requests[1])] == [
        "{}", '{"amount": 5}', "{}"]
    assert updates[-1].finish_reason is FinishReason.STOP


def test_a_malformed_call_cannot_be_answered(make_agent):
    """It never asked, so an answer to it is refused like one to any call that did not
    ask (SPEC R5, R11), before anything runs."""
    from agentflow import ApprovalError, ToolApprovalResponse
    desk = Desk()
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "transfer", BAD[0]),
                                                   ("c2", "transfer", '{"amount": 5}')])],
                          tools=desk.tools)
    session = AgentSession()
    list(agent.run("pay", session))
    with pytest.raises(ApprovalError, match="c1"):
        list(agent.run([], session, AgentRunOptions().with_tool_approval_responses(
            [ToolApprovalResponse("c1", True)])))
    assert desk.ran == []
