"""Workers you can leave running (issue 38; SPEC R22 addendum, fourth batch): a failed
write stores nothing, a damaged session is skipped and reported, a cut-short run is
listed and continued, the file store's revision mark cannot be torn. Every store kind
(PostgreSQL in make test-slow); the restart and kill campaigns are in
tests/test_workers_campaigns.py."""

from __future__ import annotations

import sqlite3
import time

import pytest

from agentflow import ApprovalRequiredTool, FinishReason, tool
from agentflow.errors import StoreError
from agentflow.stores import SessionStore, SQLiteStore, open_store
from agentflow.stores.answers import ready_responses
from agentflow.testing.replay import chat_stream
from agentflow.types import AgentRunOptions


class Ledger:
    """Two approval-gated tools that count their real runs."""

    def __init__(self):
        self.ran = []

        @tool
        def transfer(amount: int) -> str:
            """Send money."""
            self.ran.append(amount)
            return f"sent {amount}"

        self.tools = [ApprovalRequiredTool(transfer)]


TWO_CALLS = [("c1", "transfer", '{"amount": 120}'), ("c2", "transfer", '{"amount": 130}')]


def paused_twice(make_agent, store, ledger, *more, session_id="s", calls=TWO_CALLS):
    """A session whose one turn calls transfer twice (or makes ``calls``), every call
    approved in the store (``store.answer``, as the inbox does): what a worker
    resumes."""
    agent, _ = make_agent([chat_stream(text="Paying.", tool_calls=calls), *more],
                          tools=ledger.tools)
    with store.open(session_id) as session:
        updates = list(agent.run("pay both invoices", session))
    assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    requests = [u for u in updates if hasattr(u, "approve")]
    store.answer(session_id, [r.approve("dana") for r in requests])
    return agent


def _approve(entry):
    from agentflow.types import ToolApprovalResponse
    return ToolApprovalResponse(entry.call_id, True, digest=entry.digest,
                                request_id=entry.request_id, approver="dana")


def resume(agent, store, session_id="s"):
    """What a worker does: open the session, resume it with the recorded answers."""
    with store.open(session_id) as session:
        responses = ready_responses(session)
        return list(agent.run([], session, AgentRunOptions(
            tool_approval_responses=responses)))


def stored(store, session_id="s") -> dict:
    return store.load(session_id).to_dict()


class FailingWrites:
    """Make the store's next write for which ``when(session)`` holds fail, once: the
    database refusing one write (a lost connection, a held lock) and then back."""

    def __init__(self, monkeypatch, store, when):
        real = store.checkpoint
        self.failed = 0

        def checkpoint(session_id, session, before, changed):
            if not self.failed and when(session):
                self.failed += 1
                raise StoreError(f"{store!r} failed while saving: injected. Nothing was "
                                 "saved.", store=repr(store), retryable=True, saved=False)
            return real(session_id, session, before, changed)
        monkeypatch.setattr(store, "checkpoint", checkpoint)


# -- a failed write stores nothing (issue 38, item 4) ---------------------------------------

def test_a_failed_start_record_leaves_the_session_as_it_was(store, make_agent, monkeypatch):
    """The write that records c1's start fails: the exit save of store.open() stores
    nothing of the half-done resume, so the next worker runs both approved calls (c1
    is not 'interrupted', c2 not 'User denied')."""
    ledger = Ledger()
    agent = paused_twice(make_agent, store, ledger, chat_stream(text="Paid both."))
    before = stored(store)
    with monkeypatch.context() as patch:
        FailingWrites(patch, store, lambda session: bool(session.running))
        with pytest.raises(StoreError, match="injected"):
            resume(agent, store)
    assert ledger.ran == []
    assert stored(store) == before
    updates = resume(agent, store)
    assert updates[-1].finish_reason is FinishReason.STOP
    assert ledger.ran == [120, 130]
    assert [m.content for m in store.load("s").messages][-3:] == ["sent 120", "sent 130",
                                                                  "Paid both."]


