"""``AgentSession``: the conversation history, its approval ledger and its write-ahead
record, as plain data (SPEC R15, R16).

A session is what a paused run leaves behind: the messages so far, ending with the
assistant message whose calls wait for approval, and the record of what was put up
for approval (``approvals.py``). It round-trips through JSON, so a run paused in one
process can be resumed in another.

``running`` is the write-ahead record (R16): the calls that started and have no
result yet. The agent adds a call there, and saves, before the tool runs; its result
replaces it. A call still there when a run starts was cut short by a crash: the loop
answers it ``Error: interrupted: …`` instead of running it again.

``revision`` counts the writes a store made (R22). A session opened from a store
(``AgentSession.open(path)`` or a ``SessionStore``, ``agentflow.stores``) is saved
after every step as a compare-and-swap on it: ``checkpoint()``.

On disk: ``save`` writes atomically (a temporary file, fsync, then a rename); with
``secret=...`` the file carries an HMAC-SHA256 signature that ``load`` checks, so an
edited file is refused. Text that is not valid Unicode (lone surrogates, e.g. from
file names) is written escaped (``\\udce9``), so nothing a tool returns can make a
save fail. ``AgentSession.open(path)`` holds a lock file while you use the session,
so two processes cannot resume the same saved run at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple, Sequence

from .approvals import ApprovalLedger, approval_request
from .durable import write_atomically
from .codec import encode, parse, verify
from .errors import SessionError, SessionLockedError  # noqa: F401 - imported from here too
from .types import ChatMessage, MessageRole, ToolApprovalRequest, ToolCall

SCHEMA_VERSION = 3
_READABLE_VERSIONS = (1, 2, 3)  # 1: before the approval ledger; 2: before revision, running


class PendingTurn(NamedTuple):
    """The calls of the last tool-call turn that still wait for a result (SPEC R4).

    Attributes:
        insert_at: the position in the messages right after that assistant message and
            the ``tool`` results that follow it: where new results go (R6).
        calls: its calls without a result, in call order (list of ``ToolCall``).
        answered: the ids (set of str) of its calls that have a result.
    """

    insert_at: int
    calls: list
    answered: set


def pending_calls(messages: Sequence[ChatMessage]) -> PendingTurn:
    """Find the calls still waiting for a result (SPEC R4).

    Args:
        messages: the conversation, oldest first.

    Returns:
        A ``PendingTurn``; ``PendingTurn(len(messages), [], set())`` when no assistant
        message has tool calls.
    """
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role is MessageRole.ASSISTANT and message.tool_calls:
            ids = {call.id for call in message.tool_calls}
            insert_at = position + 1
            answered: set[str] = set()
            while (insert_at < len(messages) and messages[insert_at].role is MessageRole.TOOL
                   and messages[insert_at].tool_call_id in ids):
                answered.add(messages[insert_at].tool_call_id)
                insert_at += 1
            pending = [call for call in message.tool_calls if call.id not in answered]
            return PendingTurn(insert_at, pending, answered)
    return PendingTurn(len(messages), [], set())


@dataclass
class AgentSession:
    """The history of one conversation.

    ``messages``: list of ``ChatMessage``, oldest first, without the agent's
    instructions (those are added at every run, SPEC R1). ``state``: a JSON-safe dict
    that context providers may use to keep their own data across runs.
    ``approvals``: the ``ApprovalLedger`` (pending approvals and the audit trail).
    ``running``: the write-ahead record, ``{call_id: {"tool": name, "started_at":
    POSIX seconds}}`` for each call that started and has no result yet (SPEC R16).
    ``revision``: int, the number of writes the session's store has made (R22).
    """

    messages: list[ChatMessage] = field(default_factory=list)
    state: dict = field(default_factory=dict)
    approvals: ApprovalLedger = field(default_factory=ApprovalLedger)
    running: dict = field(default_factory=dict)
    revision: int = 0
    # Where checkpoint() writes: set by the store that opened the session.
    _store: object = field(default=None, init=False, compare=False, repr=False)

    @property
    def pending_tool_calls(self) -> list[ToolCall]:
        """The calls of the last tool-call turn that have no result yet: the ones a
        resume will answer (SPEC R4). Empty when the session is not paused."""
        return pending_calls(self.messages).calls

    def approval_requests(self, tools=()) -> list[ToolApprovalRequest]:
        """The ``ToolApprovalRequest`` objects a paused run is waiting on, as the run
        emitted them (same ids, arguments and digests), in call order: what an
        approval UI shows after loading a saved session.

        Args:
            tools: the agent's ``Tool`` objects, for the descriptions (an empty
                description where a tool is not given).

        Returns:
            A list, empty when the session is not paused.
        """
        descriptions = {t.name: t.description for t in tools}
        records = {r.call_id: r for r in self.approvals.pending}
        return [approval_request(call, descriptions.get(call.name, ""), records[call.id])
                for call in self.pending_tool_calls if call.id in records]

    @property
    def audit(self) -> list:
        """The decisions taken so far (``AuditRecord`` objects), oldest first."""
        return list(self.approvals.audit)

    @property
    def grants(self) -> list:
        """The allow rules granted while approving (``SessionGrant`` objects, expired
        ones included), oldest first; the ``session`` layer of the policy (SPEC R19)."""
        return self.approvals.grants

    def to_dict(self) -> dict:
        """A JSON-safe dict: ``{"schema_version": 3, "revision": int, "messages":
        [OpenAI message dicts], "state": {...}, "approvals": {"pending": [...],
        "audit": [...]}, "running": {call_id: {"tool": str, "started_at": float}}}``;
        ``approvals`` also holds ``denied`` and ``grants`` when they are not empty."""
        return {"schema_version": SCHEMA_VERSION,
                "revision": self.revision,
                "messages": [m.to_openai() for m in self.messages],
                "state": self.state,
                "approvals": self.approvals.to_dict(),
                "running": {i: dict(r) for i, r in self.running.items()}}

    @classmethod
    def from_dict(cls, data: dict) -> "AgentSession":
        """The inverse of ``to_dict`` (SPEC R15). A version-1 session has no approval
        ledger: its pending calls can only be rejected.

        Args:
            data: a dict from ``to_dict`` (or JSON parsed from a saved session).

        Returns:
            AgentSession: the session, its history checked (R17).

        Raises:
            SessionError: an unknown ``schema_version``; a history that could not be sent as it is or is ambiguous
                (SPEC R17): a field of the wrong type, a ``tool`` message that answers
                no call, an approval record without a call id, a ``revision`` or a
                write-ahead record (``running``, R16) of the wrong shape.
        """
        problem = _version_problem(data)
        if problem:
            raise SessionError(problem)
        _check_history(data.get("messages", []))
        _check_records(data.get("approvals"))
        if not isinstance(data.get("state") or {}, dict):
            raise SessionError(f"the session's state must be an object, got "
                               f"{json.dumps(data.get('state'))[:80]}")
        revision = data.get("revision", 0)
        if type(revision) is not int or revision < 0:
            raise SessionError(f"the session's revision must be a whole number >= 0, got "
                               f"{revision!r}")
        running = data.get("running") or {}
        if not (isinstance(running, dict) and all(
                isinstance(r, dict) and isinstance(r.get("tool"), str)
                for r in running.values())):
            raise SessionError("the session's write-ahead record ('running') must map call "
                               f"ids to {{\"tool\": name, \"started_at\": seconds}}, got "
                               f"{json.dumps(running)[:120]}")
        return cls(messages=[ChatMessage.from_openai(m) for m in data.get("messages", [])],
                   state=dict(data.get("state") or {}),
                   approvals=ApprovalLedger.from_dict(data.get("approvals"),
                                                      data["schema_version"]),
                   running={i: dict(r) for i, r in running.items()}, revision=revision)

    def checkpoint(self, changed: bool = False) -> None:
        """Write the session to the store it was opened from, as a compare-and-swap on
        ``revision`` (SPEC R16, R22); nothing when it was not opened from a store.

        Args:
            changed: ``True`` when the caller knows the session changed since the last
                write; otherwise the write is skipped when nothing changed.

        Raises:
            SessionConflictError: another worker wrote the session since it was read;
                nothing was written (the session in hand is stale).
            OSError: the store could not be written.
        """
        if self._store is not None:
            self._store.write(self, changed)

    # -- files -------------------------------------------------------------------------

    def save(self, path, secret: str | bytes | None = None) -> None:
        """Write the session as JSON atomically: a temporary file in the same folder,
        fsync, then a rename, so a crash never leaves half a file (SPEC R10, R16).

        Args:
            path: the file (str or path-like).
            secret: a key (str or bytes) to add an HMAC-SHA256 ``signature`` over the
                content (RFC 2104), or ``None`` for none.

        Raises:
            FileNotFoundError: the folder of ``path`` does not exist.
            OSError: the file could not be written (the old file is left as it was).
        """
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"cannot save the session to {path}: the folder "
                                    f"{folder} does not exist")
        write_atomically(path, encode(self.to_dict(), secret, indent=1,
                                      identity=file_identity(path)))

    @classmethod
    def load(cls, path, secret: str | bytes | None = None) -> "AgentSession":
        """Read a session written by ``save`` (SPEC R15).

        Args:
            path: the file (str or path-like).
            secret: the key (str or bytes) it was signed with, or ``None`` for an
                unsigned file.

        Returns:
            AgentSession: the session.

        Raises:
            OSError: the file cannot be read.
            SessionError: it is not a session.
            SessionIntegrityError: its signature does not verify with ``secret``; it
                is signed and no ``secret`` is given; a ``secret`` is given and it is
                not signed; or the file is older than one ``AgentSession.open``
                already wrote there (a restored copy, SPEC R22).
        """
        from .stores.files import read_file
        return read_file(os.fspath(path), secret)

    @classmethod
    @contextlib.contextmanager
    def open(cls, path, secret: str | bytes | None = None) -> Iterator["AgentSession"]:
        """``with AgentSession.open(path) as session:`` — lock, load (or start empty
        when the file does not exist), save after every step of a run (SPEC R16) and
        on the way out, also after an error (the session then holds every completed
        step, R10). The file is kept by a ``FileStore`` (``agentflow.stores``), which
        refuses a file older than one it wrote (a restored copy, R22).

        The lock is an OS lock on ``path + ".lock"``, released (and the file removed)
        when the block ends, or released when the process dies.

        Args:
            path: the session file (str or path-like); it need not exist yet.
            secret: the signing key (str or bytes), as for ``save`` / ``load``.

        Yields:
            AgentSession: the loaded (or new) session, saved as the run goes.

        Raises:
            SessionLockedError: another process holds the lock (raised at once), so
                two processes can never resume the same paused run together.
            SessionIntegrityError / SessionError / OSError: as ``load``.
        """
        from .stores.files import FileStore
        with FileStore.open_file(path, secret) as session:
            yield session


def file_identity(path) -> str:
    """What a signed session file's signature binds it to (SPEC R24).

    Args:
        path: the file (str or path-like).

    Returns:
        str: ``file:`` and its absolute path.
    """
    return "file:" + os.path.abspath(os.fspath(path))


def decode(text: str, where: str, secret: str | bytes | None = None,
           identity: str | None = None) -> "AgentSession":
    """The session in JSON text from ``encode``, its signature checked.

    Args:
        text: the JSON text (str).
        where: names the source (str, a path or a store key) in error messages.
        secret: the signing key (str or bytes), or ``None``.
        identity: the identity it is read as (``codec.encode``): a signature made for
            another one is refused (R24).

    Returns:
        AgentSession: the session.

    Raises:
        SessionError: not a saved session (any content that is not one).
        SessionIntegrityError: the signature rules of ``AgentSession.load``.
    """
    data = parse(text, where)
    if _version_problem(data):
        raise SessionError(f"{where} is not a saved session: {_version_problem(data)}")
    verify(where, data, secret, identity)
    try:
        return AgentSession.from_dict(data)
    except SessionError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SessionError(f"{where} is not a saved session: {exc}") from None


def _version_problem(data) -> str | None:
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version not in _READABLE_VERSIONS:
        return (f"unsupported session schema_version {version!r}; this agentflow reads "
                f"versions {_READABLE_VERSIONS}")
    return None


def _check_history(messages) -> None:
    """Refuse stored messages that would crash later or be refused by a provider, and
    ``tool`` messages that answer no call (SPEC R17). Ids are checked as strings; a
    pending turn whose calls share an id is refused when it is resumed (R17)."""
    def problem(position, text):
        raise SessionError(f"stored message {position} {text}; the session file was "
                           "edited or written by something else. Fix it or start a new "
                           "session.")

    if not isinstance(messages, list):
        raise SessionError(f"stored messages must be a list, not {type(messages).__name__}")
    open_calls: set[str] = set()
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            problem(position, f"is a {type(message).__name__}, not an object")
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            problem(position, f"has the role {role!r}")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            problem(position, f"has content of type {type(content).__name__}")
        calls = message.get("tool_calls") or []
        if role == "assistant":
            if not isinstance(calls, list):
                problem(position, "has tool_calls that are not a list")
            open_calls = set()
            for call in calls:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    problem(position, f"has a tool call that is not an object: {call!r:.80}")
                if not isinstance(call.get("id"), str) or not call["id"]:
                    problem(position, f"has a tool call whose id is {call.get('id')!r}, not "
                                      "a non-empty string")
                for key in ("name", "arguments"):
                    if function.get(key) is not None and not isinstance(function[key], str):
                        problem(position, f"has a tool call whose {key} is not a string")
                open_calls.add(call["id"])
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                problem(position, f"is a tool result whose tool_call_id is {call_id!r}")
            if call_id not in open_calls:
                problem(position, f"is a tool result for {call_id!r}, which answers no call "
                                  "of the assistant message before it (or answers it twice)")
            open_calls.discard(call_id)
        else:
            open_calls = set()


def _check_records(approvals) -> None:
    """Refuse stored approval records of the wrong shape (SPEC R17): every list of the
    ledger holds objects whose keys and value types are those of its record class
    (``approvals.py``), so a hand-edited time or id fails here, not mid-resume."""
    from . import approvals as ledger

    if approvals is None:
        return
    if not isinstance(approvals, dict):
        raise SessionError(f"stored approvals must be an object, got {json.dumps(approvals)[:80]}")
    kinds = {"pending": ledger.PendingApproval, "audit": ledger.AuditRecord,
             "denied": ledger.Denial, "grants": ledger.SessionGrant,
             "answers": ledger.RecordedAnswer}
    for key, records in approvals.items():
        if key == "held":  # input waiting behind a pause (R23): messages, as in history
            if not isinstance(records, list):
                raise SessionError("stored approvals['held'] must be a list of messages")
            _check_history(records)
            continue
        kind = kinds.get(key)
        if kind is None:
            raise SessionError(f"stored approvals have an unknown list {key!r}; expected "
                               f"{', '.join(kinds)}")
        if not isinstance(records, list):
            raise SessionError(f"stored approvals[{key!r}] must be a list")
        hints, required = _record_shape(kind)
        for record in records:
            problem = _record_problem(record, hints, required)
            if problem:
                raise SessionError(
                    f"stored approval record {json.dumps(record, default=str)[:120]} in "
                    f"{key!r} {problem}; the session file was edited. Fix it or start a new "
                    "session.")


@functools.lru_cache(maxsize=None)
def _record_shape(kind: type) -> tuple[dict, frozenset]:
    """A record class's field types and required fields, ``(hints, required)``: read
    once per class, since ``typing.get_type_hints`` evaluates every annotation's text
    again on each call (a session load checked five classes each time)."""
    import typing

    required = frozenset(f.name for f in dataclasses.fields(kind)
                         if f.default is dataclasses.MISSING
                         and f.default_factory is dataclasses.MISSING)
    return typing.get_type_hints(kind), required


def _record_problem(record, hints: dict, required: set) -> str | None:
    import typing

    if not isinstance(record, dict):
        return "is not an object"
    missing = sorted(required - record.keys())
    if missing:
        return f"lacks {', '.join(missing)}"
    unknown = sorted(record.keys() - hints.keys())
    if unknown:
        return f"has unknown keys {', '.join(unknown)}"
    for name, value in record.items():
        allowed = typing.get_args(hints[name]) or (hints[name],)
        if float in allowed:
            allowed += (int,)  # JSON numbers: 5 and 5.0 are both seconds
        if not isinstance(value, tuple(t for t in allowed if isinstance(t, type))) or (
                isinstance(value, bool) and bool not in allowed):
            return f"has {name} = {value!r}, not of type {_type_name(hints[name])}"
    return None


def _type_name(hint) -> str:
    import typing
    names = [getattr(t, "__name__", str(t)) for t in (typing.get_args(hint) or (hint,))]
    return " or ".join("null" if n == "NoneType" else n for n in names)
