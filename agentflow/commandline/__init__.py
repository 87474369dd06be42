"""Reading command lines and paths the way the shell and the OS will (SPEC R18, R19, R26).

* ``shell.py``: a command line read as dash and bash read it, into the commands a policy
  rule can match (or unreadable);
* ``options.py``: a program's options read as its ``getopt_long`` reads them
  (abbreviations too), for the allow side and the deny side alike;
* ``allowlist.py``: what a wildcard rule allows, per program (the words known to be
  harmless);
* ``command_rules.py``: the table of options and sub-commands that make a program run
  another, write or read a file;
* ``paths.py``: one reading of a path (``~``, ``..``, symlinks) for the tools and the rules;
* ``patterns.py``: the wildcards of rule patterns as regular expressions;
* ``workspace.py``: the workspace line and the secret files of the built-in tools;
* ``allowlist.py``: what a wildcard rule allows, per program (an allowlist);
* ``gitrepo.py``: the workspace's git folder and index, read without running git.

These modules may import the standard library, each other and ``agentflow.errors``;
nothing else of agentflow (no policy, tools, agent, ``builtin/`` or ``cli/``), so the
policy and the built-in tools can both read lines and paths through them. Importing the
package imports none of its modules.
"""
