"""One suite for every session store (SPEC R16, R22): ``FileStore``, ``SQLiteStore`` and
``PostgresStore`` (a real server: ``conftest.postgres_dsn``) answer the same tests.

Each test asserts what the store holds and how many times a tool really ran."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalRequiredTool, ChatMessage,
                       FinishReason, ToolApprovalResponse, ToolResult, tool)
from agentflow.canonical import arguments_digest
from agentflow.errors import SessionConflictError, SessionIntegrityError, SessionLockedError
from agentflow.testing.replay import ReplayServer, chat_stream
from agentflow.types import ToolCall
from agentflow.stores import open_store

import helpers_fork

HERE = os.path.dirname(os.path.abspath(__file__))
PAY = '{"amount": 120}'


class Payments:
    """An approval-gated ``transfer`` that counts its runs; ``inside`` is called while
    it runs, to look at the store from outside."""

    def __init__(self, inside=None):
        self.ran = []

        @tool
        def transfer(amount: int) -> str:
            """Send money."""
            self.ran.append(amount)
            if inside is not None:
                inside()
            return f"sent {amount}"

        self.tools = [ApprovalRequiredTool(transfer)]


def pause(make_agent, store, session_id, payments, *more_bodies, call_id="c1",
          arguments=PAY):
    """Run until the model's call to transfer waits for approval, in the store."""
    agent, server = make_agent([chat_stream(text="Paying.",
                                            tool_calls=[(call_id, "transfer", arguments)]),
                                *more_bodies], tools=payments.tools)
    with store.open(session_id) as session:
        updates = list(agent.run("pay the invoice", session))
    assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    return agent, server


def approve(call_id="c1"):
    return AgentRunOptions().with_tool_approval_responses([ToolApprovalResponse(call_id, True)])


# -- revisions and compare-and-swap ----------------------------------------------------------

def test_r22_a_session_round_trips_with_its_revision(store):
    session = AgentSession(messages=[
        ChatMessage.user("café"), ChatMessage.assistant(None, [ToolCall("c1", "list_dir")]),
        ChatMessage.tool("caf\udce9.txt", "c1")])  # a file name that is not UTF-8
    store.save("s-1", session)
    assert session.revision == 1
    again = store.load("s-1")
    assert again == session and again.revision == 1
    assert again.messages[2].content == "caf\udce9.txt"  # stored escaped, read back exactly
    store.save("s-1", again)
    assert store.load("s-1").revision == 2
    with pytest.raises(KeyError, match="no session 'nope'"):
        store.load("nope")


def test_r22_a_write_based_on_an_older_revision_is_refused(store):
    """No rollback: a stale copy cannot be written over a newer one."""
    session = AgentSession(messages=[ChatMessage.user("one")])
    store.save("s", session)
    stale = store.load("s")
    session.messages.append(ChatMessage.assistant("two"))
    store.save("s", session)
    stale.messages.append(ChatMessage.assistant("other"))
    with pytest.raises(SessionConflictError, match="read at revision 1; the store holds "
                                                   "revision 2"):
        store.save("s", stale)
    held = store.load("s")
    assert held.revision == 2 and [m.content for m in held.messages] == ["one", "two"]


def test_r22_two_new_sessions_with_one_id_conflict(store):
    store.save("s", AgentSession(messages=[ChatMessage.user("first")]))
    with pytest.raises(SessionConflictError, match="created it first"):
        store.save("s", AgentSession(messages=[ChatMessage.user("second")]))
    assert store.load("s").messages[0].content == "first"


def test_r22_session_ids_that_no_store_could_keep_are_refused(store):
    for bad in ("", "a/b", "..", "x\0y", "caf\udce9"):
        with pytest.raises(ValueError, match="not allowed"):
            store.save(bad, AgentSession())


def test_r22_a_signed_store_refuses_a_session_signed_otherwise(store_url):
    with open_store(store_url, secret="k3y") as signed:
        signed.save("s", AgentSession(messages=[ChatMessage.user("hi")]))
        assert signed.load("s").messages[0].content == "hi"
    with open_store(store_url, secret="other") as wrong:
        with pytest.raises(SessionIntegrityError, match="modified after it was signed"):
            wrong.load("s")


# -- runs through a store ----------------------------------------------------------------

