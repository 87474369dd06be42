"""A wildcard rule is an allowlist (issue 36, SPEC R19 addendum, fourth batch): lines that
``git *``, ``make *``, ``npm *`` or a bare ``run_command`` let run although they wrote a
file, ran a program or printed a secret from history or the environment. Each is first
run for real in a temp folder, to show it does what the test says, then asked about
under the wildcard rules; the lines people mean still run without asking."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from agentflow import ApprovalPolicy
from agentflow.builtin.builtin_tools import builtin_tools
from agentflow.policy import decide

CANARY = "sk_live_canary_36"


def run_tool(workspace, sandboxed=False):
    tool = builtin_tools(["run_command"], workspace=workspace)[0]
    tool.sandboxed = sandboxed  # as the policy sees a sandbox (the sandbox: test_sandbox.py)
    return tool


def decided(rules, line, workspace, sandboxed=False):
    policy = ApprovalPolicy(allow=[f"run_command({r})" if r else "run_command" for r in rules])
    found, note = decide([policy], run_tool(workspace, sandboxed), {"command": line})
    return (found.effect if found else None), note


def sh(line, cwd, **env):
    done = subprocess.run(["/bin/sh", "-c", line], cwd=cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL,
                          env={"PATH": os.environ["PATH"], "HOME": str(cwd), **env})
    return done.stdout + done.stderr


def history_repo(path, canary: str = CANARY):
    """A git repository in ``path`` whose history holds a committed-then-removed
    ``.env`` (holding ``canary``), then a second change of ``f``; ``f`` changed again,
    not committed. Returns ``git``, to run more in it."""
    def git(*args):
        subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args], cwd=path,
                       check=True, capture_output=True)
    git("init", "-q", "-b", "main", ".")
    (path / "f").write_text("one\n")
    (path / ".env").write_text(f"STRIPE_KEY={canary}\n")
    git("add", "f", ".env")
    git("commit", "-q", "-m", "first")
    git("rm", "-q", ".env")
    git("commit", "-q", "-m", "remove the secret")
    (path / "f").write_text("two\n")
    git("commit", "-q", "-am", "second")
    (path / "f").write_text("three\n")
    return git


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """``history_repo`` with a stash, and a bare repository shipped as plain files
    (``vendor/tool``) whose alias runs a program."""
    path = tmp_path_factory.mktemp("repo")
    git = history_repo(path)
    git("stash", "-q")
    git("init", "-q", "--bare", "vendor/tool")
    subprocess.run(["git", "config", "-f", "vendor/tool/config", "alias.st",
                    "!touch PWNED_ALIAS"], cwd=path, check=True)
    return path


GIT_WRITES = [  # the issue's, then variants of the kind
    ("git stash show -p --output=W1", "W1"),
    ("git read-tree --index-output=W2 HEAD", "W2"),
    ("git checkout-index -a --prefix=W3/", "W3"),
    ("git fast-export --export-marks=W4 HEAD", "W4"),
    ("git format-patch -1 HEAD", "0001-second.patch"),
    ("git log -1 --output=W5", "W5"),
    ("git diff --output=W6 HEAD~1", "W6"),
    ("git -C vendor/tool st", "vendor/tool/PWNED_ALIAS"),
    ("git --git-dir=vendor/tool st", "PWNED_ALIAS"),
]


@pytest.mark.parametrize("line, written", GIT_WRITES)
def test_git_lines_that_write_or_run_ask(line, written, repo):
    sh(line, repo)
    assert (repo / written).exists(), line
    for rules in (["git *"], [None]):
        effect, note = decided(rules, line, repo)
        assert effect is None and "only an exact rule" in note, (line, note)


def test_git_after_a_cd_into_another_repository_asks(repo):
    sh("cd vendor/tool && git st", repo)
    assert (repo / "vendor/tool/PWNED_ALIAS").exists()
    effect, note = decided(["cd *", "git *"], "cd vendor/tool && git st", repo)
    assert effect is None and "another repository" in note


HISTORY = [  # the four, then variants
    "git log -p", "git show HEAD~1", "git diff HEAD~2 HEAD~1", "git grep STRIPE HEAD~2",
    "git log --patch -1 HEAD~1", "git log -u", "git diff HEAD~2..HEAD~1",
    "git show --format=%H HEAD~1", "git stash show -p",
]


@pytest.mark.parametrize("line", HISTORY)
def test_lines_that_print_history_s_contents_ask(line, repo):
    assert CANARY in sh(line, repo) or line == "git stash show -p", line
    effect, note = decided(["git *"], line, repo)
    assert effect is None and "is not known to be harmless" in note, note


def test_a_blob_named_by_its_id_asks(repo):
    blob = subprocess.run(["git", "rev-parse", "HEAD~2:.env"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    line = f"git show --stat {blob}"
    assert CANARY in sh(line, repo)
    assert decided(["git *"], line, repo)[0] is None


@pytest.mark.parametrize("line", ["git log --stat", "git show --stat HEAD~1",
                                  "git diff --stat HEAD~2 HEAD", "git log --oneline -5",
                                  "git diff --name-only HEAD~2", "git status", "git diff",
                                  "git show -s HEAD~1"])
def test_their_summary_forms_run_and_print_no_secret(line, repo):
    assert CANARY not in sh(line, repo)
    assert decided(["git *"], line, repo)[0] == "allow", decided(["git *"], line, repo)


@pytest.mark.parametrize("line", ["set", "export -p", "export", "declare -p", "env",
                                  "printenv", "typeset"])
def test_the_environment_is_never_printed_under_a_bare_rule(line, tmp_path):
    """bash and dash print every variable (every secret) for these."""
    shell = "bash" if line.startswith(("declare", "typeset")) else "sh"
    done = subprocess.run([shell, "-c", line], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "SECRET_TOKEN": CANARY},
                          timeout=60)
    assert CANARY in done.stdout, line
    effect, note = decided([None, f"{line.split()[0]} *"], line, tmp_path)
    assert effect is None, (line, note)


def test_make_p_prints_the_environment(tmp_path):
    (tmp_path / "Makefile").write_text("test:\n\t@echo ok\n")
    done = subprocess.run(["make", "-p"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "SECRET_TOKEN": CANARY}, timeout=60)
    assert CANARY in done.stdout
    effect, note = decided(["make *"], "make -p", tmp_path, sandboxed=True)
    assert effect is None and "make option -p" in note
    assert decided(["make *"], "make test", tmp_path, sandboxed=True)[0] == "allow"


@pytest.fixture
def npm_project(tmp_path):
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (Debian: apt install npm)")
    (tmp_path / "package.json").write_text('{"name": "p", "version": "1.0.0", '
                                           '"scripts": {"test": "echo tested"}}')
    return tmp_path


NPM_LINES = ["npm run env", "npm version 9.9.9 --no-git-tag-version",
             "npm c set script-shell=./evil.sh --location=project", "npm exec x",
             "npm --prefix /tmp test"]


@pytest.mark.parametrize("line", NPM_LINES)
def test_npm_lines_that_print_the_environment_or_write_ask(line, tmp_path):
    effect, note = decided(["npm *"], line, tmp_path, sandboxed=True)
    assert effect is None and "only an exact rule" in note, (line, note)


@pytest.mark.slow  # npm starts in about a second a run
def test_the_real_npm_prints_the_environment_and_writes(npm_project):
    assert CANARY in sh("npm run env", npm_project, SECRET_TOKEN=CANARY)
    sh("npm version 9.9.9 --no-git-tag-version", npm_project)
    assert '"9.9.9"' in (npm_project / "package.json").read_text()


def test_the_lines_people_mean_still_run_without_asking(tmp_path):
    """The issue's list, under its policy (sandboxed where they run code); ``ls *.py``
    asks, naming the glob that could expand into an option."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("# TODO\n")
    (tmp_path / "README.md").write_text("hi\n")
    (tmp_path / "setup.cfg").write_text("[x]\n")
    rules = ["git *", "ls *", "grep *", "cat *", "find *", "wc *", "head *",
             "python -m pytest *", "make *", "npm test *"]
    for line in ("git status", "git diff", "git log --oneline -5", "git show --stat HEAD",
                 "ls -la", "ls src/*.py", "grep -rn TODO src", "cat README.md",
                 "find . -name '*.py'", "wc -l ./*.py", "head -n 20 setup.cfg",
                 "python -m pytest -q", "make test", "npm test"):
        assert decided(rules, line, tmp_path, sandboxed=True)[0] == "allow", (
            line, decided(rules, line, tmp_path, sandboxed=True))
    effect, note = decided(rules, "ls *.py", tmp_path, sandboxed=True)
    assert effect is None and "an unquoted glob (*.py) that could expand into an option" in note


