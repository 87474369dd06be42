"""MCP servers as tools, behind the same approval gate (issue 17; SPEC R3, R4, R13, R16).

Everything here talks to real MCP servers: ``tests/mcp_server.py`` (written with the SDK's
own server class) over stdio and over streamable HTTP on 127.0.0.1, and the reference
Node server ``@modelcontextprotocol/server-filesystem`` that ``make test`` installs into
``.node-tools``. The model is a ``ReplayServer`` on loopback HTTP. Servers start once per
module; tests that kill one restart it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from agentflow import (AgentRunOptions, AgentSession, ChatClientAgent, FinishReason,
                       OpenAIChatClient, ToolApprovalRequest, ToolApprovalResponse, ToolResult)
from agentflow.testing.replay import ReplayServer, chat_stream

REPO = pathlib.Path(__file__).resolve().parent.parent
SERVER = str(REPO / "tests" / "mcp_server.py")
FILESYSTEM = REPO / ".node-tools" / "node_modules" / ".bin" / "mcp-server-filesystem"


def need(available: bool, what: str) -> None:
    """Skip when a real part cannot be had here; under CI=true its absence is a failure."""
    if not available:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} is missing; make test installs it")
        pytest.skip(f"{what} is not installed (make test installs it)",
                    allow_module_level=True)


try:
    from agentflow.mcp import MCPError, MCPServer, MCPTimeoutError, MCPToolError, wire_name
except ImportError:  # no SDK: every test below needs it
    need(False, "the MCP SDK (pip install -e '.[mcp]')")


def calls(directory: pathlib.Path) -> list[str]:
    """The tools that really ran on a test server, in order (its calls.log)."""
    log = directory / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def run(agent, messages, session, responses=()) -> list:
    """One run to its end; ``responses`` answer the paused calls (SPEC R4)."""
    options = AgentRunOptions().with_tool_approval_responses(list(responses))
    return list(agent.run(messages, session, options))


@contextlib.contextmanager
def agent_for(bodies, tools):
    """``(agent, model)``: an agent offered ``tools`` whose model is a ``ReplayServer``
    serving ``bodies`` in order, for the length of the with block."""
    with ReplayServer(bodies) as model:
        client = OpenAIChatClient(model="test-model", base_url=model.base_url,
                                  api_key="sk-test", max_retries=0)
        yield ChatClientAgent(client, tools=tools), model


def sent_tool_messages(request) -> list[dict]:
    return [m for m in request.json["messages"] if m["role"] == "tool"]


# -- the servers (one of each per module) ----------------------------------------------------

def spawn_http_server(name: str, directory: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, SERVER, name, str(directory), "http"],
                            stdout=subprocess.PIPE, text=True)


def http_url(process: subprocess.Popen) -> str:
    line = process.stdout.readline()  # "port N" once it listens
    assert line.startswith("port "), f"the HTTP test server did not start: {line!r}"
    return f"http://127.0.0.1:{int(line.split()[1])}/mcp"


def serve_http_here(name: str, directory: pathlib.Path):
    """The same server over streamable HTTP, served on a thread of this process, which
    has imported the SDK already. Returns ``(url, stop)``."""
    from mcp_server import build, serve_in_thread

    return serve_in_thread(build(name, directory))


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Every server of this module, started side by side (a process of the SDK spends
    about a second importing it). Keys: ``notes`` (an ``MCPServer`` over stdio), ``web``
    (over HTTP, served in this process) and ``web_url``, ``gone_url`` (an HTTP server
    process for one test to kill), ``filesystem`` (the reference server, or ``None``
    when it is not installed), and the directories ``<key>_dir``."""
    dirs = {key: tmp_path_factory.mktemp(key) for key in ("notes", "web", "gone", "fs")}
    processes = {"gone": spawn_http_server("gone", dirs["gone"])}
    got = {f"{key}_dir": path for key, path in dirs.items()}
    got["web_url"], stop_web = serve_http_here("web", dirs["web"])
    got["notes"] = MCPServer.stdio(sys.executable, [SERVER, "notes", str(dirs["notes"]), "stdio"],
                                   timeout=10, start_timeout=30)
    got["filesystem"] = (MCPServer.stdio(str(FILESYSTEM), [str(dirs["fs"])], name="filesystem",
                                         timeout=10, start_timeout=30)
                         if FILESYSTEM.exists() else None)

    def web():
        got["web"] = MCPServer.http(got["web_url"], timeout=10, start_timeout=30).start()

    def gone():
        got["gone_url"] = http_url(processes["gone"])

    starts = [got["notes"].start, web, gone]
    if got["filesystem"] is not None:
        starts.append(got["filesystem"].start)
    try:
        with concurrent.futures.ThreadPoolExecutor(len(starts)) as pool:
            for future in [pool.submit(start) for start in starts]:
                future.result()
        yield got
    finally:
        for key in ("web", "notes", "filesystem"):
            if got.get(key) is not None:
                got[key].stop()
        stop_web()
        for process in processes.values():
            process.kill()
            process.wait(10)


