"""The allowlist against the real programs (issue 36, SPEC R19 addendum): every word the
table (``agentflow.commandline.allowlist.TABLE``) says is harmless, run under bwrap in
a scratch git repository whose history holds a committed-then-removed secret, with a
canary program first on PATH (pagers, editors, ssh …: running one leaves a mark) and a
canary variable in the environment. Each line the table allows must write no file,
run no canary and print neither canary. A known-bad entry (``git log --output=F``)
added to the table makes the check fail. The programs that run the repository's code
(make, npm test, pytest) are left out: their entries are about which code runs, which
the sandbox contains."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest

from agentflow.commandline import allowlist
from agentflow.commandline.allowlist import Known, _spec

from helpers_cli import need_bwrap
from test_allowlist import history_repo

pytestmark = pytest.mark.slow
CANARY = "sk_live_canary_36_differential"
CANARY_PROGRAMS = ("less", "more", "pager", "sensible-pager", "vi", "vim", "nano", "emacs",
                   "ssh", "gpg", "sh-canary", "xdg-open", "git-upload-pack")
BUILTINS = {"export", "set", "declare", "typeset", "cd", "echo", "pwd", "true", "false"}


def _variants(name: str, known: Known) -> list:
    spec = known.spec
    if name == "find":
        return ([[p] for p in sorted(allowlist._FIND_FLAGS) if p not in "()!"]
                + [[p, "x"] for p in sorted(allowlist._FIND_VALUED)])
    return ([[]] + [[f"-{c}"] for c in spec.flags] + [[f"-{c}", "1"] for c in spec.valued]
            + [[f"--{n}"] for n in spec.long_flags + spec.long_optional]
            + [[f"--{n}=1"] for n in spec.long_valued])


def claims(table: dict, root: str) -> list:
    """The lines the table allows: each program (and sub-command) with each of its known
    words, the first of a few forms (bare, with an operand, in a summary form) its entry
    allows."""
    lines = []

    def walk(name, known, head):
        if known.runs_code:
            return
        if known.subs:
            for sub, inner in known.subs.items():
                walk(name, inner, head + [sub])
            return
        for variant in _variants(name, known):
            for args in (variant, variant + ["f"], ["--stat"] + variant, variant + ["HEAD"]):
                if allowlist._words(known, " ".join(head), args, root, True) is None:
                    lines.append(shlex.join(head + args))
                    break

    for name, known in table.items():
        if shutil.which(name) or name in BUILTINS:
            walk(name, known, [name])
    return lines


def _snapshot(folder) -> dict:
    seen = {}
    for here, dirs, files in os.walk(folder):
        for entry in files + dirs:
            path = os.path.join(here, entry)
            rel = os.path.relpath(path, folder)
            if rel in (".git/index", ".git/index.lock") or rel.startswith(".git/objects/"):
                continue  # git status refreshes the index's stat data
            info = os.lstat(path)
            seen[rel] = None if entry in dirs else (info.st_size, info.st_mtime_ns)
    return seen


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    need_bwrap()
    base = tmp_path_factory.mktemp("differential")
    repo, marks, canary = base / "repo", base / "marks", base / "canary"
    for folder in (repo, marks, canary, base / "home"):
        folder.mkdir()
    for program in CANARY_PROGRAMS:
        (canary / program).write_text(f"#!/bin/sh\ntouch {marks}/{program}\n")
        (canary / program).chmod(0o755)

    git = history_repo(repo, CANARY)
    git("tag", "v1")
    return repo, marks, canary


def offenders(lines: list, scratch) -> list:
    """The lines that wrote a file, ran a canary program or printed a canary."""
    repo, marks, canary = scratch
    home = repo.parent / "home"  # npm keeps its logs there: not the workspace
    env = {"PATH": f"{canary}:/usr/bin:/bin", "HOME": str(home), "SECRET_TOKEN": CANARY,
           "PAGER": str(canary / "pager"), "EDITOR": str(canary / "vi"),
           "VISUAL": str(canary / "vi"), "LC_ALL": "C"}
    bad = []
    for line in lines:
        before = _snapshot(repo)
        shell = "bash" if line.split()[0] in ("declare", "typeset") else "sh"
        done = subprocess.run(
            ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
             "--tmpfs", "/tmp", "--bind", str(repo), str(repo), "--bind", str(marks),
             str(marks), "--bind", str(home), str(home), "--unshare-net", "--die-with-parent", "--chdir", str(repo),
             shell, "-c", line],
            capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
        after = _snapshot(repo)
        if before != after:
            changed = sorted(set(before.items()) ^ set(after.items()))
            bad.append((line, f"wrote {changed[:3]}"))
        if os.listdir(marks):
            bad.append((line, f"ran {os.listdir(marks)}"))
            for mark in os.listdir(marks):
                os.unlink(marks / mark)
        if CANARY in done.stdout + done.stderr:
            bad.append((line, "printed the canary"))
    return bad


def test_every_word_the_table_allows_writes_runs_and_prints_nothing(scratch):
    lines = claims(allowlist.TABLE, str(scratch[0]))
    assert len(lines) > 200, len(lines)  # the table is exercised, not skipped
    assert offenders(lines, scratch) == []


def test_a_known_bad_entry_fails_the_check(scratch):
    """``git log --output=F`` added to the table: the differential finds the write."""
    log = allowlist.GIT.subs["log"].spec
    bad = Known(_spec("git log", long_valued=log.long_valued + ("output",)))
    table = {"git": Known(allowlist.GIT.spec, subs={"log": bad})}
    lines = claims(table, str(scratch[0]))
    assert "git log --output=1" in lines
    found = offenders(["git log --output=1"], scratch)
    assert found and found[0][0] == "git log --output=1" and "wrote" in found[0][1]
    (scratch[0] / "1").unlink()
