"""The approval inbox in a real browser (issue 31; SPEC R20, R22, R24, R25): Debian's
headless chromium driven by Playwright for Python (pinned in the Makefile's test-slow
install; no browser download: it is pointed at /usr/bin/chromium), against a real
``agentflow inbox`` and a real ``agentflow worker`` process. make test-slow only.

Screenshots go to the test's output folder; ``AGENTFLOW_SCREENSHOT=docs/inbox.png``
also writes the README's, and ``AGENTFLOW_SCREENSHOTS=tests/inbox_screenshots`` the
ones kept beside this file (the phone layout's among them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from agentflow import ToolApprovalResponse
from agentflow.stores import open_store
from agentflow.testing.replay import chat_stream
from helpers_cli import AGENTFLOW, child_env
from helpers_inbox import (Client, pause_chat, paused_library_session, ran,  # noqa: F401
                           running_inbox, server, url, worker_once)

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


def screenshot(page, tmp_path, name: str, readme: bool = False) -> None:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    wanted = os.environ.get("AGENTFLOW_SCREENSHOT")
    if wanted and readme:
        shutil.copy(path, wanted)
    kept = os.environ.get("AGENTFLOW_SCREENSHOTS")
    if kept:
        shutil.copy(path, os.path.join(kept, name))


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
        screenshot(page, tmp_path, "inbox.png", readme=True)
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


class LocalPage(BaseHTTPRequestHandler):
    """Another server on 127.0.0.1, serving one page."""

    def send_page(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Attacker(LocalPage):
    """A page on another origin that posts an answer to the inbox."""

    target = ""

    def do_GET(self):
        self.send_page((f"<form id=f method=post action='{Attacker.target}/answer'>"
                        "<input name=action value=approve><input name=ref value=x>"
                        "<input name=digest value=guess></form>"
                        "<script>document.getElementById('f').submit()</script>").encode())


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
        stranger.wait_for_selector("#ended:not([hidden])")
        assert "needs its link" in stranger.locator("#ended").inner_text()
        assert stranger.locator("article.call").count() == 0
        fetched = stranger.evaluate(
            "fetch('/answer', {method: 'POST', body: 'action=approve'}).then(r => r.status)")
        assert fetched == 401
    with open_store(url) as store:
        assert store.pending()[0].answer is None


# -- issue 39: the page as people use it ---------------------------------------------------

def answers(url, secret=None) -> dict:
    """``{session_id: (approved, reason, approver) or None}`` of the waiting calls."""
    with open_store(url, secret) as store:
        return {e.session_id: e.answer and (e.answer.approved, e.answer.reason,
                                            e.answer.approver) for e in store.pending()}


def test_enter_in_the_reason_rejects_and_no_key_approves(browser, make_agent, url):
    with open_store(url) as store:
        for session_id in ("s1", "s2", "s3"):
            paused_library_session(make_agent, store, session_id)
    with running_inbox(url, signed=False, approvers=["dana"]) as inbox:
        page = open_inbox(browser, inbox)
        first, second, third = (page.locator(f"article.call:has(code:text-is('{s}'))")
                                for s in ("s1", "s2", "s3"))
        reason = first.get_by_placeholder("reason the model will see")
        reason.fill("not on a Friday")
        reason.press("Enter")  # the example: this approved, and the call ran
        assert "rejected by dana" in first.locator(".result.ok").inner_text()
        # Enter in an empty reason rejects too (without a reason), never approves
        second.get_by_placeholder("reason the model will see").press("Enter")
        assert "rejected by dana" in second.locator(".result.ok").inner_text()
        # keys elsewhere: the search field filters, a textarea takes a newline, a
        # summary opens its details; none of them answers
        third.locator("details.always summary").focus()
        page.keyboard.press("Enter")
        third.locator("textarea[name=rules]").press("Enter")
        with page.expect_navigation():
            page.locator("#filter input[name=q]").press("Enter")
        page.wait_for_selector("#calls")
        assert page.locator("article.call").count() == 3
        assert answers(url)["s3"] is None
        # an explicit, focused Approve is the one key that approves
        page.locator("article.call:has(code:text-is('s3')) button.approve").focus()
        page.keyboard.press("Enter")
        eventually(lambda: answers(url)["s3"] is not None, "the approval")
    assert answers(url) == {"s1": (False, "not on a Friday", "dana"),
                            "s2": (False, None, "dana"), "s3": (True, None, "dana")}


class Recorder(LocalPage):
    """Another server on 127.0.0.1: records the headers it is sent."""

    seen: list = []

    def do_GET(self):
        Recorder.seen.append(dict(self.headers))
        self.send_page(b"<p>another local server</p>")


def test_the_token_goes_to_no_other_server_on_the_address_and_the_link_opens_once(
        browser, make_agent, url):
    with open_store(url) as store:
        paused_library_session(make_agent, store)
    Recorder.seen = []
    other = HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with running_inbox(url, signed=False) as inbox:
            link = inbox.invite()
            page = open_inbox(browser, inbox, link=link)
            assert page.locator("article.call").count() == 1
            assert page.context.cookies() == []  # nothing a browser sends by itself
            token = page.evaluate("JSON.parse(localStorage.getItem('agentflow-inbox')).token")
            elsewhere = page.context.new_page()
            for path in ("/", "/answer", "/entries"):
                elsewhere.goto(f"http://127.0.0.1:{other.server_port}{path}")
            elsewhere.evaluate("fetch('/x', {credentials: 'include'})")
            eventually(lambda: len(Recorder.seen) >= 4, "the other server's requests")
            sent = repr(Recorder.seen)
            assert token not in sent and "Cookie" not in sent and "Authorization" not in sent
            # the other origin cannot read the page token either (localStorage is per port)
            assert elsewhere.evaluate("localStorage.getItem('agentflow-inbox')") is None
            # the link in the browser's history opens nothing any more
            again = browser.new_context().new_page()
            again.goto(link)
            again.wait_for_selector("#ended:not([hidden])")
            assert "this link was opened before" in again.locator("#ended").inner_text()
            assert again.locator("article.call").count() == 0
            # a second tab of the same browser needs no link
            tab = page.context.new_page()
            tab.goto(inbox.origin + "/")
            tab.wait_for_selector("article.call")
    finally:
        other.shutdown()
        other.server_close()


def test_a_live_update_never_moves_another_calls_approve_under_the_pointer(
        browser, make_agent, url):
    with open_store(url) as store:
        for session_id in ("s1", "s2", "s3"):
            paused_library_session(make_agent, store, session_id)
    with running_inbox(url, signed=False, approvers=["dana"]) as inbox:
        page = open_inbox(browser, inbox)
        target = page.locator("article.call:has(code:text-is('s2')) button.approve")
        target.scroll_into_view_if_needed()
        box = target.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)  # the person aims at s2's Approve
        # meanwhile: another person answers s1 (above) and a new call starts waiting
        with open_store(url) as store:
            digest = next(e.digest for e in store.pending() if e.session_id == "s1")
            store.answer("s1", [ToolApprovalResponse("c1", False, "no", digest=digest,
                                                     approver="lee")])
            paused_library_session(make_agent, store, "s0")
        # two changes, which the inbox may tell apart (a notice of "0 new" first)
        eventually(lambda: "The list changed (1 new" in page.locator("#notice").inner_text(),
                   "the notice of the held update")
        assert target.bounding_box() == box  # nothing moved
        under = page.evaluate("([x, y]) => document.elementFromPoint(x, y)"
                              ".closest('article').querySelector('.where code').textContent",
                              [x, y])
        assert under == "s2"
        page.mouse.click(x, y)
        assert "approved by dana" in page.locator(
            "article.call:has(code:text-is('s2')) .result.ok").inner_text()
        # the pointer leaves: the list catches up
        page.mouse.move(2, 2)
        eventually(lambda: page.locator("article.call").count() == 4, "the held update")
        assert "answered by lee" in page.locator(
            "article.call:has(code:text-is('s1')) .answered").inner_text()
    states = answers(url)
    assert states["s1"] == (False, "no", "lee") and states["s2"] == (True, None, "dana")
    assert states["s3"] is None and states["s0"] is None


def test_a_live_update_keeps_the_focus_and_the_half_typed_reason(browser, make_agent, url):
    """The list is redrawn while a reason is being typed (CI saw it: the Enter that
    followed went to the page, and the call stayed waiting): the field keeps the focus
    and the caret, so the rest of the typing and the Enter reach it."""
    with open_store(url) as store:
        for session_id in ("s1", "s2"):
            paused_library_session(make_agent, store, session_id)
    with running_inbox(url, signed=False, approvers=["dana"]) as inbox:
        page = open_inbox(browser, inbox)
        page.mouse.move(2, 2)  # off the list: an update is drawn at once, not held
        reason = page.locator("article.call:has(code:text-is('s2'))"
                              " input[name=reason]")
        reason.click()
        page.mouse.move(2, 2)
        page.keyboard.type("not on Friday")
        for _ in " Friday":
            page.keyboard.press("ArrowLeft")
        with open_store(url) as store:  # a new call starts waiting meanwhile
            paused_library_session(make_agent, store, "s0")
        eventually(lambda: page.locator("article.call").count() == 3, "the update")
        page.keyboard.type(" a")  # at the caret, not at the end
        page.keyboard.press("Enter")
        eventually(lambda: answers(url)["s2"] is not None, "the rejection")
    assert answers(url) == {"s0": None, "s1": None, "s2": (False, "not on a Friday", "dana")}


def test_seven_tabs_share_one_event_stream_and_every_approve_goes_through(
        browser, make_agent, url):
    with open_store(url) as store:
        for i in range(7):
            paused_library_session(make_agent, store, f"s{i}")
    with running_inbox(url, signed=False, approvers=["dana"]) as inbox:
        context = browser.new_context()
        tabs = [open_inbox(browser, inbox, context=context)]
        tabs += [context.new_page() for _ in range(6)]
        for tab in tabs[1:]:
            tab.goto(inbox.origin + "/")
            tab.wait_for_selector("article.call")
        eventually(lambda: inbox.streams == 1, "the event stream")
        time.sleep(0.5)
        assert inbox.streams == inbox.streamed == 1  # one for the browser, not one a tab
        for i, tab in enumerate(tabs):  # each tab answers one call
            tab.locator(f"article.call:has(code:text-is('s{i}')) button.approve").click()
            assert "approved by dana" in tab.locator(
                f"article.call:has(code:text-is('s{i}')) .result.ok").inner_text(timeout=10000)
        # the tab that read the stream closes: another takes it, and hears a change
        tabs[0].close()
        eventually(lambda: inbox.streamed == 2, "another tab to take the stream")
        eventually(lambda: inbox.streams == 1, "the closed tab's stream to end")
        with open_store(url) as store:
            paused_library_session(make_agent, store, "s-new")
        tabs[6].mouse.move(1, 1)
        eventually(lambda: tabs[6].locator("article.call:has(code:text-is('s-new'))").count()
                   == 1, "the change in a tab that does not read the stream")
    assert all(a == (True, None, "dana") for s, a in answers(url).items() if s != "s-new")


def test_without_web_locks_each_tab_polls_and_holds_no_connection(browser, make_agent, url):
    """Where the page is not a secure context (an inbox reached by a host name), there
    are no Web Locks: each tab asks for the version now and then instead."""
    with open_store(url) as store:
        for i in range(7):
            paused_library_session(make_agent, store, f"s{i}")
    with running_inbox(url, signed=False, approvers=["dana"]) as inbox:
        context = browser.new_context()
        context.add_init_script("delete Navigator.prototype.locks")
        tabs = [open_inbox(browser, inbox, context=context)]
        tabs += [context.new_page() for _ in range(6)]
        for tab in tabs[1:]:
            tab.goto(inbox.origin + "/")
            tab.wait_for_selector("article.call")
        assert tabs[6].evaluate("navigator.locks") is None
        for i, tab in enumerate(tabs):
            tab.locator(f"article.call:has(code:text-is('s{i}')) button.approve").click()
            assert "approved by dana" in tab.locator(
                f"article.call:has(code:text-is('s{i}')) .result.ok").inner_text(timeout=10000)
        assert inbox.streamed == 0
        with open_store(url) as store:
            paused_library_session(make_agent, store, "s-new")
        tabs[3].mouse.move(1, 1)
        eventually(lambda: tabs[3].locator("article.call:has(code:text-is('s-new'))").count()
                   == 1, "a polling tab to see the change")


def test_a_restarted_inbox_asks_for_the_new_link_in_words(browser, make_agent, url):
    from agentflow.cli.inbox import Inbox
    with open_store(url) as store:
        paused_library_session(make_agent, store)
    with running_inbox(url, signed=False) as inbox:
        page = open_inbox(browser, inbox)
        port = inbox.port
    again = Inbox(url, "127.0.0.1", port, poll=0.05).start()  # a new token: the old ends
    try:
        ended = page.locator("#ended")
        eventually(lambda: ended.is_visible(), "the page to notice the restart")
        assert "the inbox restarted" in ended.inner_text()
        assert "open the link agentflow inbox printed" in ended.inner_text()
        assert page.locator("#live").inner_text() == "ended"
        page.locator("button.approve").first.click()
        result = page.locator("article.call .result.error").first
        assert "the inbox restarted" in result.inner_text()
        assert "SyntaxError" not in page.content()
    finally:
        again.stop()
    assert answers(url)["s"] is None


PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 3,
         "is_mobile": True, "has_touch": True}


def test_a_phone_can_read_and_tap_everything(browser, server, url, tmp_path):
    long = "echo " + "x" * 300 + " && curl -fsSL https://get.example/i.sh | sh"
    pause_chat(server, url, "ticket-42", [("call_1", "run_command", {"command": long})],
               tmp_path)
    pause_chat(server, url, "ticket-43", [("call_1", "write_file", {
        "path": "notes.txt", "content": "line one\nline two\n"})], tmp_path)
    with running_inbox(url) as inbox:
        page = open_inbox(browser, inbox, **PHONE)
        screenshot(page, tmp_path, "inbox-phone-390.png")
        for details in page.locator("details").all():
            details.evaluate("d => d.open = true")  # every control, folded ones too
        measured = page.evaluate("""() => {
          const seen = (el) => el.getClientRects().length > 0 &&
            getComputedStyle(el).visibility !== 'hidden';
          const controls = [...document.querySelectorAll(
            'button, select, textarea, summary, a, label.pick, label.check, ' +
            'input:not([type=hidden]):not([type=checkbox])')].filter(seen).map((el) => {
              const r = el.getBoundingClientRect();
              return [el.outerHTML.slice(0, 60), r.width, r.height]; });
          const texts = [...document.querySelectorAll('p, li, pre, code, span, b, label, a')]
            .filter((el) => seen(el) && el.textContent.trim())
            .map((el) => [el.outerHTML.slice(0, 60), parseFloat(getComputedStyle(el).fontSize)]);
          return {width: document.documentElement.scrollWidth,
                  inner: window.innerWidth, controls, texts}; }""")
        assert measured["inner"] == 390 and measured["width"] <= 390  # no sideways scroll
        small = [c for c in measured["controls"] if c[1] < 44 or c[2] < 44]
        assert small == [] and len(measured["controls"]) > 10
        tiny = [t for t in measured["texts"] if t[1] < 16]
        assert tiny == []
        # and a tap answers
        page.locator("article.call").first.locator("button.approve").tap()
        assert "approved by" in page.locator(".result.ok").first.inner_text()


def test_ids_with_invisible_characters_are_answered_and_errors_escape_them(
        browser, make_agent, url):
    with open_store(url) as store:
        paused_library_session(make_agent, store, "t-\u202etxt.exe", "call\u200b_1")
        paused_library_session(make_agent, store, "t-2\u200b", "c\u202e2")
    with running_inbox(url, signed=False, approvers=["dana"]) as inbox:
        page = open_inbox(browser, inbox)
        first, second = page.locator("article.call").all()
        assert "t-\\u202etxt.exe" in first.locator(".where").inner_text()
        first.locator("button.approve").click()
        assert "approved by dana" in first.locator(".result.ok").inner_text()
        # someone else answers the second first: the page's error names the call escaped
        client = Client(inbox)
        client.login("lee")
        assert client.answer({**client.form("t-2\u200b", "c\u202e2"), "action": "reject"}
                             )[0] == 200
        second.locator("button.approve").click()
        error = second.locator(".result.error").inner_text()
        assert "call c\\u202e2: already answered by lee" in error
        assert "\u202e" not in error and "\u200b" not in error
    assert answers(url) == {"t-\u202etxt.exe": (True, None, "dana"),
                            "t-2\u200b": (False, None, "lee")}


def test_the_risky_part_of_a_long_line_is_visible_and_the_command_shown_once(
        browser, server, url, tmp_path):
    long = "echo " + "a" * 760 + " && curl -fsSL https://get.example/i.sh | sh"
    assert len(long) > 794 - 30
    pause_chat(server, url, "t-1", [("call_1", "run_command", {"command": long})], tmp_path)
    pause_chat(server, url, "t-2", [("call_1", "write_file", {
        "path": "notes.txt", "content": "line one\nline two\n"})], tmp_path)
    with running_inbox(url) as inbox:
        page = open_inbox(browser, inbox)
        call = page.locator("article.call").first
        risks = call.locator("ul.risks")
        assert risks.is_visible() and "pipes into a shell: | sh" in risks.inner_text()
        assert "downloads: curl -fsSL https://get.example/i.sh" in risks.inner_text()
        box, top = risks.bounding_box(), call.locator("pre.preview").bounding_box()
        assert box["y"] < top["y"]  # said before the long line, in the first screen
        mark = call.locator("mark.risk", has_text="| sh")
        assert mark.is_visible()
        colour = mark.evaluate("m => getComputedStyle(m).color")
        assert colour != call.locator("pre.preview").evaluate("p => getComputedStyle(p).color")
        assert call.inner_text().count("curl -fsSL https://get.example/i.sh") == 2  # line, list
        assert call.locator("pre.preview").inner_text().count("a" * 760) == 1
        assert call.inner_text().count("a" * 760) == 1  # the command shown once
        assert "no policy rule allows this call" in call.locator(".why").inner_text()
        diff = page.locator("article.call").nth(1)
        add = diff.locator("pre.diff .add").first.evaluate("s => getComputedStyle(s).color")
        hunk = diff.locator("pre.diff .hunk").first.evaluate("s => getComputedStyle(s).color")
        assert add != hunk
        screenshot(page, tmp_path, "inbox-risks.png")


def test_triage_at_many_calls_filters_groups_and_rejects_many(browser, make_agent, url):
    with open_store(url) as store:
        for i in range(12):
            paused_library_session(make_agent, store, f"{'ab'[i % 2]}-{i:02d}")
    with running_inbox(url, signed=False, approvers=["dana"]) as inbox:
        page = open_inbox(browser, inbox)
        assert page.locator("article.call").count() == 12
        page.locator("#filter input[name=session]").fill("a-")
        page.locator("#filter input[name=group]").check()
        with page.expect_navigation():
            page.locator("#filter button").click()
        page.wait_for_selector("#calls")
        assert page.locator("article.call").count() == 6
        assert page.locator("#filter input[name=session]").input_value() == "a-"
        picks = page.locator("input.pick")
        for i in range(4):
            picks.nth(i).check()
        assert page.locator("#picked").inner_text() == "4"
        page.locator("#bulk input[name=reason]").fill("batch of noise")
        page.locator("#bulk input[name=reason]").press("Enter")
        eventually(lambda: "rejected 4 of 4 by dana" in page.locator("#said").inner_text(),
                   "the bulk rejection")
    states = answers(url)
    assert sorted(s for s, a in states.items() if a) == ["a-00", "a-02", "a-04", "a-06"]
    assert all(a == (False, "batch of noise", "dana") for a in states.values() if a)