PLAIN_WRITES = [  # plain words, no option: each writes, deletes or moves (attack-36)
    ("cp f W", "W"), ("touch W", "W"), ("dd if=f of=W", "W"), ("install f W", "W"),
    ("ln f W", "W"), ("tee W", "W"), ("mv f W", "W"), ("rm f", "f"),
]


@pytest.mark.parametrize("line, path", PLAIN_WRITES)
def test_a_rule_not_naming_the_program_allows_no_plain_write(line, path, tmp_path):
    """A program with no entry is allowed plain words only by a rule naming it (``cp *``):
    under a bare ``run_command`` or ``*`` the same plain words wrote or deleted."""
    (tmp_path / "f").write_text("one\n")
    before = (tmp_path / path).exists()
    sh(line, tmp_path)
    assert (tmp_path / path).exists() is not before, line
    for rules in ([None], ["*"]):
        effect, note = decided(rules, line, tmp_path)
        assert effect is None and "does not name it" in note, (line, rules, note)
    program = line.split()[0]
    assert decided([f"{program} *"], line, tmp_path)[0] == "allow"


def test_git_status_verbose_prints_a_removed_env_and_asks(tmp_path):
    """``git status -v`` prints the staged patch: after ``git rm .env`` its content."""
    def git(*args):
        subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args],
                       cwd=tmp_path, check=True, capture_output=True)
    git("init", "-q", ".")
    (tmp_path / ".env").write_text(f"STRIPE_KEY={CANARY}\n")
    git("add", ".env")
    git("commit", "-q", "-m", "first")
    git("rm", "-q", ".env")
    for line in ("git status -v", "git status --verbose", "git status -bv",
                 "git status --verb"):
        assert CANARY in sh(line, tmp_path), line
        effect, note = decided(["git *"], line, tmp_path)
        assert effect is None and "git status option" in note, (line, note)
    assert decided(["git *"], "git status -sb", tmp_path)[0] == "allow"


