"""What a case compares (SPEC §8, fourth batch): an aspect that one rule is about is
compared exactly only by the cases of that rule; every other core case compares it
loosely, so one deviation fails one rule's cases, not the whole suite
(conformance/README.md, "What a case compares").

``compared(case)`` names the aspects a case compares exactly; ``loosen_message`` and
``loosen_update`` turn a case's expectation into the loose form for the others, and
``_first_difference`` in runner.py reads the markers they leave (``$text``,
``$result``). ``Difference`` carries the rule a difference breaks, so a failure is
tallied under that rule, not under the case's own.
"""

from __future__ import annotations

import json
import re

# aspect -> the rule it belongs to; None: only a case that names it in "about" compares it
ASPECTS = {
    "system_text": "R1",        # text a framework adds to the system message
    "rejection_text": "R7",     # "Rejected: <reason>"
    "error_text": "R13",        # "Error: <type>: <message>"
    "tool_answer_text": "R14",  # "Error: unknown tool …", "Error: arguments are not valid JSON: …"
    "result_wrapping": "R2",    # a result sent as {"result": …}
    "usage": None,              # a finish's usage, even where the adapter derives the finish
}

_ERROR = re.compile(r"Error: [\w.]+: ")


class Difference(str):
    """The text of one difference and ``rule``, the rule it breaks (``None``: the
    measured rule of its case, its first)."""

    rule: str | None

    def __new__(cls, text: str, rule: str | None = None):
        made = super().__new__(cls, text)
        made.rule = rule
        return made


def compared(case: dict) -> frozenset:
    """The aspects ``case`` compares exactly: for a core case those whose rule is among
    its ``rules`` and those it names in ``about``; every one for an ``agentflow``-suite
    case, whose texts are agentflow's own (SPEC §8: settled by agentflow's README)."""
    if case.get("suite", "core") != "core":
        return frozenset(ASPECTS)
    rules = set(case.get("rules", ()))
    return frozenset(a for a, rule in ASPECTS.items() if rule in rules) | frozenset(
        a for a in case.get("about", ()) if a in ASPECTS)


def text_kind(expected) -> str:
    """The aspect a tool result the case expects belongs to: one of the three texts
    SPEC fixes (by their prefixes), or ``result_wrapping`` for a tool's own result."""
    text = expected.get("$prefix", "") if isinstance(expected, dict) else str(expected or "")
    if text.startswith("Rejected: "):
        return "rejection_text"
    if text.startswith(("Error: unknown tool", "Error: arguments are not valid JSON")):
        return "tool_answer_text"
    if _ERROR.match(text):
        return "error_text"
    return "result_wrapping"


def loosen(expected, exact: frozenset):
    """An expected tool result in its loose form where ``exact`` lacks its aspect:
    a SPEC text becomes ``{"$text": aspect}`` (any string), a tool's own result
    ``{"$result": value}`` (the value, or an object of one member holding it). A SPEC
    text its rule's case compares exactly may still come wrapped where ``exact`` lacks
    the wrapping: that is R2's aspect, not R7's, R13's or R14's (SPEC §8); a case that
    compares both is judged on both together (``runner.by_rule``)."""
    kind = text_kind(expected)
    if kind in exact:
        wrapping_loose = kind != "result_wrapping" and "result_wrapping" not in exact
        return {"$result": expected} if wrapping_loose else expected
    return {"$result": expected} if kind == "result_wrapping" else {"$text": kind}


def loosen_message(message: dict, exact: frozenset) -> dict:
    if message.get("role") != "tool":
        return message
    return {**message, "content": loosen(message.get("content"), exact)}


def loosen_update(update: dict, exact: frozenset) -> dict:
    if update.get("type") != "tool_result" or "result" not in update:
        return update
    return {**update, "result": loosen(update["result"], exact)}


def firm(expected):
    """``expected`` with the markers of ``loosen`` replaced by what they stand for, to
    show in a failure text."""
    if isinstance(expected, dict):
        if set(expected) == {"$result"}:
            return firm(expected["$result"])
        if set(expected) == {"$text"}:
            return f"<any text: {expected['$text']}>"
        return {k: firm(v) for k, v in expected.items()}
    if isinstance(expected, list):
        return [firm(v) for v in expected]
    return expected


def matches_loosely(marker: dict, actual) -> bool:
    """Whether ``actual`` matches a ``$text`` or ``$result`` marker of ``loosen``."""
    if "$text" in marker:
        return isinstance(actual, str)
    value = marker["$result"]
    if matches(value, actual):
        return True
    try:
        wrapped = json.loads(actual, object_pairs_hook=_once) if isinstance(actual, str) \
            else actual
    except ValueError:
        return False
    return isinstance(wrapped, dict) and len(wrapped) == 1 and matches(
        value, next(iter(wrapped.values())))


def _once(pairs: list) -> dict:
    """An object whose members are named once each: ``{"result": "x", "result": "y"}``
    is no object of one member (``json.loads`` would keep the last)."""
    if len({key for key, _ in pairs}) != len(pairs):
        raise ValueError("a member is named twice")
    return dict(pairs)


def matches(value, actual) -> bool:
    """``actual`` is ``value``, or starts with it where the case gives a ``$prefix``
    (R14's answer to unparsable arguments; ``_first_difference`` reads it the same way)."""
    if isinstance(value, dict) and set(value) == {"$prefix"}:
        return isinstance(actual, str) and actual.startswith(value["$prefix"])
    return actual == value
