"""Shared pieces of the benchmarks: the recorded stream they are built from, bodies of
a given size, and timing statistics. Run through ``make bench`` (bench/run.py)."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STREAMS = ROOT.parent / "shared" / "fixtures" / "streams"
SOURCE = "openai-text.sse"  # OpenAI gpt-4.1-nano, 303 chunk events of streamed text
CHUNK = 65536               # bytes per network read handed to every decoder


def recorded_events(name: str = SOURCE) -> list[bytes]:
    """The events of a recorded stream (``data: …`` blocks, without the blank line)."""
    path = STREAMS / name
    if not path.is_file():
        raise SystemExit(f"bench: the recorded streams are not at {STREAMS} "
                         "(../shared beside the repository)")
    return [block for block in path.read_bytes().split(b"\n\n") if block.startswith(b"data:")]


def text_body(size: int, name: str = SOURCE) -> bytes:
    """About ``size`` bytes of real-format chunk events: the recording's text-delta
    events repeated, then its closing events and ``data: [DONE]``."""
    events = recorded_events(name)
    middle, closing = [], []
    for event in events:
        choices = json.loads(event[5:]).get("choices") or []
        delta = choices[0].get("delta", {}) if choices else {}
        (middle if delta.get("content") and not choices[0].get("finish_reason") else closing).append(event)
    unit = b"\n\n".join(middle) + b"\n\n"
    repeats = max(1, size // len(unit))
    return unit * repeats + b"\n\n".join(closing[-2:]) + b"\n\ndata: [DONE]\n\n"


def chunks_of(body: bytes, size: int = CHUNK) -> list[bytes]:
    return [body[i:i + size] for i in range(0, len(body), size)]


def measure(function, runs: int = 5) -> list[float]:
    """Wall seconds of ``runs`` calls of ``function()``."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


def summary(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1],
            "p99": ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))],
            "runs": len(ordered)}


def runs() -> int:
    return int(os.environ.get("BENCH_RUNS", "5"))