@pytest.fixture
def notes(servers):
    """tests/mcp_server.py over stdio; it names itself 'notes'."""
    return servers["notes"]


@pytest.fixture
def web(servers):
    """tests/mcp_server.py over streamable HTTP; it names itself 'web'."""
    return servers["web"]


@pytest.fixture
def filesystem(servers):
    need(servers["filesystem"] is not None,
         "the reference MCP server @modelcontextprotocol/server-filesystem")
    return servers["filesystem"]


def by_name(server) -> dict:
    return {t.mcp_name: t for t in server.tools}


# -- the SDK stays optional -------------------------------------------------------------------

def test_import_agentflow_does_not_import_the_mcp_sdk():
    """Core install: requests only; ``import agentflow`` (and the CLI's modules) never
    load the SDK, which only ``agentflow.mcp`` imports."""
    code = ("import sys, agentflow, agentflow.cli.chat, agentflow.cli.main, agentflow.tools\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('mcp', 'mcp_types', 'anyio', 'httpx2', 'pydantic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    # those are the SDK's real module names: this process imported agentflow.mcp
    assert {"mcp", "mcp_types", "anyio", "pydantic"} <= set(sys.modules)


# -- tools as listed by the server --------------------------------------------------------------

def test_tools_keep_the_servers_names_descriptions_and_schemas(notes):
    tools = by_name(notes)
    write = tools["write_note"]
    assert (write.name, write.qualified_name) == ("notes__write_note", "notes.write_note")
    assert write.description == "Write text to the note called name, replacing it."
    assert write.parameters["type"] == "object"
    assert write.parameters["required"] == ["name", "text"]
    assert write.parameters["properties"]["text"]["type"] == "string"
    # a dot is allowed in MCP names, not in OpenAI function names: it becomes "_" on the
    # wire, and stays in the qualified name people and policies use
    dotted = tools["search.notes"]
    assert (dotted.name, dotted.qualified_name) == ("notes__search_notes", "notes.search.notes")
    assert notes.name == "notes"  # the name the server gave itself


def test_wire_names_fit_openai_function_names():
    """OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``. Long names are cut and made unique by a hash."""
    long_a, long_b = "x" * 70 + "a", "x" * 70 + "b"
    a, b = wire_name("server", long_a), wire_name("server", long_b)
    assert len(a) == len(b) == 64 and a != b
    assert a == wire_name("server", long_a)  # stable across processes
    assert wire_name("fs", "what/ever.tool name") == "fs__what_ever_tool_name"
    with pytest.raises(ValueError, match="server name"):
        MCPServer.stdio("x", name="bad.name")
    with pytest.raises(ValueError, match="server name"):
        MCPServer.stdio("x", name="two__underscores")


def test_command_line_specs():
    """``agentflow chat --mcp '[NAME=]COMMAND ARGS…'`` or ``'[NAME=]URL'``."""
    server = MCPServer.from_command_line("fs=npx -y pkg './my dir'")
    assert (server.name, server.describe()) == ("fs", "npx -y pkg './my dir'")
    server = MCPServer.from_command_line("python -c 'x=1'")  # '=' in a command, no name
    assert (server.name, server.describe()) == ("", "python -c x=1")
    server = MCPServer.from_command_line("http://127.0.0.1:1/mcp")
    assert (server.name, server.describe()) == ("", "http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError, match="No closing quotation"):
        MCPServer.from_command_line("python 'x")


# -- approval defaults from annotations; the user's overrides ------------------------------------

def test_annotations_decide_who_asks(notes):
    tools = by_name(notes)
    asks = {name: tool.requires_approval() for name, tool in tools.items()}
    assert asks["read_note"] is False          # readOnlyHint: runs without asking
    assert asks["echo"] is False
    assert asks["write_note"] is True          # no annotations: asks
    assert asks["tag_note"] is True            # not read-only (idempotent does not matter)
    assert asks["purge"] is True               # read-only *and* destructive: fail closed
    assert tools["tag_note"].idempotent is True        # idempotentHint (SPEC R16)
    assert tools["write_note"].idempotent is False
    assert tools["read_note"].approval_reason == "readOnlyHint"


def test_the_reference_filesystem_servers_annotations(filesystem):
    tools = by_name(filesystem)
    assert not tools["read_text_file"].requires_approval()
    assert not tools["list_directory"].requires_approval()
    assert tools["write_file"].requires_approval() and tools["write_file"].idempotent
    assert tools["edit_file"].requires_approval() and not tools["edit_file"].idempotent
    assert tools["move_file"].requires_approval()


def test_approval_overrides_per_tool_and_for_the_rest(servers):
    web_url = servers["web_url"]
    # a second client of the running HTTP server: no new process
    with MCPServer.http(web_url, name="strict", approval={"read_note": True, "*": False}) as s:
        tools = by_name(s)
        assert tools["read_note"].requires_approval() is True     # asked for
        assert tools["write_note"].requires_approval() is False   # "*"
        assert tools["read_note"].approval_reason == "approval['read_note']"
    with MCPServer.http(web_url, name="careful", approval=True) as s:
        assert all(t.requires_approval() for t in s.tools)


def test_approval_values_must_be_true_or_false():
    with pytest.raises(TypeError, match="True/False"):
        MCPServer.stdio("x", approval={"write_file": None})  # None must not mean "run"
    with pytest.raises(TypeError, match="True/False"):
        MCPServer.stdio("x", approval="ask")


def test_approval_naming_a_tool_the_server_lacks_is_an_error(servers):
    server = MCPServer.http(servers["web_url"], approval={"wirte_note": True})
    with pytest.raises(MCPError, match="wirte_note.*it has: read_note, write_note"):
        server.start()
    assert not server.running


# -- results ------------------------------------------------------------------------------------

def test_results_text_structured_and_attachments(notes):
    tools = by_name(notes)
    assert tools["echo"].invoke({"text": "hi"}) == "notes: hi"
    # structured content and no text: JSON
    assert json.loads(tools["stats"].invoke({})) == {"notes": 2, "tags": ["a", "b"]}
    # structured content with its JSON as text: the text, once
    assert json.loads(tools["count"].invoke({"word": "w"})) == {"w": 2}
    # images and resources: type and size in bytes, one line each
    assert tools["attachments"].invoke({}).splitlines() == [
        "three attachments",
        "[image: image/png, 100 bytes]",
        "[resource note://a: text/plain, 6 bytes]",
        "[resource note://b: application/zip, 1000 bytes]"]


def test_is_error_becomes_an_error_result_for_the_model(notes):
    """R13: ``isError`` raises; the loop reports ``Error: MCPToolError: <server's text>``
    and goes on."""
    with pytest.raises(MCPToolError, match="boom"):
        by_name(notes)["fail"].invoke({"message": "boom"})
    bodies = [chat_stream(tool_calls=[("c1", "notes__fail", '{"message": "no disk"}')]),
              chat_stream(text="It failed.")]
    with agent_for(bodies, notes.tools) as (agent, model):
        updates = run(agent, "try", AgentSession())
    result = next(u for u in updates if isinstance(u, ToolResult))
    assert result.result == "Error: MCPToolError: Error executing tool fail: no disk"
    assert updates[-1].finish_reason is FinishReason.STOP


def test_a_call_the_server_refuses_is_a_typed_error(notes):
    """A JSON-RPC error instead of a result is an ``MCPError`` naming the call and the
    server's message; the server stays usable."""
    with pytest.raises(MCPError, match=r"the MCP server 'notes' refused the call to 'refuse': "
                                       r"refused on purpose \(JSON-RPC error -32602\)"):
        by_name(notes)["refuse"].invoke({})
    assert notes.running


def test_a_json_rpc_error_s_message_is_masked_as_a_result_is(notes, tmp_path):
    """SPEC R27: a value of the workspace's .env is masked in every result the model is
    sent, and the server's JSON-RPC error text is one (it reached the model unmasked)."""
    from agentflow.cli.servers import mask_results_of
    (tmp_path / ".env").write_text('NOTE_TOKEN="refused on purpose"\n')
    before = notes.secrets
    mask_results_of([notes], str(tmp_path), ())
    try:
        with pytest.raises(MCPError) as caught:
            by_name(notes)["refuse"].invoke({})
    finally:
        notes.secrets = before
    assert "on purpose" not in str(caught.value) and "***" in str(caught.value)
    assert str(caught.value).endswith("(JSON-RPC error -32602)")


# -- the approval gate with MCP tools (SPEC R3, R4) ------------------------------------------------

def test_gated_write_pauses_then_runs_once_approved(notes, servers):
    notes_dir = servers["notes_dir"]
    before = calls(notes_dir)
    bodies = [chat_stream(tool_calls=[("w1", "notes__write_note", '{"name": "todo", "text": "milk"}')]),
              chat_stream(text="Saved.")]
    session = AgentSession()
    with agent_for(bodies, notes.tools) as (agent, model):
        updates = run(agent, "note: milk", session)
        request = next(u for u in updates if isinstance(u, ToolApprovalRequest))
        assert (request.name, request.arguments) == ("notes__write_note",
                                                     {"name": "todo", "text": "milk"})
        assert request.description == "Write text to the note called name, replacing it."
        assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
        assert calls(notes_dir) == before and not (notes_dir / "todo").exists()  # nothing ran

        updates = run(agent, [], session, [ToolApprovalResponse("w1", True, digest=request.digest)])
    assert (notes_dir / "todo").read_text() == "milk"
    assert calls(notes_dir) == before + ["write_note"]
    assert sent_tool_messages(model.requests[1]) == [
        {"role": "tool", "content": "wrote 4 characters to todo", "tool_call_id": "w1"}]
    assert updates[-1].finish_reason is FinishReason.STOP


def test_reference_server_read_runs_write_waits_and_rejection_writes_nothing(filesystem, servers):
    fs_dir = servers["fs_dir"]
    (fs_dir / "a.txt").write_text("alpha")
    target = str(fs_dir / "b.txt")
    bodies = [chat_stream(tool_calls=[("r1", "filesystem__read_text_file",
                                       json.dumps({"path": str(fs_dir / "a.txt")}))]),
              chat_stream(tool_calls=[("w1", "filesystem__write_file",
                                       json.dumps({"path": target, "content": "beta"}))]),
              chat_stream(tool_calls=[("w2", "filesystem__write_file",
                                       json.dumps({"path": target, "content": "gamma"}))]),
              chat_stream(text="Done.")]
    session = AgentSession()
    with agent_for(bodies, filesystem.tools) as (agent, model):
        updates = run(agent, "copy a to b", session)   # the read ran without asking
        assert sent_tool_messages(model.requests[1])[0]["content"] == "alpha"
        assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
        assert not os.path.exists(target)
        updates = run(agent, [], session, [ToolApprovalResponse("w1", False, "not b")])
        assert not os.path.exists(target)                  # rejected: nothing written
        assert sent_tool_messages(model.requests[2])[-1]["content"] == "Rejected: not b"
        assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
        run(agent, [], session, [ToolApprovalResponse("w2", True)])
    assert pathlib.Path(target).read_text() == "gamma"
    assert sent_tool_messages(model.requests[3])[-1]["content"].startswith("Successfully wrote")


# -- failures: a server that dies, a slow tool ------------------------------------------------------

def test_server_dying_mid_call_is_a_typed_error_and_nothing_runs_twice(notes, servers):
    notes_dir = servers["notes_dir"]
    before = calls(notes_dir)
    bodies = [chat_stream(tool_calls=[("k1", "notes__crash", "{}")]),
              chat_stream(text="The server crashed."),
              chat_stream(tool_calls=[("e1", "notes__echo", '{"text": "still there?"}')]),
              chat_stream(text="No."),
              chat_stream(tool_calls=[("e2", "notes__echo", '{"text": "back"}')]),
              chat_stream(text="Yes.")]
    session = AgentSession()
    try:
        with agent_for(bodies, notes.tools) as (agent, model):
            updates = run(agent, "crash it", session)
            died = next(u for u in updates if isinstance(u, ToolResult)).result
            assert died.startswith("Error: MCPError: the MCP server 'notes' closed the "
                                   "connection during the call to 'crash'")
            assert "not retried" in died and "restart" in died.lower()
            assert updates[-1].finish_reason is FinishReason.STOP
            assert not notes.running
            # the session is valid: every call has its result; the next run goes on
            assert [m.role.value for m in session.messages] == ["user", "assistant", "tool",
                                                                "assistant"]
            updates = run(agent, "again", session)
            assert next(u for u in updates if isinstance(u, ToolResult)).result.startswith(
                "Error: MCPError: the MCP server 'notes' is not running")
            notes.restart()
            updates = run(agent, "and now?", session)
            assert next(u for u in updates if isinstance(u, ToolResult)).result == "notes: back"
    finally:
        notes.start()  # leave the shared server running for the other tests
    # the crashing call ran once; the refused one never reached a server
    assert calls(notes_dir) == before + ["crash", "echo"]
    assert session.pending_tool_calls == []


def test_http_server_dying_mid_call(servers):
    with MCPServer.http(servers["gone_url"], timeout=10) as server:
        crash = by_name(server)["crash"]
        with pytest.raises(MCPError, match="closed the connection during the call to 'crash'"):
            crash.invoke({})
        assert not server.running
        with pytest.raises(MCPError, match="is not running"):
            by_name(server)["echo"].invoke({"text": "x"})
    assert calls(servers["gone_dir"]) == ["crash"]


def test_slow_tool_times_out_and_the_server_stays_usable(notes, monkeypatch):
    slow = by_name(notes)["slow"]
    monkeypatch.setattr(slow, "timeout", 0.1)  # the call takes 20 s: it cannot beat this
    bodies = [chat_stream(tool_calls=[("s1", "notes__slow", '{"seconds": 20}')]),
              chat_stream(text="Too slow.")]
    with agent_for(bodies, notes.tools) as (agent, model):
        updates = run(agent, "wait", AgentSession())
    result = next(u for u in updates if isinstance(u, ToolResult)).result
    assert result == ("Error: MCPTimeoutError: notes.slow gave no answer within 0.1 s and was "
                      "cancelled; it may have partly run on the server and was not retried")
    assert notes.running
    assert by_name(notes)["echo"].invoke({"text": "ok"}) == "notes: ok"
    with pytest.raises(MCPTimeoutError):
        notes.call("slow", {"seconds": 20}, timeout=0.1)


# -- two servers ------------------------------------------------------------------------------------

def test_same_tool_name_on_two_servers_does_not_collide(notes, web):
    """Both servers have ``echo``; each call reaches its own server."""
    bodies = [chat_stream(tool_calls=[("a", "notes__echo", '{"text": "one"}'),
                                      ("b", "web__echo", '{"text": "two"}')]),
              chat_stream(text="Both answered.")]
    with agent_for(bodies, [*notes.tools, *web.tools]) as (agent, model):
        run(agent, "echo twice", AgentSession())
        offered = [t["function"]["name"] for t in model.requests[0].json["tools"]]
    assert "notes__echo" in offered and "web__echo" in offered
    assert [m["content"] for m in sent_tool_messages(model.requests[1])] == ["notes: one",
                                                                              "web: two"]


def test_two_servers_of_the_same_name_are_refused(notes, servers):
    with MCPServer.http(servers["web_url"], name="notes") as twin:
        with pytest.raises(ValueError, match="notes__echo"):
            ChatClientAgent(OpenAIChatClient(api_key="k"), tools=[*notes.tools, *twin.tools])


def test_a_server_that_cannot_start_says_why():
    with pytest.raises(MCPError, match="could not start the MCP server no-such-mcp-server.*"
                                       "FileNotFoundError"):
        MCPServer.stdio("no-such-mcp-server").start()
    # never answers: start_timeout is a wait this test must outlast, never one it must beat
    silent = MCPServer.stdio("sh", ["-c", "cat >/dev/null"], start_timeout=0.1)
    with pytest.raises(MCPError, match=r"the MCP server sh -c 'cat >/dev/null' did not answer "
                                       r"within 0.1 s \(start_timeout\)"):
        silent.start()
    assert not silent.running
    with pytest.raises(MCPError, match="is not running: start it first"):
        MCPServer.stdio("unused").call("echo", {})


# -- the command line -------------------------------------------------------------------------------

def test_chat_lists_mcp_tools_and_gates_them_like_built_ins(servers, monkeypatch, capsys):
    """``agentflow chat --mcp``: the tools are listed at start; a read-only one runs, a
    write waits for approval (here refused by --deny-all). In this process, to save
    a second import of the SDK; tests/test_cli_chat.py covers the command as a process."""
    from agentflow.cli.main import main

    web_url = servers["web_url"]
    bodies = [chat_stream(tool_calls=[("e1", "site__echo", '{"text": "hi"}')]),
              chat_stream(tool_calls=[("w1", "site__write_note", '{"name": "x", "text": "y"}')]),
              chat_stream(text="Could not write.")]
    with ReplayServer(bodies) as model:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        status = main(["chat", "--tools", "none", "--mcp", f"site={web_url}", "--deny-all",
                       "write x"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"MCP server site ({web_url}): 16 tools" in out
    assert re.search(r"\n  site__write_note +asks \(not read-only\)\n", out)
    assert re.search(r"\n  site__echo +runs \(readOnlyHint\)\n", out)
    assert sent_tool_messages(model.requests[1]) == [
        {"role": "tool", "content": "web: hi", "tool_call_id": "e1"}]
    assert sent_tool_messages(model.requests[2])[-1]["content"] == "Rejected: denied by --deny-all"
    assert not (servers["web_dir"] / "x").exists()
