"""Resume you can trust (issue 5): approvals bound to the exact call, used once,
expiring, audited; sessions signed and locked. The attack catalogue asserts, for each
attack, the exact outcome and how many times the tool ran."""

import hashlib
import json
import re
import subprocess
import sys
import textwrap
import time

import pytest

from agentflow import (
    AgentRunOptions, AgentSession, ApprovalError, ApprovalRequiredTool, ChatClientAgent,
    FinishReason, OpenAIChatClient, ToolApprovalRequest, ToolApprovalResponse,
    ToolResult, tool)
from agentflow.canonical import arguments_digest
from agentflow.errors import SessionIntegrityError, SessionLockedError
from agentflow.types import ToolCall
from agentflow.testing.replay import ReplayServer, chat_stream

import helpers_fork

RM = '{"command": "rm -rf /tmp/cache"}'
RM_DIGEST = hashlib.sha256(b'{"command":"rm -rf /tmp/cache"}').hexdigest()
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


class Tools:
    def __init__(self):
        self.ran = []

        @tool
        def run_command(command: str) -> str:
            """Run a shell command."""
            self.ran.append(("run_command", command))
            return f"ran {command}"

        @tool
        def delete_file(path: str) -> str:
            """Delete a file."""
            self.ran.append(("delete_file", path))
            return f"deleted {path}"

        @tool
        def echo(text: str) -> str:
            """Repeat text."""
            self.ran.append(("echo", text))
            return text

        self.all = [ApprovalRequiredTool(run_command), ApprovalRequiredTool(delete_file), echo]

    def count(self, name=None):
        return sum(1 for n, _ in self.ran if name in (None, n))


@pytest.fixture
def paused(make_agent):
    """A run paused on c1 = run_command(rm -rf /tmp/cache) with the sibling c2 = echo.
    Returns (agent, session, tools, server, clock) where clock[0] is the time."""
    tools = Tools()
    agent, server = make_agent([
        chat_stream(text="Cleaning.", tool_calls=[("c1", "run_command", RM),
                                                  ("c2", "echo", '{"text": "note"}')]),
        chat_stream(text="Done."), chat_stream(text="Done again.")], tools=tools.all)
    clock = [1_800_000_000.0]
    agent.chat_client.clock = lambda: clock[0]
    session = AgentSession()
    updates = list(agent.run("clean the cache", session))
    assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    return agent, session, tools, server, clock


def resume(agent, session, *responses, messages=()):
    options = AgentRunOptions().with_tool_approval_responses(list(responses))
    return list(agent.run(list(messages), session, options))


# -- 1. pending approvals are recorded -------------------------------------------------------

def test_the_pause_records_call_tool_digest_and_time(paused):
    agent, session, tools, _, clock = paused
    [record] = session.approvals.pending
    assert (record.call_id, record.tool, record.digest, record.issued_at, record.expires_at) == (
        "c1", "run_command", RM_DIGEST, clock[0], None)
    assert arguments_digest('{ "command" :  "rm -rf /tmp/cache" }') == RM_DIGEST  # canonical


def test_the_request_carries_the_digest(make_agent):
    tools = Tools()
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "run_command", RM)])], tools=tools.all)
    [request] = [u for u in agent.run("go") if isinstance(u, ToolApprovalRequest)]
    assert request.digest == RM_DIGEST


def test_a_response_with_the_right_digest_runs_the_recorded_call(paused):
    agent, session, tools, server, _ = paused
    updates = resume(agent, session, ToolApprovalResponse("c1", True, digest=RM_DIGEST))
    assert tools.ran == [("run_command", "rm -rf /tmp/cache")]
    assert [u.result for u in updates if isinstance(u, ToolResult)] == [
        "ran rm -rf /tmp/cache", "Rejected: User denied"]
    assert session.approvals.pending == []


# -- 5. the audit trail ----------------------------------------------------------------------

