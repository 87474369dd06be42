"""``make conformance-peers``: run the peer adapters of conformance/adapters and write
conformance/PEERS.md — per peer and version the outcomes per suite, what the adapter
configured, every failing case as "breaks Rn: its first difference" with the variant that
isolates the rule (a passing base case that differs from it in that rule's point only, or
that no such case exists) and the framework's source (conformance/findings.py), every
skip with its reason.

Run from the repository root in .conformance-venv (the peers' pinned versions are in
conformance/adapters/requirements.txt and conformance/adapters/node/package.json; a peer
of ``VENVS`` runs in a venv of its own, pinned in requirements-NAME.txt).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import sys
from pathlib import Path

from .findings import classify, variant
from .loader import load_cases
from .report import counts
from .runner import Adapter, Outcome, run_all

ROOT = Path(__file__).resolve().parent.parent
NODE = ROOT / "conformance" / "adapters" / "node"
PEERS = [  # (name, adapter: a Python module, or a Node script in adapters/node)
    ("Microsoft Agent Framework", "conformance.adapters.peer_maf"),
    ("OpenAI Agents SDK", "conformance.adapters.peer_openai_agents"),
    ("Pydantic AI", "conformance.adapters.peer_pydantic_ai"),
    ("Vercel AI SDK", "peer_ai_sdk.js"),
    ("LangChain (HumanInTheLoopMiddleware)", "conformance.adapters.peer_langchain"),
    ("Strands Agents (BeforeToolCallEvent interrupts)", "conformance.adapters.peer_strands"),
    ("Google ADK", "conformance.adapters.peer_adk"),
]
# The adapters whose framework's pins clash with the others' (openai 2.x, another
# OpenTelemetry) run in .conformance-venv-NAME, which the Makefile builds from
# adapters/requirements-NAME.txt; every other Python adapter runs in this interpreter's venv.
VENVS: dict[str, str] = {"conformance.adapters.peer_strands": "strands",
                         "conformance.adapters.peer_adk": "adk"}


def python_of(adapter: str) -> Path:
    """The interpreter that runs the Python ``adapter``: its own venv's (``VENVS``), which
    may not exist yet, or this one's."""
    if adapter in VENVS:
        return ROOT / f".conformance-venv-{VENVS[adapter]}" / "bin" / "python"
    return Path(sys.executable)


def command(adapter: str) -> str | None:
    """The command line that starts ``adapter``, or ``None`` when it is not there
    (its module or its own venv missing, or ``node`` / the Node packages not installed)."""
    if adapter.endswith(".js"):
        node = shutil.which("node")
        if node is None or not (NODE / "node_modules" / "ai").is_dir():
            return None
        return f"{node} {NODE / adapter}"
    python = python_of(adapter)
    if importlib.util.find_spec(adapter) is None or not python.exists():
        return None
    return f"{python} -m {adapter}"
OUT = Path(__file__).resolve().parent / "PEERS.md"
SAVED = OUT.parent / ".peers"  # each peer's last outcomes, so one peer can be re-run alone


