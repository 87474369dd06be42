"""Only the rule under test decides a case (SPEC §8, fourth batch): agentflow made to
deviate in one aspect, in-process, fails only the cases of that aspect's rule, and a
failure is tallied under the rule that broke (conformance/README.md, "What a case
compares"). Each test runs a few cases only, to stay cheap."""

import io
import json

import pytest

import agentflow.gate as gate
from conformance import driver as case_driver
from conformance.report import report
from conformance.runner import InProcess, check_turn, load_cases, run_all

BY_ID = {case["id"]: case for case in load_cases()}


def run(make_driver, *case_ids):
    return {o.case_id: o for o in run_all(make_driver, [BY_ID[i] for i in case_ids])}


def verdicts(outcomes):
    return {case_id: (o.status, o.broke) for case_id, o in outcomes.items()}


class AddsSystemText(InProcess):
    """A framework that puts its own sentence in front of every system prompt (Google
    ADK's `You are an agent. Your internal name is …`): an R1 deviation."""

    def setup(self, message):
        added = "You are an agent. Your internal name is \"conformance\"."
        return super().setup({**message, "instructions": " ".join(
            filter(None, [added, message.get("instructions")]))})


def test_text_added_to_the_system_message_fails_only_r1s_cases():
    outcomes = run(AddsSystemText, "001-approve", "015-tool-loop", "111-shape-error-in-chunk",
                   "045-instructions-are-the-system-message", "023-context-provider")
    assert verdicts(outcomes) == {
        "001-approve": ("pass", ""), "015-tool-loop": ("pass", ""),
        "111-shape-error-in-chunk": ("pass", ""),
        "045-instructions-are-the-system-message": ("fail", "R1"),
        "023-context-provider": ("fail", "R1")}
    assert "messages[0].content" in outcomes["045-instructions-are-the-system-message"].detail


class DropsInstructions(InProcess):
    def setup(self, message):
        return super().setup({**message, "instructions": None})


def test_outside_r1s_cases_the_system_messages_must_still_hold_the_instructions():
    from types import SimpleNamespace
    from conformance.runner import API_KEY, check_request
    expected = {"messages": [{"role": "system", "content": "You are terse."},
                             {"role": "user", "content": "hi"}]}

    def problem(messages):
        request = SimpleNamespace(path="/v1/chat/completions", headers={
            "authorization": f"Bearer {API_KEY}"}, json={
            "model": "conformance-model", "stream": True, "messages": messages})
        return check_request(expected, request, aspects=frozenset())
    user = {"role": "user", "content": "hi"}
    assert problem([{"role": "system", "content": "You are an agent.\nYou are terse."},
                    user]) is None
    assert "must hold \"You are terse.\"" in problem([user])
    assert problem([{"role": "system", "content": "You are terse."}, user,
                    {"role": "user", "content": "more"}]).startswith("messages: 2 items, expected 1")
    [outcome] = run(DropsInstructions, "045-instructions-are-the-system-message").values()
    assert (outcome.status, outcome.broke) == ("fail", "R1")


@pytest.fixture
def framework_rejection_text(monkeypatch):
    """Microsoft Agent Framework's fixed text for every rejected call (R7)."""
    monkeypatch.setattr(gate, "rejection_text",
                        lambda reason: "Error: Tool call invocation was rejected by user.")


def test_a_rejection_text_that_differs_fails_only_r7s_cases(framework_rejection_text):
    outcomes = run(InProcess, "006-two-approvals-one-each", "014-chained-pauses",
                   "008-missing-response", "007-mixed-batch-sibling",
                   "002-reject-with-reason", "004-reject-blank-reason")
    assert verdicts(outcomes) == {
        "006-two-approvals-one-each": ("pass", ""), "014-chained-pauses": ("pass", ""),
        "008-missing-response": ("pass", ""), "007-mixed-batch-sibling": ("pass", ""),
        "002-reject-with-reason": ("fail", "R7"), "004-reject-blank-reason": ("fail", "R7")}


def test_a_case_failing_on_another_rules_aspect_says_broke_that_rule(framework_rejection_text):
    """002's first rule is R4; its rejection text is R7's: the report names R7."""
    outcomes = list(run(InProcess, "001-approve", "002-reject-with-reason").values())
    out = io.StringIO()
    report(outcomes, out)
    text = out.getvalue()
    assert "FAIL  002-reject-with-reason" in text and "[broke R7]" in text
    assert "rule R7: 0 passed, 1 failed, 0 skipped" in text
    assert "rule R4" not in text