def test_every_decision_is_audited(make_agent):
    tools = Tools()
    agent, _ = make_agent([
        chat_stream(tool_calls=[("a", "run_command", '{"command": "ls"}'),
                                ("b", "delete_file", '{"path": "/x"}'),
                                ("c", "run_command", '{"command": "pwd"}')]),
        chat_stream(text="ok")], tools=tools.all)
    agent.chat_client.clock = lambda: 1_800_000_000.0
    session = AgentSession()
    list(agent.run("go", session))
    agent.chat_client.clock = lambda: 1_800_000_042.0
    resume(agent, session, ToolApprovalResponse("a", True, approver="ann@example.com"),
           ToolApprovalResponse("b", False, "keep it", approver="bob"))
    audit = [(r.call_id, r.tool, r.outcome, r.reason, r.approver) for r in session.audit]
    assert audit == [("a", "run_command", "approved", None, "ann@example.com"),
                     ("b", "delete_file", "rejected", "keep it", "bob"),
                     ("c", "run_command", "unanswered", None, None)]
    first = session.audit[0]
    assert first.digest == arguments_digest('{"command": "ls"}')
    assert (first.issued_at, first.decided_at) == ("2027-01-15T08:00:00Z", "2027-01-15T08:00:42Z")
    assert all(ISO_UTC.match(r.issued_at) and ISO_UTC.match(r.decided_at) for r in session.audit)


def test_the_audit_trail_survives_save_and_load(paused, tmp_path):
    agent, session, tools, _, _ = paused
    resume(agent, session, ToolApprovalResponse("c1", False, "no", approver="ops"))
    session.save(tmp_path / "s.json")
    again = AgentSession.load(tmp_path / "s.json")
    assert again.audit == session.audit and again.audit[0].outcome == "rejected"


# -- 4. expiry --------------------------------------------------------------------------------

def test_an_expired_approval_is_a_rejection_recorded_as_expired(make_agent):
    tools = Tools()
    agent, server = make_agent([chat_stream(tool_calls=[("c1", "run_command", RM)]),
                                chat_stream(text="I did not run it.")], tools=tools.all,
                               approval_ttl=60)
    now = [1_800_000_000.0]
    agent.chat_client.clock = lambda: now[0]
    session = AgentSession()
    list(agent.run("go", session))
    assert session.approvals.pending[0].expires_at == now[0] + 60
    now[0] += 61
    updates = resume(agent, session, ToolApprovalResponse("c1", True))
    assert tools.count() == 0
    assert [u.result for u in updates if isinstance(u, ToolResult)] == ["Rejected: approval expired"]
    assert server.requests[1].json["messages"][-1]["content"] == "Rejected: approval expired"
    assert [(r.outcome, r.reason) for r in session.audit] == [("expired", "approval expired")]


def test_an_approval_within_the_ttl_runs(make_agent):
    tools = Tools()
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "run_command", RM)]),
                           chat_stream(text="ok")], tools=tools.all, approval_ttl=60)
    now = [1_800_000_000.0]
    agent.chat_client.clock = lambda: now[0]
    session = AgentSession()
    list(agent.run("go", session))
    now[0] += 60
    resume(agent, session, ToolApprovalResponse("c1", True))
    assert tools.count("run_command") == 1
    assert session.audit[0].outcome == "approved"


# -- 6. sessions on disk ------------------------------------------------------------------------

def test_a_signed_session_round_trips(paused, tmp_path):
    _, session, _, _, _ = paused
    path = tmp_path / "s.json"
    session.save(path, secret="s3cret")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 3 and data["signature"]["alg"] == "HMAC-SHA256"
    assert AgentSession.load(path, secret="s3cret") == session


def test_signature_rules(paused, tmp_path):
    _, session, _, _, _ = paused
    signed, plain = tmp_path / "signed.json", tmp_path / "plain.json"
    session.save(signed, secret="s3cret")
    session.save(plain)
    with pytest.raises(SessionIntegrityError, match="pass secret"):
        AgentSession.load(signed)
    with pytest.raises(SessionIntegrityError, match="modified after it was signed"):
        AgentSession.load(signed, secret="wrong")
    with pytest.raises(SessionIntegrityError, match="not signed"):
        AgentSession.load(plain, secret="s3cret")


