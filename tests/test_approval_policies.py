"""Conditional approval (SPEC R18), policies at the gate (R19) and edit on approve
(R20), through a real agent over loopback HTTP. Each test asserts what ran (and how
often), what the model was told, and what the audit trail says."""

from __future__ import annotations

import json

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalError, ApprovalPolicy,
                       ApprovalRequiredTool, ChatClientAgent, FinishReason,
                       OpenAIChatClient, ToolApprovalRequest, ToolApprovalResponse,
                       ToolResult, tool)
from agentflow.canonical import arguments_digest, canonical_json
from agentflow.errors import PolicyError
from agentflow.testing.replay import ReplayServer, chat_stream

NOW = 1_800_000_000.0


@pytest.fixture(scope="module")
def server():
    replay = ReplayServer().start()
    yield replay
    replay.stop()


class Bench:
    """Tools that record what ran, and an agent factory on the shared server."""

    def __init__(self, server):
        self.server = server
        self.ran: list[tuple[str, dict]] = []
        self.checks = 0
        server.requests.clear()
        server._replies.clear()

        @tool(subject="command", subject_kind="shell")
        def run_command(command: str) -> str:
            """Run a shell command."""
            self.ran.append(("run_command", {"command": command}))
            return f"ran {command}"

        @tool
        def pay(amount: int, to: str = "shop") -> str:
            """Pay someone."""
            self.ran.append(("pay", {"amount": amount, "to": to}))
            return f"paid {amount}"

        @tool
        def note(text: str) -> str:
            """Write a note."""
            self.ran.append(("note", {"text": text}))
            return "noted"

        def big(arguments):
            self.checks += 1
            return arguments["amount"] > 100

        self.run_command = ApprovalRequiredTool(run_command)
        self.pay = ApprovalRequiredTool(pay, when=big)
        self.note = note
        self.tools = [self.run_command, self.pay, self.note]

    def agent(self, *bodies, policy=None, **kwargs):
        for body in bodies:
            self.server.queue(body)
        client = OpenAIChatClient(model="m", base_url=self.server.base_url,
                                  api_key="sk-test", max_retries=0)
        agent = ChatClientAgent(client, tools=self.tools, policy=policy, **kwargs)
        self.clock = [NOW]
        agent.chat_client.clock = lambda: self.clock[0]
        return agent


@pytest.fixture
def bench(server):
    return Bench(server)


def calls(*items, text=""):
    return chat_stream(text=text, tool_calls=[(i, n, json.dumps(a)) for i, n, a in items])


def results(updates):
    return [u.result for u in updates if isinstance(u, ToolResult)]


def requests_of(updates):
    return [u for u in updates if isinstance(u, ToolApprovalRequest)]


def why(session, call_id):
    """Why the pending call ``call_id`` needs approval, as recorded at the gate."""
    return next(r.why for r in session.approvals.pending if r.call_id == call_id)


def resume(agent, session, *responses, policy=None):
    options = AgentRunOptions(policy=policy).with_tool_approval_responses(responses)
    return list(agent.run([], session, options))


def audit(session):
    return [(r.call_id, r.outcome, r.rule, r.layer) for r in session.audit]


# -- R18: conditional approval ------------------------------------------------------------------

def test_r18_a_small_payment_runs_without_asking_and_the_audit_says_why(bench):
    agent = bench.agent(calls(("c1", "pay", {"amount": 5})), chat_stream(text="paid"))
    session = AgentSession()
    updates = list(agent.run("pay 5", session))
    assert updates[-1].finish_reason is FinishReason.STOP
    assert bench.ran == [("pay", {"amount": 5, "to": "shop"})]
    [record] = session.audit
    assert (record.call_id, record.outcome, record.rule) == ("c1", "allowed", None)
    assert record.why == "its approval check let it run without asking"


def test_r18_a_large_payment_asks_once_and_the_resume_never_asks_again(bench):
    agent = bench.agent(calls(("c1", "pay", {"amount": 500})), chat_stream(text="paid"))
    session = AgentSession()
    [request] = requests_of(agent.run("pay 500", session))
    assert why(session, "c1") == "its approval check asked"
    assert bench.checks == 1 and bench.ran == []
    # reloaded in "another process": the recorded answer is used, not a new one
    session = AgentSession.from_dict(json.loads(json.dumps(session.to_dict())))
    resume(agent, session, request.approve("ann"))
    assert bench.checks == 1
    assert bench.ran == [("pay", {"amount": 500, "to": "shop"})]
    assert [(r.outcome, r.why) for r in session.audit] == [("approved",
                                                           "its approval check asked")]


