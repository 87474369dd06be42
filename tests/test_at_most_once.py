"""At most once, across crashes (SPEC R16; issue 11). An approved call runs at most
once whatever happens around it: a SIGKILL before, during or after the tool, Ctrl-C
inside it, a result with text no codec can write, arguments nested 10,000 deep, a
result that cannot be converted. Each test counts how many times the tool really ran
(a log the tool appends to, shared with the killed process)."""

import itertools
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalError, ApprovalRequiredTool,
                       ChatMessage, FinishReason, Tool, ToolApprovalRequest,
                       ToolApprovalResponse, ToolResult, tool)
from agentflow.builtin.builtin_tools import builtin_tools
from agentflow.testing.replay import ReplayServer, chat_stream
from agentflow.stores import SQLiteStore

import helpers_fork
from helpers_pty import PtyProcess
from helpers_cli import calls_reply, child_env, run_chat

HERE = os.path.dirname(os.path.abspath(__file__))
INTERRUPTED = "Error: interrupted: transfer may have partly run and was not run again"
PAY = '{"amount": 120}'


def approve(call_id="c1"):
    return AgentRunOptions().with_tool_approval_responses([ToolApprovalResponse(call_id, True)])


def results(updates):
    return [(u.call_id, u.result) for u in updates if isinstance(u, ToolResult)]


def paying_agent(make_agent, log, *bodies, idempotent=False, body=None):
    """An agent whose approval-gated ``transfer`` appends to ``log`` and then does
    ``body()`` (raise, return something odd)."""
    @tool(idempotent=idempotent)
    def transfer(amount: int):
        """Send money."""
        with open(log, "a") as handle:
            handle.write(f"transfer {amount}\n")
        return body() if body is not None else f"sent {amount}"

    return make_agent(list(bodies), tools=[ApprovalRequiredTool(transfer)])


def runs(log) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


# -- SIGKILL around the tool -------------------------------------------------------------

def pause_in_file(make_agent, path, log):
    agent, _ = paying_agent(make_agent, log, chat_stream(tool_calls=[("c1", "transfer", PAY)]))
    with AgentSession.open(path) as session:
        assert list(agent.run("pay", session))[-1].finish_reason is FinishReason.AWAITING_APPROVAL


