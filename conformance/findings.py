"""What PEERS.md says about a failing case (SPEC §8: every published claim names the
rule actually broken, shows it by a variant that differs from a passing case in that
rule only, and cites the framework's source or documentation).

``rule_broken`` reads the rule from the first difference, not from the case's first
rule: a rejection text that differs is R7 whatever the case is about. ``VARIANTS``
pairs each failing case and rule with base cases whose inputs differ from it in that
rule's point only (``POINTS``), and ``EVIDENCE`` holds the source lines and
documentation found for each peer (written by hand from the pinned versions; a
deviation without an entry says so).
"""

from __future__ import annotations

import re

# A variant pair (SPEC §8): a base case and the failing case, whose inputs differ only in
# the point of the rule the failure breaks. The inputs are what a case file gives (tools,
# instructions, context providers, each turn's input, answers and options, the provider's
# responses); the user's words are labels no rule reads. Each point names the input paths
# it may change (tests/test_conformance_variants.py checks every pair against the files)
# and says in words what the failing case changes.
_MODEL = r"turns\[\d+\]\.model_calls\[\d+\](\..+)?"  # a provider response: body, status
_ANSWER = r"turns\[\d+\]\.approvals\[\d+\]\."
POINTS = {  # point -> (what the failing case changes, the input paths that may differ)
    "reason": ("the rejection's reason", (_ANSWER + "reason",)),
    "answer": ("the answer: a rejection where the base approves (and the model's reply)",
               (_ANSWER + "(approved|reason)", _MODEL)),
    "approval": ("the answer: an approval where the base rejects (and the model's reply)",
                 (_ANSWER + "(approved|reason)", _MODEL)),
    "answers": ("which pending calls the answers name (and the model's reply)",
                (_ANSWER + "(approved|reason|call_id)", r"needs\[\d+\]", _MODEL)),
    "new_input": ("a user message given with the answers (and the model's reply)",
                  (r"turns\[\d+\]\.input\[\d+\]\.role", _MODEL)),
    "session": ("being run without a session", (r"session",)),
    "called_again": ("the model calling the rejected sibling again", (_MODEL,)),
    "answered_again": ("a third turn that answers the answered call again",
                       (r"turns\[2\]\..+", _MODEL)),
    "not_paused": ("a first turn that pauses nothing, so the answers find no pending call",
                   (r"needs\[\d+\]", _MODEL)),
    "failing_rounds": ("three rounds of failing calls instead of one", (_MODEL,)),
    "call": ("the model's tool call (its name or arguments)", (_MODEL,)),
    "length": ("the model's turn ending with `length`, its call cut off", (_MODEL,)),
    "stream": ("the provider's stream (and the call ids it gives)",
               (_MODEL, _ANSWER + "call_id")),
    "stream_two_calls": ("the provider's stream, with two calls, and the answer to the second",
                         (_MODEL, _ANSWER + "(call_id|approved)")),
    "failure": ("how the later model call fails", (_MODEL,)),
    "failed_resume": ("the model call after the resume failing, and a turn that continues",
                      (r"turns\[2\]\..+", _MODEL)),
    "round_limit": ("a round limit (`max_rounds` 2) and a model that calls again",
                    (r"turns\[\d+\]\.options\.max_rounds", _MODEL)),
    "sibling": ("the sibling needing no approval (and no answer) where the base's needs one "
                "and is rejected", (r"tools\[\d+\]\.requires_approval",
                                    _ANSWER + "(approved|call_id)")),
    "sibling_again": ("the sibling needing no approval where the base's needs one: there it is "
                      "rejected by an answer, and approved in a third turn when called again",
                      (r"tools\[\d+\]\.requires_approval", _ANSWER + "(approved|call_id)",
                       r"turns\[1\]\.model_calls\[1\]", r"turns\[2\]\..+")),
    "call_order": ("the order of the model's two calls: the approved one second, where the "
                   "base's is first", (_MODEL,)),
    "call_order_first": ("the order of the model's two calls: the approved one first, where "
                         "the base's is second", (_MODEL,)),
    "calls_swapped": ("the order of the model's two calls", (_MODEL,)),
    "tool_outcome": ("the tool raising where the base's returns", (r"tools\[\d+\]\.behaviour\..+",)),
    "fails": ("the later model call failing (a 400) where the base's answers", (_MODEL,)),
    "fails_and_continues": ("the later model call failing, and a turn that continues after it",
                            (r"turns\[1\]\..+", _MODEL)),
    "finish": ("the turn finishing `content_filter` where the base's finishes `stop`",
               (_MODEL,)),
    "context": ("the context providers (and the model's replies)",
                (r"context_providers.*", r"needs\[\d+\]", _MODEL)),
}

