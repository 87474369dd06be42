"""The agentflow command.

    agentflow chat [MESSAGE] [options]             chat with an OpenAI-compatible endpoint
    agentflow demo [--approve | --deny [REASON]]   the approval flow against a replay server
    agentflow inspect-stream FILE                  what a recorded SSE body assembles to
    agentflow replay CASE [--trace | --mermaid]    run a conformance case, show the flow
    agentflow pending --store URL [--json]         list the calls waiting for approval
    agentflow policy check 'TOOL(SUBJECT)'         which rule decides a call (--mcp: of MCP tools)
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    """The ``agentflow`` command line.

    Args:
        argv: the arguments (list of str) after the program name; default
            ``sys.argv[1:]``.

    Returns:
        int: the exit status.
    """
    parser = argparse.ArgumentParser(prog="agentflow", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    from .chat import add_arguments
    chat = commands.add_parser(
        "chat", help="chat with any OpenAI-compatible endpoint; approve tool calls at a prompt",
        description=_chat_doc(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(chat)
    demo = commands.add_parser(
        "demo", help="the approval flow over real HTTP against a built-in replay server")
    decision = demo.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve without asking")
    decision.add_argument("--deny", nargs="?", const="", metavar="REASON",
                          help="reject without asking, with an optional reason")
    inspect = commands.add_parser(
        "inspect-stream", help="print what a recorded SSE body assembles to, and the "
                               "provider quirks it needed")
    inspect.add_argument("file", help="a text/event-stream body; - reads standard input")
    inspect.add_argument("--profile", help="the provider profile to show the next request "
                                           "with (default: guessed from --base-url)")
    inspect.add_argument("--base-url", help="the API root the stream came from")
    replay = commands.add_parser(
        "replay", help="run a conformance case against agentflow and print its updates")
    replay.add_argument("case", help="a case id from conformance/cases (in a checkout of the "
                                     "repository), or the path of a case .json")
    how = replay.add_mutually_exclusive_group()
    how.add_argument("--trace", action="store_true", help="also print each LoopState transition")
    how.add_argument("--mermaid", action="store_true",
                     help="print a Mermaid sequence diagram of the run instead")
    pending = commands.add_parser(
        "pending", help="list the calls waiting for approval in a session store, oldest first")
    pending.add_argument("--store", required=True, metavar="URL",
                         help="sqlite:///sessions.db, postgresql://… or file:///folder")
    pending.add_argument("--json", action="store_true", help="one JSON object a line")
    policy = commands.add_parser(
        "policy", help="test approval policy rules without running a model")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True)
    check = policy_commands.add_parser(
        "check", help="print which rule in which layer decides a call, e.g. "
                      "'run_command(rm -rf /)'")
    check.add_argument("call", help="TOOL(SUBJECT): a built-in tool, or SERVER.TOOL of an "
                                    "MCP server given with --mcp, and the value of its "
                                    "subject argument (the command, the path)")
    check.add_argument("--policy", metavar="FILE", help="also the policy FILE, checked first "
                                                       "(as agentflow chat --policy does)")
    check.add_argument("--mcp", action="append", default=[], metavar="[NAME=]COMMAND|URL",
                       help="also the tools of this MCP server, as agentflow chat --mcp: it "
                            "is started to list its tools and stopped; no tool is called")
    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `agentflow ... | head`: the reader left; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


CASES = os.path.join("conformance", "cases")


def _missing_case(ref: str) -> str | None:
    """Why ``agentflow replay REF`` cannot find its case, or ``None`` when it can. The
    cases are part of the source repository, not of the installed package."""
    if os.path.isfile(ref) or os.path.isfile(os.path.join(CASES, f"{ref}.json")):
        return None
    if ref.endswith(".json") or os.sep in ref:
        return f"no case file {ref}: give the path of a case .json, or a case id"
    if not os.path.isdir(CASES):
        return (f"no case {ref!r}: the cases are in the conformance/cases folder of the "
                f"agentflow source repository, and {os.getcwd()} has none; they are not "
                "installed with the package. Run this in a checkout of the repository, or "
                "give the path of a case .json")
    return (f"no case {ref!r} in {os.path.abspath(CASES)}; the ids are the file names "
            f"there without .json (ls {CASES}), or give the path of a case .json")


def _chat_doc() -> str:
    from . import chat
    return chat.__doc__


def _dispatch(args) -> int:
    if args.command == "chat":
        from .chat import main as chat_main
        return chat_main(args)
    if args.command == "replay":
        problem = _missing_case(args.case)
        if problem:
            print(f"agentflow: {problem}", file=sys.stderr)
            return 2
        replay = _conformance_replay()
        if replay is None:
            return 2
        try:
            return replay(args.case, trace=args.trace, mermaid=args.mermaid)
        except FileNotFoundError as exc:
            print(f"agentflow: {exc}", file=sys.stderr)
            return 2
    if args.command == "inspect-stream":
        from .inspect_stream import inspect_stream
        if args.file == "-":
            data = sys.stdin.buffer.read()
        else:
            try:
                with open(args.file, "rb") as handle:
                    data = handle.read()
            except OSError as exc:
                print(f"agentflow: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
                return 2
        try:
            return inspect_stream(data, profile=args.profile, base_url=args.base_url)
        except ValueError as exc:
            print(f"agentflow: {exc}", file=sys.stderr)
            return 2
    if args.command == "pending":
        from .errors import AgentflowError
        from .stores import pending_command
        try:
            return pending_command(args.store, args.json)
        except (AgentflowError, ValueError, OSError, ImportError) as exc:
            print(f"agentflow: {exc}", file=sys.stderr)
            return 1
    if args.command == "policy":
        return _policy_check(args.call, args.policy, args.mcp)
    if args.command == "demo":
        from . import demo as demo_module
        if args.approve:
            return demo_module.main(True)
        if args.deny is not None:
            return demo_module.main(False, args.deny or None)
        return demo_module.main()
    return 2


def _policy_check(call: str, policy_file: str | None, mcp_specs=()) -> int:
    """``agentflow policy check 'run_command(rm -rf /)'``: the decision agentflow chat's
    gate would take, and the rule and layer behind it (SPEC R18, R19). With ``--mcp``
    the servers are started only to list their tools (a tool's subject comes from its
    schema), then stopped; no tool is called."""
    import contextlib
    from .chat import UsageError, _start_mcp_servers
    from .errors import AgentflowError
    from .policy import Rule, PolicyError
    try:
        parsed = Rule.parse(call)
    except PolicyError as exc:
        print(f"agentflow: {exc}", file=sys.stderr)
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
            servers = _start_mcp_servers(mcp_specs, stack)
        except (UsageError, AgentflowError) as exc:
            print(f"agentflow: {exc}", file=sys.stderr)
            return 2
        return _policy_decision(call, parsed, policy_file,
                                [t for s in servers for t in s.tools])


def _policy_decision(call: str, parsed, policy_file: str | None, mcp_tools: list) -> int:
    """The rest of ``_policy_check``, while its MCP servers run."""
    from .builtin_tools import builtin_tools
    from .chat import UsageError, policy_layers
    from .policy import PolicyError, gate_verdict, policy_name
    tools = {policy_name(t): t for t in [*builtin_tools(), *mcp_tools]}
    try:
        run, layers = policy_layers(policy_file, {t.name: t for t in tools.values()})
    except (PolicyError, UsageError) as exc:
        print(f"agentflow: {exc}", file=sys.stderr)
        return 2
    tool = tools.get(parsed.tool)
    if tool is None or (parsed.pattern is not None and tool.subject is None):
        why = ("" if tool is None else f"{parsed.tool} has no subject argument for a "
               "pattern (write it without one); ")
        print(f"agentflow: policy check: {why}write a tool and its subject, e.g. "
              f"'run_command(git status)' (tools: {', '.join(tools)})", file=sys.stderr)
        return 2
    arguments = {} if parsed.pattern is None else {tool.subject: parsed.pattern}
    all_layers = ([run] if run else []) + layers
    verdict = gate_verdict(tool, arguments, all_layers)
    word = {"run": "runs without asking", "ask": "asks", "deny": "denied"}[verdict.action]
    print(f"{call}: {word}")
    if verdict.rule is not None:
        sources = {layer.name: layer.source for layer in all_layers}
        print(f"  rule:  {verdict.rule}")
        print("  layer: " + "; ".join(f"{name} ({sources[name]})" if sources.get(name)
                                      else name for name in verdict.layer.split("; ")))
    else:
        print(f"  no rule decides: {verdict.why or 'the tool needs no approval'}")
    print(f"  layers checked: {', '.join(l.name for l in all_layers) or 'none'} "
          "(session grants apply in a chat)")
    return 0


def _conformance_replay():
    """``conformance.trace.replay``, from the checkout in the current folder or else the
    one this agentflow runs from (``pip install -e .``), or ``None`` after saying why
    not: the conformance suite is part of the repository, not of the package."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for checkout in (os.getcwd(), here):
        if os.path.isfile(os.path.join(checkout, "conformance", "trace.py")):
            break
    else:
        print("agentflow: replay runs cases with the conformance suite (conformance/) of "
              "a checkout of the agentflow repository, which is not installed with the "
              "package: run it in a checkout", file=sys.stderr)
        return None
    if checkout not in sys.path:
        sys.path.insert(0, checkout)
    from conformance.trace import replay
    return replay


if __name__ == "__main__":
    sys.exit(main())