@pytest.fixture
def results_wrapped(monkeypatch):
    """Google ADK sends a tool's result to the model as {"result": …}."""
    invoke = case_driver.CaseTool.invoke
    monkeypatch.setattr(case_driver.CaseTool, "invoke",
                        lambda self, arguments: json.dumps({"result": invoke(self, arguments)}))


def test_a_wrapped_result_fails_only_the_cases_about_results(results_wrapped):
    outcomes = run(InProcess, "001-approve", "006-two-approvals-one-each",
                   "101-shape-missing-index", "015-tool-loop", "037-echo-canonical-json")
    assert verdicts(outcomes) == {
        "001-approve": ("pass", ""), "006-two-approvals-one-each": ("pass", ""),
        "101-shape-missing-index": ("pass", ""),
        "015-tool-loop": ("fail", "R2"), "037-echo-canonical-json": ("fail", "R2")}


@pytest.fixture
def every_answer_wrapped(monkeypatch):
    """Google ADK answers every call with a dict, a tool's error and the unknown-tool
    answer too: the model gets {"result": "Error: ValueError: disk on fire"}."""
    import agentflow.function_invoking as invoking
    run_tool = invoking.run_tool

    def wrapped(*args, **kwargs):
        outcome = run_tool(*args, **kwargs)
        return outcome._replace(text=json.dumps({"result": outcome.text}))
    monkeypatch.setattr(invoking, "run_tool", wrapped)


def test_a_wrapped_error_text_is_r2s_to_judge_not_r13s_or_r14s(every_answer_wrapped):
    """SPEC §8: the wrapping is compared only by R2's cases. R13's and R14's cases compare
    the text exactly, whether it comes bare or as the one member of an object."""
    outcomes = run(InProcess, "016-tool-error", "018-unknown-tool",
                   "019-invalid-json-arguments", "123-r13-tool-returns", "015-tool-loop")
    assert verdicts(outcomes) == {
        "016-tool-error": ("pass", ""), "018-unknown-tool": ("pass", ""),
        "019-invalid-json-arguments": ("pass", ""), "123-r13-tool-returns": ("pass", ""),
        "015-tool-loop": ("fail", "R2")}


def test_a_case_that_compares_the_wrapping_too_refuses_a_wrapped_text(every_answer_wrapped):
    """The agentflow suite compares every aspect exactly (README), so its R14 case 032
    fails on the wrapped answer, under R2; and a crafted R2 and R13 case does the same."""
    [outcome] = run(InProcess, "032-r13-bad-calls-count-as-failures").values()
    assert (outcome.status, outcome.broke) == ("fail", "R2")
    both = {**BY_ID["016-tool-error"], "id": "016-with-r2", "rules": ["R13", "R2"]}
    [outcome] = run_all(InProcess, [both])
    assert (outcome.status, outcome.broke) == ("fail", "R2")


def test_an_object_that_names_its_member_twice_is_not_one_member():
    history = [{"role": "tool", "tool_call_id": "c",
                "content": '{"result": "13 GB", "result": "12 GB"}'}]
    expect = {"history": [{"role": "tool", "tool_call_id": "c", "content": "12 GB"}]}
    assert check_turn(expect, {"history": history}, [], aspects=frozenset())[0]


def test_a_wrapped_error_text_that_differs_still_breaks_r13(monkeypatch):
    import agentflow.function_invoking as invoking
    run_tool = invoking.run_tool

    def wrapped(*args, **kwargs):
        outcome = run_tool(*args, **kwargs)
        return outcome._replace(text=json.dumps({"result": outcome.text.replace(
            "ValueError: ", "")}))
    monkeypatch.setattr(invoking, "run_tool", wrapped)
    [outcome] = run(InProcess, "016-tool-error").values()
    assert (outcome.status, outcome.broke) == ("fail", "R13")
    assert 'expected "Error: ValueError: disk on fire" (or an object of one member ' \
           'holding it), got "{\\"result\\": \\"Error: disk on fire\\"}"' in outcome.detail


def test_a_loose_result_is_the_value_or_one_member_holding_it_nothing_else():
    def problems(content):
        history = [{"role": "tool", "tool_call_id": "c", "content": content}]
        expect = {"history": [{"role": "tool", "tool_call_id": "c", "content": "12 GB"}]}
        return check_turn(expect, {"history": history}, [], aspects=frozenset())[0]
    assert problems("12 GB") == [] and problems('{"result": "12 GB"}') == []
    assert problems('{"result": "12 GB", "ok": true}') and problems("13 GB")
    assert problems('{"result": {"value": "12 GB"}}')


