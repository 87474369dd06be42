"""End-to-end tests of ``agentflow chat`` and ``agentflow replay`` (issue 6).

Every test runs the real command (``tests/helpers_cli.py``: without a terminal
in-process, or the ``agentflow`` console script in a child under ``make test-slow``)
against a loopback ``ReplayServer`` over real HTTP, and checks what a user sees
(exit status, the text on the terminal or stdout/stderr), what the server received
(the requests the model would see) and the saved session file.

Interactive tests go through a real pseudo-terminal (``tests/helpers_pty.py``) that
is the child's controlling terminal, so typed answers, echo and Ctrl-C behave as on
a user's terminal. Nothing here asserts on timing: a reader waits for an expected
prompt, and timeouts only stop a broken run from hanging the suite.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from agentflow.cli.repl import BANNER
from agentflow.testing.replay import Reply, ReplayServer, chat_stream

from helpers_cli import (ALL_TOOLS, KEY, PROMPT, REPO, RUN_COMMAND_DESCRIPTION, SANDBOXED,
                         TIMEOUT, USER, WRITE_FILE_DESCRIPTION, assistant, audit_summary,
                         calls_reply, child_env, ctrl_c_when_waiting, digest, json_lines,
                         pause_text,
                         pty_chat, run_agentflow, run_chat, run_command_block, saved,
                         slow_reply, tool_message, tool_names, user)

# -- helpers ------------------------------------------------------------------------------

@pytest.fixture
def server():
    """A running ``ReplayServer`` with an empty queue; ``server.queue(...)`` fills it."""
    replay = ReplayServer().start()
    yield replay
    replay.stop()


# == 1. the interactive approval prompt ====================================================

def test_prompt_shows_the_call_and_y_runs_the_command(server, tmp_path):
    """The prompt shows the tool, its description, the arguments as indented JSON and
    the exact command line; ``y`` runs it for real and the model gets its output."""
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo hi"}),
                             text="Let me check."))
    server.queue(chat_stream("It printed hi."))
    session = tmp_path / "s.json"

    chat = pty_chat("--sandbox", "off", "--base-url", server.base_url, "--session", str(session),
                    "Say hi from the shell", cwd=tmp_path)
    shown = chat.expect("[q]uit: ")
    assert shown == "assistant> Let me check.\n\n" + run_command_block("call_1", "echo hi")
    chat.send("y")
    assert chat.wait() == 0
    assert chat.rest() == ("y\n"
                           "  │ hi\n"  # the command's output as it comes (issue 24)
                           "  [run_command] exit status 0 (1 line of output above)\n"
                           "assistant> It printed hi.\n")

    assert len(server.requests) == 2
    assert tool_names(server.requests[0]) == ALL_TOOLS
    call = ("call_1", "run_command", {"command": "echo hi"})
    expected_history = [user("Say hi from the shell"), assistant("Let me check.", call),
                        tool_message("call_1", "exit status 0\nhi\n")]
    assert server.requests[1].json["messages"] == expected_history

    data = saved(session)
    assert data["messages"] == expected_history + [assistant("It printed hi.")]
    assert data["approvals"]["pending"] == []
    assert audit_summary(data) == [("call_1", "run_command", digest({"command": "echo hi"}),
                                    "approved", None, USER)]


def test_n_with_a_reason_sends_rejected_reason_and_runs_nothing(server, tmp_path):
    """``n`` asks for a reason; the model receives exactly ``Rejected: <reason>`` and
    the command does not run."""
    server.queue(calls_reply(("call_1", "run_command", {"command": "touch ran.txt"})))
    server.queue(chat_stream("Understood, I left it alone."))
    session = tmp_path / "s.json"

    chat = pty_chat("--sandbox", "off", "--base-url", server.base_url, "--session", str(session),
                    "Make a file", cwd=tmp_path)
    assert chat.expect("[q]uit: ") == "\n" + run_command_block("call_1", "touch ran.txt")
    chat.send("n")
    assert chat.expect("reason (optional): ") == "n\nreason (optional): "
    chat.send("too risky")
    assert chat.wait() == 0
    assert chat.rest() == ("too risky\n"
                           "  [run_command] Rejected: too risky\n"
                           "assistant> Understood, I left it alone.\n")

    assert not (tmp_path / "ran.txt").exists()
    assert server.requests[1].json["messages"][-1] == tool_message("call_1",
                                                                   "Rejected: too risky")
    data = saved(session)
    assert audit_summary(data) == [("call_1", "run_command",
                                    digest({"command": "touch ran.txt"}),
                                    "rejected", "too risky", USER)]


def test_a_allows_the_exact_call_from_now_on_in_the_session_or_the_project(server,
                                                                          tmp_path):
    """``a`` shows the rules that allow exactly this call (one per command of a chain)
    and asks where to keep them: ``s`` grants them in the session, ``p`` writes them
    to .agentflow/policy.json. Later matching calls run without asking, and the audit
    names the rule and the layer; another call is still asked about (SPEC R19)."""
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo one && echo two"})))
    server.queue(chat_stream("One is done."))
    server.queue(calls_reply(("call_2", "run_command", {"command": "echo two"})))
    server.queue(calls_reply(("call_3", "write_file", {"path": "x.txt", "content": "x\n"})))
    server.queue(chat_stream("Two is done."))
    server.queue(calls_reply(("call_4", "write_file", {"path": "x.txt", "content": "y\n"})))
    server.queue(calls_reply(("call_5", "run_command", {"command": "echo three"})))
    server.queue(chat_stream("Three."))
    session = tmp_path / "s.json"

    chat = pty_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--session", str(session), cwd=tmp_path)
    chat.expect("you> ")
    chat.send("first")
    assert chat.expect("[q]uit: ").endswith(run_command_block("call_1", "echo one && echo two"))
    chat.send("a")
    assert chat.expect("[b]ack: ") == (
        "a\n"
        "  allow from now on: run_command(echo one), run_command(echo two)\n"
        "  keep it in the [s]ession or the [p]roject file (.agentflow/policy.json), or [b]ack: ")
    chat.send("s")
    assert chat.expect("you> ") == ("s\n"
                                    "  │ one\n  │ two\n"
                                    "  [run_command] exit status 0 (2 lines of output above)\n"
                                    "assistant> One is done.\n"
                                    "you> ")
    chat.send("second")
    shown = chat.expect("[q]uit: ")
    assert shown == ("second\n"
                     "  → run_command $ echo two\n"
                     "  │ two\n"
                     "  [run_command] exit status 0 (1 line of output above)\n"
                     "\n── approval needed ── call_3\n"
                     "tool:        write_file\n"
                     f"description: {WRITE_FILE_DESCRIPTION}\n"
                     "why:         write_file always asks\n"
                     "arguments:\n"
                     "  {\n"
                     "    \"path\": \"x.txt\",\n"
                     "    \"content\": \"x\\n\"\n"
                     "  }\n"
                     "--- (new file)\n"
                     "+++ x.txt\n"
                     "@@ -0,0 +1 @@\n"
                     "+x\n"
                     f"{PROMPT}")
    chat.send("a")
    assert chat.expect("[b]ack: ").startswith("a\n  allow from now on: write_file(x.txt)\n")
    chat.send("p")
    policy_file = tmp_path / ".agentflow" / "policy.json"
    assert chat.expect("you> ") == (f"p\n  wrote write_file(x.txt) to {policy_file}\n"
                                    "  [write_file] wrote 2 bytes to x.txt\n"
                                    "assistant> Two is done.\n"
                                    "you> ")
    chat.send("third")
    assert chat.expect("[q]uit: ") == ("third\n  → write_file x.txt\n"
                                       "  [write_file] wrote 2 bytes to x.txt\n\n"
                                       + run_command_block(
                                           "call_5", "echo three", "run_command always "
                                           "asks; no allow rule matches this call"))
    chat.send("n")
    chat.expect("reason (optional): ")
    chat.send("")
    assert chat.expect("you> ") == ("\n  [run_command] Rejected: User denied\n"
                                    "assistant> Three.\nyou> ")
    chat.send("exit")
    assert chat.wait() == 0
    assert chat.text.count("approve? ") == 3  # call_1, call_3, call_5; never 2 or 4

    assert json.loads(policy_file.read_text()) == {"deny": [], "ask": [],
                                                   "allow": ["write_file(x.txt)"]}
    assert (tmp_path / "x.txt").read_text() == "y\n"
    data = saved(session)
    assert [(g["rule"], g["approver"], g["call_id"], g["expires_at"])
            for g in data["approvals"]["grants"]] == [
        ("run_command(echo one)", USER, "call_1", None),
        ("run_command(echo two)", USER, "call_1", None)]
    # the session also remembers what the chat was started with, for a later --session run
    assert data["state"]["chat"]["base_url"] == server.base_url
    assert [(r["call_id"], r["outcome"], r["rule"], r["layer"], r["grant"])
            for r in data["approvals"]["audit"]] == [
        ("call_1", "approved", None, None, "run_command(echo one); run_command(echo two)"),
        ("call_2", "allowed", "run_command(echo two)", "session", None),
        ("call_3", "approved", None, None, None),
        ("call_4", "allowed", "write_file(x.txt)", "project", None),
        ("call_5", "rejected", None, None, None)]


def test_q_pauses_and_a_second_process_resumes_on_the_terminal(server, tmp_path):
    """``q`` quits with status 3 and the call still pending in the saved session; a
    second ``agentflow chat --session FILE`` on a terminal asks about that call
    first and, answered ``y``, runs it and finishes the turn."""
    call = ("call_1", "run_command", {"command": "echo resumed"})
    server.queue(calls_reply(call, text="I will run it."))
    server.queue(chat_stream("It said resumed."))
    session = tmp_path / "s.json"

    first = pty_chat("--sandbox", "off", "--base-url", server.base_url, "--session", str(session),
                     "Run something", cwd=tmp_path)
    first.expect("[q]uit: ")
    first.send("q")
    assert first.wait() == 3
    assert first.rest() == "q\n" + pause_text(session, ("call_1", "run_command",
                                                         f"$ echo resumed ⏎ {SANDBOXED}"))
    assert len(server.requests) == 1
    data = saved(session)
    assert data["messages"] == [user("Run something"), assistant("I will run it.", call)]
    assert [(r["call_id"], r["tool"], r["digest"]) for r in data["approvals"]["pending"]] == [
        ("call_1", "run_command", digest({"command": "echo resumed"}))]
    assert data["approvals"]["audit"] == []

    second = pty_chat("--sandbox", "off",
                      "--base-url", server.base_url, "--session", str(session), cwd=tmp_path)
    assert second.expect("[q]uit: ") == (
        "This session is paused; answer its pending calls first.\n\n"
        + run_command_block("call_1", "echo resumed"))
    second.send("y")
    assert second.expect("you> ") == ("y\n"
                                      "  │ resumed\n"
                                      "  [run_command] exit status 0 (1 line of output above)\n"
                                      "assistant> It said resumed.\n"
                                      + BANNER + "\nyou> ")
    second.send("quit")
    assert second.wait() == 0

    assert len(server.requests) == 2
    assert server.requests[1].json["messages"] == [
        user("Run something"), assistant("I will run it.", call),
        tool_message("call_1", "exit status 0\nresumed\n")]
    data = saved(session)
    assert data["approvals"]["pending"] == []
    assert audit_summary(data) == [("call_1", "run_command",
                                    digest({"command": "echo resumed"}), "approved", None, USER)]
    assert data["messages"][-1] == assistant("It said resumed.")


def test_write_file_prompt_shows_the_unified_diff(server, tmp_path):
    """write_file's prompt shows the unified diff of the change; ``y`` writes it."""
    (tmp_path / "notes.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    arguments = {"path": "notes.txt", "content": "one\n2\nthree\n"}
    server.queue(calls_reply(("call_1", "write_file", arguments)))
    server.queue(chat_stream("Changed."))

    chat = pty_chat("--sandbox", "off",
                    "--base-url", server.base_url, "Fix the notes", cwd=tmp_path)
    assert chat.expect("[q]uit: ") == ("\n── approval needed ── call_1\n"
                                       "tool:        write_file\n"
                                       f"description: {WRITE_FILE_DESCRIPTION}\n"
                                       # every prompt says why (issue 34), a write too
                                       "why:         write_file always asks\n"
                                       "arguments:\n"
                                       "  {\n"
                                       "    \"path\": \"notes.txt\",\n"
                                       "    \"content\": <3 lines, 12 bytes: see below>\n"
                                       "  }\n"
                                       "--- notes.txt\n"
                                       "+++ notes.txt\n"
                                       "@@ -1,3 +1,3 @@\n"
                                       " one\n"
                                       "-two\n"
                                       "+2\n"
                                       " three\n"
                                       f"{PROMPT}")
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "one\ntwo\nthree\n"
    chat.send("y")
    assert chat.wait() == 0
    assert chat.rest() == "y\n  [write_file] wrote 12 bytes to notes.txt\nassistant> Changed.\n"
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "one\n2\nthree\n"
    assert server.requests[1].json["messages"][-1] == tool_message(
        "call_1", "wrote 12 bytes to notes.txt")


# == 2. Ctrl-C while a reply streams =======================================================

def test_ctrl_c_stops_the_stream_and_a_second_ctrl_c_leaves(server, tmp_path):
    """Ctrl-C mid-stream stops the reply (the rest never shows), says so, and the
    prompt comes back; the session file stays a valid session holding the completed
    turn and the user's interrupted message, no partial assistant message, and the
    next turn sends that message too (issue 16). Ctrl-C at the prompt exits 130."""
    server.queue(chat_stream("Hello there."))
    server.queue(slow_reply("alpha", "omega-never-shown"))
    server.queue(chat_stream("Briefly: yes."))
    session = tmp_path / "s.json"

    chat = pty_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--session", str(session), cwd=tmp_path)
    assert chat.expect("you> ") == BANNER + "\nyou> "
    chat.send("hi")
    assert chat.expect("you> ") == "hi\nassistant> Hello there.\nyou> "
    chat.send("tell me more")
    chat.expect("assistant> alpha")
    ctrl_c_when_waiting(chat)
    chat.expect("(stopped by Ctrl-C")
    assert chat.expect("you> ") == (": your message and every completed step are kept; the "
                                    "unfinished step is not)\nyou> ")
    assert len(server.requests) == 2

    data = saved(session)  # valid while the process still runs
    kept = [user("hi"), assistant("Hello there."), user("tell me more")]
    assert data["messages"] == kept

    chat.send("briefly?")
    assert chat.expect("you> ") == "briefly?\nassistant> Briefly: yes.\nyou> "
    assert server.requests[2].json["messages"] == kept + [user("briefly?")]

    ctrl_c_when_waiting(chat)
    assert chat.wait() == 130
    assert "omega-never-shown" not in chat.text
    assert "Traceback" not in chat.text
    assert len(server.requests) == 3
    data = saved(session)
    assert data["messages"] == kept + [user("briefly?"), assistant("Briefly: yes.")]
    assert data["approvals"] == {"pending": [], "audit": []}


def test_ctrl_c_at_the_approval_prompt_of_the_interactive_chat_quits_and_keeps_the_call(
        server, tmp_path):
    """Issue 34: Ctrl-C at the approval prompt quits, as the README says, in the
    interactive chat too (it went back to ``you>``, and the next message answered the
    waiting call ``Rejected: User denied`` without asking anyone, SPEC R4). The call
    stays waiting, and the next run asks about it."""
    server.queue(calls_reply(("call_1", "run_command", {"command": "touch ran.txt"})))
    server.queue(chat_stream("Done."))
    chat = pty_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--session", "s.json", cwd=tmp_path)
    chat.expect("you> ")
    chat.send("Make a file")
    chat.expect(PROMPT)
    ctrl_c_when_waiting(chat)
    assert chat.wait() == 130
    assert chat.rest().endswith(
        "\n(stopped by Ctrl-C at the approval prompt: nothing ran)\n"
        + pause_text("s.json", ("call_1", "run_command", f"$ touch ran.txt ⏎ {SANDBOXED}")))
    assert len(server.requests) == 1
    data = saved(tmp_path / "s.json")
    assert [r["call_id"] for r in data["approvals"]["pending"]] == ["call_1"]
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]

    again = pty_chat("--sandbox", "off", "--session", "s.json", cwd=tmp_path,
                     env=child_env(OPENAI_BASE_URL=server.base_url))
    assert again.expect(PROMPT).startswith(
        "This session is paused; answer its pending calls first.\n")
    again.send("y")
    again.expect("you> ")
    again.send_raw(b"\x04")
    assert again.wait() == 0
    assert (tmp_path / "ran.txt").exists()
    assert server.requests[1].json["messages"][-1] == tool_message("call_1", "exit status 0\n")


