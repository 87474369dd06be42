"""``SQLiteStore`` and ``PostgresStore``: sessions as rows, one table (SPEC R16, R22).

    agentflow_sessions(id TEXT PRIMARY KEY, revision BIGINT, data TEXT,
                       updated_at DOUBLE PRECISION, waiting_since DOUBLE PRECISION)

``data`` is the session's JSON text (TEXT, not JSONB: PostgreSQL's JSONB refuses
the escaped lone surrogates a tool's result may hold). The compare-and-swap is one
statement, ``UPDATE … SET revision = n + 1 … WHERE id = ? AND revision = n``: when it
changes no row, another worker wrote first. ``waiting_since`` (the oldest pending
approval's time, ``NULL`` when nothing waits) is indexed, so the approval inbox reads
only the sessions that wait.

SQLite (standard library ``sqlite3``) runs in WAL mode with ``synchronous=FULL``: each
write is durable when it returns, readers never block the writer, and several
processes on one machine share the file safely (``BEGIN IMMEDIATE`` takes the write
lock up front, ``timeout`` seconds of waiting for it). PostgreSQL (``psycopg`` 3, the
extra ``agentflow[postgres]``, imported only when a ``PostgresStore`` is made) serves
workers on many machines; its row lock makes a second ``UPDATE`` of the same row wait
for the first, then find the revision changed.

The lease (who has a session open for a run, SPEC R16, R22), released by the holder's
death however abrupt:

* SQLite: an OS lock (``flock``; ``msvcrt.locking`` on Windows) on a lock file per
  session, ``PATH-locks/<sha256 of the id>.lock`` beside the database, held on an open
  descriptor: the kernel drops it when the process dies, SIGKILL included. The file
  exists only while held. One machine, as SQLite itself; not on a network file system.
* PostgreSQL: a session-level advisory lock, ``pg_try_advisory_lock`` on a 64-bit hash
  of the id, held by the store's connection; the server drops it when that connection
  ends. A worker that vanishes without closing its connection (a machine powered off, a
  cut network) holds it until the server notices: set TCP keepalives (libpq
  ``keepalives_idle`` … or the server's ``tcp_keepalives_*``) to bound that. Needs a
  real session per connection: not through a pooler in transaction mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time

from ..errors import SessionError
from ..redact import mask_url
from .base import SessionStore, conflict
from .files import os_lease

_TABLE = "agentflow_sessions"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_TABLE} (id TEXT PRIMARY KEY, revision BIGINT NOT NULL, "
    "data TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL, "
    "waiting_since DOUBLE PRECISION)",
    f"CREATE INDEX IF NOT EXISTS {_TABLE}_waiting ON {_TABLE} (waiting_since) "
    "WHERE waiting_since IS NOT NULL",
)


class _SQLStore(SessionStore):
    """The statements both databases share; ``?`` marks a parameter."""

    placeholder = "?"

    def _execute(self, sql: str, params=()):
        return self._db.execute(sql.replace("?", self.placeholder), params)

    def _transaction(self):
        raise NotImplementedError

    def _fetch(self, session_id: str):
        row = self._execute(f"SELECT revision, data FROM {_TABLE} WHERE id = ?",
                            (session_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def _swap(self, session_id: str, expected: int, text: str, waiting) -> None:
        with self._transaction():
            if expected == 0:
                done = self._execute(
                    f"INSERT INTO {_TABLE} (id, revision, data, updated_at, waiting_since) "
                    "VALUES (?, 1, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                    (session_id, text, time.time(), waiting)).rowcount
            else:
                done = self._execute(
                    f"UPDATE {_TABLE} SET revision = ?, data = ?, updated_at = ?, "
                    "waiting_since = ? WHERE id = ? AND revision = ?",
                    (expected + 1, text, time.time(), waiting, session_id, expected)).rowcount
            if done != 1:
                row = self._execute(f"SELECT revision FROM {_TABLE} WHERE id = ?",
                                    (session_id,)).fetchone()
                raise conflict(session_id, expected, row[0] if row else None)

    def _waiting(self):
        return self._execute(f"SELECT id, revision, data FROM {_TABLE} WHERE waiting_since "
                             "IS NOT NULL ORDER BY waiting_since").fetchall()

    def _remove(self, session_id: str) -> None:
        with self._transaction():
            self._execute(f"DELETE FROM {_TABLE} WHERE id = ?", (session_id,))

    def close(self) -> None:
        self._db.close()


class SQLiteStore(_SQLStore):
    """Sessions in one SQLite file: the embedded default for an application with many
    sessions, safe for several processes on one machine (SPEC R22).

    Args:
        path: the database file (created if missing; its folder must exist).
        secret: sign and check every session (HMAC-SHA256).
        timeout: seconds a write waits for another process's write lock.
        synchronous: SQLite's ``PRAGMA synchronous``: ``FULL`` (default) makes each
            write durable when it returns, also across a power loss; ``NORMAL`` in WAL
            mode survives a crash of the process but may lose the last writes to a
            power loss, and writes faster.

    Raises:
        FileNotFoundError: the folder of ``path`` does not exist.
    """

    def __init__(self, path, secret: str | bytes | None = None, timeout: float = 10.0,
                 synchronous: str = "FULL"):
        import sqlite3
        super().__init__(secret)
        self.path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"cannot open the SQLite store {self.path}: the folder "
                                    f"{folder} does not exist")
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
        with self._transaction():
            for statement in _SCHEMA:
                self._db.execute(statement)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def _acquire(self, session_id: str):
        folder = self.path + "-locks"
        os.makedirs(folder, exist_ok=True)
        name = hashlib.sha256(session_id.encode("utf-8")).hexdigest()
        return os_lease(os.path.join(folder, name + ".lock"))

    @contextlib.contextmanager
    def _transaction(self):
        self._db.execute("BEGIN IMMEDIATE")  # the write lock now, not at the first write
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


class PostgresStore(_SQLStore):
    """Sessions in a PostgreSQL table: for workers on many machines (SPEC R22). Needs
    ``pip install '.[postgres]'`` in a checkout (psycopg 3).

    Args:
        dsn: a libpq connection string or URL, e.g.
            ``postgresql://agent@db.example/agentflow``.
        secret: sign and check every session (HMAC-SHA256).
        connect_timeout: seconds to wait for the server.

    Raises:
        ImportError: psycopg is not installed.
        SessionError: the server cannot be reached.
    """

    placeholder = "%s"

    def __init__(self, dsn: str, secret: str | bytes | None = None,
                 connect_timeout: float = 10.0):
        try:
            import psycopg
        except ImportError:
            raise ImportError("PostgresStore needs psycopg 3: pip install "
                              "'.[postgres]' in a checkout of agentflow") from None
        super().__init__(secret)
        try:
            info = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:  # its message quotes the bad part: maybe the password
            raise SessionError(f"the PostgreSQL store URL {mask_url(dsn)} cannot be read: "
                               "write postgresql://USER@HOST:PORT/DB, with special "
                               "characters percent-encoded (%40 for @, %25 for %), and "
                               "the password in PGPASSWORD or ~/.pgpass") from None
        self._where = (f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/"
                       f"{info.get('dbname', '')}")  # never the password
        try:
            self._db = psycopg.connect(dsn, autocommit=True,
                                       connect_timeout=max(1, round(connect_timeout)))
        except psycopg.OperationalError as exc:
            raise SessionError(f"cannot reach the PostgreSQL store at {self._where}: "
                               f"{str(exc).strip()}") from None
        with self._transaction():
            # CREATE … IF NOT EXISTS is not safe against a second worker doing the same.
            self._execute("SELECT pg_advisory_xact_lock(?)", (0x61676E74,))
            for statement in _SCHEMA:
                self._execute(statement)

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r})"

    def _acquire(self, session_id: str):
        digest = hashlib.sha256(b"agentflow session " + session_id.encode("utf-8")).digest()
        key = int.from_bytes(digest[:8], "big", signed=True)
        if not self._execute("SELECT pg_try_advisory_lock(?)", (key,)).fetchone()[0]:
            return None

        def release() -> None:
            import psycopg
            with contextlib.suppress(psycopg.Error):  # a lost connection released it
                self._execute("SELECT pg_advisory_unlock(?)", (key,))
        return release

    def _transaction(self):
        return self._db.transaction()