def git_in(path, *args):
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args], cwd=path,
                   check=True, capture_output=True)


@pytest.mark.parametrize("change, version", [("remove", "2"), ("remove", "4"),
                                             ("rotate", "3"), ("remove", "split")])
def test_a_work_tree_patch_printing_the_index_s_env_asks(change, version, tmp_path):
    """``git diff`` of the work tree prints the index's copy of each changed file: a
    tracked ``.env`` removed from the disk (so nothing masks it), or a rotated key's old
    value. With a secret file in the index (read in each index version) it asks."""
    git_in(tmp_path, "init", "-q", ".")
    (tmp_path / ".env").write_text(f"STRIPE_KEY={CANARY}\n")
    (tmp_path / "f").write_text("one\n")
    git_in(tmp_path, "add", ".env", "f")
    git_in(tmp_path, "commit", "-q", "-m", "first")
    if version == "split":  # most entries in a shared index file, .env among them
        git_in(tmp_path, "update-index", "--split-index")
        (tmp_path / "g").write_text("two\n")
        git_in(tmp_path, "add", "g")
    else:
        git_in(tmp_path, "update-index", "--index-version", version)
    if change == "remove":
        (tmp_path / ".env").unlink()
    else:
        (tmp_path / ".env").write_text("STRIPE_KEY=sk_live_the_new_one\n")
    assert f"-STRIPE_KEY={CANARY}" in sh("git diff", tmp_path)
    for line in ("git diff", "git diff f", "git diff -U1", "git --no-pager diff"):
        effect, note = decided(["git *"], line, tmp_path)
        assert effect is None and ("the index holds a secret file" in note or
                                   "could not be read" in note), (line, note)
    for line in ("git diff --stat", "git diff --name-only", "git status"):
        assert decided(["git *"], line, tmp_path)[0] == "allow", line


def test_a_workspace_that_is_no_repository_of_its_own_asks_before_git(tmp_path):
    """git started in a folder without ``.git`` uses the repository around it, or a
    ``.git`` file's folder shipped in the workspace: their settings run programs."""
    outer, workspace = tmp_path / "outer", tmp_path / "outer" / "ws"
    workspace.mkdir(parents=True)
    git_in(outer, "init", "-q", ".")
    git_in(outer, "config", "core.fsmonitor", f"touch {tmp_path}/PWNED_OUTER; false")
    sh("git status", workspace)
    assert (tmp_path / "PWNED_OUTER").exists()
    shipped = tmp_path / "shipped"
    (shipped / "vendor").mkdir(parents=True)
    git_in(shipped / "vendor", "init", "-q", "--bare", "tool")
    git_in(shipped, "config", "-f", "vendor/tool/config", "core.bare", "false")
    git_in(shipped, "config", "-f", "vendor/tool/config", "core.fsmonitor",
           f"touch {tmp_path}/PWNED_SHIPPED; false")
    (shipped / ".git").write_text("gitdir: vendor/tool\n")
    sh("git status", shipped)
    assert (tmp_path / "PWNED_SHIPPED").exists()
    for folder in (workspace, shipped):
        for line in ("git status", "git diff", "git log --oneline -5"):
            effect, note = decided(["git *"], line, folder)
            assert effect is None and "no repository of its own" in note, (line, note)
    git_in(workspace, "init", "-q", ".")  # its own repository: as before
    assert decided(["git *"], "git status", workspace)[0] == "allow"


