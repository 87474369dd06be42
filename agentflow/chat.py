"""agentflow chat: talk to any OpenAI-compatible endpoint from the terminal, and
approve each risky tool call at a prompt.

    agentflow chat --base-url http://localhost:11434/v1 --model llama3.1   # Ollama
    agentflow chat --model gpt-4o-mini                                      # OpenAI

Interactive on a terminal; in scripts, one message as an argument with
--approve-all / --deny-all, or --json (one JSON object per update) and a later
--respond CALL_ID=yes|no[:REASON]. With --session FILE the session is locked, loaded
before and saved (atomically) after every step.

Exit status: 0 done, 1 error, 2 bad usage, 3 paused waiting for approval, 130
interrupted.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shlex
import sys

from .agent import ChatClientAgent
from .builtin_tools import BUILTIN_NAMES, builtin_tools
from .cases import update_to_json
from .errors import AgentflowError
from .openai_client import OpenAIChatClient
from .profiles import PROFILES
from .session import AgentSession
from .types import (AgentRunOptions, Finish, FinishReason, ReasoningDelta, TextDelta,
                    ToolApprovalRequest, ToolApprovalResponse, ToolResult)

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_PAUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
ALWAYS = "always_approve"  # session.state key: tools approved for the rest of the session
SETTINGS = "chat"          # session.state key: the endpoint and options the chat began with
_REMEMBERED = {"base_url": None, "model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY",
               "system": None, "tools": ",".join(BUILTIN_NAMES), "max_rounds": 40,
               "profile": None}


class UsageError(ValueError):
    """The command line asks for something impossible (exit status 2)."""


class Quit(Exception):
    """The user chose q at the approval prompt."""


def add_arguments(parser) -> None:
    parser.add_argument("message", nargs="?", help="send this one message and stop (no prompt)")
    parser.add_argument("--base-url", help="the API root, e.g. http://localhost:11434/v1 "
                                           "(default: $OPENAI_BASE_URL, else OpenAI)")
    parser.add_argument("--model", help="model name (default gpt-4o-mini)")
    parser.add_argument("--api-key-env", metavar="VAR",
                        help="environment variable holding the API key (default OPENAI_API_KEY)")
    parser.add_argument("--profile", choices=list(PROFILES),
                        help="the provider profile: what requests send back of what the "
                             "provider gave (default: guessed from the base URL, else openai)")
    parser.add_argument("--system", metavar="TEXT", help="the system prompt")
    parser.add_argument("--session", metavar="FILE",
                        help="keep the conversation in FILE (locked, saved after every step); "
                             "it remembers the options above, so a later run needs only this")
    parser.add_argument("--tools", metavar="NAMES",
                        help=f"comma-separated built-in tools, or 'none' (default: all: "
                             f"{', '.join(BUILTIN_NAMES)})")
    parser.add_argument("--max-rounds", type=int, help="rounds per run (default 40)")
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
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


class Chat:
    """One ``agentflow chat`` process: the agent, the session, the terminal."""

    def __init__(self, args, session: AgentSession, out=None, interactive: bool = False):
        self.args = args
        self.session = session
        self.out = out or sys.stdout
        self.interactive = interactive
        # Flags win; then what the session was started with; then the defaults.
        remembered = session.state.get(SETTINGS) or {}
        settings = {name: getattr(args, name) if getattr(args, name) is not None
                    else remembered.get(name, default) for name, default in _REMEMBERED.items()}
        session.state[SETTINGS] = settings
        names = [] if settings["tools"].strip() in ("", "none") else \
            [n.strip() for n in settings["tools"].split(",") if n.strip()]
        try:
            tools = builtin_tools(names, command_timeout=args.command_timeout,
                                  output_cap=args.output_cap)
        except ValueError as exc:
            raise UsageError(f"--tools: {exc}") from None
        self.tools = {t.name: t for t in tools}
        client = OpenAIChatClient(settings["model"], base_url=settings["base_url"],
                                  api_key=os.environ.get(settings["api_key_env"]) or "",
                                  profile=settings["profile"])
        client.key_source = f"the {settings['api_key_env']} environment variable (--api-key-env)"
        self.agent = ChatClientAgent(client, instructions=settings["system"], tools=tools)
        self.options = AgentRunOptions(max_rounds=settings["max_rounds"])

    # -- output ----------------------------------------------------------------------------

    def say(self, text: str = "", end: str = "\n") -> None:
        if not self.args.json:
            self.out.write(text + end)
            self.out.flush()

    def emit_json(self, data: dict) -> None:
        self.out.write(json.dumps(data) + "\n")
        self.out.flush()

    def save(self) -> None:
        if self.args.session:
            self.session.save(self.args.session)

    # -- one run ---------------------------------------------------------------------------

    def run(self, messages, responses=()) -> tuple[Finish | None, list[ToolApprovalRequest]]:
        """Run once, showing updates as they arrive and saving after every step.
        Returns ``(finish, approval requests)``; ``finish`` is ``None`` when Ctrl-C
        stopped the stream (the session keeps every completed step, SPEC R10)."""
        options = self.options.with_tool_approval_responses(responses)
        updates = self.agent.run(messages, self.session, options)
        requests, finish, in_text = [], None, False
        try:
            for update in updates:
                if self.args.json:
                    self.emit_json(update_to_json(update))
                if isinstance(update, TextDelta):
                    if not in_text:
                        self.say("assistant> ", end="")
                        in_text = True
                    self.say(update.text, end="")
                    continue
                if in_text and not isinstance(update, ReasoningDelta):
                    self.say()
                    in_text = False
                if isinstance(update, ReasoningDelta):
                    continue
                if isinstance(update, ToolResult):
                    self.save()
                    shown = " ⏎ ".join(update.result.strip().splitlines())
                    self.say(f"  [{update.name}] {shown[:200]}{'…' if len(shown) > 200 else ''}")
                elif isinstance(update, ToolApprovalRequest):
                    requests.append(update)
                elif isinstance(update, Finish):
                    finish = update
        except KeyboardInterrupt:
            updates.close()
            self.save()
            self.say("\n(interrupted: the stream was stopped; the session keeps every "
                     "completed step)")
            return None, []
        self.save()
        if finish and finish.finish_reason not in (FinishReason.STOP,
                                                   FinishReason.AWAITING_APPROVAL):
            self.say(f"(finish: {finish.finish_reason.value})")
        return finish, requests

    def converse(self, messages, responses=()) -> int:
        """Run, answer approval requests, resume, until the model is done or the run
        pauses for good. Returns an exit status."""
        while True:
            finish, requests = self.run(messages, responses)
            if finish is None:
                return EXIT_INTERRUPTED
            if finish.finish_reason is not FinishReason.AWAITING_APPROVAL:
                return EXIT_OK
            responses = self.decide(requests)
            if responses is None:
                return self.paused()
            messages = []

    # -- approvals -------------------------------------------------------------------------

    def decide(self, requests) -> list[ToolApprovalResponse] | None:
        """The responses to ``requests``, or ``None`` to leave them pending."""
        approver = _user()
        if self.args.approve_all or self.args.deny_all:
            return [r.approve(approver) if self.args.approve_all
                    else r.reject("denied by --deny-all", approver) for r in requests]
        if not self.interactive or self.args.json:
            return None
        always = self.session.state.setdefault(ALWAYS, [])
        responses = []
        for request in requests:
            if request.name in always:
                self.say(f"  (approved: you said 'always' for {request.name})")
                responses.append(request.approve(approver))
                continue
            self.show(request)
            try:
                approved, reason = self.ask(request.name)
            except Quit:
                self.save()
                return None
            if approved == "always":
                always.append(request.name)
                approved = True
            responses.append(request.approve(approver) if approved
                             else request.reject(reason, approver))
        self.save()
        return responses

    def show(self, request: ToolApprovalRequest) -> None:
        self.say(f"\n── approval needed ── {request.call_id}")
        self.say(f"tool:        {request.name}")
        self.say(f"description: {request.description.splitlines()[0] if request.description else ''}")
        arguments = (json.dumps(request.arguments, indent=2, ensure_ascii=False)
                     if request.arguments is not None else "(not valid JSON)")
        self.say("arguments:\n" + "\n".join("  " + line for line in arguments.splitlines()))
        tool = self.tools.get(request.name)
        preview = getattr(tool, "preview", None)
        if preview is not None and isinstance(request.arguments, dict):
            shown = preview(request.arguments)
            if shown:
                self.say(shown.rstrip("\n"))

    def ask(self, tool_name: str):
        while True:
            answer = input(f"approve? [y]es, [n]o, [a]lways {tool_name}, [q]uit: ").strip().lower()
            if answer in ("y", "yes"):
                return True, None
            if answer in ("n", "no"):
                return False, input("reason (optional): ").strip() or None
            if answer in ("a", "always"):
                return "always", None
            if answer in ("q", "quit"):
                raise Quit()

    def paused(self) -> int:
        pending = [r.call_id for r in self.session.approvals.pending]
        if self.args.json:
            self.emit_json({"type": "paused", "pending": pending})
            return EXIT_PAUSED
        waiting = f"paused: {len(pending)} call(s) wait for approval ({', '.join(pending)})."
        if self.args.session:
            self.say(f"{waiting} Resume with: agentflow chat --session "
                     f"{shlex.quote(self.args.session)} --respond "
                     f"{pending[0] if pending else 'CALL_ID'}=yes")
        else:
            self.say(f"{waiting} Without --session FILE this pause cannot be resumed later.")
        return EXIT_PAUSED

    def pending_requests(self) -> list[ToolApprovalRequest]:
        """The approval requests of a session that was left paused."""
        return self.session.approval_requests(self.tools.values())

    def responses_from_flags(self) -> list[ToolApprovalResponse]:
        digests = {r.call_id: r.digest for r in self.session.approvals.pending}
        responses = []
        for item in self.args.respond:
            call_id, sep, answer = item.partition("=")
            verdict, _, reason = answer.partition(":")
            if not sep or verdict.strip().lower() not in ("yes", "y", "no", "n"):
                raise UsageError(f"--respond {item!r}: write CALL_ID=yes or CALL_ID=no[:REASON]")
            approved = verdict.strip().lower() in ("yes", "y")
            responses.append(ToolApprovalResponse(call_id.strip(), approved,
                                                  None if approved else (reason or None),
                                                  digests.get(call_id.strip()), _user()))
        return responses

    # -- the whole command -----------------------------------------------------------------

    def main(self) -> int:
        if self.args.respond:
            return self.converse([], self.responses_from_flags())
        if self.session.approvals.pending and (self.interactive or self.args.approve_all
                                               or self.args.deny_all):
            self.say("This session is paused; answer its pending calls first.")
            responses = self.decide(self.pending_requests())
            if responses is None:
                return self.paused()
            status = self.converse([], responses)
            if status != EXIT_OK or not (self.interactive and self.args.message is None):
                return status
        if self.args.message is not None:
            return self.converse([self.args.message])
        if not self.interactive:
            raise UsageError("no message given and standard input is not a terminal: "
                             "pass the message as an argument")
        return self.repl()

    def repl(self) -> int:
        self.say("agentflow chat — empty line or Ctrl-D to leave; Ctrl-C stops a reply, "
                 "a second Ctrl-C leaves.")
        while True:
            try:
                line = input("you> ")
            except EOFError:
                self.say()
                return EXIT_OK
            except KeyboardInterrupt:
                self.say()
                return EXIT_INTERRUPTED
            if not line.strip():
                return EXIT_OK
            status = self.converse([line])
            if status == EXIT_PAUSED:
                return status


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def main(args) -> int:
    """Run ``agentflow chat`` with parsed ``args``; returns the exit status."""
    if args.respond and not args.session:
        print("agentflow: --respond needs --session FILE (the paused session)", file=sys.stderr)
        return EXIT_USAGE
    interactive = sys.stdin.isatty() and not args.json
    try:
        with contextlib.ExitStack() as stack:
            if args.session:
                session = stack.enter_context(AgentSession.open(args.session))
            else:
                session = AgentSession()
            try:
                return Chat(args, session, interactive=interactive).main()
            except KeyboardInterrupt:
                return EXIT_INTERRUPTED
    except UsageError as exc:
        print(f"agentflow: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (AgentflowError, ValueError, OSError) as exc:
        if args.debug:
            raise
        if args.json:
            print(json.dumps({"type": "error", "kind": type(exc).__name__, "message": str(exc)}),
                  flush=True)
        print(f"agentflow: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
