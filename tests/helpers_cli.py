"""Running ``agentflow`` the way a user does, for the end-to-end tests of the command
line (test_cli_chat.py, test_cli_messages.py …): the child's environment, the command
with no terminal or on a pseudo-terminal, the model turns a ``ReplayServer`` serves,
and the shapes of what the user sees and what is saved.

Without a terminal, ``run_agentflow`` runs the command inside the test process
(``agentflow.cli.main.main``, which the console script calls, with the same command
line, environment, folder and standard input): a child would spend most of each test
importing. ``CLI_TESTS_IN_SUBPROCESS=1`` (``make test-slow``, which CI runs as well)
runs each through the console script in a child process instead, exactly as a user
starts it. On a pseudo-terminal (``pty_chat``) the command is always a child process
(in make test forked from one that has agentflow imported: tests/helpers_fork.py)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from unittest import mock

import pytest

from agentflow.builtin import sandbox
from agentflow.canonical import arguments_digest
from agentflow.testing.replay import Reply, chat_stream
from agentflow.session import AgentSession

from helpers_pty import PtyProcess

REPO = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT = 120  # seconds; only against hangs
KEY = "sk-test-0123456789abcdef"  # the key every child gets in OPENAI_API_KEY
USER = "tester"  # the approver name the child's getpass.getuser() returns

RUN_COMMAND_DESCRIPTION = ("Run a shell command on this machine and return its exit "
                           "status and output.")
WRITE_FILE_DESCRIPTION = "Write a text file, replacing what it held."
ALL_TOOLS = ["run_command", "read_file", "list_dir", "write_file"]
PROMPT = "approve? [y]es, [n]o, [a]llow from now on, [e]dit, [q]uit: "
# What the prompt and the pause listing say of a call run with --sandbox off: the CLI
# tests that are not about the sandbox say so, so that what they see is the same on a
# machine without bubblewrap (where the default sandbox adds a note, issue 34); the
# sandbox's own tests (test_sandbox.py) call need_bwrap().
SANDBOXED = "not sandboxed"


def need_bwrap() -> None:
    """Skip where bwrap cannot run a sandbox, naming the package to install; under
    CI=true that is a failure (.ci/run installs bubblewrap)."""
    reason = sandbox.unavailable()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"bwrap is required under CI=true (.ci/run installs bubblewrap): {reason}")
    pytest.skip(f"{reason} (apt-get install bubblewrap)")


# The children's configuration folder (XDG_CONFIG_HOME): empty at first, so no user
# policy; agentflow keeps there what the person trusted and the key that signs the
# settings it remembers (SPEC R26). One per test process, removed at exit.
CONFIG_HOME = tempfile.mkdtemp(prefix="agentflow-test-config-")
STORE_KEY_FILE = os.path.join(CONFIG_HOME, "agentflow", "store.key")  # chats sign stores (R27)
atexit.register(shutil.rmtree, CONFIG_HOME, True)
# Their state folder (XDG_STATE_HOME): the chat's input history goes there, not to the
# home folder of the person running the tests.
STATE_HOME = tempfile.mkdtemp(prefix="agentflow-test-state-")
atexit.register(shutil.rmtree, STATE_HOME, True)


def trust_project_file(path) -> None:
    """Record, as the person would on a terminal, that they trust the project policy
    file at ``path`` as it is now (SPEC R26), in the children's configuration folder."""
    from agentflow.cli import trust
    saved = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = CONFIG_HOME
    try:
        trust.trust(str(path))
    finally:
        if saved is None:
            del os.environ["XDG_CONFIG_HOME"]
        else:
            os.environ["XDG_CONFIG_HOME"] = saved


def store_key() -> bytes:
    """The key the children's chats sign their stores with (SPEC R27): ``store.key`` in
    their configuration folder, made by the first one that needs it."""
    from agentflow.cli.trust import made_key
    return made_key(STORE_KEY_FILE)


