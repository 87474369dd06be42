"""agentflow's reference adapter for the conformance protocol.

``python -m conformance.agentflow_adapter`` speaks the JSON-lines stdin/stdout protocol
of conformance/README.md with agentflow behind it (``conformance.driver.CaseDriver``, the
same driver the runner uses in-process), so the protocol itself is tested end to end.
"""

from __future__ import annotations

import sys

from conformance.adapters.common import json_lines
from conformance.driver import CaseDriver


def main() -> int:
    """The JSON-lines loop, one request per stdin line, with agentflow behind it."""
    driver = CaseDriver()
    return json_lines(driver.setup, driver.run)


if __name__ == "__main__":
    sys.exit(main())
