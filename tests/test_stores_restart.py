"""A real PostgreSQL restarted under agentflow (SPEC R16, R22 addendum): under a worker
that is inside an approved tool, and under the running approval service. Each test
starts its own throwaway cluster (tests/postgres_cluster.py) so that it may restart it;
slow (make test-slow)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from agentflow.errors import SessionLockedError, StoreError
from agentflow.stores import PostgresStore, open_store
from agentflow.testing.replay import ReplayServer, chat_stream
from conftest import _no_postgres
from test_examples import EXAMPLE, call
from test_stores import Payments, pause, worker

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster():
    """``(dsn, restart)`` of a PostgreSQL cluster of this test's own."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _no_postgres("psycopg is not installed")
    import postgres_cluster
    folder = tempfile.mkdtemp(prefix="agentflow-pg-restart-")
    try:
        dsn = postgres_cluster.start(folder)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        _no_postgres(str(exc))
    yield dsn, lambda: postgres_cluster.restart(folder)
    postgres_cluster.stop(folder)
    shutil.rmtree(folder, ignore_errors=True)


def restarted_inside_a_tool(cluster, make_agent, tmp_path, meanwhile):
    """Worker A (tests/worker.py) inside the approved ``transfer`` while the server
    restarts and ``meanwhile(dsn)`` runs; then A's tool returns. Asserts that the
    call ran once and its result was stored through A's new connection."""
    dsn, restart = cluster
    payments = Payments()
    with open_store(dsn) as store:
        pause(make_agent, store, "s", payments)
    log = tmp_path / "ran.log"
    with ReplayServer([chat_stream(text="Paid.")]) as a_server:
        a = worker(dsn, a_server.base_url, log, "--respond", "c1=yes", "--wait-in-tool")
        try:
            assert a.stdout.readline().strip() == "in tool", a.communicate()
            restart()
            meanwhile(dsn)
        finally:
            a.stdin.write("done\n")
            a.stdin.flush()
            out, err = a.communicate(timeout=60)
    assert out.splitlines()[-1] == "stop", err
    assert log.read_text() == "transfer 120\n"
    with open_store(dsn) as store:
        held = store.load("s")
    assert held.running == {}
    assert [m.content for m in held.messages][-2:] == ["sent 120", "Paid."]


def test_a_restart_under_a_worker_inside_a_tool_never_frees_its_call(cluster, make_agent,
                                                                     tmp_path):
    """Worker A is inside the approved call when the server restarts. Meanwhile no
    other worker may open the session (so none answers the call 'interrupted'); A's
    result is stored once the tool returns, through a new connection."""
    def meanwhile(dsn):
        with PostgresStore(dsn, reconnect_wait=10) as b:
            for _ in range(6):  # before and after A's lease keeper is back
                with pytest.raises(SessionLockedError, match="in use by another worker"):
                    with b.open("s"):
                        pass
                time.sleep(0.5)
            assert list(b.load("s").running) == ["c1"]
    restarted_inside_a_tool(cluster, make_agent, tmp_path, meanwhile)


def test_a_restart_never_hands_a_live_workers_lease_to_one_retrying_open(cluster, make_agent,
                                                                         tmp_path):
    """Issue 38, item 3: worker A is inside the approved call; PostgreSQL restarts;
    worker B retries ``open()`` in a tight loop, as a busy pool does. B's probe holds
    the advisory lock for a moment, so A's keeper may fail to take it again at once:
    it tries again, and renews no heartbeat without it, so B never opens the session
    and never answers A's running call 'interrupted'."""
    import hashlib

    import psycopg
    key = int.from_bytes(hashlib.sha256(b"agentflow session s").digest()[:8], "big",
                         signed=True)
    counts = {"opened": 0, "refused": 0, "away": 0}

    def meanwhile(dsn):
        # B's probe holds the lock when A's keeper comes back (it beats every 5 s):
        # the race, made certain.
        with psycopg.connect(dsn, autocommit=True) as probe:
            probe.execute("SELECT pg_advisory_lock(%s)", (key,))
            time.sleep(6)
        with PostgresStore(dsn, reconnect_wait=10) as b:
            until = time.monotonic() + 8  # past A's next heartbeat
            while time.monotonic() < until:
                try:
                    with b.open("s"):
                        counts["opened"] += 1
                except SessionLockedError:
                    counts["refused"] += 1
                except StoreError:
                    counts["away"] += 1
    restarted_inside_a_tool(cluster, make_agent, tmp_path, meanwhile)
    assert counts["opened"] == 0 and counts["refused"] > 50, counts


def test_the_service_answers_again_within_seconds_of_a_restart(cluster, tmp_path):
    """Every request during and after the restart gets an HTTP answer (a typed 503
    while the database is away), and the service serves again within seconds."""
    dsn, restart = cluster
    with ReplayServer([chat_stream(text="Let me refund that.", tool_calls=[
                           ("call_1", "refund", '{"order_id": "42", "amount": 19.9}')])]) as model:
        service = subprocess.Popen(
            [sys.executable, EXAMPLE, "--store", dsn, "--port", "0", "--base-url",
             model.base_url, "--ledger", str(tmp_path / "refunds.log")],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "OPENAI_API_KEY": "sk-test"})
        try:
            base = service.stdout.readline().split()[-1]
            status, _ = call(base, "/sessions/t-42", {"message": "Refund order 42"})
            assert status == 200
            restart()
            answers, started = [], time.monotonic()
            while time.monotonic() - started < 30:
                status, body = call(base, "/pending")  # a dropped connection raises here
                answers.append(status)
                if status == 200:
                    break
                assert status == 503 and "PostgresStore" in body["error"], body
            assert answers[-1] == 200, answers
            assert time.monotonic() - started < 10
            assert [e["call_id"] for e in body] == ["call_1"]
        finally:
            service.terminate()
            service.wait(timeout=30)


def test_an_unreachable_server_is_a_store_error_naming_it():
    pytest.importorskip("psycopg") if os.environ.get("CI") != "true" else None
    with pytest.raises(StoreError, match="cannot reach the PostgreSQL store at "
                                         "127.0.0.1:9/postgres") as caught:
        PostgresStore("postgresql://agentflow:s3cret@127.0.0.1:9/postgres", connect_timeout=1)
    assert caught.value.retryable is True
    assert "s3cret" not in str(caught.value)

