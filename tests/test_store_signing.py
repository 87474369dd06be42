"""A store the command line writes is signed, and a row nobody with its key wrote is
refused where it is read (issue 37, item 1; SPEC R27).

The forger here is what a command could do to a store it can write: it cannot sign,
so it changes the rows by hand (SQL), as a program holding no key would. The control
(``--unsigned``) shows that the same forged rows run when nothing checks them."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time

import pytest

from agentflow import ToolApprovalResponse
from agentflow.approvals import RecordedAnswer
from agentflow.builtin import sandbox
from agentflow.stores import open_store
from agentflow.testing.replay import chat_stream
from helpers_cli import STORE_KEY_FILE, run_agentflow, store_key
from helpers_inbox import (Client, pause_chat, running_inbox, server,  # noqa: F401
                           url, worker_once)

PENDING = "agentflow_pending_calls"


def forge(url: str, session_id: str, arguments: dict | None = None) -> None:
    """Approve a waiting call in the store by hand, as a program without the key
    would: an answer (``arguments``: an edit) written into its inbox row."""
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        call_id, text = db.execute(f"SELECT call_id, data FROM {PENDING} WHERE session_id = ?",
                                   (session_id,)).fetchone()
        data = json.loads(text)
        data["answer"] = dataclasses.asdict(RecordedAnswer(
            call_id, data["digest"], True, time.time(), None, "nobody", arguments))
        db.execute(f"UPDATE {PENDING} SET data = ? WHERE session_id = ? AND call_id = ?",
                   (json.dumps(data), session_id, call_id))


@pytest.mark.parametrize("edit", [None, "edit"])
def test_a_forged_answer_or_edit_is_refused_by_the_worker_naming_the_session(
        server, url, tmp_path, edit):
    outside = tmp_path / "outside"
    outside.mkdir()
    pause_chat(server, url, "s-1", [("call_1", "run_command", {"command": "ls"})], tmp_path)
    forge(url, "s-1", {"command": f"touch {outside}/x", "sandbox": False} if edit else None)
    log = worker_once(url, server, tmp_path)
    assert ("worker: skipped s-1: refused: SessionIntegrityError: its inbox row was modified "
            "after it was signed (or the secret is wrong) (nothing was run)") in log
    assert "resuming" not in log
    assert os.listdir(outside) == []
    with running_inbox(url) as inbox:  # the inbox shows it as a row it cannot trust
        client = Client(inbox)
        client.login()
        assert "its inbox row was modified after it was signed" in client.page()


def test_the_control_an_unsigned_store_runs_the_forged_edit(server, url, tmp_path):
    """Without signatures (``--unsigned`` everywhere) the forged edit runs, outside the
    sandbox (the issue's example): what the test above refuses is the forgery."""
    outside = tmp_path / "outside"
    outside.mkdir()
    pause_chat(server, url, "s-1", [("call_1", "run_command", {"command": "ls"})], tmp_path,
               "--unsigned")
    edit = {"command": f"touch {outside}/x"}
    if sandbox.unavailable() is None:  # without bwrap run_command takes no 'sandbox'
        edit["sandbox"] = False
    with open_store(url) as store:  # the forgery: the library, no key needed
        [entry] = store.pending()
        store.answer("s-1", [ToolApprovalResponse("call_1", True, digest=entry.digest,
                                                  arguments=edit)])
    server.queue(chat_stream(text="Done."))
    log = worker_once(url, server, tmp_path, "--unsigned")
    assert "resuming s-1" in log
    assert os.listdir(outside) == ["x"]


def test_a_forged_pending_call_is_refused(server, url, tmp_path):
    pause_chat(server, url, "s-1", [("call_1", "run_command", {"command": "ls"})], tmp_path)
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        row = db.execute(f"SELECT * FROM {PENDING}").fetchone()
        db.execute(f"INSERT INTO {PENDING} VALUES ({', '.join('?' * len(row))})",
                   ("s-9", *row[1:]))
    log = worker_once(url, server, tmp_path)
    assert "worker: skipped s-9: refused: SessionIntegrityError:" in log
    listed = run_agentflow("pending", "--store", url, cwd=tmp_path)
    assert "(cannot be read: SessionIntegrityError: its inbox" in listed.stdout


def test_a_process_without_the_key_says_so_and_exits(server, url, tmp_path):
    pause_chat(server, url, "s-1", [("call_1", "run_command", {"command": "ls"})], tmp_path)
    missing = tmp_path / "no.key"
    for command in (["worker", "--once"], ["pending"], ["inbox"]):
        done = run_agentflow(*command, "--store", url, "--store-key", str(missing),
                             cwd=tmp_path)
        assert done.returncode in (1, 2)
        assert done.stderr.startswith(f"agentflow: --store-key {missing}: cannot read the "
                                      "store's key (No such file or directory)")
    other = tmp_path / "other.key"
    other.write_bytes(os.urandom(32))
    log = worker_once(url, server, tmp_path, "--store-key", str(other))
    assert "worker: skipped s-1: refused: SessionIntegrityError:" in log


def test_one_key_file_serves_the_store_from_anywhere(server, tmp_path):
    """``--store-key FILE`` (or the variable) given to every process: the chat signs
    with it, the worker reads with it; the default key is another one."""
    key = tmp_path / "shared.key"
    key.write_bytes(os.urandom(32) + b"\n")
    url = f"sqlite:///{tmp_path}/state/s.db"
    (tmp_path / "state").mkdir()
    pause_chat(server, url, "s-1", [("call_1", "run_command", {"command": "echo hi"})],
               tmp_path, "--store-key", str(key))
    with open_store(url, key.read_bytes()) as store:
        [entry] = store.pending()
    assert entry.error is None and entry.session_id == "s-1"
    with open_store(url, store_key()) as store:  # the default key is not this store's
        assert store.pending()[0].error.startswith("SessionIntegrityError")
    done = run_agentflow("pending", "--store", url, cwd=tmp_path,
                         env={**os.environ, "AGENTFLOW_STORE_KEY_FILE": str(key),
                              "XDG_CONFIG_HOME": os.path.dirname(os.path.dirname(
                                  STORE_KEY_FILE))})
    assert "s-1" in done.stdout and "cannot be read" not in done.stdout


def test_an_unsigned_store_is_served_only_when_told_so(make_agent, server, tmp_path):
    """An application's store (the library without a secret): the worker refuses it,
    and serves it with --unsigned, saying what that means."""
    from test_inbox import paused_library_session
    url = f"sqlite:///{tmp_path}/app.db"
    with open_store(url) as store:
        paused_library_session(make_agent, store, "app-1")
    listed = run_agentflow("pending", "--store", url, cwd=tmp_path)
    assert "(cannot be read: SessionIntegrityError:" in listed.stdout
    done = run_agentflow("pending", "--store", url, "--unsigned", cwd=tmp_path)
    assert "app-1" in done.stdout and "cannot be read" not in done.stdout
    assert done.stderr.startswith("agentflow pending: note: --unsigned: the store's sessions "
                                  "are not signed, so any program that can write the store "
                                  "can forge an answer")