def section(name: str, outcomes) -> list[str]:
    version = next((o.implementation for o in outcomes if o.implementation), "unknown")
    status = {o.case_id: o.status for o in outcomes}
    # the rule each failure breaks, also shown where a base fails for another rule
    broke = {o.case_id: classify(name, o.case_id, o.rules, o.detail, o.broke)[0]
             for o in outcomes if o.status == "fail"}
    details = {o.case_id: o.detail for o in outcomes if o.status == "fail"}
    lines = [f"## {name}", "", f"Version: {version}.", "",
             "| suite | passed | failed | skipped |", "|---|---|---|---|"]
    for suite, c in counts(outcomes, lambda o: [o.suite]).items():
        lines.append(f"| {suite} | {c['pass']} | {c['fail']} | {c['skip']} |")
    configured = next((o.configured for o in outcomes if o.configured), ())
    if configured:
        lines += ["", "Configured through the framework's own parameters (README, \"Mapping a "
                      "framework\"):", ""] + [f"- {c}" for c in configured]
    failed = [o for o in outcomes if o.status == "fail"]
    if failed:
        claims, kinds = [], []
        for o in failed:
            rule, evidence = classify(name, o.case_id, o.rules, o.detail, o.broke)
            kind, shown = variant(o.case_id, rule, status, broke, details)
            kinds.append(kind)
            what = o.detail.splitlines()[0].replace("|", "\\|")
            claims += [f"- `{o.case_id}` breaks {rule}: {what}", f"  - variant: {shown}",
                       f"  - evidence: {evidence}"]
        lines += ["", f"Deviations: {len(failed)}; shown by a passing variant "
                      f"{kinds.count('isolated')}, not isolated here "
                      f"{kinds.count('not isolated')}, with no case that differs in the "
                      f"rule only {kinds.count('no case')}. Each: the rule its first "
                      "difference breaks, that difference, the variant (a base case the "
                      "peer passes whose inputs differ from the failing case's in that "
                      "rule's point only, conformance/findings.py), the evidence:", ""]
        lines += claims
    skipped = [o for o in outcomes if o.status == "skip" and o.suite == "core"]
    if skipped:
        lines += ["", "Skipped (core):", ""]
        lines += [f"- `{o.case_id}`: {o.detail}" for o in skipped]
    other = sum(o.status == "skip" and o.suite != "core" for o in outcomes)
    if other:
        lines += ["", f"{other} `agentflow`-suite cases skipped (suite not declared)."]
    derived = [o for o in outcomes if o.derived]
    if derived:
        lines += ["", f"Passing cases that differ only in fields the adapter derives: "
                      f"{', '.join(o.case_id for o in derived)}."]
    return lines + [""]


def main(argv=None) -> int:
    """Run the peers named in ``argv`` (adapter names as in ``PEERS``; all when none) and
    write PEERS.md from the outcomes of every peer: a peer not run this time keeps the
    outcomes saved by its last run (git-ignored ``conformance/.peers/``)."""
    wanted = (argv if argv is not None else sys.argv[1:]) or [m for _, m in PEERS]
    cases = load_cases()
    SAVED.mkdir(exist_ok=True)
    lines = ["# The peers, through the conformance suite", "",
             "Written by `make conformance-peers` (conformance/peers.py); do not edit by "
             "hand. Each peer runs behind its adapter in `conformance/adapters/`, at the "
             "versions pinned in `conformance/adapters/requirements.txt` (a peer in a venv of "
             "its own: `requirements-NAME.txt`) and "
             "`conformance/adapters/node/package.json`. A deviation is the first difference "
             "of a failing case, under the rule that difference breaks "
             "(`conformance/findings.py`); a skip "
             "is the adapter's declaration that the framework cannot express the case "
             "(`conformance/README.md`, \"Suites, features and derived fields\").", ""]
    # One row per peer ahead of the sections: its version and its core outcomes.
    summary = ["| peer | version | core passed | failed | skipped |", "|---|---|---|---|---|"]
    sections: list[str] = []
    for name, module in PEERS:
        saved = SAVED / f"{module}.json"
        if module in wanted:
            start = command(module)
            if start is None:
                where = f" in {python_of(module).parent.parent.name}" if module in VENVS else ""
                print(f"{name}: not installed ({module}{where})")
                saved.unlink(missing_ok=True)
            else:
                outcomes = run_all(lambda: Adapter(start), cases)
                c = counts(outcomes, lambda o: ["all"])["all"]
                print(f"{name}: {c['pass']} passed, {c['fail']} failed, {c['skip']} skipped")
                saved.write_text(json.dumps([dataclasses.asdict(o) for o in outcomes]),
                                 encoding="utf-8")
        if not saved.exists():
            summary.append(f"| {name} | not installed | | | |")
            sections += [f"## {name}", "", f"Not installed (`{module}`); not measured.", ""]
            continue
        outcomes = [Outcome(**{**o, "rules": tuple(o["rules"]), "derived": tuple(o["derived"]),
                               "configured": tuple(o.get("configured", ()))})
                    for o in json.loads(saved.read_text(encoding="utf-8"))]
        version = next((o.implementation for o in outcomes if o.implementation), "unknown")
        core = counts([o for o in outcomes if o.suite == "core"], lambda o: ["core"]).get(
            "core", {"pass": 0, "fail": 0, "skip": 0})
        summary.append(f"| {name} | {version} | {core['pass']} | {core['fail']} | "
                       f"{core['skip']} |")
        sections += section(name, outcomes)
    OUT.write_text("\n".join(lines + summary + [""] + sections), encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
