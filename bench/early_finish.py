"""Stalls after a finish_reason (issue 41 item 1): what ``finish_wait`` costs and saves.

A keep-alive loopback ``ReplayServer`` (``Transfer-Encoding: chunked``) plays two
bodies, each run with ``OpenAIChatClient``'s default ``finish_wait`` (10 s) and with
the 2 s agentflow waited before issue 41:

* ``early stop``: text, ``finish_reason: stop``, a ``STALL``-second pause (OpenWebUI's
  3 s), then the tool call and ``[DONE]``, as gateways that finish early send it. Is
  the call kept, and how long does the turn take?
* ``stalled server``: text and ``stop``, then the server holds the connection with
  nothing more until the client lets go: how long a turn waits on a server that stalls
  after its real finish (the price of a longer ``finish_wait``).

Seconds are wall time of ``client.run`` to its ``Finish``; each case once (the waits
are the point, not noise).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from agentflow import ChatMessage, OpenAIChatClient
from agentflow.openai_client import FINISH_WAIT
from agentflow.testing.replay import Reply, ReplayServer, delta_event

STALL = 3.0  # seconds: the pause OpenWebUI made after its early stop (issue 41)
OLD_WAIT = 2.0  # seconds: the wait after a finish before issue 41


HEAD = (delta_event({"role": "assistant", "content": "Let me look."})
        + delta_event({}, "stop"))
CALL = (delta_event({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                "function": {"name": "list_files",
                                             "arguments": '{"folder": "src"}'}}]})
        + delta_event({}, "tool_calls") + b"data: [DONE]\n\n")


def one(case: str, finish_wait: float) -> dict:
    released = threading.Event()

    def late():
        if case == "early stop":
            time.sleep(STALL)
            return CALL
        released.wait(60)
        return b"data: [DONE]\n\n"

    with ReplayServer([Reply(chunks=[HEAD, late])], keep_alive="chunked") as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key="sk-bench",
                                  max_retries=0, finish_wait=finish_wait)
        started = time.perf_counter()
        updates = list(client.run([ChatMessage.user("what is in src?")]))
        seconds = time.perf_counter() - started
        released.set()
    return {"case": case, "finish_wait": finish_wait, "seconds": seconds,
            "calls": len(updates[-1].message.tool_calls)}


def main() -> list[dict]:
    return [one(case, wait) for case in ("early stop", "stalled server")
            for wait in (FINISH_WAIT, OLD_WAIT)]


def table(results: list[dict]) -> list[str]:
    lines = ["| body | finish_wait | seconds to the Finish | tool calls kept |",
             "|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['case']} | {r['finish_wait']:g} s | {r['seconds']:.2f} | "
                     f"{r['calls']} |")
    return lines


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print("\n".join(table(main())))
