"""The conformance suite: agentflow passes it in-process and through the adapter
protocol, and deliberately broken variants of agentflow fail it (conformance/README.md)."""

import contextlib
import dataclasses
import io
import json
import pathlib
import sys

import pytest

import agentflow.function_invoking as loop
import agentflow.gate as gate
from agentflow import ChatClientAgent, Finish, FinishReason, ToolCallEnd
from agentflow.types import ToolApprovalResponse
from conformance.runner import Adapter, InProcess, load_cases, run_all
from conformance.trace import play

CASES = load_cases()
REPO = pathlib.Path(__file__).resolve().parent.parent


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


FIRST_PROCESS_DIES = """
import os, sys
sys.path.insert(0, {repo!r})
log = {log!r}
first = not os.path.exists(log)
with open(log, "a") as handle:
    handle.write(f"{{os.getpid()}}\\n")
if first:  # answer the first setup, then die on the first run
    for line in sys.stdin:
        if '"setup"' not in line:
            sys.exit(1)
        print('{{"type": "ready", "implementation": "dies"}}', flush=True)
from conformance.agentflow_adapter import main
sys.exit(main())
"""


def test_one_adapter_process_serves_the_cases_and_a_failure_gets_a_fresh_one(tmp_path):
    """README, "Adapters": one process runs case after case (each begins with
    ``setup``); after a failed case the next case gets a new process."""
    log = tmp_path / "pids"
    script = tmp_path / "adapter.py"
    script.write_text(FIRST_PROCESS_DIES.format(repo=str(REPO), log=str(log)))
    cases = [case for case in CASES if case["id"] in
             ("001-approve", "007-mixed-batch-sibling", "015-tool-loop")]
    outcomes = run_all(lambda: Adapter(f"{sys.executable} {script}"), cases)
    assert [o.passed for o in outcomes] == [False, True, True]
    assert "the adapter exited (status 1) without answering" in outcomes[0].detail
    assert len(log.read_text().split()) == 2  # the dead one, then one for both others


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_the_mermaid_diagram_draws_exactly_the_model_calls_made(case):
    """``agentflow replay CASE --mermaid`` draws one ``POST /chat/completions`` per
    request the replay server received, which is one per model call of the case."""
    out = io.StringIO()
    played = play(case, mermaid=True, out=out)
    arrows = out.getvalue().count("FICC->>LLM: POST /chat/completions")
    made = sum(len(turn.get("model_calls", [])) for turn in case["turns"])
    assert (arrows, len(played.requests)) == (made, made)


