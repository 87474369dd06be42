"""What the inbox tests share (test_inbox.py over HTTP, test_inbox_browser.py in
chromium): a store with paused chat sessions, a running inbox, and a standard-library
HTTP client that holds a page token, as the page's script does."""

from __future__ import annotations

import contextlib
import html as html_module
import http.client
import json
import re
from urllib.parse import urlencode

import pytest

from agentflow import ApprovalRequiredTool, tool
from agentflow.cli.inbox import Inbox
from agentflow.cli.inbox_page import unref
from agentflow.testing.replay import ReplayServer, chat_stream
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
    """Requests to one inbox, as its page's script makes them: ``login`` opens a link
    (its one-time code exchanged for the page token), then every request carries the
    token in its ``Authorization`` header."""

    def __init__(self, inbox: Inbox):
        self.inbox = inbox
        self.token: str | None = None

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None):
        """One request; returns ``(status, headers, body text)``."""
        connection = http.client.HTTPConnection(self.inbox.host, self.inbox.port, timeout=30)
        sent = {"Host": self.inbox.origin.split("//", 1)[1]}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        sent.update(headers or {})
        try:
            connection.request(method, path, body, sent)
            reply = connection.getresponse()
            return reply.status, reply.headers, reply.read().decode("utf-8")
        finally:
            connection.close()

    def login(self, approver: str | None = None, link: str | None = None) -> dict:
        """Open a link (default: a new one for ``approver``): keep the page token.

        Returns:
            dict: the login reply.
        """
        link = link or self.inbox.invite(approver)
        code = link.split("#login=", 1)[1]
        status, _, body = self.request("POST", "/login", headers={
            "X-Agentflow-Link": code, "Origin": self.inbox.origin})
        reply = json.loads(body)
        assert status == 200, reply
        self.token = reply["token"]
        return reply

    def page(self, path: str = "/entries") -> str:
        """The HTML of the list (status 200 asserted)."""
        status, _, body = self.request("GET", path)
        assert status == 200, body
        return body

    def form(self, session_id: str, call_id: str, html: str | None = None) -> dict:
        """The hidden fields of one call's answer forms on the page."""
        html = html if html is not None else self.page()
        for form in re.findall(r'<form class="answer".*?</form>', html, re.S):
            fields = {k: html_module.unescape(v) for k, v in re.findall(
                r'<input type="hidden" name="(\w+)" value="([^"]*)"', form)}
            if unref(fields.get("ref", "")) == (session_id, call_id):
                return fields
        raise AssertionError(f"no answer form for {session_id}/{call_id}")

    def answer(self, fields, origin: str | None = "same", path: str = "/answer"):
        """POST /answer (or ``path``) with the fields (a dict, or pairs); returns
        ``(status, message)``."""
        headers = {"Content-Type": "application/x-www-form-urlencoded",
                   "Accept": "application/json"}
        if origin == "same":
            headers["Origin"] = self.inbox.origin
        elif origin is not None:
            headers["Origin"] = origin
        status, _, body = self.request("POST", path, urlencode(fields).encode(), headers)
        return status, json.loads(body)["message"]


def paused_library_session(make_agent, store, session_id="s", call_id="c1"):
    """A library agent (not the chat) paused on a call of ``transfer(amount: int)``."""
    runs = []

    @tool
    def transfer(amount: int) -> str:
        """Send money.

        Args:
            amount: in euros.
        """
        runs.append(amount)
        return f"sent {amount}"

    agent, server = make_agent([chat_stream(tool_calls=[(call_id, "transfer",
                                                         '{"amount": 120}')]),
                                chat_stream(text="Done.")],
                               tools=[ApprovalRequiredTool(transfer)])
    with store.open(session_id) as session:
        list(agent.run("pay", session))
    return agent, server, runs


def worker_once(url: str, server, cwd, *flags) -> str:
    """``agentflow worker --store URL --once`` with the chat's defaults, as a user
    runs it (``run_agentflow``); its output."""
    done = run_agentflow("worker", "--store", url, "--once", "--base-url", server.base_url,
                         *flags, cwd=cwd)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout
