"""``python -m agentflow``: the ``agentflow`` command (``agentflow.cli``)."""

import sys

from agentflow.cli.main import main

sys.exit(main())
