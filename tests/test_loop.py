"""The approval flow, rule by rule (SPEC §4–§5), over real HTTP to a replay server."""

import hashlib
import json

import pytest

from agentflow import (
    AgentRunOptions, AgentSession, ApprovalError, ApprovalRequiredTool, ChatMessage,
    Finish, FinishReason, FunctionInvokingChatClient, MessageRole, ProviderError,
    TextDelta, ToolApprovalRequest, ToolApprovalResponse, ToolCallEnd, ToolResult, tool)
from agentflow.errors import LoopStateError
from agentflow.function_invoking import LoopEvent, LoopState
from agentflow.journal import Journal
from agentflow.types import Usage
from agentflow.function_invoking import LoopMachine, TRANSITIONS
from agentflow.testing.replay import Reply, chat_stream


class Counter:
    """Tools that record every execution, so a test can assert how often each ran."""

    def __init__(self):
        self.calls = []

        @tool
        def echo(text: str) -> str:
            """Repeat the text."""
            self.calls.append(("echo", text))
            return f"echo: {text}"

        @tool
        def run_command(command: str) -> str:
            """Run a shell command."""
            self.calls.append(("run_command", command))
            return f"ran {command}"

        @tool
        def delete_file(path: str) -> str:
            """Delete a file."""
            self.calls.append(("delete_file", path))
            return f"deleted {path}"

        @tool
        def broken(x: int = 0) -> str:
            """Always fails."""
            self.calls.append(("broken", x))
            raise ValueError(f"boom {x}")

        self.echo = echo
        self.run_command = ApprovalRequiredTool(run_command)
        self.delete_file = ApprovalRequiredTool(delete_file)
        self.broken = broken
        self.all = [self.echo, self.run_command, self.delete_file, self.broken]

    def count(self, name):
        return sum(1 for n, _ in self.calls if n == name)


def collect(updates):
    return list(updates)


def finish_of(updates):
    assert isinstance(updates[-1], Finish)
    assert sum(isinstance(u, Finish) for u in updates) == 1
    return updates[-1]


def text_of(updates):
    return "".join(u.text for u in updates if isinstance(u, TextDelta))


def results_of(updates):
    return [(u.call_id, u.result) for u in updates if isinstance(u, ToolResult)]


def roles(messages):
    return [m["role"] if isinstance(m, dict) else m.role.value for m in messages]


def args(**kw):
    return json.dumps(kw)


PAUSE = chat_stream(text="I will clean up.", tool_calls=[
    ("call_1", "echo", args(text="cleaning")),
    ("call_2", "run_command", args(command="rm -rf /"))])
FINAL = chat_stream(text="All done.")


def resume(agent, session, responses, messages=()):
    options = AgentRunOptions().with_tool_approval_responses(responses)
    return collect(agent.run(list(messages), session, options))


# -- R2: the tool loop -----------------------------------------------------------------

def test_r2_tools_without_approval_run_in_order_and_the_model_is_called_again(make_agent):
    tools = Counter()
    agent, server = make_agent([
        chat_stream(tool_calls=[("a", "echo", args(text="one")), ("b", "echo", args(text="two"))]),
        FINAL], tools=tools.all)
    session = AgentSession()
    updates = collect(agent.run("go", session))
    assert tools.calls == [("echo", "one"), ("echo", "two")]
    assert results_of(updates) == [("a", "echo: one"), ("b", "echo: two")]
    assert finish_of(updates).finish_reason is FinishReason.STOP
    assert text_of(updates) == "All done."
    second = server.requests[1].json["messages"]
    assert roles(second) == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in second[1]["tool_calls"]] == ["a", "b"]
    assert [(m["tool_call_id"], m["content"]) for m in second[2:]] == [
        ("a", "echo: one"), ("b", "echo: two")]
    assert roles(session.messages) == ["user", "assistant", "tool", "tool", "assistant"]
    assert session.messages[-1].content == "All done."


