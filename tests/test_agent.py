"""ChatClientAgent, context providers and sessions (SPEC R1, R10, R15)."""

import json
import subprocess
import sys
import textwrap

import pytest

from agentflow import (
    AgentRunOptions, AgentSession, ApprovalRequiredTool, ChatClientAgent, ChatMessage,
    Context, ContextProvider, Finish, FinishReason, OpenAIChatClient,
    tool)
from agentflow.errors import SessionError
from agentflow.types import ToolCall
from agentflow.testing.replay import ReplayServer, chat_stream

import helpers_fork


class Notes(ContextProvider):
    def __init__(self, instructions=None, messages=(), log=None):
        self.instructions, self.messages, self.log = instructions, list(messages), log

    def on_invoking(self, messages, session):
        self.log.append(("invoking", self.instructions, [m.content for m in messages]))
        return Context(self.instructions, self.messages)

    def on_invoked(self, request_messages, response_messages, session):
        self.log.append(("invoked", self.instructions, [m.role.value for m in response_messages]))


def test_r1_prompt_is_instructions_then_providers_then_history_then_input(make_agent):
    log = []
    providers = [Notes("Today is Monday.", [ChatMessage.user("(memory) likes tea")], log),
                 Notes("Answer briefly.", log=log)]
    agent, server = make_agent([chat_stream(text="Hello.")], instructions="You are helpful.",
                               context_providers=providers)
    session = AgentSession(messages=[ChatMessage.user("earlier"), ChatMessage.assistant("noted")])
    list(agent.run("hi", session))
    sent = server.requests[0].json["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("system", "You are helpful."),
        ("system", "Today is Monday."), ("user", "(memory) likes tea"),
        ("system", "Answer briefly."),
        ("user", "earlier"), ("assistant", "noted"),
        ("user", "hi")]
    # providers ran in order, before the model call, and saw the run's new messages after it
    assert log == [("invoking", "Today is Monday.", ["hi"]), ("invoking", "Answer briefly.", ["hi"]),
                   ("invoked", "Today is Monday.", ["assistant"]),
                   ("invoked", "Answer briefly.", ["assistant"])]
    # R1: additions are per run, not stored
    assert [m.content for m in session.messages] == ["earlier", "noted", "hi", "Hello."]


def test_r1_no_instructions_means_no_system_message(make_agent):
    agent, server = make_agent([chat_stream(text="ok")])
    list(agent.run([ChatMessage.user("a"), ChatMessage.user("b")]))
    assert [m["role"] for m in server.requests[0].json["messages"]] == ["user", "user"]


def test_r1_tools_are_offered_in_openai_function_format(make_agent):
    @tool
    def weather(city: str, days: int = 1) -> str:
        """Weather forecast for a city."""
        return "sunny"

    agent, server = make_agent([chat_stream(text="ok")], tools=[weather])
    list(agent.run("hi"))
    assert server.requests[0].json["tools"] == [{"type": "function", "function": {
        "name": "weather", "description": "Weather forecast for a city.",
        "parameters": {"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string"}, "days": {"type": "integer", "default": 1}},
            "additionalProperties": False}}}]


def test_r10_input_is_stored_with_the_first_model_turn(make_agent):
    agent, _ = make_agent([chat_stream(text="ok")])
    session = AgentSession()
    seen = []
    for update in agent.run("hello", session):
        seen.append(len(session.messages))
    assert seen[0] == 0          # nothing stored while the first turn streams
    assert seen[-1] == 2         # the Finish comes after input + reply are stored
    assert [m.role.value for m in session.messages] == ["user", "assistant"]


def test_agent_options_are_the_default_of_every_run(make_agent):
    agent, server = make_agent([chat_stream(text="ok"), chat_stream(text="ok")],
                               options=AgentRunOptions(temperature=0.2, model="other-model"))
    list(agent.run("a"))
    list(agent.run("b", options=AgentRunOptions()))
    assert server.requests[0].json["temperature"] == 0.2
    assert server.requests[0].json["model"] == "other-model"
    assert "temperature" not in server.requests[1].json
    assert server.requests[1].json["model"] == "test-model"


# -- R15: sessions are data -----------------------------------------------------------------

