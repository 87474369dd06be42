"""The approval inbox's HTTP side (``agentflow inbox``): routes, checks and replies.

``GET /`` is the page itself, the same for everyone and holding no data; the script
and the stylesheet come from ``inbox_assets``. Everything else needs a page token in an
``Authorization`` header (``inbox_access``), a ``Host`` that is the inbox's own, and, for
a POST, an ``Origin`` naming it: ``POST /login`` (a link's code for a token),
``GET /entries`` (the list, as HTML ``inbox_page`` wrote), ``GET /events`` (Server-Sent
Events, read by one tab of each browser), ``GET /version`` (for a page without
locks), ``POST /answer`` and ``POST /answer-many`` (reject selected). Every reply but
the page and its files is JSON ``{"ok", "message", ...}``, its message made visible
(SPEC R25).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from ..display import safe_text
from ..errors import SessionError
from ..redact import mask_url
from .inbox_page import Filters, render_entries, render_shell

_ASSETS = os.path.join(os.path.dirname(__file__), "inbox_assets")
_TYPES = {"inbox.js": "text/javascript; charset=utf-8", "inbox.css": "text/css; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
MAX_BODY = 1 << 20  # bytes of a POST; an edit of arguments fits many times over
MAX_AT_ONCE = 64  # requests served at once; more are closed at once, not queued
ENDED = ("this page's access ended: the inbox restarted, or its link was never opened "
         "in this browser; open the link agentflow inbox printed (a new one after a "
         "restart)")


class _Server(ThreadingHTTPServer):
    """A thread per request, at most ``MAX_AT_ONCE`` at once, on IPv4 or IPv6."""

    daemon_threads = True
    request_queue_size = 1024  # the listen backlog: a burst is not made to retry

    def __init__(self, address, handler):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._slots = threading.BoundedSemaphore(MAX_AT_ONCE)
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # a flood: dropped, not queued behind
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()




def make_server(address: tuple, inbox) -> ThreadingHTTPServer:
    """The inbox's HTTP server, not yet serving.

    Args:
        address: ``(host, port)``; an IPv6 host (``::1``) listens on IPv6.
        inbox: the ``Inbox`` it serves.

    Returns:
        ThreadingHTTPServer: a thread per request, at most ``MAX_AT_ONCE`` at once.

    Raises:
        OSError: the address cannot be listened on.
    """
    server = _Server(address, _Handler)
    server.inbox = inbox
    return server


class _Handler(BaseHTTPRequestHandler):
    server_version = "agentflow-inbox"
    sys_version = ""

    @property
    def inbox(self):
        return self.server.inbox

    def setup(self) -> None:
        self.timeout = self.inbox.request_timeout  # a half-sent request frees its thread
        super().setup()

    def log_message(self, *args) -> None:  # the terminal shows the link, not each request
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the client went away or stalled

    # -- checks ------------------------------------------------------------------------

    def _own_host(self) -> bool:
        """Send 403 unless the ``Host`` is the server's (no DNS rebinding)."""
        if self.inbox.hosts is not None and (
                self.headers.get("Host") or "").lower() not in self.inbox.hosts:
            self._reply(403, "this inbox answers only on its own address")
            return False
        return True

    def _approver(self) -> str | None:
        """The approver of the request's page token; sends 401 and returns ``None``
        when there is none (ENDED)."""
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        approver = self.inbox.access.approver(token.strip()) if scheme == "Bearer" else None
        if approver is None:
            self._reply(401, ENDED, ended=True)
        return approver

    def _same_origin(self) -> bool:
        if self.headers.get("Origin") != f"http://{self.headers.get('Host')}":
            self._reply(403, "refused: the request does not come from this inbox's page "
                             "(Origin)")
            return False
        return True

    # -- routes ------------------------------------------------------------------------

    def do_GET(self):
        if not self._own_host():
            return
        parts = urlsplit(self.path)
        name = parts.path.lstrip("/")
        if parts.path == "/":  # the page holds no data: its script asks with the token
            return self._send(200, "text/html; charset=utf-8", render_shell().encode())
        if name in _TYPES:
            with open(os.path.join(_ASSETS, name), "rb") as handle:
                return self._send(200, _TYPES[name], handle.read())
        if parts.path == "/favicon.ico":
            return self._send(204, "image/x-icon", b"")
        if parts.path not in ("/entries", "/events", "/version"):
            return self._reply(404, "no such page")
        approver = self._approver()
        if approver is None:
            return
        if parts.path == "/events":
            return self._events()
        if parts.path == "/version":
            return self._reply(200, "live", version=self.inbox.version)
        query = parse_qs(parts.query)
        after = (query.get("after") or [None])[0]
        filters = Filters.of(query)
        try:
            entries, total, cursor = self.inbox.page(after, filters)
        except (SessionError, OSError) as exc:
            return self._reply(503, f"cannot read the store: {exc}")
        content = render_entries(entries, after, total, cursor, filters, self.inbox.tools,
                                 approver, mask_url(self.inbox.store_url), self.inbox.version)
        self._send(200, "text/html; charset=utf-8", content.encode("utf-8", "surrogatepass"))

    def do_POST(self):
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            raise
        except Exception as exc:  # never a dropped request: the page shows why
            self._reply(500, f"the inbox failed on this request ({type(exc).__name__}: "
                             f"{exc}); nothing was recorded unless the list says so")

    def _post(self) -> None:
        if not (self._own_host() and self._same_origin()):
            return
        path = urlsplit(self.path).path
        if path == "/login":
            found = self.inbox.login(self.headers.get("X-Agentflow-Link") or "")
            if found is None:
                return self._reply(403, "this link was opened before (each link opens one "
                                        "browser) or is not this inbox's: use the newest "
                                        "link agentflow inbox printed", ended=True)
            token, approver = found
            return self._reply(200, f"answering as {approver}", token=token,
                               approver=approver)
        if path not in ("/answer", "/answer-many"):
            return self._reply(404, "no such page")
        approver = self._approver()
        if approver is None:
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            return self._reply(413, f"the request body must be 0 to {MAX_BODY} bytes")
        try:
            form = parse_qs(self.rfile.read(length).decode("utf-8"), keep_blank_values=True)
        except UnicodeDecodeError:
            return self._reply(400, "the form is not UTF-8")
        if path == "/answer-many":
            return self._reply(*self.inbox.reject_many(form, approver))
        self._reply(*self.inbox.answer({k: v[0] for k, v in form.items()}, approver))

    def _events(self) -> None:
        """Server-Sent Events: ``changed`` with the change counter, at once and at each
        change; a comment every 15 s keeps proxies from closing the stream."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self._security_headers()
        self.end_headers()
        seen = -1
        with self.inbox._changed:
            self.inbox.streams += 1
            self.inbox.streamed += 1
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
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # the page went away
        finally:
            with self.inbox._changed:
                self.inbox.streams -= 1

    # -- replies -----------------------------------------------------------------------

    def _reply(self, status: int, message: str, **fields) -> None:
        """JSON for the page's script; the message made visible (SPEC R25: it may
        quote an id holding control or bidirectional characters)."""
        body = json.dumps({"ok": status == 200, "message": safe_text(message), **fields})
        self._send(status, "application/json", body.encode())

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