def test_a_tar_listing_with_an_option_the_table_does_not_know_asks(tmp_path):
    """``tar t`` took any further option: ``--volno-file=W`` wrote W while listing."""
    (tmp_path / "f").write_text("one\n")
    sh("tar cf a.tar f && tar tf a.tar --volno-file=W", tmp_path)
    assert (tmp_path / "W").exists()
    for line in ("tar tf a.tar --volno-file=W", "tar -tf a.tar --volno-f=W",
                 "tar tvf a.tar --to-stdout", "tar tf host:a.tar"):
        for rules in (["tar *"], [None]):
            assert decided(rules, line, tmp_path)[0] is None, (line, rules)
    for line in ("tar tf a.tar", "tar -tvf a.tar f", "tar tzf a.tgz"):
        assert decided(["tar *"], line, tmp_path)[0] == "allow", line


def test_a_recursive_reader_through_a_shipped_link_to_a_secret_asks(tmp_path, monkeypatch):
    """A repository may ship links (git keeps them): ``grep -R`` follows ``src/keys ->
    ~/.ssh`` and printed the private key; the walk judged the link's own path."""
    home, outside, workspace = tmp_path / "home", tmp_path / "outside", tmp_path / "ws"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(f"KEY {CANARY}\n")
    outside.mkdir()
    (outside / ".env").write_text(f"TOKEN={CANARY}\n")
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "a.py").write_text("# TODO\n")
    monkeypatch.setenv("HOME", str(home))
    for link, target in (("keys", home / ".ssh"), ("up", home), ("conf", outside)):
        (workspace / "src" / link).symlink_to(target)
        assert CANARY in sh("grep -R KEY src; grep -R TOKEN src", workspace), link
        for line in ("grep -R KEY src", "grep -rn TODO src", "grep -R TOKEN ."):
            effect, note = decided(["grep *"], line, workspace)
            assert effect is None and "hold a secret file" in note, (link, line, note)
        (workspace / "src" / link).unlink()
    (workspace / "src" / "mine").symlink_to(workspace)  # a link inside: as before
    assert decided(["grep *"], "grep -rn TODO src", workspace)[0] == "allow"


def test_git_remote_verbose_prints_a_token_in_the_url_and_asks(tmp_path):
    git_in(tmp_path, "init", "-q", ".")
    git_in(tmp_path, "remote", "add", "origin", f"https://u:{CANARY}@example.invalid/r.git")
    for line in ("git remote -v", "git remote --verbose", "git remote --verb"):
        assert CANARY in sh(line, tmp_path), line
        assert decided(["git *"], line, tmp_path)[0] is None, line
    assert CANARY not in sh("git remote", tmp_path)
    assert decided(["git *"], "git remote", tmp_path)[0] == "allow"


def test_an_awk_program_that_sets_the_files_it_reads_asks(tmp_path):
    """awk reads the files ``ARGV`` holds: a program can build a name the line never
    spells (``".e" "nv"``, a key's path) and read it."""
    (tmp_path / "f").write_text("x\n")
    (tmp_path / ".env").write_text(f"TOKEN={CANARY}\n")
    for line in ("awk 'BEGIN{ARGV[1]=\".e\" \"nv\"; ARGC=2} 1' f",
                 "awk 'BEGIN { ARGV[ARGC++] = \".e\" \"nv\" } 1'",
                 "awk -F= 'NR==1{ARGV[2]=\".e\" \"nv\"; ARGC=3} {print $2}' f"):
        assert CANARY in sh(line, tmp_path), line
        for rules in (["awk *"], [None]):
            assert decided(rules, line, tmp_path)[0] is None, (line, rules)
    assert decided(["awk *"], "awk -F: '{print $1}' f", tmp_path)[0] == "allow"