def kill_worker_at(point, path, log):
    """Resume the paused file in a worker process, SIGKILL it at ``point``."""
    with ReplayServer([chat_stream(text="never reached")]) as server:
        worker = helpers_fork.popen(
            [sys.executable, os.path.join(HERE, "worker.py"), str(path), "s", server.base_url,
             str(log), "--respond", "c1=yes", "--stop-at", point],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = worker.stdout.readline().strip()
            assert line == f"at {point}", worker.communicate()
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.communicate(timeout=60)


@pytest.mark.parametrize("point", ["tool", "after-result"])
def test_r16_a_kill_during_or_after_the_tool_never_runs_it_again(make_agent, tmp_path, point):
    path, log = tmp_path / "s.json", tmp_path / "ran.log"
    pause_in_file(make_agent, path, log)
    kill_worker_at(point, path, log)
    assert runs(log) == 1
    stored = AgentSession.load(path)
    assert list(stored.running) == ["c1"] and [r.outcome for r in stored.audit] == ["approved"]

    agent, server = paying_agent(make_agent, log, chat_stream(text="It may have gone out."))
    with AgentSession.open(path) as session:  # the same answer again: refused
        with pytest.raises(ApprovalError, match="c1 already started in an earlier run"):
            list(agent.run([], session, approve()))
    with AgentSession.open(path) as session:  # going on: the model is told the truth
        updates = list(agent.run([], session))
    assert results(updates) == [("c1", INTERRUPTED)]
    assert server.requests[0].json["messages"][-1] == {
        "role": "tool", "content": INTERRUPTED, "tool_call_id": "c1"}
    assert runs(log) == 1
    final = AgentSession.load(path)
    assert final.running == {} and final.messages[-1].content == "It may have gone out."


def test_r16_a_kill_before_the_start_is_recorded_leaves_the_approval_unused(make_agent,
                                                                            tmp_path):
    path, log = tmp_path / "s.json", tmp_path / "ran.log"
    pause_in_file(make_agent, path, log)
    kill_worker_at("before-start", path, log)
    assert runs(log) == 0
    stored = AgentSession.load(path)
    assert stored.running == {} and [r.call_id for r in stored.approvals.pending] == ["c1"]

    agent, _ = paying_agent(make_agent, log, chat_stream(text="Paid."))
    with AgentSession.open(path) as session:
        updates = list(agent.run([], session, approve()))
    assert results(updates) == [("c1", "sent 120")] and runs(log) == 1


def test_r16_an_idempotent_tool_cut_short_runs_again(make_agent, tmp_path):
    """A crash after the write-ahead record (here: an exception the loop does not
    catch, so nothing records a result) of an idempotent tool: it simply runs again."""
    class Crash(BaseException):
        pass

    def crash():
        raise Crash()

    store, log = SQLiteStore(tmp_path / "s.db"), tmp_path / "ran.log"
    agent, _ = paying_agent(make_agent, log, chat_stream(tool_calls=[("c1", "transfer", PAY)]),
                            idempotent=True, body=crash)
    with store.open("s") as session:
        list(agent.run("pay", session))
    with pytest.raises(Crash), store.open("s") as session:
        list(agent.run([], session, approve()))
    assert list(store.load("s").running) == ["c1"]
    agent, _ = paying_agent(make_agent, log, chat_stream(text="Done."), idempotent=True)
    with store.open("s") as session:
        updates = list(agent.run([], session))
    assert results(updates) == [("c1", "sent 120")] and runs(log) == 2
    assert store.load("s").running == {}


# -- Ctrl-C and SystemExit inside a tool ---------------------------------------------------

@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_r16_an_interrupt_inside_a_tool_stores_the_truth_first(make_agent, tmp_path, interrupt):
    def stop():
        raise interrupt()

    log = tmp_path / "ran.log"
    agent, server = paying_agent(make_agent, log, chat_stream(tool_calls=[("c1", "transfer", PAY)]),
                                 chat_stream(text="Stopped."), body=stop)
    with AgentSession.open(tmp_path / "s.json") as session:
        list(agent.run("pay", session))
        with pytest.raises(interrupt):
            list(agent.run([], session, approve()))
        stored = AgentSession.load(tmp_path / "s.json")  # saved before it propagated
        assert stored.messages[-1] == ChatMessage.tool(INTERRUPTED, "c1")
        assert stored.running == {} and [r.outcome for r in stored.audit] == ["approved"]
        with pytest.raises(ApprovalError, match="already have a result"):
            list(agent.run([], session, approve()))
        updates = list(agent.run([], session))
    assert updates[-1].finish_reason is FinishReason.STOP
    assert server.requests[1].json["messages"][-1]["content"] == INTERRUPTED  # not "Rejected"
    assert runs(log) == 1


def test_r16_ctrl_c_ends_run_command_and_everything_it_started(make_agent, tmp_path):
    """A real SIGINT while the built-in run_command waits: the command's process group
    is killed (it runs in its own session, so the terminal's Ctrl-C never reaches it)."""
    pid_file = tmp_path / "pid"
    command = f"sleep 30 & echo $! > {pid_file}; wait"
    agent, _ = make_agent([calls_reply(("c1", "run_command", {"command": command}))],
                          tools=builtin_tools(["run_command"]))
    session = AgentSession()
    list(agent.run("sleep", session))

    def interrupt_once_started(signum, frame):
        if pid_file.exists() and pid_file.read_text().strip():
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt_once_started)
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    try:
        with pytest.raises(KeyboardInterrupt):
            list(agent.run([], session, approve()))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert session.messages[-1].content == ("Error: interrupted: run_command may have partly "
                                            "run and was not run again")
    assert_gone(int(pid_file.read_text()))