def test_a_failed_result_write_is_not_stored_by_a_later_save(store, make_agent, monkeypatch):
    """c1 ran, but the write of its result failed: the session stays as the start
    record left it (c1 started, c2 approved and waiting), so the next run answers c1
    'interrupted' (it may have run) and runs c2, which never started."""
    ledger = Ledger()
    agent = paused_twice(make_agent, store, ledger, chat_stream(text="Done."))
    with monkeypatch.context() as patch:
        FailingWrites(patch, store, lambda session: session.messages[-1].role.value == "tool")
        with pytest.raises(StoreError, match="injected"):
            resume(agent, store)
    assert ledger.ran == [120]
    held = store.load("s")
    assert list(held.running) == ["c1"] and held.messages[-1].role.value == "assistant"
    assert [r.call_id for r in held.approvals.pending] == ["c2"]
    resume(agent, store)
    assert ledger.ran == [120, 130]
    results = [m.content for m in store.load("s").messages if m.role.value == "tool"]
    assert results[0].startswith("Error: interrupted") and results[1] == "sent 130"


def test_no_write_after_a_failed_one_in_the_same_open(store, make_agent, monkeypatch):
    """A caller that catches the failed write and goes on saves nothing more of that
    session: the failed step's half is never stored by a later save."""
    ledger = Ledger()
    agent = paused_twice(make_agent, store, ledger)
    before = stored(store)
    FailingWrites(monkeypatch, store, lambda session: True)
    with store.open("s") as session:
        with pytest.raises(StoreError, match="injected"):
            list(agent.run([], session, AgentRunOptions(
                tool_approval_responses=ready_responses(session))))
        with pytest.raises(StoreError, match="an earlier write of this block failed"):
            session.checkpoint(changed=True)
    assert stored(store) == before and ledger.ran == []


def test_a_sqlite_write_lock_held_by_another_connection_stores_nothing(tmp_path, make_agent):
    """No fault injected: another connection holds SQLite's write lock longer than the
    store waits. The resume fails before c1 runs and the session is as it was."""
    path = tmp_path / "sessions.db"
    store = SQLiteStore(path, timeout=0.05)
    ledger = Ledger()
    agent = paused_twice(make_agent, store, ledger, chat_stream(text="Paid both."))
    before = stored(store)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="write lock longer than the timeout"):
            resume(agent, store)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert ledger.ran == [] and stored(store) == before
    resume(agent, store)
    assert ledger.ran == [120, 130]
    store.close()


# -- the file store's revision mark (issue 38, item 6) ---------------------------------------

def test_the_revision_mark_is_replaced_whole(tmp_path):
    """The mark is written as the session is (a temporary file renamed over it), so a
    kill between making it and writing it leaves the old mark, never an empty one."""
    import os

    from agentflow import AgentSession, ChatMessage
    store = open_store(f"file://{tmp_path}")
    store.save("s", AgentSession(messages=[ChatMessage.user("hi")]))
    mark = tmp_path / "s.json.rev"
    first = os.stat(mark).st_ino
    session = store.load("s")
    store.save("s", session)
    assert os.stat(mark).st_ino != first  # renamed into place, not rewritten in it
    assert mark.read_text() == f"{2:020d}\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_an_empty_mark_an_older_version_left_does_not_make_the_session_unreadable(tmp_path):
    """2 of 810 jobs: killed between creating the mark and writing it (older versions).
    The session still loads, lists and takes its next write."""
    from agentflow import AgentSession, ChatMessage
    store = open_store(f"file://{tmp_path}")
    store.save("s", AgentSession(messages=[ChatMessage.user("hi")]))
    (tmp_path / "s.json.rev").write_text("")
    session = store.load("s")
    assert session.revision == 1 and store.pending() == []
    store.save("s", session)
    assert store.load("s").revision == 2


# -- a commit cut off with its connection (issue 38, item 2; PostgreSQL) --------------------

@pytest.fixture
def postgres_store(postgres_dsn):
    import psycopg
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS agentflow_sessions, agentflow_session_items, "
                           "agentflow_pending_calls, agentflow_leases, agentflow_ready, "
                           "agentflow_inbox_changes")
    from agentflow.stores import PostgresStore
    store = PostgresStore(postgres_dsn)
    yield store
    store.close()


def cut_at_commit(monkeypatch, store, after: bool):
    """The next COMMIT's connection dies: before the server commits (``after`` false:
    the server rolls the transaction back) or once it has (``after``: the reply is
    what is lost). The server really ends the backend, through another connection."""
    import psycopg
    real, cut = store._execute, []

    def execute(sql, params=()):
        if sql == "COMMIT" and not cut:
            cut.append(sql)
            pid = store._db.info.backend_pid
            if after:
                real(sql, params)
            with psycopg.connect(store._dsn, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (pid,))
            return real("SELECT 1" if after else sql, params)  # fails: the backend is gone
        return real(sql, params)
    monkeypatch.setattr(store, "_execute", execute)
    return cut


