"""SPEC R23 (fourth batch): a call approved only in a run that was stopped before it
started is asked about again; one whose answer is recorded in the session (an inbox's
answer, a worker's resume) runs when the session is continued. Never ``Rejected: User
denied`` for a person who said yes.

Every run talks real HTTP to a loopback replay server; sessions live in real stores
(``conftest.store_url``) or in memory. "Stopped" is what a person does: the caller
closes the run's generator after the first result (Ctrl-C in a UI), or a tool is
interrupted by ``KeyboardInterrupt``."""

import pytest

from agentflow import (AgentRunOptions, AgentSession, FinishReason,
                       ToolApprovalRequest, ToolApprovalResponse, ToolResult)
from agentflow.stores import open_store
from agentflow.stores.answers import ready_responses
from agentflow.testing.replay import chat_stream
from test_pause_never_lost import Bank

PAUSE = chat_stream(tool_calls=[("c1", "transfer", '{"amount": 120}'),
                                ("c2", "balance", "{}"),
                                ("c3", "transfer", '{"amount": 5}')])


def approve_all(requests):
    return AgentRunOptions().with_tool_approval_responses([r.approve() for r in requests])


def stop_after_first_result(updates):
    """Read a run until its first ``ToolResult``, then stop it (close the generator)."""
    seen = []
    for update in updates:
        seen.append(update)
        if isinstance(update, ToolResult):
            break
    updates.close()
    return seen


def requests_of(updates):
    return [u for u in updates if isinstance(u, ToolApprovalRequest)]


def results(updates):
    return {u.call_id: u.result for u in updates if isinstance(u, ToolResult)}


def test_r23_an_approval_given_only_to_a_stopped_run_is_asked_again(make_agent):
    bank = Bank()
    agent, server = make_agent([PAUSE, chat_stream(text="Sent both.")], tools=bank.tools)
    session = AgentSession()
    asked = requests_of(agent.run("pay", session))
    assert [r.call_id for r in asked] == ["c1", "c3"]
    stop_after_first_result(agent.run([], session, approve_all(asked)))
    assert bank.ran == [("transfer", 120)]

    again = list(agent.run([], session))  # continued with no answers
    assert [r.call_id for r in requests_of(again)] == ["c3"]
    assert again[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    assert results(again) == {} and bank.ran == [("transfer", 120)]
    assert len(server.requests) == 1  # the model was not called
    # the request asked again is the pause's own: same digest, same request_id
    assert (requests_of(again)[0].digest, requests_of(again)[0].request_id) == (
        asked[1].digest, asked[1].request_id)

    done = list(agent.run([], session, AgentRunOptions().with_tool_approval_responses(
        [requests_of(again)[0].approve()])))
    assert results(done) == {"c2": "Rejected: User denied", "c3": "sent 5"}  # R5 holds
    assert bank.ran == [("transfer", 120), ("transfer", 5)]
    assert done[-1].finish_reason is FinishReason.STOP


def test_r23_a_ctrl_c_inside_a_tool_asks_about_the_rest_again(make_agent, store_url):
    bank = Bank(stop_on=120)
    agent, _ = make_agent([PAUSE, chat_stream(text="ok")], tools=bank.tools)
    with open_store(store_url) as store:
        with store.open("s") as session:
            asked = requests_of(agent.run("pay", session))
        with pytest.raises(KeyboardInterrupt):
            with store.open("s") as session:
                list(agent.run([], session, approve_all(asked)))
        with store.open("s") as session:
            again = list(agent.run([], session))
        assert [r.call_id for r in requests_of(again)] == ["c3"]
        assert results(again) == {}
        assert [e.call_id for e in store.pending()] == ["c3"]  # still listed for an inbox
        stored = store.load("s")
    assert stored.messages[-1].content.startswith("Error: interrupted")  # c1 (R16)
    assert bank.ran == []


def test_r23_r4_a_caller_who_answers_part_of_a_stopped_pause_rejects_the_rest(make_agent):
    """Responses given: R4 as always; only a run with no answers asks again."""
    bank = Bank()
    agent, _ = make_agent([PAUSE, chat_stream(text="ok")], tools=bank.tools)
    session = AgentSession()
    asked = requests_of(agent.run("pay", session))
    stop_after_first_result(agent.run([], session, approve_all(asked[:1])))
    # c1's answer was used; c3 had none in that run, but the run stopped before it
    again = list(agent.run([], session))
    assert [r.call_id for r in requests_of(again)] == ["c3"]
    done = list(agent.run([], session, AgentRunOptions().with_tool_approval_responses(
        [again[0].reject("not now")])))
    assert results(done) == {"c2": "Rejected: User denied", "c3": "Rejected: not now"}


def test_r23_r6_input_given_to_a_stopped_pause_waits_behind_it(make_agent):
    bank = Bank()
    agent, server = make_agent([PAUSE, chat_stream(text="ok")], tools=bank.tools)
    session = AgentSession()
    asked = requests_of(agent.run("pay", session))
    stop_after_first_result(agent.run([], session, approve_all(asked)))
    again = list(agent.run("and hurry", session))
    assert [r.call_id for r in requests_of(again)] == ["c3"]
    assert [m.content for m in session.messages if m.role.value == "user"] == ["pay"]
    list(agent.run([], session, AgentRunOptions().with_tool_approval_responses(
        [requests_of(again)[0].approve()])))
    roles = [m.role.value for m in session.messages]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "user", "assistant"]
    assert session.messages[5].content == "and hurry"
    assert server.requests[-1].json["messages"][-1]["content"] == "and hurry"


