"""The approval inbox with 1,000 calls waiting in SQLite (issue 31): the page's first
paint and an answer's round trip.

Setup: ``WAITING - 1`` sessions paused by a library agent, each on one call, and for
each round trip one more paused by ``agentflow chat --store`` (so a worker may resume
it); a real ``agentflow inbox`` server (in this process) and a real ``agentflow worker``
process (``--poll POLL``) on the same SQLite file.

* **First paint**: Debian's headless chromium (Playwright, as the browser tests) opens
  a printed link (the page, the link's code exchanged for a page token, then the first
  50 calls of 1,000): the time from the navigation's start until the calls are drawn,
  and the server's time for ``GET /entries`` alone over HTTP.
* **Round trip**: from the click on Approve (the clock just before the click) to the
  worker's tool call (the command ``date +%s.%N`` appends the time it ran): the page
  posts the answer, the store records it, the worker notices it (its ``--poll`` is
  ``POLL`` s, the longest it waits: SQLite's data version and PostgreSQL's NOTIFY wake
  it earlier, issue 38), opens the session and runs the call. Measured on SQLite and
  on a throwaway PostgreSQL cluster (the round trip only).

Without chromium or Playwright only the HTTP timings are measured.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentflow import ApprovalRequiredTool, ChatClientAgent, OpenAIChatClient, tool
from agentflow.cli.inbox import Inbox
from agentflow.stores import SQLiteStore, open_store
from agentflow.testing.replay import ReplayServer, chat_stream

from common import runs, summary

WAITING = 1000
POLL = 1.0
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--disable-component-update", "--disable-sync"]


def fill(folder: Path, url: str, count: int, secret: bytes) -> None:
    """``count`` sessions paused on one call each, by a library agent, in the store the
    chat signs with ``secret`` (SPEC R27)."""
    @tool
    def transfer(amount: int) -> str:
        """Send money.

        Args:
            amount: in euros.
        """
        return f"sent {amount}"

    bodies = [chat_stream(tool_calls=[("c1", "transfer", json.dumps({"amount": i}))])
              for i in range(count)]
    store = (SQLiteStore(url.removeprefix("sqlite:///"), secret, synchronous="NORMAL")
             if url.startswith("sqlite:") else open_store(url, secret))
    with ReplayServer(bodies) as server, store:
        client = OpenAIChatClient("bench", base_url=server.base_url, api_key="sk-bench")
        agent = ChatClientAgent(client, tools=[ApprovalRequiredTool(transfer)])
        for i in range(count):
            with store.open(f"app-{i:05d}") as session:
                list(agent.run("pay", session))


def main(waiting: int = WAITING) -> dict:
    """Measure on SQLite, then the round trip on a throwaway PostgreSQL cluster;
    returns the summaries (seconds) and what could not be measured."""
    folder = Path(tempfile.mkdtemp(prefix="agentflow-bench-inbox-"))
    result = measure(waiting, f"sqlite:///{folder / 'sessions.db'}", folder)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import postgres_cluster
    cluster = tempfile.mkdtemp(prefix="agentflow-bench-inbox-pg-")
    try:
        dsn = postgres_cluster.start(cluster)
    except Exception as exc:  # reported, not fatal
        result["notes"].append(f"round trip on PostgreSQL: {exc}")
        return result
    try:
        folder = Path(tempfile.mkdtemp(prefix="agentflow-bench-inbox-"))
        measured = measure(waiting, dsn, folder)
        if "trip" in measured:
            result["postgresql trip"] = measured["trip"]
    except Exception as exc:  # reported, not fatal: SQLite's rows stand
        result["notes"].append(f"round trip on PostgreSQL: {type(exc).__name__}: {exc}")
    finally:
        postgres_cluster.stop(cluster)
    return result


def measure(waiting: int, url: str, folder: Path) -> dict:
    """One store's summaries (seconds)."""
    from agentflow.cli.trust import made_key
    secret = made_key(str(folder / "config" / "agentflow" / "store.key"))  # the chat's
    fill(folder, url, waiting - 1, secret)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTFLOW_"))},
           "OPENAI_API_KEY": "sk-bench", "XDG_CONFIG_HOME": str(folder / "config")}
    result: dict = {"waiting": waiting, "notes": []}
    with ReplayServer() as model:
        inbox = Inbox(url, "127.0.0.1", 0, poll=0.5, secret=secret).start()
        chat = [sys.executable, "-m", "agentflow", "chat", "--base-url", model.base_url,
                "--store", url]
        stamps = folder / "stamps.txt"

        def pause(name: str) -> None:
            model.queue(chat_stream(tool_calls=[("call_1", "run_command", json.dumps(
                {"command": f"date +%s.%N >> {stamps}"}))]))
            done = subprocess.run([*chat, "--session", name, "go"], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 3, done.stderr

        pause("chat-00000")  # the 1,000th waiting call
        worker = subprocess.Popen([sys.executable, "-m", "agentflow", "worker", "--store", url,
                                   "--base-url", model.base_url, "--poll", str(POLL)],
                                  cwd=folder, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            result["get"] = summary([_get_page(inbox) for _ in range(runs())])
            try:
                from playwright.sync_api import sync_playwright
            except ImportError:
                result["notes"].append("first paint and round trip: Playwright not installed")
                return result
            if not os.path.exists(CHROMIUM):
                result["notes"].append(f"first paint and round trip: no {CHROMIUM}")
                return result
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                     args=FLAGS)
                paints, trips = [], []
                for i in range(runs()):
                    page = browser.new_context().new_page()
                    page.goto(inbox.invite())
                    page.wait_for_selector("article.call")
                    paints.append(page.evaluate("performance.now()") / 1000)
                    if i:
                        pause(f"chat-{i:05d}")
                        page.reload()
                    model.queue(chat_stream(text="done"))
                    count = len(stamps.read_text().splitlines()) if stamps.exists() else 0
                    clicked = _approve(page, f"chat-{i:05d}")
                    deadline = time.monotonic() + 60
                    while (len(stamps.read_text().splitlines()) if stamps.exists() else 0) \
                            == count:
                        if time.monotonic() > deadline:
                            raise RuntimeError("the worker did not run the call")
                        time.sleep(0.005)
                    trips.append(float(stamps.read_text().splitlines()[-1]) - clicked)
                    page.context.close()
                browser.close()
            result["paint"], result["trip"] = summary(paints), summary(trips)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
            inbox.stop()
    return result


def _get_page(inbox: Inbox) -> float:
    token, _ = inbox.login(inbox.invite().split("#login=", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", inbox.port, timeout=60)
    began = time.perf_counter()
    connection.request("GET", "/entries", headers={
        "Host": f"127.0.0.1:{inbox.port}", "Authorization": f"Bearer {token}"})
    reply = connection.getresponse()
    reply.read()
    took = time.perf_counter() - began
    connection.close()
    assert reply.status == 200
    return took


def _approve(page, session_id: str) -> float:
    """Click Approve on ``session_id``'s call, wherever it is in the list; returns the
    clock just before the click."""
    while True:
        call = page.locator("article.call").filter(has_text=session_id)
        if call.count():
            button = call.get_by_role("button", name="Approve", exact=True)
            clicked = time.time()
            button.click()
            return clicked
        following = page.get_by_role("link", name="next page")  # oldest first: it is late
        if not following.count():
            raise RuntimeError(f"{session_id} is not in the inbox")
        with page.expect_navigation():
            following.click()
        page.wait_for_selector("#calls")


def table(result: dict) -> list[str]:
    """The Markdown rows for bench/RESULTS.md."""
    def row(name, s):
        return (f"| {name} | {s['median'] * 1e3:.0f} [{s['min'] * 1e3:.0f} – "
                f"{s['max'] * 1e3:.0f}] |")
    lines = ["| measurement | ms median [min – max] |", "|---|---|"]
    lines.append(row("`GET /entries` (the first 50 of the waiting calls, server and HTTP)",
                     result["get"]))
    if "paint" in result:
        lines.append(row("the first 50 calls drawn in chromium (link, page, login, list)",
                         result["paint"]))
        lines.append(row(f"round trip on SQLite: click Approve → the worker's tool call "
                         f"(--poll {POLL:g} s; the store wakes it)", result["trip"]))
    if "postgresql trip" in result:
        lines.append(row(f"round trip on PostgreSQL (--poll {POLL:g} s; NOTIFY wakes it)",
                         result["postgresql trip"]))
    lines += [f"- not measured: {n}" for n in result["notes"]]
    return lines


if __name__ == "__main__":
    measured = main()
    print("\n".join(table(measured)))
