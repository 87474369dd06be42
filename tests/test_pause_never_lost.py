"""SPEC R23: a pause is never lost. The pausing turn and its pending-approval records are
one write, made before the first ``ToolApprovalRequest`` is yielded; a turn stored
without records (a crash, an older version, an import) goes through the gate again and
is never answered ``Rejected: User denied`` as if a person had refused it.

Every run here talks real HTTP to a loopback replay server; every session is in a real
store (``conftest.store_url``: a folder, an SQLite file; PostgreSQL in make test-slow).
The kill at every step boundary of a real worker is in test_pause_kills.py (slow)."""

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalRequiredTool, ChatMessage,
                       FinishReason, ToolApprovalRequest, ToolResult, tool)
from agentflow.stores import open_store
from agentflow.testing.replay import chat_stream
from agentflow.types import ToolCall

PAY = '{"amount": 120}'


class Bank:
    """``transfer`` asks (approval-gated), ``balance`` never does; both count runs.
    ``stop_on``: that amount's transfer raises ``KeyboardInterrupt`` (a person's
    Ctrl-C inside the tool)."""

    def __init__(self, stop_on=None):
        self.ran = []

        @tool
        def transfer(amount: float) -> str:
            """Send money."""
            if amount == stop_on:
                raise KeyboardInterrupt
            self.ran.append(("transfer", amount))
            return f"sent {amount}"

        @tool
        def balance() -> str:
            """Read the balance."""
            self.ran.append(("balance",))
            return "1000"

        self.tools = [ApprovalRequiredTool(transfer), balance]


class WriteLog:
    """Wraps a store's ``_write``, which every write goes through (a ``save``, a
    ``checkpoint``): what each one held."""

    def __init__(self, store, monkeypatch):
        self.writes = []
        original = type(store)._write

        def write(this, session_id, session, before, changed):
            done = original(this, session_id, session, before, changed)
            self.writes.append(session.to_dict())
            return done

        monkeypatch.setattr(type(store), "_write", write)


def test_r23_the_pausing_turn_and_all_its_records_are_one_write(make_agent, store_url,
                                                                 monkeypatch):
    bank = Bank()
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "transfer", PAY), ("c2", "balance", "{}"),
                                                   ("c3", "transfer", '{"amount": 5}')])],
                          tools=bank.tools)
    with open_store(store_url) as store:
        log = WriteLog(store, monkeypatch)
        with store.open("s") as session:
            updates = agent.run("pay", session)
            first = next(u for u in updates if isinstance(u, ToolApprovalRequest))
            # the caller stops reading after the first request: the pause is stored whole
            updates.close()
        stored = store.load("s")
    assert first.call_id == "c1"
    with_turn = [w for w in log.writes if any(m.get("tool_calls") for m in w["messages"])]
    assert [r["call_id"] for r in with_turn[0]["approvals"]["pending"]] == ["c1", "c3"]
    assert [r.call_id for r in stored.approvals.pending] == ["c1", "c3"]
    assert [r.call_id for r in stored.approval_requests(bank.tools)] == ["c1", "c3"]
    assert bank.ran == []


def stored_turn(store, calls, extra=()):
    """A session whose last turn has ``calls`` and no approval records: what a crash
    between the two writes of an older version, or an imported history, leaves."""
    session = AgentSession(messages=[
        ChatMessage.user("pay"),
        ChatMessage.assistant("", tool_calls=[ToolCall(i, n, a) for i, n, a in calls]),
        *extra])
    store.save("s", session)


def results(updates):
    return {u.call_id: u.result for u in updates if isinstance(u, ToolResult)}