def test_r23_a_fresh_pause_continued_without_answers_is_still_rejected(make_agent):
    """Nothing was decided yet: R4 (no response → ``Rejected: User denied``)."""
    bank = Bank()
    agent, _ = make_agent([PAUSE, chat_stream(text="ok")], tools=bank.tools)
    session = AgentSession()
    list(agent.run("pay", session))
    done = list(agent.run([], session))
    assert set(results(done).values()) == {"Rejected: User denied"}
    assert bank.ran == []


def answer(entry, approved=True):
    """An inbox's answer to a listed call, bound to what it showed (digest, pause)."""
    return ToolApprovalResponse(entry.call_id, approved, digest=entry.digest,
                                approver="dana", request_id=entry.request_id)


def answer_in_store(store, session_id, approved=("c1", "c3")):
    pending = {e.call_id: e for e in store.pending()}
    store.answer(session_id, [answer(pending[i], i in approved) for i in sorted(pending)])


def test_r23_a_worker_stopped_mid_batch_is_continued_by_the_recorded_answer(make_agent,
                                                                            store_url):
    """The inbox's answers are in the session: a continued run uses the one not used
    yet (what a surviving worker does with a stranded session, issue 38)."""
    bank = Bank()
    agent, _ = make_agent([PAUSE, chat_stream(text="Sent both.")], tools=bank.tools)
    with open_store(store_url) as store:
        with store.open("s") as session:
            list(agent.run("pay", session))
        answer_in_store(store, "s")
        with store.open("s") as session:  # a worker's resume, stopped after c1
            stop_after_first_result(agent.run([], session, AgentRunOptions(
            ).with_tool_approval_responses(ready_responses(session))))
        assert bank.ran == [("transfer", 120)]
        with store.open("s") as session:
            done = list(agent.run([], session))
        assert results(done) == {"c2": "Rejected: User denied", "c3": "sent 5"}
        assert bank.ran == [("transfer", 120), ("transfer", 5)]
        assert list(store.pending()) == []
        audit = store.load("s").approvals.audit
    assert [(a.call_id, a.outcome) for a in audit] == [("c1", "approved"), ("c3", "approved")]


def test_r23_recorded_answers_run_when_the_session_is_continued(make_agent, store_url):
    bank = Bank()
    agent, _ = make_agent([PAUSE, chat_stream(text="ok")], tools=bank.tools)
    with open_store(store_url) as store:
        with store.open("s") as session:
            list(agent.run("pay", session))
        answer_in_store(store, "s", approved=("c3",))  # c1 rejected, c3 approved
        with store.open("s") as session:
            done = list(agent.run([], session))
    assert results(done) == {"c1": "Rejected: User denied", "c2": "Rejected: User denied",
                             "c3": "sent 5"}
    assert bank.ran == [("transfer", 5)]


def test_r23_a_partly_recorded_pause_asks_about_the_unanswered_call(make_agent, store_url):
    bank = Bank()
    agent, _ = make_agent([PAUSE, chat_stream(text="ok")], tools=bank.tools)
    with open_store(store_url) as store:
        with store.open("s") as session:
            list(agent.run("pay", session))
        c1 = next(e for e in store.pending() if e.call_id == "c1")
        store.answer("s", [answer(c1)])
        with store.open("s") as session:
            again = list(agent.run([], session))
        assert [r.call_id for r in requests_of(again)] == ["c3"]
        assert bank.ran == []
        assert store.load("s").approvals.answers[0].call_id == "c1"  # kept for later


def test_r23_the_callers_own_answer_wins_over_a_recorded_one(make_agent, store_url):
    bank = Bank()
    agent, _ = make_agent([PAUSE, chat_stream(text="ok")], tools=bank.tools)
    with open_store(store_url) as store:
        with store.open("s") as session:
            asked = requests_of(agent.run("pay", session))
        answer_in_store(store, "s")
        with store.open("s") as session:
            done = list(agent.run([], session, AgentRunOptions(
            ).with_tool_approval_responses([asked[0].reject("changed my mind")])))
    assert results(done) == {"c1": "Rejected: changed my mind",
                             "c2": "Rejected: User denied", "c3": "sent 5"}
