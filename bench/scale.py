"""Stores at scale (SPEC R22 addendum): ms and bytes per save as a session grows, and the
inbox's first page with many sessions waiting.

Saves: a session of N messages (about 190 bytes each, a user/assistant/tool mix) is
opened from the store, and ``STEPS`` steps each add one tool round (an assistant
message with a call, its result) and are saved by ``session.checkpoint()``, timed one
by one. Bytes per save are what the store wrote: the file for ``FileStore``; the
head, the item rows and the pending rows for the database stores (their texts and
MACs, not the database's own overhead). Goal: SQLite and PostgreSQL flat within 2x
from 10 to 5,000 messages.

Inbox: ``pending(limit=100)`` with 10, 100 and 50,000 sessions waiting (each paused on
one call), timed ``runs()`` times. Goal: under 50 ms, and under 1.5x the cost with 10
(with 10 waiting the page holds 10 entries, so 100 waiting, a full page, is shown too).
The 50,000 sessions are written with SQLite ``synchronous=NORMAL`` and a PostgreSQL
cluster without fsync (only the reads are measured). PostgreSQL: a throwaway cluster,
or ``AGENTFLOW_BENCH_POSTGRES_DSN``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from agentflow import AgentSession, ChatMessage
from agentflow.stores import FileStore, PostgresStore, SQLiteStore
from agentflow.stores import sql as sql_stores
from agentflow.stores.files import FileStore as _Files
from agentflow.types import ToolCall

from common import runs, summary

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
SIZES = (10, 100, 1000, 5000)
STEPS = 20
INBOX = (10, 100, 50_000)  # sessions waiting
PAD = "x" * 120


def conversation(size: int) -> list:
    """``size`` messages of a conversation with tool calls."""
    messages = []
    while len(messages) < size:
        n = len(messages)
        messages += [ChatMessage.user(f"question {n} {PAD}"),
                     ChatMessage.assistant(None, [ToolCall(f"c{n}", "lookup",
                                                           f'{{"q": "{n}"}}')]),
                     ChatMessage.tool(f"answer {n} {PAD}", f"c{n}")]
    return messages[:size]


class Counted:
    """Counts the bytes each write of a store stores."""

    def __init__(self):
        self.sizes = []
        real_store, real_swap = sql_stores._SQLStore._store, _Files._swap

        def store(this, session_id, expected, change, before, *more):
            self.sizes.append(len(change.head) + sum(
                len(text) + len(mac) for items in change.items.values()
                for _, text, mac in items) + sum(len(r[2]) + len(r[3])
                                                 for r in change.pending or ()))
            return real_store(this, session_id, expected, change, before, *more)

        def swap(this, session_id, expected, text, waiting):
            self.sizes.append(len(text.encode("utf-8")))
            return real_swap(this, session_id, expected, text, waiting)
        sql_stores._SQLStore._store, _Files._swap = store, swap


def saves(store, counted: Counted, size: int) -> dict:
    """ms and bytes per save of ``STEPS`` steps on a session of ``size`` messages."""
    session_id = f"s{size}"
    store.save(session_id, AgentSession(messages=conversation(size)))
    times, counted.sizes = [], []
    with store.open(session_id) as session:
        for step in range(STEPS):
            call = ToolCall(f"new{step}", "lookup", '{"q": "more"}')
            session.messages += [ChatMessage.assistant(None, [call]),
                                 ChatMessage.tool(f"answer {PAD}", call.id)]
            start = time.perf_counter()
            session.checkpoint()
            times.append(time.perf_counter() - start)
    written = counted.sizes[:STEPS]
    return {"ms": summary(times), "bytes": sorted(written)[len(written) // 2]}


def inbox(store, waiting: int, already: int) -> tuple[dict, int]:
    """Fill ``store`` up to ``waiting`` paused sessions; time ``pending(limit=100)``."""
    for n in range(already, waiting):
        call = ToolCall("c1", "transfer", '{"amount": 5}')
        session = AgentSession(messages=[ChatMessage.user(f"pay {n}"),
                                         ChatMessage.assistant(None, [call])])
        session.approvals.issue(call, 1_000_000.0 + n)
        store.save(f"w{n:06d}", session)
    times, polled = [], {"answered": [], "changes": []}
    for _ in range(max(5, runs())):
        start = time.perf_counter()
        page = store.pending(limit=100)
        times.append(time.perf_counter() - start)
    assert len(page) == min(100, waiting)
    cursor, _ = store.changes()
    for _ in range(max(5, runs())):  # what a worker and an inbox poll (issue 38)
        start = time.perf_counter()
        assert list(store.answered()) == []
        polled["answered"].append(time.perf_counter() - start)
        start = time.perf_counter()
        cursor, changed = store.changes(cursor)
        polled["changes"].append(time.perf_counter() - start)
    return {"pending": summary(times), **{k: summary(v) for k, v in polled.items()}}, waiting


def main() -> dict:
    folder = tempfile.mkdtemp(prefix="agentflow-bench-scale-")
    counted = Counted()
    stores = {"file": lambda: FileStore(f"{folder}/files"),
              "sqlite (synchronous=FULL)": lambda: SQLiteStore(f"{folder}/full.db")}
    dsn, clusters = os.environ.get("AGENTFLOW_BENCH_POSTGRES_DSN"), []
    import postgres_cluster
    try:
        if not dsn:
            clusters.append(tempfile.mkdtemp(prefix="agentflow-bench-pg-"))
            dsn = postgres_cluster.start(clusters[-1], durable=True)
        stores["postgresql (loopback, durable)"] = lambda: PostgresStore(dsn)
    except Exception as exc:  # reported, not fatal
        print(f"postgresql not measured: {exc}", file=sys.stderr)
    result = {"saves": {}, "inbox": {}}
    try:
        for name, make in stores.items():
            with make() as store:
                result["saves"][name] = {size: saves(store, counted, size) for size in SIZES}
        result["inbox"] = inboxes(folder, clusters, "postgresql (loopback, durable)" in stores)
    finally:
        for cluster in clusters:
            postgres_cluster.stop(cluster)
    return result


def inboxes(folder: str, clusters: list, postgres: bool) -> dict:
    """``pending(limit=100)`` at each of ``INBOX`` sessions waiting, per database store."""
    import postgres_cluster
    made = {"sqlite": lambda: SQLiteStore(f"{folder}/inbox.db", synchronous="NORMAL")}
    if postgres:
        clusters.append(tempfile.mkdtemp(prefix="agentflow-bench-pg-"))
        fast = postgres_cluster.start(clusters[-1])
        made["postgresql"] = lambda: PostgresStore(fast)
    result = {}
    for name, make in made.items():
        with make() as store:
            filled, result[name] = 0, []
            for waiting in INBOX:
                timing, filled = inbox(store, waiting, filled)
                result[name].append(timing)
    return result


def table(result: dict) -> list[str]:
    ms = lambda s: f"{s['median'] * 1e3:.2f} [{s['min'] * 1e3:.2f} – {s['max'] * 1e3:.2f}]"  # noqa: E731
    lines = ["| store | " + " | ".join(f"{n} messages: ms, bytes per save" for n in SIZES)
             + " | 5,000 / 10 (ms) |", "|---|" + "---|" * (len(SIZES) + 1)]
    for name, rows in result["saves"].items():
        ratio = rows[SIZES[-1]]["ms"]["median"] / rows[SIZES[0]]["ms"]["median"]
        lines.append(f"| {name} | " + " | ".join(
            f"{ms(rows[n]['ms'])}, {rows[n]['bytes']:,} B" for n in SIZES)
            + f" | {ratio:.2f}× |")
    lines += ["", "| store | " + " | ".join(f"pending(limit=100), {n:,} waiting, ms"
                                         for n in INBOX)
              + " | 50,000 / 10 | 50,000 / 100 |", "|---|" + "---|" * (len(INBOX) + 2)]
    for name, timings in result["inbox"].items():
        pages = [t["pending"] for t in timings]
        lines.append(f"| {name} | " + " | ".join(ms(t) for t in pages)
                     + f" | {pages[-1]['median'] / pages[0]['median']:.2f}× | "
                     f"{pages[-1]['median'] / pages[1]['median']:.2f}× |")
    lines += ["", "What a worker and an inbox poll (issue 38), nothing answered: "
              "`answered()` and the inbox's change detection (`changes(cursor)`), ms. "
              "Goal: under 50 ms at 50,000 waiting.", "",
              "| store | " + " | ".join(f"{what}, {n:,} waiting" for what in
                                       ("answered()", "changes()") for n in INBOX) + " |",
              "|---|" + "---|" * (2 * len(INBOX))]
    for name, timings in result["inbox"].items():
        lines.append(f"| {name} | " + " | ".join(ms(t[what]) for what in ("answered", "changes")
                                                 for t in timings) + " |")
    return lines


if __name__ == "__main__":
    print("\n".join(table(main())))