# == 3. without a terminal =================================================================

def test_approve_all_runs_the_call(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo hi"})))
    server.queue(chat_stream("Done."))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--approve-all", "Say hi", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == ("  → run_command $ echo hi\n"
                           "  [run_command] exit status 0 ⏎ hi\nassistant> Done.\n")
    assert server.requests[1].json["messages"][-1] == tool_message("call_1",
                                                                   "exit status 0\nhi\n")


def test_deny_all_rejects_the_call(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "touch ran.txt"})))
    server.queue(chat_stream("I did not."))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--deny-all", "Make a file", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == ("  → run_command $ touch ran.txt\n"
                           "  [run_command] Rejected: denied by --deny-all\n"
                           "assistant> I did not.\n")
    assert server.requests[1].json["messages"][-1] == tool_message(
        "call_1", "Rejected: denied by --deny-all")
    assert not (tmp_path / "ran.txt").exists()


def test_without_a_terminal_it_pauses_and_respond_yes_resumes(server, tmp_path):
    """No flag and no terminal: exit 3 and how to resume; ``--respond CALL_ID=yes``
    in a later process runs the call and finishes."""
    call = ("call_1", "run_command", {"command": "echo later"})
    server.queue(calls_reply(call))
    server.queue(chat_stream("It said later."))
    session = tmp_path / "s.json"

    paused = run_chat("--sandbox", "off",
                      "--base-url", server.base_url, "--session", str(session), "Run it",
                      cwd=tmp_path)
    assert (paused.returncode, paused.stderr) == (3, "")
    assert paused.stdout == pause_text(session, ("call_1", "run_command", f"$ echo later ⏎ {SANDBOXED}"))
    data = saved(session)
    assert data["messages"] == [user("Run it"), assistant(None, call)]
    assert [r["call_id"] for r in data["approvals"]["pending"]] == ["call_1"]

    resumed = run_chat("--sandbox", "off",
                       "--base-url", server.base_url, "--session", str(session),
                       "--respond", "call_1=yes", cwd=tmp_path)
    assert (resumed.returncode, resumed.stderr) == (0, "")
    assert resumed.stdout == ("  → run_command $ echo later\n"
                              "  [run_command] exit status 0 ⏎ later\n"
                              "assistant> It said later.\n")
    assert server.requests[1].json["messages"] == [
        user("Run it"), assistant(None, call), tool_message("call_1", "exit status 0\nlater\n")]
    data = saved(session)
    assert data["approvals"]["pending"] == []
    assert audit_summary(data) == [("call_1", "run_command", digest({"command": "echo later"}),
                                    "approved", None, USER)]


