"""``SQLiteStore`` and ``PostgresStore``: sessions as rows (SPEC R16, R22 and its
addendum, "Stores at scale").

    agentflow_sessions(id TEXT PRIMARY KEY, revision BIGINT, data TEXT,
                       updated_at DOUBLE PRECISION, waiting_since DOUBLE PRECISION)
    agentflow_session_items(session_id, kind, position, data, mac)   -- messages, audit
    agentflow_pending_calls(session_id, call_id, issued_at, data, mac)  -- the inbox
    agentflow_ready(session_id, why, since)  -- what a worker has to do, without a person
    agentflow_inbox_changes(session_id, seq)  -- the last write that changed its inbox rows

A session is a small head row (``data``: everything but its messages and audit
trail, ``rows.py``), one item row per message and audit record, and one row per call
waiting for a human. A step's write appends what the step added and rewrites the
head; the compare-and-swap is one statement on the head, ``UPDATE … SET revision =
n + 1 … WHERE id = ? AND revision = n`` (no row changed: another worker wrote first),
in the same transaction as the items, so a reader sees a session and its revision
whole. Opening a session is one read (one statement: the head and its items).
``pending(limit=, after=)`` pages through the pending-calls table by its index
(``issued_at, session_id, call_id``) and reads nothing else. The ready table holds one
row per session a worker has to take up (``base.readiness``: every waiting call
answered, or a run cut short), written in the same transaction as the head, so the
listings a worker polls (``answered()``, ``cut_short()``) read only those rows. Text, not JSONB:
PostgreSQL's JSONB refuses the escaped lone surrogates a tool's result may hold.

Sessions written before this layout (the whole session in ``data``, its
``waiting_since`` set when it waits) are read as they are, listed by ``pending`` from
that column, and stored in the new layout by their next write.

Every database error is a ``StoreError`` naming the store and what to do. The schema
is created only when it is missing, so a process that only reads (an inbox) never
waits for another's write lock.

SQLite (standard library ``sqlite3``) runs in WAL mode with ``synchronous=FULL``: each
write is durable when it returns, readers never block the writer, and several
processes on one machine share the file safely (``BEGIN IMMEDIATE`` takes the write
lock up front, ``timeout`` seconds of waiting for it). Its lease is an OS lock on
``PATH-locks/<sha256 of the id>.lock`` beside the database (``durable.FileLock``),
which the kernel drops when its holder dies; one machine, as SQLite itself.

PostgreSQL (``psycopg`` 3, the extra ``agentflow-approvals[postgres]``, imported only when a
``PostgresStore`` is made) serves workers on many machines. A lost connection (a
server restart, a failover) is reconnected by the next statement, waiting at most
``reconnect_wait`` seconds, meanwhile ``StoreError``; the statement then runs again
once: a read, a write whose transaction the lost connection rolled back, and a write
whose COMMIT was cut off only after re-reading the session's head shows it was not
stored (one that was stored is done; one that cannot be told is a ``StoreError``
whose ``saved`` is ``"unknown"``). Its lease is a row,
``agentflow_leases(id, owner, heartbeat)``, kept by **one background thread** of the
store on a connection of its own, which also holds a session advisory lock per
leased session and renews the heartbeats (server clock) every ``lease_ttl / 6``
seconds. Another worker may take a lease only when

* the holder's advisory lock is free (its connection ended) **and** its last
  heartbeat is younger than the server's start: the holder died (or lost the
  server) while this server ran — taken at once; or
* its heartbeat is older than ``lease_ttl`` seconds (default 30): a holder cut off
  longer than that, e.g. one that died while the server was down.

So a server restart under a worker that is still inside a tool does not free its
session: the keeper reconnects, takes its advisory locks again and renews the
heartbeat, and meanwhile the heartbeat predates the server's start. It renews a
heartbeat only while it holds that lease's advisory lock: a lock it cannot take again
at once (another worker's probe holds it for a moment) is tried again every 50 ms,
so the probe never finds a fresh heartbeat with a free lock (issue 38). A holder whose
lease was taken after all notices at its next write, which checks the lease row in
the write's transaction and is refused (``SessionLockedError``). Needs a real session
per connection: not through a pooler in transaction mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid

from ..approvals import PendingApproval, RecordedAnswer
from ..codec import encode
from ..errors import SessionError, SessionLockedError, StoreError
from ..redact import mask_url
from . import rows
from .base import (SHOWN_FIELDS, PendingEntry, SessionStore, broken_entry, conflict,
                   cut_short_entry, page, pending_entries, readiness)
from .files import os_lease

_TABLE = "agentflow_sessions"
_ITEMS = "agentflow_session_items"
_PENDING = "agentflow_pending_calls"
_LEASES = "agentflow_leases"
_READY = "agentflow_ready"
_CHANNEL = "agentflow_ready"  # PostgreSQL NOTIFY channel: a session has work
_CHANGES = "agentflow_inbox_changes"
# Changes an inbox reads again each look: a write's sequence number is taken before its
# commit, so one may commit after a higher one; a window this deep catches it.
_WINDOW = 1000
_SCHEMA = (
    (_TABLE, f"CREATE TABLE IF NOT EXISTS {_TABLE} (id TEXT PRIMARY KEY, revision BIGINT "
             "NOT NULL, data TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL, "
             "waiting_since DOUBLE PRECISION)"),
    (f"{_TABLE}_waiting", f"CREATE INDEX IF NOT EXISTS {_TABLE}_waiting ON {_TABLE} "
                          "(waiting_since) WHERE waiting_since IS NOT NULL"),
    (_ITEMS, f"CREATE TABLE IF NOT EXISTS {_ITEMS} (session_id TEXT NOT NULL, kind TEXT "
             "NOT NULL, position BIGINT NOT NULL, data TEXT NOT NULL, mac TEXT NOT NULL, "
             "PRIMARY KEY (session_id, kind, position))"),
    (_PENDING, f"CREATE TABLE IF NOT EXISTS {_PENDING} (session_id TEXT NOT NULL, call_id "
               "TEXT NOT NULL, issued_at DOUBLE PRECISION NOT NULL, data TEXT NOT NULL, "
               "mac TEXT NOT NULL, PRIMARY KEY (session_id, call_id))"),
    (f"{_PENDING}_order", f"CREATE INDEX IF NOT EXISTS {_PENDING}_order ON {_PENDING} "
                          "(issued_at, session_id, call_id)"),
    (_READY, f"CREATE TABLE IF NOT EXISTS {_READY} (session_id TEXT PRIMARY KEY, why TEXT "
             "NOT NULL, since DOUBLE PRECISION NOT NULL)"),
    (f"{_READY}_order", f"CREATE INDEX IF NOT EXISTS {_READY}_order ON {_READY} "
                        "(why, since, session_id)"),
    (_CHANGES, f"CREATE TABLE IF NOT EXISTS {_CHANGES} (session_id TEXT PRIMARY KEY, seq "
               "BIGINT NOT NULL)"),
    (f"{_CHANGES}_seq", f"CREATE INDEX IF NOT EXISTS {_CHANGES}_seq ON {_CHANGES} (seq)"),
)


class _SQLStore(SessionStore):
    """What both databases share; ``?`` marks a parameter."""

    placeholder = "?"
    begin = "BEGIN"
    _has_ready = True  # the ready table exists (not in a read-only file made before it)

    # -- statements, errors ------------------------------------------------------------

    def _execute(self, sql: str, params=()):
        return self._db.execute(sql.replace("?", self.placeholder), params)

    def _many(self, sql: str, params: list) -> None:
        if params:
            self._db.cursor().executemany(sql.replace("?", self.placeholder), params)

    def _fail(self, exc: Exception, doing: str, saved: bool | None) -> StoreError:
        """The ``StoreError`` for a database error."""
        raise NotImplementedError

    def _attempt(self, work, doing: str, write: bool, landed=None):
        """Run ``work()`` (its statements), its database errors as ``StoreError``.
        ``landed()``, for a write, says after a lost commit whether it was stored."""
        try:
            return work()
        except self._errors as exc:
            raise self._fail(exc, doing, False if write else None) from exc

    @contextlib.contextmanager
    def _transaction(self):
        self._execute(self.begin)
        try:
            yield
        except BaseException:
            with contextlib.suppress(*self._errors):
                self._execute("ROLLBACK")
            raise
        self._committing = True  # left set when the COMMIT fails: its outcome is unknown
        self._execute("COMMIT")
        self._committing = False

    def _create_schema(self, present) -> None:
        """Create what is missing, in one transaction; nothing (and no lock) when all is
        there. ``present(names)`` says how many of the names exist."""
        wanted = self._schema()
        if present([name for name, _ in wanted]) == len(wanted):
            return
        with self._transaction():
            self._schema_lock()
            fill = not present([_READY])
            for _, statement in wanted:
                self._execute(statement)
            if fill:
                self._fill_ready()

    def _fill_ready(self) -> None:
        """Fill a new ready table from the sessions an older version wrote: answered
        ones from the inbox rows, cut-short ones from heads with a started call (read
        once, when the table is made; a worker checks each again when it opens it)."""
        by_session: dict = {}
        for session_id, issued_at, text in self._execute(
                f"SELECT session_id, issued_at, data FROM {_PENDING}").fetchall():
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                data, answer = json.loads(text), None
                answer = data.get("answer")
                by_session.setdefault(session_id, []).append((
                    issued_at, isinstance(answer, dict) and answer.get("refused") is None
                    and answer.get("digest") == data.get("digest")))
        ready = [(i, "answered", min(t for t, _ in calls)) for i, calls in by_session.items()
                 if all(ok for _, ok in calls)]
        for session_id, text in self._execute(
                f"SELECT id, data FROM {_TABLE} WHERE data LIKE ?", ('%"running":{"%',)):
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                running = json.loads(text).get("running") or {}
                if running and session_id not in by_session:
                    ready.append((session_id, "cut short", min(
                        float(r.get("started_at", 0.0)) for r in running.values())))
        self._many(f"INSERT INTO {_READY} (session_id, why, since) VALUES (?, ?, ?)", ready)

    def _schema(self):
        return _SCHEMA

    def _schema_lock(self) -> None:
        """Make two workers creating the schema at once wait for each other."""

    # -- reading -------------------------------------------------------------------------

    def _read(self, session_id: str):
        def work():
            return self._execute(
                f"SELECT 0, revision, data, '', '' FROM {_TABLE} WHERE id = ? UNION ALL "
                f"SELECT 1, position, data, mac, kind FROM {_ITEMS} WHERE session_id = ? "
                "ORDER BY 1, 5, 2", (session_id, session_id)).fetchall()
        found = self._attempt(work, f"reading session {session_id!r}", False)
        if not found or found[0][0] != 0:
            return None
        where = f"session {session_id!r} in {self!r}"
        _, revision, head, _, _ = found[0]
        session, written = rows.read(session_id, revision, head,
                                     [(kind, position, text, mac)
                                      for _, position, text, mac, kind in found[1:]],
                                     self.secret, where)
        if written is None:  # a row written before the rows layout
            return session, encode(session.to_dict(), self.secret)
        written.pending = self._pending_rows(session_id, session)  # as its writer wrote them
        return session, written

    def _blank(self, session_id, session):
        return rows.change(session_id, session, session.revision, rows.Written(),
                           self.secret, self._pending_rows(session_id, session)).written

    def _pending_rows(self, session_id, session) -> list:
        return [rows.pending_row(session_id, entry, self.secret)
                for entry in pending_entries(session_id, session, 0.0)]

    def pending(self, now: float | None = None, limit: int | None = None,
                after=None) -> list:
        now = time.time() if now is None else now
        sql = f"SELECT session_id, call_id, issued_at, data, mac FROM {_PENDING}"
        params: tuple = ()
        if after is not None:
            sql += " WHERE (issued_at, session_id, call_id) > (?, ?, ?)"
            params = (after.issued_at, after.session_id, after.call_id)
        sql += " ORDER BY issued_at, session_id, call_id"
        if limit is not None:
            sql += f" LIMIT {max(0, int(limit))}"

        def work():
            return (self._execute(sql, params).fetchall(),
                    self._execute(f"SELECT id, revision, data, waiting_since FROM {_TABLE} "
                                  "WHERE waiting_since IS NOT NULL").fetchall())
        found, legacy = self._attempt(work, "listing the pending calls", False)
        entries = [cut_short_entry(session_id, since, now)
                   for session_id, since in self._ready("cut short")] + self._entries(found, now)
        for session_id, revision, text, since in legacy:  # written before the rows layout
            try:
                session = self._decode(session_id, revision, text)
            except SessionError as exc:
                if isinstance(exc, StoreError):
                    raise
                entries.append(broken_entry(session_id, exc, since, now))
                continue
            entries += pending_entries(session_id, session, now)
        return page(entries, limit, after)

    def _entries(self, found, now: float) -> list:
        """The inbox entries of pending rows ``(session_id, call_id, issued_at, data,
        mac)``, each checked; a row that is not one is an entry with its error."""
        entries = []
        for session_id, call_id, issued_at, text, mac in found:
            try:
                data = rows.read_pending_row(session_id, text, mac, self.secret)
                answer = data.get("answer")
                record = PendingApproval(call_id, data["tool"], data["digest"], issued_at,
                                         data["expires_at"],
                                         **{name: data.get(name) for name in SHOWN_FIELDS})
                entries.append(PendingEntry(
                    session_id, record, data["arguments"], max(0.0, now - issued_at),
                    answer=RecordedAnswer(**answer) if answer is not None else None))
            except (ValueError, KeyError, TypeError, SessionError) as exc:
                entries.append(broken_entry(session_id, exc, issued_at, now))
        return entries

    def _ready(self, why: str) -> list:
        """``(session_id, since)`` of the ready rows of one kind, oldest first; the
        cut-short ones only where no live worker holds the lease."""
        if not self._has_ready:  # a read-only file an older version wrote
            return []
        found = self._attempt(lambda: self._execute(
            f"SELECT session_id, since FROM {_READY} WHERE why = ? ORDER BY since, "
            "session_id", (why,)).fetchall(), "listing the sessions to resume", False)
        if why == "cut short":
            found = [row for row in found if not self._held(row[0])]
        return found

    def answered(self):
        """As ``SessionStore.answered``, reading only the ready table (and the rows an
        older version wrote whole, by their ``waiting_since`` index)."""
        ids = [session_id for session_id, _ in self._ready("answered")]
        legacy = self._attempt(lambda: self._execute(
            f"SELECT id, revision, data FROM {_TABLE} WHERE waiting_since IS NOT NULL "
            "ORDER BY waiting_since").fetchall(), "listing the sessions to resume", False)
        for session_id, revision, text in legacy:
            with contextlib.suppress(SessionError):
                ready = readiness(self._decode(session_id, revision, text))
                if ready is not None and ready[0] == "answered":
                    ids.append(session_id)
        yield from ids

    def cut_short(self) -> list[str]:
        """As ``SessionStore.cut_short``, reading only the ready table."""
        return [session_id for session_id, _ in self._ready("cut short")]

    # -- writing -------------------------------------------------------------------------

    def _write(self, session_id, session, before, changed):
        if isinstance(before, str):  # read from a row written before the rows layout
            if not changed and encode(session.to_dict(), self.secret) == before:
                return before
            before = None
        revision = session.revision + 1
        change = rows.change(session_id, session, revision, before, self.secret,
                             self._pending_rows(session_id, session))
        if not changed and rows.unchanged(change, before):
            return before
        ready = readiness(session)
        with self._leased(session_id):
            self._attempt(lambda: self._store(session_id, session.revision, change, before,
                                              ready),
                          f"saving session {session_id!r}", True,
                          lambda: self._landed(session_id, revision, change.head))
        session.revision = revision
        return change.written

    def _store(self, session_id: str, expected: int, change, before, ready=None) -> None:
        with self._transaction():
            self._check_lease(session_id)
            now = time.time()
            if expected == 0:
                for table in (_ITEMS, _PENDING):
                    self._execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
                done = self._execute(
                    f"INSERT INTO {_TABLE} (id, revision, data, updated_at, waiting_since) "
                    "VALUES (?, 1, ?, ?, NULL) ON CONFLICT (id) DO NOTHING",
                    (session_id, change.head, now)).rowcount
            else:
                done = self._execute(
                    f"UPDATE {_TABLE} SET revision = ?, data = ?, updated_at = ?, "
                    "waiting_since = NULL WHERE id = ? AND revision = ?",
                    (expected + 1, change.head, now, session_id, expected)).rowcount
            if done != 1:
                row = self._execute(f"SELECT revision FROM {_TABLE} WHERE id = ?",
                                    (session_id,)).fetchone()
                raise conflict(session_id, expected, row[0] if row else None)
            for kind, code in rows.KINDS.items():
                start = change.start[kind]
                if before is None or start < len(before.texts[kind]):
                    self._execute(f"DELETE FROM {_ITEMS} WHERE session_id = ? AND kind = ? "
                                  "AND position >= ?", (session_id, code, start))
                self._many(f"INSERT INTO {_ITEMS} (session_id, kind, position, data, mac) "
                           "VALUES (?, ?, ?, ?, ?)",
                           [(session_id, code, position, text, mac)
                            for position, text, mac in change.items[kind]])
            if change.pending is not None:
                self._execute(f"DELETE FROM {_PENDING} WHERE session_id = ?", (session_id,))
                self._many(f"INSERT INTO {_PENDING} (session_id, call_id, issued_at, data, "
                           "mac) VALUES (?, ?, ?, ?, ?)",
                           [(session_id, *row) for row in change.pending])
                self._changed(session_id)
            self._execute(f"DELETE FROM {_READY} WHERE session_id = ?", (session_id,))
            if ready is not None:
                self._execute(f"INSERT INTO {_READY} (session_id, why, since) VALUES "
                              "(?, ?, ?)", (session_id, *ready))
                self._announce(session_id)

    def _announce(self, session_id: str) -> None:
        """Tell waiting workers, at commit, that a session has work (``wait``)."""

    def _changed(self, session_id: str) -> None:
        """Record that the session's inbox rows changed (``changes``)."""
        self._execute(f"INSERT INTO {_CHANGES} (session_id, seq) VALUES (?, {self._next}) "
                      "ON CONFLICT (session_id) DO UPDATE SET seq = EXCLUDED.seq",
                      (session_id,))

    _next = f"(SELECT coalesce(max(seq), 0) + 1 FROM {_CHANGES})"  # writers take turns

    def changes(self, since=None):
        """As ``SessionStore.changes``: reads the changes table's rows of the last
        ``_WINDOW`` writes that changed inbox rows, by its index."""
        if not self._has_ready:  # a read-only file an older version wrote
            return None, None
        old_top, old_seen = since if since is not None else (None, frozenset())

        def work():
            top = self._execute(f"SELECT coalesce(max(seq), 0) FROM {_CHANGES}").fetchone()[0]
            start = min(top, old_top if old_top is not None else top) - _WINDOW
            return top, self._execute(f"SELECT session_id, seq FROM {_CHANGES} WHERE "
                                      "seq > ?", (start,)).fetchall()
        top, found = self._attempt(work, "reading what changed in the inbox", False)
        cursor = (top, frozenset((i, n) for i, n in found if n > top - _WINDOW))
        if since is None:
            return cursor, None
        return cursor, sorted({i for i, n in found if (i, n) not in old_seen})

    def pending_of(self, session_ids, now=None):
        """As ``SessionStore.pending_of``: those sessions' inbox rows only."""
        wanted = sorted(set(session_ids))
        now = time.time() if now is None else now
        found = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            marks = ", ".join("?" for _ in chunk)
            found += self._attempt(lambda: self._execute(
                f"SELECT session_id, call_id, issued_at, data, mac FROM {_PENDING} WHERE "
                f"session_id IN ({marks})", tuple(chunk)).fetchall(),
                "listing the pending calls", False)
        entries = self._entries(found, now) + [
            cut_short_entry(i, since, now) for i, since in self._ready("cut short")
            if i in set(wanted)]
        return page(entries, None, None)

    def _landed(self, session_id: str, revision: int, head: str) -> bool | None:
        """After a commit whose outcome was lost with the connection: ``True`` when the
        store holds this write (revision and head), ``False`` when it still holds the
        revision before it, ``None`` when another write came in between."""
        row = self._execute(f"SELECT revision, data FROM {_TABLE} WHERE id = ?",
                            (session_id,)).fetchone()
        held = row[0] if row else 0
        if held == revision:
            return True if row[1] == head else None
        return False if held == revision - 1 else None

    def _check_lease(self, session_id: str) -> None:
        """Refuse a write whose worker no longer holds the session's lease."""

    def _remove(self, session_id: str) -> None:
        def work():
            with self._transaction():
                self._execute(f"DELETE FROM {_TABLE} WHERE id = ?", (session_id,))
                for table in (_ITEMS, _PENDING, _READY):
                    self._execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
                self._changed(session_id)
        self._attempt(work, f"deleting session {session_id!r}", True)

    def close(self) -> None:
        with contextlib.suppress(*self._errors):
            self._db.close()


