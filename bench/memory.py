"""Memory while streaming a very large response: resident memory sampled along the
stream, against the size of the text the run assembles. Each measurement runs in a
fresh process (``python memory.py --child SIZE``) so that earlier runs leave nothing."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

from common import recorded_events, runs, summary, text_body

SIZE = 200 * 1024 * 1024


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 1e6


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM). Not ``ru_maxrss``: on Linux that keeps the
    peak of the process that forked us, from before ``exec``."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    raise OSError("no VmHWM in /proc/self/status")


def child(size: int) -> dict:
    from agentflow import AgentSession, ChatClientAgent, OpenAIChatClient, TextDelta
    from agentflow.testing.replay import Reply, ReplayServer

    unit = text_body(1024 * 1024)
    head, _, tail = unit.rpartition(b"data: [DONE]")
    middle = head.rsplit(b"\n\n", 3)[0] + b"\n\n"   # text events only
    closing = head[len(middle):] + b"data: [DONE]\n\n"
    repeats = size // len(middle)

    def body():
        for _ in range(repeats):
            yield middle
        yield closing

    with ReplayServer([Reply(chunks=body())]) as server:
        agent = ChatClientAgent(OpenAIChatClient("bench-model", base_url=server.base_url,
                                                 api_key="sk-bench"))
        baseline = rss_mb()
        samples, seen, step = [], 0, max(1, repeats // 10)
        streamed_units = 0
        text_chars = 0
        session = AgentSession()
        for update in agent.run("stream a lot", session):
            if isinstance(update, TextDelta):
                text_chars += len(update.text)
                seen += 1
                if seen % 20000 == 0:
                    samples.append(round(rss_mb() - baseline, 1))
        peak = peak_rss_mb()
    text_bytes = sys.getsizeof(session.messages[-1].content)  # as Python holds it
    return {"body_mb": round(len(middle) * repeats / 1e6, 1), "text_mb": round(text_chars / 1e6, 1),
            "text_memory_mb": round(text_bytes / 1e6, 1),
            "baseline_mb": round(baseline, 1), "peak_mb": round(peak, 1),
            "growth_mb": round(peak - baseline, 1), "samples_mb": samples}


def main(size: int = SIZE) -> dict:
    results = []
    for _ in range(max(1, runs() // 2)):
        out = subprocess.run([sys.executable, __file__, "--child", str(size)],
                             capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout))
    growth = summary([r["growth_mb"] for r in results])
    return {"runs": results, "growth": growth}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(int(sys.argv[2]))))
    else:
        print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else SIZE), indent=1))
