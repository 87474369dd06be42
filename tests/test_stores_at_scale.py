"""Stores at scale (SPEC R22 addendum): appends instead of rewrites, a paged inbox that
lists a broken session as an entry, typed store errors, schema creation that leaves
readers alone, FileStore under concurrent writers, one id rule, chained MACs, and
sessions written by the previous layout. Real SQLite files, real processes; the
PostgreSQL variants (``store_url``'s ``postgres``) run in make test-slow."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest

from agentflow import AgentSession, ChatMessage
from agentflow.codec import encode
from agentflow.errors import SessionIntegrityError, StoreError
from agentflow.stores import FileStore, SQLiteStore, open_store
from agentflow.types import ToolCall

import helpers_fork

HERE = os.path.dirname(os.path.abspath(__file__))


def waiting(call_id: str, issued_at: float, text: str = "pay") -> AgentSession:
    """A session paused on one call, issued at ``issued_at``."""
    call = ToolCall(call_id, "transfer", '{"amount": 5}')
    session = AgentSession(messages=[ChatMessage.user(text), ChatMessage.assistant(None, [call])])
    session.approvals.issue(call, issued_at)
    return session


def sql(store_url: str):
    """A plain DB-API connection to the store's database (sqlite3 or psycopg)."""
    if store_url.startswith("sqlite:///"):
        return sqlite3.connect(store_url[len("sqlite:///"):], isolation_level=None)
    import psycopg
    return psycopg.connect(store_url, autocommit=True)


def run_sql(store_url: str, statement: str, params=()):
    connection = sql(store_url)
    try:
        marker = "?" if store_url.startswith("sqlite") else "%s"
        cursor = connection.execute(statement.replace("?", marker), params)
        return cursor.fetchall() if cursor.description is not None else None
    finally:
        connection.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def db_url(request, tmp_path):
    """An empty database store's URL: an SQLite file, or a real PostgreSQL database
    whose agentflow tables were dropped."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    dsn = request.getfixturevalue("postgres_dsn")
    run_sql(dsn, "DROP TABLE IF EXISTS agentflow_sessions, agentflow_session_items, "
            "agentflow_pending_calls, agentflow_leases, agentflow_ready, "
            "agentflow_inbox_changes")
    return dsn


# -- a step's write is what the step adds -----------------------------------------------

def test_a_step_appends_its_messages_and_rewrites_none_before_it(tmp_path):
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        with store.open("s") as session:
            for n in range(50):
                session.messages.append(ChatMessage.user(f"message {n}"))
                session.checkpoint()
        before = dict(run_sql(f"sqlite:///{path}", "SELECT position, rowid FROM "
                              "agentflow_session_items WHERE kind = 'm'"))
        with store.open("s") as session:
            session.messages.append(ChatMessage.assistant("one more"))
        after = dict(run_sql(f"sqlite:///{path}", "SELECT position, rowid FROM "
                             "agentflow_session_items WHERE kind = 'm'"))
        assert len(after) == 51
        assert {p: after[p] for p in before} == before  # no earlier row was written again
        head = run_sql(f"sqlite:///{path}", "SELECT length(data) FROM agentflow_sessions")
        assert head[0][0] < 600  # the head holds no message
        assert [m.content for m in store.load("s").messages][-2:] == ["message 49", "one more"]


def test_an_edit_inside_the_last_tool_call_turn_is_stored(tmp_path):
    """R20 rewrites the stored call's arguments in place: the store sees it."""
    with SQLiteStore(tmp_path / "s.db") as store:
        with store.open("s") as session:
            session.messages += [ChatMessage.user("pay"), ChatMessage.assistant(
                None, [ToolCall("c1", "transfer", '{"amount": 5}')])]
            session.checkpoint()
            session.messages[1].tool_calls[0].arguments = '{"amount": 3}'
            session.checkpoint()
        assert store.load("s").messages[1].tool_calls[0].arguments == '{"amount": 3}'


def test_a_list_made_shorter_is_stored_shorter(tmp_path):
    with SQLiteStore(tmp_path / "s.db") as store:
        with store.open("s") as session:
            session.messages += [ChatMessage.user(str(n)) for n in range(5)]
            session.checkpoint()
            del session.messages[1:]
        assert [m.content for m in store.load("s").messages] == ["0"]


# -- the paged inbox ---------------------------------------------------------------------