def test_respond_no_with_reason_resumes_with_the_rejection(server, tmp_path):
    call = ("call_1", "run_command", {"command": "touch ran.txt"})
    server.queue(calls_reply(call))
    server.queue(chat_stream("Fine, I will not."))
    session = tmp_path / "s.json"

    paused = run_chat("--sandbox", "off",
                      "--base-url", server.base_url, "--session", str(session), "Make a file",
                      cwd=tmp_path)
    assert paused.returncode == 3
    resumed = run_chat("--sandbox", "off",
                       "--base-url", server.base_url, "--session", str(session),
                       "--respond", "call_1=no:too risky", cwd=tmp_path)
    assert (resumed.returncode, resumed.stderr) == (0, "")
    assert resumed.stdout == ("  → run_command $ touch ran.txt\n"
                              "  [run_command] Rejected: too risky\n"
                              "assistant> Fine, I will not.\n")
    assert server.requests[1].json["messages"][-1] == tool_message("call_1",
                                                                   "Rejected: too risky")
    assert not (tmp_path / "ran.txt").exists()
    assert audit_summary(saved(session)) == [
        ("call_1", "run_command", digest({"command": "touch ran.txt"}), "rejected",
         "too risky", USER)]


def test_pause_without_session_says_it_cannot_be_resumed(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "echo hi"})))
    paused = run_chat("--sandbox", "off", "--base-url", server.base_url, "Run it", cwd=tmp_path)
    assert (paused.returncode, paused.stderr) == (3, "")
    assert paused.stdout == pause_text(None, ("call_1", "run_command", f"$ echo hi ⏎ {SANDBOXED}"))
    assert len(server.requests) == 1