def test_save_is_atomic(paused, tmp_path):
    """A save that fails half-way leaves the previous file intact and no temporary."""
    _, session, _, _, _ = paused
    path = tmp_path / "s.json"
    session.save(path)
    before = path.read_text()
    session.state["unserialisable"] = object()
    with pytest.raises(TypeError):
        session.save(path)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_a_version_1_session_still_loads():
    data = {"schema_version": 1, "messages": [{"role": "user", "content": "hi"}], "state": {}}
    session = AgentSession.from_dict(data)
    assert session.messages[0].content == "hi" and session.approvals.pending == []


RESUME_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from agentflow import *
    from agentflow.errors import SessionLockedError
    path, base_url, log, secret = sys.argv[1:5]
    release = sys.argv[5] if len(sys.argv) > 5 else None
    @tool
    def run_command(command: str) -> str:
        "Run a shell command."
        with open(log, "a") as handle:
            handle.write(command + "\\n")
        deadline = time.monotonic() + 60  # only against a hang
        while release and not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.01)  # hold the lock until the test has tried a second resume
        return "ran"
    agent = ChatClientAgent(OpenAIChatClient(base_url=base_url, api_key="k", max_retries=0),
                            tools=[ApprovalRequiredTool(run_command)])
    options = AgentRunOptions().with_tool_approval_responses([ToolApprovalResponse("c1", True)])
    try:
        with AgentSession.open(path, secret=secret) as session:
            updates = list(agent.run([], session, options))
        print(updates[-1].finish_reason.value)
    except (SessionLockedError, ApprovalError) as exc:
        print(type(exc).__name__)