def test_r16_the_start_of_a_call_is_stored_before_the_tool_runs(store, store_url, make_agent):
    """While the approved tool runs, another reader of the store already sees the
    decision and the write-ahead record; afterwards the result replaced it."""
    seen = []

    def look():
        with open_store(store_url) as other:
            held = other.load("s")
        seen.append((list(held.running), [r.outcome for r in held.audit],
                     [m.role.value for m in held.messages]))

    payments = Payments(inside=look)
    agent, _ = pause(make_agent, store, "s", payments, chat_stream(text="Paid."))
    with store.open("s") as session:
        updates = list(agent.run([], session, approve()))
    assert updates[-1].finish_reason is FinishReason.STOP
    assert seen == [(["c1"], ["approved"], ["user", "assistant"])]
    held = store.load("s")
    assert held.running == {}
    assert [m.content for m in held.messages] == ["pay the invoice", "Paying.", "sent 120",
                                                  "Paid."]
    assert payments.ran == [120]


def test_r22_a_second_worker_resuming_the_same_pause_runs_nothing(store_url, make_agent):
    """While one worker has the session open, another's open and writes are refused at
    once (the lease, SPEC R16, R22), also one based on a copy read before."""
    payments = Payments()
    with open_store(store_url) as store:
        agent, _ = pause(make_agent, store, "s", payments, chat_stream(text="Paid."))
    with open_store(store_url) as one, open_store(store_url) as two:
        stale = two.load("s")
        with one.open("s") as first:
            with pytest.raises(SessionLockedError, match="is in use by another (worker|proc)"):
                two.open("s").__enter__()
            with pytest.raises(SessionLockedError, match="it has the session open for a run"):
                two.save("s", stale)
            with pytest.raises(SessionLockedError, match="in use"):
                one.open("s").__enter__()  # the same store, twice: refused too
            list(agent.run([], first, approve()))
        with pytest.raises(SessionConflictError, match="read at revision 1"):
            two.save("s", stale)  # released: the revision decides now
    assert payments.ran == [120]
    with open_store(store_url) as store:
        held = store.load("s")
    assert [r.outcome for r in held.audit] == ["approved"]
    assert held.messages[-1].content == "Paid."


def test_r22_pending_lists_the_inbox_oldest_first(store, make_agent):
    payments = Payments()
    clock = [1_800_000_000.0]
    agent, _ = make_agent([
        chat_stream(tool_calls=[("c1", "transfer", PAY)]),
        chat_stream(tool_calls=[("k1", "transfer", '{"amount": 5}'),
                                ("k2", "transfer", '{"amount": 7}')]),
        chat_stream(text="Paid.")], tools=payments.tools)
    agent.chat_client.clock = lambda: clock[0]
    with store.open("old") as session:
        list(agent.run("pay 120", session))
    clock[0] += 60
    with store.open("new") as session:
        list(agent.run("pay 5 and 7", session))
    store.save("idle", AgentSession(messages=[ChatMessage.user("nothing waits")]))

    entries = store.pending(now=clock[0] + 30)
    # The gate's inbox fields (why, the schema, …) are tested in tests/test_inbox.py.
    assert [(e.session_id, e.call_id, e.tool, e.arguments, e.digest, e.issued_at,
             e.expires_at, e.age) for e in entries] == [
        ("old", "c1", "transfer", {"amount": 120}, arguments_digest(PAY),
         1_800_000_000.0, None, 90.0),
        ("new", "k1", "transfer", {"amount": 5},
         arguments_digest('{"amount": 5}'), 1_800_000_060.0, None, 30.0),
        ("new", "k2", "transfer", {"amount": 7},
         arguments_digest('{"amount": 7}'), 1_800_000_060.0, None, 30.0)]
    with store.open("old") as session:  # answered: it leaves the inbox
        list(agent.run([], session, approve()))
    assert [(e.session_id, e.call_id) for e in store.pending()] == [("new", "k1"),
                                                                    ("new", "k2")]
    assert payments.ran == [120]


def test_r22_open_saves_nothing_when_nothing_changed(store):
    store.save("s", AgentSession(messages=[ChatMessage.user("hi")]))
    with store.open("s") as session:
        assert session.revision == 1
    assert store.load("s").revision == 1


# -- two processes ------------------------------------------------------------------------

