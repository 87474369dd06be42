"""The chat people expect (issue 24, items 6-11): each friction a new user met, through
the command (``tests/helpers_cli.py``: in-process, or the console script under
``make test-slow``; on a terminal always a child)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

import helpers_fork

from agentflow.builtin import sandbox
from agentflow.cli.repl import BANNER
from agentflow.testing.replay import ReplayServer, chat_stream

from helpers_cli import (AGENTFLOW, PROMPT, REPO, TIMEOUT, calls_reply, child_env,
                         ctrl_c_when_waiting, json_lines, pty_chat, run_agentflow, run_chat,
                         saved, store_key)

MCP_SERVER = REPO / "tests" / "mcp_server.py"


@pytest.fixture
def server():
    with ReplayServer() as replay:
        yield replay


# -- flags ------------------------------------------------------------------------------------

def test_version_and_help_on_a_bare_agentflow(tmp_path):
    from agentflow import __version__
    version = run_agentflow("--version", cwd=tmp_path)
    assert (version.returncode, version.stdout) == (0, f"agentflow {__version__}\n")
    bare = run_agentflow(cwd=tmp_path)
    assert (bare.returncode, bare.stderr) == (0, "")
    assert bare.stdout.startswith("usage: agentflow") and "agentflow chat [MESSAGE]" in bare.stdout


def test_short_flags_m_and_s(server, tmp_path):
    server.queue(chat_stream("Hi."))
    done = run_chat("--base-url", server.base_url, "-m", "local-model", "-s", "s.json", "Hello",
                    cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "assistant> Hi.\n")
    assert server.requests[0].json["model"] == "local-model"
    assert saved(tmp_path / "s.json")["state"]["chat"]["model"] == "local-model"


@pytest.mark.parametrize("args, sent", [
    ((), "line one\nline two\n"),
    (("summarise",), "summarise\n\nline one\nline two\n"),
])
def test_piped_stdin_is_the_message_or_goes_below_it(server, tmp_path, args, sent):
    server.queue(chat_stream("Done."))
    done = run_agentflow("chat", "--sandbox", "off",
                         "--base-url", server.base_url, *args, cwd=tmp_path,
                         stdin=b"line one\nline two\n")
    assert (done.returncode, done.stderr) == (0, "")
    assert server.requests[0].json["messages"][-1] == {"role": "user", "content": sent}


@pytest.mark.parametrize("url", ["bogus://x", "sqlite://", "not a url"])
def test_a_bad_store_value_exits_2(tmp_path, url):
    chat = run_chat("--store", url, "--session", "s", "hi", cwd=tmp_path)
    assert chat.returncode == 2 and chat.stderr.startswith("agentflow: --store: "), chat.stderr
    pending = run_agentflow("pending", "--store", url, cwd=tmp_path)
    assert pending.returncode == 2 and pending.stderr.startswith("agentflow: --store: store "), \
        pending.stderr


def test_json_with_approve_all_ends_with_one_closing_object(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo hi"})))
    server.queue(chat_stream("Done."))
    done = run_chat("--base-url", server.base_url, "--json", "--approve-all", "Go", cwd=tmp_path)
    finishes = [line for line in json_lines(done.stdout) if line["type"] == "finish"]
    assert [f["finish_reason"] for f in finishes] == ["stop"]
    assert json_lines(done.stdout)[-1]["type"] == "finish"


# -- pending ------------------------------------------------------------------------------------

def test_pending_columns_line_up_with_long_ids(server, tmp_path):
    url = f"sqlite:///{tmp_path}/sessions.db"
    long_id = "call_" + "x" * 40
    server.queue(calls_reply((long_id, "run_command", {"command": "echo hi"})))
    server.queue(calls_reply(("c2", "write_file", {"path": "a.txt", "content": "a"})))
    run_chat("--base-url", server.base_url, "--store", url, "-s", "a-very-long-session-name-1",
             "Go", cwd=tmp_path)
    run_chat("--base-url", server.base_url, "--store", url, "-s", "s2", "Go", cwd=tmp_path)
    done = run_agentflow("pending", "--store", url, cwd=tmp_path)
    header, first, second = done.stdout.splitlines()[:3]
    for column in ("SESSION", "CALL", "TOOL", "ARGUMENTS"):
        at = header.index(column)
        assert first[at - 2:at] == "  " and second[at - 2:at] == "  ", (column, done.stdout)
        assert first[at] != " " and second[at] != " "
    assert long_id in first and "a-very-long-session-name-1" in first


def test_a_closed_pipe_exits_quietly(server, tmp_path):
    """``agentflow pending --json | head -1`` printed ``[Errno 32] Broken pipe``."""
    url = f"sqlite:///{tmp_path}/sessions.db"
    for n in range(3):
        server.queue(calls_reply((f"call_{n}", "run_command", {"command": "x" * 30000})))
        run_chat("--base-url", server.base_url, "--store", url, "-s", f"s{n}", "Go",
                 cwd=tmp_path)
    for args in (["pending", "--json", "--store", url], ["show", "--store", url, "-s", "s1"]):
        # as `| head -c 10` does: read 10 bytes, then close the pipe (the 90 kB of
        # output do not fit a pipe's buffer, so the command is still writing)
        with helpers_fork.popen([sys.executable, "-m", "agentflow", *args], cwd=tmp_path,
                                env=child_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE) as listing:
            head = listing.stdout.read(10)
            listing.stdout.close()
            stderr = listing.stderr.read().decode()
            status = listing.wait(timeout=TIMEOUT)
        assert (len(head), stderr, status) == (10, "", 0), stderr


# -- the resume line ----------------------------------------------------------------------------

@pytest.mark.slow  # starts the MCP SDK's server twice, 3 s (as test_mcp.py's servers)
def test_the_resume_line_of_an_mcp_chat_carries_mcp_and_resumes(server, tmp_path):
    try:
        import mcp  # noqa: F401
    except ImportError:
        assert os.environ.get("CI") != "true", "the mcp extra is missing in CI"
        pytest.skip("needs the mcp extra (pip install '.[mcp]')")
    spec = f"notes={shlex.quote(sys.executable)} {shlex.quote(str(MCP_SERVER))} notes " \
           f"{shlex.quote(str(tmp_path))} stdio"
    server.queue(calls_reply(("call_1", "notes__write_note", {"name": "a", "text": "b"})))
    server.queue(chat_stream("Written."))
    paused = run_chat("--base-url", server.base_url, "--tools", "none", "--mcp", spec,
                      "-s", "s.json", "--command-timeout", "5", "Note", cwd=tmp_path)
    assert paused.returncode == 3, paused.stderr
    printed = paused.stdout.split("Resume with: ", 1)[1].splitlines()[0]
    argv = shlex.split(printed)
    assert argv[argv.index("--mcp") + 1] == spec and "--command-timeout" in argv
    resumed = run_agentflow(*argv[1:], cwd=tmp_path)
    # (the MCP server's own warnings reach stderr too: it shares it)
    assert resumed.returncode == 0 and "agentflow:" not in resumed.stderr, resumed.stderr
    assert resumed.stdout.endswith("assistant> Written.\n")


# -- show ------------------------------------------------------------------------------------

def test_show_prints_a_saved_conversation_its_grants_and_what_waits(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo \x1b[2Jhi"})))
    server.queue(chat_stream("Said hi."))
    server.queue(calls_reply(("call_2", "write_file", {"path": "n.txt", "content": "x"})))
    run_chat("--base-url", server.base_url, "-s", "s.json", "--approve-all", "Say hi",
             cwd=tmp_path)
    run_chat("--base-url", server.base_url, "-s", "s.json", "Write", cwd=tmp_path)
    done = run_agentflow("show", "-s", "s.json", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "user> Say hi\n"
        '  → call_1 run_command {"command": "echo \\u001b[2Jhi"}\n'
        "  [call_1] exit status 0 ⏎ \\x1b[2Jhi\n"
        "assistant> Said hi.\n"
        "user> Write\n"
        '  → call_2 write_file {"path": "n.txt", "content": "x"}\n'
        "grants: none\n"
        "waiting for approval:\n"
        "  call_2  write_file  (write_file always asks)\n")
    missing = run_agentflow("show", "-s", "nope.json", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.json" in missing.stderr


# -- the prompt, on a terminal -----------------------------------------------------------------

def test_the_prompt_ignores_an_empty_line_and_leaves_on_exit(server, tmp_path):
    server.queue(chat_stream("One."))
    chat = pty_chat("--base-url", server.base_url, cwd=tmp_path)
    chat.expect(BANNER + "\n")
    chat.expect("you> ")
    chat.send("")
    chat.expect("you> ")
    chat.send("/help")
    assert "/permissions revoke N" in chat.expect("you> ")
    chat.send("hello")
    chat.expect("assistant> One.\n")
    chat.expect("you> ")
    chat.send("exit")
    assert chat.wait() == 0
    assert len(server.requests) == 1  # neither the empty line, /help nor exit was sent


def test_the_chat_keeps_its_messages_between_runs_in_a_private_file(server, tmp_path):
    """Issue 34: the input history is kept between runs, in a file of the person's with
    mode 0600 (as Python's REPL keeps its own); up-arrow (Ctrl-P) at ``you>`` brings a
    message of the run before back; answers at the approval prompt are not kept."""
    state = tmp_path / "state"
    env = child_env(XDG_STATE_HOME=str(state))
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo hi"})))
    server.queue(chat_stream("One."))
    chat = pty_chat("--sandbox", "off", "--base-url", server.base_url, cwd=tmp_path, env=env)
    chat.expect("you> ")
    chat.send("the first message")
    chat.expect(PROMPT)
    chat.send("y")
    chat.expect("you> ")
    chat.send("exit")
    assert chat.wait() == 0
    history = state / "agentflow" / "chat_history"
    assert oct(history.stat().st_mode & 0o777) == "0o600"
    lines = history.read_text().splitlines()
    assert "the first message" in lines and "y" not in lines and "exit" not in lines

    server.queue(chat_stream("Two."))
    chat = pty_chat("--base-url", server.base_url, cwd=tmp_path, env=env)
    chat.expect("you> ")
    chat.send_raw(b"\x10")  # Ctrl-P: the previous line of the history
    chat.expect("the first message")
    chat.send_raw(b"\r")
    chat.expect("assistant> Two.\n")
    chat.send("exit")
    assert chat.wait() == 0
    assert server.requests[-1].json["messages"][-1] == {"role": "user",
                                                         "content": "the first message"}


def test_agentflow_history_off_keeps_none(server, tmp_path):
    state = tmp_path / "state"
    server.queue(chat_stream("One."))
    chat = pty_chat("--base-url", server.base_url, cwd=tmp_path,
                    env=child_env(XDG_STATE_HOME=str(state), AGENTFLOW_HISTORY="off"))
    chat.expect("you> ")
    chat.send("secret plans")
    chat.expect("you> ")
    chat.send("exit")
    assert chat.wait() == 0
    assert not state.exists()


def test_a_link_in_place_of_the_history_file_is_not_followed(server, tmp_path):
    """Where the history file is a symbolic link, the chat keeps no history (it
    says so) rather than write the person's messages where the link points."""
    target = tmp_path / "elsewhere"
    link = tmp_path / "history"
    link.symlink_to(target)
    server.queue(chat_stream("One."))
    chat = pty_chat("--base-url", server.base_url, cwd=tmp_path,
                    env=child_env(AGENTFLOW_HISTORY=str(link)))
    assert "(no input history: " in chat.expect("you> ")
    chat.send("hello")
    chat.expect("you> ")
    chat.send("exit")
    assert chat.wait() == 0
    assert not target.exists()


def test_several_lines_are_one_message(server, tmp_path):
    server.queue(chat_stream("A."))
    server.queue(chat_stream("B."))
    chat = pty_chat("--base-url", server.base_url, cwd=tmp_path)
    chat.expect("you> ")
    chat.send("first \\")
    chat.expect("... ")
    chat.send("second")
    chat.expect("assistant> A.\n")
    chat.expect("you> ")
    chat.send_raw(b"one\ntwo\nthree\n")  # a paste: what arrives at once
    chat.expect("assistant> B.\n")
    chat.expect("you> ")
    chat.send("quit")
    assert chat.wait() == 0
    assert [r.json["messages"][-1]["content"] for r in server.requests] == [
        "first \nsecond", "one\ntwo\nthree"]


def test_permissions_lists_grants_and_revoke_takes_one_back(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo hi"})))
    server.queue(chat_stream("Done."))
    server.queue(calls_reply(("call_2", "run_command", {"command": "echo hi"})))
    chat = pty_chat("--base-url", server.base_url, "-s", "s.json", cwd=tmp_path)
    chat.expect("you> ")
    chat.send("go")
    chat.expect(PROMPT)
    chat.send("a")
    chat.expect("[b]ack: ")
    chat.send("s")
    chat.expect("you> ")
    chat.send("/permissions")
    listing = chat.expect("you> ")
    assert "  session grants:\n    1. allow  run_command(echo hi)  (granted at call call_1, by " \
        "tester)\n" in listing
    chat.send("/permissions revoke 1")
    assert "revoked: allow run_command(echo hi); such calls ask again" in chat.expect("you> ")
    assert saved(tmp_path / "s.json")["approvals"].get("grants", []) == []
    chat.send("again")
    chat.expect(PROMPT)  # the same call asks again
    chat.send("q")
    assert chat.wait() == 3


def test_ctrl_c_at_the_prompt_of_a_paused_session_says_how_to_resume(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo hi"})))
    run_chat("--base-url", server.base_url, "-s", "s.json", "Go", cwd=tmp_path)
    chat = pty_chat("-s", "s.json", cwd=tmp_path, env=child_env(OPENAI_BASE_URL=server.base_url))
    chat.expect(PROMPT)
    ctrl_c_when_waiting(chat)
    rest = chat.expect("--respond call_1=yes\n")
    assert "(stopped by Ctrl-C at the approval prompt: nothing ran)" in rest
    assert chat.wait() == 130


def text_editor(tmp_path, new_text: str) -> str:
    """An $EDITOR that keeps what it was given in ``tmp_path/given`` and writes
    ``new_text`` followed by a newline, as an editor saves a file."""
    script = tmp_path / "editor.py"
    script.write_text("import shutil, sys\n"
                      f"shutil.copyfile(sys.argv[1], {str(tmp_path / 'given')!r})\n"
                      f"open(sys.argv[1], 'w', newline='').write({new_text!r} + '\\n')\n")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def test_e_on_a_command_with_control_characters_opens_the_editor(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo \x1b[2Khi"})))
    server.queue(chat_stream("Ran."))
    chat = pty_chat("--base-url", server.base_url, "Go", cwd=tmp_path,
                    env=child_env(EDITOR=text_editor(tmp_path, "echo clean")))
    chat.expect(PROMPT)
    chat.send("e")
    shown = chat.expect("(back): ")
    assert "command: " not in shown  # never put on the prompt line
    # the editor gets the command itself, byte for byte, not JSON (issue 34)
    assert (tmp_path / "given").read_bytes() == b"echo \x1b[2Khi"
    assert '-  "command": "echo \\u001b[2Khi"' in shown  # the diff escapes it (R25)
    assert '+  "command": "echo clean"' in shown
    chat.send("y")
    assert chat.wait() == 0
    assert "│ clean\n  [run_command] exit status 0 (1 line of output above)" in chat.text


def test_e_on_a_command_of_several_lines_edits_its_text_in_the_editor(server, tmp_path):
    """A command of several lines goes to $EDITOR as the lines it is (issue 34: not
    JSON with \\n in it); the saved text, less the editor's final newline, runs."""
    arguments = {"command": "echo one\necho two"}
    if sandbox.unavailable() is None:  # another argument, where run_command takes it
        arguments["sandbox"] = True
    server.queue(calls_reply(("call_1", "run_command", arguments)))
    server.queue(chat_stream("Ran."))
    chat = pty_chat("--base-url", server.base_url, "Go", cwd=tmp_path,
                    env=child_env(EDITOR=text_editor(tmp_path, "echo one\necho three")))
    chat.expect(PROMPT)
    chat.send("e")
    shown = chat.expect("(back): ")
    assert (tmp_path / "given").read_text() == "echo one\necho two"
    assert '+  "command": "echo one\\necho three"' in shown
    if "sandbox" in arguments:
        assert '   "sandbox": true' in shown  # the other arguments stay as they were
    chat.send("y")
    assert chat.wait() == 0
    assert "│ one\n  │ three\n" in chat.text
    assert server.requests[1].json["messages"][-1]["content"] == "exit status 0\none\nthree\n"


def test_e_to_an_empty_command_changes_nothing(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo one\necho two"})))
    chat = pty_chat("--base-url", server.base_url, "Go", cwd=tmp_path,
                    env=child_env(EDITOR=text_editor(tmp_path, "")))
    chat.expect(PROMPT)
    chat.send("e")
    assert chat.expect(PROMPT).startswith(
        "e\n  the edited command is empty: the call is as it was\n")
    chat.send("q")
    assert chat.wait() == 3


@pytest.mark.parametrize("extra, env, coloured", [
    ((), {"TERM": "xterm-256color"}, True),
    (("--no-color",), {"TERM": "xterm-256color"}, False),
    ((), {"TERM": "xterm-256color", "NO_COLOR": "1"}, False),
])
def test_colour_on_a_terminal_unless_no_color(server, tmp_path, extra, env, coloured):
    (tmp_path / "n.txt").write_text("old\n")
    server.queue(calls_reply(("call_1", "write_file", {"path": "n.txt", "content": "new\n"})))
    chat = pty_chat("--base-url", server.base_url, *extra, "Edit", cwd=tmp_path,
                    env=child_env(**env))
    shown = chat.expect(PROMPT)
    assert ("\x1b[32m+new\x1b[0m" in shown) is coloured
    assert ("\x1b[31m-old\x1b[0m" in shown) is coloured
    assert ("\x1b[" in shown.replace("\x1b[?2004h", "").replace("\x1b[?1034h", "")) is coloured
    chat.send("q")
    assert chat.wait() == 3


def test_no_colour_without_a_terminal(server, tmp_path):
    (tmp_path / "n.txt").write_text("old\n")
    server.queue(calls_reply(("call_1", "write_file", {"path": "n.txt", "content": "new\n"})))
    done = run_chat("--base-url", server.base_url, "Edit", cwd=tmp_path,
                    env=child_env(TERM="xterm-256color"))
    assert done.returncode == 3 and "\x1b" not in done.stdout


def test_pending_says_which_calls_an_inbox_answered(server, tmp_path):
    """SPEC R22: a call answered in ``agentflow inbox`` stays pending until a worker
    resumes it; ``agentflow pending`` listed it as if nobody had answered and suggested
    ``--respond`` for it."""
    from agentflow import ToolApprovalResponse
    from agentflow.stores import SQLiteStore
    url = f"sqlite:///{tmp_path}/sessions.db"
    server.queue(calls_reply(("call_1", "run_command", {"command": "df -h"}),
                             ("call_2", "run_command", {"command": "ls"})))
    run_chat("--base-url", server.base_url, "--store", url, "-s", "t-1", "Go", cwd=tmp_path)
    with SQLiteStore(str(tmp_path / "sessions.db"), store_key()) as store:
        first = store.pending()[0]
        store.answer("t-1", [ToolApprovalResponse("call_1", True, digest=first.digest,
                                                  approver="dana",
                                                  request_id=first.request_id)])
    done = run_agentflow("pending", "--store", url, cwd=tmp_path)
    rows = done.stdout.splitlines()
    assert "(answered by dana at " in rows[1] and rows[1].endswith(
        " (approved); waits for a worker)")
    assert "answered" not in rows[2]
    assert rows[-1].endswith("--session t-1 --respond call_2=yes (or =no:REASON)")
    listed = json_lines(run_agentflow("pending", "--store", url, "--json",
                                      cwd=tmp_path).stdout)
    assert [("answered" in e, e["call_id"]) for e in listed] == [(True, "call_1"),
                                                                  (False, "call_2")]


@pytest.mark.parametrize("command", [["pending"], ["chat", "--tools", "none", "hi"]])
def test_a_reader_that_leaves_early_is_no_failure_of_a_listing(tmp_path, command):
    """Issue 34: ``agentflow pending | head`` exited 0 or 1 by the pipe's timing (the
    broken pipe showed in the command, or at exit as status 120). A listing the reader
    stopped reading exits 0, every time; a run cut short (a chat) still exits 1."""
    import contextlib
    import io
    from agentflow.cli.main import main
    url = f"sqlite:///{tmp_path}/sessions.db"
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    stream = io.TextIOWrapper(io.FileIO(write_end, "w"), encoding="utf-8")
    with ReplayServer([chat_stream("Hello " * 20000)]) as server:
        args = ["--store", url] if command[0] == "pending" else [
            "--base-url", server.base_url, "--sandbox", "off"]
        saved_env = dict(os.environ)
        os.environ.update(child_env())
        try:
            with contextlib.redirect_stdout(stream):
                status = main([command[0], *args, *command[1:]])
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
    stream.close()
    assert status == (0 if command[0] == "pending" else 1)


def test_the_mcp_sdks_own_log_lines_are_hidden_unless_verbose(capsys):
    """Issue 34: the MCP SDK's warnings (with tracebacks) reached stderr at start-up,
    reading like failures. Hidden by default; ``--verbose`` shows them, each line
    prefixed and escaped (they quote what a server sent, SPEC R25)."""
    import logging
    from agentflow.cli.servers import sdk_logs
    sdk = logging.getLogger("mcp.client.stdio")  # a logger the SDK logs to
    try:
        sdk_logs(False)
        sdk.error("Failed to parse JSONRPC message from server")
        assert capsys.readouterr().err == ""
        sdk_logs(True)
        sdk.error("Failed to parse %s\nline two", "banner \x1b[2J")
        assert capsys.readouterr().err == (
            "agentflow: mcp sdk: ERROR mcp.client.stdio: Failed to parse banner \\x1b[2J\n"
            "agentflow: mcp sdk: line two\n")
    finally:
        root = logging.getLogger("mcp")
        root.handlers[:], root.propagate = [], True
        root.setLevel(logging.NOTSET)


@pytest.mark.parametrize("command", [
    ("pending",), ("show", "-s", "s-1"), ("inbox",), ("worker", "--once"),
    ("chat", "--session", "s-1", "hi")])
@pytest.mark.parametrize("store, hint", [
    ("sessions.db", "write sqlite:///sessions.db for an SQLite file"),
    ("/var/lib/a/sessions.db", "write sqlite:////var/lib/a/sessions.db for an SQLite file")])
def test_a_store_that_is_not_a_url_is_a_usage_error_naming_its_own_url(
        tmp_path, command, store, hint):
    """Issue 34 (a newcomer's run): every command taking --store says the same thing in
    the same words, with status 2 as the README's table says, and the URL it suggests
    is that of the path given (four slashes for an absolute one), not another."""
    done = run_agentflow(*command, "--store", store, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"agentflow: --store: store {store!r} is not a URL: {hint}, "
                           "postgresql://user@host/db or file:///folder\n")
    assert os.listdir(tmp_path) == []  # nothing was made


@pytest.mark.parametrize("command", [("pending",), ("inbox",), ("worker", "--once")])
def test_an_unknown_kind_of_store_is_a_usage_error(tmp_path, command):
    done = run_agentflow(*command, "--store", "sqlit:///sessions.db", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == ("agentflow: --store: store 'sqlit:///sessions.db': unknown kind "
                           "'sqlit'; agentflow has sqlite, postgresql and file stores\n")
