"""Session stores: many sessions, many workers (SPEC R16, R22).

    from agentflow.stores import SQLiteStore
    store = SQLiteStore("sessions.db")
    with store.open("ticket-42") as session:          # saved after every step
        for update in agent.run("refund order 42", session): ...
    for entry in store.pending():                      # the approval inbox
        print(entry.session_id, entry.call_id, entry.tool, entry.arguments)

Which store:

* ``FileStore(folder)`` — one JSON file per session, locked while open. A script, a
  command line, a handful of sessions on one machine. ``AgentSession.open(path)`` is
  a file store of one file.
* ``SQLiteStore(path)`` — one database file; the default for an application with many
  sessions and several worker processes on one machine.
* ``PostgresStore(dsn)`` — workers on many machines (``agentflow[postgres]``).

A worker holds a lease on each session it has open, released when it ends or dies
(SIGKILL included): meanwhile another worker's ``open`` or write is refused with
``SessionLockedError`` naming the call running there, so a call still running in a
live worker is never answered 'interrupted' (R16). The lease is an OS lock for the file
and SQLite stores, a session advisory lock for PostgreSQL (``sql.py`` says more).

``open_store(url)`` makes one from ``sqlite:///relative.db``, ``sqlite:////absolute.db``,
``postgresql://…`` (or ``postgres://…``) or ``file:///folder``.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from .base import PendingEntry, SessionStore
from .files import FileStore
from .sql import PostgresStore, SQLiteStore

__all__ = ["SessionStore", "FileStore", "SQLiteStore", "PostgresStore", "PendingEntry",
           "open_store"]


def open_store(url: str, secret: str | bytes | None = None) -> SessionStore:
    """The store a URL names.

    Args:
        url: ``sqlite:///PATH`` (relative; ``sqlite:////PATH`` absolute, as in
            SQLAlchemy), ``postgresql://…`` / ``postgres://…`` (a libpq URL), or
            ``file:///FOLDER`` (a ``FileStore``).
        secret: sign and check every session (HMAC-SHA256).

    Raises:
        ValueError: an unknown scheme, or no path.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"store {url!r} is not a URL: write sqlite:///sessions.db, "
                         "postgresql://user@host/db or file:///folder")
    if scheme == "sqlite":
        path = rest[1:] if rest.startswith("/") else rest
        if not path:
            raise ValueError(f"store {url!r} names no file: write sqlite:///sessions.db")
        return SQLiteStore(path, secret)
    if scheme in ("postgresql", "postgres"):
        return PostgresStore(url, secret)
    if scheme == "file":
        if not rest.startswith("/"):
            raise ValueError(f"store {url!r}: write file:///absolute/folder")
        return FileStore(rest, secret)
    raise ValueError(f"store {url!r}: unknown kind {scheme!r}; agentflow has sqlite, "
                     "postgresql and file stores")


def pending_command(url: str, as_json: bool = False, out=None) -> int:
    """``agentflow pending --store URL``: print the approval inbox, oldest first
    (SPEC R22).

    Args:
        url: the store URL (str), as for ``open_store``.
        as_json: print one JSON object a line instead of a table.
        out: a text stream to write to; default ``sys.stdout``.

    Returns:
        int: the exit status, 0.

    Raises:
        ValueError: ``url`` names no store ``open_store`` knows.
    """
    import sys
    out = out or sys.stdout
    with open_store(url) as store:
        entries = store.pending()
    if as_json:
        for e in entries:
            out.write(json.dumps({"session": e.session_id, "call_id": e.call_id,
                                  "tool": e.tool, "arguments": e.arguments,
                                  "digest": e.digest, "issued_at": e.issued_at,
                                  "expires_at": e.expires_at, "age": round(e.age, 3)}) + "\n")
        return 0
    if not entries:
        out.write("nothing waits for approval\n")
        return 0
    out.write(f"{'AGE':>8}  {'SESSION':<20} {'CALL':<16} {'TOOL':<14} ARGUMENTS\n")
    for e in entries:
        arguments = json.dumps(e.arguments, ensure_ascii=False) if e.arguments is not None \
            else "(not valid JSON)"
        if len(arguments) > 60:
            arguments = arguments[:59] + "…"
        out.write(f"{_age(e.age):>8}  {e.session_id:<20} {e.call_id:<16} {e.tool:<14} "
                  f"{arguments}\n")
    first = entries[0]
    out.write(f"\nanswer with: agentflow chat --store {_without_password(url)} --session "
              f"{first.session_id} "
              f"--respond {first.call_id}=yes (or =no:REASON)\n")
    return 0


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")).geturl()


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
