"""``agentflow inbox --store URL``: answer paused calls from a browser (SPEC R22, R24, R25).

A page lists every call waiting across the store, oldest first, a page at a time (or
filtered by tool, session or text, grouped by session), and updates live; each call can
be approved, rejected with a reason the model will see, edited (checked against the
tool's schema kept with the pending record, R20) or approved with a grant (R19), and
many can be rejected with one reason. An answer is recorded in the session
(``SessionStore.answer``) bound to the request shown; a worker (``agentflow worker``,
or an application's own loop over ``store.answered()``) resumes the session.

Security, since the page can make tools run:

* it listens on loopback unless ``--bind`` says otherwise, and answers only requests
  whose ``Host`` is the address it listens on (no DNS rebinding; a wildcard address
  such as ``0.0.0.0`` takes any);
* every request for data or an answer needs a page token in an ``Authorization``
  header, got once for a one-time link (``inbox_access``); no cookie, which other
  servers on the same address would receive. The name an answer records is the
  link's;
* a POST also needs an ``Origin`` header naming the address it was sent to;
* a strict Content-Security-Policy: scripts and styles only from the server's own
  files (no inline script), no frames, no other origin;
* every text from a model, tool, MCP server or session is escaped (``inbox_page``),
  the server's messages too; no API key or store password is ever sent;
* bounded: request bodies, reasons, rules, grants' lifetimes, a slow client's hold on
  a thread (``request_timeout``) and the number of requests served at once.

The routes and their checks are ``inbox_http``'s; ``--notify URL`` posts a JSON webhook
when a call starts waiting (``inbox_notify``).
"""

from __future__ import annotations

import base64
import getpass
import ipaddress
import json
import math
import selectors
import socket
import sys
import threading
import time

from ..approvals import PendingApproval
from ..display import safe_text
from ..errors import (ApprovalError, SessionConflictError, SessionError, SessionIntegrityError,
                      StoreError)
from ..redact import mask_url
from ..stores import PendingEntry, open_store, open_store_waiting
from ..stores.base import page
from ..types import ToolApprovalResponse
from .inbox_access import Access
from .inbox_notify import Notifier
from .inbox_http import CSP, make_server  # noqa: F401 (CSP: the page's policy)
from .inbox_page import PAGE_SIZE, Filters, unref

MAX_REASON = 2000  # characters of a rejection reason (the page's field holds as many)
MAX_RULES = 4000  # characters of an "always allow" answer's rules
MAX_TTL = 366 * 86400.0  # seconds a grant may last at most; none: the whole session
MAX_BULK = 1000  # calls one "reject selected" may answer