def assert_gone(pid: int) -> None:
    """The process ``pid`` ends (SIGKILL is asynchronous: wait for it, up to 10 s)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().split(") ")[1].startswith("Z"):
                    return  # killed, waiting for its parent to collect it
        except (FileNotFoundError, ProcessLookupError):  # gone, also between open and read
            return
        time.sleep(0.01)
    pytest.fail(f"process {pid} still runs")


# -- the CLI ---------------------------------------------------------------------------

_SLEEPS = itertools.count()


def sleep_pid(duration: str) -> int:
    """The pid, as this process sees it, of the one ``sleep DURATION`` running: in the
    sandbox (issue 27) a command's ``$!`` is a pid of the sandbox's own."""
    wanted = f"sleep\0{duration}\0".encode()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # $! is known before the child runs sleep
        found = []
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if handle.read() == wanted:
                        found.append(int(name))
            except OSError:
                continue
        if found:
            assert len(found) == 1, f"sleep {duration}: {found}"
            return found[0]
        time.sleep(0.01)
    pytest.fail(f"sleep {duration} never started")


def cli_paused_on_a_slow_command(server, tmp_path):
    """``agentflow chat --session s.json`` paused on a run_command that records its
    start, writes the pid of a long sleep and waits for it; returns the session, the
    start file and the sleep's duration, unique to the test (``sleep_pid``)."""
    started = tmp_path / "started"
    duration = f"30.{os.getpid()}{next(_SLEEPS)}"
    command = (f"echo once >> {started}; sleep {duration} & echo $! > {tmp_path / 'pid'}; "
               "wait")
    server.queue(calls_reply(("call_1", "run_command", {"command": command})))
    session = tmp_path / "s.json"
    paused = run_chat("--base-url", server.base_url, "--session", str(session), "Run it",
                      cwd=tmp_path)
    assert paused.returncode == 3, paused.stderr
    return session, started, duration


def wait_for_file(path) -> None:
    deadline = time.monotonic() + 30
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


@pytest.fixture
def server():
    replay = ReplayServer().start()
    yield replay
    replay.stop()


