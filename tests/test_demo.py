"""End-to-end tests of ``python -m agentflow demo`` (the design document's scenario).

The demo's model, in one turn, says a sentence and calls ``echo`` (no approval needed)
and ``run_command`` with ``rm -rf /`` (wrapped in ``ApprovalRequiredTool``). By SPEC R3
run 1 pauses with one ``ToolApprovalRequest`` and ``Finish(AWAITING_APPROVAL)``, running
nothing; by R4/R5/R7 the resumed run 2 answers every call (the ``echo`` sibling with
``Rejected: User denied``) and ends with ``Finish(STOP)`` (R9).

Each test runs the real command, so the argument parsing, the replay server over real
HTTP and the terminal prompt are all exercised: on a pseudo-terminal in a child
process, or without a terminal through ``helpers_cli.run_agentflow`` (in-process, or
in a child process under ``make test-slow``).
"""

from __future__ import annotations

import json
import os
import pathlib
import re

from helpers_cli import run_agentflow
from helpers_pty import PtyProcess

REPO = pathlib.Path(__file__).resolve().parent.parent

RUN_COMMAND_DESCRIPTION = "Run a shell command on the user's machine."
PRETEND_RESULT = "(demo) pretended to run 'rm -rf /'; nothing was executed. Freed 12 GB."


def run_demo(*args: str) -> str:
    proc = run_agentflow("demo", *args, cwd=REPO, env=dict(os.environ))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return proc.stdout


def split_runs(output: str) -> tuple[str, str]:
    """(run 1 section, run 2 section) of the demo's output."""
    assert "== run 1" in output, output
    assert "== run 2 (resume)" in output, output
    before, run2 = output.split("== run 2 (resume)", 1)
    run1 = before.split("== run 1", 1)[1]
    return run1, run2


def tool_results(section: str) -> dict[str, tuple[str, str]]:
    """call_id -> (tool name, result text) from ``[tool result ID] NAME: RESULT`` lines."""
    found = {}
    for match in re.finditer(r"^  \[tool result (\S+)\] (\w+): (.*)$", section, re.M):
        found[match.group(1)] = (match.group(2), match.group(3))
    return found


def approval_request(section: str) -> dict:
    """The fields printed under ``ToolApprovalRequest`` (arguments parsed as JSON)."""
    assert "ToolApprovalRequest" in section, section
    block = section.split("ToolApprovalRequest", 1)[1]
    fields = {}
    for key in ("call_id", "name", "arguments", "description"):
        match = re.search(rf"^\s+{key}:\s+(.*)$", block, re.M)
        assert match, (key, block)
        fields[key] = match.group(1).strip()
    fields["arguments"] = json.loads(fields["arguments"])
    return fields


def assistant_reply(section: str) -> str:
    replies = re.findall(r"^assistant> (.*)$", section, re.M)
    assert replies, section
    return replies[-1]


def check_run1(run1: str) -> None:
    """SPEC R3: one ToolApprovalRequest (run_command, parsed arguments, the tool's
    description), nothing executed, Finish(AWAITING_APPROVAL) last."""
    assert approval_request(run1) == {
        "call_id": "call_2",
        "name": "run_command",
        "arguments": {"command": "rm -rf /"},
        "description": RUN_COMMAND_DESCRIPTION,
    }
    assert run1.count("ToolApprovalRequest") == 1  # echo needs no approval (R3.1)
    assert "[tool result" not in run1  # R3.3: no tool of that turn runs
    finishes = re.findall(r"Finish: finish_reason=(\w+)", run1)
    assert finishes == ["awaiting_approval"]


def check_run2_finish(run2: str) -> None:
    """SPEC R9: the resumed run ends with exactly one Finish, STOP."""
    assert re.findall(r"Finish: finish_reason=(\w+)", run2) == ["stop"]
    assert "finish reasons: run 1 = awaiting_approval | run 2 = stop" in run2


# -- non-interactive --------------------------------------------------------------------

def test_demo_approve():
    """SPEC R3, R4, R5, R9 via ``agentflow demo --approve``: run 1 pauses on
    run_command; on resume the approved call runs (the demo's pretend result) and
    the echo sibling gets ``Rejected: User denied`` (R5) without running."""
    out = run_demo("--approve")
    run1, run2 = split_runs(out)
    check_run1(run1)
    assert "caller: call_2 approved" in out
    assert tool_results(run2) == {
        "call_1": ("echo", "Rejected: User denied"),
        "call_2": ("run_command", PRETEND_RESULT),
    }
    check_run2_finish(run2)
    # R4: both results were sent to the model, in call order, after the assistant turn.
    assert ("run 2 sent the model: system, user, assistant, "
            "tool(call_1: 'Rejected: User denied'), "
            f"tool(call_2: {PRETEND_RESULT!r})") in run2
    assert "the command ran" in assistant_reply(run2)


