"""``agentflow worker`` and ``agentflow inbox`` left running (issue 38; SPEC R22
addendum, fourth batch): a session the store cannot read is reported and skipped, the
others are served; a store that is down at start is waited for; the inbox answers a
damaged session with a clear HTTP error."""

from __future__ import annotations

import io
import sqlite3
import threading

import pytest

from agentflow.stores import open_store, open_store_waiting
from agentflow.errors import StoreError
from agentflow.testing.replay import chat_stream
from helpers_cli import store_key
from helpers_inbox import (Client, pause_chat, ran, running_inbox, server, url,  # noqa: F401
                           worker_once)

ECHO = {"command": "echo ran >> ran.txt"}


def approve_all(url, session_ids, secret):
    with open_store(url, secret) as store:
        for entry in store.pending():
            if entry.session_id in session_ids:
                store.answer(entry.session_id, [entry.record and _approve(entry)])


def _approve(entry):
    from agentflow.types import ToolApprovalResponse
    return ToolApprovalResponse(entry.call_id, True, digest=entry.digest, approver="dana",
                                request_id=entry.request_id)


def damage(url, session_id, data):
    """Put ``data`` in place of the session's first message row, as a torn disk or a
    hand edit would."""
    with sqlite3.connect(url[len("sqlite:///"):]) as db:
        db.execute("UPDATE agentflow_session_items SET data = ? WHERE session_id = ? AND "
                   "kind = 'm' AND position = 0", (data, session_id))


@pytest.mark.parametrize("signed,data,problem", [
    (True, '{"role": "user", "content": "do it twice"}', "SessionIntegrityError"),
    (False, '{"role": "user", "content": ', "SessionError"),
    (False, '{"role": "nobody"}', "SessionError"),
])
def test_a_worker_skips_a_damaged_session_and_serves_the_others(server, url, tmp_path,
                                                                 signed, data, problem):
    """Issue 38, item 5: one damaged row stopped the worker for the whole store, at
    every restart. Now it is reported (once) and the others are resumed."""
    flags = () if signed else ("--unsigned",)
    secret = store_key() if signed else None
    for session_id in ("t-1", "t-2"):
        pause_chat(server, url, session_id, [("call_1", "run_command", ECHO)], tmp_path,
                   *flags)
    approve_all(url, {"t-1", "t-2"}, secret)
    damage(url, "t-1", data)
    server.queue(chat_stream(text="It ran."))
    log = worker_once(url, server, tmp_path, *flags)
    assert f"worker: skipped t-1: {problem}" in log or (
        problem == "SessionIntegrityError" and "worker: skipped t-1: refused:" in log), log
    assert "worker: resuming t-2 (1 answer)" in log and "worker: t-2: done" in log
    assert ran(tmp_path) == ["ran"]
    again = worker_once(url, server, tmp_path, *flags)  # the next start: still serving
    assert "skipped t-1" in again and "resuming" not in again


def test_the_inbox_answers_a_damaged_session_with_an_http_error(server, url, tmp_path):
    """The inbox gave no HTTP response at all when asked to answer such a session."""
    pause_chat(server, url, "t-1", [("call_1", "run_command", ECHO)], tmp_path, "--unsigned")
    pause_chat(server, url, "t-2", [("call_1", "run_command", ECHO)], tmp_path, "--unsigned")
    with running_inbox(url, signed=False) as inbox:
        client = Client(inbox)
        client.login()
        page = client.page()
        bad, good = client.form("t-1", "call_1", page), client.form("t-2", "call_1", page)
        damage(url, "t-1", '{"role": "user", "content": ')
        status, message = client.answer({**bad, "action": "approve"})
        assert status == 500 and message.startswith(
            "session 't-1' cannot be read from the store, so nothing was recorded: ")
        assert client.answer({**good, "action": "approve"})[0] == 200


def test_a_store_that_is_down_is_waited_for_and_said_once(tmp_path):
    """Issue 38, item 2: with the database down at start, the worker and the inbox
    exited 1 at once. ``open_store_waiting`` tries again, with growing pauses, and
    says so once; a server that comes up is used."""
    import socket
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there: the server is down
    said, pauses = [], []

    def sleep(seconds):
        pauses.append(seconds)
        if len(pauses) == 4:
            raise KeyboardInterrupt  # the person gives up: Ctrl-C
    pytest.importorskip("psycopg")
    with pytest.raises(KeyboardInterrupt):
        open_store_waiting(f"postgresql://agentflow:s3cret@127.0.0.1:{port}/x", None,
                           said.append, 5.0, sleep)
    assert len(said) == 1 and said[0].startswith("waiting for the store: cannot reach the "
                                                 f"PostgreSQL store at 127.0.0.1:{port}/x")
    assert "s3cret" not in said[0] and pauses == [0.2, 0.4, 0.8, 1.6]


