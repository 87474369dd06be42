"""OpenTelemetry traces of a run (agentflow.tracing, the ``[otel]`` extra), read back
from the SDK's in-memory exporter for each shape of the conformance cases: approve,
reject, edit, siblings, max rounds, a failed model call, and a pause answered through a
store (the inbox's way). The spans are the GenAI semantic conventions' (v1.36.0 names by
default, v1.41.0's under OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental).

The replay server serves the model over real HTTP on 127.0.0.1 (the `make_agent`
fixture). The test that exports over OTLP/HTTP to a receiver, across a worker in another
process, is in tests/test_tracing_export.py (make test-slow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalRequiredTool, ToolApprovalRequest,
                       ToolApprovalResponse, tool)
from agentflow import tracing
from agentflow.stores import SQLiteStore
from agentflow.testing.exchange import Reply
from agentflow.testing.replay import chat_stream


def _sdk():
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("opentelemetry-sdk is required under CI=true (make test installs "
                        "the [otel-export] extra)")
        pytest.skip("opentelemetry-sdk is not installed (pip install "
                    "'agentflow-approvals[otel-export]'; make test installs it)")
    return TracerProvider, SimpleSpanProcessor, InMemorySpanExporter


@pytest.fixture
def spans():
    """The finished spans, read as ``spans()``: agentflow traces through an in-memory
    exporter for the test, then goes back to the global provider."""
    TracerProvider, SimpleSpanProcessor, InMemorySpanExporter = _sdk()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    yield exporter.get_finished_spans
    tracing.use_tracer_provider(None)


PAY = '{"amount": 5}'


@tool
def pay(amount: int):
    """Pay someone."""
    return f"paid {amount}"


@tool
def look(what: str = ""):
    """Look something up."""
    return "seen"


def payer(make_agent, *bodies, **kwargs):
    return make_agent(list(bodies), tools=[ApprovalRequiredTool(pay), look], name="payer",
                      **kwargs)


def requests_of(updates):
    return [u for u in updates if isinstance(u, ToolApprovalRequest)]


def resume(agent, session, *responses):
    options = AgentRunOptions().with_tool_approval_responses(list(responses))
    return list(agent.run([], session, options))


def named(finished, prefix):
    return [s for s in finished if s.name.startswith(prefix)]


def one(finished, name):
    found = [s for s in finished if s.name == name]
    assert len(found) == 1, [s.name for s in finished]
    return found[0]


def answers(span):
    return [dict(e.attributes) for e in span.events if e.name == "agentflow.approval.answer"]


def test_a_paused_call_approved_later_is_one_trace_from_model_to_answer_to_tool(make_agent,
                                                                              spans):
    agent, server = payer(make_agent, chat_stream(tool_calls=[("c1", "pay", PAY)]),
                          chat_stream(text="done"))
    session = AgentSession()
    request, = requests_of(agent.run("pay 5", session))
    # the pause goes to storage and back, as it does between processes (SPEC R15)
    session = AgentSession.from_dict(json.loads(json.dumps(session.to_dict())))
    resume(agent, session, request.approve(approver="dana"))

    finished = spans()
    paused, resumed = named(finished, "invoke_agent payer")
    assert {s.context.trace_id for s in finished} == {paused.context.trace_id}
    assert resumed.parent.span_id == paused.context.span_id  # the trace goes on
    assert paused.attributes["gen_ai.response.finish_reasons"] == ("awaiting_approval",)
    pause, = [e for e in paused.events if e.name == "agentflow.approval.pause"]
    assert pause.attributes["agentflow.approval.call_ids"] == ("c1",)
    assert pause.attributes["agentflow.approval.request_id"] == request.request_id
    assert pause.attributes["agentflow.approval.why"] == ("pay always asks",)

    first_chat, second_chat = named(finished, "chat test-model")
    assert first_chat.parent.span_id == paused.context.span_id
    assert first_chat.attributes["gen_ai.operation.name"] == "chat"
    assert first_chat.attributes["gen_ai.request.model"] == "test-model"
    assert first_chat.attributes["gen_ai.response.model"] == "replay-model"  # the chunks'
    assert first_chat.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert first_chat.attributes["gen_ai.usage.input_tokens"] == 10  # chat_stream's usage
    assert first_chat.attributes["gen_ai.usage.output_tokens"] == 5
    assert first_chat.attributes["server.address"] == "127.0.0.1"
    assert first_chat.attributes["server.port"] == int(server.base_url.rsplit(":", 1)[1]
                                                       .split("/")[0])
    assert second_chat.parent.span_id == resumed.context.span_id

    executed = one(finished, "execute_tool pay")
    assert executed.parent.span_id == resumed.context.span_id
    assert executed.attributes["gen_ai.tool.call.id"] == "c1"
    assert executed.attributes["agentflow.tool.result_size"] == len("paid 5")
    assert executed.start_time >= resumed.start_time
    answer, = answers(resumed)
    assert answer["agentflow.approval.outcome"] == "approved"
    assert answer["agentflow.approval.approver"] == "dana"
    assert answer["agentflow.approval.edited"] is False
    assert answer["agentflow.approval.waited_seconds"] >= 0


def test_a_rejected_call_runs_no_tool_span_and_says_rejected(make_agent, spans):
    agent, _ = payer(make_agent, chat_stream(tool_calls=[("c1", "pay", PAY)]),
                     chat_stream(text="ok"))
    session = AgentSession()
    request, = requests_of(agent.run("pay 5", session))
    resume(agent, session, request.reject("not today"))
    finished = spans()
    assert named(finished, "execute_tool") == []
    _, resumed = named(finished, "invoke_agent")
    answer, = answers(resumed)
    assert answer["agentflow.approval.outcome"] == "rejected"


def test_an_edited_answer_is_marked_edited(make_agent, spans):
    agent, _ = payer(make_agent, chat_stream(tool_calls=[("c1", "pay", PAY)]),
                     chat_stream(text="ok"))
    session = AgentSession()
    request, = requests_of(agent.run("pay 5", session))
    resume(agent, session, request.approve(arguments={"amount": 3}))
    finished = spans()
    assert one(finished, "execute_tool pay").attributes["agentflow.tool.result_size"] == \
        len("paid 3")
    answer, = answers(named(finished, "invoke_agent")[1])
    assert answer["agentflow.approval.edited"] is True


def test_a_sibling_is_answered_unanswered_and_never_runs(make_agent, spans):
    """SPEC R5: the sibling needed no approval, gets no answer, and runs no span."""
    agent, _ = payer(make_agent, chat_stream(tool_calls=[("c1", "pay", PAY),
                                                         ("c2", "look", "{}")]),
                     chat_stream(text="ok"))
    session = AgentSession()
    request, = requests_of(agent.run("pay and look", session))
    resume(agent, session, request.approve())
    finished = spans()
    assert [s.name for s in named(finished, "execute_tool")] == ["execute_tool pay"]
    pause, = [e for e in named(finished, "invoke_agent")[0].events
              if e.name == "agentflow.approval.pause"]
    assert pause.attributes["agentflow.approval.call_ids"] == ("c1",)  # only the asked one


def test_max_rounds_ends_the_run_span_with_its_reason(make_agent, spans):
    """SPEC R8: two rounds of calls that need no approval, max_rounds=2."""
    agent, _ = payer(make_agent, chat_stream(tool_calls=[("c1", "look", "{}")]),
                     chat_stream(tool_calls=[("c2", "look", "{}")]),
                     options=AgentRunOptions(max_rounds=2))
    list(agent.run("look twice", AgentSession()))
    finished = spans()
    run = one(finished, "invoke_agent payer")
    assert run.attributes["gen_ai.response.finish_reasons"] == ("max_rounds",)
    assert run.attributes["gen_ai.usage.input_tokens"] == 20  # summed over both calls
    assert len(named(finished, "chat")) == 2 and len(named(finished, "execute_tool")) == 2


def test_a_failed_model_call_is_an_error_on_its_chat_span_and_the_run(make_agent, spans):
    agent, _ = payer(make_agent, Reply(json.dumps({"error": {"message": "overloaded",
                                                              "type": "server_error"}}),
                                       status=500, content_type="application/json"))
    with pytest.raises(Exception) as raised:
        list(agent.run("hi", AgentSession()))
    finished = spans()
    chat, run = one(finished, "chat test-model"), one(finished, "invoke_agent payer")
    for span in (chat, run):
        assert span.attributes["error.type"] == type(raised.value).__name__
        assert span.status.status_code.name == "ERROR"
        assert "sk-test" not in (span.status.description or "")


def test_a_failing_tool_sets_error_type(make_agent, spans):
    @tool
    def boom():
        """Fails."""
        raise ValueError("nope")

    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "boom", "{}")]),
                           chat_stream(text="ok")], tools=[boom])
    list(agent.run("go", AgentSession()))
    span = one(spans(), "execute_tool boom")
    assert span.attributes["error.type"] == "ValueError"  # from "Error: ValueError: nope"


def test_no_content_is_recorded_unless_the_person_opts_in(make_agent, spans, monkeypatch):
    def secret_result():
        agent, _ = make_agent([chat_stream(tool_calls=[("c1", "leak", '{"x": "hello"}')]),
                               chat_stream(text="ok")], tools=[leak])
        list(agent.run("go", AgentSession()))

    @tool
    def leak(x: str):
        """Echoes the key."""
        return f"{x} sk-test-0123456789 {os.environ['AGENTFLOW_TEST_TOKEN']}"

    monkeypatch.setenv("AGENTFLOW_TEST_TOKEN", "tok-abcdefghijklmnop")
    monkeypatch.delenv(tracing.CAPTURE_CONTENT, raising=False)
    secret_result()
    plain = one(spans(), "execute_tool leak")
    assert "gen_ai.tool.call.arguments" not in plain.attributes
    assert "gen_ai.tool.call.result" not in plain.attributes

    monkeypatch.setenv(tracing.CAPTURE_CONTENT, "true")
    secret_result()
    captured = named(spans(), "execute_tool leak")[-1]
    assert captured.attributes["gen_ai.tool.call.arguments"] == '{"x": "hello"}'
    result = captured.attributes["gen_ai.tool.call.result"]
    assert result.startswith("hello ")
    assert "tok-abcdefghijklmnop" not in result  # a secret-named variable's value (R27)


def test_the_api_key_never_reaches_captured_content(make_agent, spans, monkeypatch):
    """SPEC R26: every run of six or more of the key's characters is masked."""
    monkeypatch.setenv(tracing.CAPTURE_CONTENT, "true")

    @tool
    def echo(x: str):
        """Echoes the key."""
        return f"the key is {x}-secret-value"

    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "echo", '{"x": "sk-test"}')]),
                           chat_stream(text="ok")], tools=[echo])
    agent.chat_client.inner._api_key = "sk-test-secret-value"
    list(agent.run("go", AgentSession()))
    span = one(spans(), "execute_tool echo")
    assert span.attributes["gen_ai.tool.call.result"] == "the key is ***"
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"x": "***"}'


