"""``python -m agentflow demo``: the design document's scenario, over real HTTP.

A replay server on 127.0.0.1 plays the model. The user asks to free disk space; the
model says a sentence and calls, in one turn, ``echo`` and ``run_command`` with
``rm -rf /``. ``run_command`` needs approval, so the run pauses; the caller decides;
the second run resumes, and the model's recorded reply fits the decision.
Nothing is ever executed: the demo's ``run_command`` only pretends.
"""

from __future__ import annotations

import json
import sys

from .. import (AgentRunOptions, AgentSession, ApprovalRequiredTool, ChatClientAgent,
               Finish, OpenAIChatClient, TextDelta, ToolApprovalRequest,
               ToolCallStart, ToolResult, tool)
from ..testing.replay import ReplayServer, chat_stream

USER_REQUEST = "My disk is full. Please free some space."


@tool
def echo(text: str) -> str:
    """Repeat a short note back to the user."""
    return text


@tool
def run_command(command: str) -> str:
    """Run a shell command on the user's machine.

    Args:
        command: the command line to run.
    """
    return f"(demo) pretended to run {command!r}; nothing was executed. Freed 12 GB."


def first_turn() -> bytes:
    """The model's recorded first turn: a sentence, then ``echo`` and ``run_command``
    (``rm -rf /``) called in one turn.

    Returns:
        bytes: an OpenAI-style SSE body (``chat.completion.chunk`` events, then
        ``data: [DONE]``) for ``ReplayServer`` to serve; usage 120 prompt + 48
        completion tokens.
    """
    return chat_stream(
        text="Your disk is almost full. I'll note what I'm doing, then clear it out.",
        tool_calls=[("call_1", "echo", json.dumps({"text": "Freeing disk space"})),
                    ("call_2", "run_command", json.dumps({"command": "rm -rf /"}))],
        usage=(120, 48))


def second_turn(approved: bool, reason: str | None) -> bytes:
    """The model's recorded reply after the caller's decision.

    Args:
        approved: whether the caller approved ``run_command`` (bool).
        reason: the caller's rejection reason (str), quoted in the reply when it is not
            blank; ``None``: none given.

    Returns:
        bytes: an SSE body with one text turn that fits the decision; usage 190
        prompt + 30 completion tokens.
    """
    if approved:
        text = ("Done: the command ran and about 12 GB are free now. "
                "(The note was skipped; I can repeat it if you like.)")
    else:
        because = f" You said: \"{reason.strip()}\"." if reason and reason.strip() else ""
        text = (f"Understood, I did not run `rm -rf /`; you rejected it.{because} "
                "A safer start is to look at what uses the space, e.g. `du -sh ~/*`.")
    return chat_stream(text=text, usage=(190, 30))


def _show(updates) -> Finish:
    """Print a run's updates as they arrive; return its ``Finish``."""
    finish = None
    in_text = False
    for update in updates:
        if isinstance(update, TextDelta):
            if not in_text:
                print("assistant> ", end="")
                in_text = True
            print(update.text, end="", flush=True)
            continue
        if in_text:
            print()
            in_text = False
        if isinstance(update, ToolCallStart):
            print(f"  [tool call {update.call_id}] {update.name}")
        elif isinstance(update, ToolResult):
            print(f"  [tool result {update.call_id}] {update.name}: {update.result}")
        elif isinstance(update, ToolApprovalRequest):
            print("\n  ToolApprovalRequest")
            print(f"    call_id:     {update.call_id}")
            print(f"    name:        {update.name}")
            print(f"    arguments:   {json.dumps(update.arguments)}")
            print(f"    description: {update.description}")
        elif isinstance(update, Finish):
            finish = update
            usage = update.usage
            tokens = f" ({usage.total_tokens} tokens)" if usage else ""
            print(f"  Finish: finish_reason={update.finish_reason.value}{tokens}")
    return finish


def _decide(requests: list, approve: bool | None, reason: str | None):
    if approve is not None:
        return approve, reason
    if sys.stdin.isatty():
        try:
            answer = input(f"\nApprove {requests[0].name} "
                           f"{json.dumps(requests[0].arguments)}? [y/N] ").strip().lower()
            if answer in ("y", "yes"):
                return True, None
            return False, input("Reason (optional): ").strip() or None
        except EOFError:
            print("\n(end of input: denying)")
            return False, None
    print("\n(stdin is not a terminal and neither --approve nor --deny was given: denying)")
    return False, reason


def main(approve: bool | None = None, reason: str | None = None) -> int:
    """Run the demo: two runs of one agent against a replay server on 127.0.0.1,
    printing every update (SPEC R3 pause, R4 resume, R5 sibling, R7 reason).

    Args:
        approve: ``True`` approves and ``False`` rejects without asking; ``None`` asks
            on a terminal (y/N, then an optional reason) and rejects when stdin is not
            a terminal or ends.
        reason: the rejection reason (str) sent with ``approve=False``; ``None``: none,
            and the model hears ``Rejected: User denied``.

    Returns:
        int: the process exit status, 0.
    """
    with ReplayServer([first_turn()]) as server:
        client = OpenAIChatClient(model="demo-model", base_url=server.base_url,
                                  api_key="not-needed")
        agent = ChatClientAgent(client, instructions="You are a careful system assistant.",
                                tools=[echo, ApprovalRequiredTool(run_command)])
        session = AgentSession()
        print(f"replay server: {server.base_url}\n")
        print(f"== run 1\nuser> {USER_REQUEST}")
        updates = []

        def record(stream):
            for update in stream:
                updates.append(update)
                yield update

        finish = _show(record(agent.run(USER_REQUEST, session)))
        requests = [u for u in updates if isinstance(u, ToolApprovalRequest)]
        approved, reason = _decide(requests, approve, reason)
        decision = ("approved" if approved else
                    f"rejected, reason: {reason}" if reason else
                    "rejected without a reason (the model hears 'User denied')")
        print(f"\ncaller: {requests[0].call_id} {decision}")
        print("note: echo needed no approval but came in the same turn, so it does not run "
              "on resume either\n      (SPEC R5: it is answered 'Rejected: User denied'; "
              "the model may call it again)")

        server.queue(second_turn(approved, reason))
        responses = [r.approve() if approved else r.reject(reason) for r in requests]
        print("\n== run 2 (resume)")
        finish2 = _show(agent.run([], session,
                                  AgentRunOptions().with_tool_approval_responses(responses)))
        print("\nfinish reasons: run 1 =", finish.finish_reason.value,
              "| run 2 =", finish2.finish_reason.value)
        sent = server.requests[1].json["messages"]
        print("run 2 sent the model:", ", ".join(
            m["role"] + (f"({m['tool_call_id']}: {m['content']!r})" if m["role"] == "tool" else "")
            for m in sent))
    return 0
