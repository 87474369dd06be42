"""What PEERS.md says about a failing case (SPEC §8: every published claim names the
rule actually broken, shows it by a variant that differs from a passing case in that
rule only, and cites the framework's source or documentation).

``rule_broken`` reads the rule from the first difference, not from the case's first
rule: a rejection text that differs is R7 whatever the case is about. ``VARIANTS``
pairs each rule with cases that differ in that rule only, and ``EVIDENCE`` holds the
source lines and documentation found for each peer (written by hand from the pinned
versions; a deviation without an entry says so).
"""

from __future__ import annotations

import re

# rule -> (a case without the rule's point, a case that differs from it in that only)
VARIANTS = {
    "R7": ("001-approve", "002-reject-with-reason"),
    "R13 (error text)": ("015-tool-loop", "016-tool-error"),
    "R13": ("016-tool-error", "017-three-failing-rounds"),
    "R14": ("015-tool-loop", "018-unknown-tool"),
    "R5": ("006-two-approvals-one-each", "007-mixed-batch-sibling"),
    "R4": ("006-two-approvals-one-each", "008-missing-response"),
    "R6": ("001-approve", "022-new-input-with-approvals"),
    "R11": ("001-approve", "009-unknown-id"),
    "R12": ("001-approve", "012-already-answered"),
    "R10": ("015-tool-loop", "026-later-failure-keeps-results"),
    "R8": ("015-tool-loop", "020-max-rounds"),
}

_EXPECTED = re.compile(r'expected (?:text starting with )?"((?:[^"\\]|\\.)*)", got (.*)$')


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
        return "R12"  # the answered call ran again
    return rules[0] if rules else "?"


EVIDENCE = {  # (peer, rule) -> the framework's source or documentation
    ("Microsoft Agent Framework", "R7"):
        "agent_framework/_tools.py: a rejected call's result is the fixed text "
        "`\"Error: Tool call invocation was rejected by user.\"`; no parameter sets it",
    ("Microsoft Agent Framework", "R13 (error text)"):
        "agent_framework/_tools.py: `message = \"Error: Function failed.\"`, with "
        "`include_detailed_errors` only ` Exception: <message>` appended (no type name)",
    ("OpenAI Agents SDK", "R14"):
        "agents/exceptions.py `ModelBehaviorError`: \"calling a tool that doesn't exist\" "
        "raises; the run ends instead of answering the call",
    ("Pydantic AI", "R13 (error text)"):
        "a tool exception propagates out of the run (pydantic_ai tools: only `ModelRetry` "
        "is returned to the model); no formatter parameter exists",
    ("Vercel AI SDK", "R12"):
        "ai/src/generate-text/collect-tool-approvals.ts: an approval response is skipped "
        "only when its call has a `tool-result` in the **last** message "
        "(`for (const part of lastMessage.content)`), so a response re-sent after the result "
        "was stored runs the call again (`rm -rf /` ran twice)",
    ("Vercel AI SDK", "R7"):
        "@ai-sdk/openai convert-to-openai-chat-messages: a denied call's content is "
        "`output.reason ?? \"Tool call execution denied.\"`; no parameter sets the text",
    ("Vercel AI SDK", "R13 (error text)"):
        "ai createToolModelOutput: a tool error is `getErrorMessage(error)`, the bare "
        "`error.message` (@ai-sdk/provider getErrorMessage)",
    ("Vercel AI SDK", "R4"):
        "ai/src/generate-text/collect-tool-approvals.ts reads answers only from the last "
        "message; a call without an answer stays without a result and the prompt "
        "conversion raises `AI_MissingToolResultsError`",
    ("Vercel AI SDK", "R6"):
        "collect-tool-approvals.ts returns no approvals unless `messages.at(-1).role == "
        "\"tool\"`: input after the answers hides them (`AI_MissingToolResultsError`)",
    ("LangChain (HumanInTheLoopMiddleware)", "R7"):
        "langchain/agents/middleware/human_in_the_loop.py `_answer_message`: "
        "\"User rejected the tool call for `<name>` with reason: <reason>\"; a reject "
        "decision's `message` is only the reason",
    ("LangChain (HumanInTheLoopMiddleware)", "R5"):
        "human_in_the_loop.py `after_model`: calls not in `interrupt_on` are kept "
        "(\"This was auto-approved - keep original\") and run after the decisions",
    ("LangChain (HumanInTheLoopMiddleware)", "R11"):
        "human_in_the_loop.py: decisions are matched by position (`decisions[decision_idx]`); "
        "a resume with no interrupt open is not checked against anything",
    ("LangChain (HumanInTheLoopMiddleware)", "R10"):
        "the checkpointer saves the input with the first super-step, before the model call: "
        "a failed first call leaves the user message in the thread",
    ("LangChain (HumanInTheLoopMiddleware)", "R14"):
        "langgraph ToolNode answers an unknown tool `Error: <name> is not a valid tool, try "
        "one of [...]`; langchain_core/messages/ai.py builds a streamed call's arguments "
        "with `parse_partial_json`, so cut-off JSON (`{\"text\": \"unterminated`) is "
        "completed and run (019), and calls cut off by `length` are executed (024)",
}

# (peer, case) -> (rule, evidence) where reading the first difference is not enough
CASE_NOTES = {
    ("OpenAI Agents SDK", "034-resume-counts-one-round"): (
        "R8 (a resumed run's limit)",
        "agents/run.py: resuming a `RunState` sets `max_turns = run_state._max_turns`, "
        "ignoring the `max_turns` passed to the resumed run, so the case's `max_rounds` 1 "
        "never applies and R4's round count is not measured for this SDK"),
}


def classify(peer: str, case_id: str, rules, detail: str) -> tuple[str, str]:
    """``(rule, evidence)`` for a failing case of ``peer``."""
    if (peer, case_id) in CASE_NOTES:
        return CASE_NOTES[(peer, case_id)]
    rule = rule_broken(case_id, rules, detail)
    return rule, EVIDENCE.get((peer, rule), "none recorded yet")
