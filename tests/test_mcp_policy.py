"""Approval policies on MCP tools (issue 17 with issue 14; SPEC R19): rules name a tool
``server.tool`` and match a pattern on the subject read from the server's input schema.

One real MCP server for the module, written here with the SDK's own server class and
served over streamable HTTP by uvicorn on a thread of this process (as tests/test_mcp.py
does; the SDK's import is the costly part). Its tools keep files in a folder of their own
and record every call in ``RAN``, so a test sees what really ran. The model is a
``ReplayServer`` on loopback HTTP.
"""

from __future__ import annotations

import json
import os

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalPolicy, ApprovalRequiredTool,
                       ChatClientAgent, FinishReason, OpenAIChatClient, ToolApprovalRequest)
from agentflow.cli.servers import mcp_summary
from agentflow.errors import PolicyError
from agentflow.policy import decide, exact_rules, policy_name
from agentflow.testing.replay import ReplayServer, chat_stream

from test_cli_policy import in_process  # noqa: F401  (a fixture)
from test_mcp import need

try:
    from agentflow.mcp import MCPError, MCPServer, infer_subject
except ImportError:
    need(False, "the MCP SDK (pip install -e '.[mcp]')")

RAN: list[tuple[str, object]] = []  # (tool, its path argument) for every call that ran


def build(directory):
    """A filesystem-like server keeping its files under ``directory``; relative paths
    are relative to it, as the reference filesystem server does with its folder."""
    from mcp.server.mcpserver import MCPServer as SDKServer
    from mcp.types import ToolAnnotations

    server = SDKServer("files", log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True)

    def where(path: str):
        return directory / os.path.expanduser(path)

    @server.tool()
    def write_file(path: str, content: str) -> str:
        """Write content to the file at path."""
        RAN.append(("write_file", path))
        where(path).parent.mkdir(parents=True, exist_ok=True)
        where(path).write_text(content, encoding="utf-8")
        return f"wrote {path}"

    @server.tool(annotations=read_only)
    def read_file(path: str) -> str:
        """Read the file at path."""
        RAN.append(("read_file", path))
        return where(path).read_text(encoding="utf-8")

    @server.tool(annotations=read_only)
    def read_multiple_files(paths: list[str]) -> str:
        """Read several files."""
        RAN.append(("read_multiple_files", paths))
        return "\n".join(where(p).read_text(encoding="utf-8") for p in paths)

    @server.tool()
    def move_file(source: str, destination: str) -> str:
        """Move a file (two paths: no subject of its own)."""
        RAN.append(("move_file", destination))
        where(source).rename(where(destination))
        return "moved"

    @server.tool()
    def run(command: str) -> str:
        """Pretend to run a command line."""
        RAN.append(("run", command))
        return "ran"

    @server.tool(annotations=read_only)
    def fetch(url: str, filePath: str = "") -> str:
        """Pretend to fetch a URL (filePath is optional, so not a subject)."""
        RAN.append(("fetch", url))
        return "fetched"

    return server


@pytest.fixture(scope="module")
def files_url(tmp_path_factory):
    """``(url, directory)`` of the module's one MCP server."""
    from mcp_server import serve_in_thread

    directory = tmp_path_factory.mktemp("files")
    url, stop = serve_in_thread(build(directory))
    yield url, directory
    stop()


@pytest.fixture(scope="module")
def fs(files_url):
    """A client of that server named ``filesystem``, its root the server's folder."""
    url, directory = files_url
    with MCPServer.http(url, name="filesystem", root=str(directory), timeout=10,
                        start_timeout=30) as server:
        yield server


def tool(server, name):
    return next(t for t in server.tools if t.mcp_name == name)


def effect(layers, tool_, arguments):
    verdict, _ = decide(layers, tool_, arguments)
    return None if verdict is None else verdict.effect


# -- subjects from the schema ------------------------------------------------------------------

STRING = {"type": "string"}