@pytest.mark.slow
@pytest.mark.parametrize("after", [False, True], ids=["rolled-back", "committed"])
def test_a_commit_cut_off_is_read_back_not_resent_blindly(postgres_store, monkeypatch,
                                                           after):
    """Rolled back: the store sees the revision before it and writes again. Committed:
    it sees its own write and reports it done, without writing it twice."""
    from agentflow import AgentSession, ChatMessage
    store = postgres_store
    session = AgentSession(messages=[ChatMessage.user("hi")])
    store.save("s", session)
    session.messages.append(ChatMessage.assistant("hello"))
    cut = cut_at_commit(monkeypatch, store, after)
    store.save("s", session)
    assert cut == ["COMMIT"] and session.revision == 2
    held = store.load("s")
    assert held.revision == 2 and [m.content for m in held.messages] == ["hi", "hello"]


# -- no stranded session (issue 38, item 1) -----------------------------------------------

class WorkerKilled(BaseException):
    """What a SIGKILL leaves, in-process: the run stops where it is, no handler runs
    (not KeyboardInterrupt, whose result the tool loop stores), and the lease goes
    with the block. tests/test_workers_campaigns.py kills real workers."""


def killing_ledger(when):
    """``Ledger`` whose transfer is killed when ``when(amount)`` holds, after it ran."""
    ledger = Ledger()
    real = ledger.tools[0]

    @tool
    def transfer(amount: int) -> str:
        """Send money."""
        ledger.ran.append(amount)
        if when(amount):
            raise WorkerKilled()
        return f"sent {amount}"
    ledger.tools = [ApprovalRequiredTool(transfer)]
    assert real.name == "transfer"
    return ledger


def killed_resume(agent, store):
    with pytest.raises(WorkerKilled):
        resume(agent, store)


def continue_run(agent, store, session_id="s"):
    """What a worker does with a cut-short session: run it on, without answers."""
    with store.open(session_id) as session:
        return list(agent.run([], session))


def test_a_run_cut_short_inside_a_tool_is_listed_and_continued(store, make_agent):
    """The worker died inside c1 (after its start record). Before: nothing listed it,
    nothing continued it. Now: listed as needing a run; continued, c1 is answered
    'interrupted' (it may have run) and the model hears it."""
    from agentflow.stores.base import CUT_SHORT
    ledger = killing_ledger(lambda amount: True)
    paused_twice(make_agent, store, ledger, calls=[("c1", "transfer", '{"amount": 120}')])
    agent, _ = make_agent([chat_stream(text="It may not have gone through.")],
                          tools=ledger.tools)
    killed_resume(agent, store)
    held = store.load("s")
    assert list(held.running) == ["c1"] and held.approvals.pending == []
    [entry] = store.pending()
    assert (entry.session_id, entry.needs_run, entry.call_id) == ("s", CUT_SHORT, "")
    assert list(store.answered()) == [] and store.cut_short() == ["s"]
    updates = continue_run(agent, store)
    assert updates[-1].finish_reason is FinishReason.STOP
    assert ledger.ran == [120]  # never twice
    results = [m.content for m in store.load("s").messages if m.role.value == "tool"]
    assert len(results) == 1 and results[0].startswith("Error: interrupted")
    assert store.pending() == [] and store.cut_short() == []


def test_a_run_cut_short_between_a_result_and_the_model_goes_on_to_the_model(store,
                                                                              make_agent):
    """Both results are stored; the model's next turn failed (the provider went away):
    the session is listed and its continued run asks the model, running nothing again."""
    ledger = Ledger()
    agent = paused_twice(make_agent, store, ledger)
    agent, server = make_agent([b"not a stream"], tools=ledger.tools)
    server.status = 500
    from agentflow.errors import AgentflowError
    with pytest.raises(AgentflowError):
        resume(agent, store)
    assert ledger.ran == [120, 130]
    assert store.cut_short() == ["s"]
    agent, _ = make_agent([chat_stream(text="Paid both.")], tools=ledger.tools)
    continue_run(agent, store)
    assert ledger.ran == [120, 130]
    assert store.load("s").messages[-1].content == "Paid both."
    assert store.cut_short() == [] and store.pending() == []


