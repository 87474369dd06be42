"""An answer reaching a waiting worker (issue 38): from ``store.answer`` (what the inbox's
Approve does) to the worker's tool call, on SQLite and on a throwaway PostgreSQL
cluster, with and without the bubblewrap sandbox.

A real ``agentflow worker --poll 5`` process serves the store, so what wakes it is the
store (SQLite's data version, PostgreSQL's ``NOTIFY``), not its poll. Each answer is to
a session ``agentflow chat`` paused on one ``date +%s.%N >> stamps`` command; the time is
the stamp minus the clock just before ``store.answer``. Goal: under 100 ms median.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentflow.stores import open_store
from agentflow.testing.replay import ReplayServer, chat_stream
from agentflow.types import ToolApprovalResponse

from common import runs, summary


def trips(url: str, sandbox: str, folder: Path) -> list[float]:
    """Seconds from each answer to its tool call; ``folder`` is the processes' own
    (their configuration, the store's key), one per store."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTFLOW_"))},
           "OPENAI_API_KEY": "sk-bench", "XDG_CONFIG_HOME": str(folder / "config")}
    from agentflow.cli.trust import made_key
    key = made_key(str(folder / "config" / "agentflow" / "store.key"))  # the chat's
    stamps = folder / f"stamps-{sandbox}.txt"
    common = ["--store", url, "--sandbox", sandbox]
    lines = lambda: len(stamps.read_text().split()) if stamps.exists() else 0  # noqa: E731
    taken = []
    with ReplayServer() as model:
        worker = subprocess.Popen([sys.executable, "-m", "agentflow", "worker", *common,
                                   "--base-url", model.base_url, "--poll", "5"],
                                  cwd=folder, env=env, stdout=subprocess.DEVNULL)
        try:
            for i in range(runs() + 1):  # the first: the worker's imports
                model.queue(chat_stream(tool_calls=[("call_1", "run_command", json.dumps(
                    {"command": f"date +%s.%N >> {stamps}"}))]))
                done = subprocess.run([sys.executable, "-m", "agentflow", "chat", *common,
                                       "--base-url", model.base_url, "--session",
                                       f"{sandbox}-{i}", "go"], cwd=folder, env=env, capture_output=True,
                                      text=True, timeout=120)
                assert done.returncode == 3, done.stderr
                model.queue(chat_stream(text="done"))
                seen = lines()
                with open_store(url, key) as store:
                    [entry] = [e for e in store.pending() if e.session_id == f"{sandbox}-{i}"]
                    began = time.time()
                    store.answer(f"{sandbox}-{i}", [ToolApprovalResponse(
                        entry.call_id, True, digest=entry.digest, request_id=entry.request_id)])
                deadline = time.monotonic() + 60
                while lines() == seen:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the worker did not run the call")
                    time.sleep(0.002)
                taken.append(float(stamps.read_text().split()[-1]) - began)
                while len(model.requests) < 2 * (i + 1):  # its model turn, before the next
                    time.sleep(0.005)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    return taken[1:]


def main() -> dict:
    """Measure; ``{store: {sandbox: summary}}`` and notes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import postgres_cluster
    result: dict = {"stores": {}, "notes": []}
    folder = tempfile.mkdtemp(prefix="agentflow-bench-wakeup-")
    urls = {"sqlite": f"sqlite:///{folder}/sessions.db"}
    cluster = tempfile.mkdtemp(prefix="agentflow-bench-wakeup-pg-")
    try:
        urls["postgresql"] = postgres_cluster.start(cluster)
    except Exception as exc:  # reported, not fatal
        result["notes"].append(f"postgresql: {exc}")
    try:
        for name, url in urls.items():
            own = Path(tempfile.mkdtemp(prefix="agentflow-bench-wakeup-"))
            result["stores"][name] = {mode: summary(trips(url, mode, own))
                                      for mode in ("off", "workspace-write")}
    finally:
        if "postgresql" in urls:
            postgres_cluster.stop(cluster)
    return result


def table(result: dict) -> list[str]:
    """The Markdown rows for bench/RESULTS.md."""
    def cell(s):
        return f"{s['median'] * 1e3:.0f} [{s['min'] * 1e3:.0f} – {s['max'] * 1e3:.0f}]"
    lines = ["| store | answer → tool call, `--sandbox off`, ms | the same in the bwrap "
             "sandbox (default), ms |", "|---|---|---|"]
    for name, modes in result["stores"].items():
        lines.append(f"| {name} | {cell(modes['off'])} | {cell(modes['workspace-write'])} |")
    lines += [f"- not measured: {n}" for n in result["notes"]]
    return lines


if __name__ == "__main__":
    print("\n".join(table(main())))
