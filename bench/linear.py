"""Linear time in the size of a response (issue 12, item 11), over loopback HTTP.

1. **Argument fragments**: one tool call whose arguments (``{"data": "…"}``) are sent in
   8-character deltas, in OpenAI's own chunk format (one event per delta, as
   gpt-4o sends them), through ``ChatClientAgent.run``: the turn assembled, the tool run
   once on the whole arguments, the final answer read. At 1 MB and 10 MB of arguments;
   linear time means the ratio of the two is about 10.
2. **One huge event**: a single 64 MB text delta (and 16 MB, for the ratio) through
   ``OpenAIChatClient.run``, read in 64 KiB pieces.

Targets from the issue: 10 MB of arguments in 8-character deltas under 2 s; a 64 MB
event under 3 s. The arguments body is made before the clock starts; the huge event
is generated while it is sent.
"""

from __future__ import annotations

import json
import time

from common import runs, summary

ENVELOPE = ('data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1727346176,'
            '"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_7568d46099","choices":[{"index":0,'
            '"delta":{"tool_calls":[{"index":0,"function":{"arguments":"%s"}}]},"logprobs":null,'
            '"finish_reason":null}]}\n\n')
HEADER = ('data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1727346176,'
          '"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant",'
          '"content":null,"tool_calls":[{"index":0,"id":"call_bench","type":"function",'
          '"function":{"name":"store","arguments":""}}]},"finish_reason":null}]}\n\n')
CLOSING = ('data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1727346176,'
           '"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"finish_reason":'
           '"tool_calls"}]}\n\ndata: [DONE]\n\n')
DELTA = 8
TARGET_ARGUMENTS = 2.0  # seconds for 10 MB
TARGET_EVENT = 3.0      # seconds for 64 MB


def argument_events(size: int):
    """The body of a turn calling ``store`` with ``size`` bytes of arguments in
    ``DELTA``-character fragments, in blocks of 512 events."""
    yield HEADER.encode()
    arguments = '{"data": "' + "x" * (size - 12) + '"}'
    escaped = [json.dumps(arguments[i:i + DELTA])[1:-1] for i in range(0, len(arguments), DELTA)]
    for start in range(0, len(escaped), 512):
        yield "".join(ENVELOPE % piece for piece in escaped[start:start + 512]).encode()
    yield CLOSING.encode()


def run_arguments(size: int) -> tuple[float, int, int]:
    """Seconds for one agent run whose tool call has ``size`` bytes of arguments;
    also the number of events and the length the tool received."""
    from agentflow import ChatClientAgent, OpenAIChatClient, tool
    from agentflow.testing.replay import Reply, ReplayServer, chat_stream

    received = []

    @tool
    def store(data: str) -> str:
        """Store data."""
        received.append(len(data))
        return "stored"

    events = -(-size // DELTA)
    body = list(argument_events(size))  # made before the clock starts
    with ReplayServer([Reply(chunks=body), chat_stream("Stored.")]) as server:
        agent = ChatClientAgent(OpenAIChatClient("bench", base_url=server.base_url,
                                                 api_key="sk-bench"), tools=[store])
        start = time.perf_counter()
        for _ in agent.run("store it"):
            pass
        seconds = time.perf_counter() - start
    assert received == [size - 12], received
    return seconds, events, received[0]


def floor(size: int) -> float:
    """Seconds to split the same body into events and ``json.loads`` each one, in
    memory: the least any decoder that parses every event must spend."""
    blocks = list(argument_events(size))
    loads = json.loads
    start = time.perf_counter()
    for block in blocks:
        for event in block.split(b"\n\n"):
            if event.startswith(b"data: {"):
                loads(event[6:])
    return time.perf_counter() - start


def event_body(size: int):
    """One text delta of ``size`` characters, generated in 1 MB blocks."""
    yield b'data: {"choices":[{"index":0,"delta":{"content":"'
    block = b"y" * 1_000_000
    for _ in range(size // len(block)):
        yield block
    yield b'"}}]}\n\ndata: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    yield b"data: [DONE]\n\n"


def run_event(size: int) -> float:
    from agentflow import ChatMessage, OpenAIChatClient, TextDelta
    from agentflow.testing.replay import Reply, ReplayServer

    with ReplayServer([Reply(chunks=event_body(size))]) as server:
        client = OpenAIChatClient("bench", base_url=server.base_url, api_key="sk-bench")
        start = time.perf_counter()
        text = [u.text for u in client.run([ChatMessage.user("hi")]) if isinstance(u, TextDelta)]
        seconds = time.perf_counter() - start
    assert len(text) == 1 and len(text[0]) == size
    return seconds


def main() -> dict:
    count = runs()
    out = {"arguments": {}, "event": {}}
    for size in (1_000_000, 10_000_000):
        times, events = [], 0
        for _ in range(count):
            seconds, events, _ = run_arguments(size)
            times.append(seconds)
        out["arguments"][size] = {**summary(times), "events": events,
                                  "floor": summary([floor(size) for _ in range(count)])}
    for size in (16_000_000, 64_000_000):
        out["event"][size] = summary([run_event(size) for _ in range(count)])
    return out


def report(out: dict) -> list[str]:
    a1, a10 = out["arguments"][1_000_000], out["arguments"][10_000_000]
    e16, e64 = out["event"][16_000_000], out["event"][64_000_000]

    def row(label, s, extra=""):
        return f"| {label} | {s['median']:.2f} [{s['min']:.2f} – {s['max']:.2f}] | {extra} |"

    return [
        "| measurement | seconds, median [min – max] | note |", "|---|---|---|",
        row(f"1 MB of arguments, 8-character deltas ({a1['events']:,} events), agent run", a1),
        row(f"10 MB of arguments, 8-character deltas ({a10['events']:,} events), agent run", a10,
            f"target < {TARGET_ARGUMENTS:g} s: **{'met' if a10['median'] < TARGET_ARGUMENTS else 'not met'}**"
            f"; 10 MB / 1 MB = {a10['median'] / a1['median']:.1f}× (linear: 10×)"),
        row("the same 10 MB body: split + json.loads alone, in memory (the floor)", a10["floor"],
            f"agentflow's whole run = {a10['median'] / a10['floor']['median']:.1f}× the floor"),
        row("one 16 MB event, client", e16),
        row("one 64 MB event, client", e64,
            f"target < {TARGET_EVENT:g} s: **{'met' if e64['median'] < TARGET_EVENT else 'not met'}**"
            f"; 64 MB / 16 MB = {e64['median'] / e16['median']:.1f}× (linear: 4×)"),
    ]


if __name__ == "__main__":
    print("\n".join(report(main())))
