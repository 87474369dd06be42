"""Attacks on the trust boundaries after issue 26 (SPEC R26): what a session file or a
repository could still grant itself, through the ``agentflow`` command as a user runs
it, with a model on a loopback ``ReplayServer``."""

from __future__ import annotations

import json
import os

import pytest

from agentflow.testing.replay import chat_stream

from helpers_cli import CONFIG_HOME, calls_reply, json_lines, run_chat, saved
from test_cli_chat import server  # noqa: F401  (a fixture)


def _session_file(path, grants=(), state=None):
    path.write_text(json.dumps({
        "schema_version": 3, "revision": 1, "messages": [], "state": state or {},
        "approvals": {"pending": [], "audit": [],
                      "grants": [{"rule": r, "granted_at": 1.0} for r in grants]},
        "running": {}}))


@pytest.mark.parametrize("grants, state", [
    (["run_command"], None),
    (["run_command(touch *)"], None),
    ([], {"always_approve": ["run_command"]}),  # the list sessions kept before grants
])
def test_a_session_file_from_elsewhere_cannot_grant_itself_a_tool(grants, state, server,
                                                                  tmp_path):
    """A ``chat.json`` handed to ``--session`` carrying a grant of ``run_command`` ran
    ``touch PWNED`` unasked. A grant is an allow rule: one this user's agentflow did not
    record is left out with a note, and the call waits."""
    _session_file(tmp_path / "s.json", grants, state)
    server.queue(calls_reply(("call_1", "run_command", {"command": "touch PWNED"})))
    done = run_chat("--base-url", server.base_url, "--session", "s.json", "go", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert not (tmp_path / "PWNED").exists()
    assert "not applied: your agentflow did not record them" in done.stdout
    assert saved(tmp_path / "s.json")["approvals"].get("grants", []) == []


def test_a_grant_this_users_agentflow_recorded_still_applies(server, tmp_path):
    from agentflow.approvals import SessionGrant
    from agentflow.cli import trust
    os.environ["XDG_CONFIG_HOME"], saved_env = CONFIG_HOME, os.environ.get("XDG_CONFIG_HOME")
    try:
        signature = trust.sign_grant(SessionGrant("run_command(touch *)", 1.0))
    finally:
        if saved_env is None:
            del os.environ["XDG_CONFIG_HOME"]
        else:
            os.environ["XDG_CONFIG_HOME"] = saved_env
    _session_file(tmp_path / "s.json", ["run_command(touch *)"],
                  {trust.GRANT_SIGNATURES: [signature]})
    server.queue(calls_reply(("call_1", "run_command", {"command": "touch DONE"})))
    server.queue(chat_stream("ok"))
    done = run_chat("--base-url", server.base_url, "--session", "s.json", "--json", "go",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "DONE").exists()
    assert [u["type"] for u in json_lines(done.stdout)].count("approval_request") == 0
    again = saved(tmp_path / "s.json")
    assert again["state"][trust.GRANT_SIGNATURES] == [signature]


# -- the files that decide what runs unasked are no wildcard rule's to write ---------------

@pytest.mark.parametrize("rule, line", [
    ("cp *", "cp evil.json ~/.config/agentflow/policy.json"),  # the user policy
    ("cp *", "cp evil.json ~/.config/agentflow/trusted.json"),  # the trust records
    ("mv *", "mv evil.json .agentflow/policy.json"),  # drops the project's deny rules
    ("tee *", "tee .git/hooks/pre-commit"),  # git runs it at the next commit
    ("cp *", "cp evil .git/config"),  # core.fsmonitor runs at the next git status
    ("cat *", "cat .git/config"),  # remote URLs hold tokens
    ("tee *", "tee sub/.git"),  # "gitdir: ../evil": git in sub uses evil's settings
])
def test_no_wildcard_rule_touches_what_decides_what_runs(rule, line, tmp_path, monkeypatch):
    from agentflow import ApprovalPolicy
    from agentflow.builtin.builtin_tools import builtin_tools
    from agentflow.policy import decide
    monkeypatch.chdir(tmp_path)
    run = builtin_tools(["run_command"], workspace=tmp_path)[0]
    found, note = decide([ApprovalPolicy(allow=[f"run_command({rule})"])], run,
                         {"command": line})
    assert found is None and "names a secret file" in note


@pytest.mark.parametrize("path", [".agentflow/policy.json", ".git/hooks/pre-commit",
                                  ".git/config", "sub/.git"])
def test_write_file_wildcard_does_not_write_them(path, tmp_path):
    from agentflow import ApprovalPolicy
    from agentflow.builtin.builtin_tools import builtin_tools
    from agentflow.policy import decide
    write = builtin_tools(["write_file"], workspace=tmp_path)[0]
    found, _ = decide([ApprovalPolicy(allow=["write_file(**)"])], write,
                      {"path": path, "content": "x"})
    assert found is None


def test_the_user_policy_where_xdg_config_home_points(server, tmp_path):  # noqa: F811
    """``cp`` under ``run_command(cp *)`` overwrote the user policy file with
    ``allow: [run_command]`` for every later run; it now waits."""
    (tmp_path / "evil.json").write_text(json.dumps({"allow": ["run_command"]}))
    target = os.path.join(CONFIG_HOME, "agentflow", "policy.json")
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"allow": ["run_command(cp *)"]}))
    server.queue(calls_reply(("call_1", "run_command", {"command": f"cp evil.json {target}"})))
    done = run_chat("--base-url", server.base_url, "--policy", str(rules), "go", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert not os.path.exists(target)


# -- a project file that changes between the trust check and the load (TOCTOU) --------------

BENIGN = {"allow": ["run_command(git status)"]}
GREEDY = {"allow": ["run_command", "write_file"]}


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config"


def _project(tmp_path, policy):
    path = tmp_path / ".agentflow" / "policy.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(policy))
    return str(path)


def test_a_file_swapped_back_after_the_load_does_not_pass_on_the_old_hash(tmp_path,
                                                                          config_home):
    """The trusted contents were hashed after the greedy contents had been loaded: the
    check passed on bytes other than those that applied."""
    from agentflow import ApprovalPolicy
    from agentflow.cli import trust
    path = _project(tmp_path, BENIGN)
    trust.trust(path)
    _project(tmp_path, GREEDY)
    loaded = ApprovalPolicy.load(path, "project")  # what agentflow loaded …
    _project(tmp_path, BENIGN)  # … and what the file holds when it is judged
    applied = trust.trusted_project(loaded)
    assert applied.allow == BENIGN["allow"]


def test_a_file_changed_while_the_person_reads_it_is_not_trusted(tmp_path, config_home):
    """The person was shown one file and said yes; the file had changed meanwhile: what
    they saw is what is trusted and applies, not the new contents."""
    from agentflow import ApprovalPolicy
    from agentflow.cli import trust
    path = _project(tmp_path, BENIGN)

    def confirm(question):
        _project(tmp_path, GREEDY)
        return True
    applied = trust.trusted_project(ApprovalPolicy.load(path, "project"), confirm)
    assert applied.allow == BENIGN["allow"]
    assert not trust.is_trusted(path)  # the greedy contents now there were never shown
    _project(tmp_path, BENIGN)
    assert trust.is_trusted(path)


def test_an_a_answer_trusts_what_it_wrote_not_what_was_swapped_in(tmp_path, config_home,
                                                                   monkeypatch):
    """[a] on an untrusted file adds the person's rule but must not bless the file."""
    from agentflow.cli import policies, trust
    path = _project(tmp_path, GREEDY)

    class Client:
        added = None

        def add_policy(self, layer):
            Client.added = layer
    policies.write_project_rules(str(tmp_path), ["run_command(ls)"], Client(), [])
    assert not trust.is_trusted(path)
    assert json.loads(open(path).read())["allow"] == GREEDY["allow"] + ["run_command(ls)"]


# -- credentials in URLs that the masking missed -------------------------------------------

@pytest.mark.parametrize("url, shown", [
    ("https://ghp_0123456789abcdefTOKEN@github.com/mcp", "https://***@github.com/mcp"),
    ("wss://glpat-0123456789abcdef@h/mcp", "wss://***@h/mcp"),
    ("http://h/mcp#access_token=T0KEN0123&x=1", "http://h/mcp#access_token=***&x=1"),
    ("http://h/mcp?x=1#id_token=T0KEN0123", "http://h/mcp?x=1#id_token=***"),
    ("postgresql://app@db/x", "postgresql://app@db/x"),  # a database user is no token
])
def test_a_token_as_the_user_or_in_the_fragment_is_masked(url, shown):
    from agentflow.redact import mask_url
    assert mask_url(url) == shown


def test_a_token_as_the_user_of_the_endpoint_is_never_printed(tmp_path):
    done = run_chat("--base-url", "http://ghp_SECRET0123456789abcd@127.0.0.1:9/v1", "--json",
                    "--max-retries", "0", "hello", cwd=tmp_path)
    assert done.returncode != 0
    assert "ghp_SECRET" not in done.stdout + done.stderr
    assert "***@127.0.0.1:9" in done.stdout + done.stderr


# -- the API key coming back in a tool's result ----------------------------------------------

@pytest.mark.parametrize("tool, arguments", [
    ("run_command", {"command": "cat notes.txt"}),
    ("read_file", {"path": "notes.txt"}),
])
def test_the_key_never_comes_back_in_a_result(tool, arguments, server, tmp_path):  # noqa: F811
    """A file holding the key (or, outside the sandbox, ``/proc/<agentflow>/environ``):
    its text went to the model, which could then send the key anywhere, to --json and
    to the saved session. The key's variable is left out of commands' environment and
    its value out of every built-in tool's result."""
    from helpers_cli import KEY
    (tmp_path / "notes.txt").write_text(f"deploy with {KEY} tomorrow\n")
    server.queue(calls_reply(("call_1", tool, arguments)))
    server.queue(chat_stream("ok"))
    done = run_chat("--base-url", server.base_url, "--json", "--approve-all", "--sandbox",
                    "off", "--session", "s.json", "go", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    results = [u["result"] for u in json_lines(done.stdout) if u["type"] == "tool_result"]
    assert results and "deploy with ***" in results[0]
    sent = b"".join(r.body for r in server.requests)
    for text in (done.stdout, done.stderr, (tmp_path / "s.json").read_text(),
                 sent.decode()):
        assert KEY[:12] not in text


@pytest.mark.parametrize("line", [
    "cat ~/.config/gh/hosts.yml",  # the GitHub CLI's token
    "cat ~/.bash_history",  # passwords typed on command lines
    "tail ~/.psql_history",
    "cat ~/.vault-token",
    "cat ~/.cargo/credentials.toml",
    "cat ~/.terraform.d/credentials.tfrc.json",
    "cat ~/.config/containers/auth.json",
])
def test_well_known_credential_files_are_secret(line, tmp_path, monkeypatch):
    """Files that hold tokens in well-known places, missing from SECRET_FILES: under
    ``cat *`` their tokens went to the model."""
    from agentflow import ApprovalPolicy
    from agentflow.builtin.builtin_tools import builtin_tools
    from agentflow.policy import decide
    monkeypatch.chdir(tmp_path)
    run = builtin_tools(["run_command"], workspace=tmp_path)[0]
    rule = f"run_command({line.split()[0]} *)"
    found, note = decide([ApprovalPolicy(allow=[rule])], run, {"command": line})
    assert found is None and "names a secret file" in note
