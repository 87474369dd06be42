"""The agentflow command.

    agentflow chat [MESSAGE] [options]             chat with an OpenAI-compatible endpoint
    agentflow demo [--approve | --deny [REASON]]   the approval flow against a replay server
    agentflow inspect-stream FILE                  what a recorded SSE body assembles to
    agentflow pending --store URL [--json]         list the calls waiting for approval
    agentflow inbox --store URL [--bind H:P]       answer them from a browser
    agentflow worker --store URL [chat options]    resume the sessions answered there
    agentflow show --session FILE [--store URL]    a saved conversation, its grants, what waits
    agentflow policy check 'TOOL(SUBJECT)'         which rule decides a call (--mcp: of MCP tools)
    agentflow policy trust [FILE]                  review and trust a project policy file
    agentflow policy untrust [FILE]                take that trust back
"""

from __future__ import annotations

import argparse
import os
import sys

from ..display import safe_text

# The commands whose runs and answers are traced (OTEL_* variables, cli/telemetry.py).
TRACED = ("chat", "worker", "inbox", "pending", "demo")
# The commands that only print what they read: a reader leaving early is no error.
LISTINGS = ("pending", "show", "inspect-stream", "policy check")


def main(argv=None) -> int:
    """The ``agentflow`` command line.

    Args:
        argv: the arguments (list of str) after the program name; default
            ``sys.argv[1:]``.

    Returns:
        int: the exit status.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `agentflow`: what it can do, not a usage error
        parser.print_help()
        return 0
    if getattr(args, "mcp", None):
        from .servers import sdk_logs
        sdk_logs(args.verbose)
    from .telemetry import configure
    shutdown = configure() if args.command in TRACED else (lambda: None)
    try:
        status = _dispatch(args)
        sys.stdout.flush()  # a reader that left shows here, not at exit (status 120)
        return status
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `agentflow ... | head`: the reader left; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        # A listing read as far as the reader wanted is no failure (issue 34: `pending |
        # head` gave 0 or 1 by the pipe's timing); a run cut short still is.
        command = " ".join(filter(None, (args.command, getattr(args, "policy_command", None))))
        return 0 if command in LISTINGS else 1
    finally:
        shutdown()  # the spans still queued are sent (a worker's last resume)


def build_parser() -> argparse.ArgumentParser:
    """The ``agentflow`` command's arguments: one sub-command each (the module docstring).

    Returns:
        argparse.ArgumentParser: parses ``argv`` into a namespace whose ``command`` is
        the sub-command's name, or ``None`` for a bare ``agentflow``.
    """
    parser = argparse.ArgumentParser(prog="agentflow", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    from .. import __version__
    parser.add_argument("--version", action="version", version=f"agentflow {__version__}")
    commands = parser.add_subparsers(dest="command")
    _add_chat(commands)
    _add_demo(commands)
    _add_inspect_stream(commands)
    _add_store_commands(commands)
    _add_policy(commands)
    return parser


def _add_chat(commands) -> None:
    from .chat import add_arguments
    chat = commands.add_parser(
        "chat", help="chat with any OpenAI-compatible endpoint; approve tool calls at a prompt",
        description=_chat_doc(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(chat)


def _add_demo(commands) -> None:
    demo = commands.add_parser(
        "demo", help="the approval flow over real HTTP against a built-in replay server")
    decision = demo.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve without asking")
    decision.add_argument("--deny", nargs="?", const="", metavar="REASON",
                          help="reject without asking, with an optional reason")


def _add_inspect_stream(commands) -> None:
    inspect = commands.add_parser(
        "inspect-stream", help="print what a recorded SSE body assembles to, and the "
                               "provider quirks it needed")
    inspect.add_argument("file", help="a text/event-stream body; - reads standard input")
    inspect.add_argument("--profile", help="the provider profile to show the next request "
                                           "with (default: guessed from --base-url)")
    inspect.add_argument("--base-url", help="the API root the stream came from")


def _add_store_commands(commands) -> None:
    """``pending``, ``show``, ``inbox`` and ``worker``: the commands that read a store."""
    from .store_key import add_arguments as add_store_key_arguments
    pending = commands.add_parser(
        "pending", help="list the calls waiting for approval in a session store, oldest first")
    pending.add_argument("--store", required=True, metavar="URL",
                         help="sqlite:///sessions.db, postgresql://… or file:///folder")
    pending.add_argument("--json", action="store_true", help="one JSON object a line")
    add_store_key_arguments(pending)
    show = commands.add_parser(
        "show", help="print a saved conversation, its grants and the calls that wait "
                     "(read only)")
    show.add_argument("-s", "--session", required=True, metavar="FILE|ID",
                      help="the session file, or with --store the session's id")
    show.add_argument("--store", metavar="URL", help="sqlite:///sessions.db, postgresql://… "
                                                    "or file:///folder")
    add_store_key_arguments(show)
    inbox = commands.add_parser(
        "inbox", help="serve a web page that lists the calls waiting in a store and "
                      "answers them (approve, reject, edit, always allow)")
    inbox.add_argument("--store", required=True, metavar="URL",
                       help="sqlite:///sessions.db, postgresql://… or file:///folder")
    inbox.add_argument("--bind", default="127.0.0.1:8765", metavar="HOST:PORT",
                       help="where to listen (default 127.0.0.1:8765, loopback only)")
    inbox.add_argument("--notify", metavar="URL",
                       help="post a JSON webhook (a 'text' field, the ids, a link) when a "
                            "call starts waiting")
    inbox.add_argument("--approver", action="append", metavar="NAME",
                       help="print a link for NAME, whose answers record that name "
                            "(repeat for each person; default: your user name)")
    add_store_key_arguments(inbox)
    from .worker import add_arguments as add_worker_arguments
    add_worker_arguments(commands.add_parser(
        "worker", help="resume the sessions of a store whose waiting calls were answered "
                       "(agentflow inbox), with the chat's built-in tools and --mcp servers"))


def _add_policy(commands) -> None:
    policy = commands.add_parser(
        "policy", help="test approval policy rules, and trust a project's, without running a "
                  "model")
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
    check.add_argument("--mcp-approval", action="append", default=[],
                       metavar="NAME[.TOOL]=ask|run",
                       help="as agentflow chat --mcp-approval: override a server's "
                            "annotations")
    check.add_argument("--verbose", action="store_true",
                       help="as agentflow chat --verbose: show the MCP SDK's log lines")
    from ..policy import PROJECT_FILE
    file_help = (f"the project policy file (default: {PROJECT_FILE} here, the one agentflow "
                 "chat reads when it works in this folder)")
    trusting = policy_commands.add_parser(
        "trust", help="show what a project policy file lets run without asking (its allow "
                      "rules and sandbox settings) and trust exactly that content (SPEC R26)")
    trusting.add_argument("file", nargs="?", metavar="FILE", help=file_help)
    trusting.add_argument("--yes", action="store_true",
                          help="trust without asking (needed without a terminal)")
    untrusting = policy_commands.add_parser(
        "untrust", help="take back the trust in a project policy file: its allow rules and "
                        "sandbox settings stop applying")
    untrusting.add_argument("file", nargs="?", metavar="FILE", help=file_help)


def _chat_doc() -> str:
    from . import chat
    return chat.__doc__


def _dispatch(args) -> int:
    store = getattr(args, "store", None)
    if store is not None and args.command != "chat":  # chat says so in its own words
        from ..stores import check_store_url
        try:
            check_store_url(store)
        except ValueError as exc:  # a --store that cannot be a store: bad usage (status 2)
            _complain(f"--store: {exc}")
            return 2
    if args.command == "chat":
        from .chat import main as chat_main
        return chat_main(args)
    if args.command == "inspect-stream":
        from .inspect_stream import inspect_stream
        if args.file == "-":
            data = sys.stdin.buffer.read()
        else:
            try:
                with open(args.file, "rb") as handle:
                    data = handle.read()
            except OSError as exc:
                print(f"agentflow: cannot read {safe_text(args.file)}: {exc.strerror}",
                      file=sys.stderr)
                return 2
        try:
            return inspect_stream(data, profile=args.profile, base_url=args.base_url)
        except ValueError as exc:
            _complain(str(exc))
            return 2
    if args.command == "pending":
        from ..errors import AgentflowError
        from .pending import pending_command
        try:
            from .store_key import key_flags, store_secret
            return pending_command(args.store, args.json, secret=store_secret(args, "pending"),
                                   key_flags=key_flags(args))
        except BrokenPipeError:
            raise
        except ValueError as exc:  # the --store value cannot be a store: bad usage
            _complain(str(exc))
            return 2
        except (AgentflowError, OSError, ImportError) as exc:
            _complain(str(exc))
            return 1
    if args.command == "show":
        from ..errors import AgentflowError
        from .show import show_command
        try:
            from .store_key import store_secret
            return show_command(args.session, args.store, secret=args.store and store_secret(
                args, "show"))
        except BrokenPipeError:
            raise
        except (AgentflowError, KeyError, ValueError, OSError, ImportError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            _complain(str(message))
            return 2 if isinstance(exc, (KeyError, ValueError, FileNotFoundError)) else 1
    if args.command in ("inbox", "worker"):
        from ..errors import AgentflowError
        try:
            if args.command == "inbox":
                from .inbox import inbox_command
                from .store_key import store_secret
                return inbox_command(args.store, args.bind, args.notify,
                                     secret=store_secret(args, "inbox"),
                                     approvers=args.approver)
            from .worker import worker_command
            return worker_command(args)
        except (AgentflowError, ValueError, OSError, ImportError) as exc:
            _complain(str(exc))
            return 1
    if args.command == "policy" and args.policy_command in ("trust", "untrust"):
        from .policy_trust import trust_command, untrust_command
        try:
            return (trust_command(args.file, args.yes) if args.policy_command == "trust"
                    else untrust_command(args.file))
        except OSError as exc:  # the configuration folder cannot be written
            _complain(f"policy {args.policy_command}: {exc}")
            return 1
    if args.command == "policy":
        from .policy_check import policy_check
        return policy_check(args.call, args.policy, args.mcp, args.mcp_approval)
    if args.command == "demo":
        from . import demo as demo_module
        if args.approve:
            return demo_module.main(True)
        if args.deny is not None:
            return demo_module.main(False, args.deny or None)
        return demo_module.main()
    return 2


def _complain(text: str) -> None:
    """Say on stderr what went wrong, made safe to show (SPEC R25)."""
    print(f"agentflow: {safe_text(text, multiline=True)}", file=sys.stderr)