def child_env(**extra) -> dict:
    """The child's environment: no stray OpenAI/agentflow settings from the outer
    shell, a known user name (the approver in the audit trail), UTF-8 output, and a
    default base URL that refuses connections, so that no test can ever reach a real
    provider by accident."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "AGENTFLOW_"))}
    env.update(USER=USER, LOGNAME=USER, PYTHONIOENCODING="utf-8", TERM="dumb",
               OPENAI_API_KEY=KEY, OPENAI_BASE_URL="http://127.0.0.1:9/v1",
               XDG_CONFIG_HOME=CONFIG_HOME,  # no user policy; trust records, key (R26)
               XDG_STATE_HOME=STATE_HOME)
    env.update(extra)
    return env


AGENTFLOW = str(pathlib.Path(sys.executable).with_name("agentflow"))  # the console script


IN_SUBPROCESS = os.environ.get("CLI_TESTS_IN_SUBPROCESS") == "1"


@functools.cache
def _parser(build):
    """The command's parser, built once per test process: it holds no state between
    parses, and building it was a third of an in-process command (7 ms)."""
    parser = build()
    return lambda: parser


def run_agentflow(*args, cwd, env=None, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """``agentflow ARGS`` with no terminal, ``stdin`` on standard input, in ``cwd``
    with exactly ``env`` (default ``child_env()``); ``stdout`` and ``stderr`` as text.
    In-process, an exception that escapes ``main`` is printed with its traceback and
    gives status 1, as the interpreter does; ``SystemExit`` gives its code."""
    env = env or child_env()
    if IN_SUBPROCESS:
        done = subprocess.run([AGENTFLOW, *args], cwd=cwd, env=env, input=stdin,
                              capture_output=True, timeout=TIMEOUT)
        return subprocess.CompletedProcess(done.args, done.returncode,
                                           done.stdout.decode("utf-8"),
                                           done.stderr.decode("utf-8"))
    from agentflow.cli import main as command
    # as a child's streams are: UTF-8 (child_env's PYTHONIOENCODING), strict on stdout
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace",
                           write_through=True)
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                mock.patch.object(command, "build_parser", _parser(command.build_parser)):
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
            try:
                status = command.main(list(args))
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            except Exception:  # noqa: BLE001 - printed as the interpreter would
                traceback.print_exc()
                status = 1
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["agentflow", *args], status,
                                       out.buffer.getvalue().decode("utf-8"),
                                       err.buffer.getvalue().decode("utf-8"))


def run_chat(*args, cwd, env=None) -> subprocess.CompletedProcess:
    """``agentflow chat ARGS`` with no terminal and nothing on standard input."""
    return run_agentflow("chat", *args, cwd=cwd, env=env)


def pty_chat(*args, cwd, env=None) -> PtyProcess:
    """``python -m agentflow chat ARGS`` on a pseudo-terminal."""
    return PtyProcess(["chat", *args], cwd=cwd, env=env or child_env())


def ctrl_c_when_waiting(chat: PtyProcess) -> None:
    """Type Ctrl-C once the child is asleep, waiting to read the terminal or the
    stream. A SIGINT that lands between ``input()`` writing its prompt and starting to
    read is only noticed when the read returns, so a test that typed Ctrl-C on seeing
    the prompt would hang now and then; a user, slower than a test, never meets that
    window. Where ``/proc`` is missing this waits for nothing."""
    stat = pathlib.Path(f"/proc/{chat.proc.pid}/stat")
    deadline = time.monotonic() + TIMEOUT
    while stat.exists() and time.monotonic() < deadline:
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "S":  # sleeping
            break
        time.sleep(0.001)
    chat.send_raw(b"\x03")


def calls_reply(*calls, text: str = "") -> bytes:
    """A streamed model turn calling ``calls``: ``(call_id, tool, arguments dict)``."""
    return chat_stream(text=text, tool_calls=[(i, n, json.dumps(a)) for i, n, a in calls])


def digest(arguments: dict) -> str:
    """SHA-256 of the canonical JSON of ``arguments`` (the approval digest)."""
    return arguments_digest(json.dumps(arguments))


def tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.json.get("tools", [])]


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text, *calls) -> dict:
    message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [{"id": i, "type": "function",
                                  "function": {"name": n, "arguments": json.dumps(a)}}
                                 for i, n, a in calls]
    return message


def tool_message(call_id: str, content: str) -> dict:
    return {"role": "tool", "content": content, "tool_call_id": call_id}


def pause_text(session, *calls) -> str:
    """What a paused run prints: each waiting call ``(call_id, tool, summary)`` and
    how to answer (``session`` is the --session path, or None without one)."""
    count = f"{len(calls)} call waits" if len(calls) == 1 else f"{len(calls)} calls wait"
    width = max(len(c[0]) for c in calls)
    tool_width = max(len(c[1]) for c in calls)
    lines = [f"paused: {count} for approval:"]
    lines += [f"  {i:<{width}}  {t:<{tool_width}}  {summary}" for i, t, summary in calls]
    if session is None:
        lines.append("Without --session FILE this pause cannot be resumed later: run again "
                     "with --session FILE, and answer on a terminal or with --approve-all / "
                     "--deny-all.")
    else:
        lines += ["Answer each call: CALL_ID=yes runs it, CALL_ID=no:REASON rejects it.",
                  f"Resume with: agentflow chat --session {session} "
                  + " ".join(f"--respond {c[0]}=yes" for c in calls)]
    return "\n".join(lines) + "\n"


def saved(path) -> dict:
    """The saved session file as JSON, after checking that ``AgentSession.load``
    accepts it."""
    AgentSession.load(path)
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


def audit_summary(session_json: dict) -> list[tuple]:
    """(call_id, tool, digest, outcome, reason, approver) per audit record."""
    return [(r["call_id"], r["tool"], r["digest"], r["outcome"], r["reason"], r["approver"])
            for r in session_json["approvals"]["audit"]]


def run_command_block(call_id: str, command: str, why: str = "run_command always asks",
                      of: str = "") -> str:
    """What the approval prompt shows for ``run_command(command)``: ``why`` is what the
    gate recorded (every prompt says why it asks, issue 34); ``of`` (``"1 of 2"``) when
    the turn has several calls waiting (issue 24)."""
    return (f"── approval needed ── {call_id}{f' (call {of})' if of else ''}\n"
            "tool:        run_command\n"
            f"description: {RUN_COMMAND_DESCRIPTION}\n"
            f"why:         {why}\n"
            "arguments:\n"
            "  {\n"
            f"    \"command\": {json.dumps(command)}\n"
            "  }\n"
            f"$ {command}\n"
            f"{SANDBOXED}\n"
            f"{PROMPT}")


def slow_reply(first_word: str, rest: str) -> Reply:
    """A reply whose first word arrives at once-ish and whose ``rest`` only after 2000
    SSE comment lines, each a hundredth of a second apart: the stream is still open, in
    the middle of a model turn, 20 s after the first word is on the screen (a hundred
    times what a test takes to type Ctrl-C on seeing it), and the server notices within
    0.02 s that the reader left (its teardown waits for that; the first word waits one
    delay too)."""
    events = [e + "\n\n" for e in
              chat_stream(f"{first_word} {rest}").decode().split("\n\n") if e]
    # events: role, first word, the rest's words, finish, usage, [DONE]
    head = events[0] + events[1]
    return Reply(chunks=[head.encode()] + [b": still thinking\n\n"] * 2000
                 + ["".join(events[2:]).encode()], delay=0.01)


def json_lines(stdout: str) -> list[dict]:
    """Every stdout line, parsed; each must be one JSON object."""
    lines = stdout.splitlines()
    parsed = [json.loads(line) for line in lines]
    assert all(isinstance(item, dict) for item in parsed), stdout
    return parsed
