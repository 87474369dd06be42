"""agentflow's own cost per tool round with HTTP taken out: the same 50-round run as
the loop benchmark, with the provider replaced by an in-process client that yields
(a) updates decoded beforehand — the loop alone: decorator, tool call, persistence;
(b) updates decoded from the same SSE bytes on the fly — everything but the socket."""

from __future__ import annotations

from agentflow import AgentRunOptions, ChatClientAgent, tool
from agentflow.assembler import stream_updates
from agentflow.testing.replay import chat_stream

from common import measure, runs, summary

ROUNDS = 50


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return "42"


def bodies(rounds: int) -> list[bytes]:
    return [chat_stream(tool_calls=[(f"call_{i}", "lookup", '{"query": "x"}')])
            for i in range(rounds)] + [chat_stream(text="done")]


class Decoded:
    """A provider whose turns were decoded before the clock started."""

    def __init__(self, turns):
        self.turns = [list(stream_updates([body])) for body in turns]
        self.calls = 0

    def run(self, messages, options=None, tools=()):
        self.calls += 1
        return iter(self.turns[self.calls - 1])


class FromBytes:
    """A provider that decodes each turn from its SSE bytes as it is asked."""

    def __init__(self, turns):
        self.turns = turns
        self.calls = 0

    def run(self, messages, options=None, tools=()):
        self.calls += 1
        return stream_updates([self.turns[self.calls - 1]])


def per_round(kind, rounds: int = ROUNDS) -> list[float]:
    turns = bodies(rounds)
    times = []
    for _ in range(runs()):
        client = kind(turns)
        agent = ChatClientAgent(client, tools=[lookup],
                                options=AgentRunOptions(max_rounds=rounds + 1))
        [seconds] = measure(lambda: list(agent.run("go")), runs=1)
        assert client.calls == rounds + 1
        times.append(seconds / rounds)
    return times


def main() -> dict:
    return {"loop only": summary(per_round(Decoded)),
            "decode + loop": summary(per_round(FromBytes))}


if __name__ == "__main__":
    for name, stats in main().items():
        print(f"{name:14} {stats['median'] * 1e3:.3f} ms/round  "
              f"[{stats['min'] * 1e3:.3f} – {stats['max'] * 1e3:.3f}]")
