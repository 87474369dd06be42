"""agentflow's reference adapter for the conformance protocol.

``python -m conformance.agentflow_adapter`` speaks the JSON-lines stdin/stdout protocol
of conformance/README.md with agentflow behind it (``conformance.driver.CaseDriver``, the
same driver the runner uses in-process), so the protocol itself is tested end to end.
"""

from __future__ import annotations

import json
import sys

from conformance.driver import CaseDriver


def main() -> int:
    """The JSON-lines loop: one request per stdin line, answers on stdout."""
    driver = CaseDriver()

    def send(message: dict) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if message["type"] == "setup":
            send(driver.setup(message))
        elif message["type"] == "run":
            send(driver.run(message, lambda u: send({"type": "update", "update": u})))
        elif message["type"] == "exit":
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
