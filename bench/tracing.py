"""The cost of tracing (agentflow.tracing, the [otel] extra): the 50-round run of the
loop benchmark against the loopback replay server, four ways, taking turns in each run:

- without: as with the extra absent (``agentflow.tracing`` finds no OpenTelemetry API:
  the code path of an install without it, forced in this process);
- off: the API installed, no tracer provider set (OpenTelemetry's default: nothing
  recorded);
- on, no-op exporter: an SDK ``TracerProvider`` whose exporter drops every span;
- on, in-memory exporter: the SDK's ``InMemorySpanExporter`` keeps them.

Timed in CPU seconds of this process (the replay server's thread included), which a
busy machine disturbs far less than wall time. Goal (issue 42): off ≤ 1.05×, on ≤ 1.3×
of the run without it."""

from __future__ import annotations

import statistics
import time

from agentflow import AgentRunOptions, ChatClientAgent, OpenAIChatClient, tool
from agentflow import tracing
from agentflow.testing.replay import ReplayServer, chat_stream

from common import runs, summary

ROUNDS = 50


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return "42"


def _providers():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (SimpleSpanProcessor, SpanExporter,
                                                SpanExportResult)
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class Dropping(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    noop, memory = TracerProvider(), TracerProvider()
    noop.add_span_processor(SimpleSpanProcessor(Dropping()))
    kept = InMemorySpanExporter()
    memory.add_span_processor(SimpleSpanProcessor(kept))
    return noop, memory, kept


def one_run(setting) -> float:
    """Seconds per round of one 50-round run under ``setting`` (a callable that sets
    the tracer up before the run)."""
    bodies = [chat_stream(tool_calls=[(f"call_{i}", "lookup", '{"query": "x"}')])
              for i in range(ROUNDS)] + [chat_stream(text="done")]
    with ReplayServer(bodies, keep_alive="chunked") as server:
        client = OpenAIChatClient(model="bench", base_url=server.base_url, api_key="x",
                                  max_retries=0)
        agent = ChatClientAgent(client, tools=[lookup],
                                options=AgentRunOptions(max_rounds=ROUNDS + 1))
        setting()
        start = time.process_time()  # CPU seconds: steadier than wall time when shared
        list(agent.run("go"))
        seconds = time.process_time() - start
    tracing.use_tracer_provider(None)
    return seconds / ROUNDS


def main() -> dict:
    noop, memory, kept = _providers()

    def without():
        tracing._tracer = None  # what tracer() finds when the API is not installed

    settings = {"without the extra": without,
                "off (API, no provider)": lambda: tracing.use_tracer_provider(None),
                "on, no-op exporter": lambda: tracing.use_tracer_provider(noop),
                "on, in-memory exporter": lambda: tracing.use_tracer_provider(memory)}
    for setting in settings.values():  # first-use costs, untimed
        one_run(setting)
    times: dict = {name: [] for name in settings}
    for _ in range(max(runs(), 5)):
        for name, setting in settings.items():
            times[name].append(one_run(setting))
            kept.clear()
    base = times["without the extra"]
    results = {}
    for name, values in times.items():
        stats = summary(values)
        stats["paired"] = statistics.median(v / b for v, b in zip(values, base))
        results[name] = stats
    return results


def table(results: dict) -> list[str]:
    lines = ["| tracing | CPU ms per round, median [min – max] | this / without, paired |",
             "|---|---|---|"]
    for name, s in results.items():
        lines.append(f"| {name} | {s['median'] * 1e3:.3f} [{s['min'] * 1e3:.3f} – "
                     f"{s['max'] * 1e3:.3f}] | {s['paired']:.2f}× |")
    return lines


if __name__ == "__main__":
    print("\n".join(table(main())))