@pytest.mark.parametrize("properties, required, expected", [
    ({"path": STRING, "content": STRING}, ["path", "content"], ("path", "path")),
    ({"paths": {"type": "array", "items": STRING}}, ["paths"], ("paths", "path")),
    ({"filePath": STRING}, ["filePath"], ("filePath", "path")),
    ({"file_path": STRING}, ["file_path"], ("file_path", "path")),
    ({"FILENAME": STRING}, ["FILENAME"], ("FILENAME", "path")),
    ({"directory": {"type": ["string", "null"]}}, ["directory"], ("directory", "path")),
    ({"command": STRING, "timeout": {"type": "number"}}, ["command"], ("command", "shell")),
    ({"cmd": STRING}, ["cmd"], ("cmd", "shell")),
    ({"url": STRING}, ["url"], ("url", "text")),
    ({"uri": STRING}, ["uri"], ("uri", "text")),
    # no subject: none required, two candidates, a wrong type, names that say nothing
    ({"path": STRING}, [], (None, "text")),
    ({"path": STRING, "url": STRING}, ["path", "url"], (None, "text")),
    ({"source": STRING, "destination": STRING}, ["source", "destination"], (None, "text")),
    ({"path": {"type": "integer"}}, ["path"], (None, "text")),
    ({"command": {"type": "array", "items": STRING}}, ["command"], (None, "text")),
    ({"pathway": STRING}, ["pathway"], (None, "text")),
    ({}, ["path"], (None, "text")),
])
def test_the_subject_is_the_one_required_argument_whose_name_says_what_it_is(
        properties, required, expected):
    schema = {"type": "object", "properties": properties, "required": required}
    assert infer_subject(schema) == expected


def test_listed_tools_get_their_subjects_and_qualified_names(fs):
    got = {t.mcp_name: (t.qualified_name, t.subject, t.subject_kind) for t in fs.tools}
    assert got == {
        "write_file": ("filesystem.write_file", "path", "path"),
        "read_file": ("filesystem.read_file", "path", "path"),
        "read_multiple_files": ("filesystem.read_multiple_files", "paths", "path"),
        "move_file": ("filesystem.move_file", None, "text"),
        "run": ("filesystem.run", "command", "shell"),
        "fetch": ("filesystem.fetch", "url", "text"),
    }
    assert tool(fs, "write_file").workspace == str(fs.root)
    assert policy_name(ApprovalRequiredTool(tool(fs, "write_file"))) == "filesystem.write_file"
    assert mcp_summary(fs).splitlines()[-1] == (
        "  policy rules name them filesystem.TOOL; patterns match write_file(path), "
        "read_file(path), read_multiple_files(paths), run(command), fetch(url); "
        f"paths from {fs.root}")


def test_subjects_override_the_schema_per_tool(files_url):
    url, directory = files_url
    with MCPServer.http(url, name="fs2", subjects={
            "move_file": ("destination", "path"), "fetch": None, "write_file": "path"}) as server:
        assert (tool(server, "move_file").subject, tool(server, "move_file").subject_kind) == (
            "destination", "path")
        assert tool(server, "fetch").subject is None
        assert tool(server, "write_file").subject_reason == "subjects['write_file']"
        assert tool(server, "read_file").subject_reason == "from its schema"


@pytest.mark.parametrize("subjects, message", [
    ({"delete_file": "path"}, "subjects names tools the MCP server 'fs3' does not have: "
                              "delete_file"),
    ({"write_file": "filename"}, "names the argument 'filename', which fs3.write_file does "
                                 "not have"),
    ({"write_file": "content"}, r"say how 'content' is matched: \('content', 'path'"),
])
def test_subjects_that_cannot_be_used_stop_the_start(files_url, subjects, message):
    server = MCPServer.http(files_url[0], name="fs3", subjects=subjects)
    with pytest.raises(MCPError, match=message):
        server.start()
    assert not server.running


def test_subjects_of_the_wrong_shape_are_refused_at_once():
    with pytest.raises(TypeError, match="subjects is a dict of MCP tool name"):
        MCPServer.http("http://127.0.0.1:9/mcp", subjects={"write_file": ("path", "file")})