""")


def pause_to_file(path, secret="k3y"):
    tools = Tools()
    with ReplayServer([chat_stream(tool_calls=[("c1", "run_command", RM)])]) as server:
        agent = ChatClientAgent(OpenAIChatClient(base_url=server.base_url, api_key="k"),
                                tools=tools.all)
        with AgentSession.open(path, secret=secret) as session:
            list(agent.run("clean", session))
    return tools


def test_a_paused_run_resumes_in_another_process(tmp_path):
    path, log = tmp_path / "s.json", tmp_path / "ran.log"
    pause_to_file(path)
    with ReplayServer([chat_stream(text="Cleaned.")]) as server:
        out = helpers_fork.run([sys.executable, "-c", RESUME_SCRIPT, str(path),
                                server.base_url, str(log), "k3y"], capture_output=True,
                               text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "stop"
    assert log.read_text() == "rm -rf /tmp/cache\n"
    final = AgentSession.load(path, secret="k3y")
    assert [r.outcome for r in final.audit] == ["approved"]
    assert final.messages[-1].content == "Cleaned."


# -- 7. the attack catalogue ---------------------------------------------------------------------

def test_attack_forged_call_id(paused):
    agent, session, tools, server, _ = paused
    before = session.to_dict()
    with pytest.raises(ApprovalError, match="call_forged"):
        resume(agent, session, ToolApprovalResponse("call_forged", True))
    assert tools.count() == 0 and session.to_dict() == before and len(server.requests) == 1


def test_attack_replayed_approval(paused):
    agent, session, tools, server, _ = paused
    resume(agent, session, ToolApprovalResponse("c1", True))
    with pytest.raises(ApprovalError, match="already have a result"):
        resume(agent, session, ToolApprovalResponse("c1", True))
    assert tools.count("run_command") == 1 and len(server.requests) == 2


def test_attack_duplicate_responses_in_one_resume(paused):
    agent, session, tools, _, _ = paused
    with pytest.raises(ApprovalError, match="more than once"):
        resume(agent, session, ToolApprovalResponse("c1", True), ToolApprovalResponse("c1", True))
    assert tools.count() == 0


def test_attack_approving_a_sibling_that_needed_no_approval(paused):
    agent, session, tools, _, _ = paused
    with pytest.raises(ApprovalError, match="never put up for approval") as info:
        resume(agent, session, ToolApprovalResponse("c1", True), ToolApprovalResponse("c2", True))
    assert info.value.call_ids == ["c2"]
    assert tools.count() == 0


def test_attack_arguments_edited_in_the_stored_history(paused):
    agent, session, tools, _, _ = paused
    session.messages[-1].tool_calls[0].arguments = '{"command": "rm -rf /"}'
    with pytest.raises(ApprovalError, match="edited after the run paused"):
        resume(agent, session, ToolApprovalResponse("c1", True))
    assert tools.count() == 0


def test_attack_tool_name_swapped_in_the_history(paused):
    agent, session, tools, _, _ = paused
    session.messages[-1].tool_calls[0].name = "delete_file"
    session.messages[-1].tool_calls[0].arguments = '{"path": "/etc/passwd"}'
    with pytest.raises(ApprovalError, match="edited after the run paused"):
        resume(agent, session, ToolApprovalResponse("c1", True))
    assert tools.count() == 0


def test_attack_a_call_injected_into_the_history(paused):
    """A new gated call added to the paused message was never put up for approval."""
    agent, session, tools, _, _ = paused
    session.messages[-1].tool_calls.append(ToolCall("c9", "delete_file", '{"path": "/etc"}'))
    with pytest.raises(ApprovalError, match="never put up for approval"):
        resume(agent, session, ToolApprovalResponse("c1", True), ToolApprovalResponse("c9", True))
    assert tools.count() == 0
    # answered without it, the injected call is only rejected
    updates = resume(agent, session, ToolApprovalResponse("c1", True))
    assert ("c9", "Rejected: User denied") in [(u.call_id, u.result) for u in updates
                                                if isinstance(u, ToolResult)]
    assert tools.ran == [("run_command", "rm -rf /tmp/cache")]


def test_attack_a_tampered_signed_file(paused, tmp_path):
    _, session, tools, _, _ = paused
    path = tmp_path / "s.json"
    session.save(path, secret="k3y")
    data = json.loads(path.read_text())
    data["messages"][-1]["tool_calls"][0]["function"]["arguments"] = '{"command": "rm -rf /"}'
    data["approvals"]["pending"][0]["digest"] = arguments_digest('{"command": "rm -rf /"}')
    path.write_text(json.dumps(data))
    with pytest.raises(SessionIntegrityError, match="modified after it was signed"):
        AgentSession.load(path, secret="k3y")
    assert tools.count() == 0


def test_attack_signature_stripped_from_the_file(paused, tmp_path):
    _, session, _, _, _ = paused
    path = tmp_path / "s.json"
    session.save(path, secret="k3y")
    data = json.loads(path.read_text())
    del data["signature"]
    path.write_text(json.dumps(data))
    with pytest.raises(SessionIntegrityError, match="not signed"):
        AgentSession.load(path, secret="k3y")


def test_attack_a_response_for_a_call_of_an_earlier_turn(make_agent):
    tools = Tools()
    agent, _ = make_agent([chat_stream(tool_calls=[("old", "run_command", '{"command": "ls"}')]),
                           chat_stream(tool_calls=[("new", "delete_file", '{"path": "/x"}')]),
                           chat_stream(text="ok")], tools=tools.all)
    session = AgentSession()
    list(agent.run("go", session))
    resume(agent, session, ToolApprovalResponse("old", True))      # runs, then pauses on "new"
    with pytest.raises(ApprovalError, match="old"):
        resume(agent, session, ToolApprovalResponse("old", True))
    assert tools.ran == [("run_command", "ls")]


def test_attack_an_approval_after_expiry(make_agent):
    tools = Tools()
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "run_command", RM)]),
                           chat_stream(text="ok")], tools=tools.all, approval_ttl=5)
    now = [1000.0]
    agent.chat_client.clock = lambda: now[0]
    session = AgentSession()
    list(agent.run("go", session))
    now[0] = 1005.5
    updates = resume(agent, session, ToolApprovalResponse("c1", True, digest=RM_DIGEST))
    assert tools.count() == 0
    assert [u.result for u in updates if isinstance(u, ToolResult)] == ["Rejected: approval expired"]
    assert session.audit[0].outcome == "expired"


def test_attack_responses_to_a_session_that_is_not_paused(make_agent):
    tools = Tools()
    agent, server = make_agent([chat_stream(text="hello")], tools=tools.all)
    session = AgentSession()
    list(agent.run("hi", session))
    with pytest.raises(ApprovalError, match="no pending call"):
        resume(agent, session, ToolApprovalResponse("c1", True))
    assert tools.count() == 0 and len(server.requests) == 1


def test_attack_two_concurrent_resumes_of_one_saved_file(tmp_path):
    """A second process resuming while the first runs the approved call finds the lock
    held; one resuming after it finds the call answered. The call runs once."""
    path, log, release = tmp_path / "s.json", tmp_path / "ran.log", tmp_path / "release"
    pause_to_file(path)

    def resume_in_a_process(*extra):
        return helpers_fork.popen([sys.executable, "-c", RESUME_SCRIPT, str(path),
                                   server.base_url, str(log), "k3y", *extra],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    with ReplayServer([chat_stream(text="Cleaned."), chat_stream(text="Again.")]) as server:
        first = resume_in_a_process(str(release))
        deadline = time.monotonic() + 60  # only against a hang
        while not (log.exists() and log.read_text()) and first.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.01)  # until the first is inside the tool, holding the lock
        during = resume_in_a_process().communicate(timeout=60)
        release.touch()
        first_out = first.communicate(timeout=60)
        after = resume_in_a_process().communicate(timeout=60)
    assert (first_out[0].strip(), first.returncode) == ("stop", 0), first_out[1]
    assert during[0].strip() == "SessionLockedError", during[1]
    assert after[0].strip() == "ApprovalError", after[1]
    assert log.read_text() == "rm -rf /tmp/cache\n"


def test_attack_a_lock_held_in_this_process(paused, tmp_path):
    _, session, _, _, _ = paused
    path = tmp_path / "s.json"
    session.save(path)
    with AgentSession.open(path):
        with pytest.raises(SessionLockedError, match="in use by another process"):
            with AgentSession.open(path):
                pass
    with AgentSession.open(path) as again:  # released afterwards
        assert again.messages == session.messages


def test_attack_a_response_whose_digest_does_not_match(paused):
    agent, session, tools, _, _ = paused
    other = arguments_digest('{"command": "ls"}')
    with pytest.raises(ApprovalError, match="digest") as info:
        resume(agent, session, ToolApprovalResponse("c1", True, digest=other))
    assert info.value.call_ids == ["c1"] and tools.count() == 0


def test_attack_the_approval_record_deleted(paused):
    """Dropping the record (an unsigned file edited by hand) cannot turn the call into
    one that needs no approval: it can then only be rejected."""
    agent, session, tools, _, _ = paused
    session.approvals.pending.clear()
    with pytest.raises(ApprovalError, match="never put up for approval"):
        resume(agent, session, ToolApprovalResponse("c1", True))
    assert tools.count() == 0


def test_attack_the_tool_made_approval_free_on_resume(make_agent):
    """Resuming with an agent whose run_command no longer requires approval still goes
    through the record: the call runs only if approved."""
    tools = Tools()
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "run_command", RM)])], tools=tools.all)
    session = AgentSession()
    list(agent.run("go", session))
    lax_tools = Tools()
    lax, _ = make_agent([chat_stream(text="ok")], tools=[t.tool if hasattr(t, "tool") else t
                                                         for t in lax_tools.all])
    updates = list(lax.run([], session))
    assert lax_tools.count() == 0
    assert [u.result for u in updates if isinstance(u, ToolResult)] == ["Rejected: User denied"]
    assert session.audit[0].outcome == "unanswered"


def test_attack_a_string_instead_of_a_bool(paused):
    agent, session, tools, _, _ = paused
    with pytest.raises(TypeError):
        resume(agent, session, ToolApprovalResponse("c1", "false"))
    assert tools.count() == 0


def test_attack_a_rejection_followed_by_an_approval(paused):
    agent, session, tools, server, _ = paused
    resume(agent, session, ToolApprovalResponse("c1", False, "no"))
    with pytest.raises(ApprovalError):
        resume(agent, session, ToolApprovalResponse("c1", True))
    assert tools.count() == 0
    assert [r.outcome for r in session.audit] == ["rejected"]


# -- R17: ambiguous or orphaned stored history is refused on load -----------------------------

def _stored(*messages, pending=()):
    return {"schema_version": 2, "messages": list(messages), "state": {},
            "approvals": {"pending": list(pending), "audit": []}}


_CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize("data, words", [
    (_stored({"role": "user", "content": "hi"}, {"role": "tool", "content": "x",
                                                   "tool_call_id": "c9"}), "answers no call"),
    (_stored({"role": "assistant", "content": None, "tool_calls": [_CALL]},
             {"role": "tool", "content": "x", "tool_call_id": "c1"},
             {"role": "tool", "content": "again", "tool_call_id": "c1"}), "answers it twice"),
    (_stored({"role": "assistant", "content": None, "tool_calls": [_CALL]},
             {"role": "user", "content": "hi"},
             {"role": "tool", "content": "late", "tool_call_id": "c1"}), "answers no call"),
    (_stored({"role": "assistant", "content": None,
              "tool_calls": [{**_CALL, "id": 7}]}), "id is 7"),
    (_stored({"role": "assistant", "content": None, "tool_calls": [{**_CALL, "id": ""}]}),
     "id is ''"),
    (_stored({"role": "assistant", "content": None, "tool_calls": ["c1"]}), "not an object"),
    (_stored({"role": "assistant", "content": None, "tool_calls": [
        {**_CALL, "function": {"name": "f", "arguments": {"a": 1}}}]}), "arguments is not"),
    (_stored({"role": "tool", "content": "x", "tool_call_id": 3}), "tool_call_id is 3"),
    (_stored({"role": "robot", "content": "x"}), "role 'robot'"),
    (_stored({"role": "user", "content": 5}), "content of type int"),
    (_stored({"role": "user", "content": "x"}, pending=[{"tool": "f", "digest": "d"}]),
     "lacks call_id"),
    (_stored({"role": "user", "content": "x"}, pending=[
        {"call_id": "c1", "tool": "f", "digest": "d", "issued_at": 1.0, "expires_at": "soon"}]),
     "expires_at = 'soon', not of type float or null"),
    (_stored({"role": "user", "content": "x"}, pending=[
        {"call_id": "c1", "tool": "f", "digest": "d", "issued_at": "then"}]),
     "issued_at = 'then'"),
    (_stored({"role": "user", "content": "x"}, pending=[
        {"call_id": 1, "tool": "f", "digest": "d", "issued_at": 1}]), "call_id = 1"),
    (_stored({"role": "user", "content": "x"}, pending=[
        {"call_id": "c1", "tool": "f", "digest": "d", "issued_at": True}]), "issued_at = True"),
    (_stored({"role": "user", "content": "x"}, pending=[
        {"call_id": "c1", "tool": "f", "digest": "d", "issued_at": 1, "colour": "red"}]),
     "unknown keys colour"),
    ({**_stored({"role": "user", "content": "x"}), "approvals": {"pending": [], "later": []}},
     "unknown list 'later'"),
    ({**_stored({"role": "user", "content": "x"}), "state": [1]}, "state must be an object"),
])
def test_r17_stored_history_of_the_wrong_shape_is_refused(tmp_path, data, words):
    """R17: a tool message answering no call, or a stored field of the wrong type, is a
    ``SessionError`` naming the problem, on load, before anything is sent or runs."""
    from agentflow import SessionError
    with pytest.raises(SessionError, match=re.escape(words)):
        AgentSession.from_dict(data)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SessionError, match=re.escape(words)):
        AgentSession.load(path)


def test_r17_a_well_formed_history_still_loads():
    data = _stored({"role": "user", "content": "hi"},
                   {"role": "assistant", "content": None, "tool_calls": [_CALL]},
                   {"role": "tool", "content": "x", "tool_call_id": "c1"},
                   {"role": "assistant", "content": "done"})
    assert AgentSession.from_dict(data).to_dict()["messages"] == data["messages"]