class Inbox:
    """The inbox server: one thread per request, one store connection per thread, and
    a watcher thread that notices changes (for the live page and ``--notify``).

    Args:
        store_url: the store (str, as for ``open_store``).
        host: the address to listen on (str), ``127.0.0.1`` by default; an IPv6
            address (``::1``) works too.
        port: the port (int); 0 takes a free one.
        notify: a webhook URL (str) posted to when a call starts waiting, or ``None``.
        poll: seconds (float) between the watcher's looks at the store, at least;
            it waits longer when a look takes long (a large store).
        secret: the store's signing secret, as for ``open_store``.
        approvers: the names (list of str) to make a link for, one each; default: the
            user's, ``NAME (inbox)``.
        on_login: called with ``(approver, new_link)`` when a link is opened (its code
            is then spent), so that another browser can be given the new one.
        request_timeout: seconds (float) a client may leave the server waiting for
            the rest of its request.

    Attributes:
        links: one link (str) per approver, as printed at start.
        streams: how many event streams are open (int): one per browser, whatever
            its number of tabs.
        streamed: how many were ever opened (int).
    """

    def __init__(self, store_url: str, host: str = "127.0.0.1", port: int = 8765,
                 notify: str | None = None, poll: float = 0.5,
                 secret: str | bytes | None = None, approvers=None, on_login=None,
                 request_timeout: float = 5.0):
        self.store_url, self.secret, self.poll = store_url, secret, poll
        open_store(store_url, secret).close()  # a bad URL fails here, not per request
        self.access = Access()
        self.approvers = list(approvers or [f"{_user()} (inbox)"])
        self.on_login, self.request_timeout = on_login, request_timeout
        self._changed = threading.Condition()
        self.version = 0
        self.total: int | None = None  # calls waiting at the watcher's last look
        self._cursor = None  # the watcher's store.changes cursor
        self._by_session: dict = {}  # session id -> its entries, at the watcher's last look
        self._stopped: set = set()  # the cut-short sessions at that look
        self.tools: list[str] = []  # the tools of the calls waiting then, for the filter
        self.stopping = False
        self.streams = self.streamed = 0
        self.httpd = make_server((host, port), self)
        self.host, self.port = self.httpd.server_address[:2]
        self.hosts = _allowed_hosts(host, self.port)  # None: any (a wildcard address)
        shown = socket.gethostname() if self.hosts is None else host
        self.origin = f"http://{_netloc(shown, self.port)}"
        self.notifier = Notifier(notify, self.origin) if notify else None
        self._threads: list[threading.Thread] = []
        self.links = [self.invite(name) for name in self.approvers]

    @property
    def link(self) -> str:
        """The first approver's link (str), as printed at start."""
        return self.links[0]

    def invite(self, approver: str | None = None) -> str:
        """A new one-time link (SPEC R24: the answers it makes name ``approver``).

        Args:
            approver: the name (str); default: the first approver's.

        Returns:
            str: ``http://HOST:PORT/#login=CODE``.

        Raises:
            ValueError: an empty or too long name.
        """
        return f"{self.origin}/#login={self.access.invite(approver or self.approvers[0])}"

    def login(self, code: str) -> tuple[str, str] | None:
        """Exchange a link's code for a page token (``Access.redeem``); a new link for
        the same approver goes to ``on_login``.

        Args:
            code: the code (str).

        Returns:
            tuple | None: ``(token, approver)``, or ``None`` for a spent or unknown code.
        """
        found = self.access.redeem(code)
        if found is not None and self.on_login is not None:
            self.on_login(found[1], self.invite(found[1]))
        return found

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

    def page(self, after: str | None, filters: Filters | None = None
             ) -> tuple[list, int, str | None]:
        """One page of waiting calls after ``after`` (a ``cursor``): read with
        ``pending(limit=, after=)``, or, when ``filters`` choose, from every waiting
        call filtered (and grouped by session).

        Args:
            after: the cursor (str) the page starts after, or ``None`` for the first;
                a cursor that does not parse gives the first page.
            filters: the ``Filters`` of the page's address, or ``None``.

        Returns:
            tuple: ``(entries, total, next_cursor)``; ``total`` is what the watcher
            counted at its last look, or how many calls the filters keep.
        """
        last = uncursor(after) if after else None
        if filters is not None and filters.active:
            entries = filters.apply(self.entries())
            total = len(entries)
            if last is not None:
                place = next((i for i, e in enumerate(entries)
                              if (e.session_id, e.call_id) == (last.session_id, last.call_id)),
                             None)
                entries = entries[place + 1:] if place is not None else entries
            entries = entries[:PAGE_SIZE + 1]
        else:
            with self.store() as store:
                entries = store.pending(limit=PAGE_SIZE + 1, after=last)
                if self.total is None:
                    self.total = len(store.pending())
            total = max(self.total, len(entries[:PAGE_SIZE]))
        more = len(entries) > PAGE_SIZE
        entries = entries[:PAGE_SIZE]
        return entries, total, cursor(entries[-1]) if more else None

    def start(self) -> "Inbox":
        """Serve in background threads (the server and the watcher).

        Returns:
            Inbox: itself.
        """
        self._wake, self._waker = socket.socketpair()
        for target in (self._serve, self._watch):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.notifier is not None:
            self.notifier.start()
        return self

    def _serve(self) -> None:
        # Not serve_forever(): it notices shutdown() only at its next poll, so each stop
        # waited up to a poll interval; a byte on the wake-up socket ends this at once
        # (as agentflow.testing.replay's server does).
        with selectors.DefaultSelector() as selector:
            selector.register(self.httpd, selectors.EVENT_READ)
            selector.register(self._wake, selectors.EVENT_READ)
            while True:
                if any(key.fileobj is self._wake for key, _ in selector.select()):
                    return
                self.httpd.handle_request()

    def stop(self) -> None:
        """Stop serving and close every store connection."""
        self.stopping = True
        with self._changed:
            self._changed.notify_all()
        if self._threads:
            self._waker.send(b"\0")
            self._threads[0].join()
            self._wake.close()
            self._waker.close()
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

    def _look(self, store) -> list:
        """Every waiting call, reading only the sessions whose entries changed since
        the last look (``store.changes``; a cut-short run whose worker died changes
        nothing stored, so those few are compared at each look), or all of them when
        the store cannot tell (SPEC R22 addendum, fourth batch)."""
        cursor, changed = store.changes(self._cursor)
        if changed is None or self._cursor is None:
            self._by_session = {}
            for entry in store.pending():
                self._by_session.setdefault(entry.session_id, []).append(entry)
            stopped = {i for i, entries in self._by_session.items()
                       if any(e.needs_run for e in entries)}
        else:
            stopped = set(store.cut_short())
            changed = set(changed) | (stopped ^ self._stopped)
            for session_id in changed:
                self._by_session.pop(session_id, None)
            for entry in store.pending_of(changed):
                self._by_session.setdefault(entry.session_id, []).append(entry)
        self._cursor, self._stopped = cursor, stopped
        return page([e for entries in self._by_session.values() for e in entries], None, None)

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
                entries = self._look(store)
            except (SessionError, OSError, ValueError, ImportError) as exc:
                print(f"agentflow inbox: cannot read the store: {exc}", file=sys.stderr)
                entries = None
            if entries is not None:
                self.total = len(entries)
                self.tools = sorted({e.tool for e in entries if e.tool})
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

    def answer(self, form: dict, approver: str) -> tuple[int, str]:
        """Record one answer from the page (SPEC R19, R20, R24).

        Args:
            form: the form's fields (dict of str): ``ref`` (the call, ``inbox_page.ref``),
                ``digest``, ``request_id``, ``action`` (``approve``, ``reject``,
                ``edit``, ``always``), ``reason`` (at most ``MAX_REASON`` characters),
                ``arguments`` (JSON), ``rules`` (one a line) and ``ttl`` (seconds, more
                than 0 and at most ``MAX_TTL``; empty: the whole session).
            approver: who answers (str): the name of the page token's link, never a
                field of the form.

        Returns:
            tuple: ``(HTTP status, message)``.
        """
        action = form.get("action", "")
        common = {"digest": form.get("digest") or None, "approver": approver}
        if form.get("request_id") and "request_id" in ToolApprovalResponse.__dataclass_fields__:
            common["request_id"] = form["request_id"]  # SPEC R24
        call = unref(form.get("ref", ""))
        if call is None:
            return 400, "the form names no call (its 'ref' field); reload the page"
        session_id, call_id = call
        reason = form.get("reason") or ""
        if len(reason) > MAX_REASON:
            return 400, (f"the reason is {len(reason)} characters; at most {MAX_REASON}. "
                         "Nothing was recorded")
        if action == "approve":
            response = ToolApprovalResponse(call_id, True, **common)
        elif action == "reject":
            response = ToolApprovalResponse(call_id, False, reason.strip() or None, **common)
        elif action == "edit":
            try:
                arguments = json.loads(form.get("arguments", ""))
            except ValueError as exc:
                return 400, f"the edited arguments are not JSON ({exc}); nothing was recorded"
            if not isinstance(arguments, dict):
                return 400, "the edited arguments must be a JSON object; nothing was recorded"
            response = ToolApprovalResponse(call_id, True, arguments=arguments, **common)
        elif action == "always":
            rules = form.get("rules", "")
            if len(rules) > MAX_RULES:
                return 400, f"the rules are {len(rules)} characters; at most {MAX_RULES}"
            rules = [r.strip() for r in rules.splitlines() if r.strip()]
            if not rules:
                return 400, "write the rule to allow (e.g. run_command(git status))"
            ttl = _ttl(form.get("ttl") or "")
            if isinstance(ttl, str):
                return 400, ttl
            from ..types import Grant
            response = ToolApprovalResponse(call_id, True, grant=[Grant(r, ttl) for r in rules],
                                            **common)
        else:
            return 400, f"unknown action {action!r}: approve, reject, edit or always"
        status, message = self._record(session_id, [response])
        if status != 200:
            return status, message
        verdict = {"approve": "approved", "reject": "rejected", "edit": "approved (edited)",
                   "always": "approved, with a grant"}[action]
        return 200, f"{verdict} by {approver}; a worker resumes the session"

    def reject_many(self, form: dict, approver: str) -> tuple[int, str]:
        """Reject many calls with one reason (the page's "reject selected"); each is
        recorded on its own, so one that was answered meanwhile refuses only itself.
        Approving stays one call at a time.

        Args:
            form: the fields (dict of lists of str): ``ref``, ``digest`` and
                ``request_id``, one of each per call in the same order, ``reason``, and
                no ``action`` but ``reject``.
            approver: who answers (str), as for ``answer``.

        Returns:
            tuple: ``(HTTP status, message)``: 200 when every call was rejected.
        """
        if (form.get("action") or ["reject"]) != ["reject"]:
            return 400, "only rejecting goes many at a time: approve each call on its own"
        refs, digests = form.get("ref", []), form.get("digest", [])
        requests = form.get("request_id", [""] * len(refs))
        if not refs or not len(refs) == len(digests) == len(requests):
            return 400, "select the calls to reject (a ref and a digest for each)"
        if len(refs) > MAX_BULK:
            return 400, f"{len(refs)} calls at once; at most {MAX_BULK}"
        reason = (form.get("reason") or [""])[0]
        if len(reason) > MAX_REASON:
            return 400, f"the reason is {len(reason)} characters; at most {MAX_REASON}"
        done, refused = 0, []
        for ref, digest, request_id in zip(refs, digests, requests):
            status, message = self.answer({"ref": ref, "digest": digest, "action": "reject",
                                           "request_id": request_id, "reason": reason},
                                          approver)
            if status == 200:
                done += 1
            else:
                refused.append(message)
        text = f"rejected {done} of {len(refs)} by {approver}"
        if refused:
            text += f"; refused: {'; '.join(refused[:5])}" + (
                f" (and {len(refused) - 5} more)" if len(refused) > 5 else "")
        return (200 if not refused else 409), text

    def _record(self, session_id: str, responses: list) -> tuple[int, str]:
        try:
            with self.store() as store:
                store.answer(session_id, responses)
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
        return 200, "recorded"


