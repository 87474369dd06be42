"""The runner's report (README, "Outcomes"): a line per case, then the counts per suite
(SPEC §8's profiles) and per rule, a failure under the rule it broke. A skip is always
shown with its reason."""

from __future__ import annotations

import sys
from collections import Counter

STATUSES = ("pass", "fail", "skip")


def counts(outcomes, key) -> dict[str, Counter]:
    """``{key: Counter(status → n)}`` over ``outcomes``; ``key(outcome)`` gives a list."""
    table: dict[str, Counter] = {}
    for outcome in outcomes:
        for name in key(outcome):
            table.setdefault(name, Counter())[outcome.status] += 1
    return table


def _line(counter: Counter) -> str:
    return f"{counter['pass']} passed, {counter['fail']} failed, {counter['skip']} skipped"


def rule_of(outcome) -> list[str]:
    """The rule an outcome counts under: a failure's ``broke`` (SPEC §8: the rule that
    broke, not the case's section), else the case's first rule."""
    if outcome.status == "fail" and outcome.broke:
        return [outcome.broke]
    return list(outcome.rules[:1])


def rule_order(rule: str):
    digits = "".join(c for c in rule if c.isdigit())
    return (not rule.startswith("R"), int(digits) if digits else 0, rule)


def report(outcomes, out=None) -> None:
    """Write the report of ``outcomes`` (``runner.Outcome``) to ``out`` (stdout)."""
    out = out or sys.stdout
    width = max((len(o.case_id) for o in outcomes), default=4)
    for o in outcomes:
        broke = f"  [broke {o.broke}]" if o.status == "fail" and o.broke not in o.rules[:1] else ""
        out.write(f"{o.status if o.status != 'fail' else 'FAIL'}  {o.case_id:<{width}}  "
                  f"{o.title}{broke}\n")
        if o.detail:
            out.write("      " + o.detail.replace("\n", "\n      ") + "\n")
        for note in o.derived:
            out.write(f"      derived (declared by the adapter): {note}\n")
    if len({o.suite for o in outcomes}) > 1 or any(o.status == "skip" for o in outcomes):
        for suite, counter in counts(outcomes, lambda o: [o.suite]).items():
            out.write(f"suite {suite}: {_line(counter)}\n")
    by_rule = counts(outcomes, rule_of)
    for rule in sorted(by_rule, key=rule_order):
        if by_rule[rule]["pass"] != sum(by_rule[rule].values()):
            out.write(f"rule {rule}: {_line(by_rule[rule])}\n")
    derived = sum(bool(o.derived) for o in outcomes)
    if derived:
        out.write(f"{derived} passing case(s) differ only in derived fields\n")
    out.write(_line(Counter(o.status for o in outcomes)) + "\n")