# (failing case, the rule it breaks, base, point): a claim names the first base of its
# case and rule that the peer passes. A (case, rule) with no row has no case that differs
# from it in that rule only, and PEERS.md says so: R2's wrapping is on every tool result
# and text a framework adds to the system message on every request, so R2's and R1's
# cases (015, 021, 037; 045) have no twin without them.
VARIANTS = [
    # R7: the rejection cases differ from each other in the reason only; 001 approves
    ("002-reject-with-reason", "R7", "038-reason-kept-exactly", "reason"),
    ("002-reject-with-reason", "R7", "003-reject-without-reason", "reason"),
    ("002-reject-with-reason", "R7", "001-approve", "answer"),
    ("003-reject-without-reason", "R7", "002-reject-with-reason", "reason"),
    ("003-reject-without-reason", "R7", "004-reject-blank-reason", "reason"),
    ("003-reject-without-reason", "R7", "001-approve", "answer"),
    ("004-reject-blank-reason", "R7", "003-reject-without-reason", "reason"),
    ("004-reject-blank-reason", "R7", "002-reject-with-reason", "reason"),
    ("004-reject-blank-reason", "R7", "001-approve", "answer"),
    ("005-reject-null-reason", "R7", "003-reject-without-reason", "reason"),
    ("005-reject-null-reason", "R7", "002-reject-with-reason", "reason"),
    ("005-reject-null-reason", "R7", "001-approve", "answer"),
    ("038-reason-kept-exactly", "R7", "002-reject-with-reason", "reason"),
    ("038-reason-kept-exactly", "R7", "003-reject-without-reason", "reason"),
    ("038-reason-kept-exactly", "R7", "001-approve", "answer"),
    # R4: 008 is 006 (and 128) with call_b left without an answer
    ("008-missing-response", "R4", "006-two-approvals-one-each", "answers"),
    ("008-missing-response", "R4", "128-two-approvals-both-approved", "answers"),
    # R5: the same batch with and without a session, with the sibling called again, and
    # with the sibling needing approval too (129)
    ("007-mixed-batch-sibling", "R5", "048-r5-without-a-session", "session"),
    ("007-mixed-batch-sibling", "R5", "129-both-need-approval-one-rejected", "sibling"),
    ("048-r5-without-a-session", "R5", "007-mixed-batch-sibling", "session"),
    ("031-sibling-called-again", "R5", "007-mixed-batch-sibling", "called_again"),
    ("031-sibling-called-again", "R5", "133-rejected-call-called-again-and-approved",
     "sibling_again"),
    # and 007, 031 with the calls in the other order (139, 140) against 136, 137
    ("139-sibling-second-in-the-batch", "R5", "136-approved-call-first-one-rejected", "sibling"),
    ("140-sibling-second-called-again", "R5",
     "137-approved-call-first-rejected-called-again", "sibling_again"),
    ("140-sibling-second-called-again", "R5", "139-sibling-second-in-the-batch", "called_again"),
    # R6: 022 is 003 (and 134, its inputs under R4) with a user message next to the answer
    ("022-new-input-with-approvals", "R6", "003-reject-without-reason", "new_input"),
    ("022-new-input-with-approvals", "R6", "134-r4-resume-with-a-rejection", "new_input"),
    # R11, R12: 012 is 001 answered once more; 013 answers a session 001's way unpaused
    ("012-already-answered", "R11", "001-approve", "answered_again"),
    ("012-already-answered", "R12", "001-approve", "answered_again"),
    ("013-not-paused", "R11", "001-approve", "not_paused"),
    ("009-unknown-id", "R11", "011-unknown-next-to-valid", "answers"),
    ("011-unknown-next-to-valid", "R11", "009-unknown-id", "answers"),
    ("010-duplicate-id", "R11", "011-unknown-next-to-valid", "answers"),
    ("010-duplicate-id", "R11", "009-unknown-id", "answers"),
    # and each against 129, the same calls answered validly
    ("009-unknown-id", "R11", "129-both-need-approval-one-rejected", "answers"),
    ("010-duplicate-id", "R11", "129-both-need-approval-one-rejected", "answers"),
    ("011-unknown-next-to-valid", "R11", "129-both-need-approval-one-rejected", "answers"),
    # R13: 017 is 016 with two more failing rounds (the count, not the error text)
    ("017-three-failing-rounds", "R13", "016-tool-error", "failing_rounds"),
    ("017-three-failing-rounds", "R13", "124-r13-three-rounds-that-return", "tool_outcome"),
    # R13's error text: each case against its turns with the tool returning (123-125)
    ("016-tool-error", "R13 (error text)", "123-r13-tool-returns", "tool_outcome"),
    ("017-three-failing-rounds", "R13 (error text)", "124-r13-three-rounds-that-return",
     "tool_outcome"),
    ("033-r13-success-resets-the-count", "R13 (error text)", "125-r13-rounds-that-all-return",
     "tool_outcome"),
    # R4: 128 is 006 with call_b approved too; R9: 127 is 030 finishing `stop`
    ("006-two-approvals-one-each", "R4", "128-two-approvals-both-approved", "answer"),
    ("128-two-approvals-both-approved", "R4", "006-two-approvals-one-each", "approval"),
    ("129-both-need-approval-one-rejected", "R4", "136-approved-call-first-one-rejected",
     "call_order"),
    ("133-rejected-call-called-again-and-approved", "R4",
     "137-approved-call-first-rejected-called-again", "call_order"),
    ("136-approved-call-first-one-rejected", "R4", "129-both-need-approval-one-rejected",
     "call_order_first"),
    ("137-approved-call-first-rejected-called-again", "R4",
     "133-rejected-call-called-again-and-approved", "call_order_first"),
    ("030-content-filter", "R9", "127-stop-finish-once-last", "finish"),
    # R14: the same tool and turn, the model's call differing in what R14 refuses
    ("018-unknown-tool", "R14", "037-echo-canonical-json", "call"),
    ("018-unknown-tool", "R14", "138-r14-offered-tool-runs", "call"),
    ("019-invalid-json-arguments", "R14", "135-arguments-an-object", "call"),
    ("019-invalid-json-arguments", "R14", "036-empty-arguments-mean-empty-object", "call"),
    ("039-arguments-not-an-object", "R14", "135-arguments-an-object", "call"),
    ("024-length-with-tool-calls", "R14", "130-r10-tool-then-answer", "length"),
    ("019-invalid-json-arguments", "R14", "039-arguments-not-an-object", "call"),
    ("039-arguments-not-an-object", "R14", "036-empty-arguments-mean-empty-object", "call"),
    ("039-arguments-not-an-object", "R14", "019-invalid-json-arguments", "call"),
    ("024-length-with-tool-calls", "R14", "021-text-before-tool-calls", "length"),
    # R10: a failing model call against the same turns without the failure
    ("025-failed-first-call", "R10", "126-later-call-answers", "fails"),
    ("026-later-failure-keeps-results", "R10", "130-r10-tool-then-answer", "fails_and_continues"),
    ("046-failed-step-leaves-nothing-of-its-output", "R10", "131-r10-tool-then-answer-in-parts",
     "fails_and_continues"),
    ("026-later-failure-keeps-results", "R10", "046-failed-step-leaves-nothing-of-its-output",
     "failure"),
    ("046-failed-step-leaves-nothing-of-its-output", "R10", "026-later-failure-keeps-results",
     "failure"),
    ("027-stream-cut", "R10", "116-shape-done-without-blank-line", "stream"),
    ("035-resume-then-failure", "R10", "001-approve", "failed_resume"),
    ("111-shape-error-in-chunk", "R10", "116-shape-done-without-blank-line", "stream"),
    ("111-shape-error-in-chunk", "R10", "112-shape-event-error", "stream"),
    ("112-shape-event-error", "R10", "116-shape-done-without-blank-line", "stream"),
    ("112-shape-event-error", "R10", "111-shape-error-in-chunk", "stream"),
    # R8: 020's model keeps calling under a limit; 021's answers after one round
    ("020-max-rounds", "R8", "021-text-before-tool-calls", "round_limit"),
    # R1: 023 is 045's prompt with context providers
    ("023-context-provider", "R1", "045-instructions-are-the-system-message", "context"),
    # SPEC §6: a stream shape against the plain case with the same turns (001, 116), or a
    # case of the same turns whose stream differs in another shape
    ("101-shape-missing-index", "SPEC §6", "001-approve", "stream"),
    ("102-shape-index-from-one", "SPEC §6", "001-approve", "stream"),
    ("103-shape-header-resent", "SPEC §6", "001-approve", "stream"),
    ("104-shape-arguments-whole", "SPEC §6", "001-approve", "stream"),
    ("105-shape-arguments-object", "SPEC §6", "001-approve", "stream"),
    ("106-shape-reasoning-usage-on-finish", "SPEC §6", "001-approve", "stream"),
    ("107-shape-empty-choices", "SPEC §6", "001-approve", "stream"),
    ("108-shape-keepalive-comments", "SPEC §6", "001-approve", "stream"),
    ("109-shape-empty-id-resent", "SPEC §6", "001-approve", "stream"),
    ("110-shape-crlf-parallel", "SPEC §6", "001-approve", "stream_two_calls"),
    ("111-shape-error-in-chunk", "SPEC §6", "116-shape-done-without-blank-line", "stream"),
    ("112-shape-event-error", "SPEC §6", "116-shape-done-without-blank-line", "stream"),
    ("113-shape-content-parts", "SPEC §6", "116-shape-done-without-blank-line", "stream"),
    ("114-shape-refusal", "SPEC §6", "116-shape-done-without-blank-line", "stream"),
    ("115-shape-bom-cr-reasoning", "SPEC §6", "116-shape-done-without-blank-line", "stream"),
    ("116-shape-done-without-blank-line", "SPEC §6", "113-shape-content-parts", "stream"),
    ("117-shape-stop-then-call", "SPEC §6", "132-shape-call-after-text", "stream"),
    ("117-shape-stop-then-call", "SPEC §6", "119-shape-header-without-index", "stream"),
    ("119-shape-header-without-index", "SPEC §6", "132-shape-call-after-text", "stream"),
    ("132-shape-call-after-text", "SPEC §6", "117-shape-stop-then-call", "stream"),
    ("119-shape-header-without-index", "SPEC §6", "117-shape-stop-then-call", "stream"),
    ("118-shape-name-in-pieces", "SPEC §6", "121-shape-names-whole", "stream"),
    ("121-shape-names-whole", "SPEC §6", "118-shape-name-in-pieces", "stream"),
    ("120-shape-name-pieces-that-repeat", "SPEC §6", "122-shape-repeating-names-whole",
     "stream"),
    ("122-shape-repeating-names-whole", "SPEC §6", "120-shape-name-pieces-that-repeat",
     "stream"),
    ("036-empty-arguments-mean-empty-object", "SPEC §6", "135-arguments-an-object", "call"),
    ("036-empty-arguments-mean-empty-object", "SPEC §6", "039-arguments-not-an-object", "call"),
    ("036-empty-arguments-mean-empty-object", "SPEC §6", "019-invalid-json-arguments", "call"),
]


# A twin: the failing case with a change its rule does not read (the order of the model's
# two calls; R5 "names no session and so holds with and without one"). Where every base of
# a case breaks another rule too (Vercel's result order breaks 129 and 133 under R4), its
# twin shows the claim when the peer fails the twin for the same rule and the twin's claim
# is shown (SPEC §8: "a variant of the case"). The chain 048, 007, 139 ends at 136.
TWINS = [  # (failing case, its twin, what the failing case changes)
    ("007-mixed-batch-sibling", "139-sibling-second-in-the-batch", "calls_swapped"),
    ("031-sibling-called-again", "140-sibling-second-called-again", "calls_swapped"),
    ("048-r5-without-a-session", "007-mixed-batch-sibling", "session"),
    # and back: LangChain lists rejections first, so 136 and 137 break R4 instead
    ("139-sibling-second-in-the-batch", "007-mixed-batch-sibling", "calls_swapped"),
    ("140-sibling-second-called-again", "031-sibling-called-again", "calls_swapped"),
]


_FIELD = re.compile(r"\b(updates|history|executions|error|messages|request|tools|tool_choice)\b")


def where(detail: str) -> tuple[str, str]:
    """Where a failure's first difference is: its turn and what it compares (the updates,
    the history, the executions, the error, a request), e.g. ``("turn 1", "updates")``."""
    first = detail.splitlines()[0] if detail else ""
    turn = re.match(r"(turn \d+)?", first).group(1)
    field = _FIELD.search(re.sub(r"\(request \d+ of the case\)", "", first))
    return turn or "", field.group(1) if field else ""


