"""Session stores: many sessions, many workers (SPEC R16, R22).

    from agentflow.stores import SQLiteStore
    store = SQLiteStore("sessions.db")
    with store.open("ticket-42") as session:          # saved after every step
        for update in agent.run("refund order 42", session): ...
    for entry in store.pending(limit=100):             # the approval inbox, a page
        print(entry.session_id, entry.call_id, entry.tool, entry.arguments)
    store.answer("ticket-42", [request.approve("dana")])  # recorded for a worker
    for session_id in store.answered(): ...            # what a worker resumes

Which store:

* ``FileStore(folder)`` — one JSON file per session, locked while open. A script, a
  command line, a handful of sessions on one machine. ``AgentSession.open(path)`` is
  a file store of one file.
* ``SQLiteStore(path)`` — one database file; the default for an application with many
  sessions and several worker processes on one machine.
* ``PostgresStore(dsn)`` — workers on many machines (``agentflow-approvals[postgres]``).

A worker holds a lease on each session it has open, released when it ends or dies
(SIGKILL included): meanwhile another worker's ``open`` or write is refused with
``SessionLockedError`` naming the call running there, so a call still running in a
live worker is never answered 'interrupted' (R16). The lease is an OS lock for the file
and SQLite stores, a row with a heartbeat (and an advisory lock) for PostgreSQL, which
survives a server restart (``sql.py`` says more).

The database stores append each step's messages and records (SPEC R22 addendum,
``rows.py``); ``pending(limit=, after=)`` pages through the inbox; a session a store
cannot read is an inbox entry with its ``error``; database failures are ``StoreError``.

``open_store(url)`` makes one from ``sqlite:///relative.db``, ``sqlite:////absolute.db``,
``postgresql://…`` (or ``postgres://…``) or ``file:///folder``.
"""

from __future__ import annotations

import time

from ..errors import StoreError
from .base import PendingEntry, SessionStore
from .files import FileStore
from .sql import PostgresStore, SQLiteStore

__all__ = ["SessionStore", "FileStore", "SQLiteStore", "PostgresStore", "PendingEntry",
           "check_store_url", "open_store", "open_store_waiting"]


def open_store(url: str, secret: str | bytes | None = None) -> SessionStore:
    """The store a URL names.

    Args:
        url: ``sqlite:///PATH`` (relative; ``sqlite:////PATH`` absolute, as in
            SQLAlchemy), ``postgresql://…`` / ``postgres://…`` (a libpq URL), or
            ``file:///FOLDER`` (a ``FileStore``).
        secret: sign and check every session (HMAC-SHA256).

    Raises:
        ValueError: an unknown scheme, or no path (``check_store_url``'s message).
    """
    kind, where = _parsed(url)
    if kind == "sqlite":
        return SQLiteStore(where, secret)
    if kind == "postgresql":
        return PostgresStore(where, secret)
    return FileStore(where, secret)


def check_store_url(url: str) -> None:
    """Check that ``url`` names a store, without opening it: what a command line does
    before it starts, so a mistyped ``--store`` is a usage error at once.

    Args:
        url: as for ``open_store``.

    Raises:
        ValueError: what is wrong, and what to write instead (for a path given bare,
            the ``sqlite:///`` URL of that very path).
    """
    _parsed(url)


def _parsed(url: str) -> tuple[str, str]:
    scheme, sep, rest = url.partition("://")
    if not sep:
        # a bare path is the common slip: name its own URL (four slashes when absolute)
        path = url if url and not any(c.isspace() for c in url) else "sessions.db"
        sqlite = f"sqlite:///{path}"
        raise ValueError(f"store {url!r} is not a URL: write {sqlite} for an SQLite file, "
                         "postgresql://user@host/db or file:///folder")
    if scheme == "sqlite":
        path = rest[1:] if rest.startswith("/") else rest
        if not path:
            raise ValueError(f"store {url!r} names no file: write sqlite:///sessions.db")
        return "sqlite", path
    if scheme in ("postgresql", "postgres"):
        return "postgresql", url
    if scheme == "file":
        if not rest.startswith("/"):
            raise ValueError(f"store {url!r}: write file:///absolute/folder")
        return "file", rest
    raise ValueError(f"store {url!r}: unknown kind {scheme!r}; agentflow has sqlite, "
                     "postgresql and file stores")


def open_store_waiting(url: str, secret: str | bytes | None = None, say=None,
                       longest: float = 5.0, sleep=time.sleep) -> SessionStore:
    """``open_store``, waiting for a store that is down (a database restarting, not yet
    started): what a worker or an inbox started before its database does (SPEC R22
    addendum, fourth batch).

    Args:
        url: the store's URL, as for ``open_store``.
        secret: as for ``open_store``.
        say: ``say(text)`` is told once that it waits and why (the error, never a
            password), and once that the store is reachable; ``None``: silent.
        longest: the longest pause (seconds, float) between tries; they start at 0.2 s
            and double.
        sleep: the function that waits (seconds); replaceable in tests.

    Returns:
        SessionStore: the open store.

    Raises:
        StoreError: the store failed in a way that waiting cannot mend
            (``retryable`` false: a wrong password, a file that is not a database).
        ValueError, FileNotFoundError, ImportError: as ``open_store``: a setting that
            cannot work.
    """
    pause, waited = 0.2, False
    while True:
        try:
            store = open_store(url, secret)
        except StoreError as exc:
            if not exc.retryable:
                raise
            if not waited and say is not None:
                say(f"waiting for the store: {exc} (trying again every {longest:g} s at "
                    "most; Ctrl-C stops)")
            waited = True
            sleep(pause)
            pause = min(pause * 2, longest)
            continue
        if waited and say is not None:
            say("the store is reachable again")
        return store
