"""The worked example of many workers (examples/approval_service.py, SPEC R22): two
service processes share one store; one pauses the run, the other resumes it after a
human answers; the same answer sent to both at once is recorded once, and the refund,
which either worker's resume loop may run, runs once."""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from agentflow.testing.replay import ReplayServer, chat_stream

import helpers_fork

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "examples", "approval_service.py")
REFUND = {"order_id": "42", "amount": 19.9}


def call(base: str, path: str, body=None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(base + path, data), timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize(
    "store_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.slow)], indirect=True)
def test_example_one_worker_pauses_another_resumes(store_url, tmp_path):
    ledger = tmp_path / "refunds.log"
    with ReplayServer([chat_stream(text="Let me refund that.", tool_calls=[
                           ("call_1", "refund", json.dumps(REFUND))]),
                       chat_stream(text="Refunded 19.90 EUR.")]) as model:
        workers = [helpers_fork.popen(
            [sys.executable, EXAMPLE, "--store", store_url, "--port", "0", "--base-url",
             model.base_url, "--ledger", str(ledger)], stdout=subprocess.PIPE, text=True,
            env={**os.environ, "OPENAI_API_KEY": "sk-test"}) for _ in range(2)]
        try:
            one, two = (w.stdout.readline().split()[-1] for w in workers)

            assert call(one, "/sessions/t-42", {"message": "Refund order 42, it broke"}) == (
                200, {"status": "paused", "reply": "Let me refund that.",
                      "pending": ["call_1"]})
            status, inbox = call(two, "/pending")
            assert status == 200 and [(e["session"], e["call_id"], e["tool"], e["arguments"])
                                      for e in inbox] == [("t-42", "call_1", "refund", REFUND)]

            answer = {"call_id": "call_1", "approved": True, "approver": "dana",
                      "digest": inbox[0]["digest"]}
            replies = []
            senders = [threading.Thread(target=lambda base: replies.append(
                call(base, "/sessions/t-42/answer", answer)), args=(base,))
                for base in (one, two)]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join()
            replies.sort(key=lambda r: r[0])
            # one answer is recorded; the other is refused, naming who answered
            assert replies[0] == (202, {"status": "answered"})
            assert replies[1][0] == 409 and "already answered by dana" in replies[1][1]["error"]
            # a worker's resume loop runs the refund; every worker sees the end
            deadline = time.monotonic() + 60
            while call(two, "/sessions/t-42")[1]["status"] != "done":
                assert time.monotonic() < deadline, "no worker resumed the session"
                time.sleep(0.05)
            assert call(one, "/sessions/t-42") == (200, {
                "status": "done", "reply": "Refunded 19.90 EUR.", "pending": []})
            assert call(one, "/pending") == (200, [])
        finally:
            for worker in workers:
                worker.terminate()
                worker.wait(timeout=60)
    assert ledger.read_text() == "refund 42 19.90\n"


@pytest.mark.parametrize("approved", ["false", 1, None, {"yes": True}])
def test_r24_the_example_refuses_an_approved_that_is_not_a_boolean(tmp_path, approved):
    """``{"approved": "false"}`` once ran the refund (``bool("false")`` is true): every
    value but JSON true or false is HTTP 400, nothing is stored, and the pause still
    waits for a real answer."""
    ledger = tmp_path / "refunds.log"
    store_url = f"sqlite:///{tmp_path}/sessions.db"
    with ReplayServer([chat_stream(text="Let me refund that.", tool_calls=[
                           ("call_1", "refund", json.dumps(REFUND))]),
                       chat_stream(text="Not refunded.")]) as model:
        worker = helpers_fork.popen(
            [sys.executable, EXAMPLE, "--store", store_url, "--port", "0", "--base-url",
             model.base_url, "--ledger", str(ledger)], stdout=subprocess.PIPE, text=True,
            env={**os.environ, "OPENAI_API_KEY": "sk-test"})
        try:
            base = worker.stdout.readline().split()[-1]
            assert call(base, "/sessions/t-42", {"message": "Refund order 42"})[0] == 200
            status, error = call(base, "/sessions/t-42/answer",
                                 {"call_id": "call_1", "approved": approved})
            assert status == 400 and "approved must be true or false" in error["error"]
            status, inbox = call(base, "/pending")
            assert [e["call_id"] for e in inbox] == ["call_1"]
            assert call(base, "/sessions/t-42/answer", {
                "call_id": "call_1", "approved": False, "digest": inbox[0]["digest"]}
                ) == (202, {"status": "answered"})
            deadline = time.monotonic() + 60
            while call(base, "/sessions/t-42")[1]["status"] != "done":
                assert time.monotonic() < deadline, "the worker did not resume the session"
                time.sleep(0.05)
            assert call(base, "/sessions/t-42") == (200, {
                "status": "done", "reply": "Not refunded.", "pending": []})
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    assert not ledger.exists()
