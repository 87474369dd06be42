"""SPEC R23 under SIGKILL: a real worker process (tests/pause_worker.py) is killed at
every step boundary of a run, before, inside and after each save, for each store; after
every kill the pause is either whole (listed by ``pending()``, approvable; R4 and R5 for
its siblings) or the turn goes through the gate again when resumed, and no call is
answered ``Rejected: User denied`` unless a recorded pause left it unanswered.

Slow (one process per boundary): make test-slow. PostgreSQL: ``conftest.postgres_dsn``
(``AGENTFLOW_TEST_POSTGRES_DSN``, else a throwaway cluster)."""

import os
import subprocess
import sys

import pytest

from agentflow import (AgentRunOptions, ChatClientAgent, FinishReason, OpenAIChatClient,
                       ToolApprovalRequest, ToolResult)
from agentflow.stores import open_store
from agentflow.testing.replay import ReplayServer, chat_stream

import pause_worker
from test_stores import opened_when_released  # a killed worker's lease: gone soon

pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
PAUSING = chat_stream(tool_calls=[("c1", "transfer", '{"amount": 1}'), ("c2", "balance", "{}"),
                                  ("c3", "transfer", '{"amount": 3}')])
RUNNING = chat_stream(tool_calls=[("c1", "balance", "{}"), ("c2", "note", '{"text": "x"}')])
FINAL = chat_stream(text="Done.")


def kill_at(store_url, session_id, log, scenario, boundary) -> str:
    """Run the worker, killed at ``boundary``; its last line (``killed …`` or ``done N``)."""
    bodies = [PAUSING] if scenario == "pause" else [RUNNING, FINAL]
    with ReplayServer(bodies) as server:
        done = subprocess.run(
            [sys.executable, os.path.join(HERE, "pause_worker.py"), store_url, session_id,
             server.base_url, str(log), scenario, str(boundary)],
            capture_output=True, text=True, timeout=120)
    lines = done.stdout.split()
    assert lines and lines[0] in ("killed", "done"), (done.stdout, done.stderr)
    if lines[0] == "killed":
        assert done.returncode == -9, (done.returncode, done.stderr)
    else:
        assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def agent_for(base_url, log):
    return ChatClientAgent(OpenAIChatClient(base_url=base_url, api_key="k", max_retries=0),
                           tools=pause_worker.tools(log))


def ran(log) -> list:
    return log.read_text().splitlines() if log.exists() else []


def results(updates) -> dict:
    return {u.call_id: u.result for u in updates if isinstance(u, ToolResult)}


def check_the_pause(store, session_id, log) -> str:
    """After a kill of the pausing run: the pause is whole, or gated again. Returns
    which (``nothing``, ``recorded`` or ``re-gated``)."""
    try:
        session = store.load(session_id)
    except KeyError:
        return "nothing"  # killed before the first write: nothing to resume
    if not session.pending_tool_calls:
        return "nothing"  # the turn is not stored: the next run calls the model again
    assert ran(log) == []  # R3: nothing of a pausing turn ran
    records = [r.call_id for r in session.approvals.pending]
    listed = [e.call_id for e in store.pending() if e.session_id == session_id]
    with ReplayServer([FINAL]) as server:
        agent = agent_for(server.base_url, log)
        if records:  # a recorded pause: whole, approvable, R4/R5
            assert records == listed == ["c1", "c3"]
            requests = session.approval_requests(agent.chat_client.tools)
            answers = [requests[0].approve(), requests[1].reject("no")]
            with opened_when_released(store, session_id) as open_session:
                updates = list(agent.run([], open_session, AgentRunOptions(
                ).with_tool_approval_responses(answers)))
            assert results(updates) == {"c1": "sent 1", "c2": "Rejected: User denied",
                                        "c3": "Rejected: no"}
            assert ran(log) == ["transfer 1"]
            return "recorded"
        assert listed == []  # a turn without records: gated again, never denied
        with opened_when_released(store, session_id) as open_session:
            updates = list(agent.run([], open_session))
        asked = [u for u in updates if isinstance(u, ToolApprovalRequest)]
        assert [a.call_id for a in asked] == ["c1", "c3"] and results(updates) == {}
        assert [e.call_id for e in store.pending() if e.session_id == session_id] == ["c1",
                                                                                      "c3"]
        return "re-gated"


def check_the_run(store, session_id, log) -> None:
    """After a kill of a run whose calls need no approval: resumed, every call has one
    result, none is answered as if a person had refused it, none ran twice."""
    with ReplayServer([FINAL, FINAL]) as server:
        agent = agent_for(server.base_url, log)
        with opened_when_released(store, session_id) as session:
            before = {m.tool_call_id for m in session.messages if m.tool_call_id}
            started = set(session.running)
            updates = list(agent.run([], session))
            assert updates[-1].finish_reason is FinishReason.STOP
        final = store.load(session_id)
    answered = [m for m in final.messages if m.tool_call_id]
    assert sorted(m.tool_call_id for m in answered) in ([], ["c1", "c2"])
    for message in answered:
        assert not message.content.startswith("Rejected"), message
        if message.tool_call_id in started - before:
            assert message.content.startswith("Error: interrupted")
    assert ran(log).count("balance") <= 1 and ran(log).count("note x") <= 1


@pytest.mark.parametrize("scenario", ["pause", "run"])
def test_r23_a_kill_at_every_step_boundary_loses_no_pause(store_url, tmp_path, scenario):
    outcomes, boundary = [], 1
    with open_store(store_url) as store:
        while True:
            session_id, log = f"s{boundary}", tmp_path / f"log{boundary}"
            line = kill_at(store_url, session_id, log, scenario, boundary)
            if line.startswith("done"):
                break
            if scenario == "pause":
                outcomes.append((line, check_the_pause(store, session_id, log)))
            else:
                check_the_run(store, session_id, log)
                outcomes.append((line, "resumed"))
            boundary += 1
    # every boundary was reached: before and after each write (one that changes
    # nothing writes nothing: no inside), inside each real one
    kinds = [line.split()[1] for line, _ in outcomes]
    assert kinds.count("before") == kinds.count("after") >= kinds.count("inside") >= 1
    if scenario == "pause":
        assert {o for _, o in outcomes} >= {"recorded"}
        assert "re-gated" not in {o for _, o in outcomes}  # one write: never half a pause
