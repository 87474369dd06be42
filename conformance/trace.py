"""``python -m conformance replay CASE``: one conformance case run against agentflow over loopback
HTTP, shown as its updates per turn, with every ``LoopState`` transition (``--trace``),
or as a Mermaid sequence diagram of what really happened (``--mermaid``).

Lives with the cases, not in the library: the installed package never imports from a
checkout, so the command is the suite's own (``python -m conformance replay``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import NamedTuple

from agentflow.testing.replay import ReplayServer

from .driver import CaseDriver
from .loader import CASES, case_replies, load_case, run_message, setup_message


class SequenceDiagram:
    """Records what really happened in a run, as a Mermaid sequence diagram with the
    four actors of the design (caller, agent, decorator, provider).

    Feed it ``run_started`` per turn, ``transition`` as the loop's ``on_transition``,
    ``update`` per update (JSON form) and ``failed`` for a turn's error; ``render()``
    returns the diagram's text.
    """

    def __init__(self):
        self.lines = ["sequenceDiagram", "    actor Caller", "    participant Agent as ChatClientAgent",
                      "    participant FICC as FunctionInvokingChatClient",
                      "    participant LLM as LLM provider"]
        self._text = ""

    def add(self, line: str) -> None:
        self.lines.append("    " + line.replace(";", ","))

    def run_started(self, number: int, message: dict) -> None:
        approvals = message.get("approvals", [])
        what = [f"{len(message.get('input', []))} input message(s)"]
        if approvals:
            what.append(", ".join(f"{a['call_id']}={'approve' if a['approved'] else 'reject'}"
                                  for a in approvals))
        self.add(f"Note over Caller,LLM: run {number}")
        if "stop_after" in message:
            what.append(f"stopped after {message['stop_after']} result(s)")
        self.add(f"Caller->>Agent: run({'; '.join(what)})")
        self.add("Agent->>FICC: run(instructions + history + input)")

    def transition(self, old, event, new) -> None:
        self._flush_text()
        name = new.name
        if name == "RESUMING":
            self.add("FICC->>FICC: answer the pending calls (R4)")
        elif name == "CALLING_MODEL":
            self.add("FICC->>LLM: POST /chat/completions, stream=true")
        elif name == "AWAITING_APPROVAL":
            self.add("FICC->>FICC: approval gate: pause (R3)")
        elif event.name == "ROUND_LIMIT":
            self.add("FICC->>FICC: max_rounds reached (R8)")

    def update(self, update: dict) -> None:
        kind = update["type"]
        if kind == "text":
            self._text += update["text"]
            return
        self._flush_text()
        if kind == "tool_call_end":
            return
        if kind == "tool_call_start":
            self.add(f"LLM-->>FICC: tool call {update['name']} ({update['call_id']})")
        elif kind == "tool_result":
            verb = "rejected" if update["result"].startswith("Rejected:") else "ran"
            self.add(f"FICC->>FICC: {verb} {update['name']}: {_short(update['result'])}")
            self.add(f"FICC-->>Caller: ToolResult({update['call_id']})")
        elif kind == "approval_request":
            self.add(f"FICC-->>Caller: ToolApprovalRequest({update['call_id']}, "
                     f"{update['name']} {_short(json.dumps(update['arguments']))})")
        elif kind == "finish":
            self.add(f"FICC-->>Caller: Finish({update['finish_reason']})")

    def failed(self, error: dict) -> None:
        self._flush_text()
        self.add(f"FICC-->>Caller: {error['kind']}")

    def _flush_text(self) -> None:
        if self._text:
            self.add(f"LLM-->>FICC: text \"{_short(self._text)}\"")
            self.add("FICC-->>Caller: TextDelta...")
            self._text = ""

    def render(self) -> str:
        return "\n".join(self.lines) + "\n"


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split()).replace('"', "'").replace("#", "")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def replay(ref: str, trace: bool = False, mermaid: bool = False, out=None) -> int:
    """Run a conformance case against agentflow over loopback HTTP and print it.

    Args:
        ref: a case id in ``conformance/cases`` or the path of a case ``.json``.
        trace: also print each ``LoopState`` transition, where it happened.
        mermaid: print only a Mermaid sequence diagram of the run.
        out: a text stream; default ``sys.stdout``.

    Returns:
        0, or 1 when a turn failed in a way its case did not expect.

    Raises:
        FileNotFoundError: no such case (``load_case``).
    """
    return play(load_case(ref), trace, mermaid, out or sys.stdout).status


class Played(NamedTuple):
    """What ``play`` did: ``status`` as ``replay`` returns it, and ``requests``, every
    request the replay server received (``agentflow.testing.replay.RecordedRequest``)."""

    status: int
    requests: list


def play(case: dict, trace: bool = False, mermaid: bool = False, out=None) -> Played:
    """``replay`` for a case already loaded (``load_case``); writes to ``out``
    (default ``sys.stdout``)."""
    out = out or sys.stdout
    diagram = SequenceDiagram() if mermaid else None

    def on_transition(old, event, new):
        if diagram:
            diagram.transition(old, event, new)
        elif trace:
            out.write(f"    [{old.name} --{event.value}--> {new.name}]\n")

    status = 0
    with ReplayServer(case_replies(case), strict=case.get("profile")) as server:
        driver = CaseDriver(on_transition)
        driver.setup(setup_message(case, server.base_url, "sk-replay"))
        if not diagram:
            out.write(f"case {case['id']}: {case['title']} ({', '.join(case['rules'])})\n")
        for number, turn in enumerate(case["turns"], 1):
            message = run_message(turn)
            if diagram:
                diagram.run_started(number, message)
            else:
                out.write(f"\nturn {number}: input {json.dumps(message['input'])}"
                          + (f", approvals {json.dumps(message['approvals'])}" if message["approvals"] else "")
                          + (f", recorded answers {json.dumps(message['recorded_answers'])}"
                             if message.get("recorded_answers") else "")
                          + (f", stopped after {message['stop_after']} result(s)"
                             if "stop_after" in message else "")
                          + "\n")
            emit = diagram.update if diagram else (lambda u: out.write(f"  {json.dumps(u)}\n"))
            end = driver.run(message, emit)
            if end["error"]:
                if diagram:
                    diagram.failed(end["error"])
                else:
                    out.write(f"  error {end['error']['kind']}: {end['error']['message']}\n")
                if turn.get("expect", {}).get("error") != end["error"]["kind"]:
                    status = 1
    if diagram:
        out.write(diagram.render())
    return Played(status, server.requests)


def main(argv=None) -> int:
    """``python -m conformance replay CASE [--trace | --mermaid]``.

    Args:
        argv: the arguments after ``replay`` (list of str); default ``sys.argv[2:]``.

    Returns:
        int: the exit status: ``replay``'s, or 2 when there is no such case.
    """
    parser = argparse.ArgumentParser(
        prog="python -m conformance replay",
        description="Run a conformance case against agentflow over loopback HTTP and "
                    "print its updates per turn.")
    parser.add_argument("case", help="a case id from conformance/cases, or the path of a "
                                     "case .json")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--trace", action="store_true",
                     help="also print each LoopState transition")
    how.add_argument("--mermaid", action="store_true",
                     help="print a Mermaid sequence diagram of the run instead")
    args = parser.parse_args(sys.argv[2:] if argv is None else argv)
    if not args.case.endswith(".json") and "/" not in args.case \
            and not (CASES / f"{args.case}.json").is_file():
        print(f"python -m conformance replay: no case {args.case!r} in {CASES}; the ids "
              "are the file names there without .json (ls conformance/cases), or give "
              "the path of a case .json", file=sys.stderr)
        return 2
    try:
        return replay(args.case, trace=args.trace, mermaid=args.mermaid)
    except FileNotFoundError as exc:
        print(f"python -m conformance replay: {exc}", file=sys.stderr)
        return 2