def test_pending_pages_in_order_and_the_pages_make_the_whole_list(db_url):
    with open_store(db_url) as store:
        for n in range(30):
            store.save(f"s{n:02d}", waiting("c1", 1000.0 + (n * 7) % 30))
        whole = store.pending(now=2000.0)
        assert [e.issued_at for e in whole] == sorted(e.issued_at for e in whole)
        pages, after = [], None
        while True:
            page = store.pending(now=2000.0, limit=7, after=after)
            if not page:
                break
            pages.append(page)
            after = page[-1]
        assert [len(p) for p in pages] == [7, 7, 7, 7, 2]
        assert [e for p in pages for e in p] == whole


def test_a_resumed_session_leaves_the_inbox(db_url):
    with open_store(db_url) as store:
        store.save("a", waiting("c1", 10.0))
        store.save("b", waiting("c1", 20.0))
        session = store.load("a")
        session.messages.append(ChatMessage.tool("done", "c1"))
        session.approvals.pending.clear()
        store.save("a", session)
        assert [e.session_id for e in store.pending()] == ["b"]


def test_an_inbox_with_one_broken_session_lists_it_and_the_others(db_url):
    with open_store(db_url) as store:
        store.save("good-1", waiting("c1", 10.0))
        store.save("bad", waiting("c1", 20.0))
        store.save("good-2", waiting("c1", 30.0))
    run_sql(db_url, "UPDATE agentflow_pending_calls SET data = ? WHERE session_id = ?",
            ('{"call_id": "c1", "tool": 5', "bad"))
    # a session of the layout before this one, written by a newer agentflow
    run_sql(db_url, "INSERT INTO agentflow_sessions (id, revision, data, updated_at, "
            "waiting_since) VALUES (?, 1, ?, 0, 25.0)",
            ("newer", encode({"schema_version": 99, "revision": 1, "messages": []})))
    with open_store(db_url) as store:
        entries = store.pending(now=100.0)
    assert [(e.session_id, e.error is None) for e in entries] == [
        ("good-1", True), ("bad", False), ("newer", False), ("good-2", True)]
    assert "schema_version 99" in entries[2].error


def test_a_signed_inbox_row_that_was_changed_is_an_entry_with_its_error(db_url):
    with open_store(db_url, secret="k3y") as store:
        store.save("s", waiting("c1", 10.0))
    run_sql(db_url, "UPDATE agentflow_pending_calls SET data = replace(data, 'transfer', "
            "'transfer_all')")
    with open_store(db_url, secret="k3y") as store:
        [entry] = store.pending()
    assert entry.session_id == "s" and "modified after it was signed" in entry.error


def test_file_store_inbox_lists_a_stray_file_as_an_entry(tmp_path):
    store = FileStore(tmp_path)
    store.save("good", waiting("c1", 10.0))
    (tmp_path / "notes.json").write_text("not a session", encoding="utf-8")
    entries = store.pending(now=100.0)
    assert [(e.session_id, e.error is not None) for e in entries] == [("notes", True),
                                                                      ("good", False)]
    assert "is not a saved session" in entries[0].error


# -- signatures: each item's MAC chained to the one before -------------------------------

def test_a_changed_removed_or_copied_item_of_a_signed_session_is_refused(db_url):
    with open_store(db_url, secret="k3y") as store:
        session = AgentSession(messages=[ChatMessage.user(str(n)) for n in range(3)])
        store.save("s", session)
        assert [m.content for m in store.load("s").messages] == ["0", "1", "2"]
    run_sql(db_url, "UPDATE agentflow_session_items SET data = replace(data, '\"1\"', '\"9\"')")
    with open_store(db_url, secret="k3y") as store:
        with pytest.raises(SessionIntegrityError, match="item 1 was modified"):
            store.load("s")
        store.save("t", AgentSession(messages=[ChatMessage.user("x"), ChatMessage.user("y")]))
    run_sql(db_url, "DELETE FROM agentflow_session_items WHERE session_id = 't' AND position = 1")
    run_sql(db_url, "UPDATE agentflow_sessions SET data = (SELECT data FROM agentflow_sessions "
            "WHERE id = 't') WHERE id = 's'")
    with open_store(db_url, secret="k3y") as store:
        with pytest.raises(SessionIntegrityError):
            store.load("t")
        with pytest.raises(SessionIntegrityError, match="copied from another id"):
            store.load("s")


# -- sessions saved by the store before this layout ---------------------------------------