def variant(case_id: str, rule: str, status: dict, broke: dict | None = None,
            details: dict | None = None, _seen: frozenset = frozenset()) -> tuple[str, str]:
    """The variant a claim about ``case_id`` breaking ``rule`` shows, given the peer's
    ``status`` per case (and for each failing case the rule it ``broke`` and its failure's
    ``details``): ``("isolated", text)`` for the first base of its rows that the peer
    passes, or else for a twin (``TWINS``) that fails for the same rule at the same place
    (``where``: the same deviation, not another one of that rule) and whose own claim is
    shown; ``("not isolated", text)`` when there is neither; ``("no case", text)`` when no
    case differs from it in that rule only (SPEC §8)."""
    bases = [(base, point) for case, r, base, point in VARIANTS if (case, r) == (case_id, rule)]
    if not bases:
        return "no case", f"no case differs from `{case_id}` in {rule} only"
    for base, point in bases:
        if status.get(base) == "pass":
            return "isolated", (f"`{base}` passes, `{case_id}` fails; they differ only in "
                                f"{POINTS[point][0]}")
    why = broke or {}
    failures = details or {}
    for case, twin, point in TWINS:
        if (case == case_id and twin not in _seen and status.get(twin) == "fail"
                and why.get(twin) == rule and case_id in failures
                and where(failures.get(twin, "")) == where(failures[case_id])):
            found, text = variant(twin, rule, status, broke, details, _seen | {case_id})
            if found == "isolated":
                return "isolated", (f"{text}; `{case_id}` differs from its twin `{twin}` "
                                    f"only in {POINTS[point][0]}, which {rule} does not read")
    tried = ", ".join(f"`{base}` {status.get(base) or 'not run'}"
                      + (f" ({why[base]})" if why.get(base) else "") for base, _ in bases)
    return "not isolated", f"not isolated here: no base passes ({tried})"


_EXPECTED = re.compile(r'expected (?:text starting with )?"((?:[^"\\]|\\.)*)"'
                       r'(?: \(or an object of one member holding it\))?, got (.*)$')


def rule_broken(case_id: str, rules, detail: str) -> str:
    """The rule the first difference of a failing case breaks (see the module text)."""
    first = detail.splitlines()[0] if detail else ""
    match = _EXPECTED.search(first)
    expected, got = (match.group(1), match.group(2).lower()) if match else ("", "")
    if expected.startswith("Rejected: "):
        if "R5" in rules and not any(w in got for w in ("reject", "denied", "not approved")):
            return "R5"  # the sibling ran instead of being answered
        return "R7"
    if expected.startswith("Error: arguments are not valid JSON") or expected.startswith(
            "Error: unknown tool"):
        return "R14"
    if re.match(r"Error: \w+: ", expected):
        return "R13 (error text)"
    if "expected ApprovalError, got no error" in first:
        return "R11"
    if case_id.startswith("012") and "was not expected" in first:
        # the answered call ran again only if the turn shows an execution
        ran = any(line.lstrip().startswith(("executions", "also: executions"))
                  and "unexpected" in line for line in detail.splitlines())
        return "R12" if ran else "R11"
    return rules[0] if rules else "?"


# The pinned versions the line numbers below were read from (requirements.txt, package.json)
MAF, MAF_OPENAI = "agent-framework-core 1.23.0", "agent-framework-openai 1.17.0"
OAI_AGENTS, OPENAI = "openai-agents 0.24.0", "openai 3.57.0"
PYD = "pydantic-ai-slim 2.68.0"
AI, AI_OPENAI = "ai 6.0.325", "@ai-sdk/openai 3.0.141"
LC, LC_OPENAI, LC_CORE = "langchain 1.5.2", "langchain-openai 1.7.4", "langchain-core 1.8.3"
LG = "langgraph 1.2.24"
ADK, LITELLM, ADK_OPENAI = "google-adk 2.13.0", "litellm 1.106.2", "openai 2.54.0"  # requirements-adk.txt

# Google ADK sends every tool result as JSON text of a dict (SPEC R2's wrapping aspect)
_ADK_WRAPS = (f"google/adk/flows/llm_flows/tools/_caller.py:63-67 ({ADK}) "
              "`_normalize_tool_result` makes a result that is not a dict "
              "`{'result': <value>}`, and google/adk/models/lite_llm.py:1608-1615 sends a dict "
              "response as its JSON text: the model gets `{\"result\": \"42\"}`, not `42`; no "
              "parameter sends a result bare (a callback's or a tool's own answer is a dict too)")
# the Vercel AI SDK's tool message after a resume (129 and 133: call_1 rejected, call_2 run)
_AI_DENIED_LAST = (f"ai/src/generate-text/stream-text.ts:1657, 1695 ({AI}): the tool message "
                   "lists the approved calls' results before the denied calls', so call_2's "
                   "result comes before call_1's rejection (R4: in call order)")
# what the pinned packages bring in (package-lock.json; pip's resolution of requirements.txt)
AI_UTILS, LG_PREBUILT = "@ai-sdk/provider-utils 4.0.66", "langgraph-prebuilt 1.1.3"
# requirements-strands.txt, and the openai client pip resolves for it (its openai extra: <3)
STRANDS, STRANDS_OPENAI = "strands-agents 1.62.0", "openai 2.54.0"

# The openai client under three of the peers: the stream's own reading of SSE (SPEC §6, §7)
_OPENAI_NO_DONE = (f"openai/_streaming.py:170-190 ({OPENAI}): the stream ends when the body "
                   "ends; only `[DONE]` is looked for, a body cut before any finish reason "
                   "raises nothing, so the turn is taken as complete")
_OPENAI_BOM = (f"openai/_streaming.py:365 ({OPENAI}): lines are decoded with `utf-8`, not "
               "`utf-8-sig`, so the leading BOM makes the first field `\\ufeffdata`, an "
               "unknown field: the first event (the reasoning's first delta) is dropped")

