"""Every message a new user of ``agentflow`` meets in the first ten minutes names what
was wrong and what to type, in the words of the command line (issue 16).

Each test runs the real command (``tests/helpers_cli.py``: in-process, or the console
script in a child under ``make test-slow``; on a terminal always a child) and pins the whole
message, the exit status (agentflow.cli.chat docstring: 2 bad usage, 3 paused, 130
interrupted) and what was left on disk and sent to the server. One replay server
serves the whole module; a paused session is made once, by a real run, and copied.
The terminal is used only where it changes the behaviour.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys

import pytest

from agentflow.testing.replay import ReplayServer, chat_stream

import helpers_fork
from helpers_cli import (REPO, SANDBOXED, TIMEOUT, calls_reply, child_env,
                         ctrl_c_when_waiting, json_lines, pause_text, pty_chat,
                         run_agentflow, run_chat, saved, slow_reply, tool_message, user)

FRESH = "give another file name to start a new session (this file is left as it is)"


@pytest.fixture(scope="module")
def shared_server():
    with ReplayServer() as replay:
        yield replay


@pytest.fixture
def server(shared_server):
    """The module's server, with this test's requests only."""
    shared_server.requests.clear()
    return shared_server


def without(env: dict, *names) -> dict:
    return {k: v for k, v in env.items() if k not in names}


def usage_error(done) -> str:
    """The one-line message of a run that ended with bad usage (exit 2, nothing on
    stdout), without its ``agentflow: `` prefix."""
    assert (done.returncode, done.stdout) == (2, ""), (done.stdout, done.stderr)
    assert done.stderr.startswith("agentflow: ") and done.stderr.count("\n") == 1
    return done.stderr[len("agentflow: "):-1]


# -- a paused session, made once --------------------------------------------------------------

PAUSED_CALLS = (("call_1", "run_command", {"command": "rm -rf build"}),
                ("call_2", "write_file", {"path": "notes.txt", "content": "one\n2\nthree\n"}),
                ("call_3", "write_file", {"path": "new.txt", "content": "x\n"}))
PAUSED_SUMMARIES = (("call_1", "run_command", f"$ rm -rf build ⏎ {SANDBOXED}"),
                    ("call_2", "write_file", "notes.txt: +2 -1 lines"),
                    ("call_3", "write_file", "new.txt (new file): +1 -0 lines"))


@pytest.fixture(scope="module")
def paused_run(shared_server, tmp_path_factory):
    """``agentflow chat --session s.json "Tidy up"`` without a terminal, where the model
    calls three tools that need approval: the finished process and its folder."""
    folder = tmp_path_factory.mktemp("paused")
    (folder / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")
    shared_server.queue(calls_reply(*PAUSED_CALLS))
    done = run_chat("--sandbox", "off",
                    "--base-url", shared_server.base_url, "--session", "s.json", "Tidy up",
                    cwd=folder)
    return done, folder


@pytest.fixture
def paused(paused_run, tmp_path):
    """A copy of the paused run's folder (s.json, notes.txt) as this test's cwd."""
    for name in ("s.json", "notes.txt"):
        shutil.copy(paused_run[1] / name, tmp_path / name)
    return tmp_path


def test_a_pause_without_a_terminal_shows_every_call_and_leaves_no_lock_file(paused_run):
    """Not just the ids: the command, and the path and size of each write's diff, so
    the user can judge before typing --respond; and no stray ``s.json.lock``."""
    done, folder = paused_run
    assert (done.returncode, done.stderr) == (3, "")
    assert done.stdout == pause_text("s.json", *PAUSED_SUMMARIES)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "s.json", "s.json.rev"]
    assert [r["call_id"] for r in saved(folder / "s.json")["approvals"]["pending"]] == [
        "call_1", "call_2", "call_3"]


def test_a_paused_session_without_a_message_points_at_respond(paused, server):
    """Formerly "no message given": the session is paused, so that is what is said."""
    done = run_chat("--sandbox", "off", "--session", "s.json", cwd=paused)
    assert (done.returncode, done.stderr) == (3, "")
    assert done.stdout == pause_text("s.json", *PAUSED_SUMMARIES)
    assert server.requests == []


def test_a_paused_session_does_not_send_a_new_message(paused, server):
    """Sending it would reject the waiting calls unseen (SPEC R4); the user is told to
    answer them first, and nothing is sent or changed."""
    before = (paused / "s.json").read_text(encoding="utf-8")
    done = run_chat("--sandbox", "off", "--session", "s.json", "something else", cwd=paused)
    assert (done.returncode, done.stderr) == (3, "")
    assert done.stdout == ("This session is paused, so your message was not sent: answer the "
                           "calls that wait first.\n" + pause_text("s.json", *PAUSED_SUMMARIES))
    assert server.requests == []
    assert (paused / "s.json").read_text(encoding="utf-8") == before


# -- before anything connects -----------------------------------------------------------------

@pytest.mark.parametrize("flags, variable", [([], "OPENAI_API_KEY"),
                                             (["--api-key-env", "MYKEY"], "MYKEY")])
def test_no_key_for_openai_is_said_before_connecting(tmp_path, flags, variable):
    """No --base-url and no OPENAI_BASE_URL means OpenAI, which needs a key: the missing
    variable is named at once (exit 2), instead of a connection attempt."""
    env = without(child_env(), "OPENAI_BASE_URL", "OPENAI_API_KEY")
    done = run_chat(*flags, "hi", cwd=tmp_path, env=env)
    assert usage_error(done) == (
        f"no API key: {variable} is not set, and OpenAI (the default endpoint) "
        f"needs one. Set it (export {variable}=sk-...), or name the variable that holds it "
        "with --api-key-env VAR; for a local server, give its --base-url (e.g. "
        "http://localhost:11434/v1)")


@pytest.mark.parametrize("flags, extra_env, message", [
    (["--base-url", "127.0.0.1:9999/v1"], {},
     "--base-url '127.0.0.1:9999/v1' is not an http:// or https:// URL; write --base-url "
     "http://127.0.0.1:9999/v1 (or https:// for a remote server)"),
    ([], {"OPENAI_BASE_URL": "localhost:9999/v1"},
     "OPENAI_BASE_URL 'localhost:9999/v1' is not an http:// or https:// URL; write export "
     "OPENAI_BASE_URL=http://localhost:9999/v1 (or https:// for a remote server)"),
])
def test_a_base_url_without_http_says_to_add_it(tmp_path, flags, extra_env, message):
    """Formerly requests' "No connection adapters were found for …"."""
    done = run_chat(*flags, "hi", cwd=tmp_path, env=child_env(**extra_env))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"agentflow: {message}\n")


