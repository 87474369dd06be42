"""The chat's approval policies (SPEC R19): the layers it loads (``--policy``, the
project and user files), and the ``allow`` rules [a] writes to the project file."""

from __future__ import annotations

import os

from ..policy import PROJECT_FILE
from .errors import UsageError
from .trust import digest_of, is_trusted_digest, trust, trusted_project, without_allows


def policy_layers(policy_file, tools, workspace=".", notes=None, confirm=None) -> tuple:
    """The approval policies of ``agentflow chat`` (SPEC R19).

    Each is checked against every built-in tool and the MCP tools in ``tools``. A rule
    on a built-in switched off in this run, or on an MCP server not connected in it, is
    kept and simply cannot apply.

    Args:
        policy_file: the ``--policy`` file's path (str), or ``None``.
        tools: the chat's tools, a mapping of name to ``Tool``.
        workspace: the folder whose ``.agentflow/policy.json`` is the project file.
        notes: a list that, when given, gets a line naming MCP servers whose rules
            cannot apply because they are not connected, and one when the project
            file's allow rules are left out (not trusted, SPEC R26).
        confirm: ``(question) -> bool`` asking the person on a terminal whether to
            trust an untrusted project file (``trust.trusted_project``); ``None``
            without a terminal.

    Returns:
        tuple: ``(run_policy, [project, user])``: the ``--policy`` file's
        ``ApprovalPolicy`` (``None`` without one) and the standard files' layers.

    Raises:
        UsageError: a file cannot be read, or has a bad rule (naming the file and
            the rule).
    """
    from ..builtin.builtin_tools import builtin_tools
    from ..errors import PolicyError
    from ..policy import ApprovalPolicy, policy_name, standard_layers
    catalogue = [*builtin_tools(workspace=workspace), *tools.values()]
    try:
        run = ApprovalPolicy.load(policy_file, "--policy") if policy_file else None
        layers = [trusted_project(layer, confirm, notes) if layer.name == "project"
                  else layer for layer in standard_layers(workspace)]
        for layer in ([run] if run else []) + layers:
            layer.check(catalogue, keep_other_servers=True)
    except PolicyError as exc:
        raise UsageError(f"policy: {exc}") from None
    except OSError as exc:
        if exc.filename != policy_file:
            raise UsageError(f"policy: cannot read {exc.filename} ({exc.strerror})") from None
        raise UsageError(f"--policy {policy_file}: cannot read it ({exc.strerror}); give "
                         "the path of a policy file (JSON with deny, ask and allow lists, "
                         "see the README)") from None
    names = {policy_name(t) for t in tools.values()}
    connected = {n.partition(".")[0] for n in names if "." in n}
    absent = sorted({rule.tool.partition(".")[0] for layer in ([run] if run else []) + layers
                     for effect in ("deny", "ask", "allow") for rule in layer.rules(effect)
                     if "." in rule.tool and rule.tool.partition(".")[0] not in connected})
    if notes is not None and absent and connected:
        notes.append(f"policy: rules about MCP server(s) {', '.join(absent)} cannot apply: "
                     "not connected in this chat (--mcp NAME=…)")
    return (run and run.restricted(names)), [layer.restricted(names) for layer in layers]


def write_project_rules(workspace: str, rules, client, tools) -> str:
    """Add ``allow`` rules to the workspace's project policy file, create it if
    needed, and use the new file in this chat at once (SPEC R19).

    Args:
        workspace: the folder whose ``.agentflow/policy.json`` is the project file (str).
        rules: the rule texts (list of str, e.g. ``"run_command(ls -la)"``).
        client: the chat's ``FunctionInvokingChatClient`` (``add_policy`` takes the file).
        tools: the chat's tools (the ``Tool`` objects), which the layer is restricted to.

    Returns:
        str: the path of the file written.

    Raises:
        PolicyError: the existing file has a bad rule.
        OSError: the file could not be read or written.
    """
    from ..policy import ApprovalPolicy, policy_name
    path = os.path.join(workspace, PROJECT_FILE)
    found = digest_of(path) if os.path.lexists(path) else None
    # the person's own rules are theirs; a file they had not trusted stays untrusted,
    # so its other allow rules still do not apply (SPEC R26). The bytes judged are the
    # bytes extended, and what is trusted is what was written (no swap in between).
    trusted = found is None or is_trusted_digest(path, found[0])
    project = (ApprovalPolicy.loads(found[1], "project", path) if found is not None
               else ApprovalPolicy(name="project", source=path))
    for rule in rules:
        project.add("allow", rule)
    written = project.save(path)
    project.source = path
    if trusted:
        trust(path, written)
        applied = project
    else:
        applied = without_allows(project)
        applied.allow = list(rules)
    client.add_policy(applied.restricted(policy_name(t) for t in tools))
    return path