EVIDENCE = {  # (peer, rule) -> the framework's source or documentation
    ("Microsoft Agent Framework", "R7"):
        f"agent_framework/_tools.py:4580 ({MAF}): a rejected call's result is the fixed text "
        "`\"Error: Tool call invocation was rejected by user.\"`; no parameter sets it",
    ("Microsoft Agent Framework", "R13 (error text)"):
        f"agent_framework/_tools.py:2016-2017 ({MAF}): `message = \"Error: Function failed.\"`, "
        "with `include_detailed_errors` only ` Exception: <message>` appended (no type name)",
    ("Microsoft Agent Framework", "R5"):
        f"agent_framework/_tools.py:2717-2727 ({MAF}): with a session, a sibling that needs no "
        "approval is stored as an \"already approved\" request, and _tools.py:3420-3425 "
        "releases it with `approved=True` when the batch resumes: it runs instead of being "
        "rejected",
    ("Microsoft Agent Framework", "R4"):
        f"agent_framework/_tools.py:3396-3405 ({MAF}) `_stage_approval_batch_responses`: a "
        "batch is released \"only when every decision is present\"; a call without an "
        "answer is asked again (`waiting_requests`) instead of rejected",
    ("Microsoft Agent Framework", "R11"):
        f"agent_framework/_tools.py:3198-3246 ({MAF}) `_drop_unrecorded_local_approval_"
        "responses`: an answer no pending request can authorize is dropped silently and the "
        "run goes on; of several answers for one id \"only the first is eligible\" "
        "(3217-3220, 3385); no error is raised for either",
    ("Microsoft Agent Framework", "R14"):
        f"agent_framework/_tools.py:2228 ({MAF}): an unknown tool's result is the fixed "
        "`Error: Requested function \"<name>\" not found.` (`terminate_on_unknown_calls` only "
        "raises instead); no parameter sets the text",
    ("Microsoft Agent Framework", "R8"):
        f"agent_framework/_tools.py:6245-6250 ({MAF}): when `max_iterations` is used up the "
        "loop makes one more model call with `tool_choice=\"none\"` (\"Requesting final "
        "response without tools\") instead of ending with a max-rounds signal",
    ("Microsoft Agent Framework", "R6"):
        f"agent_framework/_tools.py:4440 ({MAF}) `_replace_approval_contents_with_results` "
        "turns the approval responses into results where they stand in the input; the new "
        "user message given in the same run stays before them, between the tool-call message "
        "and its results",
    ("Microsoft Agent Framework", "R10"):
        f"agent_framework/_agents.py:1450 ({MAF}): the session's history is written by the "
        "context providers' `after_run`, at the end of the run; a run that fails writes "
        "nothing, so executed tools' results are lost "
        "(026, 035); a cut stream is not detected by the openai client: " + _OPENAI_NO_DONE,
    ("Microsoft Agent Framework", "SPEC §6"):
        f"agent_framework_openai/_chat_completion_client.py:968 ({MAF_OPENAI}): the stock "
        "client reads only `reasoning_details`, never `reasoning_content`; lines 170-178 "
        "document a user-supplied parser as the way to read other reasoning fields or list "
        "`content`",
    ("OpenAI Agents SDK", "R14"):
        f"agents/models/chatcmpl_stream_handler.py:1212-1216 ({OAI_AGENTS}): a `length` "
        "finish raises only when the turn has no text and no function calls; calls cut off "
        "by `length` are executed",
    ("OpenAI Agents SDK", "R3"):
        f"agents/run_internal/tool_planning.py:806-834 ({OAI_AGENTS}): each call's "
        "`needs_approval` is decided alone; a call that needs none is run in the same step "
        "while its sibling waits for approval (interruptions are per call)",
    ("OpenAI Agents SDK", "R5"):
        f"agents/run_internal/tool_planning.py:806-834 ({OAI_AGENTS}): a call that needs no "
        "approval runs at the pause, next to the interruption of its sibling",
    ("OpenAI Agents SDK", "R4"):
        f"agents/run_internal/tool_planning.py:153 ({OAI_AGENTS}): a call whose approval "
        "status is `None` (no answer) becomes a `ToolApprovalItem` interruption again; "
        "nothing rejects an unanswered call",
    ("OpenAI Agents SDK", "R11"):
        f"agents/run_state.py:1380-1410 ({OAI_AGENTS}) `approve`/`reject` record a decision "
        "per tool name and call id (run_context.py:483-511 creates the record for any key) "
        "without checking it against the pending interruptions: unknown, repeated and "
        "answered ids are accepted and the run goes on",
    ("OpenAI Agents SDK", "R13"):
        f"agents/tool.py:2094-2106 ({OAI_AGENTS}): `failure_error_function` formats each "
        "failing call alone; nothing counts consecutive failing rounds or switches "
        "`tool_choice` to `none`: run_internal/tool_execution.py:562-570 "
        "`maybe_reset_tool_choice` only clears a forced choice after a tool was used, and "
        "run_loop.py:2516-2517 reads the same `ModelSettings` every turn",
    ("OpenAI Agents SDK", "R10"):
        f"agents/run_internal/run_loop.py:2576 ({OAI_AGENTS}) `_persist_stream_input_if_"
        "needed` saves the run's input to the `Session` before the model's stream is read "
        "(line 2621): a failed first call leaves the input in the session (025, 111, 112); "
        + _OPENAI_NO_DONE + " (027)",
    ("OpenAI Agents SDK", "R9"):
        f"agents/models/chatcmpl_stream_handler.py:690-691, 1140-1145 ({OAI_AGENTS}): "
        "`content_filter` is only used to synthesize a refusal when the turn emitted nothing; "
        "a turn with text completes as an ordinary response and the run result carries no "
        "finish reason",
    ("Pydantic AI", "R13"):
        f"pydantic_ai/exceptions.py:131-134 ({PYD}): a failed tool's result does not "
        "\"consume the tool's retry budget\"; the documented bound is \"UsageLimits at the run "
        "level\": nothing counts consecutive failing rounds or makes a last call with "
        "`tool_choice=\"none\"` (the failure's text is set by the documented "
        "`Hooks(tool_execute_error=...)`, capabilities/hooks.py:844, so 016 and 033 pass)",
    ("Pydantic AI", "R3"):
        f"pydantic_ai/_tool_execution.py:420-421 ({PYD}): only deferred (`unapproved`) calls "
        "are collected and wait; the other calls of the step are executed at once",
    ("Pydantic AI", "R5"):
        f"pydantic_ai/_tool_execution.py:420-421 ({PYD}): a call that needs no approval is "
        "executed in the step that pauses its sibling",
    ("Pydantic AI", "R4"):
        f"pydantic_ai/_tool_execution.py:548-553 ({PYD}): \"Tool call results need to be "
        "provided for all deferred tool calls\": a call without an answer is an error, not a "
        "rejection",
    ("Pydantic AI", "R14"):
        f"pydantic_ai/tool_manager.py:825 ({PYD}): an unknown tool gets `Unknown tool name: "
        "'<name>'. Available tools: ...` as a retry prompt; no parameter sets the text",
    ("Pydantic AI", "R10"):
        "the documented loop (Pydantic AI docs, \"Messages and chat history\") passes "
        "`result.all_messages()` of a finished run as the next `message_history`; a run that "
        "raises returns none, so executed results are lost (026, 035, 046; README, \"What a "
        "failed run leaves\"); " + _OPENAI_NO_DONE + " (027)",
    ("Pydantic AI", "SPEC §6"):
        f"pydantic_ai/models/openai/_chat_completions.py:27-39 ({PYD}) `split_content_parts` "
        "joins the text parts of list `content` and keeps the others (a `thinking` part) as "
        "unmapped data, not reasoning",
    ("Vercel AI SDK", "R12"):
        f"ai/src/generate-text/collect-tool-approvals.ts:66-72, 91-93 ({AI}): an approval "
        "response is skipped when its call has a `tool-result` in the **last** message "
        "(`for (const part of lastMessage.content)`), and 103-110 skip a second response in "
        "the same message; a result stored in an earlier message is not looked at, so a "
        "response re-sent after the result was stored runs the call again (`rm -rf /` ran "
        "twice)",
    ("Vercel AI SDK", "R7"):
        f"@ai-sdk/openai src/chat/convert-to-openai-chat-messages.ts:321 ({AI_OPENAI}): a "
        "denied call's content is `output.reason ?? \"Tool call execution denied.\"`: the "
        "reason is sent as it is, so the adapter sets it to SPEC R7's text",
    ("Vercel AI SDK", "R13 (error text)"):
        f"ai/src/prompt/create-tool-model-output.ts:17-18 ({AI}): with `errorMode 'text'` "
        "(stream-text.ts:1671 for a `tool-error`) a tool error is `getErrorMessage(error)`, "
        "before `toModelOutput` is consulted; @ai-sdk/provider src/errors/get-error-message.ts:"
        "10-11 (@ai-sdk/provider 3.0.19) makes it the bare `error.message`",
    ("Vercel AI SDK", "R4"):
        f"ai/src/generate-text/collect-tool-approvals.ts:30-32, 68 ({AI}) reads answers only "
        "from the last message; a call without an answer stays without a result and the "
        "prompt conversion raises `AI_MissingToolResultsError`",
    ("Vercel AI SDK", "R6"):
        f"collect-tool-approvals.ts:30-32 ({AI}) returns no approvals unless "
        "`messages.at(-1).role == \"tool\"`: input after the answers hides them "
        "(`AI_MissingToolResultsError`)",
    ("Vercel AI SDK", "R3"):
        f"ai/src/generate-text/run-tools-transformation.ts:489 ({AI}): `needsApproval` is "
        "decided per call (`isApprovalNeeded`); calls that need none are executed in the "
        "same step while the others wait for "
        "their `tool-approval-response`",
    ("Vercel AI SDK", "R5"):
        f"ai/src/generate-text/run-tools-transformation.ts:489 ({AI}): approval is decided "
        "per call, so a call that needs none runs in the step that pauses its sibling",
    ("Vercel AI SDK", "R11"):
        f"ai/src/generate-text/collect-tool-approvals.ts:78, 103-110 ({AI}): of two "
        "responses for one call only the first is collected and the second is skipped "
        "silently, with no error; the first runs, and the prompt conversion then raises "
        "`AI_MissingToolResultsError` (for the call left unanswered) after `rm -rf /` already "
        "ran",
    ("Vercel AI SDK", "R14"):
        f"ai/src/error/no-such-tool-error.ts:16 ({AI}): an unknown tool's result is `Model "
        "tried to call unavailable tool '<name>'. Available tools: ...`; no parameter sets "
        "the text (`experimental_repairToolCall` rewrites the call, not the answer)",
    ("Vercel AI SDK", "R10"):
        f"ai src/generate-text/stream-text.ts:1223-1250, 2555-2556 ({AI}): `result.response` "
        "is the last recorded step's, and resolves after a stream error once a step was "
        "recorded, so a failed run keeps its completed steps (the adapter takes them: README, "
        "\"What a failed run leaves\"); a body cut before a finish reason ends the stream with "
        "finish reason `other` (line 1984), no error (027)",
    ("LangChain (HumanInTheLoopMiddleware)", "R7"):
        f"langchain/agents/middleware/human_in_the_loop.py:268-279 ({LC}) `_answer_message`: "
        "\"User rejected the tool call for `<name>` with reason: <reason>\"; a reject "
        "decision's `message` is only the reason",
    ("LangChain (HumanInTheLoopMiddleware)", "R5"):
        f"human_in_the_loop.py:853-855 ({LC}) `after_model`: calls not in `interrupt_on` are "
        "kept (\"This was auto-approved - keep original\") and run after the decisions",
    ("LangChain (HumanInTheLoopMiddleware)", "R11"):
        f"human_in_the_loop.py:820-842 ({LC}): decisions are matched by position "
        "(`decisions[decision_idx]`), checked only by count; a resume with no interrupt open "
        "is not checked against anything",
    ("LangChain (HumanInTheLoopMiddleware)", "R10"):
        f"langgraph/pregel/_loop.py:1151-1223 ({LG}) `_first` applies the input and saves "
        "a `{\"source\": \"input\"}` checkpoint before the first node (the model call) runs: a "
        "failed first call leaves the user message in the thread",
    ("LangChain (HumanInTheLoopMiddleware)", "R14"):
        "langgraph/prebuilt/tool_node.py:123 answers an unknown tool `Error: <name> is not a "
        "valid tool, try one of [...]`; langchain_core/messages/ai.py:557 "
        f"({LC_CORE}) builds a streamed call's arguments with `parse_partial_json`, so cut-off "
        "JSON (`{\"text\": \"unterminated`) is completed and run (019), and calls cut off by "
        "`length` are executed (024)",
    ("LangChain (HumanInTheLoopMiddleware)", "R4"):
        f"human_in_the_loop.py:861-863 ({LC}): the rejections' `ToolMessage`s are returned "
        "right after the AI message (`[last_ai_msg, *artificial_tool_messages]`) and the "
        "approved calls run later in the tool node, so a rejected call's result comes before "
        "an earlier approved call's (R4: in call order)",
    ("LangChain (HumanInTheLoopMiddleware)", "R13"):
        f"langchain/agents/middleware/ ({LC}): no middleware counts consecutive failing "
        "rounds or makes a last call with `tool_choice=\"none\"` (none sets `tool_choice`; "
        "types.py:82-151 only declares the field); model_call_limit.py:186-208, 249-250 "
        "stop at a count of model calls",
    ("LangChain (HumanInTheLoopMiddleware)", "R6"):
        f"langgraph/pregel/_io.py:74-78, _loop.py:1079-1114 ({LG}): `Command(resume=..., "
        "update={\"messages\": ...})` writes the update to the state before the interrupted "
        f"`after_model` runs again; it returns `[last_ai_msg, *rejections]` "
        f"(human_in_the_loop.py:863, {LC}), and `add_messages` (graph/message.py:218-231) "
        "keeps the AI message in place and appends the rejections after the new input: the "
        "input lands between the tool-call message and its results",

    ("Strands Agents (BeforeToolCallEvent interrupts)", "R5"):
        f"strands/tools/executors/concurrent.py:54-72 ({STRANDS}): the default "
        "`ConcurrentToolExecutor` (agent/agent.py:577) runs every call of the batch as a task; "
        "the interrupts guide's rule \"All tools running concurrently that are not interrupted "
        "will execute\": a sibling that needs no approval runs at the pause",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "R4"):
        f"strands/types/interrupt.py:107-111 ({STRANDS}): an interrupt with no response "
        "raises `InterruptException` again when its hook runs on resume, so a call left "
        "unanswered is asked about again instead of rejected",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "R11"):
        f"strands/interrupt.py:145-152 ({STRANDS}) `_InterruptState.resume`: each "
        "`interruptResponse` sets its interrupt's response; a second one for the same id "
        "overwrites the first, nothing refuses it (an unknown id raises `KeyError`, 149-150)",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "R13"):
        f"strands/tools/executors/_executor.py:687-700 ({STRANDS}): a failed tool becomes an "
        "error result and the loop goes on; nothing in event_loop/event_loop.py counts "
        "consecutive failing rounds or makes a last call with `tool_choice=\"none\"` (the "
        "failure's text is set by an `AfterToolCallEvent` hook, so 016 and 033 pass)",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "R10"):
        f"strands/agent/agent.py:1848 ({STRANDS}): the run's input is appended to "
        "`agent.messages` before the first model call, and the `FileSessionManager` stores "
        "each message as it is added (session/session_manager.py:51): a failed first call "
        "leaves the input in the session (111, 112)",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "SPEC §6"):
        f"strands/models/openai.py:774-803 ({STRANDS}): the stream reads `delta.content` "
        "as text and gathers `tool_calls` by `index` until the first `finish_reason`, then "
        "stops reading choices and sends each call whole",
    ("Google ADK", "R1"):
        f"google/adk/flows/llm_flows/prompt/_identity.py:41-45 ({ADK}): every request of an "
        "agent not in single-turn mode gets `You are an agent. Your internal name is "
        "\"<name>\".` appended to the system instruction; `LlmAgent.name` is required, and "
        "no parameter leaves the sentence out",
    ("Google ADK", "R2"): _ADK_WRAPS,
    ("Google ADK", "R7"):
        f"google/adk/tools/_confirmation_utils.py:70-71 ({ADK}) (also tools/function_tool.py:"
        "527-528): a declined boolean confirmation is answered with the fixed "
        "`{'error': 'This tool call is rejected.'}`; `ToolConfirmation` "
        "(tools/tool_confirmation.py) carries `hint`, `confirmed` and `payload`, and the "
        "documented advanced confirmation (the tool reads `payload` and answers itself) "
        "still reaches the model as a dict's JSON text: " + _ADK_WRAPS,
    ("Google ADK", "R13 (error text)"):
        f"`LlmAgent(on_tool_error_callback=...)` sets the answer to a tool that raised "
        f"(google/adk/flows/llm_flows/tools/_caller.py:582-596, {ADK}), but as a dict: "
        + _ADK_WRAPS + "; nothing counts consecutive failing rounds or makes a last call "
        "with `tool_choice=\"none\"` (017, 033)",
    ("Google ADK", "R14"):
        f"an unknown tool's answer is set by `on_tool_error_callback` "
        f"(google/adk/flows/llm_flows/tools/_caller.py:530-549, {ADK}), as a dict: "
        + _ADK_WRAPS,
    ("Google ADK", "R5"):
        f"google/adk/tools/_confirmation_utils.py:48-53 ({ADK}): confirmation is decided "
        "per call, so a call that needs none runs at the pause; "
        "flows/llm_flows/core/_function_call_postprocessor.py:99-107 yields its settled "
        "result before the confirmation request",
    ("Google ADK", "R4"):
        f"google/adk/flows/llm_flows/tools/_confirmation.py:276-297 ({ADK}): only the "
        "confirmations of the last user message are acted on; a call left unanswered keeps "
        "its placeholder `{'error': 'This tool call requires confirmation, please approve or "
        "reject.'}` (tools/_confirmation_utils.py:64-68) as its result and the model is "
        "called, instead of a rejection",
    ("Google ADK", "R11"):
        f"google/adk/flows/llm_flows/tools/_confirmation.py:288-297 ({ADK}): the answers "
        "are a dict keyed by the confirmation's id, so a second answer for one id replaces "
        "the first (010); 302-355: an answer already acted on is dropped silently and the "
        "run goes on (012); no error is raised for either",
    ("Google ADK", "R10"):
        f"google/adk/workflow/_node_runner_utils.py:190-192 ({ADK}): the new message is "
        "appended to the session as a user event before the agent's first model call, so a "
        "failed first call leaves it in the session (025, 111, 112); "
        f"openai/_streaming.py:165-190 ({ADK_OPENAI}, under LiteLLM's OpenAI provider): "
        "only `[DONE]` is looked for, a body cut before any finish reason raises nothing "
        "(027)",
}