@pytest.mark.parametrize("url, why", [("http://[::1", "Invalid IPv6 URL"),
                                      ("http://localhost:99999/v1", "Port out of range 0-65535")])
def test_a_base_url_that_is_no_url_is_bad_usage_naming_the_flag(tmp_path, url, why):
    """A URL Python cannot parse (an unclosed IPv6 bracket, a port out of range) is
    bad usage (2) naming --base-url, not an error (1) in urllib's words alone."""
    done = run_chat("--base-url", url, "hi", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"agentflow: --base-url {url!r} is not a valid URL ({why}); write it "
                           "as http://HOST:PORT/v1, with an IPv6 address in brackets: "
                           "http://[::1]:8080/v1\n")


def test_bad_usage_exits_2_and_json_ends_with_an_error_object(tmp_path):
    """``--max-rounds 0`` is bad usage (2, not 1); with --json, stdout still ends with
    one closing JSON object."""
    done = run_chat("--json", "--max-rounds", "0", "hi", cwd=tmp_path)
    message = "--max-rounds must be 1 or more, got 0"
    assert done.returncode == 2
    assert json_lines(done.stdout) == [{"type": "error", "kind": "UsageError",
                                        "message": message}]
    assert done.stderr == f"agentflow: {message}\n"


def test_json_on_a_terminal_without_a_message(tmp_path):
    """Formerly "standard input is not a terminal", which was untrue on a terminal."""
    chat = pty_chat("--sandbox", "off", "--json", cwd=tmp_path)
    assert chat.wait() == 2
    message = ("--json runs one message and prints no prompt: give the message as an "
               "argument, e.g. agentflow chat --json \"MESSAGE\"")
    assert chat.text == (json.dumps({"type": "error", "kind": "UsageError", "message": message})
                         + f"\nagentflow: {message}\n")


# -- --respond ---------------------------------------------------------------------------------