def paused_session():
    return AgentSession(messages=[
        ChatMessage.user("free space"),
        ChatMessage.assistant("Cleaning.", [ToolCall("c1", "echo", '{"text": "x"}'),
                                            ToolCall("c2", "run_command", '{"command": "rm -rf /"}')]),
    ], state={"memory": ["likes tea"]})


def test_r15_to_dict_from_dict_round_trip_through_json():
    session = paused_session()
    data = json.loads(json.dumps(session.to_dict()))
    assert data["schema_version"] == 3
    assert data["messages"][1]["tool_calls"][1] == {
        "id": "c2", "type": "function",
        "function": {"name": "run_command", "arguments": '{"command": "rm -rf /"}'}}
    again = AgentSession.from_dict(data)
    assert again == session
    assert [c.id for c in again.pending_tool_calls] == ["c1", "c2"]


def test_r15_save_and_load(tmp_path):
    session = paused_session()
    path = tmp_path / "session.json"
    session.save(path)
    assert AgentSession.load(path) == session
    assert [p.name for p in tmp_path.iterdir()] == ["session.json"]  # no temporary left


def test_r15_unknown_schema_version_is_refused():
    with pytest.raises(SessionError, match="schema_version"):
        AgentSession.from_dict({"schema_version": 99, "messages": []})
    with pytest.raises(SessionError, match="schema_version"):
        AgentSession.from_dict({"messages": []})


def test_r15_a_paused_run_resumes_in_another_process(tmp_path):
    """Process 1 pauses and saves; process 2 loads, approves and finishes."""
    with ReplayServer([chat_stream(tool_calls=[("c1", "run_command", '{"command": "ls"}')])]) as s1:
        agent = ChatClientAgent(OpenAIChatClient(base_url=s1.base_url, api_key="k"),
                                tools=[ApprovalRequiredTool(run_command)])
        session = AgentSession()
        updates = list(agent.run("list files", session))
        assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
        session.save(tmp_path / "s.json")

    with ReplayServer([chat_stream(text="Here they are.")]) as s2:
        script = textwrap.dedent(f"""
            import json
            from agentflow import *
            @tool
            def run_command(command: str) -> str:
                "Run a command."
                return "a.txt b.txt"
            session = AgentSession.load({str(tmp_path / "s.json")!r})
            agent = ChatClientAgent(OpenAIChatClient(base_url={s2.base_url!r}, api_key="k"),
                                    tools=[ApprovalRequiredTool(run_command)])
            options = AgentRunOptions().with_tool_approval_responses(
                [ToolApprovalResponse("c1", True)])
            updates = list(agent.run([], session, options))
            session.save({str(tmp_path / "s.json")!r})
            print(updates[-1].finish_reason.value)
        """)
        out = helpers_fork.run([sys.executable, "-c", script], capture_output=True,
                               text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "stop"
        sent = s2.requests[0].json["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
        assert sent[-1] == {"role": "tool", "content": "a.txt b.txt", "tool_call_id": "c1"}
    final = AgentSession.load(tmp_path / "s.json")
    assert [m.role.value for m in final.messages] == ["user", "assistant", "tool", "assistant"]
    assert final.messages[-1].content == "Here they are."


@tool
def run_command(command: str) -> str:
    """Run a command."""
    return "should not run in this process"


def test_messages_given_as_a_string_a_message_or_a_list(make_agent):
    agent, server = make_agent([chat_stream(text="1"), chat_stream(text="2"), chat_stream(text="3")])
    list(agent.run("plain"))
    list(agent.run(ChatMessage.user("one")))
    list(agent.run([ChatMessage.system("extra"), ChatMessage.user("two")]))
    assert [r.json["messages"] for r in server.requests] == [
        [{"role": "user", "content": "plain"}], [{"role": "user", "content": "one"}],
        [{"role": "system", "content": "extra"}, {"role": "user", "content": "two"}]]


def test_finish_is_always_the_last_update(make_agent):
    agent, _ = make_agent([chat_stream(text="hi")])
    updates = list(agent.run("x"))
    assert isinstance(updates[-1], Finish)
    assert all(not isinstance(u, Finish) for u in updates[:-1])
