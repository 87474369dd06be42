"""The repository's specification, conformance/SPEC.md, against what cites it.

The code, the tests, the conformance cases and the READMEs cite rules by number ("SPEC
R7", ``"rules": ["R7"]``, "R1–R15", "R19 addendum") and sections by sign ("SPEC §6").
Every rule and section cited must be defined in conformance/SPEC.md, so a reader of a
clone can look it up. Where the shared specification (../shared/SPEC.md, outside the
repository) is present, both define the same rules and sections; where it is absent that
check skips, except under CI=true (.ci/run), where the shared folder must be there.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from helpers_streams import missing_shared_part

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "conformance" / "SPEC.md"
SHARED_SPEC = ROOT.parent / "shared" / "SPEC.md"

# Where citations live, and the kinds of file read there (not the recorded .sse bodies:
# they are provider data, where a token such as "R8" would be no citation).
CITING = ["agentflow", "tests", "conformance", "examples", "bench", "README.md"]
SUFFIXES = {".py", ".json", ".md", ".txt", ".js"}

# A rule cited: "R7", a range "R1–R15" (also "R1-R15", "R1..R15", "R1…R22") meaning every
# rule between, or "R19 addendum". Not inside a word or a base64 run ("R2D2", "xR8/",
# "AoR8l"): neither side may touch a letter, digit, "_", "/", "+", "=" or "\".
RULE_CITATION = re.compile(
    r"(?<![\w/+=\\])R(\d{1,2})(?:\s?(?:–|-|\.\.|…)\s?R(\d{1,2}))?( addendum)?(?![\w/+=])")
# A section cited: "SPEC §6", "SPEC.md §8", "SPEC §4–§5". Only after "SPEC": a bare "§"
# belongs as often to RFC 8785 or the WHATWG HTML standard.
SECTION_CITATION = re.compile(r"\bSPEC(?:\.md)? §(\d{1,2}[a-z]?)(?:–§(\d{1,2}[a-z]?))?")

# Definitions, the same in both files: a rule opens a paragraph in bold,
# "**R7 — The rejection text.**"; a section is a numbered heading, "## 5a. Trust …".
RULE_DEFINITION = re.compile(r"^\*\*(R\d+(?: addendum)?) — ", re.M)
SECTION_DEFINITION = re.compile(r"^#{2,3} (\d+[a-z]?)\. ", re.M)


def rule_citations(text: str) -> set[str]:
    """The rules ``text`` cites, as ``"R7"`` / ``"R19 addendum"``; a range stands for
    each rule in it."""
    cited = set()
    for first, last, addendum in RULE_CITATION.findall(text):
        if addendum:
            cited.add(f"R{first} addendum")
            continue
        low, high = int(first), int(last or first)
        cited.update(f"R{n}" for n in range(low, high + 1))
    return cited


def section_citations(text: str) -> set[str]:
    """The SPEC sections ``text`` cites, as ``"6"`` / ``"5a"`` (both ends of a range)."""
    return {s for pair in SECTION_CITATION.findall(text) for s in pair if s}


def definitions(text: str) -> tuple[list[str], list[str]]:
    """The rules and the sections a specification defines, in the order it defines them."""
    return RULE_DEFINITION.findall(text), SECTION_DEFINITION.findall(text)


def citing_files() -> list[Path]:
    """Every file of CITING with a SUFFIXES ending, leaving out caches, virtualenvs and
    installed packages (folders starting with "." or named __pycache__/node_modules)."""
    files = []
    for name in CITING:
        top = ROOT / name
        candidates = [top] if top.is_file() else top.rglob("*")
        for path in candidates:
            parts = path.relative_to(ROOT).parts
            if any(p.startswith(".") or p in ("__pycache__", "node_modules") for p in parts):
                continue
            if path.is_file() and path.suffix in SUFFIXES:
                files.append(path)
    return sorted(files)


def shared_spec() -> Path:
    """../shared/SPEC.md; skips the calling test when it is absent, or fails it under
    CI=true, where .ci/run always puts the shared folder beside the repository."""
    if SHARED_SPEC.is_file():
        return SHARED_SPEC
    missing_shared_part(f"the shared specification is not at {SHARED_SPEC} (it lives "
                        "outside the repository); conformance/SPEC.md cannot be compared "
                        "with it")


def test_citations_are_read_as_the_repository_writes_them():
    """The forms the repository uses, and look-alikes that are no citation."""
    assert rule_citations("SPEC R7; (R4, R5)") == {"R4", "R5", "R7"}
    assert rule_citations("`core` (R1–R15, §6)") == {f"R{n}" for n in range(1, 16)}
    assert rule_citations("rules R1…R3, R18-R20") == {"R1", "R2", "R3", "R18", "R19", "R20"}
    assert rule_citations('"rules": ["R3", "R19 addendum"]') == {"R3", "R19 addendum"}
    assert rule_citations("R2D2, RFC 8785, HR1, _R9, R100, rk_q2UyBRP7eX, a+R8/b=") == set()
    assert section_citations("(SPEC §3, R21); SPEC.md §8; SPEC §4–§5") == {"3", "8", "4", "5"}
    assert section_citations("RFC 8785 §3.2.3, WHATWG HTML §9.2.6, its §3") == set()


def test_the_specification_defines_each_rule_once_without_gaps():
    """R1..R27 and the two addenda, each once; the numbered rules run without a gap."""
    rules, sections = definitions(SPEC.read_text(encoding="utf-8"))
    assert len(rules) == len(set(rules)), sorted(r for r in rules if rules.count(r) > 1)
    numbered = sorted(int(r[1:]) for r in rules if " " not in r)
    assert numbered == list(range(1, 28))
    assert {r for r in rules if " " in r} == {"R19 addendum", "R22 addendum"}
    assert sections == ["1", "2", "3", "4", "5", "5a", "5b", "6", "6a", "7", "8"]


def test_every_cited_rule_and_section_is_defined():
    """Each rule and SPEC section cited anywhere in the repository exists in
    conformance/SPEC.md; the message names the files that cite a missing one."""
    rules, sections = (set(found) for found in definitions(SPEC.read_text(encoding="utf-8")))
    missing: dict[str, list[str]] = {}
    files = citing_files()
    assert SPEC in files and ROOT / "README.md" in files
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        cited = rule_citations(text) - rules
        cited |= {f"SPEC §{s}" for s in section_citations(text) - sections}
        for citation in cited:
            missing.setdefault(citation, []).append(str(path.relative_to(ROOT)))
    assert missing == {}


def test_the_shared_specification_defines_the_same_rules():
    """conformance/SPEC.md restates ../shared/SPEC.md: the same rules and sections (the
    order of rules may differ: the shared file states R22 before R20)."""
    ours = definitions(SPEC.read_text(encoding="utf-8"))
    theirs = definitions(shared_spec().read_text(encoding="utf-8"))
    assert sorted(ours[0]) == sorted(theirs[0])
    assert ours[1] == theirs[1]


def test_missing_shared_specification_skips_locally_and_fails_in_ci(monkeypatch, tmp_path):
    """shared_spec(): an absent ../shared/SPEC.md skips, except when CI == "true"."""
    monkeypatch.setattr(sys.modules[__name__], "SHARED_SPEC", tmp_path / "absent.md")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="absent.md"):
        shared_spec()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="absent.md"):
        shared_spec()


def test_both_readmes_link_the_specification():
    """A reader of either README reaches the rules from it."""
    assert "](conformance/SPEC.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](SPEC.md)" in (ROOT / "conformance" / "README.md").read_text(encoding="utf-8")
