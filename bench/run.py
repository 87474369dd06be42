"""``make bench``: every benchmark, written to bench/RESULTS.md.

Runs in .bench-venv (agentflow plus the peers); the library's own dependencies do not
change. BENCH_RUNS (default 5) sets the number of runs of each measurement.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import decode  # noqa: E402
import early_finish  # noqa: E402
import inbox  # noqa: E402
import keepalive  # noqa: E402
import linear  # noqa: E402
import loop_only  # noqa: E402
import memory  # noqa: E402
import peers  # noqa: E402
import scale  # noqa: E402
import secrets_scan  # noqa: E402
import startup  # noqa: E402
import stores  # noqa: E402
import wakeup  # noqa: E402
import tracing  # noqa: E402
from common import SOURCE, runs, summary  # noqa: E402

OUT = Path(__file__).resolve().parent / "RESULTS.md"
ROUNDS = 50
FIRST_UPDATE_SAMPLES = 100
PACKAGES = ["requests", "urllib3", "openai", "openai-agents", "pydantic-ai-slim",
            "agent-framework-core", "agent-framework-openai", "httpx", "httpx-sse",
            "sseclient-py"]


def machine() -> list[str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    return [f"- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
            f"- machine: {platform.machine()}, {cpu}, {os.cpu_count()} cores, "
            f"{platform.system()} {platform.release()}",
            f"- Python {platform.python_version()}; agentflow {importlib.metadata.version('agentflow-approvals')}",
            f"- peers: {', '.join(versions)}",
            f"- runs per measurement: {runs()} (medians; [min – max] is the spread)"]


INBOX_TEXT = [
    f"Issues 31, 38 (bench/inbox.py): {inbox.WAITING:,} calls waiting in SQLite and in "
    "PostgreSQL (a throwaway cluster), a real "
    "`agentflow inbox` and a real `agentflow worker` process. First paint: headless "
    "chromium opens a printed link (the page, the link's code exchanged for a page "
    "token, the first 50 calls drawn), from the navigation's start; beside it the "
    "server's `GET /entries` over HTTP. Round trip: from the click on Approve to the worker's tool call "
    "(the command records the time it ran).", ""]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def main() -> int:
    lines = ["# agentflow benchmarks", "", "Written by `make bench` (bench/run.py). "
             "Numbers from one machine, in one run: compare the rows with each other.", ""]
    lines += machine()
    failures = []

    print("decoding ...", flush=True)
    d = decode.main()
    floor = d["results"]["floor (split + json.loads)"]["median"]
    ours = d["results"]["agentflow (decode + assemble)"]["median"]
    lines += ["", "## 1. Stream decoding", "",
              f"A {d['size_mb']:.0f} MB body of real-format chunk events ({d['events']} events: "
              f"the text-delta events of `{SOURCE}` repeated), decoded in memory from 64 KiB "
              "reads. agentflow decodes and assembles into updates; the others only decode.",
              "The decoders take turns within each run, so the ratio column pairs runs: "
              "agentflow's rate over this decoder's in the same run, median over runs "
              "(steadier than a ratio of medians on a busy machine).",
              "", "| decoder | MB/s median [min – max] | agentflow / this, paired |", "|---|---|---|"]
    ours_rates = d["results"]["agentflow (decode + assemble)"]["rates"]
    paired = {}
    for name, r in d["results"].items():
        if "median" in r:
            if name not in decode.SIZES:  # same body: comparable run by run
                paired[name] = statistics.median(a / b for a, b in zip(ours_rates, r["rates"]))
                ratio = f"{paired[name]:.2f}×"
            else:
                ratio = f"{ours / r['median']:.1f}× (other body size)"
            lines.append(f"| {name} | {r['median']:.1f} [{r['min']:.1f} – {r['max']:.1f}] | "
                         f"{ratio} |")
        else:
            lines.append(f"| {name} | {r['error']} | |")
    lines += ["", f"agentflow reaches **{paired['floor (split + json.loads)']:.2f}×** the floor "
              "(target ≥ 0.85×), decoding and assembling."]

    print("loop ...", flush=True)
    lines += ["", f"## 2. Loop overhead ({ROUNDS} tool rounds)", "",
              f"One agent run of {ROUNDS} tool rounds ({ROUNDS + 1} streamed model calls) against "
              "the loopback replay server, same bodies and tool for every library (bench/peers.py "
              "says exactly what is timed). Time per round = run time / rounds.", "",
              "| library | ms per round, median [min – max] | this / agentflow |", "|---|---|---|"]
    loops = {}
    for name in peers.LIBRARIES:
        try:
            peers.run_loop(name, 1)  # first-use costs, untimed
            loops[name] = summary([peers.run_loop(name, ROUNDS) / ROUNDS for _ in range(runs())])
        except Exception as exc:  # a peer that cannot run is reported, not fatal
            failures.append(f"{name} loop: {type(exc).__name__}: {exc}")
    for name, s in loops.items():
        ratio = s["median"] / loops["agentflow"]["median"] if "agentflow" in loops else float("nan")
        lines.append(f"| {name} | {ms(s['median'])} [{ms(s['min'])} – {ms(s['max'])}] | {ratio:.1f}× |")
    alone = loop_only.main()
    lines += ["", "agentflow without HTTP (bench/loop_only.py):", ""]
    for name, s in alone.items():
        lines.append(f"- {name}: **{s['median'] * 1e3:.3f} ms** per round "
                     f"[{s['min'] * 1e3:.3f} – {s['max'] * 1e3:.3f}] (target ≤ 0.3 ms)")

    print("first update ...", flush=True)
    lines += ["", "## 3. Time to first update", "",
              "From the server writing the first text event to the caller holding it, through "
              f"each library's public streaming API; {FIRST_UPDATE_SAMPLES} samples after one "
              "untimed.", "", "| library | median ms | p99 ms |", "|---|---|---|"]
    for name in peers.LIBRARIES:
        try:
            with peers.FirstTextServer() as server:
                peers.first_update_seconds(name, server.base_url)
                values = [peers.first_update_seconds(name, server.base_url)
                          for _ in range(FIRST_UPDATE_SAMPLES)]
            s = summary(values)
            lines.append(f"| {name} | {ms(s['median'])} | {ms(s['p99'])} |")
        except Exception as exc:
            failures.append(f"{name} first update: {type(exc).__name__}: {exc}")

    print("memory ...", flush=True)
    m = memory.main()
    lines += ["", "## 4. Memory while streaming", "",
              f"A {m['runs'][0]['body_mb']:.0f} MB response of text events through "
              "`ChatClientAgent.run` over HTTP, each run in a fresh process. Growth is peak "
              "RSS minus RSS before the call; the samples are taken along the stream.", "",
              "| run | text assembled | its size in memory | RSS before | peak | growth | growth along the stream (MB) |",
              "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(m["runs"], 1):
        lines.append(f"| {i} | {r['text_mb']} M chars | {r['text_memory_mb']} MB | {r['baseline_mb']} MB | "
                     f"{r['peak_mb']} MB | {r['growth_mb']} MB | {', '.join(map(str, r['samples_mb']))} |")
    lines += ["", "The run keeps the text it assembles (once while streaming, once more as the "
              "stored message at the end); nothing else grows with the stream."]

    print("import ...", flush=True)
    lines += ["", "## 5. Import time", "",
              "A fresh `python -c` importing what a usable agent with an OpenAI-compatible "
              "client needs, minus `python -c pass` (median of 7 processes, repeated).", "",
              "| library | ms median [min – max] | this / agentflow |", "|---|---|---|"]
    imports = {}
    for name in peers.LIBRARIES:
        try:
            imports[name] = summary([peers.import_seconds(name) for _ in range(runs())])
        except Exception as exc:
            failures.append(f"{name} import: {type(exc).__name__}: {exc}")
    for name, s in imports.items():
        lines.append(f"| {name} | {s['median'] * 1e3:.0f} [{s['min'] * 1e3:.0f} – "
                     f"{s['max'] * 1e3:.0f}] | {s['median'] / imports['agentflow']['median']:.1f}× |")
    code = "import agentflow; agentflow.OpenAIChatClient(base_url='http://127.0.0.1:9/v1')"
    made = statistics.median(peers._process_seconds(code, str(peers.BENCH_PYTHON), dict(os.environ))
                             for _ in range(7)) - statistics.median(
        peers._process_seconds("pass", str(peers.BENCH_PYTHON), dict(os.environ)) for _ in range(7))
    lines += ["", f"`import agentflow` does not import `requests`; making the first "
              f"`OpenAIChatClient` does. Import plus a client made: {made * 1e3:.0f} ms."]

    print("start-up ...", flush=True)
    lines += ["", "## 6. Command-line start-up", "",
              f"Fresh processes, {startup.ROUNDS} rounds of the three in turn; the ratio pairs "
              "each command with `import agentflow` in the same round (bench/startup.py). "
              f"Target: `agentflow --help` within {startup.TARGET}×.", ""]
    lines += startup.table(startup.main())

    print("stores ...", flush=True)
    lines += ["", f"## 7. Session stores ({stores.ROUNDS} tool rounds per run)", "",
              "bench/loop_only.py's run with the session opened from each store, so every step "
              "is saved: three writes per round (the model's turn, the write-ahead record of "
              "the call, its result). Writes are timed one by one, medians [min – max]; "
              "steps per second is writes over the time spent writing. Target: the "
              "write-ahead record under 1 ms per tool call with SQLite.", ""]
    lines += stores.table(stores.main())

    print("linear time ...", flush=True)
    lines += ["", "## 8. Linear time", "",
              "Issue 12: assembly is linear in the size of the body (SPEC §6). A tool call "
              "whose arguments come in 8-character deltas, in OpenAI's own chunk format, "
              "through `ChatClientAgent.run` over loopback; one huge text event through "
              "`OpenAIChatClient.run` (bench/linear.py).",
              ""] + linear.report(linear.main())

    print("kept-alive connections ...", flush=True)
    lines += ["", f"## 9. Kept-alive connections over TLS ({keepalive.ROUNDS} tool rounds)", "",
              "Section 2's loop against a loopback server that keeps connections open and "
              "streams with `Transfer-Encoding: chunked`, as hosted providers do, over TLS "
              "(a self-signed certificate made with `openssl`), beside the same over plain "
              "HTTP and over TLS with the connection closed after every reply (a handshake "
              "per model call). Connections: accepted by the server during one run "
              f"(bench/keepalive.py). Target: one per run, TLS within {keepalive.TARGET}× "
              "of plain HTTP.", ""]
    lines += keepalive.table(keepalive.main())

    print("stores at scale ...", flush=True)
    lines += ["", "## 10. Stores at scale", "",
              f"SPEC R22 addendum (bench/scale.py): ms and bytes per save of a step (one tool "
              f"round) on a session of 10 to 5,000 messages, {scale.STEPS} steps each, medians "
              "[min – max]; then `pending(limit=100)` with 10, 100 and 50,000 sessions "
              "waiting. Goals: SQLite and PostgreSQL flat within 2× from 10 to 5,000; the "
              "first page under 50 ms and under 1.5× the cost with 10.", ""]
    lines += scale.table(scale.main())

    print("the approval inbox ...", flush=True)
    lines += ["", "## 11. The approval inbox", ""] + INBOX_TEXT
    lines += inbox.table(inbox.main())
    print("an answer waking a worker ...", flush=True)
    lines += ["", "Issue 38 (bench/wakeup.py): from `store.answer` (the page's Approve) to the "
              "worker's tool call, a real `agentflow worker --poll 5` woken by the store "
              "(SQLite's data version, PostgreSQL's NOTIFY), not by its poll. Goal: under "
              "100 ms median.", ""] + wakeup.table(wakeup.main())

    print("tracing ...", flush=True)
    lines += ["", f"## 12. Tracing ({tracing.ROUNDS} tool rounds)", "",
              "The loop's cost with OpenTelemetry tracing (bench/tracing.py): without the "
              "extra, with the API and no provider, and with the SDK exporting to nowhere or "
              "to memory; the four take turns in each run. Goal: off ≤ 1.05×, on ≤ 1.3×.", ""]
    lines += tracing.table(tracing.main())

    print("secret values ...", flush=True)
    lines += ["", "## 13. The workspace's secret values, before each tool result", "",
              "bench/secrets_scan.py: the `.env` values every result is masked of (SPEC "
              f"R27), on a workspace of {secrets_scan.PACKAGES * secrets_scan.FILES:,} files; "
              "the first call of a process and each later one, beside a plain `os.walk`.", ""]
    lines += secrets_scan.table(secrets_scan.main())

    print("stalls after a finish ...", flush=True)
    lines += ["", "## 14. Stalls after a finish_reason", "",
              f"Issue 41 (bench/early_finish.py): a keep-alive loopback server sends text and "
              f"`stop`, then after a {early_finish.STALL:g} s pause the tool call (a gateway "
              "that finishes early), or nothing until the client lets go (a server stalled "
              f"after its real finish); `finish_wait` {early_finish.FINISH_WAIT:g} s (the "
              f"default) and {early_finish.OLD_WAIT:g} s (the wait before issue 41). Each once.",
              ""]
    lines += early_finish.table(early_finish.main())

    if failures:
        lines += ["", "## Not measured", ""] + [f"- {f}" for f in failures]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