def test_a_setting_that_cannot_work_is_not_waited_for(tmp_path):
    (tmp_path / "not.db").write_text("not a database, just text " * 100)
    with pytest.raises(StoreError, match="file is not a database"):
        open_store_waiting(f"sqlite:///{tmp_path}/not.db", None, print, 5.0,
                           lambda s: pytest.fail("waited"))
    with pytest.raises(FileNotFoundError):
        open_store_waiting(f"sqlite:///{tmp_path}/no/such/folder.db", None, print, 5.0,
                           lambda s: pytest.fail("waited"))


def cut_short_in_the_tool(url, session_id, secret):
    """What a worker killed inside ``run_command`` leaves: its start record and the
    run's mark stored, no result (a real kill: tests/test_workers_campaigns.py)."""
    from agentflow import ApprovalRequiredTool, ChatClientAgent, OpenAIChatClient, tool
    from agentflow.stores.answers import ready_responses
    from agentflow.types import AgentRunOptions

    class Killed(BaseException):
        pass

    @tool
    def run_command(command: str) -> str:
        """Run a command."""
        raise Killed()
    agent = ChatClientAgent(OpenAIChatClient(model="m", base_url="http://127.0.0.1:9/v1",
                                             api_key="sk-test", max_retries=0),
                            tools=[ApprovalRequiredTool(run_command)])
    with open_store(url, secret) as store, pytest.raises(Killed):
        with store.open(session_id) as session:
            list(agent.run([], session, AgentRunOptions(
                tool_approval_responses=ready_responses(session))))


def test_pending_lists_a_cut_short_session_and_a_worker_continues_it(server, url, tmp_path):
    """Issue 38, item 1: ``agentflow pending`` said nothing waits and ``agentflow worker
    --once`` did nothing. Now the session is listed as needing a run (JSON field too)
    and the worker continues it: the call that may have run is answered 'interrupted'
    and the model is told."""
    import json

    from helpers_cli import run_agentflow
    pause_chat(server, url, "t-1", [("call_1", "run_command", ECHO)], tmp_path)
    approve_all(url, {"t-1"}, store_key())
    cut_short_in_the_tool(url, "t-1", store_key())
    listed = run_agentflow("pending", "--store", url, cwd=tmp_path).stdout
    assert "t-1" in listed and "(needs a run: the worker stopped inside it)" in listed
    [line] = run_agentflow("pending", "--store", url, "--json", cwd=tmp_path).stdout.splitlines()
    assert json.loads(line)["needs_run"] == "needs a run: the worker stopped inside it"
    with running_inbox(url) as inbox:  # the page says so too, with no answer form
        client = Client(inbox)
        client.login()
        page = client.page()
    assert "needs a run: the worker stopped inside it; a worker continues it" in page
    assert 'data-state="needs-run"' in page
    server.queue(chat_stream(text="It may not have run."))
    log = worker_once(url, server, tmp_path)
    assert "worker: continuing t-1 (its run was cut short: needs a run: the worker stopped " \
           "inside it)" in log and "worker: t-1: done" in log
    assert server.requests[-1].json["messages"][-1]["content"].startswith(
        "Error: interrupted")
    assert ran(tmp_path) == []
    assert "nothing waits" in run_agentflow("pending", "--store", url, cwd=tmp_path).stdout
    assert "continuing" not in worker_once(url, server, tmp_path)


# -- the worker's own sandbox settings (SPEC R27, issue 37's leftover) ----------------------

def answer_with(url, session_id, arguments):
    """Approve the session's waiting call in the store with edited ``arguments``."""
    from agentflow.types import ToolApprovalResponse
    with open_store(url, store_key()) as store:
        [entry] = [e for e in store.pending() if e.session_id == session_id]
        store.answer(session_id, [ToolApprovalResponse(
            entry.call_id, True, digest=entry.digest, request_id=entry.request_id,
            approver="dana", arguments=arguments)])


@pytest.mark.slow  # a sandbox (bwrap)
def test_a_worker_with_sandbox_required_refuses_an_edit_that_leaves_the_sandbox(
        server, url, tmp_path):
    """The inbox's edit turns the call's sandbox off: a worker whose settings forbid
    running outside its sandbox refuses that answer (the page asks again), and runs
    nothing; a worker without the flag runs the edit the person approved."""
    from helpers_cli import need_bwrap
    need_bwrap()
    pause_chat(server, url, "t-1", [("call_1", "run_command", ECHO)], tmp_path)
    answer_with(url, "t-1", {**ECHO, "sandbox": False})
    log = worker_once(url, server, tmp_path, "--sandbox-required")
    assert ("worker: refused the answers to t-1: call call_1 would run outside the sandbox "
            "(sandbox: false), and this worker runs commands only in its sandbox "
            "(--sandbox-required)") in log, log
    assert ran(tmp_path) == []
    with open_store(url, store_key()) as store:
        [entry] = store.pending()
    assert entry.answer.refused.startswith("call call_1 would run outside the sandbox")
    answer_with(url, "t-1", ECHO)  # answered again, inside the sandbox: it runs
    server.queue(chat_stream(text="It ran."))
    assert "t-1: done" in worker_once(url, server, tmp_path, "--sandbox-required")
    assert ran(tmp_path) == ["ran"]