class SQLiteStore(_SQLStore):
    """Sessions in one SQLite file: the embedded default for an application with many
    sessions, safe for several processes on one machine (SPEC R22).

    Args:
        path: the database file (created if missing; its folder must exist).
        secret: sign and check every session (HMAC-SHA256, each item chained).
        timeout: seconds a write waits for another process's write lock.
        synchronous: SQLite's ``PRAGMA synchronous``: ``FULL`` (default) makes each
            write durable when it returns, also across a power loss; ``NORMAL`` in WAL
            mode survives a crash of the process but may lose the last writes to a
            power loss, and writes faster.

    A file on a read-only file system, or one this process may not write, is opened
    read-only (``read_only`` says how): listing and loading work, a write is a
    ``StoreError``.

    Raises:
        FileNotFoundError: the folder of ``path`` does not exist.
        StoreError: the file is not a database, or the schema cannot be created.
    """

    begin = "BEGIN IMMEDIATE"  # the write lock now, not at the first write

    def __init__(self, path, secret: str | bytes | None = None, timeout: float = 10.0,
                 synchronous: str = "FULL"):
        import sqlite3
        super().__init__(secret)
        self._errors = (sqlite3.Error,)
        self._committing = False
        self.path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"cannot open the SQLite store {self.path}: the folder "
                                    f"{folder} does not exist")
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")

        self.read_only = _read_only(self.path)

        def connect():
            if self.read_only:  # listing works; any write is a StoreError
                from urllib.parse import quote
                self._db = sqlite3.connect(f"file:{quote(os.path.abspath(self.path))}?"
                                           f"{self.read_only}", uri=True, timeout=timeout,
                                           isolation_level=None)
                self._has_ready = bool(self._db.execute(
                    "SELECT count(*) FROM sqlite_master WHERE name = ?", (_READY,)
                ).fetchone()[0])
                return
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
            # Switching a new file to WAL is refused at once ("database is locked"),
            # without the busy timeout, while another process switches it or makes
            # its schema: two workers started together. Wait for it as a write would.
            deadline = time.monotonic() + timeout
            while True:
                try:
                    if self._db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                        self._db.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._create_schema(lambda names: self._db.execute(
                "SELECT count(*) FROM sqlite_master WHERE name IN "
                f"({', '.join('?' for _ in names)})", names).fetchone()[0])
        self._attempt(connect, "opening the database", False)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def wait(self, timeout: float) -> None:
        """As ``SessionStore.wait``: returns within 10 ms of another connection's
        commit (``PRAGMA data_version``, which costs no read of a table), else after
        ``timeout`` seconds.

        Args:
            timeout: seconds (float) to wait at most.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        try:
            seen = self._db.execute("PRAGMA data_version").fetchone()[0]
            while time.monotonic() < deadline:
                time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))
                if self._db.execute("PRAGMA data_version").fetchone()[0] != seen:
                    return
        except self._errors:  # the next look says what is wrong
            time.sleep(max(0.0, deadline - time.monotonic()))

    def _fail(self, exc, doing, saved):
        import sqlite3
        text = str(exc).strip()
        retryable = isinstance(exc, sqlite3.OperationalError) and "locked" in text
        advice = ("another process held the write lock longer than the timeout; try "
                  "again" if retryable else
                  "check that the file is a database agentflow wrote, that its folder is "
                  "writable and the disk not full")
        return StoreError(f"{self!r} failed while {doing}: {text}; {advice}. "
                          f"{_saved(saved)}", store=repr(self), retryable=retryable,
                          saved=saved)

    def _acquire(self, session_id: str):
        if self.read_only:
            raise StoreError(f"{self!r} is opened read-only (its file system, or this "
                             "process's rights, allow no writes): it can be listed and "
                             "read, not written. Nothing was saved.", store=repr(self),
                             saved=False)
        folder = self.path + "-locks"
        os.makedirs(folder, exist_ok=True)
        name = hashlib.sha256(session_id.encode("utf-8")).hexdigest()
        return os_lease(os.path.join(folder, name + ".lock"))


class PostgresStore(_SQLStore):
    """Sessions in PostgreSQL tables: for workers on many machines (SPEC R22). Needs
    ``pip install '.[postgres]'`` in a checkout (psycopg 3).

    Args:
        dsn: a libpq connection string or URL, e.g.
            ``postgresql://agent@db.example/agentflow``.
        secret: sign and check every session (HMAC-SHA256, each item chained).
        connect_timeout: seconds to wait for the server at each connection attempt.
        reconnect_wait: seconds (float) a statement waits for a lost server to come
            back before it raises ``StoreError``.
        lease_ttl: seconds (float) after its last heartbeat that a lease may be taken
            from a holder that cannot be seen to have died (module docstring).

    Raises:
        ImportError: psycopg is not installed.
        StoreError: the server cannot be reached.
    """

    placeholder = "%s"

    def __init__(self, dsn: str, secret: str | bytes | None = None,
                 connect_timeout: float = 10.0, reconnect_wait: float = 5.0,
                 lease_ttl: float = 30.0):
        try:
            import psycopg
        except ImportError:
            raise ImportError("PostgresStore needs psycopg 3: pip install "
                              "'.[postgres]' in a checkout of agentflow-approvals") from None
        super().__init__(secret)
        self._psycopg = psycopg
        self._errors = (psycopg.Error,)
        self._committing = False
        self._dsn = dsn
        self._timeout = max(1, round(connect_timeout))
        self.reconnect_wait = reconnect_wait
        self.lease_ttl = lease_ttl
        try:
            info = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:  # its message quotes the bad part: maybe the password
            raise SessionError(f"the PostgreSQL store URL {mask_url(dsn)} cannot be read: "
                               "write postgresql://USER@HOST:PORT/DB, with special "
                               "characters percent-encoded (%40 for @, %25 for %), and "
                               "the password in PGPASSWORD or ~/.pgpass") from None
        self._where = (f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/"
                       f"{info.get('dbname', '')}")  # never the password
        self.owner = f"{os.uname().nodename if hasattr(os, 'uname') else ''}:{os.getpid()}:" \
                     f"{uuid.uuid4().hex[:12]}"
        self._listener = None  # the LISTEN connection of wait(), made when first waited
        self._db = self._connect(deadline=time.monotonic())
        self._keeper = _LeaseKeeper(self)
        self._attempt(lambda: self._create_schema(self._present), "creating the schema", False)

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r})"

    def _connect(self, deadline: float):
        """A new connection, trying until ``deadline`` (``time.monotonic()``)."""
        pause = 0.1
        while True:
            try:
                return self._psycopg.connect(self._dsn, autocommit=True,
                                             connect_timeout=self._timeout)
            except self._psycopg.OperationalError as exc:
                refused = _refusal(str(exc))
                if refused or time.monotonic() + pause > deadline:
                    raise StoreError(
                        f"cannot reach the PostgreSQL store at {self._where}: "
                        f"{str(exc).strip()}. " + (
                            f"The server refuses this connection ({refused}): fix the "
                            "store URL, the role or its password." if refused else
                            "Check that the server runs and accepts this connection; "
                            "agentflow retries by itself at the next call."),
                        store=repr(self), retryable=not refused) from None
                time.sleep(pause)
                pause = min(pause * 2, 1.0)

    def _attempt(self, work, doing: str, write: bool, landed=None):
        """Run ``work()``; after a lost connection, reconnect (waiting at most
        ``reconnect_wait``) and run it again once: a read always, a write whose
        transaction the lost connection rolled back, and a write whose commit was cut
        off only once ``landed()`` re-read the session and found it not stored (a
        stored one is done). Never re-sent blindly (SPEC R22 addendum, fourth batch)."""
        for attempt in (1, 2):
            self._committing = False
            try:
                return work()
            except self._errors as exc:
                lost = self._db.closed or self._db.broken or isinstance(
                    exc, self._psycopg.OperationalError)
                if not lost:
                    raise self._fail(exc, doing, False if write else None) from exc
                with contextlib.suppress(*self._errors):
                    self._db.close()
                committing, self._committing = self._committing, False
                self._db = self._connect(time.monotonic() + self.reconnect_wait)
                outcome = False  # a transaction cut off before its COMMIT: rolled back
                if write and committing:
                    try:
                        outcome = landed() if landed is not None else None
                    except self._errors:
                        outcome = None
                if outcome is True:
                    return None
                if attempt == 1 and outcome is False:
                    continue
                raise self._fail(exc, doing, "unknown" if outcome is None else
                                 False if write else None) from exc

    def _fail(self, exc, doing, saved):
        retryable = isinstance(exc, self._psycopg.OperationalError)
        advice = ("the connection was lost and is open again: try again" if retryable else
                  "check the database's log and that this role may use agentflow's tables")
        return StoreError(f"{self!r} failed while {doing}: {str(exc).strip()}; {advice}. "
                          f"{_saved(saved)}", store=repr(self), retryable=retryable,
                          saved=saved)

    def _present(self, names) -> int:
        return self._execute("SELECT count(*) FROM unnest(?::text[]) AS n WHERE "
                             "to_regclass(n) IS NOT NULL", (names,)).fetchone()[0]

    def _schema(self):
        return _SCHEMA + ((_LEASES, f"CREATE TABLE IF NOT EXISTS {_LEASES} (id TEXT PRIMARY "
                                    "KEY, owner TEXT NOT NULL, heartbeat DOUBLE PRECISION "
                                    "NOT NULL)"),
                          (f"{_CHANGES}_n", f"CREATE SEQUENCE IF NOT EXISTS {_CHANGES}_n"))

    _next = f"nextval('{_CHANGES}_n')"  # writers do not wait for each other's turn

    def _schema_lock(self) -> None:
        # CREATE … IF NOT EXISTS is not safe against a second worker doing the same.
        self._execute("SELECT pg_advisory_xact_lock(?)", (0x61676E74,))

    def _acquire(self, session_id: str):
        return self._keeper.acquire(session_id)

    def _held(self, session_id: str) -> bool:
        # The advisory lock alone, taken and given back: no lease row is written.
        return session_id in self._open or self._keeper.busy(session_id)

    def _announce(self, session_id: str) -> None:
        self._execute("SELECT pg_notify(?, ?)", (_CHANNEL, session_id))

    def wait(self, timeout: float) -> None:
        """As ``SessionStore.wait``: returns as soon as another worker's or an inbox's
        write leaves a session with work (``LISTEN``/``NOTIFY`` on a connection of its
        own, made at the first call), else after ``timeout`` seconds.

        Args:
            timeout: seconds (float) to wait at most.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        try:
            if self._listener is None or self._listener.closed or self._listener.broken:
                self._listener = self._psycopg.connect(self._dsn, autocommit=True,
                                                       connect_timeout=self._timeout)
                self._listener.execute(f"LISTEN {_CHANNEL}")
                return  # listening now; what came before, the next look finds
            for _ in self._listener.notifies(timeout=max(0.0, deadline - time.monotonic()),
                                             stop_after=1):
                return
        except self._errors:  # a restart: listen again next time; meanwhile, sleep
            with contextlib.suppress(*self._errors):
                if self._listener is not None:
                    self._listener.close()
            self._listener = None
            time.sleep(max(0.0, deadline - time.monotonic()))

    def _check_lease(self, session_id: str) -> None:
        row = self._execute(f"SELECT owner FROM {_LEASES} WHERE id = ? FOR SHARE",
                            (session_id,)).fetchone()
        if row is None or row[0] != self.owner:
            raise SessionLockedError(
                f"session {session_id!r}: this worker's lease on it was lost (its "
                f"heartbeat could not be renewed for {self.lease_ttl:g} s, e.g. while the "
                f"database was down) and {'another worker holds it' if row else 'it is free'}"
                ". Nothing was saved; load the session again.")

    def close(self) -> None:
        self._keeper.close()
        with contextlib.suppress(*self._errors):
            if self._listener is not None:
                self._listener.close()
        super().close()