def test_r23_an_unrecorded_turn_is_gated_again_not_denied(make_agent, store_url):
    bank = Bank()
    agent, _ = make_agent([chat_stream(text="Paid.")], tools=bank.tools)
    with open_store(store_url) as store:
        stored_turn(store, [("c1", "transfer", PAY), ("c2", "balance", "{}")])
        with store.open("s") as session:
            updates = list(agent.run([], session))
        asked = [u for u in updates if isinstance(u, ToolApprovalRequest)]
        assert [a.call_id for a in asked] == ["c1"]
        assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
        assert results(updates) == {} and bank.ran == []  # R3: nothing of the turn runs
        # the re-gated pause is recorded: listed, approvable, and R5 holds for c2
        assert [e.call_id for e in store.pending()] == ["c1"]
        with store.open("s") as session:
            updates = list(agent.run([], session, AgentRunOptions(
            ).with_tool_approval_responses([asked[0].approve()])))
    assert results(updates) == {"c1": "sent 120", "c2": "Rejected: User denied"}
    assert bank.ran == [("transfer", 120)]


def test_r23_an_unrecorded_turn_that_needs_no_approval_runs(make_agent, store_url):
    bank = Bank()
    agent, server = make_agent([chat_stream(text="You have 1000.")], tools=bank.tools)
    with open_store(store_url) as store:
        stored_turn(store, [("c1", "balance", "{}"), ("c2", "balance", "{}")])
        with store.open("s") as session:
            updates = list(agent.run([], session))
        final = store.load("s")
    assert results(updates) == {"c1": "1000", "c2": "1000"}
    assert updates[-1].finish_reason is FinishReason.STOP
    assert [m.role.value for m in final.messages] == ["user", "assistant", "tool", "tool",
                                                      "assistant"]
    assert len(server.requests) == 1


def test_r23_a_policy_decides_a_re_gated_call(make_agent, store_url):
    from agentflow import ApprovalPolicy
    bank = Bank()
    agent, _ = make_agent([chat_stream(text="Done.")], tools=bank.tools,
                          policy=ApprovalPolicy(allow=["transfer"]))
    with open_store(store_url) as store:
        stored_turn(store, [("c1", "transfer", PAY)])
        with store.open("s") as session:
            updates = list(agent.run([], session))
        audit = store.load("s").audit
    assert results(updates) == {"c1": "sent 120"}
    assert [(a.call_id, a.outcome, a.rule) for a in audit] == [("c1", "allowed", "transfer")]


def test_r23_only_the_unstarted_calls_of_a_cut_turn_are_gated_again(make_agent, store_url):
    """A turn that needed no approval was cut by a crash: c1 ran (its result is in), c2
    started (R16: interrupted, never run twice), c3 never started: it runs now."""
    bank = Bank()
    agent, _ = make_agent([chat_stream(text="ok")], tools=bank.tools)
    with open_store(store_url) as store:
        session = AgentSession(messages=[
            ChatMessage.user("pay"),
            ChatMessage.assistant("", tool_calls=[ToolCall("c1", "balance", "{}"),
                                                  ToolCall("c2", "transfer", PAY),
                                                  ToolCall("c3", "balance", "{}")]),
            ChatMessage.tool("1000", "c1")],
            running={"c2": {"tool": "transfer", "started_at": 0.0}})
        store.save("s", session)
        with store.open("s") as session:
            updates = list(agent.run([], session))
    assert results(updates) == {
        "c2": "Error: interrupted: transfer may have partly run and was not run again",
        "c3": "1000"}
    assert bank.ran == [("balance",)]


def test_r23_r6_input_given_to_a_re_gated_pause_waits_behind_it(make_agent, store_url):
    bank = Bank()
    agent, server = make_agent([chat_stream(text="Paid, and noted.")], tools=bank.tools)
    with open_store(store_url) as store:
        stored_turn(store, [("c1", "transfer", PAY)])
        with store.open("s") as session:
            updates = list(agent.run("and send a receipt", session))
        paused = store.load("s")
        # the history stays valid: nothing after the unanswered turn
        assert [m.role.value for m in paused.messages] == ["user", "assistant"]
        request = next(u for u in updates if isinstance(u, ToolApprovalRequest))
        with store.open("s") as session:
            list(agent.run([], session, AgentRunOptions().with_tool_approval_responses(
                [request.approve()])))
        final = store.load("s")
    assert [(m.role.value, m.content) for m in final.messages] == [
        ("user", "pay"), ("assistant", ""), ("tool", "sent 120"),
        ("user", "and send a receipt"), ("assistant", "Paid, and noted.")]
    sent = server.requests[0].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]


