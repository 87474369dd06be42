"""What every session store does: revisions, compare-and-swap, checkpoints, the inbox
(SPEC R16, R22).

A store keeps sessions by id as the JSON text ``AgentSession.to_dict()`` gives
(``codec.encode``: signed with the store's ``secret`` when it has one, lone
surrogates escaped). Each write stores revision ``n + 1`` in place of revision ``n``
and only if the store still holds ``n``: a compare-and-swap. A worker whose session is
older than the store's gets ``SessionConflictError`` and nothing is written, so two
workers resuming one pause cannot both run its calls (the loser's write-ahead record
is refused before its tool runs), and no write can put an older state back.

Revisions alone cannot tell a crashed worker from a live one: a call recorded as
started (``session.running``, R16) is either still running somewhere or was cut short.
So a worker that has a session open for a run holds a **lease** on it, which its
death releases (an OS lock, a database session lock; a SIGKILL included). Another
worker's ``open`` or write meanwhile gets ``SessionLockedError`` (a
``SessionConflictError``) naming the call running there, and never answers that call
``interrupted``; a started call found by a worker that holds the lease is one whose
worker is gone.

Subclasses implement four primitives on a session's whole text: ``_fetch``,
``_swap``, ``_ids``, ``_remove``, and the lease, ``_acquire`` (the file store); or
override ``_read``, ``_write`` and ``pending`` to keep a session in parts (the
database stores, ``rows.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from ..approvals import PendingApproval, RecordedAnswer, approval_request
from ..errors import (SessionConflictError, SessionError, SessionIntegrityError,
                      SessionLockedError, StoreError)
from ..codec import encode
from ..session import AgentSession, decode
from .answers import answer_for, record_answers


@dataclass(frozen=True)
class PendingEntry:
    """One call waiting for a human, as an approval inbox shows it (SPEC R22): the
    session's pause record and what the inbox adds to it.

    Every field of ``record`` reads as the entry's own (``entry.why`` is
    ``entry.record.why``): ``call_id``, ``tool``, ``digest`` (SHA-256 hex of the
    canonical arguments, for ``ToolApprovalResponse``), ``issued_at`` (when the run
    paused) and ``expires_at`` (POSIX seconds, or ``None``), and what the gate kept for
    an inbox (SPEC R18, R19, R20, R24): ``why``, ``rule``, ``layer``, ``description``,
    ``parameters``, ``preview``, ``subject``, ``mcp_tool``, ``exact_rules``,
    ``request_id`` (each ``None`` when not recorded; see ``PendingApproval``).

    Attributes:
        session_id: the session (str) to resume.
        record: the ``PendingApproval`` the gate wrote at the pause.
        arguments: the parsed JSON arguments, or ``None`` when they are not valid JSON.
        age: seconds from ``issued_at`` to when the list was made.
        error: ``None``; for a session the store holds but cannot read (written by a
            newer version, signed with another secret, a damaged row, a stray file),
            what is wrong with it (str): the entry then stands for the whole session,
            with empty ``call_id``, ``tool`` and ``digest`` (SPEC R22 addendum).
        answer: the ``RecordedAnswer`` an inbox recorded for it (``SessionStore.answer``)
            and no worker has used yet, or ``None``.
        needs_run: ``None``; for a session whose run was cut short and whose holder
            is gone (``CUT_SHORT``, ``readiness``), what it needs: the entry then
            stands for the whole session, with empty ``call_id``, ``tool`` and
            ``digest``, ``issued_at`` when the run began running calls (SPEC R22
            addendum, fourth batch).
    """

    session_id: str
    record: PendingApproval
    arguments: Any
    age: float
    error: str | None = None
    answer: RecordedAnswer | None = None
    needs_run: str | None = None

    def __getattr__(self, name: str):
        if name in _RECORD_FIELDS:  # one pause record, not a copy of its fields
            return getattr(self.record, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


_RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(PendingApproval))


def check_session_id(session_id) -> str:
    """Refuse an id no store could keep (SPEC R22).

    Args:
        session_id: the id to check; refused when not a str, empty, over 200 bytes
            in UTF-8 (so that every store, a file name included, can keep it), ``.``
            or ``..``, holding ``/``, ``\\`` or NUL, or not encodable as UTF-8. The
            same rule for every store.

    Returns:
        str: ``session_id`` itself.

    Raises:
        ValueError: naming the rule broken.
    """
    if not isinstance(session_id, str):
        raise ValueError(f"a session id is a str, got {type(session_id).__name__}")
    bad = (not session_id or session_id in (".", "..")
           or any(c in session_id for c in "/\\\0"))
    try:
        bad = bad or len(session_id.encode("utf-8")) > 200
    except UnicodeEncodeError:
        bad = True
    if bad:
        raise ValueError(f"session id {session_id!r} is not allowed: use 1 to 200 bytes "
                         "of UTF-8 without '/', '\\' or NUL, other than '.' and '..'")
    return session_id


def waiting_since(session: AgentSession) -> float | None:
    """What stores index the approval inbox by (SPEC R22).

    Args:
        session: the ``AgentSession``.

    Returns:
        float | None: when its oldest pending approval was issued (POSIX seconds), or
        ``None`` when nothing waits.
    """
    return min((r.issued_at for r in session.approvals.pending), default=None)


CUT_SHORT = "needs a run: the worker stopped inside it"


def readiness(session: AgentSession) -> tuple[str, float] | None:
    """Whether a worker has something to do with a session, without a person (SPEC
    R4, R22 addendum, fourth batch).

    Args:
        session: the ``AgentSession`` as stored.

    Returns:
        tuple | None: ``("answered", since)`` when every waiting call has an answer no
        worker refused (bound to its record's digest), ``since`` the oldest pause;
        ``("cut short", since)`` when nothing waits for a person but a run was cut
        short (its ``RUN_MARK`` stored, or a call started with no result), ``since``
        when it began running calls; ``None`` otherwise.
    """
    from ..journal import RUN_MARK
    records = session.approvals.pending
    if records:
        answers = {a.call_id: a for a in session.approvals.answers if a.refused is None}
        if all(r.call_id in answers and answers[r.call_id].digest == r.digest
               for r in records):
            return "answered", min(r.issued_at for r in records)
        return None
    mark = session.state.get(RUN_MARK)
    if not (session.running or isinstance(mark, dict)):
        return None
    times = [r.get("started_at") for r in session.running.values()]
    times.append(mark.get("since") if isinstance(mark, dict) else None)
    return "cut short", min((t for t in times if isinstance(t, (int, float))), default=0.0)


def cut_short_entry(session_id: str, since: float, now: float) -> PendingEntry:
    """The inbox entry of a session whose run was cut short (SPEC R22 addendum).

    Args:
        session_id: the session's id (str).
        since: when its run began running calls (POSIX seconds).
        now: the current time (POSIX seconds).

    Returns:
        PendingEntry: with empty ``call_id``, ``tool`` and ``digest`` and ``needs_run``.
    """
    return PendingEntry(session_id, PendingApproval("", "", "", since), None,
                        max(0.0, now - since), needs_run=CUT_SHORT)


def pending_entries(session_id: str, session: AgentSession, now: float) -> list[PendingEntry]:
    """The inbox entries of one session (SPEC R22).

    Args:
        session_id: the session's id in its store (str).
        session: the ``AgentSession``.
        now: the current time (POSIX seconds), for each entry's ``age``.

    Returns:
        list[PendingEntry]: one per pending call with an approval record, in call order.
    """
    records = {r.call_id: r for r in session.approvals.pending}
    entries = []
    for call in session.pending_tool_calls:
        record = records.get(call.id)
        if record is None:
            continue
        request = approval_request(call, "", record)
        entries.append(PendingEntry(
            session_id, dataclasses.replace(record, tool=call.name), request.arguments,
            max(0.0, now - record.issued_at), answer=answer_for(session, call.id)))
    return entries


# What a pending row keeps of the record beyond the call (SPEC R20, R24; rows.py).
SHOWN_FIELDS = ("why", "rule", "layer", "description", "parameters", "preview", "subject",
                "mcp_tool", "exact_rules", "request_id")


def broken_entry(session_id: str, error: Exception, since: float,
                 now: float) -> PendingEntry:
    """The inbox entry of a session the store holds but cannot read (SPEC R22
    addendum).

    Args:
        session_id: the session's id (str).
        error: what reading it raised.
        since: when it started waiting, as far as the store knows (POSIX seconds;
            0.0 when it cannot tell).
        now: the current time (POSIX seconds).

    Returns:
        PendingEntry: with empty ``call_id``, ``tool`` and ``digest`` and the error.
    """
    return PendingEntry(session_id, PendingApproval("", "", "", since), None,
                        max(0.0, now - since), f"{type(error).__name__}: {error}")


def order(entry: PendingEntry) -> tuple:
    """The inbox order (SPEC R22).

    Args:
        entry: a ``PendingEntry``.

    Returns:
        tuple: ``(issued_at, session_id, call_id)``.
    """
    return entry.issued_at, entry.session_id, entry.call_id


def page(entries: list, limit: int | None, after: PendingEntry | None) -> list:
    """The page of ``entries`` (any order) after ``after``, at most ``limit`` long.

    Args:
        entries: ``PendingEntry`` objects.
        limit: the most (int), or ``None``.
        after: the last entry of the previous page, or ``None``.

    Returns:
        list[PendingEntry]: in the inbox order.
    """
    entries = sorted(entries, key=order)
    if after is not None:
        entries = [e for e in entries if order(e) > order(after)]
    return entries if limit is None else entries[:max(0, limit)]


def conflict(session_id: str, expected: int, held: int | None) -> SessionConflictError:
    """The error for a failed compare-and-swap (SPEC R22).

    Args:
        session_id: the session's id (str).
        expected: the revision (int) the writer read.
        held: the revision (int) the store holds, or ``None`` when it holds none.

    Returns:
        SessionConflictError: the error to raise, saying what happened and what to do.
    """
    if held is None:
        found = "the store no longer holds it (deleted)"
    elif expected == 0:
        found = f"another worker created it first (revision {held})"
    else:
        found = f"the store holds revision {held}"
    return SessionConflictError(
        f"session {session_id!r} was written by another worker since this one read it "
        f"(read at revision {expected}; {found}). Nothing was saved; had this write "
        "recorded a tool call's start, that tool did not run. Load the session again to "
        "see what the other worker did.")


def in_use(subject: str, session: AgentSession | None, who: str = "another worker",
           now: float | None = None) -> SessionLockedError:
    """The error for a session another live worker holds (SPEC R16, R22).

    Args:
        subject: what names the session to a reader (str): ``session 'ID'``, a path.
        session: the session as stored, to name the calls running there, or ``None``
            when it could not be read.
        who: the holder, as the store can name it (str).
        now: POSIX seconds (default: the clock), for how long a call has run.

    Returns:
        SessionLockedError: the error to raise, saying what runs there and what to do.
    """
    now = time.time() if now is None else now
    running = sorted(session.running.items(), key=lambda item: item[1]["started_at"]) \
        if session is not None else []
    if running:
        since = running[0][1]["started_at"]
        calls = ", ".join(f"{call_id} ({record['tool']})" for call_id, record in running)
        what = (f"call{'s' if len(running) > 1 else ''} {calls} "
                f"{'are' if len(running) > 1 else 'is'} running there since "
                f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(since))} "
                f"({max(0.0, now - since):.0f} s)")
    else:
        what = "it has the session open for a run"
    return SessionLockedError(
        f"{subject} is in use by {who}: {what}; try again when it "
        "finishes. Nothing was run or saved here.")


class SessionStore:
    """Keeps sessions by id; every write is a compare-and-swap on ``revision``
    (SPEC R22). Use ``open`` for a run; ``load``/``save`` for one read or write;
    ``pending`` for the approval inbox.

    Args:
        secret: when given, every session is signed on write (HMAC-SHA256) and checked
            on read, as ``AgentSession.save(path, secret=...)`` does.
    """

    def __init__(self, secret: str | bytes | None = None):
        self.secret = secret
        self._open: dict[str, Callable[[], None]] = {}  # id -> release of its lease

    # -- what a subclass provides --------------------------------------------------------

    def _fetch(self, session_id: str) -> tuple[int, str] | None:
        """``(revision, text)`` of the session, or ``None`` when there is none."""
        raise NotImplementedError

    def _swap(self, session_id: str, expected: int, text: str,
              waiting: float | None) -> None:
        """Store ``text`` as revision ``expected + 1`` if the store holds revision
        ``expected`` (0: no session yet); else raise ``conflict(...)``. ``waiting`` is
        ``waiting_since`` of the session, for the inbox. All or nothing, durable."""
        raise NotImplementedError

    def _ids(self) -> Iterable[str]:
        """Every session id the store holds, for the inbox of a store without an
        index (the database stores override ``pending``)."""
        raise NotImplementedError

    def identity(self, session_id: str) -> str:
        """What a signed session's signature binds it to (SPEC R24), so that a copy
        under another id is refused.

        Args:
            session_id: the session's id (str).

        Returns:
            str: ``session:`` and the id.
        """
        return "session:" + session_id

    def _read(self, session_id: str) -> tuple[AgentSession, Any] | None:
        """The session and what the store remembers of it for the next write (its
        text here), or ``None`` when there is none; one consistent read."""
        found = self._fetch(session_id)
        if found is None:
            return None
        session = self._decode(session_id, *found)
        return session, self._blank(session_id, session)

    def _blank(self, session_id: str, session: AgentSession) -> Any:
        """What ``_write`` compares against to skip a write that changes nothing."""
        return encode(session.to_dict(), self.secret, identity=self.identity(session_id))

    def _write(self, session_id: str, session: AgentSession, before: Any,
               changed: bool) -> Any:
        """Write ``session`` as revision ``session.revision + 1`` (compare-and-swap),
        unless ``changed`` is false and it is as ``before`` says; then bump its
        revision. ``before`` is what the last ``_read`` or ``_write`` returned, or
        ``None`` (a plain ``save``: write it all). Returns what to pass next time."""
        if not changed and before is not None and self._blank(session_id, session) == before:
            return before
        revision = session.revision + 1
        text = encode({**session.to_dict(), "revision": revision}, self.secret,
                      identity=self.identity(session_id))
        with self._leased(session_id):
            self._swap(session_id, session.revision, text, waiting_since(session))
        session.revision = revision
        return text

    def _remove(self, session_id: str) -> None:
        """Remove the session; nothing when there is none."""
        raise NotImplementedError

    def _acquire(self, session_id: str) -> Callable[[], None] | None:
        """Take the session's lease without waiting: the function that releases it,
        or ``None`` when another worker (or another ``open`` of this store) holds it.
        The holder's death, however abrupt, must release it. Default: no lease."""
        return lambda: None

    def delete(self, session_id: str) -> None:
        """Remove the session; nothing when there is none.

        Args:
            session_id: the session's id (str).

        Raises:
            SessionLockedError: another worker has it open.
        """
        with self._leased(check_session_id(session_id)):
            self._remove(session_id)

    def close(self) -> None:
        """Release the store's connection or handles."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading and writing -------------------------------------------------------------

    def load(self, session_id: str) -> AgentSession:
        """The stored session; its ``revision`` is the one read.

        Args:
            session_id: the session's id (str, see ``check_session_id``).

        Returns:
            AgentSession: the session.

        Raises:
            KeyError: no session has that id.
            SessionIntegrityError: its signature does not verify (see ``secret``), or
                its recorded revision is not the store's.
            SessionError: the stored text is not a session.
            ValueError: the id is not allowed.
        """
        found = self._read(check_session_id(session_id))
        if found is None:
            raise KeyError(f"no session {session_id!r} in {self!r}")
        return found[0]

    def save(self, session_id: str, session: AgentSession) -> str:
        """Write ``session`` as revision ``session.revision + 1``, only if the store
        still holds ``session.revision`` (a new session has revision 0; SPEC R22);
        then ``session.revision`` is the new one.

        Args:
            session_id: the session's id (str, see ``check_session_id``).
            session: the ``AgentSession`` to write.

        Returns:
            str: the JSON text written (the database stores: the session's head).

        Raises:
            SessionLockedError: another worker has it open (``open``); nothing was
                written.
            SessionConflictError: another worker wrote it since it was read; nothing
                was written.
        """
        written = self._write(check_session_id(session_id), session, None, True)
        return written if isinstance(written, str) else written.head

    def checkpoint(self, session_id: str, session: AgentSession, before: Any,
                   changed: bool) -> Any:
        """One write of a session this store has open (``session.checkpoint()``, SPEC
        R16): what the step changed, as a compare-and-swap; nothing when nothing
        changed.

        Args:
            session_id: the session's id (str).
            session: the ``AgentSession``.
            before: what the previous write (or the read) of this ``open`` returned.
            changed: ``True`` to write even when nothing seems changed.

        Returns:
            what to pass as ``before`` next time.

        Raises:
            SessionConflictError, SessionLockedError, StoreError: as ``save``.
        """
        return self._write(session_id, session, before, changed)

    @contextlib.contextmanager
    def open(self, session_id: str) -> Iterator[AgentSession]:
        """``with store.open(id) as session:`` — load it (or start an empty one), save
        after every step of a run (``ChatClientAgent`` calls ``session.checkpoint()``,
        SPEC R16) and on the way out, also after an error; not after a
        ``SessionConflictError``, which leaves the stored session as the other
        worker wrote it.

        While the block runs, this worker holds the session's lease: other workers'
        ``open`` and writes are refused, so a started call another worker finds in the
        session is one whose worker is gone, never one still running here (R16).

        Args:
            session_id: the session's id (str, see ``check_session_id``).

        Yields:
            AgentSession: the session, bound to this store.

        Raises:
            SessionLockedError: at once, before anything is read: another worker (or
                another ``open`` of this store) has the session open; the message names
                the call running there.
            SessionConflictError: when a write finds that another worker wrote first.
        """
        check_session_id(session_id)
        release = None if session_id in self._open else self._acquire(session_id)
        if release is None:
            raise self._in_use(session_id)
        self._open[session_id] = release
        try:
            yield from self._opened(session_id)
        finally:
            del self._open[session_id]
            release()

    def _opened(self, session_id: str) -> Iterator[AgentSession]:
        found = self._read(session_id)
        if found is None:
            session = AgentSession()
            found = session, self._blank(session_id, session)
        session = found[0]
        binding = _Binding(self, session_id, found[1])
        session._store = binding
        try:
            yield session
        except BaseException:
            if binding.writable:
                with contextlib.suppress(SessionError, OSError):  # the first error wins
                    session.checkpoint()
            raise
        else:
            if binding.writable:  # a stale or half-done session is never written back
                session.checkpoint()
        finally:
            session._store = None

    @contextlib.contextmanager
    def _leased(self, session_id: str) -> Iterator[None]:
        """Hold the lease for one write, unless an ``open`` of this store holds it."""
        if session_id in self._open:
            yield
            return
        release = self._acquire(session_id)
        if release is None:
            raise self._in_use(session_id)
        try:
            yield
        finally:
            release()

    def _held(self, session_id: str) -> bool:
        """Whether a live worker (this store's ``open`` included) holds the session's
        lease now: taken and given back at once; a lease that cannot be looked at
        (a read-only folder) counts as not held."""
        if session_id in self._open:
            return True
        try:
            release = self._acquire(session_id)
        except (OSError, StoreError):
            return False
        if release is None:
            return True
        release()
        return False

    def changes(self, since: Any = None) -> tuple[Any, list[str] | None]:
        """What an inbox must read again since its last look (SPEC R22 addendum,
        fourth batch: change detection reads only what changed).

        Args:
            since: the cursor the previous call returned, or ``None`` at the first.

        Returns:
            tuple: ``(cursor, ids)``: the cursor to pass next time, and the ids (list of
            str) of the sessions whose entries may have changed, to read with
            ``pending_of``; ``None`` instead of the ids: read everything (``pending``).
            Here always ``None``: a folder keeps no record of its changes.
        """
        return None, None

    def pending_of(self, session_ids, now: float | None = None) -> list[PendingEntry]:
        """``pending``'s entries of some sessions only (``changes``).

        Args:
            session_ids: the ids (iterable of str).
            now: POSIX seconds the ages are counted to (default: the clock).

        Returns:
            list[PendingEntry]: in the inbox order.

        Raises:
            StoreError: the database could not be read.
        """
        wanted = set(session_ids)
        now = time.time() if now is None else now
        return [e for e in self.pending(now) if e.session_id in wanted]

    def wait(self, timeout: float) -> None:
        """Wait until the store may have work for a worker (an answer, a session cut
        short), or ``timeout`` seconds: what a worker does between two looks. Here a
        sleep; the database stores return early when they can tell (SPEC R22
        addendum, fourth batch).

        Args:
            timeout: seconds (float) to wait at most.
        """
        time.sleep(max(0.0, timeout))

    def cut_short(self) -> list[str]:
        """The ids of the sessions whose run was cut short and whose holder is gone
        (``readiness``), oldest first: what a worker continues (SPEC R22 addendum,
        fourth batch). A call that never started runs (it was approved), one that may
        have run is answered ``interrupted`` (R16), a stored result goes on to the
        next model turn: ``agent.run([], session)`` does each.

        Returns:
            list[str]: session ids; a session the store cannot read is left out.

        Raises:
            StoreError: the database could not be read.
        """
        return [e.session_id for e in self.pending() if e.needs_run is not None]

    def _in_use(self, session_id: str, subject: str | None = None,
                who: str = "another worker") -> SessionLockedError:
        try:
            session = self.load(session_id)
        except Exception:  # the error is about the lease; the session is read to say more
            session = None
        return in_use(subject or f"session {session_id!r}", session, who)

    def pending(self, now: float | None = None, limit: int | None = None,
                after: PendingEntry | None = None) -> list[PendingEntry]:
        """Every call that waits for approval, across all sessions, oldest first: the
        data of an approval inbox (SPEC R22), a page at a time (R22 addendum). A
        session the store cannot read is an entry with its ``error``; it never hides
        the others. A session whose run was cut short, and whose holder is gone, is
        an entry with ``needs_run`` (fourth batch).

        Args:
            now: POSIX seconds the ages are counted to (default: the clock).
            limit: the most entries (int) to return, or ``None`` for all.
            after: the last entry of the previous page (``PendingEntry``): the page
                starts after it, in the order ``(issued_at, session_id, call_id)``.

        Returns:
            list[PendingEntry]: the page.

        Raises:
            StoreError: the database could not be read.
        """
        now = time.time() if now is None else now
        entries = []
        for session_id in self._ids():
            try:
                found = self._read(session_id)
            except StoreError:
                raise
            except (SessionError, OSError, ValueError) as exc:
                entries.append(broken_entry(session_id, exc, 0.0, now))
                continue
            if found is None:
                continue
            entries += pending_entries(session_id, found[0], now)
            ready = readiness(found[0])
            if ready is not None and ready[0] == "cut short" and not self._held(session_id):
                entries.append(cut_short_entry(session_id, ready[1], now))
        return page(entries, limit, after)

    def answer(self, session_id: str, responses, now: float | None = None,
               attempts: int = 8) -> list[RecordedAnswer]:
        """Record answers to a paused session's calls for a worker to resume with: the
        durable answer of an approval inbox (SPEC R4, R22, R24). Nothing runs here.

        Each answer is bound to the request the person was shown (its digest, and its
        ``request_id`` where the record has one); a second answer to the same call —
        two browsers, a double click — is refused with "already answered by …". The
        write is a compare-and-swap: an answer racing another is checked again against
        what the other wrote.

        Args:
            session_id: the session's id (str).
            responses: ``ToolApprovalResponse`` objects (``request.approve()``,
                ``.reject(reason)``), one per call answered; a turn resumes once every
                waiting call of it has one (``answered``).
            now: POSIX seconds of the answer (default: the clock).
            attempts: writes tried (int) while workers or other answers race this one.

        Returns:
            list[RecordedAnswer]: the answers recorded.

        Raises:
            KeyError: no session has that id.
            ApprovalError: the answers do not fit the waiting calls
                (``answers.record_answers``); nothing was recorded.
            SessionLockedError: a worker kept the session open through every attempt
                (it is running); nothing was recorded.
        """
        for attempt in range(attempts):
            session = self.load(session_id)
            recorded = record_answers(session, session_id, responses, now)
            try:
                self.save(session_id, session)
                return recorded
            except SessionLockedError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
            except SessionConflictError:  # written meanwhile: check against that
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def answered(self) -> Iterator[str]:
        """The ids of the paused sessions whose every waiting call has an answer
        (``answer``), oldest pause first: what a worker resumes (SPEC R4, R22).

            for session_id in store.answered():
                with store.open(session_id) as session:
                    responses = answers.ready_responses(session)
                    if responses:                   # [] if another worker was first
                        for update in agent.run([], session, AgentRunOptions(
                                tool_approval_responses=responses)): ...

        ``open`` refuses a session another worker has open (``SessionLockedError``);
        skip it.

        Yields:
            str: session ids; a session the store cannot read is left out. The
            worker checks again with ``answers.ready_responses`` once it has the
            session open.
        """
        by_session: dict = {}
        for entry in self.pending():  # the database stores read only their inbox rows
            by_session.setdefault(entry.session_id, []).append(entry)
        for session_id, entries in by_session.items():
            if all(e.error is None and e.answer is not None and e.answer.refused is None
                   and e.answer.digest == e.digest for e in entries):
                yield session_id

    def _decode(self, session_id: str, revision: int, text: str) -> AgentSession:
        where = f"session {session_id!r} in {self!r}"
        session = decode(text, where, self.secret, self.identity(session_id))
        if session.revision != revision:
            raise SessionIntegrityError(
                f"{where} records revision {session.revision} but the store holds it as "
                f"revision {revision}: it was copied from another revision. Refusing it.")
        return session


class _Binding:
    """What ``session.checkpoint()`` writes through while a store has it open.

    After a write that failed, the session in memory holds what the failed step began
    (a record consumed, a call marked started) and the store holds the step before it:
    no later write of this ``open`` may store that half step, the exit save included
    (SPEC R22 addendum, fourth batch)."""

    def __init__(self, store: SessionStore, session_id: str, before: Any):
        self.store, self.session_id = store, session_id
        self.conflicted = False
        self.failed = False
        self.before = before  # what the store's _write compares against

    @property
    def writable(self) -> bool:
        """Whether the session in memory may still be written: no write failed."""
        return not (self.conflicted or self.failed)

    def write(self, session: AgentSession, changed: bool) -> None:
        if self.conflicted:
            raise SessionConflictError(
                f"session {self.session_id!r} lost a write to another worker earlier in "
                "this block; it is stale. Load it again from the store.")
        if self.failed:
            raise StoreError(
                f"session {self.session_id!r}: an earlier write of this block failed, so "
                "the session in memory holds a step the store does not; nothing more is "
                "saved from it. Open the session again.", store=repr(self.store),
                retryable=True, saved=False)
        try:
            self.before = self.store.checkpoint(self.session_id, session, self.before,
                                                changed)
        except SessionConflictError:
            self.conflicted = True
            raise
        except BaseException:
            self.failed = True
            raise