def test_a_session_of_the_previous_layout_loads_is_listed_and_resumes(db_url):
    old = waiting("c1", 10.0, text="old one")
    text = encode({**old.to_dict(), "revision": 3}, "k3y")  # what the old store wrote
    run_sql(db_url, "CREATE TABLE IF NOT EXISTS agentflow_sessions (id TEXT PRIMARY KEY, revision "
            "BIGINT NOT NULL, data TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL, "
            "waiting_since DOUBLE PRECISION)")
    run_sql(db_url, "INSERT INTO agentflow_sessions (id, revision, data, updated_at, "
            "waiting_since) VALUES ('old', 3, ?, 0, 10.0)", (text,))
    with open_store(db_url, secret="k3y") as store:
        [entry] = store.pending(now=20.0)
        assert (entry.session_id, entry.call_id, entry.tool, entry.error) == (
            "old", "c1", "transfer", None)
        with store.open("old") as session:
            assert session.revision == 3 and session.messages[0].content == "old one"
            session.messages.append(ChatMessage.tool("sent 5", "c1"))
            session.approvals.pending.clear()
        assert store.load("old").revision == 4
        assert store.pending() == []
    assert run_sql(db_url, "SELECT waiting_since FROM agentflow_sessions") == [(None,)]
    assert len(run_sql(db_url, "SELECT 1 FROM agentflow_session_items WHERE kind = 'm'")) == 3


# -- typed errors, schema, ids ----------------------------------------------------------

def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(StoreError) as caught:
        SQLiteStore(path)
    assert f"SQLiteStore({str(path)!r}) failed while opening the database" in str(caught.value)
    assert caught.value.store == f"SQLiteStore({str(path)!r})"
    assert caught.value.retryable is False


def test_a_reader_opens_and_lists_while_another_connection_writes(tmp_path):
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        store.save("s", waiting("c1", 10.0))
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # holds the write lock
    try:
        started = time.monotonic()
        with SQLiteStore(path, timeout=0.05) as reader:
            assert [e.session_id for e in reader.pending()] == ["s"]
            assert time.monotonic() - started < 5  # no wait for the write lock
            with pytest.raises(StoreError, match="try again") as caught:
                reader.save("t", AgentSession())
            assert caught.value.retryable is True and caught.value.saved is False
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_one_id_rule_for_every_store(tmp_path):
    long_id = "é" * 101  # 101 characters, 202 bytes of UTF-8
    for store in (FileStore(tmp_path / "f"), SQLiteStore(tmp_path / "s.db")):
        with pytest.raises(ValueError, match="1 to 200 bytes"):
            store.save(long_id, AgentSession())
        store.save("é" * 100, AgentSession())  # 200 bytes: kept, a file name included
        store.save(".session-x", waiting("c1", 5.0))
        assert [e.session_id for e in store.pending()] == [".session-x"]


# -- FileStore: concurrent writers and the inbox -------------------------------------------

WRITER = """
import sys
from agentflow import AgentSession, ChatMessage
from agentflow.stores import FileStore
store = FileStore(sys.argv[1])
for n in range(int(sys.argv[3])):
    session = store.load(sys.argv[2])
    session.messages.append(ChatMessage.user(str(n)))
    store.save(sys.argv[2], session)
"""


@pytest.mark.slow  # a race campaign: two writers, 300 saves, read all along
def test_file_store_pending_under_concurrent_writers_raises_no_false_alarm(tmp_path):
    store = FileStore(tmp_path)
    for name in ("a", "b"):
        store.save(name, waiting("c1", 10.0))
    writers = [helpers_fork.popen([sys.executable, "-c", WRITER, str(tmp_path), name, "150"],
                                  stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    listings, errors = 0, []
    while any(w.poll() is None for w in writers):
        for entry in store.pending():
            if entry.error:
                errors.append(entry.error)
        for name in ("a", "b"):
            store.load(name)  # would raise SessionIntegrityError on a false alarm
        listings += 1
    for w in writers:
        assert w.wait() == 0, w.stderr.read()
    assert listings > 5 and errors == []
    assert store.load("a").revision == 151 and store.load("b").revision == 151


def test_file_store_removes_a_killed_writers_temporary_file(tmp_path):
    FileStore(tmp_path).save("s", AgentSession())
    stale = tmp_path / ".session-abc.tmp"
    stale.write_text("half a session", encoding="utf-8")
    os.utime(stale, (time.time() - 3600,) * 2)
    FileStore(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["s.json", "s.json.rev"]
