"""The ``agentflow`` command: everything it does and prints, on the library's public
surface. ``main.py`` parses the command line and dispatches; ``chat.py`` is
``agentflow chat``; ``demo.py``, ``pending.py``, ``policy_check.py`` and
``inspect_stream.py`` are the other commands. ``import agentflow`` imports none of it."""