def test_respond_to_an_unknown_call_lists_the_waiting_ones(paused, server):
    before = (paused / "s.json").read_text(encoding="utf-8")
    done = run_chat("--sandbox", "off",
                    "--session", "s.json", "--respond", "call_9=yes", cwd=paused)
    assert usage_error(done) == (
        "--respond 'call_9=yes': no call 'call_9' waits for approval in s.json. "
        f"Waiting: call_1 (run_command $ rm -rf build ⏎ {SANDBOXED}); call_2 (write_file notes.txt: +2 -1 "
        "lines); call_3 (write_file new.txt (new file): +1 -0 lines)")
    assert server.requests == []
    assert (paused / "s.json").read_text(encoding="utf-8") == before


def test_respond_says_which_waiting_calls_it_leaves_unanswered(paused, server):
    """A call without a --respond is rejected on resume (SPEC R4): said before it
    happens, not left for the user to find in the history."""
    server.queue(chat_stream("Fine, I left everything alone."))
    done = run_chat("--sandbox", "off",
                    "--session", "s.json", "--respond", "call_1=no:not now", cwd=paused)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == ("(no --respond for call_2, call_3: rejected, as if you said no)\n"
                           "  → run_command $ rm -rf build\n"
                           "  [run_command] Rejected: not now\n"
                           "  → write_file notes.txt\n"
                           "  [write_file] Rejected: User denied\n"
                           "  → write_file new.txt\n"
                           "  [write_file] Rejected: User denied\n"
                           "assistant> Fine, I left everything alone.\n")
    assert server.requests[0].json["messages"][-3:] == [
        tool_message("call_1", "Rejected: not now"),
        tool_message("call_2", "Rejected: User denied"),
        tool_message("call_3", "Rejected: User denied")]


def test_respond_twice_to_one_call(paused, server):
    done = run_chat("--sandbox", "off",
                    "--session", "s.json", "--respond", "call_1=yes", "--respond",
                    "call_1=no", cwd=paused)
    assert usage_error(done) == ("--respond: call_1 is answered twice; give one answer "
                                 "per call")
    assert server.requests == []


def test_respond_to_a_session_that_is_not_paused(server, tmp_path):
    """Formerly the library's "resume with the same AgentSession the run paused in"."""
    server.queue(chat_stream("Hello."))
    assert run_chat("--sandbox", "off", "--base-url", server.base_url, "--session", "s.json", "hi",
                    cwd=tmp_path).returncode == 0
    done = run_chat("--sandbox", "off",
                    "--session", "s.json", "--respond", "call_1=yes", cwd=tmp_path)
    assert usage_error(done) == (
        "--respond: s.json has no call waiting for approval (it is not paused), "
        "so there is nothing to answer; send a message instead: agentflow chat --session "
        "s.json \"MESSAGE\"")
    assert len(server.requests) == 1


# -- session files -------------------------------------------------------------------------------

@pytest.mark.parametrize("content, problem", [
    ("{}", "is not a saved session (JSON without a schema_version, so not written by "
           f"agentflow); {FRESH}"),
    ("", "is empty, not a saved session: delete it (rm s.json) to start a new session there, "
         "or give another file"),
    ("chat log\n", f"is not a saved session (it is not JSON); {FRESH}"),
    ('{"schema_version": 99, "messages": []}',
     "was written by a newer agentflow (schema_version 99; this one reads up to 3): upgrade "
     f"agentflow (pip install -U . in a checkout of agentflow-approvals), or {FRESH}"),
    ('{"schema_version": 2, "messages": [], "signature": {"alg": "HMAC-SHA256", "value": "0"}}',
     "is signed (saved with AgentSession.open(..., secret=...)), and agentflow chat opens "
     f"unsigned sessions only; {FRESH}"),
])
def test_a_session_file_that_is_not_a_session(tmp_path, content, problem):
    (tmp_path / "s.json").write_text(content, encoding="utf-8")
    done = run_chat("--session", "s.json", "hi", cwd=tmp_path)
    assert usage_error(done) == f"--session s.json {problem}"
    assert (tmp_path / "s.json").read_text(encoding="utf-8") == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_a_session_that_is_a_folder(tmp_path):
    """Formerly a raw ``[Errno 21]`` and a stray ``sdir.lock``."""
    (tmp_path / "sdir").mkdir()
    done = run_chat("--session", "sdir", "hi", cwd=tmp_path)
    assert usage_error(done) == ("--session sdir is a folder; give a file in it, e.g. "
                                 "--session sdir/chat.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sdir"]