def test_latest_conventions_on_opt_in(make_agent, spans, monkeypatch):
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http,gen_ai_latest_experimental")
    agent, _ = payer(make_agent, chat_stream(text="hi"))
    list(agent.run("hi", AgentSession()))
    chat = one(spans(), "chat test-model")
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert "gen_ai.system" not in chat.attributes
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http")
    list(payer(make_agent, chat_stream(text="hi"))[0].run("hi", AgentSession()))
    chat = named(spans(), "chat test-model")[-1]
    assert chat.attributes["gen_ai.system"] == "openai"


def test_an_answer_recorded_in_a_store_joins_the_trace_and_the_resume_links_it(
        make_agent, spans, tmp_path):
    """The inbox's way (SPEC R22): the pause in one process, the answer recorded in the
    store (an ``approve_tool`` span in the pause's trace), the worker's resume linked
    to that answer and a child of the paused run."""
    agent, _ = payer(make_agent, chat_stream(tool_calls=[("c1", "pay", PAY)]),
                     chat_stream(text="done"))
    store = SQLiteStore(tmp_path / "s.db")
    with store.open("s1") as session:
        list(agent.run("pay 5", session))
    entry, = store.pending()
    store.answer("s1", [ToolApprovalResponse("c1", True, digest=entry.digest,
                                             approver="dana")])
    with store.open("s1") as session:
        responses = [a.response() for a in session.approvals.answers]
        resume(agent, session, *responses)

    finished = spans()
    paused, resumed = named(finished, "invoke_agent payer")
    approve = one(finished, "approve_tool pay")
    assert {s.context.trace_id for s in finished} == {paused.context.trace_id}
    assert approve.parent.span_id == paused.context.span_id
    assert approve.attributes["agentflow.approval.approver"] == "dana"
    assert resumed.parent.span_id == paused.context.span_id
    assert approve.context.span_id in {l.context.span_id for l in resumed.links}
    assert paused.attributes["gen_ai.conversation.id"] == "s1"


def test_nothing_is_recorded_without_a_provider_and_import_pulls_in_no_opentelemetry():
    """Without a tracer provider (the API's default) start() gives None: the loop pays
    one None check per step; ``import agentflow`` imports no OpenTelemetry module."""
    code = ("import sys, agentflow; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
    code = ("from agentflow import tracing, AgentSession; "
            "from types import SimpleNamespace as N; "
            "print(tracing.start('a', AgentSession(), N(inner=None)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "None"
