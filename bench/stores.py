"""Session stores: steps per second, and what the write-ahead record costs per tool
call (SPEC R16, R22; target: under 1 ms per call with SQLite).

The run is bench/loop_only.py's (a provider decoded beforehand, one ``lookup`` call
per round), with the session opened from each store: every step is saved, which is
three writes per round (the model's turn, the call's write-ahead record, its result).
``store.checkpoint`` is timed call by call; the write-ahead record is the write made while
``session.running`` holds the call. PostgreSQL: ``AGENTFLOW_BENCH_POSTGRES_DSN``, or a
throwaway cluster started here (durable: fsync on), when PostgreSQL is installed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from agentflow import AgentRunOptions, AgentSession, ChatClientAgent
from agentflow.stores import FileStore, PostgresStore, SQLiteStore

from common import runs, summary
from loop_only import Decoded, bodies, lookup

ROUNDS = 20
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


class Timed:
    """Wraps a store's ``checkpoint`` (the write of each step of an open session): the
    seconds of each write, write-ahead ones apart."""

    def __init__(self, store):
        self.store, self.writes, self.ahead = store, [], []
        real = store.checkpoint

        def checkpoint(session_id, session, before, changed):
            start = time.perf_counter()
            written = real(session_id, session, before, changed)
            (self.ahead if session.running else self.writes).append(time.perf_counter() - start)
            return written
        store.checkpoint = checkpoint


def one_run(store, session_id: str) -> float:
    """Seconds for a run of ``ROUNDS`` tool rounds in a session opened from ``store``
    (or an unsaved one when ``store`` is None)."""
    agent = ChatClientAgent(Decoded(bodies(ROUNDS)), tools=[lookup],
                            options=AgentRunOptions(max_rounds=ROUNDS + 1))
    start = time.perf_counter()
    if store is None:
        list(agent.run("go", AgentSession()))
    else:
        with store.open(session_id) as session:
            list(agent.run("go", session))
    return time.perf_counter() - start


def measure(name: str, store) -> dict:
    """Time ``runs()`` runs (after one untimed) in ``store`` (``None``: no store)."""
    timed = Timed(store) if store is not None else None
    one_run(store, "warm-up")
    totals = [one_run(store, f"s{i}") for i in range(runs())]
    result = {"name": name, "round": summary([t / ROUNDS for t in totals])}
    if timed is not None:
        store.close()
        writes = timed.writes + timed.ahead
        result.update(steps_per_second=len(writes) / sum(writes),
                      write=summary(timed.writes), ahead=summary(timed.ahead))
    return result


def main() -> list[dict]:
    folder = tempfile.mkdtemp(prefix="agentflow-bench-")
    results = [measure("no store (in memory)", None),
               measure("file", FileStore(f"{folder}/files")),
               measure("sqlite (synchronous=FULL)", SQLiteStore(f"{folder}/full.db")),
               measure("sqlite (synchronous=NORMAL)",
                       SQLiteStore(f"{folder}/normal.db", synchronous="NORMAL"))]
    dsn, cluster = os.environ.get("AGENTFLOW_BENCH_POSTGRES_DSN"), None
    try:
        if not dsn:
            import postgres_cluster
            cluster = tempfile.mkdtemp(prefix="agentflow-bench-pg-")
            dsn = postgres_cluster.start(cluster, durable=True)
        results.append(measure("postgresql (loopback, durable)", PostgresStore(dsn)))
    except Exception as exc:  # reported, not fatal
        results.append({"name": "postgresql", "error": f"{type(exc).__name__}: {exc}"})
    finally:
        if cluster:
            postgres_cluster.stop(cluster)
    return results


def table(results: list[dict]) -> list[str]:
    ms = lambda s: f"{s['median'] * 1e3:.3f} [{s['min'] * 1e3:.3f} – {s['max'] * 1e3:.3f}]"  # noqa: E731
    lines = ["| store | ms per round | steps (writes) per second | ms per write | "
             "write-ahead record, ms per tool call |", "|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['name']} | not measured: {r['error']} | | | |")
        elif "write" not in r:
            lines.append(f"| {r['name']} | {ms(r['round'])} | – | – | – |")
        else:
            lines.append(f"| {r['name']} | {ms(r['round'])} | {r['steps_per_second']:.0f} | "
                         f"{ms(r['write'])} | **{ms(r['ahead'])}** |")
    return lines


if __name__ == "__main__":
    print("\n".join(table(main())))
