"""``python -m conformance [--adapter CMD] …`` runs the suite (``runner.py``);
``python -m conformance replay CASE`` shows one case as it runs (``trace.py``)."""

import sys

if sys.argv[1:2] == ["replay"]:
    from .trace import main
else:
    from .runner import main

sys.exit(main())
