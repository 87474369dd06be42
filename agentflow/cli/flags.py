"""``agentflow chat``'s flags, the checks that need neither the session nor the network,
and the exit statuses (0 done, 1 error, 2 bad usage, 3 paused, 130 interrupted)."""

from __future__ import annotations

import os
import shlex

from ..builtin.builtin_tools import BUILTIN_NAMES
from .errors import UsageError
from ..policy import PROJECT_FILE
from ..profiles import PROFILES
from ..builtin.sandbox import MODES as SANDBOX_MODES
from .store_key import add_arguments as add_store_key_arguments

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_PAUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PAUSED", "EXIT_USAGE",
           "UsageError", "add_arguments", "check_flags"]


def add_arguments(parser) -> None:
    """Add ``agentflow chat``'s flags (the module docstring's) to a parser.

    Args:
        parser: an ``argparse.ArgumentParser`` (the ``chat`` subcommand's).
    """
    parser.add_argument("message", nargs="?",
                        help="send this one message and stop (no prompt); text piped to "
                             "standard input is the message, or is added below it")
    parser.add_argument("--base-url", help="the API root, e.g. http://localhost:11434/v1 "
                                           "(default: $OPENAI_BASE_URL, else OpenAI)")
    parser.add_argument("-m", "--model", help="model name (default gpt-4o-mini)")
    parser.add_argument("--api-key-env", metavar="VAR",
                        help="environment variable holding the API key (default OPENAI_API_KEY)")
    parser.add_argument("--profile", choices=list(PROFILES),
                        help="the provider profile: what requests send back of what the "
                             "provider gave (default: guessed from the base URL, else openai)")
    parser.add_argument("--system", metavar="TEXT", help="the system prompt")
    parser.add_argument("-s", "--session", metavar="FILE",
                        help="keep the conversation in FILE (locked, saved after every step); "
                             "it remembers the options above, so a later run needs only this")
    parser.add_argument("--store", metavar="URL",
                        help="keep sessions in a store: sqlite:///sessions.db or "
                             "postgresql://…; --session then names the session's id")
    add_store_key_arguments(parser)
    parser.add_argument("--tools", metavar="NAMES",
                        help=f"comma-separated built-in tools, or 'none' (default: all: "
                             f"{', '.join(BUILTIN_NAMES)})")
    parser.add_argument("--mcp", action="append", default=[], metavar="[NAME=]COMMAND",
                        help="also offer the tools of this MCP server: a command line run "
                             "over stdio, or an http(s) URL (streamable HTTP); repeatable; "
                             "the model calls its tools NAME__TOOL, policy rules name "
                             "them NAME.TOOL(pattern); needs the mcp extra "
                             "(pip install '.[mcp]' in a checkout of agentflow-approvals)")
    parser.add_argument("--mcp-approval", action="append", default=[],
                        metavar="NAME[.TOOL]=ask|run",
                        help="override what an MCP server's annotations say (they are "
                             "the server's own hints): ask before every call of server "
                             "NAME (or of its tool TOOL), or run it without asking; "
                             "repeatable; the server must be named (--mcp NAME=…)")
    parser.add_argument("--max-rounds", type=int, help="rounds per run (default 40)")
    parser.add_argument("--read-timeout", type=float, default=120.0, metavar="SECONDS",
                        help="longest silence of the endpoint mid-reply (default 120)")
    parser.add_argument("--max-retries", type=int, default=2, metavar="N",
                        help="retries of a model request that failed before its reply "
                             "began (refused, reset, timed out, 408, 409, 429, 5xx; "
                             "default 2, 0: none)")
    parser.add_argument("--command-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="run_command is killed after this many seconds (default 30)")
    parser.add_argument("--output-cap", type=int, default=16_000, metavar="BYTES",
                        help="bytes of command output sent to the model (default 16000)")
    decide = parser.add_mutually_exclusive_group()
    decide.add_argument("--approve-all", action="store_true", help="approve every call, no prompt")
    decide.add_argument("--deny-all", action="store_true", help="reject every call, no prompt")
    parser.add_argument("--json", action="store_true",
                        help="write one JSON object per update to stdout (see the README)")
    parser.add_argument("--respond", action="append", default=[], metavar="CALL_ID=yes|no[:REASON]",
                        help="answer a paused session's call (repeatable; needs --session)")
    parser.add_argument("--workspace", metavar="DIR",
                        help="the folder the built-in tools work in (default: the current "
                             "one); reads and listings outside it, and of secret files, ask")
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default=SANDBOX_MODES[0],
                        help="how run_command runs commands, under bubblewrap (bwrap): "
                             "workspace-write (default: writes only in the workspace, its "
                             ".git and .agentflow read-only, secrets hidden, no network), "
                             "read-only, or off; where bwrap cannot start, commands run "
                             "unsandboxed and a note says so")
    parser.add_argument("--sandbox-network", action="store_true",
                        help="let sandboxed commands reach the network")
    parser.add_argument("--sandbox-required", action="store_true",
                        help="refuse to run commands where bwrap cannot start, instead of "
                             "running them unsandboxed")
    parser.add_argument("--policy", metavar="FILE",
                        help="an approval policy (JSON: deny / ask / allow rules) checked "
                             f"first, before the session's grants, {PROJECT_FILE} and "
                             "~/.config/agentflow/policy.json")
    parser.add_argument("--no-color", action="store_true",
                        help="no colour, even on a terminal (so does NO_COLOR=1)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--verbose", action="store_true",
                        help="show the MCP SDK's own log lines (hidden by default: start-up "
                             "noise), prefixed and escaped")


def check_flags(args) -> None:
    """Usage errors that need neither the session nor the network.

    Args:
        args: the ``argparse.Namespace`` of the flags ``add_arguments`` adds.

    Raises:
        UsageError: a flag value that cannot work, or a flag another one needs.
    """
    if args.respond and not args.session:
        raise UsageError("--respond needs --session FILE (the paused session)")
    if args.store and not args.session:
        raise UsageError("--store needs --session ID (the session's id in the store)")
    for flag, value, least in (("--max-rounds", args.max_rounds, 1),
                               ("--max-retries", args.max_retries, 0),
                               ("--output-cap", args.output_cap, 1)):
        if value is not None and value < least:
            raise UsageError(f"{flag} must be {least} or more, got {value}")
    for flag, value in (("--read-timeout", args.read_timeout),
                        ("--command-timeout", args.command_timeout)):
        if not value > 0:
            raise UsageError(f"{flag} must be more than 0 seconds, got {value:g}")
    if args.session and not args.store:
        path = args.session
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise UsageError(f"--session {path} is a folder; give a file in it, e.g. "
                             f"--session {shlex.quote(os.path.join(path, 'chat.json'))}")
        if not os.path.isdir(folder):
            raise UsageError(f"--session {path}: the folder {folder} does not exist; create "
                             f"it (mkdir -p {shlex.quote(folder)}) or give another path")
