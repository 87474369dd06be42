"""``agentflow policy check 'TOOL(SUBJECT)'``: which rule in which layer decides a call,
without running a model (SPEC R18, R19)."""

from __future__ import annotations

import sys

from ..display import safe_text


def policy_check(call: str, policy_file: str | None, mcp_specs=(), mcp_approval=()) -> int:
    """``agentflow policy check 'run_command(rm -rf /)'``: the decision agentflow chat's
    gate would take, and the rule and layer behind it (SPEC R18, R19). With ``--mcp``
    the servers are started only to list their tools (a tool's subject comes from its
    schema), then stopped; no tool is called.

    Args:
        call: ``TOOL(SUBJECT)`` or a bare ``TOOL`` (str), as a policy rule is written.
        policy_file: a policy file (str path) checked before the standard layers, or
            ``None``.
        mcp_specs: the ``--mcp`` values (``[NAME=]COMMAND|URL``) whose tools may be named.
        mcp_approval: the ``--mcp-approval`` values (``servers.approval_overrides``).

    Returns:
        int: the exit status: 0 with the decision printed, 2 for a call or file that
        cannot be read.
    """
    import contextlib
    from .servers import start_mcp_servers
    from ..errors import AgentflowError
    from .errors import UsageError
    from ..policy import Rule, PolicyError
    try:
        parsed = Rule.parse(call)
    except PolicyError as exc:
        print(f"agentflow: {safe_text(str(exc), multiline=True)}", file=sys.stderr)
        return 2
    server = parsed.tool.partition(".")[0]
    if "." in parsed.tool and not mcp_specs:
        print(f"agentflow: policy check: {parsed.tool} is a tool of the MCP server {server!r}: "
              f"give the server as agentflow chat does, --mcp '{server}=COMMAND' (or "
              f"{server}=URL); it is started to list its tools, then stopped, and no tool "
              "is called", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        try:
            servers = start_mcp_servers(mcp_specs, stack, mcp_approval)
        except (UsageError, AgentflowError) as exc:
            print(f"agentflow: {safe_text(str(exc), multiline=True)}", file=sys.stderr)
            return 2
        return _decision(call, parsed, policy_file,
                                [t for s in servers for t in s.tools])


def _decision(call: str, parsed, policy_file: str | None, mcp_tools: list) -> int:
    """The rest of ``_policy_check``, while its MCP servers run."""
    from ..builtin.builtin_tools import builtin_tools
    from .policies import policy_layers
    from .errors import UsageError
    from ..gate import gate_verdict, layers_in_order
    from ..policy import PolicyError, policy_name
    from ..types import Decision
    tools = {policy_name(t): t for t in [*builtin_tools(), *mcp_tools]}
    notes: list[str] = []
    try:
        run, layers = policy_layers(policy_file, {t.name: t for t in tools.values()},
                                    notes=notes)
    except (PolicyError, UsageError) as exc:
        print(f"agentflow: {safe_text(str(exc), multiline=True)}", file=sys.stderr)
        return 2
    tool = tools.get(parsed.tool)
    if tool is None or (parsed.pattern is not None and tool.subject is None):
        why = ("" if tool is None else f"{parsed.tool} has no subject argument for a "
               "pattern (write it without one); ")
        print(f"agentflow: policy check: {why}write a tool and its subject, e.g. "
              f"'run_command(git status)' (tools: {safe_text(', '.join(tools))})",
              file=sys.stderr)
        return 2
    arguments = {} if parsed.pattern is None else {tool.subject: parsed.pattern}
    all_layers = layers_in_order(run, None, layers, 0)
    verdict = gate_verdict(tool, arguments, all_layers)
    word = {Decision.ALLOW: "runs without asking", Decision.ASK: "asks",
            Decision.DENY: "denied"}[verdict.action]
    print(f"{safe_text(call)}: {word}")
    if verdict.rule is not None:
        sources = {layer.name: layer.source for layer in all_layers}
        print(f"  rule:  {safe_text(str(verdict.rule))}")
        print("  layer: " + safe_text("; ".join(f"{name} ({sources[name]})" if sources.get(name)
                                                else name for name in verdict.layer.split("; "))))
    else:
        print(f"  no rule decides: {safe_text(verdict.why or 'the tool needs no approval')}")
    print(f"  layers checked: {', '.join(l.name for l in all_layers) or 'none'} "
          "(session grants apply in a chat)")
    for note in notes:  # e.g. a project file's allow rules left out, untrusted (R26)
        print(f"  note: {safe_text(note)}")
    return 0
