"""A worker process for the crash and concurrency tests (SPEC R16, R22).

    python tests/worker.py WHERE SESSION BASE_URL LOG [--respond CALL=yes|no]
                           [--stop-at before-start|tool|after-result] [--wait]
                           [--wait-in-tool]

It resumes the paused session SESSION in WHERE (a store URL, or a file path for
``AgentSession.open``) with the given responses. Its one tool, ``transfer`` (needs
approval), appends a line to LOG each time it really runs.

Synchronisation goes through the pipes, never through sleeps: ``--wait`` prints
``loaded`` once the session is read and then waits for a line on stdin before
resuming; ``--wait-in-tool`` prints ``in tool`` inside the tool, after its line in
LOG, and waits for a line on stdin before it returns; ``--stop-at`` prints ``at POINT``
and blocks there until the test kills the process. The last line is the finish reason, or the name of the error it raised.
"""

import argparse
import sys
import time

from agentflow import (AgentRunOptions, AgentSession, ApprovalRequiredTool, ChatClientAgent,
                       OpenAIChatClient, ToolApprovalResponse, tool)
from agentflow.errors import AgentflowError
from agentflow.stores import SessionStore, open_store


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("where", "session", "base_url", "log"):
        parser.add_argument(name)
    parser.add_argument("--respond", action="append", default=[])
    parser.add_argument("--stop-at", choices=("before-start", "tool", "after-result"))
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--wait-in-tool", action="store_true")
    args = parser.parse_args()

    def stop(point: str) -> None:
        print(f"at {point}", flush=True)
        time.sleep(120)  # the test kills us here

    @tool
    def transfer(amount: int) -> str:
        """Send money."""
        with open(args.log, "a") as handle:
            handle.write(f"transfer {amount}\n")
        if args.stop_at == "tool":
            stop("tool")
        if args.wait_in_tool:
            print("in tool", flush=True)
            sys.stdin.readline()
        return f"sent {amount}"

    if args.stop_at in ("before-start", "after-result"):
        real_checkpoint = SessionStore.checkpoint

        def checkpoint(store, session_id, session, before, changed):
            if args.stop_at == "before-start" and session.running:
                stop("before-start")  # the write-ahead record is not written yet
            if args.stop_at == "after-result" and session.messages[-1].role.value == "tool":
                stop("after-result")  # the tool ran; its result is not saved yet
            return real_checkpoint(store, session_id, session, before, changed)
        SessionStore.checkpoint = checkpoint

    agent = ChatClientAgent(OpenAIChatClient(base_url=args.base_url, api_key="k", max_retries=0),
                            tools=[ApprovalRequiredTool(transfer)])
    responses = []
    for item in args.respond:
        call_id, _, verdict = item.partition("=")
        responses.append(ToolApprovalResponse(call_id, verdict == "yes"))
    options = AgentRunOptions().with_tool_approval_responses(responses)
    try:
        if "://" in args.where:
            store = open_store(args.where)
            opened = store.open(args.session)
        else:
            opened = AgentSession.open(args.where)
        with opened as session:
            if args.wait:
                print("loaded", flush=True)
                sys.stdin.readline()
            updates = list(agent.run([], session, options))
        print(updates[-1].finish_reason.value, flush=True)
    except AgentflowError as exc:
        print(type(exc).__name__, flush=True)
        print(exc, file=sys.stderr)


if __name__ == "__main__":
    main()