# (peer, case) -> evidence, where the cases under one rule have different causes
CASE_EVIDENCE = {
    ("Microsoft Agent Framework", "019-invalid-json-arguments"):
        f"agent_framework/_types.py:2186-2193 ({MAF}) `parse_arguments`: arguments that are "
        "not JSON become `{\"raw\": <text>}` and the tool is called with them",
    ("Microsoft Agent Framework", "039-arguments-not-an-object"):
        f"agent_framework/_types.py:2189-2191 ({MAF}) `parse_arguments`: JSON that is not an "
        "object becomes `{\"raw\": <value>}` and the tool is called with it",
    ("Microsoft Agent Framework", "024-length-with-tool-calls"):
        f"agent_framework/_tools.py:4645 ({MAF}) `_extract_function_calls` takes every "
        "function call of the response whatever its `finish_reason`: calls cut off by "
        "`length` are executed",
    ("Microsoft Agent Framework", "027-stream-cut"): _OPENAI_NO_DONE,
    ("Microsoft Agent Framework", "012-already-answered"):
        f"agent_framework/_tools.py:3209-3215 ({MAF}): an answer whose call already has a "
        "result is \"settled\" history that \"cannot execute anything\": the call does not "
        "run twice, but the run calls the model again instead of raising",
    ("Microsoft Agent Framework", "036-empty-arguments-mean-empty-object"):
        f"agent_framework_openai/_chat_completion_client.py:1072, 1345 ({MAF_OPENAI}): empty "
        "streamed arguments are kept as `\"\"` and sent back as they are, not as `{}`",
    ("OpenAI Agents SDK", "027-stream-cut"): _OPENAI_NO_DONE,
    ("OpenAI Agents SDK", "105-shape-arguments-object"):
        f"agents/models/chatcmpl_stream_handler.py:1033-1035 ({OAI_AGENTS}): argument "
        "fragments are joined with `+=`, so an arguments object raises `TypeError`",
    ("OpenAI Agents SDK", "113-shape-content-parts"):
        f"agents/models/chatcmpl_stream_handler.py:921-923 ({OAI_AGENTS}): `delta.content` "
        "is passed to `ResponseTextDeltaEvent(delta=...)`, which takes a string only: list "
        "`content` raises `ValidationError`",
    ("OpenAI Agents SDK", "114-shape-refusal"):
        f"agents/run_internal/turn_resolution.py:1188 ({OAI_AGENTS}): a refusal becomes "
        "`ModelRefusalError`, raised out of the run, not text",
    ("OpenAI Agents SDK", "115-shape-bom-cr-reasoning"): _OPENAI_BOM,
    ("OpenAI Agents SDK", "012-already-answered"):
        f"agents/run_state.py:1380-1410 ({OAI_AGENTS}): an answer for a call that already has "
        "its result is recorded and the run calls the model again; the call does not run "
        "twice (no execution), but no error is raised",
    ("Pydantic AI", "019-invalid-json-arguments"):
        f"pydantic_ai/messages.py:88-91 ({PYD}): malformed arguments are sent back to the "
        "model wrapped as `{\"INVALID_JSON\": \"<raw>\"}` (`args_as_json_str`), not as received",
    ("Pydantic AI", "024-length-with-tool-calls"):
        f"pydantic_ai/_agent_graph.py:3910 ({PYD}): `finish_reason == 'length'` is looked at "
        "only when the response has no actionable output; its tool calls are executed",
    ("Pydantic AI", "039-arguments-not-an-object"):
        f"pydantic_ai/tools.py:549 ({PYD}): a tool built by `Tool.from_schema` validates "
        "with `any_schema()`, so a JSON list passes; _function_schema.py:92-100 calls it as "
        "`function(**kwargs)` with the list, and the `TypeError` leaves the run "
        "(tool_manager.py:1380-1391 catches only `ToolFailed` and `ModelRetry`)",
    ("Pydantic AI", "027-stream-cut"): _OPENAI_NO_DONE,
    ("Pydantic AI", "103-shape-header-resent"):
        f"pydantic_ai/messages.py:6955 ({PYD}): `tool_name = part.tool_name + "
        "self.tool_name_delta`: a re-sent name is concatenated",
    ("Pydantic AI", "114-shape-refusal"):
        f"pydantic_ai/_agent_graph.py:3918-3921 ({PYD}): a `content_filter` turn with no "
        "text raises `ContentFilterError`; the `refusal` text is not taken as text",
    ("Pydantic AI", "115-shape-bom-cr-reasoning"): _OPENAI_BOM,
    ("Vercel AI SDK", "019-invalid-json-arguments"):
        f"ai/src/generate-text/parse-tool-call.ts:84-97 ({AI}): unparsable input becomes an "
        "`invalid` call and the arguments sent back to the model are `{}`, not as received",
    ("Vercel AI SDK", "039-arguments-not-an-object"):
        f"ai/src/generate-text/parse-tool-call.ts:164 ({AI}): JSON that is not an object "
        "passes `safeParseJSON` against the tool's schema and the tool runs with `[1, 2]`",
    ("Vercel AI SDK", "101-shape-missing-index"):
        f"@ai-sdk/openai src/chat/openai-chat-api.ts:154 ({AI_OPENAI}): a tool-call delta's "
        "`index: z.number()` is required; a chunk without it fails validation",
    ("Vercel AI SDK", "105-shape-arguments-object"):
        f"@ai-sdk/openai src/chat/openai-chat-api.ts:159 ({AI_OPENAI}): `arguments: "
        "z.string().nullish()`; an arguments object fails validation",
    ("Vercel AI SDK", "113-shape-content-parts"):
        f"@ai-sdk/openai src/chat/openai-chat-api.ts:148 ({AI_OPENAI}): `content: "
        "z.string().nullish()`; list `content` fails validation",
    ("Vercel AI SDK", "104-shape-arguments-whole"):
        f"@ai-sdk/openai src/chat/openai-chat-api.ts:217 ({AI_OPENAI}): `usage` is read at "
        "the chunk's top level only; `x_groq.usage` is not read",
    ("Vercel AI SDK", "106-shape-reasoning-usage-on-finish"):
        f"@ai-sdk/openai src/chat/openai-chat-api.ts:136-200 ({AI_OPENAI}): the chunk schema "
        "has no `reasoning_content`; zod drops it (reasoning is read by "
        "@ai-sdk/openai-compatible, another provider package)",
    ("Vercel AI SDK", "115-shape-bom-cr-reasoning"):
        f"@ai-sdk/openai src/chat/openai-chat-api.ts:136-200 ({AI_OPENAI}): the chunk schema "
        "has no `reasoning_content`; the reasoning is dropped and only the text is shown",
    ("Vercel AI SDK", "035-resume-then-failure"):
        f"ai src/generate-text/stream-text.ts:1707-1717 ({AI}): the approved calls run before "
        "the first step and their results are response messages of the run, but with no step "
        "recorded (the first model call failed) `steps` and so `result.response` reject "
        "(1223-1236): the resume's results are not returned",
    ("Vercel AI SDK", "046-failed-step-leaves-nothing-of-its-output"):
        f"ai src/generate-text/stream-text.ts:2204-2207, 2396-2405 ({AI}): an error chunk "
        "makes the step's finish reason `error` and the step is recorded with its partial "
        "text and call; the loop goes on to the next step when that step's calls were "
        "executed, whatever its finish reason: the half call ran and the model was called "
        "again in the failed run",
    ("Vercel AI SDK", "112-shape-event-error"):
        f"ai src/generate-text/stream-text.ts:2204-2207 ({AI}): an error chunk ends the step "
        "with finish reason `error` and the step is recorded with the text before it, so "
        "`result.response` holds the failed step's partial output",
    ("OpenAI Agents SDK", "104-shape-arguments-whole"):
        f"agents/models/chatcmpl_stream_handler.py:657-658 ({OAI_AGENTS}): usage is read from "
        "the chunk's top-level `usage` only; `x_groq.usage` is not read (the finish the "
        "adapter derives keeps usage compared in a case about usage, README \"Derived fields\")",
    ("LangChain (HumanInTheLoopMiddleware)", "104-shape-arguments-whole"):
        f"langchain_openai/chat_models/base.py:1630 ({LC_OPENAI}): `token_usage = "
        "chunk.get(\"usage\")`, the top-level field only; `x_groq.usage` is not read",
    ("Microsoft Agent Framework", "104-shape-arguments-whole"):
        f"agent_framework_openai/_chat_completion_client.py:940-943 ({MAF_OPENAI}): usage is "
        "parsed from the chunk's top-level `usage` only; `x_groq.usage` is not read",
    ("Pydantic AI", "104-shape-arguments-whole"):
        f"pydantic_ai/models/openai/_chat_streaming.py:81-82 ({PYD}): usage is mapped from the "
        "chunk's top-level `usage` only; `x_groq.usage` is not read",
    ("Vercel AI SDK", "111-shape-error-in-chunk"):
        f"@ai-sdk/openai src/chat/openai-chat-api.ts:136-138 ({AI_OPENAI}): the chunk schema "
        "is a union tried in order; a chunk with both `choices` and `error` parses as an "
        "ordinary chunk (zod strips `error`), so openai-chat-language-model.ts:565 never "
        "sees the error",
    ("LangChain (HumanInTheLoopMiddleware)", "103-shape-header-resent"):
        f"langchain_core/utils/_merge.py:64, 88 ({LC_CORE}): chunk merging concatenates "
        "string fields (`merged[right_k] += right_v`), so a re-sent tool-call name is doubled",
    ("LangChain (HumanInTheLoopMiddleware)", "105-shape-arguments-object"):
        f"langchain_openai/chat_models/base.py:577 ({LC_OPENAI}): `args=rtc[\"function\"]"
        ".get(\"arguments\")` goes into a `tool_call_chunk`, which takes a string: an "
        "arguments object raises `ValidationError`",
    ("LangChain (HumanInTheLoopMiddleware)", "106-shape-reasoning-usage-on-finish"):
        f"langchain_openai/chat_models/base.py:1-11 ({LC_OPENAI}): \"Non-standard response "
        "fields ... (e.g., `reasoning_content`) are **not** extracted or preserved\"",
    ("LangChain (HumanInTheLoopMiddleware)", "113-shape-content-parts"):
        f"langchain_openai/chat_models/base.py:1-11, 564 ({LC_OPENAI}): reasoning is not "
        "extracted, and list `content` is kept as a list of parts",
    ("LangChain (HumanInTheLoopMiddleware)", "115-shape-bom-cr-reasoning"):
        f"langchain_openai/chat_models/base.py:1-11 ({LC_OPENAI}): `reasoning_content` is "
        "\"not extracted or preserved\"",
    ("LangChain (HumanInTheLoopMiddleware)", "114-shape-refusal"):
        f"langchain_openai/chat_models/base.py:564 ({LC_OPENAI}) "
        "`_convert_delta_to_message_chunk` reads `content` only; a streamed `refusal` is "
        "dropped (only the non-streamed message keeps it in `additional_kwargs`, line 253)",
    # SPEC §6, fourth batch: a name in pieces (118: `get_wea`, `ther` on call_1; call_2's
    # `get_time` re-sent in full) and a header without `index` (119). 121 is 118 with every
    # name sent whole and once, 132 is 119's turn in the plain shape (and 117 its call with
    # `index: 0` after an early stop): their variants; 103 (a name re-sent in full) tells a
    # failed 118's two causes apart.
    ("Microsoft Agent Framework", "118-shape-name-in-pieces"):
        f"agent_framework/_types.py:2092 ({MAF}) `_add_function_call_content`: the merged "
        "name is `self_name or other_name`, the first non-empty piece, so `ther` is dropped "
        "and `get_wea` is sent (a name re-sent in full is kept: 103 passes)",
    ("Microsoft Agent Framework", "119-shape-header-without-index"):
        f"agent_framework_openai/_chat_completion_client.py:676-677 ({MAF_OPENAI}): a delta "
        "without `index` gets no occurrence id, the fragments on index 0 get that index's, "
        f"and agent_framework/_types.py:2059-2060 ({MAF}) refuses to merge calls with "
        "different ids (caught at 2706, appended): the header is sent as call_1 with `\"\"` "
        "arguments and the arguments as a second, nameless call (117, the same call with "
        "`index: 0`, passes)",
    ("OpenAI Agents SDK", "118-shape-name-in-pieces"):
        f"agents/models/chatcmpl_stream_handler.py:1037-1039 ({OAI_AGENTS}): each non-empty "
        "name fragment replaces the name (\"it's correct from the first function call "
        "chunk\"), so `get_wea` is overwritten by `ther` (a name re-sent in full is the same "
        "value: 103 passes)",
    ("OpenAI Agents SDK", "119-shape-header-without-index"):
        f"agents/models/chatcmpl_stream_handler.py:1020-1028 ({OAI_AGENTS}): calls are keyed "
        "by `tc_delta.index` as sent, so the header (index `None`) and the fragments on index "
        "0 are two calls, the second with no name and call id `\"\"`, which "
        "run_internal/tool_planning.py:407-410 refuses with `ModelBehaviorError` (117, the "
        "same call with `index: 0`, passes)",
    ("Pydantic AI", "118-shape-name-in-pieces"):
        f"pydantic_ai/messages.py:6955 ({PYD}): `tool_name = part.tool_name + "
        "self.tool_name_delta` joins call_1's pieces (`get_weather` is right) and also "
        "doubles call_2's name re-sent in full: 103's deviation, not the pieces",
    ("Pydantic AI", "119-shape-header-without-index"):
        f"pydantic_ai/_parts_manager.py:418-421, 428-448 ({PYD}): a delta without `index` "
        "but with a name opens a part under no vendor id, so the fragments on index 0 find "
        "none and open a nameless `ToolCallPartDelta`, which `get_parts` (line 143) leaves "
        "out: `list_files` runs with `{}` (117, the same call with `index: 0`, passes)",
    ("Vercel AI SDK", "118-shape-name-in-pieces"):
        f"@ai-sdk/provider-utils src/streaming-tool-call-tracker.ts:187-190, 242-246 "
        f"({AI_UTILS}): a name piece on index 0 that differs from the call's name matches no "
        "call there and opens a new call named `ther` (lines 133-144); the arguments after it "
        "match two calls and are dropped as ambiguous (128-130, 285-288), so `get_wea` is "
        "sent with no arguments (a name re-sent in full matches: 103 passes)",
    ("Vercel AI SDK", "119-shape-header-without-index"):
        f"@ai-sdk/openai src/chat/openai-chat-api.ts:154 ({AI_OPENAI}): `index: z.number()` "
        "refuses the header chunk (101's cause), openai-chat-language-model.ts:555-559 drops "
        "it with an error part, and the fragments on index 0 then open a nameless call, "
        f"which @ai-sdk/provider-utils src/streaming-tool-call-tracker.ts:332-336 ({AI_UTILS}) "
        "refuses (`Expected 'function.name' to be a string`); the tracker alone would join "
        "them (253-257)",
    ("LangChain (HumanInTheLoopMiddleware)", "118-shape-name-in-pieces"):
        f"langchain_core/utils/_merge.py:64 ({LC_CORE}): the chunks of one index are merged "
        "by `merged[right_k] += right_v`, which joins call_1's pieces (`get_weather` is "
        "right) and also doubles call_2's name re-sent in full: 103's deviation, not the "
        "pieces",
    ("LangChain (HumanInTheLoopMiddleware)", "119-shape-header-without-index"):
        f"langchain_core/utils/_merge.py:118-122, 174-176 ({LC_CORE}): only chunks with an "
        "int `index` are merged, so the header (index `None`) and the fragments on index 0 "
        "stay two calls: `list_files` runs with `{}`, and the nameless one gets an "
        f"unknown-tool `ToolMessage` with `tool_call_id=None` (langgraph/prebuilt/"
        f"tool_node.py:1324, {LG_PREBUILT}): `ValidationError` (117, the same call with "
        "`index: 0`, passes)",
    # 120: a piece equal to the name so far (122, its variant, sends each name whole); no
    # peer checks the readings against the offered tools, each reads such a piece the one
    # way it reads every piece (118)
    ("Microsoft Agent Framework", "120-shape-name-pieces-that-repeat"):
        f"agent_framework/_types.py:2092 ({MAF}): the first non-empty name is kept (`self_name "
        "or other_name`), so `bye`, `bye` stays `bye`; the offered tools are not consulted",
    ("OpenAI Agents SDK", "120-shape-name-pieces-that-repeat"):
        f"agents/models/chatcmpl_stream_handler.py:1037-1039 ({OAI_AGENTS}): each name "
        "fragment replaces the name, so `bye`, `bye` is `bye`; the offered tools are not "
        "consulted",
    ("Pydantic AI", "120-shape-name-pieces-that-repeat"):
        f"pydantic_ai/messages.py:6955 ({PYD}): name fragments are always concatenated: "
        "`byebye` is right, call_2's `say`, `say` becomes `saysay`; the offered tools are not "
        "consulted",
    ("Vercel AI SDK", "120-shape-name-pieces-that-repeat"):
        f"@ai-sdk/provider-utils src/streaming-tool-call-tracker.ts:242-246, 272-274 "
        f"({AI_UTILS}): a name piece equal to the call's name matches that call, and "
        "`processExistingToolCall` (430-443) appends only arguments: `bye` stays `bye`; the "
        "offered tools are not consulted",
    ("Vercel AI SDK", "128-two-approvals-both-approved"):
        f"ai/src/generate-text/collect-tool-approvals.ts:81, 119 ({AI}) collects approvals in "
        "the order of the answers, and stream-text.ts:1615-1644 runs the approved calls under "
        "`Promise.all`, adding each result as it finishes; the tool message lists those "
        "results, then the denied calls' (1657, 1695): results follow the answers, not the "
        "calls (R4: in call order). 006 passes only because its approved call is the first",
    ("Vercel AI SDK", "129-both-need-approval-one-rejected"): _AI_DENIED_LAST,
    ("Vercel AI SDK", "133-rejected-call-called-again-and-approved"): _AI_DENIED_LAST,
    ("LangChain (HumanInTheLoopMiddleware)", "120-shape-name-pieces-that-repeat"):
        f"langchain_core/utils/_merge.py:64 ({LC_CORE}): name strings of one index are always "
        "concatenated: `byebye` is right, call_2's `say`, `say` becomes `saysay`; the offered "
        "tools are not consulted",

    ("Strands Agents (BeforeToolCallEvent interrupts)", "019-invalid-json-arguments"):
        f"strands/event_loop/streaming.py:306-315 ({STRANDS}): arguments that are not JSON "
        "are logged (\"defaulting to empty dict\") and become `{}`; the tool runs with them",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "039-arguments-not-an-object"):
        f"strands/event_loop/streaming.py:306-308 ({STRANDS}): any JSON value is kept as the "
        "call's input and models/openai.py:219 sends it back as it is; nothing checks for an "
        "object (the tool is called with the list)",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "024-length-with-tool-calls"):
        f"strands/event_loop/event_loop.py:318-327 ({STRANDS}): a `max_tokens` stop raises "
        "`MaxTokensReachedException` out of the run, after the partial message, its cut-off "
        "call replaced by a text, \"has been added to the conversation history\"",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "025-failed-first-call"):
        f"strands/models/_openai_errors.py:39-44 ({STRANDS}): a 400 with "
        "`context_length_exceeded` is a context overflow (models/openai.py:816-818), and "
        "agent/agent.py:1913-1922 answers it with the default conversation manager's "
        "`reduce_context`, which drops the oldest messages, and calls the model again: the "
        "failed run changes the history and makes a request the case does not have",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "027-stream-cut"):
        f"strands/models/openai.py:803 ({STRANDS}): `finish_reason or \"end_turn\"`: a body "
        "cut before any finish reason ends as a complete turn; openai/_streaming.py:173 "
        f"({STRANDS_OPENAI}) looks only for `[DONE]`",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "104-shape-arguments-whole"):
        f"strands/models/openai.py:809-810 ({STRANDS}): usage is read from the last chunk's "
        "top-level `usage` only; `x_groq.usage` is not read (the derived finish keeps usage "
        "compared in a case about usage)",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "105-shape-arguments-object"):
        f"strands/event_loop/streaming.py:233 ({STRANDS}): argument fragments are joined with "
        "`+=` onto a string, so an arguments object raises `TypeError` out of the run",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "113-shape-content-parts"):
        f"strands/models/openai.py:774-777 ({STRANDS}) passes `delta.content` on as text and "
        "event_loop/streaming.py:243 joins it with `+=`: list `content` raises `TypeError`",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "114-shape-refusal"):
        f"strands/models/openai.py:774 ({STRANDS}): only `delta.content` is read; a streamed "
        "`refusal` is dropped and the turn ends with no text",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "115-shape-bom-cr-reasoning"):
        f"openai/_streaming.py:322 ({STRANDS_OPENAI}): lines are decoded with `utf-8`, not "
        "`utf-8-sig`, so the leading BOM makes the first field `\\ufeffdata`, an unknown "
        "field: the first event (the reasoning's first delta) is dropped",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "117-shape-stop-then-call"):
        f"strands/models/openai.py:785-789 ({STRANDS}): the first chunk with a "
        "`finish_reason` ends the reading of choices (`break`); the call sent after it is "
        "never seen",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "118-shape-name-in-pieces"):
        f"strands/models/openai.py:791-793, 569 ({STRANDS}): a call's name is the first "
        "delta's `function.name` only, so `ther` is dropped and `get_wea` is sent (a name "
        "re-sent in full is the same value: 103 passes)",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "119-shape-header-without-index"):
        f"strands/models/openai.py:783 ({STRANDS}): deltas are grouped by `tool_call.index` "
        "as sent, so the header (index `None`) and the fragments on index 0 are two calls: "
        "call_1 runs with `{}` (empty input, event_loop/streaming.py:302-305) and the "
        "nameless one is skipped as incomplete (streaming.py:320-329) (117's call with "
        "`index: 0` never gets that far: 117 fails on its early finish)",
    ("Strands Agents (BeforeToolCallEvent interrupts)", "120-shape-name-pieces-that-repeat"):
        f"strands/models/openai.py:791-793, 569 ({STRANDS}): the first name piece is the "
        "name, so `bye`, `bye` stays `bye`; the offered tools are not consulted",
    ("Google ADK", "037-echo-canonical-json"):
        f"{_ADK_WRAPS}; and google/adk/tools/function_tool.py:402 ({ADK}) "
        "`_prepare_invocation_args` passes a function only the arguments its signature "
        "names, so `nested`, which the schema does not list, never reaches the tool",
    ("Google ADK", "019-invalid-json-arguments"):
        f"google/adk/models/lite_llm.py:4284-4306 ({ADK}): arguments that do not parse end "
        "the model turn with `MALFORMED_FUNCTION_CALL` (an error event) and the run stops; "
        "the model gets no answer",
    ("Google ADK", "039-arguments-not-an-object"):
        f"google/adk/models/lite_llm.py:3012-3013, 3095-3106 ({ADK}): a call whose "
        "arguments are not a JSON object is left out of the content and the turn ends as "
        "`MALFORMED_FUNCTION_CALL` (an error event); the model gets no answer",
    ("Google ADK", "024-length-with-tool-calls"):
        f"google/adk/models/lite_llm.py:4516-4522 ({ADK}): a `length` finish finalises the "
        "turn's calls like `tool_calls`; calls whose arguments parse are executed "
        "(only unparsable ones become MAX_TOKENS, 4284-4296)",
    ("Google ADK", "103-shape-header-resent"):
        f"google/adk/models/lite_llm.py:4424-4425 ({ADK}): a streamed call's name is "
        "joined with `+=`, so a re-sent name is doubled",
    ("Google ADK", "118-shape-name-in-pieces"):
        f"google/adk/models/lite_llm.py:4424-4425 ({ADK}): name pieces are always "
        "concatenated, so a name re-sent in full is doubled",
    ("Google ADK", "120-shape-name-pieces-that-repeat"):
        f"google/adk/models/lite_llm.py:4424-4425 ({ADK}): name pieces are always "
        "concatenated; no piece is checked against the offered tools",
    ("Google ADK", "104-shape-arguments-whole"):
        f"litellm/litellm_core_utils/streaming_chunk_builder_utils.py:1064-1110 ({LITELLM}): "
        "a stream whose chunks carry no top-level `usage` gets usage estimated with the "
        "tokenizer (`token_counter`); `x_groq.usage` is not read",
    ("Google ADK", "113-shape-content-parts"):
        f"litellm/litellm_core_utils/streaming_handler.py:839-841 ({LITELLM}): a chunk counts "
        "only when its `content` is a non-empty string, so list `content` (the thinking part "
        "and `Hello`) is dropped",
    ("Google ADK", "114-shape-refusal"):
        f"google/adk/models/lite_llm.py:2782-2792 ({ADK}) `_has_meaningful_signal` reads "
        "`content`, calls and reasoning, never `refusal`: the refused turn has no text",
    ("Google ADK", "115-shape-bom-cr-reasoning"):
        f"openai/_streaming.py:322 ({ADK_OPENAI}): lines are decoded with `utf-8`, not "
        "`utf-8-sig`, so the leading BOM makes the first field `\\ufeffdata`, an unknown "
        "field: the first event (the reasoning's first delta) is dropped",
    ("Google ADK", "117-shape-stop-then-call"):
        f"google/adk/models/lite_llm.py:4525-4533, 4555-4560 ({ADK}): a `stop` finish ends "
        "the text response and resets the buffers, so the call that follows becomes an "
        "assistant message of its own, not part of the turn's message",
}