class ResultsInReverse(InProcess):
    """Runs of results of different calls in reverse order, as parallel tools finish
    (the Vercel AI SDK; Pydantic AI's default parallel mode); the history keeps R4's
    call order."""

    def run(self, message):
        end, updates = super().run(message)
        results = [u for u in updates if u["type"] == "tool_result"]
        if len(results) > 1:
            first = updates.index(results[0])
            updates[first:first + len(results)] = results[::-1]
        return end, updates


def test_no_order_is_demanded_between_different_calls_results():
    [outcome] = run(ResultsInReverse, "006-two-approvals-one-each").values()
    assert outcome.passed, outcome.detail


def test_the_history_still_holds_results_in_call_order():
    expect = {"history": [{"role": "tool", "tool_call_id": c, "content": c} for c in "ab"]}
    end = {"history": expect["history"][::-1]}
    [problem], _ = check_turn(expect, end, [])
    assert problem.startswith("history[0].content")


class StartsAtTheEnd(InProcess):
    """A framework that gives its calls only in the final event (ADK through LiteLLM):
    the adapter derives each tool_call_start, just before the call's end."""
    ready = {"derives": ["tool_call_start"]}
    name = None

    def setup(self, message):
        return {**super().setup(message), **self.ready}

    def run(self, message):
        end, updates = super().run(message)
        starts = [u for u in updates if u["type"] == "tool_call_start"]
        rest = [u for u in updates if u["type"] != "tool_call_start"]
        for start in starts:
            at = next(n for n, u in enumerate(rest) if u["type"] == "tool_call_args"
                      and u["call_id"] == start["call_id"])
            rest.insert(at, {**start, "name": self.name or start["name"]})
        return end, rest


class ExecutedFirst(InProcess):
    """Keeps a turn's results with the executed calls' first and the rejections after
    (the Vercel AI SDK's order): an R4 deviation, whatever case shows it."""

    def run(self, message):
        end, updates = super().run(message)
        history, out = end.get("history", []), []
        for m in history:
            out.append(m)
            n = len(out) - 1
            while (n and m.get("role") == "tool" and out[n - 1].get("role") == "tool"
                   and str(out[n - 1].get("content")).startswith("Rejected: ")
                   and not str(m.get("content")).startswith("Rejected: ")):
                out[n - 1], out[n] = out[n], out[n - 1]
                n -= 1
        return {**end, "history": out}, updates


def test_results_out_of_call_order_break_r4_in_a_case_about_another_rule():
    """007 (R5's) rejects its first call and runs its second: kept executed-first, its
    history differs only in R4's order, and the failure is tallied under R4, not R5.
    139, the same calls in the other order, is already in call order and passes."""
    outcomes = run(ExecutedFirst, "007-mixed-batch-sibling", "139-sibling-second-in-the-batch")
    assert verdicts(outcomes) == {"007-mixed-batch-sibling": ("fail", "R4"),
                                  "139-sibling-second-in-the-batch": ("pass", "")}


def test_only_a_reordering_of_results_is_r4s():
    from conformance.runner import _out_of_call_order, in_call_order
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "a"}, {"id": "b"}]}
    a, b = ({"role": "tool", "tool_call_id": i, "content": i} for i in "ab")
    assert in_call_order([call, b, a]) == [call, a, b]
    assert _out_of_call_order([call, a, b], [call, b, a])
    assert not _out_of_call_order([call, a, b], [call, a, b])  # no difference at all
    assert not _out_of_call_order([call, a, b], [call, b, {**a, "content": "x"}])
    assert not _out_of_call_order([call, a, b], [call, b])  # a missing result is not order


def test_tool_call_start_can_be_declared_derived():
    [declared] = run(StartsAtTheEnd, "110-shape-crlf-parallel").values()
    assert declared.passed and declared.derived == ()
    StartsAtTheEnd.name = "made_up"  # a derived field's difference is reported apart
    [outcome] = run(StartsAtTheEnd, "110-shape-crlf-parallel").values()
    assert outcome.passed and "made_up" in outcome.derived[0]
    StartsAtTheEnd.ready = {}
    [undeclared] = run(StartsAtTheEnd, "110-shape-crlf-parallel").values()
    assert undeclared.status == "fail" and "made_up" in undeclared.detail


class OwnFinishWithoutUsage(InProcess):
    """An adapter that makes up the run's finish and reads no usage."""

    def setup(self, message):
        return {**super().setup(message), "derives": ["finish"]}

    def run(self, message):
        end, updates = super().run(message)
        return end, [{**u, "usage": None} if u["type"] == "finish" else u for u in updates]