def test_killed_inside_the_first_of_two_approved_calls_the_second_still_runs(store,
                                                                              make_agent):
    """c2 never started: its answer is in the session, so the session is listed as
    answered (not cut short), and the worker's resume runs it (it was approved)."""
    ledger = killing_ledger(lambda amount: amount == 120 and ledger.ran.count(120) == 1)
    agent = paused_twice(make_agent, store, ledger, chat_stream(text="One of two."))
    killed_resume(agent, store)
    assert list(store.answered()) == ["s"] and store.cut_short() == []
    resume(agent, store)
    assert ledger.ran == [120, 130]
    results = [m.content for m in store.load("s").messages if m.role.value == "tool"]
    assert results[0].startswith("Error: interrupted") and results[1] == "sent 130"


def test_a_run_a_live_worker_holds_is_not_listed(store, store_url, make_agent):
    """While the holder is alive (inside the tool), the session is not 'cut short':
    no other worker may continue it."""
    from test_stores import Payments, approve, pause
    seen = []

    def look():
        with open_store(store_url) as other:
            seen.append((other.cut_short(), [e.needs_run for e in other.pending()]))
    payments = Payments(inside=look)
    agent, _ = pause(make_agent, store, "s", payments, chat_stream(text="Paid."))
    with store.open("s") as session:
        list(agent.run([], session, approve()))
    assert seen == [([], [])]
    assert store.cut_short() == [] and store.pending() == []


def test_finished_and_paused_runs_are_not_cut_short(store, make_agent):
    """The mark goes with the run's last turn: a run that ran tools and ended, one that
    hit max_rounds after its tools, and one that paused again are not listed."""
    from agentflow.journal import RUN_MARK
    ledger = Ledger()
    agent = paused_twice(make_agent, store, ledger, chat_stream(
        text="Once more.", tool_calls=[("c3", "transfer", '{"amount": 5}')]))
    updates = resume(agent, store)
    assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    assert RUN_MARK not in store.load("s").state and store.cut_short() == []
    agent, _ = make_agent([], tools=ledger.tools)
    with store.open("s") as session:  # max_rounds=1: the run ends after the results
        [entry] = store.pending()
        options = AgentRunOptions(max_rounds=1)
        updates = list(agent.run([], session, options.with_tool_approval_responses(
            [_approve(entry)])))
    assert updates[-1].finish_reason is FinishReason.MAX_ROUNDS
    assert RUN_MARK not in store.load("s").state and store.cut_short() == []
    assert store.pending() == [] and ledger.ran == [120, 130, 5]


# -- SQLite on a read-only file system (issue 38, item 8) -----------------------------------

READ_ONLY_LISTING = """
import sys
from agentflow.stores import SQLiteStore
store = SQLiteStore(sys.argv[1])
print(store.read_only)
print([(e.session_id, e.call_id, e.answer is not None) for e in store.pending()])
print(list(store.answered()), store.cut_short(), len(store.load("s").messages))
try:
    store.save("s", store.load("s"))
except Exception as exc:
    print(type(exc).__name__)
"""


def test_a_sqlite_store_on_a_read_only_file_system_can_be_listed(tmp_path, make_agent):
    """It could not even be listed. The folder is bind-mounted read-only in a mount
    namespace of its own (a real read-only file system, also for root)."""
    import os
    import shutil
    import subprocess
    import sys
    if shutil.which("unshare") is None:
        pytest.skip("no unshare (util-linux) to mount a read-only file system")
    folder = tmp_path / "ro"
    folder.mkdir()
    store = SQLiteStore(folder / "sessions.db")
    ledger = Ledger()
    paused_twice(make_agent, store, ledger)
    store.close()
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount --bind -o ro "$1" "$1" && exec "$2" -c "$3" "$1/sessions.db"', "sh",
         str(folder), sys.executable, READ_ONLY_LISTING],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": ""})
    if "Operation not permitted" in done.stderr or "unshare failed" in done.stderr:
        if os.environ.get("CI") == "true":
            pytest.fail(done.stderr)
        pytest.skip(f"cannot mount a read-only file system here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "mode=ro&immutable=1", "[('s', 'c1', True), ('s', 'c2', True)]", "['s'] [] 2",
        "StoreError"]


