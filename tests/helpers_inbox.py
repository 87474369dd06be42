"""What the inbox tests share (test_inbox.py over HTTP, test_inbox_browser.py in
chromium): a store with paused chat sessions, a running inbox, and a standard-library
HTTP client that keeps the inbox's cookie."""

from __future__ import annotations

import contextlib
import http.client
import re
from urllib.parse import urlencode

import pytest

from agentflow.cli.inbox import Inbox
from agentflow.testing.replay import ReplayServer
from helpers_cli import calls_reply, run_agentflow, run_chat, store_key


@pytest.fixture
def server():
    """A running ``ReplayServer`` with an empty queue (``server.queue(...)``)."""
    replay = ReplayServer().start()
    yield replay
    replay.stop()


@pytest.fixture
def url(tmp_path):
    """A SQLite store's URL in a folder of its own in the test's folder (the chats'
    workspace): the sandbox keeps that folder read-only (SPEC R27)."""
    (tmp_path / "store").mkdir()
    return f"sqlite:///{tmp_path}/store/sessions.db"


def ran(folder) -> list:
    """The lines ``echo ran >> ran.txt`` left in ``folder``: how often it really ran."""
    path = folder / "ran.txt"
    return path.read_text().splitlines() if path.exists() else []


def pause_chat(server, url: str, session_id: str, calls, cwd, *flags) -> None:
    """``agentflow chat --store URL --session ID`` until its calls wait for approval.

    Args:
        server: the ``ReplayServer`` the chat talks to.
        url: the store URL.
        session_id: the session's id.
        calls: ``(call_id, tool, arguments dict)`` tuples the model makes.
        cwd: the chat's folder (its workspace).
        flags: more chat flags.
    """
    server.queue(calls_reply(*calls))
    done = run_chat("--base-url", server.base_url, "--store", url, "--session", session_id,
                    *flags, "do it", cwd=cwd)
    assert done.returncode == 3, (done.stdout, done.stderr)


@contextlib.contextmanager
def running_inbox(url: str, host: str = "127.0.0.1", signed: bool = True, **kwargs):
    """An ``Inbox`` on a free port (of loopback by default), stopped at the end; for a
    store the chats signed (``store_key``), unless not ``signed`` (an application's)."""
    inbox = Inbox(url, host, 0, poll=0.05, secret=store_key() if signed else None,
                  **kwargs).start()
    try:
        yield inbox
    finally:
        inbox.stop()


class Client:
    """Requests to one inbox, with its cookie once ``login`` ran."""

    def __init__(self, inbox: Inbox):
        self.inbox = inbox
        self.cookie: str | None = None

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None):
        """One request; returns ``(status, headers, body text)``."""
        connection = http.client.HTTPConnection("127.0.0.1", self.inbox.port, timeout=30)
        sent = {"Host": f"127.0.0.1:{self.inbox.port}"}
        if self.cookie:
            sent["Cookie"] = self.cookie
        sent.update(headers or {})
        try:
            connection.request(method, path, body, sent)
            reply = connection.getresponse()
            return reply.status, reply.headers, reply.read().decode("utf-8")
        finally:
            connection.close()

    def login(self) -> None:
        """Follow the printed link: keep the cookie it sets."""
        status, headers, _ = self.request("GET", f"/?token={self.inbox.token}")
        assert status == 303 and headers["Location"] == "/"
        self.cookie = headers["Set-Cookie"].split(";")[0]

    def page(self, path: str = "/") -> str:
        """The HTML of a page (status 200 asserted)."""
        status, _, body = self.request("GET", path)
        assert status == 200, body
        return body

    def form(self, session_id: str, call_id: str, html: str | None = None) -> dict:
        """The hidden fields of one call's answer form on the page."""
        html = html if html is not None else self.page()
        forms = re.findall(r'<form class="answer".*?</form>', html, re.S)
        for form in forms:
            fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"',
                                     form))
            if (fields.get("session"), fields.get("call_id")) == (session_id, call_id):
                import html as html_module
                return {k: html_module.unescape(v) for k, v in fields.items()}
        raise AssertionError(f"no answer form for {session_id}/{call_id}")

    def answer(self, fields: dict, origin: str | None = "same", accept_json: bool = True):
        """POST /answer; returns ``(status, message)``."""
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if origin == "same":
            headers["Origin"] = self.inbox.origin
        elif origin is not None:
            headers["Origin"] = origin
        if accept_json:
            headers["Accept"] = "application/json"
        status, _, body = self.request("POST", "/answer", urlencode(fields).encode(), headers)
        if accept_json and body.startswith("{"):
            import json
            return status, json.loads(body)["message"]
        return status, body


def worker_once(url: str, server, cwd, *flags) -> str:
    """``agentflow worker --store URL --once`` with the chat's defaults, as a user
    runs it (``run_agentflow``); its output."""
    done = run_agentflow("worker", "--store", url, "--once", "--base-url", server.base_url,
                         *flags, cwd=cwd)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout
