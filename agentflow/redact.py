"""Keeping secrets out of what agentflow prints (SPEC R26).

Two kinds of secret reach agentflow's messages from outside: the API key, which a server
may echo back in any field of an error (its message, its ``code``, its ``type``), whole or
cut short; and credentials written into a URL (``postgresql://user:PASSWORD@host/db``,
``http://host/mcp?api_key=TOKEN``). ``scrub`` removes the first, ``mask_url`` the second.

Why runs and not the whole key: a server that truncates its error body (many cut at a
few hundred characters) can cut the echoed key too, and a key that is missing its last
two characters is still almost all of the key. So every run of ``RUN`` or more
consecutive characters of the key is masked, wherever it stands and however the text
around it was cut.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

MASK = "***"
# A key shorter than this is no secret (local servers take "x" or "none"), and masking
# it would garble every message that contains those letters.
MIN_SECRET = 8
# The shortest run of a key's characters that is masked: shorter runs occur in ordinary
# text by chance ("sk-", "abc") and give away too little of a key to matter.
RUN = 6

# Query parameters that carry a credential by their name (case-insensitive, as part of
# the name: ``api_key``, ``X-Api-Key``, ``access_token``, ``sig`` …).
_CREDENTIAL_NAME = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session",
                              re.IGNORECASE)


def scrub(text: str, secret: str | None) -> str:
    """``text`` with every run of at least ``RUN`` consecutive characters of ``secret``
    replaced by ``***``.

    Args:
        text: any text that may hold the secret, whole, cut short, or in pieces.
        secret: the API key (str), or ``None``; a key shorter than ``MIN_SECRET`` (8)
            characters is not treated as a secret.

    Returns:
        str: the text, masked; unchanged when the secret is absent or short.
    """
    if not secret or len(secret) < MIN_SECRET or not text:
        return text
    # Every RUN-character piece of the key, then each match grown to its longest
    # run: a text position starts a masked span when the piece there is in the key.
    pieces = {secret[i:i + RUN] for i in range(len(secret) - RUN + 1)}
    masked = [False] * len(text)
    for start in range(len(text) - RUN + 1):
        if text[start:start + RUN] in pieces:
            for i in range(start, start + RUN):
                masked[i] = True
    if not any(masked):
        return text
    out, i = [], 0
    while i < len(text):
        if masked[i]:
            while i < len(text) and masked[i]:
                i += 1
            out.append(MASK)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def scrub_value(value, secret: str | None):
    """``scrub`` for a field of any JSON type: strings are scrubbed, numbers and ``None``
    kept, anything else (a list or object a server sent as a ``code``) becomes its
    scrubbed text.

    Args:
        value: the field's value.
        secret: as for ``scrub``.

    Returns:
        The value, with no run of the secret left in it.
    """
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return scrub(value if isinstance(value, str) else str(value), secret)


def mask_url(url: str) -> str:
    """``url`` with its credentials masked: the password of its user part
    (``postgresql://user:***@host/db``), an http(s) user name given alone (a token:
    ``https://***@github.com/…``), and the value of every query or fragment parameter
    whose name says it holds a credential (``?api_key=***``, ``#access_token=***``). Never raises: text that does not
    parse as a URL is returned with anything after a ``:`` before an ``@`` masked.

    Args:
        url: a URL as the person wrote it (str); a percent sign or an invalid port in it
            is fine.

    Returns:
        str: the URL, safe to print.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    # RFC 3986 §3.2: the authority ends at the first "/", "?" or "#"; the user
    # information ends at its last "@" (a password may hold "@" unescaped).
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i != -1),
              default=len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo, at, host = authority.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        if not colon and scheme.lower() in _TOKEN_AS_USER:
            user = MASK  # https://TOKEN@host: a token is sent as the user name
        authority = f"{user}{colon and ':' + MASK}@{host}"
    rest, hash_, fragment = tail.partition("#")
    path, qmark, query = rest.partition("?")
    # an OAuth-style fragment (#access_token=…) is masked like a query
    return (f"{scheme}://{authority}{path}{qmark}{_masked_params(query) if qmark else ''}"
            f"{hash_}{_masked_params(fragment) if hash_ else ''}")


# schemes whose user name is often a token (GitHub, GitLab: https://TOKEN@host/…)
_TOKEN_AS_USER = {"http", "https", "ws", "wss"}


def _masked_params(query: str) -> str:
    parts = []
    for piece in query.split("&"):
        name, eq, _value = piece.partition("=")
        decoded = "".join(k for k, _ in parse_qsl(piece, keep_blank_values=True)) or name
        if eq and _CREDENTIAL_NAME.search(decoded):
            piece = f"{name}={MASK}"
        parts.append(piece)
    return "&".join(parts)
