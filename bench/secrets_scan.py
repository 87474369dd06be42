"""The cost of finding the workspace's ``.env`` values before each tool result (issue 37,
SPEC R27): ``agentflow.builtin.dotenv.secret_values`` on a workspace of 50,000 files in
1,000 folders (a ``node_modules`` of 500 packages) with one ``.env``: the first call
of a process walks it all; each later call re-reads only what changed, paying a
``stat`` a folder. For comparison, a plain ``os.walk`` of the same tree, as the scan
did before. Wall time, milliseconds."""

from __future__ import annotations

import os
import tempfile
import time

from agentflow.builtin.dotenv import secret_values
from agentflow.commandline.workspace import Workspace

from common import runs, summary

PACKAGES, FILES = 500, 100


def tree(root: str) -> None:
    for i in range(PACKAGES):
        folder = os.path.join(root, "node_modules", f"pkg{i}", "lib")
        os.makedirs(folder)
        for j in range(FILES):
            open(os.path.join(folder, f"f{j}.js"), "w").close()
    with open(os.path.join(root, ".env"), "w") as handle:
        handle.write("TOKEN=abcdefghijklmnop\n")
    old = time.time_ns() - 3600 * 10**9  # a checkout's age: outside the racy window
    for top, folders, _ in os.walk(root):
        for name in folders:
            os.utime(os.path.join(top, name), ns=(old, old))
    os.utime(root, ns=(old, old))


def main() -> dict:
    results = {"os.walk of the tree (the scan before)": [], "first call": [],
               "each later call": []}
    for _ in range(runs()):
        with tempfile.TemporaryDirectory() as root:
            tree(root)
            started = time.perf_counter()
            for _ in os.walk(root):
                pass
            results["os.walk of the tree (the scan before)"].append(time.perf_counter() - started)
            space = Workspace(root)
            started = time.perf_counter()
            assert secret_values(space) == ["abcdefghijklmnop"]
            results["first call"].append(time.perf_counter() - started)
            later = []
            for _ in range(5):
                started = time.perf_counter()
                secret_values(space)
                later.append(time.perf_counter() - started)
            results["each later call"].append(sum(later) / len(later))
    return {name: summary(values) for name, values in results.items()}


def table(results: dict) -> list[str]:
    lines = ["| call | ms, median [min – max] |", "|---|---|"]
    for name, s in results.items():
        lines.append(f"| {name} | {s['median'] * 1e3:.1f} [{s['min'] * 1e3:.1f} – "
                     f"{s['max'] * 1e3:.1f}] |")
    return lines


if __name__ == "__main__":
    print("\n".join(table(main())))