def test_the_root_of_a_stdio_server_is_its_first_folder_argument(tmp_path, monkeypatch):
    """The reference filesystem server resolves relative paths against its first
    allowed folder; without one the child's working directory is the root."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    npx = ["-y", "@modelcontextprotocol/server-filesystem"]
    assert MCPServer.stdio("npx", [*npx, "./work", "/"]).root == str(tmp_path / "work")
    assert MCPServer.stdio("npx", [*npx, "work"], cwd="work").root == str(tmp_path / "work")
    assert MCPServer.stdio("npx", npx).root == str(tmp_path)
    assert MCPServer.stdio("npx", [*npx, "work"], root="..").root == str(tmp_path.parent)
    assert MCPServer.http("http://127.0.0.1:9/mcp").root == str(tmp_path)


# -- rules by qualified name, patterns on paths ------------------------------------------------

def test_path_patterns_match_paths_relative_to_the_root_and_absolute(fs):
    write, read_many = tool(fs, "write_file"), tool(fs, "read_multiple_files")
    policy = ApprovalPolicy(deny=["filesystem.write_file(**/.env)"],
                            ask=["filesystem.read_multiple_files(private/**)"],
                            allow=["filesystem.write_file(src/**)",
                                   "filesystem.read_multiple_files(docs/*)"])
    policy.check(fs.tools)
    root = fs.root
    for path, expected in [
            ("src/a.txt", "allow"), (f"{root}/src/deep/b.py", "allow"),
            ("./src/../src/c.txt", "allow"),
            ("src/../secret.txt", None),          # outside src once .. is collapsed
            ("/etc/src/a.txt", None),              # src/** is under the root only
            ("src/.env", "deny"), (f"{root}/.env", "deny"),
            ("~/src/a.txt", None)]:                # the home folder's src
        assert effect([policy], write, {"path": path, "content": ""}) == expected, path
    # a list of paths: an allow must cover each, a deny or ask that hits one decides
    assert effect([policy], read_many, {"paths": ["docs/a", "docs/b"]}) == "allow"
    assert effect([policy], read_many, {"paths": ["docs/a", "notes/b"]}) is None
    assert effect([policy], read_many, {"paths": ["docs/a", "private/k"]}) == "ask"


def test_home_paths_are_the_home_folder_as_the_server_reads_them(fs):
    policy = ApprovalPolicy(deny=["filesystem.read_file(~/.ssh/**)"])
    read = tool(fs, "read_file")
    assert effect([policy], read, {"path": "~/.ssh/id_ed25519"}) == "deny"
    assert effect([policy], read, {"path": os.path.expanduser("~/.ssh/id_ed25519")}) == "deny"


def test_shell_and_text_subjects_of_mcp_tools(fs):
    policy = ApprovalPolicy(deny=["filesystem.run(rm -rf *)"],
                            allow=["filesystem.run(git status)",
                                   "filesystem.fetch(https://docs.example/*)"])
    run_, fetch = tool(fs, "run"), tool(fs, "fetch")
    assert effect([policy], run_, {"command": "git status"}) == "allow"
    assert effect([policy], run_, {"command": "git status && rm -rf /"}) == "deny"
    assert effect([policy], fetch, {"url": "https://docs.example/a"}) == "allow"
    assert effect([policy], fetch, {"url": "https://evil.example/a"}) is None


def test_allow_from_now_on_writes_rules_with_the_qualified_name(fs):
    write = tool(fs, "write_file")
    assert exact_rules(write, {"path": f"{fs.root}/src/a.txt", "content": "x"}) == [
        "filesystem.write_file(src/a.txt)"]
    assert exact_rules(tool(fs, "move_file"), {"source": "a", "destination": "b"}) == [
        "filesystem.move_file"]


# -- rules that can never match are refused when the policy is loaded --------------------------

@pytest.mark.parametrize("rule, message", [
    ("filesystem.delete_file(src/**)", "there is no tool 'filesystem.delete_file' "
                                       r"\(tools: filesystem.fetch, filesystem.move_file"),
    ("files.write_file(src/**)", r"there is no MCP server 'files' among the tools \(MCP "
                                 r"servers: filesystem\)"),
    ("filesystem__write_file(src/**)", "'filesystem__write_file' is the name the model sees "
                                       "for the MCP tool filesystem.write_file; rules name "
                                       r"MCP tools server.tool: write "
                                       r"filesystem.write_file\(src/\*\*\)"),
    ("filesystem.move_file(src/**)", r"declares no subject .* subjects=\{'move_file': "
                                     "ARGUMENT}"),
])
def test_a_rule_naming_an_mcp_tool_that_cannot_match_is_refused_at_load(
        fs, tmp_path, rule, message):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"allow": [rule]}), encoding="utf-8")
    with pytest.raises(PolicyError, match=message) as caught:
        ChatClientAgent(OpenAIChatClient(model="m", base_url="http://127.0.0.1:9/v1",
                                         api_key="sk-test"),
                        tools=fs.tools, policy=ApprovalPolicy.load(path, "project"))
    assert str(caught.value).startswith(f"{path}: allow rule {rule!r}: ")


def test_rules_of_servers_not_connected_can_be_kept(fs):
    policy = ApprovalPolicy(deny=["github.create_issue", "filesystem.write_file(**/.env)"])
    with pytest.raises(PolicyError, match="no MCP server 'github'"):
        policy.check(fs.tools)
    policy.check(fs.tools, keep_other_servers=True)  # chat: such a rule cannot apply
    with pytest.raises(PolicyError, match="no tool 'filesystem.nope'"):
        ApprovalPolicy(allow=["filesystem.nope"]).check(fs.tools, keep_other_servers=True)


# -- through the loop ----------------------------------------------------------------------------

def test_allow_deny_and_ask_by_qualified_name_through_the_loop(fs, files_url):
    """``allow`` runs a write under src/ without asking, ``deny`` answers a write of
    a .env without running or asking, ``ask`` pauses a read-only tool; the audit names
    each rule and its layer (SPEC R19)."""
    directory = files_url[1]
    (directory / "private").mkdir(exist_ok=True)
    (directory / "private" / "key.txt").write_text("k")
    project = ApprovalPolicy(deny=["filesystem.write_file(**/.env)"],
                             ask=["filesystem.read_file(private/**)"],
                             allow=["filesystem.write_file(src/**)"], name="project")
    write = {"path": "src/app.py", "content": "print(1)"}
    bodies = [chat_stream(tool_calls=[("w1", "filesystem__write_file", json.dumps(write))]),
              chat_stream(tool_calls=[("w2", "filesystem__write_file",
                                       json.dumps({"path": "src/.env", "content": "X=1"}))]),
              chat_stream(tool_calls=[("r1", "filesystem__read_file",
                                       json.dumps({"path": "private/key.txt"}))]),
              chat_stream(text="Done.")]
    session = AgentSession()
    before = len(RAN)
    with ReplayServer(bodies) as model:
        client = OpenAIChatClient(model="m", base_url=model.base_url, api_key="sk-test",
                                  max_retries=0)
        agent = ChatClientAgent(client, tools=fs.tools, policy=project)
        updates = list(agent.run("set up", session))
        [request] = [u for u in updates if isinstance(u, ToolApprovalRequest)]
        assert (request.call_id, updates[-1].finish_reason) == (
            "r1", FinishReason.AWAITING_APPROVAL)
        assert RAN[before:] == [("write_file", "src/app.py")]  # the .env was never written
        assert not (directory / "src" / ".env").exists()
        assert [m["content"] for m in model.requests[2].json["messages"]
                if m["role"] == "tool"][-1] == (
            "Rejected: denied by policy (filesystem.write_file(**/.env))")
        options = AgentRunOptions().with_tool_approval_responses([request.approve()])
        updates = list(agent.run([], session, options))
    assert updates[-1].finish_reason is FinishReason.STOP
    assert RAN[before:] == [("write_file", "src/app.py"), ("read_file", "private/key.txt")]
    assert (directory / "src" / "app.py").read_text() == "print(1)"
    assert [(r.call_id, r.tool, r.outcome, r.rule, r.layer) for r in session.audit] == [
        ("w1", "filesystem__write_file", "allowed", "filesystem.write_file(src/**)", "project"),
        ("w2", "filesystem__write_file", "denied", "filesystem.write_file(**/.env)", "project"),
        ("r1", "filesystem__read_file", "asked", "filesystem.read_file(private/**)", "project"),
        ("r1", "filesystem__read_file", "approved", "filesystem.read_file(private/**)",
         "project")]


def test_a_grant_by_qualified_name_lets_the_next_call_run(fs, files_url):
    """The answer's grant (what the chat's ``a`` writes) is a ``server.tool`` rule,
    and the next matching call runs without asking (SPEC R19)."""
    calls = [("g1", {"path": "notes/a.txt", "content": "1"}),
             ("g2", {"path": "notes/a.txt", "content": "2"})]
    bodies = [chat_stream(tool_calls=[(i, "filesystem__write_file", json.dumps(a))])
              for i, a in calls] + [chat_stream(text="Done.")]
    session = AgentSession()
    before = len(RAN)
    with ReplayServer(bodies) as model:
        client = OpenAIChatClient(model="m", base_url=model.base_url, api_key="sk-test",
                                  max_retries=0)
        agent = ChatClientAgent(client, tools=fs.tools)
        [request] = [u for u in agent.run("write", session)
                     if isinstance(u, ToolApprovalRequest)]
        [rule] = exact_rules(tool(fs, "write_file"), request.arguments)
        assert rule == "filesystem.write_file(notes/a.txt)"
        options = AgentRunOptions().with_tool_approval_responses([request.approve(grant=rule)])
        updates = list(agent.run([], session, options))
    assert updates[-1].finish_reason is FinishReason.STOP
    assert RAN[before:] == [("write_file", "notes/a.txt")] * 2
    assert session.audit[-1].outcome == "allowed"
    assert (session.audit[-1].rule, session.audit[-1].layer) == (rule, "session")


# -- the command line ----------------------------------------------------------------------------

@pytest.fixture
def in_files(in_process, files_url, monkeypatch):
    """``agentflow ARGS`` in this process (test_cli_policy's ``in_process``), run in the
    server's folder: the root of an HTTP server is our working directory."""
    monkeypatch.chdir(files_url[1])
    return in_process


def write_policy(tmp_path, **rules) -> str:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(rules), encoding="utf-8")
    return str(path)


