"""A session as rows: a small head and two append-mostly lists (SPEC R22 addendum).

The database stores keep a session as

* its **head**, one row: everything but the messages and the audit trail (the state,
  the pending approvals, the write-ahead record, the revision), plus how many items
  each list holds; the compare-and-swap is on this row;
* its **items**, one row per message and per audit record, by list and position;
* its **pending calls**, one row per call that waits for a human, for the inbox.

A write appends what the step added: the items from the first one that changed (a
step adds messages at the end; R6 puts results before input that came with the
resume, and R20 rewrites the arguments of the last tool-call turn's calls, so the
items from that turn on are compared again, the ones before it only by identity) and
the head. ``Written`` is what a store remembers of the last write, to find that point.

In a signed store each item carries its own MAC, chained to the one before
(``mac_i = HMAC(key, mac_{i-1} + text_i)``, seeded with the session's id and the
list's name), and the signed head holds each chain's last MAC and the session's id: a
changed, removed, reordered or copied item, or a head copied to another id, fails
verification, and a write signs only what it adds. Pending rows carry a MAC over the
session's id and their text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from dataclasses import asdict, dataclass, field

from ..codec import encode, parse, verify
from ..errors import SessionError, SessionIntegrityError
from ..session import SCHEMA_VERSION, AgentSession, decode
from ..types import MessageRole
from .base import SHOWN_FIELDS

LAYOUT = "rows-1"  # a head written by this module; a legacy row holds the whole session
KINDS = {"messages": "m", "audit": "a"}  # list name -> the code stored in the items table


@dataclass
class Written:
    """What a store last wrote or read of one session: per list, the objects (compared
    by identity), their texts and MACs, and the head's and pending rows' texts.

    Attributes:
        objects: list name -> the objects as written (list).
        texts: list name -> their JSON texts (list of str).
        macs: list name -> their chained MACs (list of str; empty when unsigned).
        mutable_from: the first message the loop may still change in place: the last
            tool-call turn's assistant message (R6, R20).
        head: the head's text as written (str), or ``""``.
        pending: the pending rows as written (list of tuples).
    """

    objects: dict = field(default_factory=lambda: {kind: [] for kind in KINDS})
    texts: dict = field(default_factory=lambda: {kind: [] for kind in KINDS})
    macs: dict = field(default_factory=lambda: {kind: [] for kind in KINDS})
    mutable_from: int = 0
    head: str = ""
    pending: list = field(default_factory=list)


@dataclass
class Change:
    """What one write stores: per list, the position from which items are replaced and
    the new items ``(position, text, mac)``; the head; the pending rows, or ``None``
    when they are as written."""

    start: dict
    items: dict
    head: str
    pending: list | None
    written: Written


def lists_of(session: AgentSession) -> dict:
    """The session's two item lists.

    Args:
        session: the ``AgentSession``.

    Returns:
        dict: list name -> its list of objects (the session's own lists).
    """
    return {"messages": session.messages, "audit": session.approvals.audit}


def item_text(kind: str, item) -> str:
    """The JSON text of one item.

    Args:
        kind: the list's name (str, a key of ``KINDS``).
        item: a ``ChatMessage`` or an ``AuditRecord``.

    Returns:
        str: its JSON text.
    """
    return encode(item.to_openai() if kind == "messages" else item.to_dict())


def change(session_id: str, session: AgentSession, revision: int, before: Written | None,
           secret, pending_rows: list) -> Change:
    """What writing ``session`` as ``revision`` stores, given what was written before.

    Args:
        session_id: the session's id (str).
        session: the ``AgentSession``.
        revision: the revision (int) being written.
        before: what the last write stored (``Written``), or ``None`` when unknown (a
            plain ``save``): every item is then written again.
        secret: the store's signing key, or ``None``.
        pending_rows: the session's pending rows (list of tuples, ``pending_rows``).

    Returns:
        Change: the rows to write.
    """
    known = before if before is not None else Written()
    written = Written(mutable_from=_mutable_from(session.messages))
    start, items = {}, {}
    for kind, current in lists_of(session).items():
        old_objects, old_texts = known.objects[kind], known.texts[kind]
        first = 0 if before is None else _first_not_same(current, old_objects)
        if kind == "messages":
            first = min(first, known.mutable_from)
        texts = [item_text(kind, item) for item in current[first:]]
        same = 0  # re-encoded items that are as written: not written again
        while (same < len(texts) and first + same < len(old_texts)
               and texts[same] == old_texts[first + same]):
            same += 1
        first, texts = first + same, texts[same:]
        macs = known.macs[kind][:first]
        if secret is not None:
            tip = macs[-1] if macs else _seed(secret, session_id, kind)
            for text in texts:
                tip = _chain(secret, tip, text)
                macs.append(tip)
        written.objects[kind] = list(current)
        written.texts[kind] = old_texts[:first] + texts
        written.macs[kind] = macs
        start[kind] = first if before is not None else 0
        items[kind] = [(first + i, text, macs[first + i] if secret is not None else "")
                       for i, text in enumerate(texts)]
    head = {"schema_version": SCHEMA_VERSION, "layout": LAYOUT, "id": session_id,
            "revision": revision, "state": session.state,
            "approvals": _without_audit(session.approvals),
            "running": {i: dict(r) for i, r in session.running.items()},
            "counts": {kind: len(written.texts[kind]) for kind in KINDS}}
    if secret is not None:
        head["chain"] = {kind: (written.macs[kind][-1] if written.macs[kind] else "")
                         for kind in KINDS}
    written.head = encode(head, secret)
    written.pending = pending_rows
    return Change(start, items, written.head,
                  None if before is not None and pending_rows == known.pending else pending_rows,
                  written)


def unchanged(change_: Change, before: Written | None) -> bool:
    """Whether a write would store nothing new (only the revision).

    Args:
        change_: the ``Change`` a write would make.
        before: what the last write stored (``Written``), or ``None``.

    Returns:
        bool: ``True`` when the write can be skipped.
    """
    if before is None or change_.pending is not None or any(change_.items.values()):
        return False
    if any(change_.start[k] < len(before.texts[k]) for k in KINDS):
        return False
    return _without_revision(change_.head) == _without_revision(before.head)


def read(session_id: str, revision: int, head_text: str, items: list, secret,
         where: str) -> tuple[AgentSession, Written | None]:
    """A session from its head and item rows, every signature checked.

    Args:
        session_id: the session's id (str).
        revision: the revision (int) the store's row holds.
        head_text: the head's text, or a legacy row's whole session (str).
        items: ``(code, position, text, mac)`` rows, by list and position.
        secret: the store's signing key, or ``None``.
        where: names the session in error messages (str).

    Returns:
        tuple: the ``AgentSession`` and the ``Written`` it was read as (``None`` for a
        legacy row, whose first write stores every item).

    Raises:
        SessionError: the rows are not a session, or do not fit together.
        SessionIntegrityError: a signature or MAC does not verify, or the head records
            another revision or another session's id.
    """
    head = parse(head_text, where)
    if not (isinstance(head, dict) and head.get("layout") == LAYOUT):
        session = decode(head_text, where, secret)  # written before the rows layout
        _same_revision(where, session.revision, revision)
        return session, None
    verify(where, head, secret)
    if head.get("id") != session_id:
        raise SessionIntegrityError(f"{where} holds the head of session {head.get('id')!r}: "
                                    "it was copied from another id. Refusing it.")
    _same_revision(where, head.get("revision"), revision)
    by_kind = {code: kind for kind, code in KINDS.items()}
    written = Written()
    for code, position, text, mac in items:
        kind = by_kind.get(code)
        if kind is None or position != len(written.texts[kind]):
            raise SessionError(f"{where} has a stored item out of place ({code!r} at "
                               f"{position}); the store was changed by something else.")
        written.texts[kind].append(text)
        written.macs[kind].append(mac)
    counts = head.get("counts") or {}
    for kind in KINDS:
        if counts.get(kind) != len(written.texts[kind]):
            raise SessionIntegrityError(
                f"{where} records {counts.get(kind)!r} {kind} but the store holds "
                f"{len(written.texts[kind])}: rows were added or removed by something "
                "else. Refusing it.")
        if secret is not None:
            _check_chain(where, session_id, kind, written, secret,
                         (head.get("chain") or {}).get(kind))
    try:
        data = {"schema_version": head["schema_version"], "revision": revision,
                "state": head.get("state"), "running": head.get("running"),
                "messages": [json.loads(t) for t in written.texts["messages"]],
                "approvals": {**(head.get("approvals") or {}),
                              "audit": [json.loads(t) for t in written.texts["audit"]]}}
        session = AgentSession.from_dict(data)
    except SessionError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SessionError(f"{where} is not a saved session: {exc}") from None
    for kind, objects in lists_of(session).items():
        written.objects[kind] = list(objects)
    written.mutable_from = _mutable_from(session.messages)
    written.head = head_text
    return session, written


def pending_row(session_id: str, entry, secret) -> tuple:
    """The pending-calls row of one inbox entry: ``(call_id, issued_at, text, mac)``.

    Args:
        session_id: the session's id (str).
        entry: the ``PendingEntry``.
        secret: the store's signing key, or ``None``.
    """
    shown = {name: getattr(entry, name) for name in SHOWN_FIELDS
             if getattr(entry, name) is not None}  # what an inbox shows (SPEC R20, R24)
    if entry.answer is not None:
        shown["answer"] = asdict(entry.answer)
    text = encode({"call_id": entry.call_id, "tool": entry.tool,
                   "arguments": entry.arguments, "digest": entry.digest,
                   "issued_at": entry.issued_at, "expires_at": entry.expires_at, **shown})
    return (entry.call_id, entry.issued_at, text,
            _mac(secret, f"pending of {session_id}\n{text}") if secret is not None else "")


def read_pending_row(session_id: str, text: str, mac: str, secret) -> dict:
    """The fields of a pending row, its MAC checked.

    Args:
        session_id: the session's id (str).
        text: the row's text (str).
        mac: the row's MAC (str; ``""`` when unsigned).
        secret: the store's signing key, or ``None``.

    Returns:
        dict: the row's fields (``tool``, ``arguments``, ``digest``, …).

    Raises:
        SessionIntegrityError: the MAC does not verify.
        SessionError: the text is not a pending row.
    """
    if secret is not None and not hmac.compare_digest(
            mac or "", _mac(secret, f"pending of {session_id}\n{text}")):
        raise SessionIntegrityError("its inbox row was modified after it was signed (or the "
                                    "secret is wrong)")
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("tool"), str):
        raise SessionError("its inbox row is not one this agentflow wrote")
    return data


def _without_audit(ledger) -> dict:
    data = dataclasses.replace(ledger, audit=[]).to_dict()  # the audit trail is items
    del data["audit"]
    return data


def _first_not_same(current: list, old: list) -> int:
    shared = min(len(current), len(old))
    if current[:shared] == old[:shared]:  # in C, by identity first: the common case
        return shared
    for position, (a, b) in enumerate(zip(current, old)):
        if a is not b:
            return position
    return min(len(current), len(old))


def _mutable_from(messages: list) -> int:
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role is MessageRole.ASSISTANT and message.tool_calls:
            return position
    return max(0, len(messages) - 1)


def _without_revision(head_text: str) -> str:
    head = json.loads(head_text) if head_text else {}
    if isinstance(head, dict):
        head.pop("revision", None)
        head.pop("signature", None)
    return json.dumps(head, sort_keys=True)


def _same_revision(where: str, recorded, held: int) -> None:
    if recorded != held:
        raise SessionIntegrityError(
            f"{where} records revision {recorded} but the store holds it as revision "
            f"{held}: it was copied from another revision. Refusing it.")


def _key(secret) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def _mac(secret, text: str) -> str:
    return hmac.new(_key(secret), text.encode("utf-8", "surrogatepass"),
                    hashlib.sha256).hexdigest()


def _seed(secret, session_id: str, kind: str) -> str:
    return _mac(secret, f"agentflow {kind} of {session_id}")


def _chain(secret, previous: str, text: str) -> str:
    return _mac(secret, previous + "\n" + text)


def _check_chain(where: str, session_id: str, kind: str, written: Written, secret,
                 tip) -> None:
    mac = _seed(secret, session_id, kind)
    for position, (text, stored) in enumerate(zip(written.texts[kind], written.macs[kind])):
        mac = _chain(secret, mac, text)
        if not hmac.compare_digest(mac, stored or ""):
            raise SessionIntegrityError(
                f"{where}: stored {kind} item {position} was modified after it was signed "
                "(or the secret is wrong); refusing to load it. Restore the store as saved, "
                "or start a new session.")
    if not hmac.compare_digest(mac if written.texts[kind] else "", tip or ""):
        raise SessionIntegrityError(f"{where}: its {kind} end before the last signed one "
                                    "(rows were removed); refusing to load it.")
