"""A session's JSON text: lone surrogates escaped, and an optional HMAC-SHA256
signature over its canonical form (SPEC R15, R16, R24).

``encode`` makes the text of a session dict, signed with ``secret`` when one is given;
``parse`` reads it back and ``verify`` checks the signature: an edited session, a signed one read
without the secret and an unsigned one read with it are all refused
(``SessionIntegrityError``). The signature is HMAC-SHA256 (RFC 2104) over the RFC 8785
canonical JSON of ``{"identity": IDENTITY, "session": DICT}``, the dict without its
``signature`` key and the session's identity (a store's session id, or a file's
absolute path, ``file:/…``), so a signed session copied to another id or file is
refused (R24); the signature says so with ``"covers": "identity"``. Signatures of the
older schemes (over the dict alone: RFC 8785, or before it, for schema 2, Python's
sorted ``json.dumps``) are verified by their own scheme, and the next save re-signs
the session in the new one. (A session signed in an older scheme can still be copied
to another id until it is saved again: only the store's revision sees that, R22.)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re

from .canonical import canonical_json
from .errors import SessionError, SessionIntegrityError

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encode(data: dict, secret: str | bytes | None = None, indent: int | None = None,
           identity: str | None = None) -> str:
    """JSON text of a session dict. Lone surrogates are written as ``\\uXXXX`` escapes,
    which ``json.loads`` turns back into the same text, so a save never fails on what a
    tool returned (SPEC R16).

    Args:
        data: the session dict (from ``AgentSession.to_dict``).
        secret: a key (str or bytes) to add an HMAC-SHA256 ``signature``, or ``None``.
        indent: JSON indent (int), or ``None`` for the compact form.
        identity: what the signature binds the session to (str: a store's session
            id, a file's ``file:`` absolute path); ``None`` for a dict that holds its
            identity itself (a database store's head, ``stores/rows.py``).

    Returns:
        str: the JSON text, encodable as UTF-8.
    """
    if secret is not None and identity is not None:
        data = {**data, "signature": {"alg": "HMAC-SHA256", "covers": "identity",
                                      "value": sign(_covered(data, identity), secret)}}
    elif secret is not None:
        data = {**data, "signature": {"alg": "HMAC-SHA256", "value": sign(data, secret)}}
    text = json.dumps(data, ensure_ascii=False, indent=indent,
                      separators=None if indent is not None else (",", ":"))
    try:
        text.encode("utf-8")  # the common case, and far quicker than the search below
    except UnicodeEncodeError:
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def parse(text: str, where: str):
    """The JSON value in ``text``.

    Args:
        text: the JSON text (str) from ``encode``.
        where: names the source (str, a path or a store key) in error messages.

    Returns:
        the parsed value (a dict for a session; its signature still in it).

    Raises:
        SessionError: the text is not JSON.
    """
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SessionError(f"{where} is not a saved session: {exc}") from None


def _canonical(data) -> bytes:
    # a tool's result may hold a file name's lone surrogates: kept, as the session is
    return canonical_json(data, lone_surrogates=True).encode("utf-8", "surrogatepass")


def sign(data, secret: str | bytes) -> str:
    """The HMAC-SHA256 (RFC 2104) of a JSON value's canonical form (RFC 8785).

    Args:
        data: the JSON-safe value (a dict, a list, …).
        secret: the key (str, taken as UTF-8, or bytes).

    Returns:
        str: the MAC as 64 hex digits.
    """
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    return hmac.new(key, _canonical(data), hashlib.sha256).hexdigest()


def _covered(data: dict, identity: str) -> dict:
    return {"identity": identity, "session": data}


def _older_signatures(data: dict, secret) -> list:
    """What a signature of an older scheme is (module docstring)."""
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    older = [sign(data, secret)]
    if data.get("schema_version") in (1, 2):  # before RFC 8785
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        older.append(hmac.new(key, text.encode("utf-8", "surrogatepass"),
                              hashlib.sha256).hexdigest())
    return older


def verify(path: str, data: dict, secret, identity: str | None = None) -> None:
    """Check and remove the ``signature`` of a parsed session dict (SPEC R24).

    Args:
        path: names the source (str) in error messages.
        data: the parsed dict; its ``signature`` key is removed.
        secret: the signing key (str or bytes), or ``None``.
        identity: the identity the session is read as (str, as for ``encode``).

    Raises:
        SessionIntegrityError: the signature does not verify with ``secret`` for
            ``identity`` (edited, the wrong secret, or copied from another id or
            file); it is signed and no ``secret`` is given; or ``secret`` is given
            and it is not signed.
    """
    signature = data.pop("signature", None)
    if signature is None:
        if secret is not None:
            raise SessionIntegrityError(f"{path} is not signed, but a secret was given; "
                                        "refusing an unsigned session")
        return
    if secret is None:
        raise SessionIntegrityError(f"{path} is signed; pass secret=... to load it")
    value = signature.get("value") if isinstance(signature, dict) else None
    if isinstance(signature, dict) and signature.get("covers") == "identity":
        expected = [sign(_covered(data, identity), secret)] if identity is not None else []
    else:
        expected = _older_signatures(data, secret)
    if not isinstance(value, str) or not any(hmac.compare_digest(value, e) for e in expected):
        raise SessionIntegrityError(
            f"{path} was modified after it was signed, was signed as another session (a "
            "copy of another id or file), or the secret is wrong; refusing to load it. "
            "Restore the file as saved, or start a new session.")
