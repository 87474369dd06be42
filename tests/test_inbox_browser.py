"""The approval inbox in a real browser (issue 31; SPEC R20, R22, R24, R25): Debian's
headless chromium driven by Playwright for Python (pinned in the Makefile's test-slow
install; no browser download: it is pointed at /usr/bin/chromium), against a real
``agentflow inbox`` and a real ``agentflow worker`` process. make test-slow only.

Screenshots go to the test's output folder; ``AGENTFLOW_SCREENSHOT=docs/inbox.png``
also writes the README's."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from agentflow.stores import open_store
from agentflow.testing.replay import chat_stream
from helpers_cli import AGENTFLOW, child_env
from helpers_inbox import (pause_chat, ran, running_inbox, server,  # noqa: F401
                           url, worker_once)

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--disable-component-update", "--disable-sync"]
ECHO = {"command": "echo ran >> ran.txt"}
DEADLINE = 60  # seconds; only against hangs


def _missing(why: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI must have it: .ci/run installs chromium, the Makefile "
                    "installs playwright)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    """One chromium for the module, on a fresh profile (Playwright gives each launch a
    new temporary --user-data-dir); each test opens its own contexts (no shared
    cookies)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (make test-slow installs it)")
    if not os.path.exists(CHROMIUM):
        _missing(f"no {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=FLAGS)
        yield found
        found.close()


@pytest.fixture
def worker(url, server, tmp_path):
    """A running ``agentflow worker`` process with the chat's defaults."""
    process = subprocess.Popen(
        [AGENTFLOW, "worker", "--store", url, "--base-url", server.base_url, "--poll", "0.1"],
        cwd=tmp_path, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    yield process
    process.terminate()
    process.wait(timeout=DEADLINE)


def eventually(check, what: str):
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def open_inbox(browser, inbox, context=None, link=None, **options):
    """A page of a new context (or ``context``) that opened a new link (or ``link``),
    once its list is drawn."""
    page = (context or browser.new_context(**options)).new_page()
    page.goto(link or inbox.invite())
    page.wait_for_selector("#calls")
    assert page.url == inbox.origin + "/"  # the code left the address bar
    return page


def screenshot(page, tmp_path, name: str) -> None:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    wanted = os.environ.get("AGENTFLOW_SCREENSHOT")
    if wanted:
        shutil.copy(path, wanted)


def test_a_click_approves_and_the_worker_runs_the_call_once(browser, server, url, tmp_path,
                                                            worker):
    pause_chat(server, url, "ticket-42", [("call_1", "run_command", ECHO)], tmp_path)
    pause_chat(server, url, "ticket-43", [("call_1", "write_file", {
        "path": "notes.txt", "content": "line one\nline two\n"})], tmp_path)
    server.queue(chat_stream(text="It ran."))
    with running_inbox(url) as inbox:
        page = open_inbox(browser, inbox)
        calls = page.locator("article.call")
        assert calls.count() == 2
        first = calls.nth(0)
        assert first.locator(".tool").inner_text() == "run_command"
        assert "$ echo ran >> ran.txt" in first.locator("pre.preview").inner_text()
        assert "+line one" in calls.nth(1).locator("pre.preview").inner_text()  # the diff
        screenshot(page, tmp_path, "inbox.png")
        first.get_by_role("button", name="Approve", exact=True).click()
        assert "approved by" in first.locator(".result.ok").inner_text()
        eventually(lambda: ran(tmp_path) == ["ran"], "the worker to run the command")
        # the page updates live, once the pointer leaves the list: the resumed call goes
        eventually(lambda: page.locator("#notice").is_visible(), "the notice of a change")
        page.mouse.move(5, 5)
        eventually(lambda: page.locator("article.call").count() == 1, "the live update")
        time.sleep(0.5)
        assert ran(tmp_path) == ["ran"]  # once


def test_a_rejection_reason_reaches_the_model(browser, server, url, tmp_path, worker):
    pause_chat(server, url, "t-1", [("call_1", "run_command", ECHO)], tmp_path)
    server.queue(chat_stream(text="OK, I won't."))
    with running_inbox(url) as inbox:
        page = open_inbox(browser, inbox)
        call = page.locator("article.call").first
        call.get_by_placeholder("reason the model will see").fill("not on a Friday")
        call.get_by_role("button", name="Reject").click()
        eventually(lambda: len(server.requests) == 2, "the worker's model call")
    assert server.requests[-1].json["messages"][-1]["content"] == "Rejected: not on a Friday"
    assert ran(tmp_path) == []


def test_an_edit_that_fails_the_schema_is_refused_on_the_page(browser, server, url,
                                                              tmp_path):
    pause_chat(server, url, "t-1", [("call_1", "run_command", ECHO)], tmp_path)
    with running_inbox(url) as inbox:
        page = open_inbox(browser, inbox)
        call = page.locator("article.call").first
        call.locator("details.edit summary").click()
        call.locator("textarea[name=arguments]").fill('{"command": 5}')
        call.get_by_role("button", name="Approve edited").click()
        error = call.locator(".result.error")
        assert "do not fit run_command's schema" in error.inner_text()
        screenshot(page, tmp_path, "inbox-edit-refused.png")
    with open_store(url) as store:
        assert store.pending()[0].answer is None


def test_two_pages_answering_at_once_run_the_call_once(browser, server, url, tmp_path):
    pause_chat(server, url, "t-1", [("call_1", "run_command", ECHO)], tmp_path)
    server.queue(chat_stream(text="Done."))
    with running_inbox(url) as inbox:
        pages = [open_inbox(browser, inbox) for _ in range(2)]
        # both people click at the same moment (each page's own timer, one wall-clock
        # instant), before either page has heard of the other's answer
        at = time.time() * 1000 + 700
        for p in pages:
            p.evaluate("at => { const b = document.querySelector('article.call "
                       "button.approve'); setTimeout(() => b.click(), at - Date.now()); }", at)
        results = [eventually(lambda p=p: p.locator(".result.ok, .result.error").count()
                              and p.locator(".result").first.inner_text(), "an answer")
                   for p in pages]
        assert sum("already answered by" in r for r in results) == 1, results
        assert sum(r.startswith("approved by") for r in results) == 1, results
    # two workers, one after the other: the call runs once
    assert "resuming t-1" in worker_once(url, server, tmp_path)
    assert "resuming" not in worker_once(url, server, tmp_path)
    assert ran(tmp_path) == ["ran"]


def test_script_and_terminal_escapes_render_inert(browser, server, url, tmp_path):
    nasty = ('echo "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>" '
             "\x1b]52;c;aGk=\x07\x1b[2J \u202etxt.exe")
    pause_chat(server, url, "t-<img src=x onerror=window.pwned=3>",
               [("call_1", "run_command", {"command": nasty})], tmp_path)
    with running_inbox(url) as inbox:
        page = open_inbox(browser, inbox)
        call = page.locator("article.call").first
        text = call.locator("pre.preview").inner_text()
        assert "<script>window.pwned=1</script>" in text  # shown as text
        assert "\\x1b]52;c;aGk=\\x07\\x1b[2J \\u202etxt.exe" in text  # made visible
        assert "\x1b" not in text and "\u202e" not in text
        assert "control or invisible characters" in call.locator(".escaped").inner_text()
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.locator("img").count() == 0
        screenshot(page, tmp_path, "inbox-escaped.png")


class Attacker(BaseHTTPRequestHandler):
    """A page on another origin that posts an answer to the inbox."""

    target = ""

    def do_GET(self):
        body = (f"<form id=f method=post action='{Attacker.target}/answer'>"
                "<input name=action value=approve><input name=session value=t-1>"
                "<input name=call_id value=call_1><input name=csrf value=guess></form>"
                "<script>document.getElementById('f').submit()</script>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_post_from_another_origin_or_without_the_token_is_refused(browser, server, url,
                                                                   tmp_path):
    pause_chat(server, url, "t-1", [("call_1", "run_command", ECHO)], tmp_path)
    with running_inbox(url) as inbox:
        page = open_inbox(browser, inbox)  # this browser holds a page token
        Attacker.target = inbox.origin
        evil = HTTPServer(("127.0.0.1", 0), Attacker)
        threading.Thread(target=evil.serve_forever, daemon=True).start()
        try:
            attack = page.context.new_page()
            with attack.expect_response(lambda r: r.url.endswith("/answer")) as posted:
                attack.goto(f"http://127.0.0.1:{evil.server_port}/")
            assert posted.value.status == 403
        finally:
            evil.shutdown()
            evil.server_close()
        stranger = browser.new_context().new_page()  # no token
        stranger.goto(inbox.origin + "/")
        assert "needs its link" in stranger.locator("#ended").inner_text()
        assert stranger.locator("article.call").count() == 0
        fetched = stranger.evaluate(
            "fetch('/answer', {method: 'POST', body: 'action=approve'}).then(r => r.status)")
        assert fetched == 401
    with open_store(url) as store:
        assert store.pending()[0].answer is None
