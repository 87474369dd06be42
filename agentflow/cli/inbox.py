"""``agentflow inbox --store URL``: answer paused calls from a browser (SPEC R22, R24, R25).

A page lists every call waiting across the store, oldest first, a page at a time, and
updates live (Server-Sent Events); each call can be approved, rejected with a reason
the model will see, edited (checked against the tool's schema kept with the pending
record, R20) or approved with a grant (R19). An answer is recorded in the session
(``SessionStore.answer``) bound to the request shown; a worker (``agentflow worker``,
or an application's own loop over ``store.answered()``) resumes the session.

Security, since the page can make tools run:

* it listens on loopback unless ``--bind`` says otherwise, and answers only requests
  whose ``Host`` is the address it listens on (no DNS rebinding; a wildcard address
  such as ``0.0.0.0`` takes any);
* every request needs the token printed at start: the link carries it once, then an
  HttpOnly, SameSite=Strict cookie keeps it;
* a POST also needs an ``Origin`` header naming the address it was sent to (the
  page's own origin) and the page's CSRF token;
* a strict Content-Security-Policy: scripts and styles only from the server's own
  files (no inline script), no frames, no other origin;
* every text from a model, tool, MCP server or session is escaped (``inbox_page``);
  no API key or store password is ever sent (the store is shown without its password).

``--notify URL`` posts a JSON webhook when a call starts waiting (``inbox_notify``).
"""

from __future__ import annotations

import base64
import getpass
import hmac
import ipaddress
import json
import os
import secrets
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from ..approvals import PendingApproval
from ..errors import (ApprovalError, SessionConflictError, SessionError, SessionIntegrityError,
                      StoreError)
from ..redact import mask_url
from ..stores import PendingEntry, open_store, open_store_waiting
from ..types import ToolApprovalResponse
from .inbox_notify import Notifier
from .inbox_page import PAGE_SIZE, render_entries, render_page

_ASSETS = os.path.join(os.path.dirname(__file__), "inbox_assets")
_TYPES = {"inbox.js": "text/javascript; charset=utf-8", "inbox.css": "text/css; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
MAX_BODY = 1 << 20  # bytes of a POST; an edit of arguments fits many times over


class Inbox:
    """The inbox server: one thread per request, one store connection per thread, and
    a watcher thread that notices changes (for the live page and ``--notify``).

    Args:
        store_url: the store (str, as for ``open_store``).
        host: the address to listen on (str), ``127.0.0.1`` by default.
        port: the port (int); 0 takes a free one.
        notify: a webhook URL (str) posted to when a call starts waiting, or ``None``.
        token: the access token (str); default: a new random one.
        poll: seconds (float) between the watcher's looks at the store, at least;
            it waits longer when a look takes long (a large store).
        secret: the store's signing secret, as for ``open_store``.
    """

    def __init__(self, store_url: str, host: str = "127.0.0.1", port: int = 8765,
                 notify: str | None = None, token: str | None = None, poll: float = 0.5,
                 secret: str | bytes | None = None):
        self.store_url, self.secret, self.poll = store_url, secret, poll
        open_store(store_url, secret).close()  # a bad URL fails here, not per request
        self.token = token or secrets.token_urlsafe(32)
        self.csrf = secrets.token_urlsafe(32)
        self.approver = f"{_user()} (inbox)"
        self._watcher_store = None
        self._changed = threading.Condition()
        self.version = 0
        self.total: int | None = None  # calls waiting at the watcher's last look
        self.stopping = False
        self.httpd = ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.inbox = self
        self.host, self.port = self.httpd.server_address[:2]
        self.hosts = _allowed_hosts(host, self.port)  # None: any (a wildcard address)
        shown = socket.gethostname() if self.hosts is None else host
        self.origin = f"http://{_netloc(shown, self.port)}"
        self.notifier = Notifier(notify, self.origin) if notify else None
        self._threads: list[threading.Thread] = []

    @property
    def link(self) -> str:
        """The link to open (str): it carries the token once."""
        return f"{self.origin}/?token={self.token}"

    def store(self):
        """A store connection for one request, closed after it (SQLite and psycopg
        connections are not shared across threads).

        Returns:
            SessionStore: use it in a ``with`` block.
        """
        return open_store(self.store_url, self.secret)

    def entries(self, store=None) -> list:
        """Every waiting call, oldest first (``SessionStore.pending``; the database
        stores read only their inbox rows).

        Args:
            store: an open ``SessionStore`` to read, or ``None`` for a new connection.

        Returns:
            list[PendingEntry]: the waiting calls.
        """
        if store is not None:
            return store.pending()
        with self.store() as store:
            return store.pending()

    def page(self, after: str | None) -> tuple[list, int, str | None]:
        """One page of waiting calls after ``after`` (a ``cursor``), read with
        ``pending(limit=, after=)``.

        Args:
            after: the cursor (str) the page starts after, or ``None`` for the first;
                a cursor that does not parse gives the first page.

        Returns:
            tuple: ``(entries, total, next_cursor)``; ``total`` is what the watcher
            counted at its last look.
        """
        last = uncursor(after) if after else None
        with self.store() as store:
            entries = store.pending(limit=PAGE_SIZE + 1, after=last)
            if self.total is None:
                self.total = len(store.pending())
        more = len(entries) > PAGE_SIZE
        entries = entries[:PAGE_SIZE]
        return entries, max(self.total, len(entries)), cursor(entries[-1]) if more else None

    def start(self) -> "Inbox":
        """Serve in background threads (the server and the watcher).

        Returns:
            Inbox: itself.
        """
        # A short poll: stop() returns within 0.1 s instead of serve_forever's 0.5 s.
        serve = lambda: self.httpd.serve_forever(poll_interval=0.1)  # noqa: E731
        for target in (serve, self._watch):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.notifier is not None:
            self.notifier.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every store connection."""
        self.stopping = True
        with self._changed:
            self._changed.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.notifier is not None:
            self.notifier.stop()
        for thread in self._threads[1:]:
            thread.join(timeout=5)

    def wait_for_change(self, seen: int, timeout: float) -> int:
        """Block until the change counter differs from ``seen`` (or ``timeout``
        seconds pass, or the server stops).

        Args:
            seen: the counter (int) the caller last saw.
            timeout: seconds (float) to wait at most.

        Returns:
            int: the counter now.
        """
        with self._changed:
            self._changed.wait_for(lambda: self.version != seen or self.stopping, timeout)
            return self.version

    def _watch(self) -> None:
        """Look at the store every ``poll`` seconds (or longer, after a slow look);
        bump the change counter when the waiting calls or their answers change, and
        notify each call that starts waiting."""
        seen: set | None = None
        fingerprint = None
        store = None
        while not self.stopping:
            began = time.monotonic()
            try:
                store = store or self.store()
                entries = self.entries(store)
            except (SessionError, OSError, ValueError, ImportError) as exc:
                print(f"agentflow inbox: cannot read the store: {exc}", file=sys.stderr)
                entries = None
            if entries is not None:
                self.total = len(entries)
                now = [(e.session_id, e.call_id, e.digest,
                        None if e.answer is None else (e.answer.answered_at, e.answer.refused))
                       for e in entries]
                if now != fingerprint:
                    fingerprint = now
                    with self._changed:
                        self.version += 1
                        self._changed.notify_all()
                keys = {(e.session_id, e.call_id, e.digest) for e in entries}
                if seen is not None and self.notifier is not None:
                    for entry in entries:  # a cut-short run waits for a worker, not a person
                        if entry.needs_run is None and (
                                entry.session_id, entry.call_id, entry.digest) not in seen:
                            self.notifier.send(entry)
                seen = keys
            took = time.monotonic() - began
            with self._changed:
                self._changed.wait_for(lambda: self.stopping, max(self.poll, 4 * took))
        if store is not None:
            store.close()

    def answer(self, form: dict) -> tuple[int, str]:
        """Record one answer from the page's form (SPEC R19, R20, R24).

        Args:
            form: the form's fields (dict of str): ``session``, ``call_id``, ``digest``,
                ``request_id``, ``action`` (``approve``, ``reject``, ``edit``,
                ``always``), ``reason``, ``arguments`` (JSON), ``rules`` (one a line),
                ``ttl`` (seconds) and ``approver``.

        Returns:
            tuple: ``(HTTP status, message)``.
        """
        action = form.get("action", "")
        approver = (form.get("approver") or "").strip()[:100] or self.approver
        common = {"digest": form.get("digest") or None, "approver": approver}
        if form.get("request_id") and "request_id" in ToolApprovalResponse.__dataclass_fields__:
            common["request_id"] = form["request_id"]  # SPEC R24, once issue 23 lands
        call_id, session_id = form.get("call_id", ""), form.get("session", "")
        if action == "approve":
            response = ToolApprovalResponse(call_id, True, **common)
        elif action == "reject":
            response = ToolApprovalResponse(call_id, False, form.get("reason") or None,
                                            **common)
        elif action == "edit":
            try:
                arguments = json.loads(form.get("arguments", ""))
            except ValueError as exc:
                return 400, f"the edited arguments are not JSON ({exc}); nothing was recorded"
            if not isinstance(arguments, dict):
                return 400, "the edited arguments must be a JSON object; nothing was recorded"
            response = ToolApprovalResponse(call_id, True, arguments=arguments, **common)
        elif action == "always":
            rules = [r.strip() for r in form.get("rules", "").splitlines() if r.strip()]
            if not rules:
                return 400, "write the rule to allow (e.g. run_command(git status))"
            ttl = form.get("ttl") or None
            try:
                ttl = float(ttl) if ttl else None
            except ValueError:
                return 400, f"ttl {ttl!r} is not a number of seconds"
            from ..types import Grant
            response = ToolApprovalResponse(call_id, True, grant=[Grant(r, ttl) for r in rules],
                                            **common)
        else:
            return 400, f"unknown action {action!r}: approve, reject, edit or always"
        try:
            with self.store() as store:
                store.answer(session_id, [response])
        except KeyError:
            return 404, f"no session {session_id!r} in the store"
        except ApprovalError as exc:
            return (409 if "already answered" in str(exc) else 400), str(exc)
        except SessionConflictError as exc:  # a worker kept it open
            return 409, str(exc)
        except SessionIntegrityError as exc:  # SPEC R27: a forged row, or another key's
            return 409, f"refused: {exc}"
        except StoreError as exc:  # the database is away; it reconnects by itself
            return 503, str(exc)
        except SessionError as exc:  # this session's rows cannot be read; the rest can
            return 500, (f"session {session_id!r} cannot be read from the store, so "
                         f"nothing was recorded: {exc}")
        except ValueError as exc:  # a session id the store cannot keep
            return 400, str(exc)
        with self._changed:
            self.version += 1  # the page of whoever answered refreshes at once
            self._changed.notify_all()
        verdict = {"approve": "approved", "reject": "rejected", "edit": "approved (edited)",
                   "always": "approved, with a grant"}[action]
        return 200, f"{verdict} by {approver}; a worker resumes the session"


class _Handler(BaseHTTPRequestHandler):
    server_version = "agentflow-inbox"
    sys_version = ""

    @property
    def inbox(self) -> Inbox:
        return self.server.inbox

    def log_message(self, *args) -> None:  # the terminal shows the link, not each request
        pass

    # -- checks ------------------------------------------------------------------------

    def _cookie_name(self) -> str:
        return f"agentflow_inbox_{self.inbox.port}"

    def _token(self) -> str | None:
        for part in (self.headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self._cookie_name():
                return value
        return None

    def _refuse(self) -> bool:
        """Send 403 and return True when the request may not go on: a Host that is not
        the server's, or no valid token."""
        if self.inbox.hosts is not None and (
                self.headers.get("Host") or "").lower() not in self.inbox.hosts:
            self._send(403, "text/plain", b"this inbox answers only on its own address\n")
            return True
        query = parse_qs(urlsplit(self.path).query)
        given = (query.get("token") or [None])[0]
        if given is not None and hmac.compare_digest(given, self.inbox.token) \
                and self.command == "GET":
            # Keep the token in a cookie and take it out of the address bar.
            self.send_response(303)
            self.send_header("Location", "/")
            self.send_header("Set-Cookie", f"{self._cookie_name()}={self.inbox.token}; "
                                           "HttpOnly; SameSite=Strict; Path=/")
            self._security_headers()
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        cookie = self._token()
        if cookie is None or not hmac.compare_digest(cookie, self.inbox.token):
            self._send(403, "text/plain", b"this inbox needs its token: open the link "
                                          b"agentflow inbox printed\n")
            return True
        return False

    # -- routes ------------------------------------------------------------------------

    def do_GET(self):
        if self._refuse():
            return
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        after = (query.get("after") or [None])[0]
        if parts.path in ("/", "/entries"):
            try:
                entries, total, cursor = self.inbox.page(after)
            except (SessionError, OSError) as exc:
                return self._send(503, "text/plain", f"cannot read the store: {exc}\n".encode())
            content = render_entries(entries, self.inbox.csrf, after, total, cursor)
            if parts.path == "/":
                content = render_page(content, self.inbox.csrf, mask_url(self.inbox.store_url),
                                      self.inbox.version, self.inbox.approver)
            return self._send(200, "text/html; charset=utf-8", content.encode("utf-8"))
        if parts.path == "/events":
            return self._events()
        if parts.path == "/favicon.ico":
            return self._send(204, "image/x-icon", b"")
        name = parts.path.lstrip("/")
        if name in _TYPES:
            with open(os.path.join(_ASSETS, name), "rb") as handle:
                return self._send(200, _TYPES[name], handle.read())
        self._send(404, "text/plain", b"no such page\n")

    def do_POST(self):
        if self._refuse():
            return
        if self.headers.get("Origin") != f"http://{self.headers.get('Host')}":
            return self._reply(403, "refused: the request does not come from this inbox's "
                                    "page (Origin)")
        if urlsplit(self.path).path != "/answer":
            return self._reply(404, "no such page")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            return self._reply(413, f"the request body must be 0 to {MAX_BODY} bytes")
        try:
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode("utf-8"),
                                                keep_blank_values=True).items()}
        except UnicodeDecodeError:
            return self._reply(400, "the form is not UTF-8")
        if not hmac.compare_digest(form.get("csrf", ""), self.inbox.csrf):
            return self._reply(403, "refused: the form's CSRF token is missing or wrong; "
                                    "reload the page")
        self._reply(*self.inbox.answer(form))

    def _events(self) -> None:
        """Server-Sent Events: ``changed`` with the change counter, at once and at each
        change; a comment every 15 s keeps proxies from closing the stream."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self._security_headers()
        self.end_headers()
        seen = -1
        try:
            self.wfile.write(b"retry: 2000\n\n")
            while not self.inbox.stopping:
                version = self.inbox.wait_for_change(seen, 15.0)
                if version != seen:
                    self.wfile.write(f"event: changed\ndata: {version}\n\n".encode())
                    seen = version
                else:
                    self.wfile.write(b": keep-alive\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the page went away

    # -- replies -----------------------------------------------------------------------

    def _reply(self, status: int, message: str) -> None:
        """JSON for the page's script, plain text for a form posted without it."""
        if "application/json" in (self.headers.get("Accept") or ""):
            body = json.dumps({"ok": status == 200, "message": message}).encode()
            return self._send(status, "application/json", body)
        if status == 200:
            self.send_response(303)
            self.send_header("Location", "/")
            self._security_headers()
            self.send_header("Content-Length", "0")
            return self.end_headers()
        self._send(status, "text/plain; charset=utf-8", (message + "\n").encode())

    def _security_headers(self) -> None:
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self._security_headers()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def cursor(entry: PendingEntry) -> str:
    """A page cursor for the URL: the entry's place in the inbox order (SPEC R22).

    Args:
        entry: the last ``PendingEntry`` of a page.

    Returns:
        str: URL-safe base64 of ``[issued_at, session_id, call_id]``.
    """
    data = json.dumps([entry.issued_at, entry.session_id, entry.call_id]).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def uncursor(text: str) -> PendingEntry | None:
    """The ``after`` entry of ``pending`` for a cursor, or ``None`` when it does not
    parse (then the first page).

    Args:
        text: a ``cursor`` (str).

    Returns:
        PendingEntry | None: an entry holding only the place in the order.
    """
    try:
        issued_at, session_id, call_id = json.loads(
            base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if not (isinstance(issued_at, (int, float)) and isinstance(session_id, str)
                and isinstance(call_id, str)):
            return None
    except (ValueError, TypeError):
        return None
    return PendingEntry(session_id, PendingApproval(call_id, "", "", float(issued_at)), None,
                        0.0)


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _allowed_hosts(host: str, port: int) -> set | None:
    if host in ("", "0.0.0.0", "::"):
        return None  # every address of the machine: the token guards it
    hosts = {_netloc(host, port).lower()}
    if _loopback(host):
        hosts |= {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
    return hosts


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment
        return "someone"


def inbox_command(store_url: str, bind: str = "127.0.0.1:8765", notify: str | None = None,
                  out=None, secret=None) -> int:
    """``agentflow inbox``: serve the approval inbox until Ctrl-C (SPEC R22, R25).

    Args:
        store_url: the store (str, as for ``open_store``).
        bind: ``HOST:PORT`` to listen on (str); loopback by default.
        notify: a webhook URL (str) to post to when a call starts waiting, or ``None``.
        out: a text stream for the start message; default ``sys.stdout``.
        secret: the store's key (bytes), or ``None`` for an unsigned store
            (``store_key.store_secret``, SPEC R27).

    Returns:
        int: the exit status: 0 after Ctrl-C.

    Raises:
        ValueError: a bad ``bind`` or store URL.
        StoreError: the store refuses the inbox (a wrong password, not a database); a
            store that is down is waited for, saying so on ``out``.
    """
    out = out or sys.stdout
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--bind {bind!r}: write HOST:PORT, e.g. 127.0.0.1:8765")
    host = host.strip("[]")

    def say(text: str) -> None:
        out.write(f"agentflow inbox: {text}\n")
        out.flush()
    open_store_waiting(store_url, secret, say).close()  # a database not up yet is waited for
    inbox = Inbox(store_url, host, int(port), notify, secret=secret).start()
    if not _loopback(host):
        out.write(f"warning: listening on {host}, not loopback: anyone who can reach it "
                  "and has the link's token can approve calls; the traffic is not "
                  "encrypted\n")
    out.write(f"agentflow inbox for {mask_url(store_url)}\nopen {inbox.link}\n"
              "(the token in it is needed for every request; Ctrl-C stops)\n")
    out.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        inbox.stop()