def test_a_store_an_older_version_wrote_gets_its_ready_rows(tmp_path, make_agent):
    """The ready table is new: a database without it is filled once, when the table is
    made, from the inbox rows (answered sessions) and the heads (cut-short ones)."""
    path = tmp_path / "sessions.db"
    store = SQLiteStore(path)
    ledger = killing_ledger(lambda amount: amount == 7)
    paused_twice(make_agent, store, ledger, session_id="answered")
    paused_twice(make_agent, store, ledger, session_id="cut", calls=[
        ("c1", "transfer", '{"amount": 7}')])
    agent, _ = make_agent([], tools=ledger.tools)
    with pytest.raises(WorkerKilled):
        resume(agent, store, "cut")
    paused_twice(make_agent, store, ledger, session_id="waiting")
    store._db.execute("DELETE FROM agentflow_pending_calls WHERE session_id = 'waiting' "
                      "AND call_id = 'c2'")  # one answer left: still waiting
    store._db.execute("UPDATE agentflow_pending_calls SET data = replace(data, '\"answer\"', "
                      "'\"unanswered\"') WHERE session_id = 'waiting'")
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE agentflow_ready")
    again = SQLiteStore(path)
    assert list(again.answered()) == ["answered"] and again.cut_short() == ["cut"]
    again.close()


# -- an answer wakes a waiting worker (issue 38: the click -> the tool call) ----------------

@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def test_an_answer_wakes_a_waiting_worker_at_once(kind, request, tmp_path, make_agent):
    """``store.wait(timeout)`` between a worker's looks returns when an inbox records
    an answer (PostgreSQL: NOTIFY at its commit; SQLite: the file's data version), not
    after the whole timeout."""
    import threading
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path}/sessions.db"
    else:
        url = request.getfixturevalue("postgres_store")._dsn
    with open_store(url) as inbox, open_store(url) as worker:
        ledger = Ledger()
        agent, _ = make_agent([chat_stream(text="Paying.", tool_calls=TWO_CALLS[:1])],
                              tools=ledger.tools)
        with inbox.open("s") as session:
            list(agent.run("pay", session))
        worker.wait(0.0)  # PostgreSQL: listening from here on
        [entry] = inbox.pending()

        def answer_now():  # an inbox of its own thread: SQLite connections stay in theirs
            with open_store(url) as other:
                other.answer("s", [_approve(entry)])
        answer = threading.Timer(0.1, answer_now)
        started = time.monotonic()
        answer.start()
        worker.wait(10.0)
        waited = time.monotonic() - started
        answer.join()
        # it returned at the answer's commit (0.1 s), not at its 10 s timeout; the upper
        # bound leaves a loaded machine room, the lower one proves it did not return early
        assert 0.09 < waited < 8.0, waited
        assert list(worker.answered()) == ["s"]


# -- change detection reads only what changed (issue 38, item 7) ----------------------------

def test_changes_names_only_the_sessions_whose_inbox_rows_changed(store, make_agent):
    """An inbox's look asks ``changes`` and reads again only those sessions
    (``pending_of``); a folder cannot tell, so it says to read everything."""
    ledger = Ledger()
    paused_twice(make_agent, store, ledger, session_id="a")
    cursor, ids = store.changes()
    assert ids is None  # the first look reads everything
    cursor, ids = store.changes(cursor)
    if type(store).__name__ == "FileStore":
        assert (cursor, ids) == (None, None)
        return
    assert ids == []  # nothing changed: nothing to read
    agent, _ = make_agent([chat_stream(text="Paying.", tool_calls=TWO_CALLS[:1])],
                          tools=ledger.tools)
    with store.open("b") as session:
        list(agent.run("pay", session))
    cursor, ids = store.changes(cursor)
    assert ids == ["b"]
    assert [(e.session_id, e.call_id) for e in store.pending_of(ids)] == [("b", "c1")]
    [entry] = store.pending_of(["b"])
    store.answer("b", [_approve(entry)])
    cursor, ids = store.changes(cursor)
    assert ids == ["b"] and store.pending_of(ids)[0].answer.approver == "dana"
    store.delete("a")
    cursor, ids = store.changes(cursor)
    assert ids == ["a"] and store.pending_of(ids) == []


def test_a_change_that_commits_late_is_still_seen(tmp_path, make_agent):
    """PostgreSQL takes a write's number before its commit, so a write may commit
    after one with a higher number: the look reads a window of recent numbers again."""
    store = SQLiteStore(tmp_path / "sessions.db")
    ledger = Ledger()
    for name in ("a", "b"):
        paused_twice(make_agent, store, ledger, session_id=name)
    cursor, _ = store.changes()
    cursor, _ = store.changes(cursor)
    top = cursor[0]
    store._db.execute("UPDATE agentflow_inbox_changes SET seq = ? WHERE session_id = 'a'",
                      (top - 1,))  # a's later write, numbered before b's
    store._db.execute("UPDATE agentflow_inbox_changes SET seq = ? WHERE session_id = 'b'",
                      (top + 1,))
    cursor, ids = store.changes(cursor)
    assert ids == ["a", "b"]
    store.close()
