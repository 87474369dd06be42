"""The conformance cases of the ``agentflow`` suite (R18–R20): agentflow passes them (with the
rest, in test_conformance.py), and variants broken in the way each rule guards against
fail at least one of them. Only these cases run here, so this stays fast."""

import contextlib
import dataclasses

import pytest

import agentflow.function_invoking as loop
import agentflow.gate as gate
import agentflow.policy as policy
from conformance.runner import InProcess, load_cases, run_all

CASES = [case for case in load_cases() if case.get("suite") == "agentflow"]


def failures():
    return {o.case_id: o.detail for o in run_all(InProcess, CASES) if not o.passed}


def test_the_suite_covers_r18_to_r20():
    assert {rule for case in CASES for rule in case["rules"]} >= {"R18", "R19", "R20"}


@contextlib.contextmanager
def predicate_ignored(monkeypatch):
    """A tool that may need approval always asks (R18 not implemented)."""
    original = gate.gate_verdict

    def always_ask(tool, arguments, layers):
        verdict = original(tool, arguments, layers)
        if verdict.action == "allow" and verdict.rule is None and tool.requires_approval():
            return gate.GateVerdict(gate.Decision.ASK, "always")
        return verdict

    monkeypatch.setattr(gate, "gate_verdict", always_ask)
    yield


@contextlib.contextmanager
def allow_as_a_prefix_of_the_line(monkeypatch):
    """An allow pattern matched as a prefix of the whole command line: the classic
    ``git status && …`` bypass (R19)."""
    original = policy.decide

    def prefix(layers, tool, arguments):
        found, note = original(layers, tool, arguments)
        command = (arguments or {}).get(getattr(tool, "subject", None) or "", "")
        if found is None and isinstance(command, str):
            for layer in layers:
                for rule in layer.rules("allow"):
                    if rule.tool == tool.name and command.startswith(rule.pattern or ""):
                        return policy.Verdict("allow", (str(rule),), (layer.name,)), ""
        return found, note

    monkeypatch.setattr(policy, "decide", prefix)
    yield


@contextlib.contextmanager
def edits_ignored(monkeypatch):
    """Edited arguments in an approval are dropped: the model's call runs (R20)."""
    original = loop.FunctionInvokingChatClient.run

    def run(self, messages, options=None, *args, **kwargs):
        if options is not None:
            options = options.with_tool_approval_responses(
                [dataclasses.replace(r, arguments=None)
                 for r in options.tool_approval_responses])
        return original(self, messages, options, *args, **kwargs)

    monkeypatch.setattr(loop.FunctionInvokingChatClient, "run", run)
    yield


def test_agentflow_passes_the_suite():
    assert failures() == {}


@pytest.mark.parametrize("sabotage, caught_by", [
    (predicate_ignored, "201-r18-predicate-lets-it-run"),
    (allow_as_a_prefix_of_the_line, "206-r19-allow-is-not-a-prefix-of-a-chain"),
    (edits_ignored, "208-r20-edit-on-approve"),
])
def test_each_broken_variant_is_caught(monkeypatch, sabotage, caught_by):
    with sabotage(monkeypatch):
        failed = failures()
    assert caught_by in failed, f"{sabotage.__name__} passed {caught_by}"
