"""Who may use the approval inbox, and as whom (``agentflow inbox``, issue 39).

A cookie would not do: browsers send a cookie for ``127.0.0.1`` to every server on that
address, whatever its port, so any other local server would receive it (and could
answer calls with it). Instead:

* each link ``agentflow inbox`` prints carries a one-time code in its fragment
  (``/#login=CODE``): a fragment is never sent in a request, a Referer or a log;
* the page's script exchanges the code once (``POST /login``, the code in the
  ``X-Agentflow-Link`` header) for a page token, kept in the page origin's
  ``localStorage`` (an origin includes the port: no other server can read it) and sent
  in an ``Authorization: Bearer`` header, which a browser never adds by itself. The
  code is then spent, so the link left in the browser's history opens nothing;
* each link is made for one approver: the name an answer records is the link's,
  never one the request sends.
"""

from __future__ import annotations

import hmac
import secrets
import threading

MAX_NAME = 100  # characters of an approver's name


def _same(given: str, wanted: str) -> bool:
    # bytes: compare_digest refuses a str holding non-ASCII, and a header may hold any
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                               wanted.encode("utf-8", "surrogatepass"))


class Access:
    """The inbox's one-time link codes and the page tokens they were exchanged for.
    Safe to use from the server's threads."""

    def __init__(self):
        self._codes: dict[str, str] = {}  # code -> approver, until exchanged
        self._tokens: dict[str, str] = {}  # page token -> approver
        self._lock = threading.Lock()

    def invite(self, approver: str) -> str:
        """A new one-time code for ``approver``.

        Args:
            approver: the name the answers made through it record (str, at most
                ``MAX_NAME`` characters).

        Returns:
            str: the code (URL-safe).

        Raises:
            ValueError: an empty or too long name.
        """
        approver = approver.strip()
        if not approver or len(approver) > MAX_NAME:
            raise ValueError(f"an approver's name is 1 to {MAX_NAME} characters, got "
                             f"{len(approver)}")
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._codes[code] = approver
        return code

    def redeem(self, code: str) -> tuple[str, str] | None:
        """Exchange a code, once, for a page token.

        Args:
            code: the code (str) from the link's fragment.

        Returns:
            tuple | None: ``(token, approver)``, or ``None`` for a code that is not one
            of this inbox's or was exchanged before.
        """
        with self._lock:
            found = next((c for c in self._codes if _same(code, c)), None)
            if found is None:
                return None
            approver = self._codes.pop(found)
            token = secrets.token_urlsafe(32)
            self._tokens[token] = approver
        return token, approver

    def approver(self, token: str | None) -> str | None:
        """Whose page token this is.

        Args:
            token: the bearer token (str) a request carried, or ``None``.

        Returns:
            str | None: the approver's name, or ``None`` for no valid token.
        """
        if not token:
            return None
        with self._lock:
            return next((name for known, name in self._tokens.items()
                         if _same(token, known)), None)

    def holds(self, text: str) -> bool:
        """Whether a text holds any of the codes or tokens (what a test of leaks asks).

        Args:
            text: a page, a webhook body or a log (str).

        Returns:
            bool: True when it holds one.
        """
        with self._lock:
            return any(secret in text for secret in (*self._codes, *self._tokens))
