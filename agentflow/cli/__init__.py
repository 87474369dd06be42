"""The ``agentflow`` command: everything it does and prints, on the library's public
surface. ``main.py`` parses the command line and dispatches; ``chat.py`` is
``agentflow chat``'s session flow, and beside it one concept each: ``flags``
(its flags and exit statuses), ``settings`` (what a session remembers), ``trust``
(remembered settings the person confirms), ``endpoint`` (the provider client),
``sessions`` (opening one), ``servers`` (``--mcp``), ``policies`` (the layers, and the
rules [a] writes), ``render`` (what is shown, always through ``agentflow.display``,
SPEC R25), ``terminal`` and ``prompt`` (what is typed, the approval prompt), ``editor``
([e]), ``repl`` (the ``you>`` prompt and its ``/`` commands), ``pause`` (the summary
when calls wait), ``respond`` (``--respond``) and ``paste`` (commands printed to be
pasted). ``demo.py``, ``pending.py``, ``show.py``, ``policy_check.py`` and
``inspect_stream.py`` are the other commands. ``import agentflow`` imports none of it."""