def worker(store_url, base_url, log, *flags):
    """tests/worker.py resuming session ``s`` of the store, its pipes open."""
    return helpers_fork.popen(
        [sys.executable, os.path.join(HERE, "worker.py"), store_url, "s", base_url, str(log),
         *flags], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def test_r22_three_processes_resume_the_same_pause(store_url, make_agent, tmp_path):
    """Three workers resume one pause at once: the first to open it runs the call, the
    other two get SessionLockedError (a SessionConflictError) and run nothing."""
    payments = Payments()
    with open_store(store_url) as store:
        pause(make_agent, store, "s", payments)
    log = tmp_path / "ran.log"
    with ReplayServer([chat_stream(text="Paid.")]) as server:
        workers = [worker(store_url, server.base_url, log, "--respond", "c1=yes", "--wait")
                   for _ in range(3)]
        firsts = [w.stdout.readline().strip() for w in workers]  # each has read, or failed
        for each, first in zip(workers, firsts):
            if first == "loaded":  # it holds the session until now
                each.stdin.write("go\n")
                each.stdin.flush()
        outs = [w.communicate(timeout=60) for w in workers]
    assert sorted(firsts) == ["SessionLockedError", "SessionLockedError", "loaded"], outs
    assert sorted(out.split()[-1] for first, (out, _) in zip(firsts, outs)
                  if first == "loaded") == ["stop"], outs
    assert all("try again when it finishes" in err for first, (_, err) in zip(firsts, outs)
               if first != "loaded"), outs
    assert log.read_text() == "transfer 120\n"
    with open_store(store_url) as store:
        held = store.load("s")
    assert [r.outcome for r in held.audit] == ["approved"]
    assert [m.content for m in held.messages][-2:] == ["sent 120", "Paid."]


def test_r16_a_call_running_in_a_live_worker_is_not_taken_for_interrupted(store_url,
                                                                          make_agent,
                                                                          tmp_path):
    """Worker A runs the approved call (and waits inside it); meanwhile B wants to go
    on with no responses. B is told the call runs in A and stores nothing, through
    open or through a copy it loaded; A's result is stored, and the next run hears it,
    not 'interrupted'."""
    payments = Payments()
    with open_store(store_url) as store:
        agent, server = pause(make_agent, store, "s", payments,
                              chat_stream(text="Should not be asked."),
                              chat_stream(text="It went out."))
    log = tmp_path / "ran.log"
    with ReplayServer([chat_stream(text="Paid.")]) as a_server:
        a = worker(store_url, a_server.base_url, log, "--respond", "c1=yes", "--wait-in-tool")
        try:
            assert a.stdout.readline().strip() == "in tool", a.communicate()
            with open_store(store_url) as b:
                with pytest.raises(SessionLockedError,
                                   match=r"in use by another .*: call c1 \(transfer\) is "
                                         r"running there since \d{4}-\d\d-\d\d "
                                         r"\d\d:\d\d:\d\d UTC \(\d+ s\); try again when "
                                         "it finishes"):
                    with b.open("s") as session:
                        list(agent.run([], session))
                copy = b.load("s")
                assert list(copy.running) == ["c1"]
                list(agent.run([], copy))  # in memory it answers c1 'interrupted' ...
                with pytest.raises(SessionLockedError, match="call c1 .* is running there"):
                    b.save("s", copy)  # ... but cannot store that while A lives
        finally:
            a.stdin.write("done\n")
            a.stdin.flush()
            out, err = a.communicate(timeout=60)
    assert out.splitlines()[-1] == "stop", err
    assert log.read_text() == "transfer 120\n"
    with open_store(store_url) as store:
        with store.open("s") as session:
            assert session.running == {}
            assert [m.content for m in session.messages][-2:] == ["sent 120", "Paid."]
            updates = list(agent.run("did it go out?", session))
    assert updates[-1].finish_reason is FinishReason.STOP
    assert "interrupted" not in json.dumps(server.requests[-1].json)
    assert [m["content"] for m in server.requests[-1].json["messages"]][-3:] == [
        "sent 120", "Paid.", "did it go out?"]


def test_r16_a_worker_killed_in_the_tool_leaves_its_call_interrupted(store_url, make_agent,
                                                                     tmp_path):
    """SIGKILL of the worker inside the tool releases its lease (the kernel closes its
    lock file or its database connection): the next worker may open the session, and
    answers the call 'interrupted' instead of running it again."""
    payments = Payments()
    with open_store(store_url) as store:
        agent, _ = pause(make_agent, store, "s", payments,
                         chat_stream(text="It may have gone out."))
    log = tmp_path / "ran.log"
    with ReplayServer([chat_stream(text="never reached")]) as server:
        a = worker(store_url, server.base_url, log, "--respond", "c1=yes", "--stop-at", "tool")
        try:
            assert a.stdout.readline().strip() == "at tool", a.communicate()
        finally:
            a.send_signal(signal.SIGKILL)
            a.communicate(timeout=60)
    with open_store(store_url) as store:
        with opened_when_released(store, "s") as session:
            updates = list(agent.run([], session))
    assert [(u.call_id, u.result) for u in updates if isinstance(u, ToolResult)] == [
        ("c1", "Error: interrupted: transfer may have partly run and was not run again")]
    assert log.read_text() == "transfer 120\n" and payments.ran == []


@contextlib.contextmanager
def opened_when_released(store, session_id):
    """``store.open``, once the lease of a killed worker is gone: PostgreSQL drops its
    advisory lock when the server sees the connection closed, a moment after the
    process died."""
    deadline = time.monotonic() + 30  # only against a hang
    while True:
        try:
            opened = store.open(session_id)
            session = opened.__enter__()
            break
        except SessionLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    with contextlib.ExitStack() as stack:
        stack.push(opened)
        yield session


# -- a restored older file (issue 11, item 4) ---------------------------------------------

def test_r22_a_session_file_put_back_from_an_older_copy_is_refused(make_agent, tmp_path):
    """HMAC proves origin, not freshness: the signed paused file, copied before the
    approved call ran and put back afterwards, verifies, but is older than the revision
    the file store last wrote. Loading it is refused, so the approval cannot be used
    twice; deleting the mark is the explicit way back."""
    path = tmp_path / "s.json"
    payments = Payments()
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "transfer", PAY)]),
                           chat_stream(text="Paid.")], tools=payments.tools)
    with AgentSession.open(path, secret="k3y") as session:
        list(agent.run("pay", session))
    paused_copy = path.read_bytes()
    with AgentSession.open(path, secret="k3y") as session:
        list(agent.run([], session, approve()))
    path.write_bytes(paused_copy)

    with pytest.raises(SessionIntegrityError, match="put back from an older copy"):
        with AgentSession.open(path, secret="k3y"):
            pass
    with pytest.raises(SessionIntegrityError, match="older copy"):
        AgentSession.load(path, secret="k3y")
    assert payments.ran == [120]
    os.unlink(f"{path}.rev")
    assert AgentSession.load(path, secret="k3y").approvals.pending[0].call_id == "c1"