def test_chat_honours_mcp_rules_of_its_policy_file(files_url, tmp_path, in_files, monkeypatch):
    url, directory = files_url
    policy = write_policy(tmp_path, deny=["filesystem.write_file(**/.env)", "github.create_issue"],
                          allow=["filesystem.write_file(out/**)"])
    bodies = [chat_stream(tool_calls=[
                  ("c1", "filesystem__write_file", '{"path": "out/r.txt", "content": "ok"}'),
                  ("c2", "filesystem__write_file", '{"path": "out/.env", "content": "X"}')]),
              chat_stream(text="Done.")]
    before = len(RAN)
    with ReplayServer(bodies) as model:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        status, out, err = in_files("chat", "--tools", "none", "--mcp", f"filesystem={url}",
                                    "--policy", policy, "--deny-all", "write")
    assert (status, err) == (0, "")
    assert RAN[before:] == [("write_file", "out/r.txt")]
    assert (directory / "out" / "r.txt").read_text() == "ok"
    assert [m["content"] for m in model.requests[1].json["messages"] if m["role"] == "tool"] == [
        "wrote out/r.txt", "Rejected: denied by policy (filesystem.write_file(**/.env))"]
    assert ("policy: rules about MCP server(s) github cannot apply: not connected in this "
            "chat") in out
    assert "policy rules name them filesystem.TOOL; patterns match write_file(path)" in out