def test_r18_a_predicate_that_returns_a_reason_shows_it(bench):
    bench.pay.when = lambda arguments: "more than the daily limit" if arguments["amount"] > 9 else False
    agent = bench.agent(calls(("c1", "pay", {"amount": 50})))
    session = AgentSession()
    list(agent.run("pay", session))
    assert why(session, "c1") == "more than the daily limit"


@pytest.mark.parametrize("predicate, arguments, reason", [
    (lambda a: 1 / 0, {"amount": 5},
     "the approval check failed (ZeroDivisionError: division by zero), so it asks"),
    (lambda a: a["missing"], {"amount": 5},
     "the approval check failed (KeyError: 'missing'), so it asks"),
])  # arguments that are not a JSON object never ask: test_malformed_arguments.py (R18)
def test_r18_fail_closed(bench, predicate, arguments, reason):
    bench.pay.when = predicate
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    agent = bench.agent(chat_stream(tool_calls=[("c1", "pay", text)]))
    session = AgentSession()
    updates = list(agent.run("pay", session))
    assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    assert [r.call_id for r in requests_of(updates)] == ["c1"]
    assert why(session, "c1") == reason and bench.ran == []


# -- R19: policies at the gate -------------------------------------------------------------------

POLICY = ApprovalPolicy(deny=["run_command(rm -rf *)", "run_command(curl * | sh)"],
                        allow=["run_command(git status)", "run_command(ls *)"],
                        name="project")


def test_r19_deny_runs_nothing_asks_nothing_and_tells_the_model_the_rule(bench):
    agent = bench.agent(calls(("c1", "run_command", {"command": "git status && rm -rf /"})),
                        chat_stream(text="I will not."), policy=POLICY)
    session = AgentSession()
    updates = list(agent.run("clean", session))
    assert requests_of(updates) == [] and bench.ran == []
    assert results(updates) == ["Rejected: denied by policy (run_command(rm -rf *))"]
    assert updates[-1].finish_reason is FinishReason.STOP
    assert audit(session) == [("c1", "denied", "run_command(rm -rf *)", "project")]
    assert bench.server.requests[-1].json["messages"][-1]["content"] == \
        "Rejected: denied by policy (run_command(rm -rf *))"


def test_r19_allow_lets_an_approval_tool_run_and_the_audit_names_each_rule(bench):
    agent = bench.agent(calls(("c1", "run_command", {"command": "git status && ls -la"})),
                        chat_stream(text="clean"), policy=POLICY)
    session = AgentSession()
    updates = list(agent.run("status", session))
    assert requests_of(updates) == []
    assert bench.ran == [("run_command", {"command": "git status && ls -la"})]
    [record] = session.audit
    assert (record.outcome, record.rule, record.layer) == (
        "allowed", "run_command(git status); run_command(ls *)", "project")
    assert record.digest == arguments_digest(json.dumps({"command": "git status && ls -la"}))


def test_r19_a_command_no_rule_allows_asks_and_says_why(bench):
    agent = bench.agent(calls(("c1", "run_command", {"command": "git status && make"})),
                        policy=POLICY)
    session = AgentSession()
    assert [r.call_id for r in requests_of(agent.run("build", session))] == ["c1"]
    assert why(session, "c1") == "run_command always asks; no allow rule matches `make`"
    assert session.audit == []  # no rule decided; the human will


def test_r19_ask_makes_a_plain_tool_ask_and_both_decisions_are_audited(bench):
    policy = ApprovalPolicy(ask=["note"], name="run")
    agent = bench.agent(calls(("c1", "note", {"text": "hi"})), chat_stream(text="ok"))
    session = AgentSession()
    [request] = requests_of(agent.run("note", session, AgentRunOptions(policy=policy)))
    assert why(session, "c1") == "policy: ask rule note (run)"
    resume(agent, session, request.approve("ann"))
    assert bench.ran == [("note", {"text": "hi"})]
    assert audit(session) == [("c1", "asked", "note", "run"), ("c1", "approved", "note", "run")]


