"""The workspace line cannot be crossed between the gate and the open (SPEC R26, issue 26
item 4). A path is judged at the gate and opened later; whatever happens in between (a
command of the same turn, another process) must not make the tool open something other
than what was judged. Real files, real symlinks and hard links, a real ``git``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from agentflow import AgentSession, ApprovalPolicy, ChatClientAgent, OpenAIChatClient
from agentflow.builtin.builtin_tools import builtin_tools
from agentflow.testing.replay import ReplayServer, chat_stream
from agentflow.types import ToolApprovalRequest, ToolResult

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- NEVER-SENT"


@pytest.fixture
def place(tmp_path):
    """``(ws, home, outside)``: a workspace, a home folder with an SSH key, and a file
    outside both."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(KEY)
    (ws / "src").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    return ws, home, outside


def tools_in(ws) -> dict:
    return {t.name: t for t in builtin_tools(workspace=ws)}


def git(ws, *args):
    subprocess.run(["git", "-C", str(ws), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_checkout_in_the_same_turn_cannot_turn_judged_paths_into_secrets(place):
    """Issue 26: policy ``allow: run_command(git checkout -q feature), write_file(src/**)``; in
    one turn ``git checkout -q feature`` (whose branch holds ``notes.txt`` → the SSH
    key and ``src/config.txt`` → a file outside), then ``read_file(notes.txt)`` and
    ``write_file(src/config.txt)``. The read returned the key and the write went
    outside; now both are refused, and nothing else changes."""
    ws, home, outside = place
    (ws / "notes.txt").write_text("my notes\n")
    (ws / "src" / "config.txt").write_text("a = 1\n")
    git(ws, "init", "-q", "-b", "main")
    git(ws, "add", ".")
    git(ws, "commit", "-q", "-m", "plain files")
    git(ws, "checkout", "-q", "-b", "feature")
    (ws / "notes.txt").unlink()
    (ws / "notes.txt").symlink_to(home / ".ssh" / "id_rsa")
    (ws / "src" / "config.txt").unlink()
    (ws / "src" / "config.txt").symlink_to(outside)
    git(ws, "add", ".")
    git(ws, "commit", "-q", "-m", "links")
    git(ws, "checkout", "-q", "main")
    assert (ws / "notes.txt").read_text() == "my notes\n"
    calls = [("call_1", "run_command", json.dumps({"command": "git checkout -q feature"})),
             ("call_2", "read_file", json.dumps({"path": "notes.txt"})),
             ("call_3", "write_file", json.dumps({"path": "src/config.txt",
                                                  "content": "pwned\n"}))]
    policy = ApprovalPolicy(allow=["run_command(git checkout -q feature)", "write_file(src/**)"])
    with ReplayServer([chat_stream(tool_calls=calls), chat_stream("done")]) as model:
        client = OpenAIChatClient(model="m", base_url=model.base_url, api_key="x",
                                  max_retries=0)
        agent = ChatClientAgent(client, tools=builtin_tools(workspace=ws), policy=policy)
        updates = list(agent.run(["switch branch, read notes"], AgentSession()))
    assert not [u for u in updates if isinstance(u, ToolApprovalRequest)]
    results = {u.call_id: u.result for u in updates if isinstance(u, ToolResult)}
    assert results["call_1"].startswith("exit status 0")
    assert os.path.islink(ws / "notes.txt")  # the checkout really happened
    assert results["call_2"].startswith("Error: PermissionError: notes.txt changed after "
                                        "it was judged")
    assert results["call_3"].startswith("Error: PermissionError: src/config.txt changed "
                                        "after it was judged")
    assert all(KEY not in text for text in results.values())
    assert KEY not in json.dumps(model.requests[-1].json)
    assert outside.read_text() == "untouched\n"


@pytest.mark.parametrize("name, arguments", [
    ("read_file", {"path": "notes.txt"}),
    ("list_dir", {"path": "notes.txt"}),
    ("write_file", {"path": "notes.txt", "content": "x"}),
])
def test_a_symlink_flipped_after_the_check_is_not_followed(place, name, arguments):
    """Another process replaces a judged file (or folder) with a symlink between the
    gate and the open: the tool refuses instead of following it."""
    ws, home, _ = place
    if name == "list_dir":
        (ws / "notes.txt").mkdir()
    else:
        (ws / "notes.txt").write_text("fine\n")
    tool = tools_in(ws)[name]
    tool.observe(arguments)                             # the gate judged it: inside
    assert tool.needs_approval(arguments) in (False, "write_file always asks")
    if name == "list_dir":
        (ws / "notes.txt").rmdir()
        (ws / "notes.txt").symlink_to(home / ".ssh")
    else:
        (ws / "notes.txt").unlink()
        (ws / "notes.txt").symlink_to(home / ".ssh" / "id_rsa")
    with pytest.raises(PermissionError, match="changed after it was judged"):
        tool.invoke(arguments)
    assert (home / ".ssh" / "id_rsa").read_text() == KEY


def test_a_folder_flipped_to_a_symlink_during_the_open_is_not_followed(place):
    """Resolved just before the open, a folder on the way that becomes a symlink in
    the last instant is met with O_NOFOLLOW: refused (the walk, not the re-check)."""
    from agentflow.commandline.workspace import _open_no_follow
    ws, home, _ = place
    (ws / "src" / "a.txt").write_text("a\n")
    resolved = str(ws / "src" / "a.txt")
    shutil.rmtree(ws / "src")
    (ws / "src").symlink_to(home / ".ssh")
    (home / ".ssh" / "a.txt").write_text(KEY)
    with pytest.raises(PermissionError, match="became a symlink"):
        _open_no_follow(resolved, os.O_RDONLY, 0)


def test_a_hard_link_to_a_secret_asks(place):
    """A hard link inside the workspace to ``~/.ssh/id_rsa`` read unasked; a file with
    more than one hard link asks now (its other name may be the secret)."""
    ws, home, _ = place
    try:
        os.link(home / ".ssh" / "id_rsa", ws / "innocent.txt")
    except OSError as exc:
        pytest.skip(f"hard links are not possible here: {exc}")
    why = tools_in(ws)["read_file"].needs_approval({"path": "innocent.txt"})
    assert why == (f"reads innocent.txt (really {ws}/innocent.txt): a file with 2 hard "
                   "links (another name of it may be a secret file or lie outside the "
                   "workspace)")


@pytest.mark.parametrize("path", [".ssh", ".ssh/", "sub/.gnupg", ".aws"])
def test_a_secret_folder_matches_itself(place, path):
    """``list_dir(.ssh)`` ran unasked: the pattern needed a character after ``.ssh/``."""
    ws, _, _ = place
    (ws / path.rstrip("/")).mkdir(parents=True)
    why = tools_in(ws)["list_dir"].needs_approval({"path": path})
    assert why and "a secret file" in why


def test_a_link_loop_asks(place):
    """``realpath`` gives up silently on a loop and returns the rest unresolved: a path
    whose resolution cannot be checked asks."""
    ws, _, _ = place
    (ws / "a").symlink_to(ws / "b")
    (ws / "b").symlink_to(ws / "a")
    why = tools_in(ws)["read_file"].needs_approval({"path": "a/x"})
    assert why and "cannot be checked" in why


def test_a_resolution_longer_than_path_max_asks(place):
    """Two in-workspace links whose resolved path is longer than PATH_MAX: the check
    gave up silently and ``open()`` followed; now it asks."""
    from agentflow.commandline.workspace import PATH_MAX
    ws, _, _ = place
    name = "d" * 200
    deep = ws / "deep"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    try:  # folders nested by descriptor: their full name is past what paths can say
        for _ in range(PATH_MAX // 200 + 2):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.symlink(str(deep / "/".join([name] * 10)), "back", dir_fd=fd)
    finally:
        os.close(fd)
    (ws / "first").symlink_to(deep / "/".join([name] * 10))
    path = "first/" + "/".join([name] * (PATH_MAX // 200 - 8)) + "/x"
    why = tools_in(ws)["read_file"].needs_approval({"path": path})
    assert why and ("cannot be checked" in why or "cannot be resolved" in why)


def test_a_path_judged_inside_still_opens_when_nothing_changed(place):
    """The re-check refuses only a change: an ordinary read, list and write still work."""
    ws, _, _ = place
    tools = tools_in(ws)
    for name, arguments in [("write_file", {"path": "src/n.txt", "content": "hi\n"}),
                            ("read_file", {"path": "src/n.txt"}),
                            ("list_dir", {"path": "src"})]:
        tools[name].observe(arguments)
    assert tools["write_file"].invoke({"path": "src/n.txt", "content": "hi\n"}) == \
        "wrote 3 bytes to src/n.txt"
    assert tools["read_file"].invoke({"path": "src/n.txt"}) == "hi\n"
    assert tools["list_dir"].invoke({"path": "src"}) == "n.txt"


@pytest.mark.parametrize("name, arguments", [
    ("read_file", {"path": "pipe"}),
    ("write_file", {"path": "pipe", "content": "x"}),
])
def test_a_fifo_is_refused_not_waited_on(place, name, arguments):
    """A FIFO with no writer (or no reader) blocked ``open()`` for ever, after the
    approval: now it is opened without blocking and refused, as every file that is not
    a regular one (SPEC R25: a rejection, and a run, always go on)."""
    ws, _, _ = place
    os.mkfifo(ws / "pipe")
    tool = tools_in(ws)[name]
    with pytest.raises(PermissionError, match="is not a regular file"):
        tool.invoke(arguments)


def test_a_device_is_refused(place):
    """``/dev/zero`` (approved, say) is not read: not a regular file."""
    ws, _, _ = place
    with pytest.raises(PermissionError, match="is not a regular file"):
        tools_in(ws)["read_file"].invoke({"path": "/dev/zero"})