class _LeaseKeeper:
    """The leases of one ``PostgresStore``: taken, renewed by one background thread
    and given back on a connection of their own (module docstring).

    A lease's heartbeat is renewed only while this keeper holds its advisory lock, so
    another worker can take it only once this one is cut off for ``lease_ttl``: after
    a reconnect the keeper takes its locks again, and one it cannot take at once (a
    probe of another worker holds it for a moment) is tried again every
    ``_RETRY`` seconds, never given up while the lease row is this store's."""

    _RETRY = 0.05  # seconds between tries of a lock not yet taken again

    def __init__(self, store: PostgresStore):
        self.store = store
        self.held: dict[str, int] = {}  # session id -> advisory lock key
        self.locked: set[str] = set()  # ids whose advisory lock this connection holds
        self.lost: set[str] = set()  # ids another worker took (their writes are refused)
        self._mutex = threading.Lock()
        self._db = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self, statement: str, params=()):
        """Run one statement on the keeper's connection (reconnecting, and then taking
        the advisory locks again); the caller holds the mutex."""
        if self._db is None or self._db.closed or self._db.broken:
            with contextlib.suppress(Exception):
                if self._db is not None:
                    self._db.close()
            self._db = None
            self.locked.clear()  # the server dropped them with the old connection
            self._db = self.store._connect(time.monotonic() + self.store.reconnect_wait)
            self._relock()
        return self._db.execute(statement, params)

    def _relock(self) -> None:
        """Take again the advisory locks of held leases that this connection lacks."""
        for session_id, key in list(self.held.items()):
            if session_id in self.locked or session_id in self.lost:
                continue
            if self._db.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                self.locked.add(session_id)

    def busy(self, session_id: str) -> bool:
        """Whether another connection holds the session's advisory lock (a live
        holder), or this keeper does.

        Raises:
            StoreError: the server cannot be reached.
        """
        key = _lock_key(session_id)
        with self._mutex:
            if session_id in self.held:
                return True
            try:
                if self._run("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                    self._run("SELECT pg_advisory_unlock(%s)", (key,))
                    return False
                return True
            except self.store._errors as exc:
                raise self.store._fail(exc, f"looking at the lease of {session_id!r}",
                                       None) from exc

    def acquire(self, session_id: str):
        key = _lock_key(session_id)
        with self._mutex:
            try:
                if not self._run("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                    return None  # its holder's connection is alive
                taken = self._run(
                    f"INSERT INTO {_LEASES} AS l (id, owner, heartbeat) VALUES (%s, %s, "
                    "EXTRACT(EPOCH FROM clock_timestamp())) ON CONFLICT (id) DO UPDATE SET "
                    "owner = EXCLUDED.owner, heartbeat = EXCLUDED.heartbeat WHERE "
                    "l.owner = EXCLUDED.owner OR l.heartbeat < EXCLUDED.heartbeat - %s OR "
                    "l.heartbeat >= EXTRACT(EPOCH FROM pg_postmaster_start_time()) "
                    "RETURNING owner", (session_id, self.store.owner, self.store.lease_ttl)
                ).fetchone()
                if taken is None:  # a holder cut off by a restart may still be alive
                    self._run("SELECT pg_advisory_unlock(%s)", (key,))
                    return None
            except self.store._errors as exc:
                raise self.store._fail(exc, f"taking the lease of {session_id!r}", False) \
                    from exc
            self.held[session_id] = key
            self.locked.add(session_id)
            self.lost.discard(session_id)
            self._start()

        def release() -> None:
            with self._mutex:
                self.held.pop(session_id, None)
                self.lost.discard(session_id)
                with contextlib.suppress(self.store._errors + (StoreError,)):
                    self._run(f"DELETE FROM {_LEASES} WHERE id = %s AND owner = %s",
                              (session_id, self.store.owner))
                    if session_id in self.locked:
                        self._run("SELECT pg_advisory_unlock(%s)", (key,))
                self.locked.discard(session_id)
        return release

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="agentflow-lease-keeper",
                                            daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        wait = self.store.lease_ttl / 6
        while not self._stop.wait(wait):
            with self._mutex:
                wait = self.store.lease_ttl / 6
                if not self.held:
                    continue
                with contextlib.suppress(self.store._errors + (StoreError,)):
                    self._renew()
                if set(self.held) - self.locked - self.lost:
                    wait = self._RETRY  # a lock to take again, or a server to reach

    def _renew(self) -> None:
        """One beat: take again the locks this connection lacks, renew the heartbeats
        of the leases it holds, and find the ones another worker took."""
        self._run("SELECT 1")  # reconnects, and takes the locks again, when it was lost
        self._relock()
        waiting = sorted(set(self.held) - self.locked - self.lost)
        if waiting:  # a lock still not taken again: is its lease row still ours?
            ours = {row[0] for row in self._run(
                f"SELECT id FROM {_LEASES} WHERE owner = %s AND id = ANY(%s)",
                (self.store.owner, waiting)).fetchall()}
            self.lost |= set(waiting) - ours
        if not self.locked:
            return
        kept = {row[0] for row in self._run(
            f"UPDATE {_LEASES} SET heartbeat = EXTRACT(EPOCH FROM clock_timestamp()) "
            "WHERE owner = %s AND id = ANY(%s) RETURNING id",
            (self.store.owner, sorted(self.locked))).fetchall()}
        for session_id in self.locked - kept:  # taken by another worker after all
            self.lost.add(session_id)
            self.locked.discard(session_id)
            self._db.execute("SELECT pg_advisory_unlock(%s)", (self.held[session_id],))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._mutex, contextlib.suppress(Exception):
            if self._db is not None:
                self._db.close()


def _read_only(path: str) -> str:
    """How to open an SQLite file that cannot be written (URI parameters), or ``""``:
    on a read-only file system nobody can write it, so it is read as immutable (its
    WAL index cannot be made there); a file this process may not write is read with
    ``mode=ro``."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "mode=ro&immutable=1" if os.path.exists(path) else ""
    except (OSError, AttributeError):  # no statvfs (Windows)
        pass
    if os.path.exists(path) and not (os.access(path, os.W_OK) and os.access(folder, os.W_OK)):
        return "mode=ro"
    return ""


def _lock_key(session_id: str) -> int:
    """The session's advisory lock key (64 bits of SHA-256)."""
    return int.from_bytes(hashlib.sha256(b"agentflow session " + session_id.encode(
        "utf-8")).digest()[:8], "big", signed=True)


# What a server says when waiting for it cannot help (libpq's FATAL messages).
_REFUSALS = ("password authentication failed", "no password supplied", "does not exist",
             "no pg_hba.conf entry", "authentication failed", "permission denied")


def _refusal(text: str) -> str | None:
    """Which refusal a connection error is, or ``None`` when the server is merely away
    (not started, restarting, unreachable): a worker waits for that (issue 38)."""
    return next((r for r in _REFUSALS if r in text), None)


def _saved(saved) -> str:
    """What a failed statement did to the session: ``False`` nothing saved, ``None``
    a read, ``"unknown"`` the connection was lost during a write's commit."""
    if saved is None:
        return ""
    if saved == "unknown":
        return ("The connection was lost during the commit: the write may or may not "
                "have been saved; load the session to see.")
    return "Nothing was saved."
