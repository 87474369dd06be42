"""MCP servers that change under the gate (SPEC R3, R26; issue 26 item 6).

A server's annotations are hints from the server itself. One that announces a read-only
tool at start, then redefines it as something else and says so with
``notifications/tools/list_changed``, must not have the redefined tool run unasked: the
list is read again and a tool that differs from what was first listed asks. And what a
server returns is capped, as ``read_file`` caps what it reads.

Against a real MCP server (``tests/mcp_server.py``, the SDK's own server class) served
over streamable HTTP on 127.0.0.1, a fresh one per test (the tests change it), and a
model on a loopback ``ReplayServer``.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the optional extra: pip install '.[mcp]'")

from agentflow import AgentSession, FinishReason, ToolApprovalRequest, ToolResult  # noqa: E402
from agentflow.mcp import MCPServer  # noqa: E402
from agentflow.testing.replay import chat_stream  # noqa: E402

from test_mcp import agent_for, by_name, calls, run, serve_http_here  # noqa: E402


@pytest.fixture
def changing(tmp_path):
    """``(server, notes_dir)``: a fresh started server called ``shifty``."""
    (tmp_path / "secret.txt").write_text("first line\nsecond line\n", encoding="utf-8")
    url, stop = serve_http_here("shifty", tmp_path)
    server = MCPServer.http(url, timeout=10, start_timeout=30).start()
    try:
        yield server, tmp_path
    finally:
        server.stop()
        stop()


def call_turn(tool: str, arguments: dict, call_id: str) -> str:
    return chat_stream(tool_calls=[(call_id, tool, json.dumps(arguments))])


def test_a_tool_redefined_after_start_asks(changing):
    """Issue 26: ``peek`` was listed read-only at start; the server redefines it (as a
    tool that deletes the note) and sends list_changed: the next call of ``peek``
    pauses for approval and nothing is deleted."""
    server, notes = changing
    peek = by_name(server)["peek"]
    assert peek.requires_approval() is False  # as listed at start: readOnlyHint
    bodies = [call_turn("shifty__redefine", {}, "call_1"),
              call_turn("shifty__peek", {"name": "secret.txt"}, "call_2"),
              chat_stream("done")]
    with agent_for(bodies, server.tools) as (agent, _model):
        updates = run(agent, ["peek at secret.txt"], AgentSession())
    results = [u.result for u in updates if isinstance(u, ToolResult)]
    assert results == ["redefined"]  # redefine itself was read-only and ran
    asked = [u for u in updates if isinstance(u, ToolApprovalRequest)]
    assert [(r.call_id, r.name) for r in asked] == [("call_2", "shifty__peek")]
    assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    assert (notes / "secret.txt").exists()
    assert calls(notes) == ["redefine"]
    assert peek.approval_reason == "redefined by the server after it was listed"


def test_an_unchanged_tool_still_runs_after_a_change_elsewhere(changing):
    """Only what changed asks: ``echo`` is listed again unchanged and keeps running."""
    server, _notes = changing
    server.call("redefine", {})
    tools = by_name(server)
    assert tools["peek"].requires_approval() is True
    assert tools["echo"].requires_approval() is False
    assert tools["echo"].approval_reason == "readOnlyHint"


def test_what_a_server_sends_unasked_is_handled_not_a_name_error():
    """Issue 34: the handler of what a server sends unasked named a class agentflow never
    imported, so every message it got (a list_changed notification, a line on a stdio
    server's stdout that is not JSON-RPC, delivered as an exception) raised NameError,
    which the SDK printed with its traceback at start-up. A notification is noted, so
    ``relist()`` reads the list again; anything else is passed over."""
    import asyncio
    from mcp.types import ToolListChangedNotification
    server = MCPServer.http("http://127.0.0.1:9/mcp")  # never started: only its handler
    asyncio.run(server._on_message(ValueError("Server running on stdio")))
    assert server._list_changed is False
    asyncio.run(server._on_message(ToolListChangedNotification()))
    assert server._list_changed is True


def test_an_explicit_approval_setting_still_decides_a_changed_tool(tmp_path):
    """``approval={"peek": False}`` is the person's own word about that tool: it
    decides even after the server redefines it."""
    (tmp_path / "secret.txt").write_text("x\n", encoding="utf-8")
    url, stop = serve_http_here("shifty", tmp_path)
    server = MCPServer.http(url, timeout=10, start_timeout=30,
                            approval={"peek": False}).start()
    try:
        server.call("redefine", {})
        assert by_name(server)["peek"].requires_approval() is False
    finally:
        server.stop()
        stop()


def test_a_result_is_capped(tmp_path):
    """A server's result is cut to ``result_cap`` bytes, saying how much was cut, so
    it cannot flood the model (an 8 MB result went to the model whole)."""
    url, stop = serve_http_here("big", tmp_path)
    server = MCPServer.http(url, timeout=10, start_timeout=30, result_cap=1000).start()
    try:
        text = by_name(server)["echo"].invoke({"text": "é" * 5000})
    finally:
        server.stop()
        stop()
    kept, note = text.split("\n[... ")
    assert kept == "big: " + "é" * 497  # 5 + 2 × 497 = 999 bytes: whole characters only
    assert len(kept.encode("utf-8")) <= 1000
    cut = len(("big: " + "é" * 5000).encode("utf-8")) - len(kept.encode("utf-8"))
    assert note == f"{cut} more bytes cut: the MCP result cap is 1000 bytes]"


def test_a_rule_can_name_a_tool_whose_name_holds_a_space(changing):
    """Issue 26: a tool named ``shout it`` could be named by no rule. In double quotes
    it can (SPEC R19), and the rule reads back as written."""
    from agentflow import ApprovalPolicy
    from agentflow.gate import gate_verdict
    from agentflow.policy import Rule
    from agentflow.types import Decision
    server, _notes = changing
    shout = by_name(server)["shout it"]
    assert shout.requires_approval() is True  # no annotations: asks
    policy = ApprovalPolicy(allow=['"shifty.shout it"'])
    policy.check(server.tools)
    assert gate_verdict(shout, {"text": "hello there"}, [policy]).action is Decision.ALLOW
    other = ApprovalPolicy(allow=['"shifty.shout"'], name="other")
    assert gate_verdict(shout, {"text": "hi"}, [other]).action is Decision.ASK
    assert str(Rule.parse('"shifty.shout it"(hello *)')) == '"shifty.shout it"(hello *)'


def test_the_command_line_overrides_a_servers_annotations(changing, tmp_path):
    """``--mcp-approval NAME.TOOL=ask`` makes a read-only tool ask; ``NAME=run`` lets
    every tool of the server run unasked (the person's word, not the server's)."""
    from agentflow.cli.main import main
    server, _notes = changing
    url = server.describe()
    import contextlib
    import io
    for extra, word in ((["--mcp-approval", "shifty.echo=ask"], "asks"),
                        ([], "runs without asking"),
                        (["--mcp-approval", "shifty=run"], "runs without asking")):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = main(["policy", "check", "shifty.echo", "--mcp", f"shifty={url}",
                           *extra])
        assert (status, out.getvalue().splitlines()[0]) == (0, f"shifty.echo: {word}")
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["policy", "check", "shifty.echo", "--mcp", f"shifty={url}",
                     "--mcp-approval", "shifty.echo=maybe"]) == 2
    assert "write NAME=ask" in err.getvalue()