def test_the_printed_resume_command_resumes_the_run(server, tmp_path):
    """The pause message's ``Resume with:`` command, run exactly as printed, must
    resume the paused run: against the same endpoint and model it was started with.
    (The environment's default base URL refuses connections, so a resume that
    forgets the endpoint fails instead of reaching a real provider.)"""
    call = ("call_1", "run_command", {"command": "echo hi"})
    server.queue(calls_reply(call))
    server.queue(chat_stream("Resumed."))
    paused = run_chat("--sandbox", "off", "--base-url", server.base_url, "--model", "local-model",
                      "--session", "s.json", "Run it", cwd=tmp_path)
    assert paused.returncode == 3
    printed = paused.stdout.split("Resume with: ", 1)[1].strip()
    argv = shlex.split(printed)
    assert argv[:2] == ["agentflow", "chat"]

    resumed = run_chat("--sandbox", "off", *argv[2:], cwd=tmp_path)
    assert (resumed.returncode, resumed.stderr) == (0, "")
    assert resumed.stdout == ("  → run_command $ echo hi\n"
                              "  [run_command] exit status 0 ⏎ hi\nassistant> Resumed.\n")
    assert len(server.requests) == 2
    assert server.requests[1].json["model"] == "local-model"


def test_respond_without_session_is_a_usage_error(server, tmp_path):
    done = run_chat("--base-url", server.base_url, "--respond", "call_1=yes", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == "agentflow: --respond needs --session FILE (the paused session)\n"
    assert server.requests == []


# == 4. --json =============================================================================

def test_json_updates_pause_and_respond(server, tmp_path):
    """``--json``: one object per line in the protocol's shapes; a paused run ends
    with ``paused`` and exit 3; ``--respond`` with ``--json`` finishes with
    ``finish_reason`` ``stop``."""
    work = tmp_path / "work"  # what list_dir lists: the session file lives elsewhere
    (work / "sub").mkdir(parents=True)
    (work / "a.txt").write_text("a", encoding="utf-8")
    server.queue(calls_reply(("call_1", "list_dir", {"path": "."})))
    server.queue(calls_reply(("call_2", "run_command", {"command": "echo hi"}),
                             text="Now clean."))
    server.queue(chat_stream("Done."))
    session = tmp_path / "s.json"

    paused = run_chat("--sandbox", "off",
                      "--base-url", server.base_url, "--session", str(session), "--json",
                      "Tidy up", cwd=work)
    assert (paused.returncode, paused.stderr) == (3, "")
    assert json_lines(paused.stdout) == [
        {"type": "tool_call_start", "call_id": "call_1", "name": "list_dir", "index": 0},
        {"type": "tool_call_args", "call_id": "call_1", "delta": '{"path'},
        {"type": "tool_call_args", "call_id": "call_1", "delta": '": "."}'},
        {"type": "tool_call_end", "call_id": "call_1"},
        {"type": "tool_result", "call_id": "call_1", "name": "list_dir",
         "result": "a.txt\nsub/"},
        {"type": "text", "text": "Now"},
        {"type": "text", "text": " clean."},
        {"type": "tool_call_start", "call_id": "call_2", "name": "run_command", "index": 0},
        {"type": "tool_call_args", "call_id": "call_2", "delta": '{"command":'},
        {"type": "tool_call_args", "call_id": "call_2", "delta": ' "echo hi"}'},
        {"type": "tool_call_end", "call_id": "call_2"},
        {"type": "approval_request", "call_id": "call_2", "name": "run_command",
         "arguments": {"command": "echo hi"}, "description": RUN_COMMAND_DESCRIPTION,
         "digest": digest({"command": "echo hi"}),
         "request_id": json.loads(session.read_text())["approvals"]["pending"][0]["request_id"]},
        {"type": "finish", "finish_reason": "awaiting_approval",
         "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}},
        {"type": "paused", "pending": ["call_2"]},
    ]
    assert len(server.requests) == 2

    resumed = run_chat("--sandbox", "off",
                       "--base-url", server.base_url, "--session", str(session), "--json",
                       "--respond", "call_2=yes", cwd=work)
    assert (resumed.returncode, resumed.stderr) == (0, "")
    assert json_lines(resumed.stdout) == [
        {"type": "tool_result", "call_id": "call_2", "name": "run_command",
         "result": "exit status 0\nhi\n"},
        {"type": "text", "text": "Done."},
        {"type": "finish", "finish_reason": "stop",
         "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
    ]
    assert server.requests[2].json["messages"][-1] == tool_message("call_2",
                                                                   "exit status 0\nhi\n")


@pytest.fixture
def no_backoff(monkeypatch):
    """The client's retries of a refused connection happen, without their backoff
    waits (about 1 s), when the command runs in this process; make test-slow runs it
    as a child process, waits included."""
    from agentflow.openai_client import OpenAIChatClient
    monkeypatch.setattr(OpenAIChatClient, "_backoff", lambda self, attempt: 0.0)


def test_json_error_line(tmp_path, no_backoff):
    done = run_chat("--sandbox", "off",
                    "--base-url", "http://127.0.0.1:9/v1", "--json", "hi", cwd=tmp_path)
    assert done.returncode == 1
    message = ("could not connect to http://127.0.0.1:9/v1/chat/completions: connection "
               "refused. Is the server running, and is --base-url (or OPENAI_BASE_URL) right? "
               "(tried 3 times)")
    assert json_lines(done.stdout) == [{"type": "error", "kind": "ProviderError",
                                        "message": message}]
    assert done.stderr == f"agentflow: error: {message}\n"


# == 5. errors =============================================================================

def check_one_error_line(done, key: str = KEY) -> str:
    """Exactly one stderr line, ``agentflow: error: …``, no traceback, no key."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("agentflow: error: ")
    assert "Traceback" not in done.stderr
    assert key not in done.stderr and key not in done.stdout
    return lines[0]


def test_unreachable_url(tmp_path, no_backoff):
    done = run_chat("--sandbox", "off", "--base-url", "http://127.0.0.1:9/v1", "hi", cwd=tmp_path)
    assert check_one_error_line(done) == (
        "agentflow: error: could not connect to http://127.0.0.1:9/v1/chat/completions: "
        "connection refused. Is the server running, and is --base-url (or OPENAI_BASE_URL) "
        "right? (tried 3 times)")
    assert done.stdout == ""


def test_max_retries_0_tries_a_refused_connection_once(tmp_path):
    done = run_chat("--sandbox", "off", "--base-url", "http://127.0.0.1:9/v1",
                    "--max-retries", "0", "hi", cwd=tmp_path)
    assert check_one_error_line(done) == (
        "agentflow: error: could not connect to http://127.0.0.1:9/v1/chat/completions: "
        "connection refused. Is the server running, and is --base-url (or OPENAI_BASE_URL) "
        "right?")
    negative = run_chat("--max-retries", "-1", "hi", cwd=tmp_path)
    assert (negative.returncode, negative.stderr) == (
        2, "agentflow: --max-retries must be 0 or more, got -1\n")


SECRET = "sk-my-secret-key-42424242"


def unauthorized() -> Reply:
    """OpenAI's 401 body, which quotes the key that was sent."""
    return Reply(json.dumps({"error": {
        "message": f"Incorrect API key provided: {SECRET}. You can find your API key at "
                   "https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}),
        status=401, content_type="application/json")


def test_401_is_one_line_without_the_key(server, tmp_path):
    server.queue(unauthorized())
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--api-key-env", "MYKEY", "hi",
                    cwd=tmp_path, env=child_env(MYKEY=SECRET))
    line = check_one_error_line(done, SECRET)
    assert line.startswith(
        f"agentflow: error: [HTTP 401, code invalid_api_key] authentication failed at "
        f"{server.base_url}/chat/completions: Incorrect API key provided: ***. You can find "
        "your API key at https://platform.openai.com/account/api-keys. Check the API key")
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert len(server.requests) == 1  # a 401 is not retried


def test_401_hint_names_the_variable_given_by_api_key_env(server, tmp_path):
    """The user chose ``--api-key-env MYKEY``: the hint must point at MYKEY (the
    variable the key was read from), not at OPENAI_API_KEY or a Python argument."""
    server.queue(unauthorized())
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--api-key-env", "MYKEY", "hi",
                    cwd=tmp_path, env=child_env(MYKEY=SECRET))
    line = check_one_error_line(done, SECRET)
    assert "MYKEY" in line, line


def test_404_unknown_model(server, tmp_path):
    server.queue(Reply(json.dumps({"error": {
        "message": "The model `no-such-model` does not exist or you do not have access to it.",
        "type": "invalid_request_error", "param": None, "code": "model_not_found"}}),
        status=404, content_type="application/json"))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--model", "no-such-model", "hi",
                    cwd=tmp_path)
    assert check_one_error_line(done) == (
        "agentflow: error: [HTTP 404, code model_not_found] The model `no-such-model` does "
        "not exist or you do not have access to it. URL: "
        f"{server.base_url}/chat/completions. Check the model name, and that --base-url ends "
        "where the API starts (most servers want a /v1 suffix)")
    assert server.requests[0].json["model"] == "no-such-model"
    assert done.stdout == ""


def test_debug_shows_the_traceback_but_not_the_key(server, tmp_path):
    server.queue(unauthorized())
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--api-key-env", "MYKEY", "--debug", "hi",
                    cwd=tmp_path, env=child_env(MYKEY=SECRET))
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback (most recent call last):\n")
    last = done.stderr.splitlines()[-1]
    assert last.startswith("agentflow.errors.AuthenticationError: [HTTP 401, code invalid_api_key] "
                           "authentication failed at ")
    assert SECRET not in done.stderr and SECRET not in done.stdout


# == 6. options reach the request ==========================================================

def test_model_system_tools_and_key_variable_reach_the_request(server, tmp_path):
    server.queue(chat_stream("Fine."))
    done = run_chat("--base-url", server.base_url, "--model", "my-model",
                    "--system", "Answer in one word.", "--tools", "read_file,list_dir",
                    "--api-key-env", "MYKEY", "How are you?", cwd=tmp_path,
                    env=child_env(MYKEY="sk-from-mykey-777"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "assistant> Fine.\n", "")
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.json["model"] == "my-model"
    assert request.json["messages"] == [{"role": "system", "content": "Answer in one word."},
                                        user("How are you?")]
    assert tool_names(request) == ["read_file", "list_dir"]
    assert request.headers["authorization"] == "Bearer sk-from-mykey-777"


def test_default_key_variable_is_openai_api_key(server, tmp_path):
    server.queue(chat_stream("Fine."))
    done = run_chat("--base-url", server.base_url, "hi", cwd=tmp_path)
    assert done.returncode == 0
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert server.requests[0].json["model"] == "gpt-4o-mini"


def test_tools_none_offers_no_tools(server, tmp_path):
    server.queue(chat_stream("No tools here."))
    done = run_chat("--base-url", server.base_url, "--tools", "none", "hi", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "assistant> No tools here.\n")
    assert "tools" not in server.requests[0].json
    assert server.requests[0].json["messages"] == [user("hi")]


def test_max_rounds_1_stops_after_one_round(server, tmp_path):
    """With ``--max-rounds 1`` the tool round is the last one: the model is not
    called again and the user is told why the run ended."""
    (tmp_path / "only.txt").write_text("", encoding="utf-8")
    server.queue(calls_reply(("call_1", "list_dir", {"path": "."})))
    server.queue(chat_stream("never sent"))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--max-rounds", "1", "List", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "  → list_dir .\n  [list_dir] only.txt\n(finish: max_rounds)\n"
    assert len(server.requests) == 1


def test_the_command_starts_without_the_http_server_or_the_conformance_suite():
    """``agentflow --help`` and ``agentflow chat`` need neither the replay server's
    ``http.server`` nor ``conformance/`` (issue 10: only ``replay`` imports them)."""
    code = ("import sys, agentflow.cli.main as cli\n"
            "for argv in (['--help'], ['chat', '--help']):\n"
            "    try:\n"
            "        cli.main(argv)\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print(sorted({'http.server', 'socketserver', 'conformance'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=child_env(),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "[]")


def test_bad_usage_exits_2_with_one_line(server, tmp_path):
    """Exit status 2 means the command line itself is wrong (agentflow.cli.chat docstring)."""
    done = run_chat("--base-url", server.base_url, "--tools", "read_file,format_disk", "hi",
                    cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("agentflow: --tools: unknown tool(s) format_disk")
    assert done.stderr.count("\n") == 1
    no_message = run_chat("--base-url", server.base_url, cwd=tmp_path)
    assert no_message.returncode == 2
    assert "give the message as an argument" in no_message.stderr
    assert server.requests == []
