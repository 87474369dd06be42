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
    return scrub_all(text, [secret])


def _pieces(secrets) -> set:
    """Every ``RUN``-character piece of the secrets worth masking."""
    return {secret[i:i + RUN] for secret in secrets if secret and len(secret) >= MIN_SECRET
            for i in range(len(secret) - RUN + 1)}


def _masked(text: str, pieces: set) -> list:
    """Per character of ``text``: whether it lies in a run of a secret."""
    masked = [False] * len(text)
    for start in range(len(text) - RUN + 1):
        if text[start:start + RUN] in pieces:
            for i in range(start, start + RUN):
                masked[i] = True
    return masked


def _joined(text: str, masked: list, inside: bool = False) -> str:
    """``text`` with each span of masked characters as one ``***`` (none at the start
    when the span goes on from an earlier piece, ``inside``)."""
    out = []
    for char, hidden in zip(text, masked):
        if hidden and not inside:
            out.append(MASK)
        elif not hidden:
            out.append(char)
        inside = hidden
    return "".join(out)


def scrub_all(text: str, secrets) -> str:
    """``scrub`` for several secrets at once: every run of at least ``RUN``
    consecutive characters of any of them replaced by ``***``.

    Args:
        text: any text (str).
        secrets: the secrets (iterable of str or ``None``); those shorter than
            ``MIN_SECRET`` are not treated as secrets.

    Returns:
        str: the text, masked.
    """
    pieces = _pieces(secrets)
    if not pieces or not text:
        return text
    return _joined(text, _masked(text, pieces))


class StreamScrubber:
    """``scrub_all`` for text that comes in pieces, such as a command's live output:
    a secret written a few characters at a time is masked as it would be in the
    whole text (SPEC R27; masking each piece alone let a key through 5 characters per
    write).

    What could still turn out to start a secret (the end of the text seen so far
    that is part of one, shorter than ``RUN``) is held back until the next piece
    shows whether it does, or until ``finish``; ``RUN - 1`` characters of what was
    shown are kept as context, so that a run begun before is masked as it goes on.

    Args:
        secrets: the secrets (iterable of str or ``None``), as for ``scrub_all``.
    """

    def __init__(self, secrets):
        self.secrets = [s for s in secrets if s and len(s) >= MIN_SECRET]
        self.pieces = _pieces(self.secrets)
        self.tail = ""       # the last RUN - 1 characters shown, as they came
        self.held = ""       # what is not shown yet
        self.inside = False  # the last character shown was masked

    def feed(self, piece: str) -> str:
        """What to show of ``piece`` now (str, masked); the rest comes later.

        Args:
            piece: the next piece of text (str).

        Returns:
            str: the text to show.
        """
        if not self.pieces:
            return piece
        text = self.held + piece
        hold = 0
        if text[-RUN:] not in self.pieces:  # a run at the very end is masked already
            hold = next((k for k in range(min(len(text), RUN - 1), 0, -1)
                         if any(text[-k:] in s for s in self.secrets)), 0)
        return self._show(text[:len(text) - hold], text[len(text) - hold:])

    def finish(self) -> str:
        """What is still held back, masked (str); the stream has ended."""
        return self._show(self.held, "") if self.pieces else ""

    def _show(self, shown: str, held: str) -> str:
        context = self.tail
        masked = _masked(context + shown + held, self.pieces)[len(context):len(context)
                                                                 + len(shown)]
        out = _joined(shown, masked, self.inside)
        if shown:
            self.inside = masked[-1]
        self.tail, self.held = (context + shown)[-(RUN - 1):], held
        return out


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
