"""The protocol's two steps of issue 41 (conformance/README.md, "Stopping a run" and "A
run without a session"): a turn's ``stop_after`` and a case's ``"session": false``, in
the cases of SPEC R23 (a call approved only in a run the person stopped) and R5 with and
without a session. An adapter that does not list a step in ``can`` gets those cases
skipped, saying why; agentflow made to deviate fails them under the rule that broke.
Each test runs a few cases only, in-process, to stay cheap (the reference adapter runs
every case through the protocol in test_conformance.py)."""

import agentflow.gate as gate
from conformance.loader import case_needs, run_message, setup_message
from conformance.report import report
from conformance.runner import InProcess, load_cases, run_all

BY_ID = {case["id"]: case for case in load_cases()}
STOPPED = ("047-stopped-run-keeps-what-ran", "050-r23-stopped-run-asks-again")
SESSIONLESS = ("048-r5-without-a-session", "049-approving-a-sibling-without-a-session")
RECORDED = "051-r23-recorded-answer-runs-when-continued"


def run(make_driver, *case_ids):
    return {o.case_id: o for o in run_all(make_driver, [BY_ID[i] for i in case_ids])}


def verdicts(outcomes):
    return {case_id: (o.status, o.broke) for case_id, o in outcomes.items()}


class Declaring(InProcess):
    """agentflow behind a ``ready`` that declares what ``ready`` says here."""
    ready: dict = {}

    def setup(self, message):
        return {**super().setup(message), **self.ready}


class KnowsNoNewStep(Declaring):
    """An adapter written before the two steps: its ``ready`` has no ``can``, and it
    would ignore ``stop_after`` and ``session`` if it were sent them."""
    ready = {"can": []}

    def run(self, message):
        return super().run({k: v for k, v in message.items() if k != "stop_after"})


def test_the_cases_imply_the_steps_they_need_and_send_them_only_there():
    assert [case_needs(BY_ID[i]) for i in (*STOPPED, *SESSIONLESS, RECORDED)] == [
        ["stop_after"], ["stop_after"], ["no_session"], ["no_session"],
        ["stop_after", "recorded_answers"]]
    assert case_needs(BY_ID["001-approve"]) == []
    assert "stop_after" not in run_message(BY_ID["001-approve"]["turns"][1])
    assert run_message(BY_ID[STOPPED[0]]["turns"][1])["stop_after"] == 1
    assert "session" not in setup_message(BY_ID["001-approve"], "http://x/v1", "k")
    assert setup_message(BY_ID[SESSIONLESS[0]], "http://x/v1", "k")["session"] is False


def test_an_adapter_that_does_not_list_a_step_in_can_is_skipped_saying_why(capsys):
    outcomes = run(KnowsNoNewStep, "007-mixed-batch-sibling", *STOPPED, *SESSIONLESS, RECORDED)
    assert [o.status for o in outcomes.values()] == ["pass"] + ["skip"] * 5
    assert "needs 'stop_after', which the adapter does not list in 'can'" in outcomes[
        STOPPED[0]].detail
    assert "needs 'no_session'" in outcomes[SESSIONLESS[0]].detail
    assert "needs 'stop_after'" in outcomes[RECORDED].detail  # its first need
    report(list(outcomes.values()))
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 0 failed, 5 skipped"


def test_a_cannot_reason_for_a_step_is_the_skips_reason():
    class Cancels(Declaring):
        ready = {"can": ["no_session"],
                 "cannot": {"stop_after": "Runner.run has no cancel between tool calls"}}
    outcomes = run(Cancels, STOPPED[0], SESSIONLESS[0])
    assert verdicts(outcomes) == {STOPPED[0]: ("skip", ""), SESSIONLESS[0]: ("pass", "")}
    assert "cannot do: Runner.run has no cancel between tool calls" in outcomes[STOPPED[0]].detail


def test_a_can_naming_an_unknown_step_fails_the_case():
    class Misspelt(Declaring):
        ready = {"can": ["stop_after", "sessionless"]}
    [outcome] = run(Misspelt, "001-approve").values()
    assert outcome.status == "fail" and "'can' names unknown feature(s) sessionless" in outcome.detail


def test_an_adapter_that_lists_stop_after_but_does_not_stop_fails_under_the_cases_rule():
    """The batch runs on past the stop: call_b runs in the run the person stopped."""
    class RunsOn(KnowsNoNewStep):
        ready = {"can": ["stop_after"]}
    outcomes = run(RunsOn, *STOPPED)
    assert verdicts(outcomes) == {STOPPED[0]: ("fail", "R10"), STOPPED[1]: ("fail", "R23")}
    assert "turn 2: " in outcomes[STOPPED[1]].detail
    assert "executions: 2 items, expected 1" in outcomes[STOPPED[1]].detail


def test_a_stopped_call_rejected_at_the_next_run_fails_r23_and_only_r23s_case(monkeypatch):
    """Before issue 41 a call approved only to the stopped run got ``Rejected: User
    denied`` when the session was continued (R4 read alone)."""
    monkeypatch.setattr(gate, "asked_again", lambda *args: [])
    outcomes = run(InProcess, *STOPPED)
    assert verdicts(outcomes) == {STOPPED[0]: ("pass", ""), STOPPED[1]: ("fail", "R23")}
    detail = outcomes[STOPPED[1]].detail  # turn 3 called the model with call_b rejected
    assert detail.startswith("turn 3: ") and '"Rejected: User denied"' in detail


def test_without_a_session_an_approved_sibling_that_runs_fails_r5(monkeypatch):
    """Before issue 41 a run without a session's ledger took an approval of a sibling
    and ran it; with a session the ledger refused it (041 passes either way here)."""
    monkeypatch.setattr(gate, "check_asked", lambda *args: None)
    outcomes = run(InProcess, "041-approving-a-sibling", *SESSIONLESS)
    assert verdicts(outcomes) == {"041-approving-a-sibling": ("pass", ""),
                                  SESSIONLESS[0]: ("pass", ""), SESSIONLESS[1]: ("fail", "R5")}
    assert 'unexpected {"tool": "echo"' in outcomes[SESSIONLESS[1]].detail



def test_answers_recorded_in_the_session_that_a_run_ignores_fail_r23(monkeypatch):
    """An implementation that reads only the answers handed to the run (R4 alone)
    rejects the calls whose answers the inbox recorded."""
    monkeypatch.setattr(gate, "recorded_responses", lambda *args: [])
    [outcome] = run(InProcess, RECORDED).values()
    assert (outcome.status, outcome.broke) == ("fail", "R23")
    assert outcome.detail.startswith("turn 2: ") and "Rejected: User denied" in outcome.detail