def test_r19_a_denied_sibling_of_a_pause_is_answered_with_its_rule_on_resume(bench):
    agent = bench.agent(calls(("c1", "run_command", {"command": "make"}),
                              ("c2", "run_command", {"command": "rm -rf /"}),
                              ("c3", "note", {"text": "x"}),
                              ("c4", "run_command", {"command": "git status"})),
                        chat_stream(text="ok"), chat_stream(text="ok"), policy=POLICY)
    session = AgentSession()
    [request] = requests_of(agent.run("go", session))
    assert request.call_id == "c1"
    # the allowed sibling does not run at a pause (R5), so no "allowed" is audited
    assert audit(session) == [("c2", "denied", "run_command(rm -rf *)", "project")]
    with pytest.raises(ApprovalError, match=r"c2 were denied by policy \(run_command\(rm -rf \*\)\)"):
        resume(agent, session, request.approve(), ToolApprovalResponse("c2", True))
    assert bench.ran == []
    # the policy is gone on resume: the denial was decided at the gate and stays
    agent.chat_client.policies = []
    updates = resume(agent, session, request.approve())
    assert results(updates) == ["ran make", "Rejected: denied by policy (run_command(rm -rf *))",
                                "Rejected: User denied", "Rejected: User denied"]
    assert bench.ran == [("run_command", {"command": "make"})]


def test_r19_a_grant_lets_later_calls_run_and_survives_save_and_load(bench, tmp_path):
    agent = bench.agent(calls(("c1", "run_command", {"command": "npm test"})),
                        chat_stream(text="ok"),
                        calls(("c2", "run_command", {"command": "npm test"})),
                        chat_stream(text="ok again"),
                        calls(("c3", "run_command", {"command": "npm test && rm x"})))
    session = AgentSession()
    [request] = requests_of(agent.run("test", session))
    resume(agent, session, request.approve("ann", grant="run_command(npm test)"))
    [grant] = session.grants
    assert (grant.rule, grant.granted_at, grant.expires_at, grant.approver, grant.call_id) == (
        "run_command(npm test)", NOW, None, "ann", "c1")
    assert session.audit[-1].grant == "run_command(npm test)"
    session.save(tmp_path / "s.json")
    session = AgentSession.load(tmp_path / "s.json")
    updates = list(agent.run("again", session))
    assert requests_of(updates) == []
    assert bench.ran == [("run_command", {"command": "npm test"})] * 2
    assert audit(session)[-1] == ("c2", "allowed", "run_command(npm test)", "session")
    [request] = requests_of(agent.run("once more", session))  # "&& rm x" is not granted
    assert request.call_id == "c3"


def test_r19_a_grant_expires(bench):
    agent = bench.agent(calls(("c1", "run_command", {"command": "npm test"})),
                        chat_stream(text="ok"),
                        calls(("c2", "run_command", {"command": "npm test"})), chat_stream(text="ok"),
                        calls(("c3", "run_command", {"command": "npm test"})))
    session = AgentSession()
    [request] = requests_of(agent.run("test", session))
    resume(agent, session, request.approve(grant="run_command(npm test)", grant_ttl=60))
    assert session.grants[0].expires_at == NOW + 60
    bench.clock[0] = NOW + 60
    assert requests_of(agent.run("again", session)) == []
    bench.clock[0] = NOW + 61
    [request] = requests_of(agent.run("later", session))
    assert request.call_id == "c3"


@pytest.mark.parametrize("grant, message", [
    ("run_comand(npm test)", "there is no tool 'run_comand'"),
    ("note(hi)", "note declares no subject argument"),
    ("run_command(npm test && rm x)", "write one rule per command"),
])
def test_r19_a_grant_that_can_never_match_is_refused_before_anything_runs(bench, grant, message):
    agent = bench.agent(calls(("c1", "run_command", {"command": "npm test"})))
    session = AgentSession()
    [request] = requests_of(agent.run("test", session))
    before = session.to_dict()
    with pytest.raises(ApprovalError, match=message):
        resume(agent, session, request.approve(grant=grant))
    assert bench.ran == [] and session.to_dict() == before