def test_demo_deny_with_reason():
    """SPEC R4, R5, R7 via ``agentflow demo --deny "too dangerous"``: run_command gets
    exactly ``Rejected: too dangerous``, the sibling ``Rejected: User denied``, and the
    model's final reply reflects the rejection and its reason."""
    out = run_demo("--deny", "too dangerous")
    run1, run2 = split_runs(out)
    check_run1(run1)
    assert "caller: call_2 rejected, reason: too dangerous" in out
    assert tool_results(run2) == {
        "call_1": ("echo", "Rejected: User denied"),
        "call_2": ("run_command", "Rejected: too dangerous"),
    }
    assert "pretended to run" not in out  # nothing executed
    check_run2_finish(run2)
    assert ("tool(call_1: 'Rejected: User denied'), "
            "tool(call_2: 'Rejected: too dangerous')") in run2
    reply = assistant_reply(run2)
    assert "I did not run `rm -rf /`; you rejected it." in reply
    assert 'You said: "too dangerous".' in reply


def test_demo_deny_without_reason():
    """SPEC R7 via ``agentflow demo --deny``: with no reason the default
    ``User denied`` is used."""
    out = run_demo("--deny")
    run1, run2 = split_runs(out)
    check_run1(run1)
    assert tool_results(run2) == {
        "call_1": ("echo", "Rejected: User denied"),
        "call_2": ("run_command", "Rejected: User denied"),
    }
    check_run2_finish(run2)
    reply = assistant_reply(run2)
    assert "you rejected it." in reply
    assert "You said" not in reply


def test_demo_without_flag_and_no_terminal_denies():
    """Demo contract (demo.py / __main__.py): with neither flag and stdin not a
    terminal it denies without asking; by R7 the rejection is ``Rejected: User
    denied`` and by R5 the sibling is rejected too."""
    out = run_demo()
    run1, run2 = split_runs(out)
    check_run1(run1)
    assert "stdin is not a terminal" in out
    assert "Approve run_command" not in out  # never prompted
    assert "caller: call_2 rejected without a reason (the model hears 'User denied')" in out
    assert tool_results(run2) == {
        "call_1": ("echo", "Rejected: User denied"),
        "call_2": ("run_command", "Rejected: User denied"),
    }
    assert "pretended to run" not in out
    check_run2_finish(run2)
    assert "you rejected it." in assistant_reply(run2)


# -- through a real pseudo-terminal -------------------------------------------------------

def pty_demo() -> PtyProcess:
    """``agentflow demo`` on a pseudo-terminal (tests/helpers_pty.py)."""
    return PtyProcess(["demo"], cwd=REPO, env=dict(os.environ))


def finish(demo: PtyProcess) -> str:
    """Read to the end; the demo must exit with status 0. Returns all it showed."""
    code = demo.wait()
    assert code == 0, demo.text
    return demo.text


def test_demo_on_terminal_deny_with_typed_reason():
    """Demo contract on a terminal: it asks ``Approve run_command {...}? [y/N]``; typing
    ``n`` and the reason ``not today`` resumes with, by SPEC R7, exactly
    ``Rejected: not today`` for run_command and, by R5, ``Rejected: User denied`` for
    the echo sibling; run 2 ends with STOP (R9)."""
    demo = pty_demo()
    demo.expect("[y/N] ")
    prompt_line = demo.text.rsplit("\n", 1)[-1]
    assert prompt_line == 'Approve run_command {"command": "rm -rf /"}? [y/N] '
    demo.send("n")
    demo.expect("Reason (optional): ")
    demo.send("not today")
    out = finish(demo)

    run1, run2 = split_runs(out)
    check_run1(run1)
    assert "stdin is not a terminal" not in out
    assert "caller: call_2 rejected, reason: not today" in out
    assert tool_results(run2) == {
        "call_1": ("echo", "Rejected: User denied"),
        "call_2": ("run_command", "Rejected: not today"),
    }
    assert "pretended to run" not in out
    check_run2_finish(run2)
    assert ("tool(call_1: 'Rejected: User denied'), "
            "tool(call_2: 'Rejected: not today')") in run2
    assert 'You said: "not today".' in assistant_reply(run2)


def test_demo_on_terminal_approve():
    """Demo contract on a terminal: answering ``y`` approves; by SPEC R4 the resumed
    run executes run_command (the pretend result) and by R5 rejects the echo sibling
    with ``Rejected: User denied``; no reason is asked for."""
    demo = pty_demo()
    demo.expect("[y/N] ")
    demo.send("y")
    out = finish(demo)

    run1, run2 = split_runs(out)
    check_run1(run1)
    assert "Reason (optional)" not in out
    assert "caller: call_2 approved" in out
    assert tool_results(run2) == {
        "call_1": ("echo", "Rejected: User denied"),
        "call_2": ("run_command", PRETEND_RESULT),
    }
    check_run2_finish(run2)
