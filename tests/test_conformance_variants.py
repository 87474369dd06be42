"""PEERS.md's variant pairs (SPEC §8: every claim about a peer is shown by a variant of
the case that differs from a passing one in the broken rule only). Each pair of
conformance/findings.py's VARIANTS is checked against the case files: the inputs of the
base and of the failing case (tools, instructions, context providers, each turn's input,
answers and options, the provider's responses as recorded) differ, and only in the
input paths of the pair's point. The user's words are labels: the replayed responses
do not depend on them and no rule reads them."""

from __future__ import annotations

import re

import pytest

from conformance.findings import POINTS, TWINS, VARIANTS, variant
from conformance.loader import load_cases

CASES = {case["id"]: case for case in load_cases()}
ABSENT = "<absent>"  # a key one case has and the other lacks (a null reason is not none)
USER_WORDS = re.compile(r"turns\[\d+\]\.input\[\d+\]\.content")


def _flat(value, path=""):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flat(item, f"{path}.{key}" if path else key)
        if not value:
            yield path, "{}"
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _flat(item, f"{path}[{i}]")
        if not value:
            yield path, "[]"
    else:
        yield path, value


def inputs(case: dict) -> dict:
    """A case's inputs, path -> value, a recorded response body as its text."""
    given = {key: case[key] for key in ("tools", "instructions", "context_providers",
                                        "session", "needs") if key in case}
    for n, turn in enumerate(case["turns"]):
        for key, value in turn.items():
            if key == "model_calls":
                for m, call in enumerate(value):
                    response = call["response"]
                    given[f"turns[{n}].model_calls[{m}]"] = (
                        (case["_folder"] / response).read_text(encoding="utf-8")
                        if isinstance(response, str) else response)
            elif key != "expect":
                given[f"turns[{n}].{key}"] = value
    return dict(_flat(given))


def differing(base: str, case: str) -> list[str]:
    a, b = inputs(CASES[base]), inputs(CASES[case])
    return sorted(p for p in set(a) | set(b)
                  if a.get(p, ABSENT) != b.get(p, ABSENT) and not USER_WORDS.fullmatch(p))


def outside(point: str, paths: list[str]) -> list[str]:
    """The differing paths the point does not cover."""
    return [p for p in paths if not any(re.fullmatch(r, p) for r in POINTS[point][1])]


@pytest.mark.parametrize("case_id, rule, base, point", VARIANTS,
                         ids=[f"{c[:3]}-{r}-{b[:3]}" for c, r, b, _ in VARIANTS])
def test_a_variant_pair_differs_in_its_point_only(case_id, rule, base, point):
    """The base is a core case (a claim is about the core suite) other than the failing
    one, the rule is one the failing case is about, and the two case files differ in
    their inputs, only where the point says."""
    case, other = CASES[case_id], CASES[base]
    assert case.get("suite", "core") == "core" and other.get("suite", "core") == "core"
    assert base != case_id and rule.split(" (")[0] in case["rules"]  # R13 (error text)
    paths = differing(base, case_id)
    assert paths, "a base with the failing case's inputs isolates nothing"
    assert outside(point, paths) == [], (base, case_id, point)


@pytest.mark.parametrize("case_id, twin, point", TWINS, ids=[t[:3] for _, t, _ in TWINS])
def test_a_twin_differs_from_its_case_in_its_point_only(case_id, twin, point):
    """A twin is its case with a change none of the case's rules reads: the same rules,
    inputs that differ only where the point says, and a variant pair of its own."""
    assert CASES[twin]["rules"] == CASES[case_id]["rules"]
    paths = differing(case_id, twin)
    assert paths and outside(point, paths) == [], (case_id, twin, point)
    assert any(c == twin for c, _, _, _ in VARIANTS)


def test_the_check_refuses_a_pair_that_differs_beyond_its_point():
    """004 (blank reason) is not 001 (approval) with another reason: the answer's
    decision and the model's reply differ too; 003 and 005 differ in the reason being
    absent or null, which the check keeps apart."""
    assert outside("reason", differing("001-approve", "004-reject-blank-reason")) == [
        "turns[1].approvals[0].approved", "turns[1].model_calls[0]"]
    assert differing("003-reject-without-reason", "005-reject-null-reason") == [
        "turns[1].approvals[0].reason"]
    assert outside("stream", differing("116-shape-done-without-blank-line",
                                       "025-failed-first-call")) != []