def test_an_mcp_result_carries_no_env_value_nor_the_key(files_url, in_files, monkeypatch,
                                                         request):
    """SPEC R27 (issue 37): an MCP server's result is masked as a built-in tool's is: a
    copy of a value of the workspace's ``.env``, or the API key, that a server reads
    from its own files reaches the model as ``***``; the rest of the text is kept."""
    url, directory = files_url
    stripe = "sk_live_51HxQmZ2eZvKYlo2C"
    key = "sk-proj-9f8e7d6c5b4a39281706"
    (directory / ".env").write_text(f"STRIPE_KEY={stripe}\nDEBUG=true\n")  # the workspace's
    (directory / "backup.txt").write_text(f"stripe {stripe} and key {key} debug true\n")
    request.addfinalizer((directory / ".env").unlink)
    bodies = [chat_stream(tool_calls=[("r1", "filesystem__read_file", '{"path": "backup.txt"}')]),
              chat_stream(text="Read.")]
    with ReplayServer(bodies) as model:
        monkeypatch.setenv("OPENAI_API_KEY", key)
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        status, out, err = in_files("chat", "--tools", "none", "--mcp", f"filesystem={url}",
                                    "--approve-all", "read it")
    assert (status, err) == (0, "")
    [sent] = [m["content"] for m in model.requests[1].json["messages"] if m["role"] == "tool"]
    assert sent == "stripe *** and key *** debug true\n"