# -- the command line ------------------------------------------------------------------

def test_r22_cli_chat_in_a_store_and_the_pending_inbox(tmp_path, capsys):
    """``agentflow chat --store URL --session ID`` pauses in the store; ``agentflow
    pending --store URL`` lists the call; ``--respond`` resumes it from the store."""
    from agentflow.cli.main import main
    from helpers_cli import STORE_KEY_FILE, calls_reply, run_chat

    def pending(*flags):
        assert main(["pending", "--store", url, "--store-key", STORE_KEY_FILE, *flags]) == 0
        return capsys.readouterr().out

    url = f"sqlite:///{tmp_path}/sessions.db"
    with ReplayServer([calls_reply(("call_1", "run_command", {"command": "echo hi"})),
                       chat_stream(text="It said hi.")]) as server:
        paused = run_chat("--sandbox", "off",
                          "--base-url", server.base_url, "--store", url, "--session", "t-1",
                          "Say hi", cwd=tmp_path)
        assert (paused.returncode, paused.stderr) == (3, "")
        assert paused.stdout.splitlines()[-1] == (f"Resume with: agentflow chat --store {url} "
                                                  "--session t-1 --respond call_1=yes")
        [entry] = [json.loads(line) for line in pending("--json").splitlines()]
        assert (entry["session"], entry["call_id"], entry["tool"], entry["arguments"],
                entry["digest"]) == ("t-1", "call_1", "run_command", {"command": "echo hi"},
                                     arguments_digest('{"command": "echo hi"}'))
        assert pending().splitlines()[1].split()[1:5] == ["t-1", "call_1", "run_command",
                                                         '{"command":']
        resumed = run_chat("--sandbox", "off",
                           "--base-url", server.base_url, "--store", url, "--session", "t-1",
                           "--respond", "call_1=yes", cwd=tmp_path)
        assert (resumed.returncode, resumed.stderr) == (0, "")
        assert resumed.stdout.endswith("assistant> It said hi.\n")
    assert pending() == "nothing waits for approval\n"
    assert main(["chat", "--store", url, "hi"]) == 2
    assert capsys.readouterr().err == ("agentflow: --store needs --session ID (the session's "
                                       "id in the store)\n")
