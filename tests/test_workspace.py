"""The built-in tools stay inside the workspace unless a human says otherwise (issue 19):
their approval predicate (SPEC R18) judges each path as the OS will open it, a policy
(R19) can widen or narrow it, and the CLI pauses instead of sending a file out."""

from __future__ import annotations

import json
import os

import pytest

from agentflow import AgentSession, ApprovalPolicy, ChatClientAgent, OpenAIChatClient
from agentflow.builtin.builtin_tools import builtin_tools
from agentflow.testing.replay import ReplayServer, chat_stream
from agentflow.types import FinishReason, ToolApprovalRequest, ToolResult
from agentflow.commandline.workspace import SECRET_FILES

from helpers_cli import (PROMPT, calls_reply, child_env, json_lines, pty_chat, run_chat,
                         saved)
from test_cli_chat import server  # noqa: F401  (a fixture)

SECRET = "AKIA-NEVER-SENT"


@pytest.fixture
def ws(tmp_path):
    """A workspace ``ws`` beside a folder ``outside``, with a symlink inside that leads
    out, a .env and an SSH key inside, and the built-in tools rooted in ``ws``."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    (root / "sub" / ".ssh").mkdir(parents=True)
    outside.mkdir()
    (root / "src" / "a.py").write_text("print('hi')\n")
    (root / ".env").write_text(f"KEY={SECRET}\n")
    (root / "sub" / ".ssh" / "id_ed25519").write_text(SECRET)
    (outside / "notes.txt").write_text(SECRET)
    (root / "link").symlink_to(outside)
    tools = {t.name: t for t in builtin_tools(workspace=root)}
    return root, outside, tools


def concern(tools, name, path):
    return tools[name].needs_approval({"path": path, "content": ""})


def test_inside_the_workspace_reads_and_listings_run_without_asking(ws):
    root, _, tools = ws
    for name, path in [("read_file", "src/a.py"), ("read_file", str(root / "src" / "a.py")),
                       ("read_file", "src/../src/a.py"), ("list_dir", "."),
                       ("list_dir", "src")]:
        assert concern(tools, name, path) is False, (name, path)


def test_a_listing_masks_a_value_of_the_env_in_a_name(ws):
    """SPEC R27: every result the model gets is masked of the workspace's ``.env``
    values, a listing's names too (a backup named after the key it holds)."""
    root, _, tools = ws
    (root / "src" / f"{SECRET}.bak").write_text("")
    assert tools["list_dir"].invoke({"path": "src"}) == "***.bak\na.py"


@pytest.mark.parametrize("path, expected", [
    ("../outside/notes.txt", "reads ../outside/notes.txt (really {outside}/notes.txt): "
                             "outside the workspace {root}"),
    ("{outside}/notes.txt", "reads {outside}/notes.txt: outside the workspace {root}"),
    ("link/notes.txt", "reads link/notes.txt (really {outside}/notes.txt): outside the "
                       "workspace {root}"),
    ("src/../../outside/notes.txt", "reads src/../../outside/notes.txt (really "
                                    "{outside}/notes.txt): outside the workspace {root}"),
    (".env", "reads .env (really {root}/.env): a secret file (.env files)"),
    (".ENV", "reads .ENV (really {root}/.ENV): a secret file (.env files)"),
    ("src/.env.production", "reads src/.env.production (really {root}/src/.env.production): "
                            "a secret file (.env files)"),
    ("sub/.ssh/id_ed25519", "reads sub/.ssh/id_ed25519 (really {root}/sub/.ssh/id_ed25519): "
                            "a secret file (SSH keys and settings)"),
    ("SUB/.SSH/ID_ED25519", "reads SUB/.SSH/ID_ED25519 (really {root}/SUB/.SSH/ID_ED25519): "
                            "a secret file (SSH keys and settings)"),
])
def test_outside_or_secret_a_read_asks_and_says_where_it_leads(ws, path, expected):
    root, outside, tools = ws
    fill = {"root": root, "outside": outside}
    assert concern(tools, "read_file", path.format(**fill)) == expected.format(**fill)


def test_the_environment_of_a_process_is_a_secret_file(ws):
    _, _, tools = ws
    why = concern(tools, "read_file", "/proc/self/environ")
    assert why.startswith("reads /proc/self/environ (really /proc/")
    assert why.endswith("/environ): a secret file (process environments, which hold every "
                        "secret)")


def test_listing_outside_asks_and_writing_always_asks_saying_why(ws):
    root, _, tools = ws
    assert concern(tools, "list_dir", "..") == (
        f"lists .. (really {root.parent}): outside the workspace {root}")
    assert concern(tools, "write_file", "src/b.py") == "write_file always asks"
    assert concern(tools, "write_file", "link/x") == (
        f"writes link/x (really {root.parent}/outside/x): outside the workspace {root}")


def test_relative_paths_open_in_the_workspace_not_the_current_folder(ws, monkeypatch):
    root, outside, tools = ws
    monkeypatch.chdir(outside)
    assert tools["read_file"].invoke({"path": "src/a.py"}) == "print('hi')\n"
    assert tools["list_dir"].invoke({"path": "."}) == ".env\nlink/\nsrc/\nsub/"
    assert tools["run_command"].invoke({"command": "ls src"}) == "exit status 0\na.py\n"


def test_the_secret_list_is_data_and_extendable(ws):
    root, _, _ = ws
    (root / "app.sqlite").write_text("rows")
    tools = {t.name: t for t in builtin_tools(
        ["read_file"], workspace=root,
        secret_files=SECRET_FILES + (("/**/*.sqlite", "databases"),))}
    assert concern(tools, "read_file", "app.sqlite").endswith("a secret file (databases)")