def test_r23_a_recorded_pause_keeps_r5(make_agent, store_url):
    """The sibling of a recorded pause is still answered as R5 says."""
    bank = Bank()
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "transfer", PAY),
                                                   ("c2", "balance", "{}")]),
                           chat_stream(text="ok")], tools=bank.tools)
    with open_store(store_url) as store:
        with store.open("s") as session:
            list(agent.run("pay", session))
        with store.open("s") as session:
            updates = list(agent.run([], session))
    assert results(updates) == {"c1": "Rejected: User denied", "c2": "Rejected: User denied"}
    assert bank.ran == []


def schema2_session(arguments='{"amount": 12.0}', call_id="c1"):
    """A session as a schema-2 agentflow (before RFC 8785, commit b27a974) saved it when
    ``transfer(amount=12.0)`` paused: its digest is that of ``json.dumps`` with sorted
    keys, where ``12.0`` stays ``12.0`` (RFC 8785 writes ``12``)."""
    import hashlib
    import json
    old = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"),
                     ensure_ascii=False)
    return {"schema_version": 2,
            "messages": [{"role": "user", "content": "pay"},
                         {"role": "assistant", "content": "", "tool_calls": [
                             {"id": call_id, "type": "function",
                              "function": {"name": "transfer", "arguments": arguments}}]}],
            "state": {},
            "approvals": {"pending": [{"call_id": call_id, "tool": "transfer",
                                       "digest": hashlib.sha256(old.encode()).hexdigest(),
                                       "issued_at": 1764500000.0, "expires_at": None}],
                          "audit": []}}


@pytest.mark.parametrize("how", ["approve", "reject", "new message"])
def test_r23_a_schema_2_session_with_a_float_argument_resumes(make_agent, store_url, how):
    import json
    bank = Bank()
    agent, _ = make_agent([chat_stream(text="Done.")], tools=bank.tools)
    with open_store(store_url) as store:
        store.save("s", AgentSession.from_dict(schema2_session()))
        requests = store.load("s").approval_requests(bank.tools)
        assert [r.arguments for r in requests] == [{"amount": 12.0}]
        with store.open("s") as session:
            if how == "new message":
                updates = list(agent.run("never mind", session))
            else:
                response = (requests[0].approve() if how == "approve"
                            else requests[0].reject("too much"))
                updates = list(agent.run([], session, AgentRunOptions(
                ).with_tool_approval_responses([response])))
        final = store.load("s")
    expected = {"approve": "sent 12.0", "reject": "Rejected: too much",
                "new message": "Rejected: User denied"}[how]
    assert results(updates) == {"c1": expected}
    assert bank.ran == ([("transfer", 12.0)] if how == "approve" else [])
    assert final.approvals.pending == [] and final.audit[-1].call_id == "c1"
    assert json.loads(json.dumps(final.to_dict()))["schema_version"] == 3


def test_r23_a_schema_2_record_still_refuses_an_edited_history(make_agent, store_url):
    from agentflow import ApprovalError
    bank = Bank()
    agent, _ = make_agent([], tools=bank.tools)
    data = schema2_session()
    data["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"amount": 12000.0}'
    session = AgentSession.from_dict(data)
    with pytest.raises(ApprovalError, match="edited after the run paused"):
        list(agent.run([], session, AgentRunOptions().with_tool_approval_responses(
            [session.approval_requests(bank.tools)[0].approve()])))
    assert bank.ran == []


def test_r23_a_schema_2_record_survives_a_save_in_schema_3(tmp_path):
    path = tmp_path / "s.json"
    AgentSession.from_dict(schema2_session()).save(path)
    again = AgentSession.load(path)
    assert again.approvals.pending[0].scheme == "schema-2"
    assert again.approvals.check(again.pending_tool_calls, {}) is None