def test_chat_refuses_a_policy_naming_a_tool_the_server_lacks(files_url, tmp_path, in_files):
    policy = write_policy(tmp_path, allow=["filesystem.write_fil(src/**)"])
    status, out, err = in_files("chat", "--base-url", "http://127.0.0.1:9/v1", "--tools",
                                "none", "--mcp", f"filesystem={files_url[0]}",
                                "--policy", policy, "hi")
    assert status == 2
    assert err.startswith(f"agentflow: policy: {policy}: allow rule "
                          "'filesystem.write_fil(src/**)': there is no tool "
                          "'filesystem.write_fil' (tools: filesystem.fetch, ")


def test_policy_check_with_mcp_names_the_deciding_rule(files_url, tmp_path, in_files):
    policy = write_policy(tmp_path, deny=["filesystem.write_file(**/.env)"],
                          allow=["filesystem.write_file(src/**)"])
    mcp = ["--mcp", f"filesystem={files_url[0]}", "--policy", policy]
    before = len(RAN)
    assert in_files("policy", "check", "filesystem.write_file(src/a.txt)", *mcp) == (0, (
        "filesystem.write_file(src/a.txt): runs without asking\n"
        "  rule:  filesystem.write_file(src/**)\n"
        f"  layer: --policy ({policy})\n"
        "  layers checked: --policy (session grants apply in a chat)\n"), "")
    assert in_files("policy", "check", "filesystem.write_file(src/.env)", *mcp)[1] \
        .splitlines()[:2] == ["filesystem.write_file(src/.env): denied",
                              "  rule:  filesystem.write_file(**/.env)"]
    assert in_files("policy", "check", "filesystem.write_file(docs/a)", *mcp)[1] \
        .splitlines()[:2] == ["filesystem.write_file(docs/a): asks",
                              "  no rule decides: filesystem__write_file always asks; no "
                              "allow rule matches this call"]
    assert RAN[before:] == []  # the server was only asked for its tools


def test_policy_check_without_the_server_says_to_give_it(in_files):
    status, out, err = in_files("policy", "check", "filesystem.write_file(src/a.txt)")
    assert (status, out) == (2, "")
    assert err == ("agentflow: policy check: filesystem.write_file is a tool of the MCP "
                   "server 'filesystem': give the server as agentflow chat does, --mcp "
                   "'filesystem=COMMAND' (or filesystem=URL); it is started to list its "
                   "tools, then stopped, and no tool is called\n")