def test_a_derived_finish_does_not_exempt_a_case_about_usage():
    outcomes = run(OwnFinishWithoutUsage, "001-approve", "104-shape-arguments-whole",
                   "106-shape-reasoning-usage-on-finish")
    assert verdicts(outcomes) == {"001-approve": ("pass", ""),
                                  "104-shape-arguments-whole": ("fail", "SPEC §6"),
                                  "106-shape-reasoning-usage-on-finish": ("fail", "SPEC §6")}
    assert "usage" in outcomes["104-shape-arguments-whole"].detail
    assert outcomes["001-approve"].derived  # reported apart, never decisive


class KeepsInputOfAFailedRun(InProcess):
    """A failed first model call leaves the run's input in the session (R10)."""

    def run(self, message):
        end, updates = super().run(message)
        if end["error"]:
            end = {**end, "history": end["history"] + message["input"]}
        return end, updates


def test_a_failure_of_what_a_failed_run_leaves_is_tallied_under_r10():
    outcomes = run(KeepsInputOfAFailedRun, "111-shape-error-in-chunk", "112-shape-event-error")
    assert verdicts(outcomes) == {"111-shape-error-in-chunk": ("fail", "R10"),
                                  "112-shape-event-error": ("fail", "R10")}
    out = io.StringIO()
    report(list(outcomes.values()), out)
    assert "rule R10: 0 passed, 2 failed, 0 skipped" in out.getvalue()
    assert "rule SPEC §6" not in out.getvalue()


class CountsModelCallsOnly(InProcess):
    def setup(self, message):
        return {**super().setup(message), "cannot": {
            "resume_counts_a_round": "its docs: the request limit counts model requests"}}


def test_034_is_r8s_and_skipped_where_the_framework_counts_another_unit():
    case = BY_ID["034-resume-counts-one-round"]
    assert case["rules"][0] == "R8" and case["needs"] == ["resume_counts_a_round"]
    [outcome] = run(CountsModelCallsOnly, "034-resume-counts-one-round").values()
    assert outcome.status == "skip" and "counts model requests" in outcome.detail


def test_peers_md_files_a_failure_under_the_rule_the_runner_says_broke():
    from conformance.findings import classify
    detail = "turn 1: history: 1 items, expected 0 (unexpected {\"role\": \"user\"})"
    peer = "Vercel AI SDK"
    assert classify(peer, "111-shape-error-in-chunk", ("SPEC §6", "R10"), detail, "R10")[0] \
        == "R10"
    assert classify(peer, "111-shape-error-in-chunk", ("SPEC §6", "R10"), detail)[0] == "SPEC §6"


def test_a_missing_message_is_shown_as_the_case_gives_it_not_as_its_loose_form():
    expect = {"history": [{"role": "tool", "tool_call_id": "c", "content": "12 GB"}]}
    [problem], _ = check_turn(expect, {"history": []}, [], aspects=frozenset())
    assert '"content": "12 GB"' in problem and "$result" not in problem


class SkipsTheHistory(InProcess):
    """Sends only the new input, never the history (an R2/R4 deviation in the request)."""

    def run(self, message):
        self.driver.session.messages[:] = []
        return super().run(message)


def test_a_request_that_differs_outside_every_aspect_is_refused_under_the_cases_rule():
    [outcome] = run(SkipsTheHistory, "025-failed-first-call").values()
    assert (outcome.status, outcome.broke) == ("fail", "R10")
    assert outcome.detail.startswith("turn 2, model call 1 (request 2 of the case): messages")


def test_the_readme_names_every_case_that_compares_the_system_text_and_the_wrapping():
    """conformance/README.md, "What a case compares": the cases listed as comparing the
    system text (R1) and a result's wrapping (R2) exactly are the core cases of that rule,
    so a case about a stream shape is not also judged on a framework's wrapping."""
    import re
    from pathlib import Path
    readme = (Path(__file__).parents[1] / "conformance" / "README.md").read_text("utf-8")
    core = [c for c in load_cases() if c.get("suite", "core") == "core"]
    for aspect, rule in (("the system message's text", "R1"), ("a tool result's wrapping", "R2")):
        listed = re.search(rf"\| {re.escape(aspect)} \| {rule}'s cases \(([\d, ]+)\)", readme)
        assert listed, aspect
        assert listed.group(1).split(", ") == [c["id"][:3] for c in core if rule in c["rules"]]
