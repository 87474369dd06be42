"""``agentflow inbox --notify URL``: a JSON webhook when a call starts waiting.

The body is small and holds no secret (not the inbox's token, no API key, no store
password): a ``text`` field that chat tools' incoming webhooks accept (Slack,
Mattermost, Rocket.Chat; Discord reads ``content``, also sent), the ids of the call, and
a link to it in the inbox (without the token: whoever follows it needs the link
``agentflow inbox`` printed). Deliveries run on their own thread, a bounded queue in
front: a slow or failing webhook never blocks the inbox or a run. Each is tried
``ATTEMPTS`` times with a growing pause; a failure is logged on stderr, naming the
webhook's host only (its path is often its secret).
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from .inbox_page import entry_key, safe_text

ATTEMPTS = 4
BACKOFF = 1.0  # seconds before the second attempt; doubled after each failure
TIMEOUT = 10.0  # seconds a delivery may take
QUEUE = 1000  # notifications waiting at most; more are dropped (and logged)


def notification(entry, origin: str) -> dict:
    """The webhook's JSON body for a call that started waiting.

    Args:
        entry: the ``PendingEntry``.
        origin: the inbox's origin (str), e.g. ``http://127.0.0.1:8765``.

    Returns:
        dict: ``text``, ``content``, ``session_id``, ``call_id``, ``tool``, ``digest``,
        ``issued_at`` (POSIX seconds) and ``link``.
    """
    subject = entry.mcp_tool or ""
    if isinstance(entry.arguments, dict) and entry.subject in entry.arguments:
        subject = f"{subject} {entry.arguments[entry.subject]}".strip()
    subject = safe_text(str(subject))
    if len(subject) > 200:
        subject = subject[:199] + "…"
    link = f"{origin}/#call-{entry_key(entry)}"
    text = (f"agentflow: {safe_text(entry.tool)} waits for approval in session "
            f"{safe_text(entry.session_id)}" + (f": {subject}" if subject else "")
            + f" — {link}")
    return {"text": text, "content": text, "session_id": entry.session_id,
            "call_id": entry.call_id, "tool": entry.tool, "digest": entry.digest,
            "issued_at": entry.issued_at, "link": link}


class Notifier:
    """Posts notifications to a webhook from a background thread.

    Args:
        url: the webhook (str, http:// or https://).
        origin: the inbox's origin (str), for the links.
        log: a text stream for failures; default ``sys.stderr``.

    Raises:
        ValueError: ``url`` is not http:// or https://.
    """

    def __init__(self, url: str, origin: str, log=None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--notify: the webhook must be an http:// or https:// URL, "
                             f"got {parts.scheme or 'no scheme'}://…")
        self.url, self.origin, self.log = url, origin, log or sys.stderr
        self.where = parts.hostname
        self.queue: queue.Queue = queue.Queue(QUEUE)
        self.thread = threading.Thread(target=self._deliver, daemon=True)
        self.delivered = 0
        self.failed = 0

    def start(self) -> None:
        """Start the delivery thread."""
        self.thread.start()

    def stop(self) -> None:
        """Stop after the notification being delivered (the rest are dropped)."""
        self.queue.put(None)
        self.thread.join(timeout=TIMEOUT + 1)

    def send(self, entry) -> None:
        """Queue a notification for ``entry``; never blocks.

        Args:
            entry: the ``PendingEntry`` that started waiting.
        """
        try:
            self.queue.put_nowait(notification(entry, self.origin))
        except queue.Full:
            self._say(f"more than {QUEUE} notifications wait; dropped the one for "
                      f"{entry.call_id}")

    def _deliver(self) -> None:
        while True:
            body = self.queue.get()
            if body is None:
                return
            self._post(json.dumps(body).encode("utf-8"), body["call_id"])

    def _post(self, data: bytes, call_id: str) -> None:
        pause = BACKOFF
        for attempt in range(1, ATTEMPTS + 1):
            request = urllib.request.Request(self.url, data, method="POST", headers={
                "Content-Type": "application/json", "User-Agent": "agentflow-inbox"})
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT) as reply:
                    reply.read(65536)
                self.delivered += 1
                return
            except urllib.error.HTTPError as exc:
                problem = f"HTTP {exc.code}"
                if 400 <= exc.code < 500 and exc.code not in (408, 429):
                    attempt = ATTEMPTS  # the webhook refuses it; trying again won't help
            except (urllib.error.URLError, OSError) as exc:
                problem = str(getattr(exc, "reason", exc))
            if attempt >= ATTEMPTS:
                self.failed += 1
                self._say(f"could not notify {self.where} of call {call_id} ({problem}); "
                          f"gave up after {attempt} attempt{'s' if attempt > 1 else ''}")
                return
            self._say(f"could not notify {self.where} of call {call_id} ({problem}); "
                      f"trying again in {pause:g} s")
            time.sleep(pause)
            pause *= 2

    def _say(self, text: str) -> None:
        print(f"agentflow inbox: {text}", file=self.log, flush=True)