@pytest.mark.slow  # a sandbox (bwrap)
def test_a_worker_takes_the_chats_sandbox_flags(server, url, tmp_path):
    """``agentflow worker --sandbox read-only``: the approved command cannot write in
    the workspace, as under ``agentflow chat --sandbox read-only``."""
    from helpers_cli import need_bwrap
    need_bwrap()
    pause_chat(server, url, "t-1", [("call_1", "run_command", ECHO)], tmp_path)
    answer_with(url, "t-1", None)
    server.queue(chat_stream(text="Could not."))
    log = worker_once(url, server, tmp_path, "--sandbox", "read-only")
    assert "t-1: done" in log
    assert ran(tmp_path) == []
    assert "Read-only file system" in server.requests[-1].json["messages"][-1]["content"]


@pytest.mark.slow  # a process of its own, interrupted
def test_a_run_a_person_stopped_with_ctrl_c_is_not_continued_by_a_worker(server, url,
                                                                          tmp_path):
    """Ctrl-C inside a tool of ``agentflow chat`` stops the run on purpose: the session
    keeps the 'interrupted' result, and is not listed as cut short, so no worker on the
    store goes on with it behind the person's back. (A worker's own run cut short by
    Ctrl-C is another worker's to continue.)"""
    import subprocess

    from agentflow.journal import RUN_MARK
    from helpers_cli import AGENTFLOW, calls_reply, child_env
    import signal
    import time
    server.queue(calls_reply(("call_1", "run_command", {"command": "touch started; sleep 10"})))
    chat = subprocess.Popen([AGENTFLOW, "chat", "--sandbox", "off", "--approve-all",
                             "--base-url", server.base_url, "--store", url, "--session",
                             "t-1", "wait a while"], cwd=tmp_path, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    chat.send_signal(signal.SIGINT)  # what the terminal's Ctrl-C sends it
    out, err = chat.communicate(timeout=60)
    done = subprocess.CompletedProcess(chat.args, chat.returncode, out, err)
    assert done.returncode == 130, (done.stdout, done.stderr)
    with open_store(url, store_key()) as store:
        held = store.load("t-1")
        assert held.messages[-1].content.startswith("Error: interrupted"), held.messages[-1]
        assert RUN_MARK not in held.state and store.cut_short() == []


def test_a_session_locked_for_a_moment_is_looked_at_again_soon(server, url, tmp_path):
    """The inbox holds the lease for the moment of its write, and the store tells a
    waiting worker of the answer at its commit, before the lease is given back: the
    worker looks again within 50 ms, not after its whole poll; a session that stays
    locked (a live worker inside it) waits for the poll as before."""
    import argparse
    import io

    from agentflow.cli import worker as workers
    pause_chat(server, url, "t-1", [("call_1", "run_command", ECHO)], tmp_path)
    approve_all(url, {"t-1"}, store_key())
    parser = argparse.ArgumentParser()
    workers.add_arguments(parser)
    args = parser.parse_args(["--store", url, "--base-url", server.base_url, "--poll", "5"])
    worker = workers.Worker(args, [], io.StringIO())
    with open_store(url, store_key()) as store, open_store(url, store_key()) as inbox:
        with inbox.open("t-1"):  # held, as during the inbox's write
            assert worker.sweep(store) == 0 and worker.soon is True
            assert worker.sweep(store) == 0 and worker.soon is False  # still held: the poll


@pytest.mark.slow  # a process of its own, interrupted
def test_ctrl_c_inside_a_workers_tool_stops_the_worker_and_leaves_the_run_to_another(
        server, url, tmp_path):
    """The chat's run takes the Ctrl-C (it stores 'interrupted'); the worker stops too
    (exit 0), rather than serving on, and the run it was in is listed as cut short for
    the next worker."""
    import signal
    import subprocess
    import time

    from helpers_cli import AGENTFLOW, child_env
    pause_chat(server, url, "t-1", [("call_1", "run_command",
                                     {"command": "touch started; sleep 10"})], tmp_path,
               "--sandbox", "off")
    approve_all(url, {"t-1"}, store_key())
    worker = subprocess.Popen([AGENTFLOW, "worker", "--store", url, "--base-url",
                               server.base_url, "--sandbox", "off"], cwd=tmp_path,
                              env=child_env(), stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    worker.send_signal(signal.SIGINT)
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, out
    assert "t-1: stopped by Ctrl-C; its run is left for a worker to continue" in out
    with open_store(url, store_key()) as store:
        assert store.cut_short() == ["t-1"]
        assert store.load("t-1").messages[-1].content.startswith("Error: interrupted")