def test_r2_usage_is_summed_over_every_model_call_of_the_run(make_agent):
    tools = Counter()
    agent, _ = make_agent([chat_stream(tool_calls=[("a", "echo", args(text="x"))], usage=(10, 5)),
                           chat_stream(text="ok", usage=(30, 7))], tools=tools.all)
    finish = finish_of(collect(agent.run("go")))
    assert finish.usage == Usage(40, 12, 52)


# -- R3: the approval gate ---------------------------------------------------------------

def test_r3_gate_emits_requests_persists_the_turn_and_runs_nothing(make_agent):
    tools = Counter()
    agent, server = make_agent([PAUSE], tools=tools.all)
    session = AgentSession()
    updates = collect(agent.run("free some disk space", session))
    requests = [u for u in updates if isinstance(u, ToolApprovalRequest)]
    # the digest binds the decision to the canonical arguments (issue 5)
    digest = hashlib.sha256(b'{"command":"rm -rf /"}').hexdigest()
    # R24: the request carries its pause's id, the one its record keeps
    pause = session.approvals.pending[0].request_id
    assert len(pause) == 32 and int(pause, 16) >= 0
    assert requests == [ToolApprovalRequest("call_2", "run_command", {"command": "rm -rf /"},
                                            "Run a shell command.", digest, pause)]
    assert finish_of(updates).finish_reason is FinishReason.AWAITING_APPROVAL
    assert finish_of(updates).usage == Usage(10, 5, 15)
    assert tools.calls == []  # not even the sibling echo ran
    assert len(server.requests) == 1
    assert roles(session.messages) == ["user", "assistant"]
    paused = session.messages[-1]
    assert paused.content == "I will clean up."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in paused.tool_calls] == [
        ("call_1", "echo", {"text": "cleaning"}), ("call_2", "run_command", {"command": "rm -rf /"})]
    assert [c.id for c in session.pending_tool_calls] == ["call_1", "call_2"]
    # the stream's tool-call updates reached the caller before the requests (R9)
    ends = [i for i, u in enumerate(updates) if isinstance(u, ToolCallEnd)]
    first_request = next(i for i, u in enumerate(updates) if isinstance(u, ToolApprovalRequest))
    assert len(ends) == 2 and max(ends) < first_request


def test_r3_one_request_per_gated_call_in_call_order(make_agent):
    tools = Counter()
    agent, _ = make_agent([chat_stream(tool_calls=[
        ("c1", "delete_file", args(path="/a")), ("c2", "echo", args(text="x")),
        ("c3", "run_command", args(command="ls"))])], tools=tools.all)
    updates = collect(agent.run("go"))
    assert [(u.call_id, u.name) for u in updates if isinstance(u, ToolApprovalRequest)] == [
        ("c1", "delete_file"), ("c3", "run_command")]


def test_r18_invalid_json_is_never_put_to_a_person(make_agent):
    """It cannot run, so nobody is asked (SPEC R18, fourth batch): R14's result at once."""
    tools = Counter()
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "run_command", '{"command": "ls"')]),
                           FINAL], tools=tools.all)
    updates = collect(agent.run("go"))
    assert not [u for u in updates if isinstance(u, ToolApprovalRequest)]
    assert results_of(updates)[0][1].startswith("Error: arguments are not valid JSON: ")
    assert tools.calls == []


# -- R4, R5, R7: resume ------------------------------------------------------------------

