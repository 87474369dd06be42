"""The chat's ``--mcp`` servers: starting them, and what the chat shows for each at start."""

from __future__ import annotations

import shlex
import warnings

from ..display import safe_text
from .errors import UsageError


def approval_overrides(values) -> dict:
    """The ``--mcp-approval`` values as each server's ``approval`` setting.

    Args:
        values: ``NAME=ask|run`` (every tool of server ``NAME``) or
            ``NAME.TOOL=ask|run`` (one tool; ``TOOL`` is the MCP name, any characters).

    Returns:
        dict: server name → ``True`` / ``False``, or → a dict of MCP tool name (``"*"``
        for the rest) → ``True`` (ask) / ``False`` (run without asking).

    Raises:
        UsageError: a value of another shape.
    """
    overrides: dict = {}
    for value in values:
        target, sep, word = value.rpartition("=")
        if not sep or word not in ("ask", "run") or not target:
            raise UsageError(f"--mcp-approval {value!r}: write NAME=ask, NAME=run, "
                             "NAME.TOOL=ask or NAME.TOOL=run")
        name, dot, tool = target.partition(".")
        mapping = overrides.setdefault(name, {})
        mapping[tool if dot else "*"] = word == "ask"
    return overrides


def start_mcp_servers(specs, stack, approvals=()) -> list:
    """Start each ``--mcp`` server (stopped when ``stack`` closes); the SDK is imported
    only here, so a chat without ``--mcp`` never loads it.

    Args:
        specs: the ``--mcp`` values (list of str, ``[NAME=]COMMAND|URL``).
        stack: a ``contextlib.ExitStack``.
        approvals: the ``--mcp-approval`` values (``approval_overrides``).

    Returns:
        list: the started ``agentflow.mcp.MCPServer`` objects, in order.

    Raises:
        UsageError: the extra is missing, a value cannot be read, two share a name, or
            an ``--mcp-approval`` names a server no ``--mcp`` names.
        AgentflowError: a server could not be started.
    """
    overrides = approval_overrides(approvals)
    if not specs:
        if overrides:
            raise UsageError("--mcp-approval needs the server it names: --mcp NAME=…")
        return []
    try:
        from ..mcp import MCPServer
        from ..mcp_listing import MCPListingWarning
    except ImportError as exc:
        raise UsageError(f"--mcp: {exc}") from None
    servers = []
    for spec in specs:
        try:
            server = MCPServer.from_command_line(spec)
        except ValueError as exc:
            raise UsageError(f"--mcp {spec!r}: {exc}") from None
        if server.name in overrides:  # the person's word over the server's hints
            server.approval = overrides.pop(server.name)
        with warnings.catch_warnings():  # mcp_summary shows them, as lines of the chat
            warnings.simplefilter("ignore", MCPListingWarning)
            servers.append(stack.enter_context(server))
        names = [s.name for s in servers]
        if names.count(server.name) > 1:
            raise UsageError(f"two --mcp servers are both named {server.name!r}: name one "
                             f"with --mcp {shlex.quote('OTHER=' + server.describe())}")
    if overrides:
        raise UsageError(f"--mcp-approval names {', '.join(sorted(overrides))}, which no "
                         "--mcp names: give the server its name, --mcp NAME=COMMAND")
    return servers


def sdk_logs(verbose: bool) -> None:
    """Where the MCP SDK's own log lines go (its ``mcp`` loggers; issue 34). Without a
    handler Python prints every warning of theirs on stderr, tracebacks included (a
    stdio server's banner line, a GET stream the server does not offer): start-up noise
    that reads like a failure. They are hidden, unless ``--verbose`` shows them (INFO and
    above), each line prefixed ``agentflow: mcp sdk:`` and escaped, since they quote what
    the server sent (SPEC R25). What a server writes on its own stderr is not a log line
    of the SDK's, and is not touched here.

    Args:
        verbose: show them (bool).
    """
    import logging
    import sys

    class Shown(logging.Formatter):
        def format(self, record):
            return "\n".join(f"agentflow: mcp sdk: {safe_text(line)}"
                             for line in super().format(record).splitlines())

    logger = logging.getLogger("mcp")
    logger.propagate = False  # never to a root handler an embedding program set up
    logger.handlers[:] = []
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(Shown("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    else:
        logger.addHandler(logging.NullHandler())


def mcp_summary(server) -> str:
    """What ``agentflow chat`` shows at start for an MCP server: the server, one line per
    tool with its wire name and whether it asks, then how policy rules name them and what
    their patterns match.

    Args:
        server: a started ``agentflow.mcp.MCPServer``.

    Returns:
        str: the lines, joined by newlines.
    """
    tools = server.tools
    names = [safe_text(t.name) for t in tools]
    width = max((len(name) for name in names), default=0)
    lines = [f"MCP server {safe_text(server.name)} ({safe_text(server.describe())}): "
             f"{len(tools)} tools"]
    lines += [f"  {name:<{width}}  {'asks' if t.requires_approval() else 'runs'} "
              f"({safe_text(t.approval_reason)})" for name, t in zip(names, tools)]
    subjects = [safe_text(f"{t.mcp_name}({t.subject})") for t in tools if t.subject]
    lines.append(f"  policy rules name them {server.name}.TOOL"
                 + (f"; patterns match {', '.join(subjects)}" if subjects else "")
                 + (f"; paths from {safe_text(server.root)}" if any(
                     t.subject_kind == "path" for t in tools if t.subject) else ""))
    lines += [f"  note: {safe_text(note)}" for note in getattr(server, "listing_notes", ())]
    return "\n".join(lines)


def mask_results_of(servers, workspace, key_names) -> None:
    """Have each MCP server's results masked as the built-in tools' are (SPEC R26,
    R27): a server that reads the workspace's ``.env``, or prints the key it was
    given, sends the model ``***`` in their place.

    Args:
        servers: the started ``MCPServer`` objects.
        workspace: the chat's workspace folder (str), whose ``.env`` values count.
        key_names: the API key's variables (iterable of str).
    """
    if not servers:
        return
    from ..builtin.builtin_tools import secrets_of
    from ..commandline.workspace import Workspace
    space, names = Workspace(workspace), tuple(key_names)
    for server in servers:
        server.secrets = lambda: secrets_of(space, names)[1]
