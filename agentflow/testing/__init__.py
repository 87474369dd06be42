"""Test tooling shipped with the package: the loopback replay server (``replay.py``),
which serves recorded model turns over real HTTP and records every request, and the
strict provider modes (``strict.py``) that refuse requests a real provider refuses.
``import agentflow`` imports none of it."""