def test_a_session_in_a_missing_folder(tmp_path):
    """Formerly an error naming ``x.json.lock``."""
    done = run_chat("--session", "nope/x.json", "hi", cwd=tmp_path)
    assert usage_error(done) == (f"--session nope/x.json: the folder {tmp_path}/nope does "
                                 f"not exist; create it (mkdir -p {tmp_path}/nope) or give "
                                 "another path")
    assert list(tmp_path.iterdir()) == []


# -- Ctrl-C -------------------------------------------------------------------------------------

def test_ctrl_c_at_the_approval_prompt_keeps_the_call_pending_and_says_how_to_resume(
        server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": "touch ran.txt"})))
    chat = pty_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--session", "s.json", "Make a file",
                    cwd=tmp_path)
    chat.expect("[q]uit: ")
    ctrl_c_when_waiting(chat)
    assert chat.wait() == 130
    assert chat.rest().endswith(
        "\n(stopped by Ctrl-C at the approval prompt: nothing ran)\n"
        + pause_text("s.json", ("call_1", "run_command", f"$ touch ran.txt ⏎ {SANDBOXED}")))
    assert not (tmp_path / "ran.txt").exists()
    assert [r["call_id"] for r in saved(tmp_path / "s.json")["approvals"]["pending"]] == [
        "call_1"]


def test_ctrl_d_at_the_approval_prompt_pauses_like_q(server, tmp_path):
    """End of input at the prompt (formerly a traceback) keeps the call pending."""
    server.queue(calls_reply(("call_1", "run_command", {"command": "touch ran.txt"})))
    chat = pty_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--session", "s.json", "Make a file",
                    cwd=tmp_path)
    chat.expect("[q]uit: ")
    chat.send_raw(b"\x04")
    assert chat.wait() == 3
    assert chat.rest() == "\n" + pause_text("s.json", ("call_1", "run_command",
                                                       f"$ touch ran.txt ⏎ {SANDBOXED}"))
    assert not (tmp_path / "ran.txt").exists()


def test_ctrl_c_mid_stream_with_json_ends_with_a_closing_object_and_keeps_the_message(
        server, tmp_path):
    """No terminal needed: SIGINT is what Ctrl-C sends. The output is whole JSON lines
    ending with ``interrupted``; the session keeps the user's message (not the cut-off
    reply), so the next turn still sees the question."""
    server.queue(slow_reply("alpha", "omega-never-shown"))
    # Forked in make test (tests/helpers_fork.py: no interpreter start, half a second):
    # the fork server gives its child Python's own SIGINT handler. A started child
    # (test-slow) gets SIGINT's default back first, in case this process ignores it (a
    # background job does), since Python keeps an ignored SIGINT ignored.
    started = {"preexec_fn": lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)}
    child = helpers_fork.popen(
        [sys.executable, "-m", "agentflow", "chat", "--sandbox", "off",
         "--base-url", server.base_url, "--session", "s.json", "--json",
         "Tell me a story"], cwd=tmp_path, env=child_env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        **(started if helpers_fork.IN_SUBPROCESS else {}))
    first = child.stdout.readline()
    child.send_signal(signal.SIGINT)
    rest, errors = child.communicate(timeout=TIMEOUT)
    assert (child.returncode, errors) == (130, "")
    assert json_lines(first + rest) == [
        {"type": "text", "text": "alpha"},
        {"type": "interrupted", "message": "stopped by Ctrl-C: your message and every "
                                           "completed step are kept; the unfinished step is "
                                           "not"}]
    assert saved(tmp_path / "s.json")["messages"] == [user("Tell me a story")]


def test_a_worker_names_a_setting_it_lacks_instead_of_saying_none():
    """Issue 34: a worker skipping a session said "this worker has None" for a setting
    it was not given; it says which flag is missing."""
    from agentflow.cli.settings import DEFAULTS
    from agentflow.cli.worker import settings_problem
    mine = {**DEFAULTS, "tools": "run_command"}
    assert settings_problem({**mine, "system": "Be terse."}, mine) == (
        "--system: the session remembers 'Be terse.', this worker has no --system")
    assert settings_problem({**mine, "profile": None}, {**mine, "profile": "ollama"}) == (
        "--profile: the session remembers no --profile, this worker has 'ollama'")