def test_r19_a_grant_never_widens_a_deny(bench):
    agent = bench.agent(calls(("c1", "run_command", {"command": "rm -rf build"})),
                        chat_stream(text="ok"), policy=POLICY)
    session = AgentSession()
    session.approvals.grant("run_command", NOW)
    updates = list(agent.run("clean", session))
    assert results(updates) == ["Rejected: denied by policy (run_command(rm -rf *))"]


def test_r19_a_policy_that_can_never_match_is_refused_when_it_meets_the_tools(bench):
    with pytest.raises(PolicyError, match="there is no tool 'run_comand'"):
        bench.agent(policy=ApprovalPolicy(allow=["run_comand(ls)"]))
    agent = bench.agent()
    with pytest.raises(PolicyError, match="note declares no subject"):
        list(agent.run("hi", AgentSession(),
                       AgentRunOptions(policy=ApprovalPolicy(deny=["note(x)"]))))
    assert bench.server.requests == []


# -- R20: edit on approve ------------------------------------------------------------------------

def test_r20_the_edited_call_runs_and_the_history_shows_what_ran(bench):
    original = {"command": "rm -rf build"}
    agent = bench.agent(calls(("c1", "run_command", original)), chat_stream(text="ok"))
    session = AgentSession()
    [request] = requests_of(agent.run("clean", session))
    updates = resume(agent, session, request.approve("ann", arguments={"command": "rm -r build"}))
    assert bench.ran == [("run_command", {"command": "rm -r build"})]
    assert results(updates) == ["ran rm -r build"]
    stored = session.messages[1].tool_calls[0].arguments
    assert stored == canonical_json({"command": "rm -r build"}) == '{"command":"rm -r build"}'
    sent = bench.server.requests[-1].json["messages"][1]["tool_calls"][0]["function"]
    assert sent["arguments"] == stored
    [record] = session.audit
    assert record.digest == request.digest == arguments_digest(json.dumps(original))
    assert record.edited_digest == arguments_digest(stored)


def test_r20_the_digest_still_binds_to_the_arguments_shown(bench):
    agent = bench.agent(calls(("c1", "run_command", {"command": "rm -rf build"})))
    session = AgentSession()
    [request] = requests_of(agent.run("clean", session))
    wrong = arguments_digest('{"command": "rm -r build"}')
    with pytest.raises(ApprovalError, match="does not match"):
        resume(agent, session, ToolApprovalResponse("c1", True, digest=wrong,
                                                    arguments={"command": "rm -r build"}))
    assert bench.ran == []


@pytest.mark.parametrize("edited, message", [
    ({}, "lacks the required 'amount'"),
    ({"amount": "five"}, r"arguments.amount must be integer"),
    ({"amount": True}, r"arguments.amount must be integer"),
    ({"amount": 5, "to": None}, r"arguments.to must be string"),
])
def test_r20_an_edit_that_breaks_the_schema_is_refused_before_anything_runs(bench, edited,
                                                                            message):
    agent = bench.agent(calls(("c1", "pay", {"amount": 500})))
    session = AgentSession()
    [request] = requests_of(agent.run("pay", session))
    before = session.to_dict()
    with pytest.raises(ApprovalError, match=message):
        resume(agent, session, request.approve(arguments=edited))
    assert bench.ran == [] and session.to_dict() == before


def test_r20_an_edit_a_policy_denies_is_refused(bench):
    agent = bench.agent(calls(("c1", "run_command", {"command": "make"})), policy=POLICY)
    session = AgentSession()
    [request] = requests_of(agent.run("build", session))
    with pytest.raises(ApprovalError, match=r"denied by policy \(run_command\(rm -rf \*\), project\)"):
        resume(agent, session, request.approve(arguments={"command": "make; rm -rf /"}))
    assert bench.ran == []


def test_r20_edits_and_grants_go_with_an_approval_only():
    with pytest.raises(TypeError, match="go with an approval"):
        ToolApprovalResponse("c1", False, arguments={"command": "ls"})
    with pytest.raises(TypeError, match="must be a dict"):
        ToolApprovalResponse("c1", True, arguments='{"command": "ls"}')
    with pytest.raises(ValueError, match="positive number of seconds"):
        ToolApprovalRequest("c1", "x", {}, "").approve(grant="x", grant_ttl=0)