def test_the_runner_prints_a_table_and_the_closing_line(capsys):
    from conformance.runner import main
    assert main(["--case", "001-approve", "--case", "007-mixed-batch-sibling"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("pass  001-approve")
    assert lines[-1] == "2 passed, 0 failed, 0 skipped"


# -- broken variants: each must be caught by at least one case -----------------------------

@contextlib.contextmanager
def rejection_without_reason(monkeypatch):
    monkeypatch.setattr(gate, "rejection_text", lambda reason: "Rejected: User denied")
    yield


@contextlib.contextmanager
def siblings_executed(monkeypatch):
    """Every pending call without a response is executed on resume (breaks R5)."""
    original = gate.check_responses

    def approve_the_rest(responses, pending, answered, started=()):
        by_id = original(responses, pending, answered, started)
        for call in pending:
            by_id.setdefault(call.id, ToolApprovalResponse(call.id, True))
        return by_id

    monkeypatch.setattr(gate, "check_responses", approve_the_rest)
    yield


@contextlib.contextmanager
def siblings_run_at_the_pause(monkeypatch):
    """At a pause the calls that need no approval run, their results kept nowhere; on
    resume they are rejected as R4 says (breaks R3 and R5: "no tool of that turn runs")."""
    original = loop.FunctionInvokingChatClient._gate

    def gate_and_run(self, run):
        event = yield from original(self, run)
        if event is loop.LoopEvent.APPROVAL_NEEDED:
            for call in run.calls:
                tool = self._tool(call.name)
                if tool is not None and not tool.requires_approval():
                    tool.invoke(json.loads(call.arguments or "{}"))
        return event

    steps = {**loop.FunctionInvokingChatClient._STEPS, loop.LoopState.AT_GATE: gate_and_run}
    monkeypatch.setattr(loop.FunctionInvokingChatClient, "_STEPS", steps)
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


@contextlib.contextmanager
def request_id_ignored(monkeypatch):
    """An answer is matched by call id and digest only: one given to another pause
    applies here (breaks R24)."""
    original = loop.FunctionInvokingChatClient.run

    def run(self, messages, options=None, *args, **kwargs):
        if options is not None:
            options = options.with_tool_approval_responses(
                [dataclasses.replace(r, request_id=None)
                 for r in options.tool_approval_responses])
        return original(self, messages, options, *args, **kwargs)

    monkeypatch.setattr(loop.FunctionInvokingChatClient, "run", run)
    yield


CAUGHT_BY = [  # each variant, and cases written for what it breaks
    (rejection_without_reason, ["002-reject-with-reason", "038-reason-kept-exactly"]),
    (siblings_executed, ["007-mixed-batch-sibling", "031-sibling-called-again",
                         "139-sibling-second-in-the-batch", "140-sibling-second-called-again"]),
    (siblings_run_at_the_pause, ["007-mixed-batch-sibling", "031-sibling-called-again",
                                 "139-sibling-second-in-the-batch",
                                 "140-sibling-second-called-again"]),
    (tool_calls_finish_leaked, ["001-approve", "015-tool-loop"]),
    (results_before_the_assistant_message, ["001-approve", "022-new-input-with-approvals"]),
    (approval_executed_twice, ["001-approve", "006-two-approvals-one-each"]),
    (request_id_ignored, ["043-answer-of-another-pause"]),
]


@pytest.mark.parametrize("sabotage, caught_by",
                         [pytest.param(*pair, id=pair[0].__name__) for pair in CAUGHT_BY])
def test_each_broken_variant_is_caught(monkeypatch, sabotage, caught_by):
    """Every named case fails against the variant (and passes against agentflow, as
    the in-process test shows); only those cases run, which keeps the suite fast."""
    by_id = {case["id"]: case for case in CASES}
    with sabotage(monkeypatch):
        outcomes = run_all(InProcess, [by_id[case_id] for case_id in caught_by])
    assert [o.case_id for o in outcomes if o.passed] == [], f"{sabotage.__name__} slipped through"


# -- neutrality (SPEC §8): declarations, derived fields, meaning-equal requests -------------

class Declaring(InProcess):
    """agentflow behind a ``ready`` that declares less than it supports."""
    ready: dict = {}

    def setup(self, message):
        return {**super().setup(message), **self.ready}


def test_a_case_outside_the_declared_suites_or_features_is_skipped_and_says_why(capsys):
    from conformance.report import report

    class CoreOnly(Declaring):
        ready = {"suites": ["core"], "cannot": {"unknown_call_ids": "answers are a map"}}
    by_id = {case["id"]: case for case in CASES}
    outcomes = run_all(CoreOnly, [by_id[i] for i in ("001-approve", "009-unknown-id",
                                                     "040-request-carries-digest")])
    assert [o.status for o in outcomes] == ["pass", "skip", "skip"]
    assert "cannot do: answers are a map" in outcomes[1].detail
    assert "suite 'agentflow' not declared" in outcomes[2].detail
    report(outcomes)
    out = capsys.readouterr().out
    assert "skip  009-unknown-id" in out and "suite agentflow: 0 passed, 0 failed, 1 skipped" in out
    assert out.splitlines()[-1] == "1 passed, 0 failed, 2 skipped"


def test_checks_on_declared_derived_fields_are_reported_apart():
    """An implementation without tool_call_end events or index passes when it declares
    them derived; the differences are listed apart. Undeclared, the same case fails."""
    class NoEndEvents(Declaring):
        ready = {"derives": ["tool_call_end", "index"]}

        def run(self, message):
            end, updates = super().run(message)
            return end, [{k: v for k, v in u.items() if k != "index"} for u in updates
                         if u["type"] not in ("tool_call_end", "tool_call_args")]
    case = next(case for case in CASES if case["id"] == "001-approve")
    [declared] = run_all(NoEndEvents, [case])
    assert declared.passed and "tool_call_end" in declared.derived[0]
    NoEndEvents.ready = {}
    [undeclared] = run_all(NoEndEvents, [case])
    assert undeclared.status == "fail"


def test_a_turn_that_failed_reports_its_error_before_the_call_count():
    class Fails(InProcess):
        def run(self, message):
            return {"type": "end", "error": {"kind": "ProviderError", "message": "boom"},
                    "history": [], "executions": []}, []
    [outcome] = run_all(Fails, CASES[:1])
    assert outcome.detail.startswith("turn 1: error: expected no error, got ProviderError: boom")
    assert "also: the implementation made 0 model call(s) so far, expected 1" in outcome.detail


@pytest.mark.parametrize("sent, expected, same", [
    ({"tool_choice": "auto"}, {}, True),
    ({}, {"tool_choice": None}, True),
    ({"tool_choice": "auto"}, {"tool_choice": "none"}, False),
    ({}, {"parallel_tool_calls": True}, True),
    ({"parallel_tool_calls": False}, {"parallel_tool_calls": True}, False),
])
def test_request_fields_compare_by_meaning(sent, expected, same):
    from types import SimpleNamespace
    from conformance.runner import API_KEY, check_request
    body = {"model": "conformance-model", "stream": True, "tools": [
        {"type": "function", "function": {"name": "echo"}}], **sent,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    request = SimpleNamespace(path="/v1/chat/completions", json=body,
                              headers={"authorization": f"Bearer {API_KEY}"})
    problem = check_request({"messages": [{"role": "user", "content": "hi"}],
                             "tools": ["echo"], **expected}, request)
    assert (problem is None) == same, problem


def test_every_chunk_of_every_body_has_the_full_envelope():
    import json as json_
    import re
    for folder in ("cases", "profiles"):
        for path in (REPO / "conformance" / folder).glob("*.sse"):
            text = path.read_bytes().decode("utf-8").lstrip("\ufeff")
            for line in re.split(r"\r\n|\r|\n", text):
                if line.startswith("data:") and '"choices"' in line:
                    chunk = json_.loads(line[5:])
                    assert {"id", "object", "created", "model"} <= set(chunk), path.name


# -- a second language: the protocol as conformance/README.md writes it --------------------

NODE_ADAPTER = REPO / "conformance" / "adapters" / "node" / "adapter.js"
NODE_PASSES = ["001-approve", "002-reject-with-reason", "004-reject-blank-reason",
               "006-two-approvals-one-each", "007-mixed-batch-sibling", "008-missing-response",
               "014-chained-pauses", "015-tool-loop", "016-tool-error",
               "022-new-input-with-approvals", "031-sibling-called-again", "037-echo-canonical-json", "110-shape-crlf-parallel"]
NODE_SKIPS = ["009-unknown-id", "010-duplicate-id", "028-session-round-trip",
              "029-paused-then-new-message", "040-request-carries-digest",
              "208-r20-edit-on-approve"]


def test_the_node_adapter_speaks_the_protocol_from_the_readme():
    """conformance/adapters/node/adapter.js, plain Node written from the README, passes
    the core cases it implements, and the cases it declares it cannot do are skipped."""
    import os
    import shutil
    node = shutil.which("node")
    if node is None:
        assert os.environ.get("CI") != "true", "node is needed under CI=true"
        pytest.skip("node is not installed")
    by_id = {case["id"]: case for case in CASES}
    outcomes = run_all(lambda: Adapter(f"{node} {NODE_ADAPTER}"),
                       [by_id[i] for i in NODE_PASSES + NODE_SKIPS])
    assert {o.case_id: o.detail for o in outcomes if o.status == "fail"} == {}
    assert [o.case_id for o in outcomes if o.status == "skip"] == NODE_SKIPS
    assert all(o.implementation.startswith("node-minimal") for o in outcomes)


# -- only the rule under test decides (SPEC §8) ---------------------------------------------

def test_updates_of_different_calls_may_come_in_either_order_but_approvals_in_call_order():
    """SPEC §8: no order between updates of different calls is demanded (all
    ``tool_call_end`` first); R3's call order of the approval requests still is."""
    from conformance.runner import check_turn
    start = [{"type": "tool_call_start", "call_id": c, "name": "run_command"} for c in "ab"]
    end = [{"type": "tool_call_end", "call_id": c} for c in "ab"]
    ask = [{"type": "approval_request", "call_id": c, "name": "run_command"} for c in "ab"]
    expect = {"updates": start + end + ask}
    interleaved = start + [end[1], ask[0], end[0], ask[1]]
    assert check_turn(expect, {}, interleaved) == ([], [])
    swapped = start + end + ask[::-1]
    [problem], _ = check_turn(expect, {}, swapped)
    assert "updates[4].call_id" in problem


def test_executions_compare_in_any_order_but_not_another_call_or_one_more():
    """SPEC §8: "a case that passes or fails by chance (tools run in parallel) is a
    defect of the case", so a turn's executions compare in any order (LangChain runs
    each call as a parallel task); another call run, or one too many, still differs."""
    from conformance.runner import check_turn
    weather = {"tool": "get_weather", "arguments": {"city": "Paris"}}
    time = {"tool": "get_time", "arguments": {"city": "Rome"}}
    expect = {"executions": [weather, time]}
    assert check_turn(expect, {"executions": [time, weather]}, []) == ([], [])
    [other], _ = check_turn(expect, {"executions": [time, time]}, [])
    [extra], _ = check_turn(expect, {"executions": [weather, time, weather]}, [])
    assert other.startswith("executions[0].tool: ") and extra.startswith("executions: 3 items")
    # in any order, by the same rules as in order: numbers by value, booleans apart
    count = {"tool": "count", "arguments": {"n": 1}}
    expect = {"executions": [count, weather]}
    assert check_turn(expect, {"executions": [weather, {**count, "arguments": {"n": 1.0}}]},
                      []) == ([], [])
    [boolean], _ = check_turn(expect, {"executions": [weather, {**count, "arguments": {"n": True}}]},
                              [])
    assert boolean.startswith("executions[0].tool: ")


def test_system_messages_compare_as_one_text_and_refusal_as_content():
    """SPEC §8: not one system message per context provider; a provider's ``refusal``
    text counts as the message's content."""
    from types import SimpleNamespace
    from conformance.runner import API_KEY, check_request, normalise_message
    expected = {"messages": [{"role": "system", "content": "You are terse."},
                             {"role": "system", "content": "The user is Ann."},
                             {"role": "user", "content": "hi"}]}

    def sent(messages):
        body = {"model": "conformance-model", "stream": True, "messages": messages}
        return SimpleNamespace(path="/v1/chat/completions", json=body,
                               headers={"authorization": f"Bearer {API_KEY}"})
    merged = [{"role": "system", "content": "You are terse.\n\nThe user is Ann."},
              {"role": "user", "content": "hi"}]
    assert check_request(expected, sent(merged)) is None
    other = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]
    assert "messages[0].content" in check_request(expected, sent(other))
    refused = {"role": "assistant", "content": None, "refusal": "I can't."}
    assert normalise_message(refused)["content"] == "I can't."


def test_a_cannot_naming_an_unknown_feature_fails_the_case():
    """A misspelt or retired feature name would hide nothing (README, "Features")."""
    class OldName(Declaring):
        ready = {"cannot": {"approvals_by_id": "answers are a map"}}
    [outcome] = run_all(OldName, CASES[:1])
    assert outcome.status == "fail" and "unknown feature(s) approvals_by_id" in outcome.detail


def test_repeat_reports_a_case_whose_verdict_varies(capsys):
    """``--repeat N``: a case that passes on one run and fails on another fails,
    saying how often each verdict came (SPEC §8)."""
    from conformance.runner import run_repeated

    class EveryOtherRunFails(InProcess):
        runs = 0

        def setup(self, message):
            EveryOtherRunFails.runs += 1
            return super().setup(message)

        def run(self, message):
            end, updates = super().run(message)
            if EveryOtherRunFails.runs % 2 == 0:
                end = {**end, "executions": []}
            return end, updates
    by_id = {case["id"]: case for case in CASES}
    [steady] = run_repeated(InProcess, [by_id["001-approve"]], 3)
    assert steady.passed
    [varying] = run_repeated(EveryOtherRunFails, [by_id["001-approve"]], 3)
    assert varying.status == "fail"
    assert varying.detail.startswith("the verdict varies over 3 runs (fail 1, pass 2); run 2: ")


def test_a_peers_deviation_is_filed_under_the_rule_its_first_difference_breaks():
    """PEERS.md (SPEC §8): a rejection text that differs is R7 whatever the case is
    about; a sibling that ran is R5; a tool-error text is R13's; an answer not refused
    is R11; otherwise the case's own rule."""
    from conformance.findings import rule_broken
    text = ('turn 2, model call 1 (request 2 of the case): messages[3].content: expected '
            '"Rejected: keep the logs", got "keep the logs"')
    assert rule_broken("006-two-approvals-one-each", ("R3", "R4"), text) == "R7"
    ran = ('turn 2, model call 1 (request 2 of the case): messages[2].content: expected '
           '"Rejected: User denied", got "{\\"text\\":\\"Freeing disk space\\"}"')
    assert rule_broken("007-mixed-batch-sibling", ("R3", "R5"), ran) == "R5"
    failed = ('turn 1, model call 2 (request 2 of the case): messages[2].content: expected '
              '"Error: ValueError: disk on fire", got "disk on fire"')
    assert rule_broken("033-r13-success-resets-the-count", ("R13",), failed) == "R13 (error text)"
    assert rule_broken("013-not-paused", ("R11",),
                       "turn 2: error: expected ApprovalError, got no error") == "R11"
    assert rule_broken("020-max-rounds", ("R8",), "turn 1: updates[3]: …") == "R8"


def test_an_answered_call_is_r12_only_when_it_ran_again():
    """SPEC R11/R12: a resume with an answered id that reaches the model is R11's
    deviation (no ApprovalError); it is R12's only when the call was executed again."""
    from conformance.findings import rule_broken
    first = "turn 3: request 3 of the case was not expected: the case has 2 model call(s)"
    ran = first + ('\n  also: executions: 1 items, expected 0 (unexpected {"tool": '
                   '"run_command", "arguments": {"command": "rm -rf /"}})')
    assert rule_broken("012-already-answered", ("R11", "R12"), ran) == "R12"
    assert rule_broken("012-already-answered", ("R11", "R12"), first) == "R11"
    history_only = first + '\n  also: history: 3 items, expected 2 (unexpected {"role": "tool"})'
    assert rule_broken("012-already-answered", ("R11", "R12"), history_only) == "R11"


def test_every_recorded_piece_of_evidence_names_a_peer_and_a_case_of_the_suite():
    """PEERS.md cites evidence per (peer, rule) and, where one rule has several causes,
    per (peer, case): each key must name a peer that is run and a case that exists, or
    the evidence is never shown; a case's own evidence wins over its rule's."""
    from conformance.findings import CASE_EVIDENCE, CASE_NOTES, EVIDENCE, classify
    from conformance.loader import load_cases
    from conformance.peers import PEERS
    peers = {name for name, _ in PEERS}
    cases = {case["id"] for case in load_cases()}
    for peer, case_id in [*CASE_EVIDENCE, *CASE_NOTES]:
        assert peer in peers and case_id in cases, (peer, case_id)
    assert {peer for peer, _ in EVIDENCE} <= peers
    detail = 'turn 1, model call 2 (request 2 of the case): messages[2].content: expected ' \
             'text starting with "Error: arguments are not valid JSON: ", got "{\\"raw\\": 1}"'
    peer = "Microsoft Agent Framework"
    assert classify(peer, "019-invalid-json-arguments", ("R14",), detail) == (
        "R14", CASE_EVIDENCE[(peer, "019-invalid-json-arguments")])
    assert classify(peer, "018-unknown-tool", ("R14",), detail) == (
        "R14", EVIDENCE[(peer, "R14")])


def test_a_peer_in_a_venv_of_its_own_runs_in_it_and_is_skipped_while_it_is_missing(
        monkeypatch, tmp_path):
    """conformance/peers.py: a peer of VENVS (pins that clash with the shared venv's) is
    started by .conformance-venv-NAME's interpreter; without that venv it is not
    installed (None, so PEERS.md says "not measured"); every other adapter runs in this
    interpreter."""
    from conformance import peers
    adapter = "conformance.adapters.peer_maf"
    assert peers.command(adapter) == f"{sys.executable} -m {adapter}"
    monkeypatch.setattr(peers, "ROOT", tmp_path)
    monkeypatch.setitem(peers.VENVS, adapter, "other")
    assert peers.command(adapter) is None
    python = tmp_path / ".conformance-venv-other" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert peers.command(adapter) == f"{python} -m {adapter}"


def test_every_own_venv_has_its_pins_and_every_pin_file_its_peer():
    """conformance/peers.py's VENVS and conformance/adapters/requirements-NAME.txt name the
    same venvs (the Makefile builds .conformance-venv-NAME from each such file): an adapter
    of VENVS without its file would never be installed and is reported "not installed"
    forever; a file without an adapter builds a venv no peer runs in. Each adapter of VENVS
    is one of PEERS."""
    from conformance import peers
    pinned = {path.name[len("requirements-"):-len(".txt")]
              for path in (peers.ROOT / "conformance" / "adapters").glob("requirements-*.txt")}
    assert set(peers.VENVS.values()) == pinned
    assert set(peers.VENVS) <= {module for _, module in peers.PEERS}
    assert peers.VENVS["conformance.adapters.peer_adk"] == "adk"
