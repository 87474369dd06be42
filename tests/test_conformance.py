"""The conformance suite: agentflow passes it in-process and through the adapter
protocol, and deliberately broken variants of agentflow fail it (conformance/README.md)."""

import contextlib
import sys

import pytest

import agentflow.function_invoking as loop
from agentflow import ChatClientAgent, Finish, FinishReason, ToolApprovalRequest, ToolCallEnd
from agentflow.types import ToolApprovalResponse
from conformance.runner import Adapter, InProcess, load_cases, run_all

CASES = load_cases()


def failures(make_driver=InProcess):
    return {o.case_id: o.detail for o in run_all(make_driver, CASES) if not o.passed}


def test_there_are_enough_cases_covering_every_rule():
    assert len(CASES) >= 30
    covered = {rule for case in CASES for rule in case["rules"]}
    assert {f"R{n}" for n in range(1, 16)} <= covered
    assert sum(case["id"].split("-")[1] == "shape" for case in CASES) >= 8
    assert len({case["id"] for case in CASES}) == len(CASES)


def test_agentflow_passes_every_case_in_process():
    assert failures() == {}


def test_the_reference_adapter_passes_every_case_through_the_protocol():
    command = f"{sys.executable} -m conformance.agentflow_adapter"
    assert failures(lambda: Adapter(command)) == {}


def test_the_runner_prints_a_table_and_the_closing_line(capsys):
    from conformance.runner import main
    assert main(["--case", "001-approve", "--case", "007-mixed-batch-sibling"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("pass  001-approve")
    assert lines[-1] == "2 passed, 0 failed"


# -- broken variants: each must be caught by at least one case -----------------------------

@contextlib.contextmanager
def rejection_without_reason(monkeypatch):
    monkeypatch.setattr(loop, "rejection_text", lambda reason: "Rejected: User denied")
    yield


@contextlib.contextmanager
def siblings_executed(monkeypatch):
    """Every pending call without a response is executed on resume (breaks R5)."""
    original = loop._check_responses

    def approve_the_rest(responses, pending, answered, started=()):
        by_id = original(responses, pending, answered, started)
        for call in pending:
            by_id.setdefault(call.id, ToolApprovalResponse(call.id, True))
        return by_id

    monkeypatch.setattr(loop, "_check_responses", approve_the_rest)
    yield


@contextlib.contextmanager
def tool_calls_finish_leaked(monkeypatch):
    """The provider's Finish(TOOL_CALLS) reaches the caller after each tool turn (R9)."""
    original = ChatClientAgent.run

    def leaky(self, *args, **kwargs):
        ended = False
        for update in original(self, *args, **kwargs):
            if isinstance(update, ToolCallEnd):
                ended = True
            elif ended:
                ended = False
                yield Finish(FinishReason.TOOL_CALLS)
            yield update

    monkeypatch.setattr(ChatClientAgent, "run", leaky)
    yield


@contextlib.contextmanager
def results_before_the_assistant_message(monkeypatch):
    """Resume puts the tool results in front of the assistant tool-call message."""
    original = loop.pending_calls

    def misplaced(messages):
        insert_at, pending, answered = original(messages)
        if pending:
            insert_at -= 1 + len(answered)
        return insert_at, pending, answered

    monkeypatch.setattr(loop, "pending_calls", misplaced)
    yield


@contextlib.contextmanager
def approval_executed_twice(monkeypatch):
    original = loop.FunctionInvokingChatClient._invoke

    def twice(self, run, call):
        tool = self._tool(call.name)
        if tool is not None and tool.requires_approval():
            original(self, run, call)
        return original(self, run, call)

    monkeypatch.setattr(loop.FunctionInvokingChatClient, "_invoke", twice)
    yield


@pytest.mark.parametrize("sabotage", [rejection_without_reason, siblings_executed,
                                      tool_calls_finish_leaked,
                                      results_before_the_assistant_message,
                                      approval_executed_twice])
def test_each_broken_variant_is_caught(monkeypatch, sabotage):
    with sabotage(monkeypatch):
        failed = failures()
    assert failed, f"{sabotage.__name__} passed every case"
