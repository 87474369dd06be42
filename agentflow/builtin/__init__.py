"""The built-in tools of ``agentflow chat`` and the process control they run commands under.

* ``builtin_tools.py``: ``run_command``, ``write_file``, ``read_file``, ``list_dir``
  (``builtin_tools()`` makes them);
* ``commands.py``: running one command, with nothing it starts outliving it (SPEC R16);
* ``supervise.py``: the supervisor, run as a script beside the command, never imported;
* ``sandbox.py``: ``Sandbox``, the bubblewrap flags ``run_command`` runs under.

These modules may import the standard library, each other, ``agentflow.commandline``,
and the library core (``errors``, ``redact``, ``tools``, ``policy``); never ``cli/`` or
``testing/``, and nothing in the core imports them, so ``import agentflow`` loads no
built-in tool. Importing the package imports none of its modules.
"""
