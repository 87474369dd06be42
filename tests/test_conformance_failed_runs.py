"""What a failed run leaves (SPEC §8 fourth batch, R10; conformance/README.md, "What a
failed run leaves"): each reading the README rules out fails the core cases of its
part, shown with agentflow made to read it that way, in-process."""

from conformance.runner import InProcess, load_cases, run_all

BY_ID = {case["id"]: case for case in load_cases()}
PARTS = ["025-failed-first-call", "026-later-failure-keeps-results", "027-stream-cut",
         "035-resume-then-failure", "046-failed-step-leaves-nothing-of-its-output",
         "111-shape-error-in-chunk", "112-shape-event-error"]


def failing(make_driver):
    return {o.case_id: o.broke for o in run_all(make_driver, [BY_ID[i] for i in PARTS])
            if o.status == "fail"}


class Remembers(InProcess):
    """The history from before each run, to build the readings from."""

    def run(self, message):
        before = list(self.driver.session.messages)
        end, updates = super().run(message)
        return self.reading(message, end, updates, before), updates

    def reading(self, message, end, updates, before):
        return end


class ReturnsNothingOnFailure(Remembers):
    """A framework whose failed run returns nothing: the history from before the run."""

    def reading(self, message, end, updates, before):
        if end["error"]:
            return {**end, "history": [m.to_openai() for m in before]}
        return end


class InputBeforeTheCall(Remembers):
    """The documented loop that appends the user message before calling the model."""

    def reading(self, message, end, updates, before):
        if end["error"] and len(end["history"]) == len(before):
            return {**end, "history": end["history"] + message["input"]}
        return end


class KeepsTheFailedStepsText(Remembers):
    """The adapter's own bookkeeping: the text it forwarded from the failed step."""

    def reading(self, message, end, updates, before):
        shown = "".join(u["text"] for u in updates if u["type"] == "text")
        if end["error"] and shown:
            return {**end, "history": end["history"] + [
                {"role": "assistant", "content": shown}]}
        return end


def test_agentflow_passes_every_part():
    assert failing(InProcess) == {}


def test_a_run_that_returns_nothing_fails_the_completed_steps_cases_under_r10():
    assert failing(ReturnsNothingOnFailure) == {
        "026-later-failure-keeps-results": "R10", "035-resume-then-failure": "R10",
        "046-failed-step-leaves-nothing-of-its-output": "R10"}


def test_the_input_added_before_the_first_call_fails_the_no_change_cases_under_r10():
    assert failing(InputBeforeTheCall) == {
        "025-failed-first-call": "R10", "027-stream-cut": "R10",
        "111-shape-error-in-chunk": "R10", "112-shape-event-error": "R10"}


def test_the_failed_steps_partial_output_fails_the_nothing_of_it_cases_under_r10():
    assert failing(KeepsTheFailedStepsText) == {
        "027-stream-cut": "R10", "046-failed-step-leaves-nothing-of-its-output": "R10",
        "111-shape-error-in-chunk": "R10", "112-shape-event-error": "R10"}
