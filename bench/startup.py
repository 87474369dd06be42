"""Start-up of the command line: ``agentflow --help`` and ``agentflow chat --help``
against ``python -c "import agentflow"`` (issue 16: the first within 1.5×).

Each round runs the three commands once, in turn, as fresh processes of the Python
running this file (and its ``agentflow`` console script), so a busy machine slows all
three alike; the ratio is taken within each round, then the median over rounds.
``python bench/startup.py`` prints the table alone; ``make bench`` adds it to
RESULTS.md.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROUNDS = 21
TARGET = 1.5  # --help / import agentflow


def commands(python: str = sys.executable) -> dict[str, list[str]]:
    script = str(Path(python).with_name("agentflow"))
    return {"python -c 'import agentflow'": [python, "-c", "import agentflow"],
            "agentflow --help": [script, "--help"],
            "agentflow chat --help": [script, "chat", "--help"]}


def seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main(rounds: int = ROUNDS) -> dict:
    """``{"times": {name: [seconds]}, "ratios": {name: [per-round ratio to import]}}``."""
    runs = commands()
    for argv in runs.values():  # writes any missing bytecode
        seconds(argv)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, argv in runs.items():
            times[name].append(seconds(argv))
    base = times["python -c 'import agentflow'"]
    ratios = {name: [t / b for t, b in zip(values, base)] for name, values in times.items()}
    return {"times": times, "ratios": ratios}


def table(result: dict) -> list[str]:
    lines = ["| command | ms median [min – max] | / import agentflow, paired |", "|---|---|---|"]
    for name, values in result["times"].items():
        lines.append(f"| `{name}` | {statistics.median(values) * 1e3:.0f} "
                     f"[{min(values) * 1e3:.0f} – {max(values) * 1e3:.0f}] | "
                     f"{statistics.median(result['ratios'][name]):.2f}× |")
    return lines


if __name__ == "__main__":
    print("\n".join(table(main())))
    print(f"(target: agentflow --help within {TARGET}× of import agentflow)")