# (peer, case) -> (rule, evidence) where reading the first difference is not enough
CASE_NOTES = {
    ("OpenAI Agents SDK", "111-shape-error-in-chunk"): (
        "R10", "the error is raised as SPEC §6 asks; the user message stays in the Session "
        f"because agents/run_internal/run_loop.py:2576 ({OAI_AGENTS}) saves the input before "
        "the model's stream is read"),
    ("OpenAI Agents SDK", "112-shape-event-error"): (
        "R10", "the error is raised as SPEC §6 asks; the user message stays in the Session "
        f"because agents/run_internal/run_loop.py:2576 ({OAI_AGENTS}) saves the input before "
        "the model's stream is read"),
    ("LangChain (HumanInTheLoopMiddleware)", "111-shape-error-in-chunk"): (
        "R10", "the error is raised as SPEC §6 asks; the user message stays in the thread "
        f"because langgraph/pregel/_loop.py:1223 ({LG}) saves the input checkpoint before "
        "the model call"),
    ("LangChain (HumanInTheLoopMiddleware)", "112-shape-event-error"): (
        "R10", "the error is raised as SPEC §6 asks; the user message stays in the thread "
        f"because langgraph/pregel/_loop.py:1223 ({LG}) saves the input checkpoint before "
        "the model call"),
    ("LangChain (HumanInTheLoopMiddleware)", "006-two-approvals-one-each"): (
        "R4", f"human_in_the_loop.py:861-863 ({LC}): the rejections' `ToolMessage`s are "
        "returned right after the AI message and the approved calls run later in the tool "
        "node, so call_b's rejection comes before call_a's result (R4: in call order)"),
}


def classify(peer: str, case_id: str, rules, detail: str, broke: str = "") -> tuple[str, str]:
    """``(rule, evidence)`` for a failing case of ``peer``; ``broke`` is the runner's
    rule for the failure (``Outcome.broke``), which wins where it is not the case's
    own first rule (an aspect of another rule, or what a failed run left: R10)."""
    if (peer, case_id) in CASE_NOTES:
        return CASE_NOTES[(peer, case_id)]
    rule = broke if broke and broke not in rules[:1] else rule_broken(case_id, rules, detail)
    evidence = CASE_EVIDENCE.get((peer, case_id)) or EVIDENCE.get((peer, rule))
    return rule, evidence or "none recorded yet"