def test_run_command_still_asks_and_its_preview_warns(ws):
    root, outside, tools = ws
    run = tools["run_command"]
    assert run.needs_approval({"command": "ls"}) is True
    assert run.preview({"command": "ls src"}) == "$ ls src\nnot sandboxed"
    home = os.path.expanduser("~")
    assert run.preview({"command": "cat ../outside/notes.txt ~/.ssh/id_rsa > .env"}) == (
        "$ cat ../outside/notes.txt ~/.ssh/id_rsa > .env\n"
        f"warning: it names ../outside/notes.txt (really {outside}/notes.txt): outside the "
        f"workspace {root}\n"
        f"warning: it names {home}/.ssh/id_rsa: a secret file (SSH keys and settings)\n"
        f"warning: it names .env (really {root}/.env): a secret file (.env files)\n"
        "not sandboxed")


# -- through the loop: the same gate, the same audit, policies on top --------------------------

@pytest.fixture(scope="module")
def replay():
    server_ = ReplayServer().start()
    yield server_
    server_.stop()


def agent_on(replay, tools, *bodies, policy=None):
    replay.requests.clear()
    for body in bodies:
        replay.queue(body)
    client = OpenAIChatClient("m", base_url=replay.base_url, api_key="sk", max_retries=0)
    return ChatClientAgent(client, tools=list(tools.values()), policy=policy)


def read(call_id, path):
    return chat_stream(tool_calls=[(call_id, "read_file", json.dumps({"path": path}))])


def test_a_read_outside_pauses_and_nothing_of_the_file_reaches_the_model(ws, replay):
    root, outside, tools = ws
    agent = agent_on(replay, tools, read("c1", "src/a.py"), read("c2", "link/notes.txt"))
    session = AgentSession()
    updates = list(agent.run("look", session))
    assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    assert [u.result for u in updates if isinstance(u, ToolResult)] == ["print('hi')\n"]
    assert [u.call_id for u in updates if isinstance(u, ToolApprovalRequest)] == ["c2"]
    assert session.approvals.pending[0].why == (
        f"reads link/notes.txt (really {outside}/notes.txt): outside the workspace {root}")
    assert [(r.call_id, r.outcome, r.why) for r in session.audit] == [
        ("c1", "allowed", "its approval check let it run without asking")]
    assert all(SECRET not in r.body.decode() for r in replay.requests)


def test_a_policy_can_widen_and_narrow_the_workspace(ws, replay):
    root, outside, tools = ws
    (root / "debug.log").write_text("log")
    policy = ApprovalPolicy(allow=[f"read_file({outside}/*)"], deny=["read_file(**/*.log)"],
                            name="project")
    agent = agent_on(replay, tools, read("c1", "link/notes.txt"), read("c2", "debug.log"),
                     chat_stream(text="ok"), policy=policy)
    session = AgentSession()
    updates = list(agent.run("look", session))
    # the outside file was read; its text is also a value of the workspace's .env, so
    # the model gets it masked (SPEC R27)
    assert [u.result for u in updates if isinstance(u, ToolResult)] == [
        "***", "Rejected: denied by policy (read_file(**/*.log))"]
    assert [(r.call_id, r.outcome, r.rule) for r in session.audit] == [
        ("c1", "allowed", f"read_file({outside}/*)"), ("c2", "denied", "read_file(**/*.log)")]


# -- through the CLI ------------------------------------------------------------------------------

def test_cli_json_a_read_outside_pauses_with_exit_3_and_sends_nothing(server, ws):
    root, outside, _ = ws
    server.queue(calls_reply(("call_1", "read_file", {"path": "src/a.py"})))
    server.queue(calls_reply(("call_2", "read_file", {"path": "../outside/notes.txt"})))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--json", "--workspace", str(root),
                    "--session", str(outside.parent / "s.json"), "look", cwd=outside.parent)
    assert (done.returncode, done.stderr) == (3, "")
    lines = json_lines(done.stdout)
    assert [u for u in lines if u["type"] == "tool_result"][0]["result"] == "print('hi')\n"
    assert lines[-1] == {"type": "paused", "pending": ["call_2"]}
    assert len(server.requests) == 2
    assert all(SECRET not in r.body.decode() for r in server.requests)
    assert saved(outside.parent / "s.json")["approvals"]["pending"][0]["why"] == (
        f"reads ../outside/notes.txt (really {outside}/notes.txt): outside the workspace "
        f"{root}")


def test_cli_prompt_says_where_a_read_leads_and_why_it_asks(server, ws):
    root, outside, _ = ws
    server.queue(calls_reply(("call_1", "read_file", {"path": "sub/.ssh/id_ed25519"})))
    server.queue(chat_stream("Fine."))
    chat = pty_chat("--base-url", server.base_url, "look", cwd=root, env=child_env())
    shown = chat.expect(PROMPT)
    assert (f"why:         reads sub/.ssh/id_ed25519 (really {root}/sub/.ssh/id_ed25519): "
            "a secret file (SSH keys and settings)\n") in shown
    chat.send("n")
    chat.expect("reason (optional): ")
    chat.send("")
    assert chat.wait() == 0
    assert all(SECRET not in r.body.decode() for r in server.requests)


def test_cli_a_workspace_that_is_not_a_folder_is_a_usage_error(tmp_path, monkeypatch, capsys):
    from agentflow.cli.main import main as agentflow_main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("x")
    for given in ("nowhere", "file.txt"):
        status = agentflow_main(["chat", "--base-url", "http://127.0.0.1:9/v1",
                                 "--workspace", given, "hi"])
        assert (status, capsys.readouterr().err) == (2, (
            f"agentflow: --workspace {given}: {tmp_path / given} is not a folder; give an "
            "existing one with --workspace DIR\n"))