def test_a_claim_names_the_first_base_the_peer_passes():
    """SPEC §8: the variant shown is a passing case; where the peer fails every base of
    the pair the claim says it is not isolated (with the rule each base broke), and a
    case and rule without a pair say that no case differs in that rule only."""
    status = {"003-reject-without-reason": "fail", "002-reject-with-reason": "fail",
              "004-reject-blank-reason": "pass", "001-approve": "pass"}
    assert variant("003-reject-without-reason", "R7", status) == (
        "isolated", "`004-reject-blank-reason` passes, `003-reject-without-reason` fails; "
        "they differ only in the rejection's reason")
    status["004-reject-blank-reason"] = "fail"
    assert variant("003-reject-without-reason", "R7", status)[1].startswith("`001-approve` ")
    status["001-approve"] = "skip"
    assert variant("003-reject-without-reason", "R7", status,
                   {"002-reject-with-reason": "R7"}) == (
        "not isolated", "not isolated here: no base passes (`002-reject-with-reason` fail "
        "(R7), `004-reject-blank-reason` fail, `001-approve` skip)")
    assert variant("045-instructions-are-the-system-message", "R1", {"001-approve": "pass"}) == (
        "no case", "no case differs from `045-instructions-are-the-system-message` in R1 only")


def test_a_claim_whose_bases_all_fail_is_shown_by_its_twin_failing_for_the_same_rule():
    """Vercel's case: 007's bases fail for R4 (129) or skip (048); its twin 139, the calls
    in the other order, fails for R5 and its base 136 passes. A twin that passes, or
    fails for another rule, shows nothing."""
    status = {"007-mixed-batch-sibling": "fail", "048-r5-without-a-session": "skip",
              "129-both-need-approval-one-rejected": "fail",
              "139-sibling-second-in-the-batch": "fail",
              "136-approved-call-first-one-rejected": "pass"}
    broke = {"007-mixed-batch-sibling": "R5", "129-both-need-approval-one-rejected": "R4",
             "139-sibling-second-in-the-batch": "R5"}
    sibling_ran = 'turn 1: updates[6].type: expected "finish", got "tool_result"'
    details = {"007-mixed-batch-sibling": sibling_ran,
               "139-sibling-second-in-the-batch": sibling_ran,
               "048-r5-without-a-session": sibling_ran}
    assert variant("007-mixed-batch-sibling", "R5", status, broke, details) == (
        "isolated", "`136-approved-call-first-one-rejected` passes, "
        "`139-sibling-second-in-the-batch` fails; they differ only in the sibling needing no "
        "approval (and no answer) where the base's needs one and is rejected; "
        "`007-mixed-batch-sibling` differs from its twin `139-sibling-second-in-the-batch` "
        "only in the order of the model's two calls, which R5 does not read")
    status["048-r5-without-a-session"], broke["048-r5-without-a-session"] = "fail", "R5"
    assert variant("048-r5-without-a-session", "R5", status, broke, details)[1].endswith(
        "; `048-r5-without-a-session` differs from its twin `007-mixed-batch-sibling` only "
        "in being run without a session, which R5 does not read")
    # another deviation of R5 in the twin (the sibling run on resume, not at the pause)
    details["139-sibling-second-in-the-batch"] = "turn 2: executions: 2 items, expected 1"
    assert variant("007-mixed-batch-sibling", "R5", status, broke, details)[0] == "not isolated"
    details["139-sibling-second-in-the-batch"] = sibling_ran
    for twin_status, twin_broke in (("pass", None), ("fail", "R4")):
        status["139-sibling-second-in-the-batch"] = twin_status
        broke["139-sibling-second-in-the-batch"] = twin_broke
        for case in ("007-mixed-batch-sibling", "048-r5-without-a-session"):
            assert variant(case, "R5", status, broke, details)[0] == "not isolated"
    # twins both ways (007 and 139), every base failing: the search ends, not isolated
    status["136-approved-call-first-one-rejected"] = "fail"
    broke["139-sibling-second-in-the-batch"] = "R5"
    assert variant("139-sibling-second-in-the-batch", "R5", status, broke,
                   details)[0] == "not isolated"


def test_where_a_failure_is_names_its_turn_and_what_it_compares():
    from conformance.findings import where
    assert where('turn 1: updates[6].type: expected "finish"') == ("turn 1", "updates")
    assert where("turn 2: executions[0].tool: expected") == ("turn 2", "executions")
    assert where("turn 1, model call 2 (request 2 of the case): messages[2].content: x") == (
        "turn 1", "messages")


def test_every_stream_shape_case_has_a_base_with_the_same_turns():
    """The provider-shape cases (1xx) are §6's: each is paired with a case of the same
    turns whose stream differs (the plain 001 or 116 where one exists; 118 and 120 with
    121 and 122, the same tools and turns with every name sent whole)."""
    shapes = {c for c in CASES if c.startswith("1") and CASES[c]["rules"][0] == "SPEC §6"}
    paired = {c for c, rule, _, _ in VARIANTS if rule == "SPEC §6"}
    assert "121-shape-names-whole" in shapes and shapes - paired == set()