def test_r4_approve_executes_the_call_and_the_conversation_goes_on(make_agent):
    tools = Counter()
    agent, server = make_agent([PAUSE, FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("free some disk space", session))
    updates = resume(agent, session, [ToolApprovalResponse("call_2", True)])
    assert tools.calls == [("run_command", "rm -rf /")]
    assert results_of(updates) == [("call_1", "Rejected: User denied"),
                                   ("call_2", "ran rm -rf /")]
    assert text_of(updates) == "All done."
    assert finish_of(updates).finish_reason is FinishReason.STOP
    sent = server.requests[1].json["messages"]
    assert roles(sent) == ["user", "assistant", "tool", "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [
        ("call_1", "Rejected: User denied"), ("call_2", "ran rm -rf /")]
    assert roles(session.messages) == ["user", "assistant", "tool", "tool", "assistant"]


@pytest.mark.parametrize("reason, expected", [
    ("too dangerous", "Rejected: too dangerous"),   # R7 with a reason
    (None, "Rejected: User denied"),                # R7 default
    ("   ", "Rejected: User denied"),               # R7: blank counts as none
    ("", "Rejected: User denied"),
])
def test_r4_r7_rejection_text(make_agent, reason, expected):
    tools = Counter()
    agent, server = make_agent([PAUSE, FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    updates = resume(agent, session, [ToolApprovalResponse("call_2", False, reason)])
    assert tools.calls == []
    assert results_of(updates)[1] == ("call_2", expected)
    assert server.requests[1].json["messages"][-1] == {
        "role": "tool", "content": expected, "tool_call_id": "call_2"}


def test_r5_sibling_that_needed_no_approval_is_not_executed_on_resume(make_agent):
    tools = Counter()
    agent, _ = make_agent([PAUSE, FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    updates = resume(agent, session, [ToolApprovalResponse("call_2", True)])
    assert tools.count("echo") == 0 and tools.count("run_command") == 1
    assert ("call_1", "Rejected: User denied") in results_of(updates)


def test_r4_two_gated_calls_one_approved_one_rejected(make_agent):
    tools = Counter()
    agent, _ = make_agent([chat_stream(tool_calls=[
        ("c1", "run_command", args(command="df -h")), ("c2", "delete_file", args(path="/etc"))]),
        FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    updates = resume(agent, session, [ToolApprovalResponse("c2", False, "no"),
                                      ToolApprovalResponse("c1", True)])
    assert tools.calls == [("run_command", "df -h")]
    assert results_of(updates) == [("c1", "ran df -h"), ("c2", "Rejected: no")]  # call order


def test_r4_a_gated_call_without_response_is_rejected(make_agent):
    tools = Counter()
    agent, _ = make_agent([chat_stream(tool_calls=[
        ("c1", "run_command", args(command="df -h")), ("c2", "delete_file", args(path="/etc"))]),
        FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    updates = resume(agent, session, [ToolApprovalResponse("c1", True)])
    assert tools.calls == [("run_command", "df -h")]
    assert results_of(updates) == [("c1", "ran df -h"), ("c2", "Rejected: User denied")]


def test_r4_chained_pauses(make_agent):
    tools = Counter()
    agent, server = make_agent([
        chat_stream(tool_calls=[("c1", "run_command", args(command="du"))]),
        chat_stream(text="Now deleting.", tool_calls=[("c2", "delete_file", args(path="/tmp/x"))]),
        FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    second = resume(agent, session, [ToolApprovalResponse("c1", True)])
    assert finish_of(second).finish_reason is FinishReason.AWAITING_APPROVAL
    assert [u.call_id for u in second if isinstance(u, ToolApprovalRequest)] == ["c2"]
    third = resume(agent, session, [ToolApprovalResponse("c2", False, "keep it")])
    assert finish_of(third).finish_reason is FinishReason.STOP
    assert tools.calls == [("run_command", "du")]
    assert roles(session.messages) == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert session.messages[4].content == "Rejected: keep it"


# -- R6: new input with approvals ----------------------------------------------------------

def test_r6_new_input_goes_after_the_tool_results(make_agent):
    tools = Counter()
    agent, server = make_agent([PAUSE, FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    resume(agent, session, [ToolApprovalResponse("call_2", False)],
           messages=[ChatMessage.user("actually, only clear the cache")])
    sent = server.requests[1].json["messages"]
    assert roles(sent) == ["user", "assistant", "tool", "tool", "user"]
    assert sent[-1]["content"] == "actually, only clear the cache"
    assert roles(session.messages) == ["user", "assistant", "tool", "tool", "user", "assistant"]


# -- R8: max rounds --------------------------------------------------------------------------

def test_r8_max_rounds_ends_the_run_with_a_valid_history(make_agent):
    tools = Counter()
    looping = [chat_stream(tool_calls=[(f"c{i}", "echo", args(text=str(i)))]) for i in range(5)]
    agent, server = make_agent(looping, tools=tools.all)
    session = AgentSession()
    updates = collect(agent.run("go", session, AgentRunOptions(max_rounds=2)))
    assert finish_of(updates).finish_reason is FinishReason.MAX_ROUNDS
    assert len(server.requests) == 2
    assert tools.count("echo") == 2
    assert roles(session.messages) == ["user", "assistant", "tool", "assistant", "tool"]
    assert session.pending_tool_calls == []


def test_r8_default_is_40_rounds(make_agent):
    tools = Counter()
    looping = [chat_stream(tool_calls=[(f"c{i}", "echo", args(text="x"))]) for i in range(41)]
    agent, server = make_agent(looping, tools=tools.all)
    updates = collect(agent.run("go"))
    assert finish_of(updates).finish_reason is FinishReason.MAX_ROUNDS
    assert len(server.requests) == 40


def test_r8_resume_counts_one_round(make_agent):
    tools = Counter()
    agent, server = make_agent([PAUSE, FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    options = AgentRunOptions(max_rounds=1).with_tool_approval_responses(
        [ToolApprovalResponse("call_2", True)])
    updates = collect(agent.run([], session, options))
    assert finish_of(updates).finish_reason is FinishReason.MAX_ROUNDS
    assert tools.calls == [("run_command", "rm -rf /")]
    assert len(server.requests) == 1
    assert session.pending_tool_calls == []


def test_r8_max_rounds_must_be_positive():
    with pytest.raises(ValueError, match="max_rounds"):
        AgentRunOptions(max_rounds=0)


# -- R9: what the caller sees ------------------------------------------------------------------

def test_r9_internal_tool_calls_finish_never_reaches_the_caller(make_agent):
    tools = Counter()
    agent, _ = make_agent([chat_stream(tool_calls=[("a", "echo", args(text="1"))]),
                           chat_stream(tool_calls=[("b", "echo", args(text="2"))]),
                           FINAL], tools=tools.all)
    updates = collect(agent.run("go"))
    finishes = [u for u in updates if isinstance(u, Finish)]
    assert finishes == [updates[-1]]
    assert finishes[0].finish_reason is FinishReason.STOP


# -- R10: persisting ---------------------------------------------------------------------------

def test_r10_a_failed_first_model_call_leaves_the_session_unchanged(make_agent):
    agent, _ = make_agent([Reply('{"error": {"message": "overloaded", "code": "busy"}}',
                                 status=500, content_type="application/json")])
    session = AgentSession(messages=[ChatMessage.user("earlier"), ChatMessage.assistant("hi")])
    before = session.to_dict()
    with pytest.raises(ProviderError, match="overloaded"):
        collect(agent.run("new question", session))
    assert session.to_dict() == before


def test_r10_a_stream_cut_mid_turn_persists_nothing_of_that_turn(make_agent):
    tools = Counter()
    cut = chat_stream(text="partial answer", done=False).split(b'data: {"id": "chatcmpl-replay", '
                                                               b'"object": "chat.completion.chunk",'
                                                               b' "created": 0, "model": '
                                                               b'"replay-model", "choices": '
                                                               b'[{"index": 0, "delta": {}, '
                                                               b'"finish_reason": "stop"')[0]
    agent, _ = make_agent([cut], tools=tools.all)
    session = AgentSession()
    with pytest.raises(ProviderError):
        collect(agent.run("go", session))
    assert session.messages == []


def test_r10_a_later_failure_keeps_executed_results_and_nothing_runs_twice(make_agent):
    tools = Counter()
    agent, server = make_agent([
        chat_stream(tool_calls=[("a", "echo", args(text="once"))]),
        Reply('{"error": {"message": "try later"}}', status=503,
              content_type="application/json"),
        FINAL], tools=tools.all)
    session = AgentSession()
    with pytest.raises(ProviderError):
        collect(agent.run("go", session))
    assert roles(session.messages) == ["user", "assistant", "tool"]
    updates = collect(agent.run([], session))
    assert finish_of(updates).finish_reason is FinishReason.STOP
    assert tools.count("echo") == 1
    assert roles(server.requests[2].json["messages"]) == ["user", "assistant", "tool"]
    assert roles(session.messages) == ["user", "assistant", "tool", "assistant"]


# -- R11, R12: responses that match nothing; no double execution ---------------------------------

@pytest.mark.parametrize("responses, bad", [
    ([ToolApprovalResponse("call_9", True)], ["call_9"]),                          # unknown
    ([ToolApprovalResponse("call_2", True), ToolApprovalResponse("call_2", False)], ["call_2"]),
    ([ToolApprovalResponse("call_2", True), ToolApprovalResponse("zzz", True)], ["zzz"]),
])
def test_r11_responses_that_match_no_pending_call_raise_before_anything_runs(
        make_agent, responses, bad):
    tools = Counter()
    agent, server = make_agent([PAUSE, FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    before = session.to_dict()
    with pytest.raises(ApprovalError) as info:
        resume(agent, session, responses)
    assert info.value.call_ids == bad
    for call_id in bad:
        assert call_id in str(info.value)
    assert tools.calls == []
    assert session.to_dict() == before
    assert len(server.requests) == 1


def test_r11_r12_an_already_answered_call_is_refused_and_not_run_again(make_agent):
    tools = Counter()
    agent, server = make_agent([PAUSE, FINAL, FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    resume(agent, session, [ToolApprovalResponse("call_2", True)])
    before = session.to_dict()
    with pytest.raises(ApprovalError, match="already have a result"):
        resume(agent, session, [ToolApprovalResponse("call_2", True)])
    assert tools.count("run_command") == 1
    assert session.to_dict() == before
    assert len(server.requests) == 2


def test_r11_responses_to_a_session_that_is_not_paused(make_agent):
    agent, server = make_agent([FINAL])
    with pytest.raises(ApprovalError, match="no pending call"):
        resume(agent, AgentSession(), [ToolApprovalResponse("call_1", True)])
    assert server.requests == []


def test_r12_a_call_with_a_result_is_never_executed_again(make_agent):
    """A history where one of two calls was already answered (a run that stopped between
    two results): a response naming both ids is refused, since c1 has a result; naming
    only the unanswered one runs only it."""
    tools = Counter()
    agent, _ = make_agent([FINAL], tools=tools.all)
    c1 = ToolCall_("c1", "run_command", args(command="a"))
    c2 = ToolCall_("c2", "run_command", args(command="b"))
    session = AgentSession(messages=[ChatMessage.user("go"), ChatMessage.assistant(None, [c1, c2]),
                                     ChatMessage.tool("ran a", "c1")])
    session.approvals.issue(c2, now=0)
    with pytest.raises(ApprovalError):
        resume(agent, session, [ToolApprovalResponse("c1", True), ToolApprovalResponse("c2", True)])
    assert tools.calls == []
    updates = resume(agent, session, [ToolApprovalResponse("c2", True)])
    assert tools.calls == [("run_command", "b")]
    assert results_of(updates) == [("c2", "ran b")]
    assert roles(session.messages) == ["user", "assistant", "tool", "tool", "assistant"]


def ToolCall_(call_id, name, arguments):
    from agentflow.types import ToolCall
    return ToolCall(call_id, name, arguments)


# -- R13: tool failures --------------------------------------------------------------------------

def test_r13_an_exception_becomes_an_error_result_and_the_loop_goes_on(make_agent):
    tools = Counter()
    agent, server = make_agent([chat_stream(tool_calls=[("a", "broken", args(x=1))]), FINAL],
                               tools=tools.all)
    updates = collect(agent.run("go"))
    assert results_of(updates) == [("a", "Error: ValueError: boom 1")]
    assert finish_of(updates).finish_reason is FinishReason.STOP
    assert server.requests[1].json["messages"][-1]["content"] == "Error: ValueError: boom 1"


def test_r13_three_failing_rounds_then_one_last_call_without_tools(make_agent):
    tools = Counter()
    failing = [chat_stream(tool_calls=[(f"c{i}", "broken", args(x=i))]) for i in range(3)]
    agent, server = make_agent(failing + [chat_stream(text="I give up.")], tools=tools.all)
    updates = collect(agent.run("go"))
    assert tools.count("broken") == 3
    assert len(server.requests) == 4
    assert [r.json.get("tool_choice") for r in server.requests] == [None, None, None, "none"]
    assert finish_of(updates).finish_reason is FinishReason.STOP
    assert text_of(updates) == "I give up."


def test_r13_a_success_resets_the_failure_count(make_agent):
    tools = Counter()
    bodies = [chat_stream(tool_calls=[("c0", "broken", args())]),
              chat_stream(tool_calls=[("c1", "broken", args())]),
              chat_stream(tool_calls=[("c2", "echo", args(text="ok"))]),
              chat_stream(tool_calls=[("c3", "broken", args())]),
              chat_stream(tool_calls=[("c4", "broken", args())]),
              FINAL]
    agent, server = make_agent(bodies, tools=tools.all)
    collect(agent.run("go"))
    assert [r.json.get("tool_choice") for r in server.requests] == [None] * 6


def test_r13_if_the_last_call_still_calls_tools_nothing_runs(make_agent):
    tools = Counter()
    failing = [chat_stream(tool_calls=[(f"c{i}", "broken", args())]) for i in range(4)]
    agent, _ = make_agent(failing, tools=tools.all)
    session = AgentSession()
    updates = collect(agent.run("go", session))
    assert finish_of(updates).finish_reason is FinishReason.STOP
    assert tools.count("broken") == 3
    assert session.messages[-1].role is MessageRole.ASSISTANT
    assert session.messages[-1].tool_calls == []


# -- R14: bad calls from the model ------------------------------------------------------------------

def test_r14_unknown_tool_and_invalid_json_are_reported_not_executed(make_agent):
    tools = Counter()
    agent, _ = make_agent([chat_stream(tool_calls=[
        ("a", "format_disk", args(drive="C")), ("b", "echo", '{"text": "unterminated'),
        ("c", "echo", "[1, 2]")]), FINAL], tools=tools.all)
    updates = collect(agent.run("go"))
    results = dict(results_of(updates))
    assert results["a"] == "Error: unknown tool 'format_disk'"
    assert results["b"].startswith("Error: arguments are not valid JSON: ")
    assert results["c"].startswith("Error: arguments are not valid JSON: ")
    assert tools.calls == []
    assert finish_of(updates).finish_reason is FinishReason.STOP


def test_r14_calls_cut_off_by_length_never_run(make_agent):
    tools = Counter()
    agent, server = make_agent([chat_stream(text="Let me", finish_reason="length", tool_calls=[
        ("a", "echo", args(text="x"))])], tools=tools.all)
    session = AgentSession()
    updates = collect(agent.run("go", session))
    assert finish_of(updates).finish_reason is FinishReason.LENGTH
    assert tools.calls == []
    assert len(server.requests) == 1
    assert session.messages[-1].to_openai() == {"role": "assistant", "content": "Let me"}


def test_content_filter_is_passed_through(make_agent):
    agent, _ = make_agent([chat_stream(text="I can't", finish_reason="content_filter")])
    assert finish_of(collect(agent.run("go"))).finish_reason is FinishReason.CONTENT_FILTER


# -- the state machine ---------------------------------------------------------------------------------

def test_loop_state_traces_a_pause_and_a_resume(make_agent):
    tools = Counter()
    trace = []
    agent, _ = make_agent([PAUSE, FINAL], tools=tools.all)
    agent.chat_client.on_transition = lambda old, event, new: trace.append((old, event, new))
    session = AgentSession()
    collect(agent.run("go", session))
    assert trace == [
        (LoopState.START, LoopEvent.NOTHING_PENDING, LoopState.CALLING_MODEL),
        (LoopState.CALLING_MODEL, LoopEvent.TOOLS_CALLED, LoopState.AT_GATE),
        (LoopState.AT_GATE, LoopEvent.APPROVAL_NEEDED, LoopState.AWAITING_APPROVAL)]
    trace.clear()
    resume(agent, session, [ToolApprovalResponse("call_2", True)])
    assert [new for _, _, new in trace] == [LoopState.RESUMING, LoopState.CALLING_MODEL,
                                            LoopState.DONE]


def test_loop_state_refuses_illegal_transitions():
    machine = LoopMachine()
    with pytest.raises(LoopStateError, match="illegal transition"):
        machine.fire(LoopEvent.APPROVAL_NEEDED)
    machine.fire(LoopEvent.NOTHING_PENDING)
    machine.fire(LoopEvent.TURN_ENDED)
    for event in LoopEvent:  # DONE is terminal
        with pytest.raises(LoopStateError):
            machine.fire(event)


def test_loop_state_terminal_states_have_no_way_out():
    sources = {state for state, _ in TRANSITIONS}
    assert not sources & {LoopState.DONE, LoopState.AWAITING_APPROVAL, LoopState.FAILED}


def test_a_failed_run_ends_in_the_failed_state(make_agent):
    trace = []
    agent, _ = make_agent([Reply("nope", status=500, content_type="text/plain")])
    agent.chat_client.on_transition = lambda old, event, new: trace.append(new)
    with pytest.raises(ProviderError):
        collect(agent.run("go"))
    assert trace == [LoopState.CALLING_MODEL, LoopState.FAILED]


def test_the_decorator_can_be_used_without_an_agent(make_agent):
    tools = Counter()
    agent, server = make_agent([chat_stream(tool_calls=[("a", "echo", args(text="hi"))]), FINAL])
    client = FunctionInvokingChatClient(agent.chat_client.inner, tools.all)
    journal = Journal()
    updates = collect(client.run([ChatMessage.user("go")], journal=journal))
    assert finish_of(updates).finish_reason is FinishReason.STOP
    assert roles(journal.messages) == ["assistant", "tool", "assistant"]


# -- issue 10: the machine drives the run ------------------------------------------------------

def test_round_limit_after_a_resume_ends_without_entering_calling_model(make_agent):
    """R8: a resume that uses up the last round ends from RESUMING; the trace (and so
    the Mermaid diagram) shows no model call that did not happen."""
    tools = Counter()
    agent, server = make_agent([PAUSE, FINAL], tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    trace = []
    agent.chat_client.on_transition = lambda old, event, new: trace.append((old, event, new))
    options = AgentRunOptions(max_rounds=1).with_tool_approval_responses(
        [ToolApprovalResponse("call_2", True)])
    assert finish_of(collect(agent.run([], session, options))).finish_reason is FinishReason.MAX_ROUNDS
    assert trace == [(LoopState.START, LoopEvent.CALLS_PENDING, LoopState.RESUMING),
                     (LoopState.RESUMING, LoopEvent.ROUND_LIMIT, LoopState.DONE)]
    assert len(server.requests) == 1


def test_round_limit_after_tools_ends_from_invoking_tools(make_agent):
    """R8: the limit is an edge out of INVOKING_TOOLS, taken before a model call."""
    tools = Counter()
    looping = [chat_stream(tool_calls=[(f"c{i}", "echo", args(text=str(i)))]) for i in range(3)]
    agent, server = make_agent(looping, tools=tools.all)
    trace = []
    agent.chat_client.on_transition = lambda old, event, new: trace.append(new)
    collect(agent.run("go", AgentSession(), AgentRunOptions(max_rounds=2)))
    assert trace.count(LoopState.CALLING_MODEL) == len(server.requests) == 2
    assert trace[-1] is LoopState.DONE


def test_every_state_change_is_in_the_table():
    """The table is the only place a state changes: every pair the machine can take is
    listed, the final states have no way out, and every other state can fail."""
    finals = {LoopState.DONE, LoopState.AWAITING_APPROVAL, LoopState.FAILED}
    for state in LoopState:
        moves = {event for (source, event) in TRANSITIONS if source is state}
        assert (not moves) == (state in finals), state
        if state not in finals:
            assert TRANSITIONS[(state, LoopEvent.ERROR)] is LoopState.FAILED
    reachable = {LoopState.START} | set(TRANSITIONS.values())
    assert reachable == set(LoopState)


def test_closing_the_generator_early_is_not_a_failure(make_agent):
    """A caller that stops reading (``close()``) ends the run where it is; it is not
    recorded as FAILED, and nothing of the unfinished turn is stored (R10)."""
    agent, _ = make_agent([chat_stream(text="a long answer in many words")])
    trace = []
    agent.chat_client.on_transition = lambda old, event, new: trace.append(new)
    session = AgentSession()
    updates = agent.run("go", session)
    assert isinstance(next(updates), TextDelta)
    updates.close()
    assert trace == [LoopState.CALLING_MODEL]
    assert session.messages == []


def test_request_approve_and_reject_carry_the_id_and_the_digest(make_agent):
    """Issue 10: the safe way to answer is the default one: ``approve()`` and
    ``reject(reason)`` copy the call id and the digest the human saw."""
    tools = Counter()
    agent, _ = make_agent([PAUSE, FINAL], tools=tools.all)
    session = AgentSession()
    [request] = [u for u in collect(agent.run("go", session))
                 if isinstance(u, ToolApprovalRequest)]
    approve, reject = request.approve(approver="ana"), request.reject("too risky")
    assert (approve.call_id, approve.approved, approve.digest, approve.approver) == (
        "call_2", True, request.digest, "ana")
    assert (reject.call_id, reject.approved, reject.reason, reject.digest) == (
        "call_2", False, "too risky", request.digest)
    assert len(request.digest) == 64
    updates = resume(agent, session, [reject])
    assert results_of(updates) == [("call_1", "Rejected: User denied"),
                                   ("call_2", "Rejected: too risky")]
    assert session.audit[-1].outcome == "rejected"


def test_session_lists_its_approval_requests_as_the_run_emitted_them(make_agent):
    """``AgentSession.approval_requests(tools)``: after a save and load, the same
    requests (ids, arguments, digests), with the tools' descriptions."""
    tools = Counter()
    agent, _ = make_agent([PAUSE], tools=tools.all)
    session = AgentSession()
    emitted = [u for u in collect(agent.run("go", session)) if isinstance(u, ToolApprovalRequest)]
    loaded = AgentSession.from_dict(json.loads(json.dumps(session.to_dict())))
    assert loaded.approval_requests(agent.chat_client.tools) == emitted
    assert loaded.approval_requests()[0].description == ""
    assert AgentSession().approval_requests() == []


def test_r17_two_pending_calls_sharing_an_id_are_refused(make_agent):
    """R17: one approval never covers two calls. A paused turn (from imported history)
    with two calls sharing the id ``dup`` is refused before anything runs."""
    tools = Counter()
    agent, server = make_agent([FINAL], tools=tools.all)
    session = AgentSession.from_dict({"schema_version": 2, "messages": [
        {"role": "user", "content": "pay"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "dup", "type": "function",
             "function": {"name": "run_command", "arguments": '{"command": "pay 10"}'}},
            {"id": "dup", "type": "function",
             "function": {"name": "run_command", "arguments": '{"command": "pay 9999"}'}}]}]})
    before = session.to_dict()
    with pytest.raises(ApprovalError, match="dup"):
        resume(agent, session, [ToolApprovalResponse("dup", True)])
    assert tools.calls == [] and server.requests == []
    assert session.to_dict() == before


def test_after_a_failed_model_call_the_hint_says_the_call_already_ran(make_agent):
    """Issue 12, item 12: the approved tool ran, then the model call failed; sending the
    same answers again is refused with a hint that names ``run([], session)``."""
    tools = Counter()
    agent, _ = make_agent([PAUSE, Reply("down", status=400, content_type="text/plain"), FINAL],
                          tools=tools.all)
    session = AgentSession()
    collect(agent.run("go", session))
    answer = [ToolApprovalResponse("call_2", True)]
    with pytest.raises(ProviderError):
        resume(agent, session, answer)
    assert tools.calls == [("run_command", "rm -rf /")]
    with pytest.raises(ApprovalError, match=r"already have a result.*run\(\[\], session\)"):
        resume(agent, session, answer)
    assert finish_of(resume(agent, session, [])).finish_reason is FinishReason.STOP
    assert tools.calls == [("run_command", "rm -rf /")]
