import os
import shutil
import subprocess
import tempfile

import pytest

from agentflow import ChatClientAgent, OpenAIChatClient
from agentflow.testing.replay import ReplayServer


@pytest.fixture
def make_agent():
    """``make_agent(bodies, **agent_kwargs) -> (agent, server)``: a ``ChatClientAgent``
    whose ``OpenAIChatClient`` talks real HTTP to a loopback ``ReplayServer`` serving
    ``bodies`` in order. Servers stop at the end of the test."""
    servers = []

    def factory(bodies, **agent_kwargs):
        server = ReplayServer(bodies).start()
        servers.append(server)
        client = OpenAIChatClient(model="test-model", base_url=server.base_url,
                                  api_key="sk-test", max_retries=0)  # retries: test_retries.py
        return ChatClientAgent(client, **agent_kwargs), server

    yield factory
    for server in servers:
        server.stop()


# -- session stores (SPEC R22) -----------------------------------------------------------

# PostgreSQL is a real server started for the session: its variants run in make test-slow
STORE_KINDS = ["file", "sqlite", pytest.param("postgres", marks=pytest.mark.slow)]


def _no_postgres(why: str):
    """Skip a PostgreSQL test, except under CI, where the server must be there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL is required under CI=true: {why}")
    pytest.skip(f"no PostgreSQL server: {why}")


@pytest.fixture(scope="session")
def postgres_dsn():
    """A real PostgreSQL server's DSN: ``AGENTFLOW_TEST_POSTGRES_DSN`` (``.ci/run``
    starts one), else a throwaway cluster started here for the whole test session."""
    dsn = os.environ.get("AGENTFLOW_TEST_POSTGRES_DSN")
    if dsn:
        yield dsn
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _no_postgres("psycopg is not installed (pip install '.[postgres]' in a checkout of agentflow-approvals)")
    import postgres_cluster
    folder = tempfile.mkdtemp(prefix="agentflow-pg-")  # not under pytest's 0700 folders
    try:
        dsn = postgres_cluster.start(folder)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        _no_postgres(str(exc))
    yield dsn
    postgres_cluster.stop(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=STORE_KINDS)
def store_url(request, tmp_path):
    """The URL of an empty store of each kind: a folder, an SQLite file, a PostgreSQL
    database whose sessions table was dropped."""
    if request.param == "file":
        return f"file://{tmp_path}/sessions"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    dsn = request.getfixturevalue("postgres_dsn")
    import psycopg
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS agentflow_sessions, agentflow_session_items, "
                           "agentflow_pending_calls, agentflow_leases, agentflow_ready, "
                           "agentflow_inbox_changes")
    return dsn


@pytest.fixture
def store(store_url):
    """An open ``SessionStore`` of each kind, closed after the test."""
    from agentflow.stores import open_store
    opened = open_store(store_url)
    yield opened
    opened.close()


def pytest_collection_modifyitems(items):
    """The tests of test_mcp.py that use its ``servers`` fixture start three processes of
    the MCP SDK and the reference Node server (about 5 s of CPU): they run in make
    test-slow, which CI runs too. make test still talks to a real MCP server through
    test_mcp_policy.py, whose server runs on a thread of the test process."""
    for item in items:
        if item.module.__name__ == "test_mcp" and "servers" in item.fixturenames:
            item.add_marker(pytest.mark.slow)