def _ttl(text: str) -> float | None | str:
    """A grant's lifetime from the form: seconds, ``None`` for the whole session, or
    what is wrong with it (str)."""
    if not text.strip():
        return None
    try:
        ttl = float(text) if text.isascii() else math.nan  # float() reads "١٢" too
    except ValueError:
        ttl = math.nan
    if not (math.isfinite(ttl) and 0 < ttl <= MAX_TTL):
        return (f"ttl {text!r} is not a number of seconds above 0 and at most "
                f"{MAX_TTL:.0f} (leave it empty for the whole session)")
    return ttl

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
                  out=None, secret=None, approvers=None) -> int:
    """``agentflow inbox``: serve the approval inbox until Ctrl-C (SPEC R22, R25).

    Args:
        store_url: the store (str, as for ``open_store``).
        bind: ``HOST:PORT`` to listen on (str); loopback by default; an IPv6 address
            in brackets (``[::1]:8765``).
        notify: a webhook URL (str) to post to when a call starts waiting, or ``None``.
        out: a text stream for the start message; default ``sys.stdout``.
        secret: the store's key (bytes), or ``None`` for an unsigned store
            (``store_key.store_secret``, SPEC R27).
        approvers: the names (list of str, ``--approver``) to print a link for, one
            each; default: the user's.

    Returns:
        int: the exit status: 0 after Ctrl-C.

    Raises:
        ValueError: a bad ``bind``, store URL or approver name.
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
    lock = threading.Lock()

    def opened(approver: str, link: str) -> None:
        with lock:
            out.write(f"{safe_text(approver)}'s link was opened; for another browser: "
                      f"open {link}\n")
            out.flush()
    inbox = Inbox(store_url, host, int(port), notify, secret=secret, approvers=approvers,
                  on_login=opened).start()
    if not _loopback(host):
        out.write(f"warning: listening on {host}, not loopback: anyone who can reach it "
                  "and has a link can approve calls; the traffic is not encrypted\n")
    out.write(f"agentflow inbox for {mask_url(store_url)}\n")
    for approver, link in zip(inbox.approvers, inbox.links):
        out.write(f"{safe_text(approver)}: open {link}\n")
    out.write("(each link opens the inbox in one browser, once; answers record its "
              "name; Ctrl-C stops)\n")
    out.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        inbox.stop()
