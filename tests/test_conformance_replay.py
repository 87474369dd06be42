"""``python -m conformance replay CASE``: a conformance case run against agentflow and
shown per turn, with its ``LoopState`` transitions or as a Mermaid diagram. The suite's
own command (issue 22): the installed package never imports from a checkout."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys

import pytest

from conformance.trace import main

from helpers_cli import REPO, TIMEOUT, child_env, digest


def run_replay(*args) -> subprocess.CompletedProcess:
    """``python -m conformance replay ARGS``, in-process: its status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


DIGEST_RM = digest({"command": "rm -rf /"})
USAGE = '"usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}'


def test_replay_prints_the_updates_per_turn():
    done = run_replay("001-approve")
    assert (done.returncode, done.stderr) == (0, "")
    # R24: each pause has its own random request_id (32 hex digits)
    stdout, ids = re.subn(r'"request_id": "[0-9a-f]{32}"', '"request_id": "ID"', done.stdout)
    assert ids == 1
    assert stdout == (
        "case 001-approve: The design document's sequence: request, approve, final text "
        "(R3, R4, R9)\n"
        "\n"
        'turn 1: input [{"role": "user", "content": "My disk is full. Please free some '
        'space."}]\n'
        '  {"type": "text", "text": "I"}\n'
        '  {"type": "text", "text": " will"}\n'
        '  {"type": "text", "text": " clear"}\n'
        '  {"type": "text", "text": " some"}\n'
        '  {"type": "text", "text": " space."}\n'
        '  {"type": "tool_call_start", "call_id": "call_1", "name": "run_command", "index": 0}\n'
        '  {"type": "tool_call_args", "call_id": "call_1", "delta": "{\\"command\\":"}\n'
        '  {"type": "tool_call_args", "call_id": "call_1", "delta": " \\"rm -rf /\\"}"}\n'
        '  {"type": "tool_call_end", "call_id": "call_1"}\n'
        '  {"type": "approval_request", "call_id": "call_1", "name": "run_command", '
        '"arguments": {"command": "rm -rf /"}, "description": "Run a shell command.", '
        f'"digest": "{DIGEST_RM}", "request_id": "ID"}}\n'
        f'  {{"type": "finish", "finish_reason": "awaiting_approval", {USAGE}}}\n'
        "\n"
        'turn 2: input [], approvals [{"call_id": "call_1", "approved": true}]\n'
        '  {"type": "tool_result", "call_id": "call_1", "name": "run_command", '
        '"result": "command finished: 12 GB freed"}\n'
        '  {"type": "text", "text": "Done,"}\n'
        '  {"type": "text", "text": " 12"}\n'
        '  {"type": "text", "text": " GB"}\n'
        '  {"type": "text", "text": " are"}\n'
        '  {"type": "text", "text": " free."}\n'
        f'  {{"type": "finish", "finish_reason": "stop", {USAGE}}}\n')


def test_replay_trace_shows_the_loop_state_transitions():
    done = run_replay("001-approve", "--trace")
    assert (done.returncode, done.stderr) == (0, "")
    transitions = [line.strip()[1:-1] for line in done.stdout.splitlines()
                   if line.startswith("    [")]
    assert transitions == [
        "START --nothing pending--> CALLING_MODEL",
        "CALLING_MODEL --tools called--> AT_GATE",
        "AT_GATE --approval needed--> AWAITING_APPROVAL",
        "START --calls pending--> RESUMING",
        "RESUMING --results added--> CALLING_MODEL",
        "CALLING_MODEL --turn ended--> DONE",
    ]
    # each transition sits where it happened: the gate is reached after the model's
    # turn, emits the request, and then the run pauses
    lines = done.stdout.splitlines()
    gate = lines.index("    [CALLING_MODEL --tools called--> AT_GATE]")
    assert lines[gate - 1] == '  {"type": "tool_call_end", "call_id": "call_1"}'
    assert lines[gate + 1].startswith('  {"type": "approval_request", "call_id": "call_1"')
    assert lines[gate + 2] == "    [AT_GATE --approval needed--> AWAITING_APPROVAL]"


def test_replay_mermaid_diagram():
    done = run_replay("007-mixed-batch-sibling", "--mermaid")
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[:5] == ["sequenceDiagram",
                         "    actor Caller",
                         "    participant Agent as ChatClientAgent",
                         "    participant FICC as FunctionInvokingChatClient",
                         "    participant LLM as LLM provider"]
    assert ("    FICC-->>Caller: ToolApprovalRequest(call_2, run_command "
            "{'command': 'rm -rf /'})") in lines
    assert lines.count("    FICC-->>Caller: Finish(awaiting_approval)") == 1
    assert lines[-1] == "    FICC-->>Caller: Finish(stop)"
    assert "    FICC->>FICC: rejected echo: Rejected: User denied" in lines
    assert not done.stdout.startswith("case ")  # the diagram only


def test_replay_unknown_case():
    done = run_replay("no-such-case")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == ("python -m conformance replay: no case 'no-such-case' in "
                           f"{REPO}/conformance/cases; "
                           "the ids are the file names there without .json (ls "
                           "conformance/cases), or give the path of a case .json\n")


def test_the_command_runs_from_a_checkout_as_a_user_types_it(tmp_path):
    """``python -m conformance replay`` in a child process, from the checkout, with a case
    given by path from another folder too."""
    for cwd, ref in ((REPO, "001-approve"),
                     (REPO, str(REPO / "conformance" / "cases" / "001-approve.json"))):
        done = subprocess.run([sys.executable, "-m", "conformance", "replay", ref],
                              cwd=cwd, env=child_env(), capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout.startswith("case 001-approve: ")


def test_the_suites_help_names_the_replay_command(capsys):
    """``python -m conformance --help`` was the only help a newcomer found, and it did
    not say that ``replay CASE --mermaid`` (the README's diagram) exists."""
    from conformance.runner import main as run_suite
    with pytest.raises(SystemExit) as stopped:
        run_suite(["--help"])
    assert stopped.value.code == 0
    assert ("python -m conformance replay CASE [--trace | --mermaid] runs one case"
            in " ".join(capsys.readouterr().out.split()))