def test_r16_cli_killed_while_the_command_runs(server, tmp_path):
    """SIGKILL of ``agentflow chat --respond call_1=yes`` while the approved command
    runs: the command dies with it, and the same answer again runs nothing."""
    session, started, duration = cli_paused_on_a_slow_command(server, tmp_path)
    cli = helpers_fork.popen([sys.executable, "-m", "agentflow", "chat", "--base-url",
                              server.base_url, "--session", str(session), "--respond",
                              "call_1=yes"], cwd=tmp_path, env=child_env(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    wait_for_file(tmp_path / "pid")
    pid = sleep_pid(duration)
    cli.kill()
    cli.communicate(timeout=60)
    assert_gone(pid)

    again = run_chat("--base-url", server.base_url, "--session", str(session), "--respond",
                     "call_1=yes", cwd=tmp_path)
    assert again.returncode == 2
    assert "--respond: call_1 started in an earlier run that never finished" in again.stderr
    assert started.read_text() == "once\n"


def test_r16_cli_ctrl_c_in_the_command(server, tmp_path):
    """Ctrl-C on the terminal while the approved command runs: the command's group is
    killed, the result says so, and the same answer again is refused."""
    session, started, duration = cli_paused_on_a_slow_command(server, tmp_path)
    chat = PtyProcess(["chat", "--base-url", server.base_url, "--session", str(session),
                       "--respond", "call_1=yes"], cwd=tmp_path, env=child_env())
    wait_for_file(tmp_path / "pid")
    pid = sleep_pid(duration)
    chat.send_raw(b"\x03")
    assert chat.wait() == 130
    assert "Traceback" not in chat.text
    assert_gone(pid)
    data = json.loads(session.read_text())
    assert data["messages"][-1] == {
        "role": "tool", "tool_call_id": "call_1",
        "content": "Error: interrupted: run_command may have partly run and was not run again"}
    assert [r["outcome"] for r in data["approvals"]["audit"]] == ["approved"]

    again = run_chat("--base-url", server.base_url, "--session", str(session), "--respond",
                     "call_1=yes", cwd=tmp_path)
    assert again.returncode == 2 and "has no call waiting for approval" in again.stderr
    assert started.read_text() == "once\n"


# -- what a tool returns cannot break a save -------------------------------------------------

def test_r16_a_file_name_that_is_not_utf8_is_saved_and_sent_faithfully(make_agent, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "note.txt").write_text("x")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "w"):
        pass
    # the folder is inside the workspace, so list_dir runs without asking (issue 19)
    agent, server = make_agent([calls_reply(("c1", "list_dir", {"path": str(folder)})),
                                chat_stream(text="Two files.")],
                               tools=builtin_tools(["list_dir"], workspace=tmp_path))
    store = SQLiteStore(tmp_path / "s.db")
    with store.open("s") as session:
        updates = list(agent.run("what is there?", session))
    assert results(updates) == [("c1", "caf\udce9.txt\nnote.txt")]
    # the model got exactly that text (JSON escapes the lone surrogate as \udce9)
    assert '"content": "caf\\udce9.txt\\nnote.txt"' in server.requests[1].body.decode()
    assert store.load("s").messages[2].content == "caf\udce9.txt\nnote.txt"
    session.save(tmp_path / "s.json")
    assert AgentSession.load(tmp_path / "s.json") == session


def test_r16_cli_saves_a_result_holding_a_lone_surrogate(server, tmp_path):
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt"), "w"):
        pass
    server.queue(calls_reply(("c1", "list_dir", {"path": "."})))
    server.queue(chat_stream("Done."))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--session", "s.json", "list", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("  → list_dir .\n  [list_dir] caf\\udce9.txt ⏎ s.json")  # shown escaped
    assert "caf\udce9.txt" in AgentSession.load(tmp_path / "s.json").messages[2].content


class Unprintable:
    def __str__(self):
        raise ValueError("no text for this")


@pytest.mark.parametrize("value, detail", [
    ({(1, 2): "tuple keys"}, "TypeError: keys must be str, int, float, bool or None, not tuple"),
    ({"me": Unprintable()}, "ValueError: no text for this"),
])
def test_r16_a_result_that_cannot_be_converted_is_not_called_a_failure(make_agent, tmp_path,
                                                                       value, detail):
    log = tmp_path / "ran.log"
    agent, _ = paying_agent(make_agent, log, chat_stream(tool_calls=[("c1", "transfer", PAY)]),
                            chat_stream(text="Sent."), body=lambda: value)
    session = AgentSession()
    list(agent.run("pay", session))
    updates = list(agent.run([], session, approve()))
    assert results(updates) == [("c1", "the tool ran; its result could not be converted: "
                                       + detail)]
    assert runs(log) == 1


def test_r16_a_custom_tool_returning_an_unprintable_object(make_agent):
    class Odd(Tool):
        name, description = "odd", "Return something odd."

        def invoke(self, arguments):
            return Unprintable()

    agent, _ = make_agent([calls_reply(("c1", "odd", {})), chat_stream(text="ok")],
                          tools=[Odd()])
    updates = list(agent.run("go", AgentSession()))
    assert results(updates) == [("c1", "the tool ran; its result could not be converted: "
                                       "ValueError: no text for this")]


def test_r13_an_exception_whose_message_cannot_be_read(make_agent):
    class Mute(Exception):
        def __str__(self):
            raise RuntimeError("no")

    @tool
    def fail() -> str:
        """Fail oddly."""
        raise Mute()

    agent, _ = make_agent([calls_reply(("c1", "fail", {})), chat_stream(text="ok")],
                          tools=[fail])
    updates = list(agent.run("go", AgentSession()))
    assert results(updates) == [("c1", "Error: Mute: <Mute whose message could not be read>")]


# -- arguments nested 10,000 deep ------------------------------------------------------------

def test_r16_arguments_nested_10000_deep_through_the_whole_path(make_agent, tmp_path):
    """Text no decoder can read is never put to a person (R18, fourth batch): the call
    is answered, not crashed on, the store saves the session as received, and the next
    request carries ``{}`` for it (SPEC §6)."""
    deep = '{"amount": ' + "[" * 10_000 + "]" * 10_000 + "}"
    log = tmp_path / "ran.log"
    agent, server = paying_agent(make_agent, log,
                                 chat_stream(tool_calls=[("c1", "transfer", deep)]),
                                 chat_stream(text="Could not."))
    store = SQLiteStore(tmp_path / "s.db", secret="k3y")
    with store.open("s") as session:
        updates = list(agent.run("pay", session))
    assert updates[-1].finish_reason is FinishReason.STOP
    assert not [u for u in updates if isinstance(u, ToolApprovalRequest)]
    [(call_id, text)] = results(updates)
    assert text.startswith("Error: arguments are not valid JSON: maximum recursion depth")
    assert list(store.pending()) == []
    assert store.load("s").messages[1].tool_calls[0].arguments == deep
    sent = server.requests[-1].json["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == "{}"
    assert runs(log) == 0
