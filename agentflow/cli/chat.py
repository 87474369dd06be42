"""agentflow chat: talk to any OpenAI-compatible endpoint from the terminal, and
approve each risky tool call at a prompt.

    agentflow chat --base-url http://localhost:11434/v1 --model llama3.1   # Ollama
    agentflow chat --model gpt-4o-mini                                      # OpenAI

Interactive on a terminal; in scripts, one message as an argument with
--approve-all / --deny-all, or --json (one JSON object per update) and a later
--respond CALL_ID=yes|no[:REASON]. With --session FILE the session is locked, loaded
before and saved (atomically) after every step; with --store URL --session ID it is
kept in a session store (sqlite:///sessions.db, postgresql://…) instead.

Approval policies (SPEC R19) decide before anyone is asked: --policy FILE, then the
session's grants, then .agentflow/policy.json and ~/.config/agentflow/policy.json.
At the prompt, [a] allows the exact call from now on (in the session or the project
file) and [e] edits the arguments before they run.

Exit status: 0 done, 1 error, 2 bad usage (a flag, a missing API key, a --session
file that is not a session, a policy file with a bad rule), 3 paused waiting for
approval, 130 interrupted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
import time

from ..builtin_tools import BUILTIN_NAMES
from ..errors import AgentflowError, UsageError
from ..policy import PROJECT_FILE
from ..profiles import PROFILES
from ..session import SCHEMA_VERSION, AgentSession, SessionError, SessionLockedError
from ..types import (AgentRunOptions, ChatMessage, Finish, FinishReason, ReasoningDelta,
                    TextDelta, ToolApprovalRequest, ToolApprovalResponse, ToolResult,
                    update_to_json)

# The provider client is imported when a chat starts, not with this module:
# `agentflow --help` should cost little more than `import agentflow` (make bench).
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_PAUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
ALWAYS = "always_approve"  # old session.state key (tools always approved): now grants
SETTINGS = "chat"          # session.state key: the endpoint and options the chat began with
_REMEMBERED = {"base_url": None, "model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY",
               "system": None, "tools": ",".join(BUILTIN_NAMES), "max_rounds": 40,
               "profile": None, "workspace": None}
_OPENAI_HOST = "api.openai.com"

# Library messages name Python arguments; a CLI user typed flags. Each pair is
# (library words, CLI words); tests/test_cli_messages.py pins what the user sees.
_CLI_WORDS = [
    (re.compile(r"\bbase_url \(or OPENAI_BASE_URL\)"), "--base-url (or OPENAI_BASE_URL)"),
    (re.compile(r"\bthat base_url\b"), "that --base-url"),
    (re.compile(r"\braise read_timeout\b"), "raise --read-timeout"),
    (re.compile(r"\b(?:connect|read)_timeout=(\S+) s\b"), r"\1 s"),
    (re.compile(r"resume with the same AgentSession the run paused in"),
     "give the --session file the run paused in"),
]


class Quit(Exception):
    """The user chose q at the approval prompt (or ended its input)."""


def add_arguments(parser) -> None:
    """Add ``agentflow chat``'s flags (the module docstring's) to a parser.

    Args:
        parser: an ``argparse.ArgumentParser`` (the ``chat`` subcommand's).
    """
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
    parser.add_argument("--store", metavar="URL",
                        help="keep sessions in a store: sqlite:///sessions.db or "
                             "postgresql://…; --session then names the session's id")
    parser.add_argument("--tools", metavar="NAMES",
                        help=f"comma-separated built-in tools, or 'none' (default: all: "
                             f"{', '.join(BUILTIN_NAMES)})")
    parser.add_argument("--mcp", action="append", default=[], metavar="[NAME=]COMMAND",
                        help="also offer the tools of this MCP server: a command line run "
                             "over stdio, or an http(s) URL (streamable HTTP); repeatable; "
                             "the model calls its tools NAME__TOOL, policy rules name "
                             "them NAME.TOOL(pattern); needs agentflow[mcp]")
    parser.add_argument("--max-rounds", type=int, help="rounds per run (default 40)")
    parser.add_argument("--read-timeout", type=float, default=120.0, metavar="SECONDS",
                        help="longest silence of the endpoint mid-reply (default 120)")
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
    parser.add_argument("--policy", metavar="FILE",
                        help="an approval policy (JSON: deny / ask / allow rules) checked "
                             f"first, before the session's grants, {PROJECT_FILE} and "
                             "~/.config/agentflow/policy.json")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


class Output:
    """Standard output for people, or (``--json``) one JSON object a line, always
    ending with a closing object (``finish``, ``paused``, ``interrupted``, ``error``)."""

    def __init__(self, json_mode: bool, stream=None):
        self.json_mode = json_mode
        self.stream = stream or sys.stdout

    def say(self, text: str = "", end: str = "\n") -> None:
        """Write text for people and flush; nothing in ``--json`` mode.

        Args:
            text: the text (str); characters the stream's encoding cannot hold are
                written as backslash escapes instead of failing.
            end: appended to ``text`` (str, default a newline).
        """
        if not self.json_mode:
            try:
                self.stream.write(text + end)
            except UnicodeEncodeError:  # e.g. a file name that is not UTF-8: shown escaped
                encoding = getattr(self.stream, "encoding", None) or "utf-8"
                self.stream.write((text + end).encode(encoding, "backslashreplace")
                                  .decode(encoding))
            self.stream.flush()

    def emit(self, data: dict) -> None:
        """Write one JSON object as one line and flush; Ctrl-C waits until the line is
        out (POSIX), so a reader never gets half an object.

        Args:
            data: the object (dict, JSON-serialisable; e.g. ``update_to_json(update)``).

        Raises:
            TypeError: ``data`` holds a value ``json.dumps`` cannot write.
        """
        line = json.dumps(data) + "\n"
        # Ctrl-C waits until the line is out: a reader never gets half an object.
        with _sigint_deferred():
            self.stream.write(line)
            self.stream.flush()


class Chat:
    """One ``agentflow chat`` process: the agent, the session, the terminal."""

    def __init__(self, args, session: AgentSession, out: Output | None = None,
                 interactive: bool = False, mcp_servers=()):
        from ..agent import ChatClientAgent
        from ..builtin_tools import builtin_tools
        self.args = args
        self.session = session
        self.out = out or Output(args.json)
        self.say = self.out.say
        self.interactive = interactive
        # Flags win; then what the session was started with; then the defaults.
        remembered = session.state.get(SETTINGS) or {}
        settings = {name: getattr(args, name) if getattr(args, name) is not None
                    else remembered.get(name, default) for name, default in _REMEMBERED.items()}
        workspace = os.path.realpath(settings["workspace"] or os.getcwd())
        if not os.path.isdir(workspace):
            source = ("--workspace" if args.workspace is not None
                      else f"the --workspace remembered in {args.session}")
            raise UsageError(f"{source} {settings['workspace']}: {workspace} is not a "
                             "folder; give an existing one with --workspace DIR")
        settings["workspace"] = self.workspace = workspace
        names = [] if settings["tools"].strip() in ("", "none") else \
            [n.strip() for n in settings["tools"].split(",") if n.strip()]
        try:
            tools = builtin_tools(names, command_timeout=args.command_timeout,
                                  output_cap=args.output_cap, workspace=self.workspace)
        except ValueError as exc:
            raise UsageError(f"--tools: {exc}") from None
        tools += [t for server in mcp_servers for t in server.tools]
        self.tools = {t.name: t for t in tools}
        client = self._client(settings)
        notes: list[str] = []
        run_policy, layers = policy_layers(args.policy, self.tools, self.workspace, notes)
        for note in notes:
            self.say(note)
        session.state[SETTINGS] = settings
        self.agent = ChatClientAgent(client, instructions=settings["system"], tools=tools,
                                     policy=layers)
        self.options = AgentRunOptions(max_rounds=settings["max_rounds"], policy=run_policy)
        for name in session.state.pop(ALWAYS, []):  # what 'always' meant before grants
            if name in self.tools:
                session.approvals.grant(name, time.time(), approver=_user())

    def _client(self, settings: dict):
        """The provider client, after checking the endpoint and the key: a URL
        without http:// and a missing OpenAI key are said before anything connects."""
        from urllib.parse import urlsplit
        from ..openai_client import DEFAULT_BASE_URL, OpenAIChatClient
        if self.args.base_url is not None:
            url, source = settings["base_url"], "--base-url"
        elif settings["base_url"]:
            url, source = settings["base_url"], f"the --base-url remembered in {self.args.session}"
        elif os.environ.get("OPENAI_BASE_URL"):
            url, source = os.environ["OPENAI_BASE_URL"], "OPENAI_BASE_URL"
        else:
            url, source = DEFAULT_BASE_URL, None
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - a bad port or IPv6 literal raises only here
        except ValueError as exc:
            raise UsageError(f"{source or 'the base URL'} {url!r} is not a valid URL ({exc}); "
                             "write it as http://HOST:PORT/v1, with an IPv6 address in "
                             "brackets: http://[::1]:8080/v1") from None
        if parts.scheme not in ("http", "https") or not parts.netloc:
            rest = url.split("://", 1)[-1]
            fixed = ("http://HOST:PORT/v1" if re.match(r"[A-Za-z][\w+.-]*:/", rest)
                     else shlex.quote("http://" + rest))
            fix = (f"export OPENAI_BASE_URL={fixed}" if source == "OPENAI_BASE_URL"
                   else f"--base-url {fixed}")
            raise UsageError(f"{source} {url!r} is not an http:// or https:// URL; write "
                             f"{fix} (or https:// for a remote server)")
        variable = settings["api_key_env"]
        key = os.environ.get(variable) or ""
        if not key and parts.hostname == _OPENAI_HOST:
            where = "OpenAI (the default endpoint)" if source is None else url
            raise UsageError(
                f"no API key: {variable} is not set, and {where} needs one. Set it "
                f"(export {variable}=sk-...), or name the variable that holds it with "
                "--api-key-env VAR; for a local server, give its --base-url (e.g. "
                "http://localhost:11434/v1)")
        client = OpenAIChatClient(settings["model"], base_url=url, api_key=key,
                                  read_timeout=self.args.read_timeout,
                                  profile=settings["profile"])
        client.key_source = f"the {variable} environment variable (--api-key-env)"
        return client

    # -- output ----------------------------------------------------------------------------

    def save(self) -> None:
        """Save the session now (``AgentSession.checkpoint``; SPEC R10); without
        ``--session`` nothing is written.

        Raises:
            SessionConflictError: another writer saved the session since it was read;
                nothing was written.
            OSError: the store could not be written.
        """
        self.session.checkpoint()  # a no-op without --session

    # -- one run ---------------------------------------------------------------------------

    def run(self, messages, responses=()) -> tuple[Finish | None, list[ToolApprovalRequest]]:
        """Run once, showing updates as they arrive and saving after every step.

        Args:
            messages: this run's input: str (a user message) or ``ChatMessage`` items.
            responses: ``ToolApprovalResponse`` answers to a paused turn (SPEC R4).

        Returns:
            tuple: ``(finish, requests)``: the run's ``Finish`` (``None`` when Ctrl-C
            stopped the stream: the session keeps every completed step, SPEC R10, and
            the user's message) and its ``ToolApprovalRequest`` list, in call order.

        Raises:
            AgentflowError: from the run (``ProviderError``, ``ApprovalError`` …);
                what completed before is saved (R10).
        """
        messages = [ChatMessage.user(m) if isinstance(m, str) else m for m in messages]
        options = self.options.with_tool_approval_responses(responses)
        updates = self.agent.run(messages, self.session, options)
        requests, finish, in_text = [], None, False
        try:
            for update in updates:
                if self.args.json:
                    self.out.emit(update_to_json(update))
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
            # R10 keeps the input only with a completed model turn; a user who stopped
            # the reply still asked the question, and the next turn should see it.
            kept = [m for m in messages if not any(m is s for s in self.session.messages)]
            self.session.messages.extend(kept)
            self.save()
            text = ("stopped by Ctrl-C: " + ("your message and every completed step are"
                                             if kept else "every completed step is")
                    + " kept; the unfinished step is not")
            if self.args.json:
                self.out.emit({"type": "interrupted", "message": text})
            self.say(f"\n({text})")
            return None, []
        self.save()
        if finish and finish.finish_reason not in (FinishReason.STOP,
                                                   FinishReason.AWAITING_APPROVAL):
            self.say(f"(finish: {finish.finish_reason.value})")
        return finish, requests

    def converse(self, messages, responses=()) -> int:
        """Run, answer approval requests, resume, until the model is done or the run
        pauses for good.

        Args:
            messages: the first run's input, as for ``run``.
            responses: answers to a turn that was already paused (``--respond``).

        Returns:
            int: ``EXIT_OK`` (0), ``EXIT_PAUSED`` (3: calls left waiting) or
            ``EXIT_INTERRUPTED`` (130: Ctrl-C).

        Raises:
            AgentflowError: as ``run``.
        """
        while True:
            finish, requests = self.run(messages, responses)
            if finish is None:
                return EXIT_INTERRUPTED
            if finish.finish_reason is not FinishReason.AWAITING_APPROVAL:
                return EXIT_OK
            try:
                responses = self.decide(requests)
            except KeyboardInterrupt:
                self.save()
                self.say("\n(stopped by Ctrl-C at the approval prompt: nothing ran)")
                self.paused()
                return EXIT_INTERRUPTED
            if responses is None:
                return self.paused()
            messages = []

    # -- approvals -------------------------------------------------------------------------

    def decide(self, requests) -> list[ToolApprovalResponse] | None:
        """Answer approval requests: by ``--approve-all`` / ``--deny-all``, else at the
        terminal prompt, one call at a time.

        Args:
            requests: the ``ToolApprovalRequest`` list, in call order.

        Returns:
            list[ToolApprovalResponse] | None: one response per request, carrying its
            id and digest and the user's name; ``None`` to leave them pending (not
            interactive, ``--json``, or the user quit).

        Raises:
            KeyboardInterrupt: Ctrl-C at the prompt (the caller leaves the calls
                pending).
        """
        approver = _user()
        if self.args.approve_all or self.args.deny_all:
            return [r.approve(approver) if self.args.approve_all
                    else r.reject("denied by --deny-all", approver) for r in requests]
        if not self.interactive or self.args.json:
            return None
        responses = []
        for request in requests:
            self.show(request)
            try:
                response = self.ask(request, approver)
            except Quit:
                self.save()
                return None
            responses.append(response)
        self.save()
        return responses

    def show(self, request: ToolApprovalRequest) -> None:
        """Print a call that waits: its id, tool, description, why it asks (SPEC R18,
        R19), its arguments as indented JSON, and the tool's preview.

        Args:
            request: the ``ToolApprovalRequest``.
        """
        self.say(f"\n── approval needed ── {request.call_id}")
        self.say(f"tool:        {request.name}")
        self.say(f"description: {request.description.splitlines()[0] if request.description else ''}")
        why = self.why(request)
        if why and why != f"{request.name} always asks":
            self.say(f"why:         {why}")
        arguments = (json.dumps(request.arguments, indent=2, ensure_ascii=False)
                     if request.arguments is not None else "(not valid JSON)")
        self.say("arguments:\n" + "\n".join("  " + line for line in arguments.splitlines()))
        self.preview(request.name, request.arguments)

    def preview(self, name: str, arguments) -> None:
        """Show the tool's preview of a call (the command line, a diff), if it has one.

        Args:
            name: the tool's name (str).
            arguments: the call's arguments (dict; anything else has no preview).
        """
        shown = self._preview(name, arguments)
        if shown:
            self.say(shown.rstrip("\n"))

    def _preview(self, name: str, arguments) -> str | None:
        preview = getattr(self.tools.get(name), "preview", None)
        if preview is None or not isinstance(arguments, dict):
            return None
        return preview(arguments)

    def summary(self, request: ToolApprovalRequest) -> str:
        """One line that lets a user judge a call without the prompt.

        Args:
            request: the ``ToolApprovalRequest``.

        Returns:
            str: the command line (``$ …``, lines joined by `` ⏎ ``), a write's
            ``<path>: +N -M lines``, or else the arguments as JSON.
        """
        summarize = getattr(self.tools.get(request.name), "preview_summary", None)
        if summarize is not None and isinstance(request.arguments, dict):
            return summarize(request.arguments)
        if request.arguments is None:
            return "(arguments are not valid JSON)"
        return json.dumps(request.arguments, ensure_ascii=False)

    def why(self, request: ToolApprovalRequest) -> str | None:
        """Why a call needs approval, as recorded at the gate (SPEC R18, R19).

        Args:
            request: the ``ToolApprovalRequest``.

        Returns:
            str | None: the reason stored with the pending approval, or ``None``.
        """
        return next((r.why for r in self.session.approvals.pending
                     if r.call_id == request.call_id), None)

    def ask(self, request: ToolApprovalRequest, approver) -> ToolApprovalResponse:
        """Ask at the prompt until the user answers y, n, a, e or q.

        Args:
            request: the ``ToolApprovalRequest``.
            approver: the user's name (str or ``None``), recorded with the answer.

        Returns:
            ToolApprovalResponse: an approval (perhaps with a grant, R19, or edited
            arguments, R20) or a rejection with the typed reason (R7).

        Raises:
            Quit: the user chose q, or input ended (Ctrl-D).
        """
        while True:
            answer = self.read("approve? [y]es, [n]o, [a]llow from now on, [e]dit, [q]uit: ")
            answer = answer.strip().lower()
            if answer in ("y", "yes"):
                return request.approve(approver)
            if answer in ("n", "no"):
                return request.reject(self.read("reason (optional): ").strip() or None, approver)
            if answer in ("a", "allow", "always"):
                response = self.allow_from_now_on(request, approver)
                if response is not None:
                    return response
            if answer in ("e", "edit"):
                response = self.edit(request, approver)
                if response is not None:
                    return response
            if answer in ("q", "quit"):
                raise Quit()

    def read(self, prompt: str) -> str:
        """Read one line from the terminal.

        Args:
            prompt: the text shown before the cursor (str).

        Returns:
            str: the line, without its newline.

        Raises:
            Quit: input ended (Ctrl-D): like q, the call stays pending.
        """
        try:
            return input(prompt)
        except EOFError:  # Ctrl-D: like q, the call stays pending
            self.say()
            raise Quit() from None

    # -- [a]: allow this exact call from now on (R19) --------------------------------------

    def allow_from_now_on(self, request, approver) -> ToolApprovalResponse | None:
        """[a]: allow exactly this call from now on, in the session or the project
        file (SPEC R19).

        Args:
            request: the ``ToolApprovalRequest``.
            approver: the user's name (str or ``None``).

        Returns:
            ToolApprovalResponse | None: the approval, carrying the rules as a grant
            when kept in the session; ``None`` when no rule can allow exactly this
            call, or the user went back.

        Raises:
            Quit: input ended at the scope question.
            PolicyError, OSError: the project file could not be read or written.
        """
        from ..policy import exact_rules
        tool = self.tools.get(request.name)
        arguments = request.arguments if isinstance(request.arguments, dict) else None
        rules = exact_rules(tool, arguments) if tool is not None else []
        if not rules:
            self.say("  no rule can allow exactly this call (what it runs cannot be read "
                     "from its text); answer y to run it once")
            return None
        self.say("  allow from now on: " + ", ".join(rules))
        why = self.why(request) or ""
        if why.startswith("policy: ask rule"):
            self.say(f"  note: {why[len('policy: '):]} still asks for such calls")
        while True:
            scope = self.read(f"  keep it in the [s]ession or the [p]roject file "
                              f"({PROJECT_FILE}), or [b]ack: ").strip().lower()
            if scope in ("b", "back"):
                return None
            if scope in ("s", "session"):
                return request.approve(approver, grant=rules if len(rules) > 1 else rules[0])
            if scope in ("p", "project"):
                self.write_project_rules(rules)
                return request.approve(approver)

    def write_project_rules(self, rules) -> None:
        """Add ``allow`` rules to the workspace's project policy file, create it if
        needed, and use the new file in this chat at once (SPEC R19).

        Args:
            rules: the rule texts (list of str, e.g. ``"run_command(ls -la)"``).

        Raises:
            PolicyError: the existing file has a bad rule.
            OSError: the file could not be read or written.
        """
        from ..policy import ApprovalPolicy, policy_name
        path = os.path.join(self.workspace, PROJECT_FILE)
        project = (ApprovalPolicy.load(path, "project") if os.path.exists(path)
                   else ApprovalPolicy(name="project", source=path))
        for rule in rules:
            project.add("allow", rule)
        project.save(path)
        self.say(f"  wrote {', '.join(rules)} to {path}")
        project.source = path
        self.agent.chat_client.add_policy(project.restricted(
            policy_name(t) for t in self.tools.values()))

    # -- [e]: edit the arguments before they run (R20) ---------------------------------------

    def edit(self, request, approver) -> ToolApprovalResponse | None:
        """[e]: edit a call's arguments, show the diff, and approve the edited call
        (SPEC R20). A lone one-line subject is typed at the prompt; anything else
        opens the editor.

        Args:
            request: the ``ToolApprovalRequest``.
            approver: the user's name (str or ``None``).

        Returns:
            ToolApprovalResponse | None: the approval with the edited arguments;
            ``None`` when the arguments cannot be edited, the edit does not fit the
            tool's schema, a policy denies it, or the user went back.

        Raises:
            Quit: input ended.
        """
        import difflib
        from ..gate import edit_refusal
        tool = self.tools.get(request.name)
        if tool is None or not isinstance(request.arguments, dict):
            self.say("  these arguments cannot be edited (not a JSON object)")
            return None
        subject = tool.subject
        value = request.arguments.get(subject) if subject else None
        if isinstance(value, str) and "\n" not in value and len(request.arguments) == 1:
            self.say(f"  {subject}: {value}")
            typed = self.read(f"  new {subject} (empty: keep): ")
            edited = {subject: typed} if typed.strip() else dict(request.arguments)
        else:
            edited = self.edit_in_editor(request.arguments)
            if edited is None:
                return None
        refusal = edit_refusal(tool, edited, self.layers())
        if refusal is not None and refusal.problems:
            self.say("  the edit does not fit the tool: " + "; ".join(refusal.problems))
            return None
        if refusal is not None:
            self.say(f"  the edited call is denied by policy ({refusal.rule}, {refusal.layer})")
            return None
        before = json.dumps(request.arguments, indent=2, ensure_ascii=False).splitlines(True)
        after = json.dumps(edited, indent=2, ensure_ascii=False).splitlines(True)
        diff = "".join(difflib.unified_diff(before, after, "arguments (model)",
                                            "arguments (edited)"))
        self.say(diff.rstrip("\n") if diff else "  (no change)")
        self.preview(request.name, edited)
        answer = self.read("  run the edited call? [y]es, [n]o (back): ")
        if answer.strip().lower() in ("y", "yes"):
            return request.approve(approver, arguments=edited)
        return None

    def edit_in_editor(self, arguments: dict) -> dict | None:
        """Open the arguments as JSON in ``$VISUAL`` / ``$EDITOR`` (default ``vi``);
        Ctrl-C meanwhile belongs to the editor.

        Args:
            arguments: the call's arguments (dict).

        Returns:
            dict | None: the edited object; ``None`` when the editor cannot start or
            the result is not a JSON object (the reason is shown).

        Raises:
            OSError: the temporary file could not be written or read.
        """
        import signal
        import subprocess
        import tempfile
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        fd, path = tempfile.mkstemp(prefix="agentflow-edit-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(arguments, handle, indent=2, ensure_ascii=False)
                handle.write("\n")
            try:
                process = subprocess.Popen([*shlex.split(editor), path])
            except OSError as exc:
                self.say(f"  cannot start the editor {editor!r} ({exc.strerror}): set "
                         "VISUAL or EDITOR to one that works, or answer y or n")
                return None
            # Ctrl-C while the editor runs is the editor's (vi cancels a command with
            # it), not a quit at the prompt; git ignores it in the same way.
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                process.wait()
            finally:
                signal.signal(signal.SIGINT, previous)
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        finally:
            os.unlink(path)
        try:
            edited = json.loads(text)
        except ValueError as exc:
            self.say(f"  the edited arguments are not valid JSON: {exc}")
            return None
        if not isinstance(edited, dict):
            self.say("  the edited arguments must be a JSON object")
            return None
        return edited

    def layers(self) -> list:
        """The policy layers in the loop's order: --policy, the session's grants, the
        project and user files (R19)."""
        return self.agent.chat_client.layers(self.options.policy, self.session.approvals)

    def paused(self) -> int:
        """Say which calls wait and how to answer them; returns ``EXIT_PAUSED``."""
        requests = self.pending_requests()
        if self.args.json:
            self.out.emit({"type": "paused", "pending": [r.call_id for r in requests]})
            return EXIT_PAUSED
        count = (f"{len(requests)} call waits" if len(requests) == 1
                 else f"{len(requests)} calls wait")
        self.say(f"paused: {count} for approval:")
        width = max([len(r.call_id) for r in requests] + [0])
        tool_width = max([len(r.name) for r in requests] + [0])
        for request in requests:
            self.say(f"  {request.call_id:<{width}}  {request.name:<{tool_width}}  "
                     f"{self.summary(request)}")
        if self.args.session:
            answers = " ".join(f"--respond {shlex.quote(r.call_id)}=yes" for r in requests)
            store = f"--store {shlex.quote(self.args.store)} " if self.args.store else ""
            self.say("Answer each call: CALL_ID=yes runs it, CALL_ID=no:REASON rejects it.")
            self.say(f"Resume with: agentflow chat {store}--session "
                     f"{shlex.quote(self.args.session)} {answers}")
        else:
            self.say("Without --session FILE this pause cannot be resumed later: run again "
                     "with --session FILE, and answer on a terminal or with --approve-all / "
                     "--deny-all.")
        return EXIT_PAUSED

    def pending_requests(self) -> list[ToolApprovalRequest]:
        """The approval requests of a session that was left paused."""
        return self.session.approval_requests(self.tools.values())

    def responses_from_flags(self) -> list[ToolApprovalResponse]:
        """The ``--respond`` answers, checked against the calls that wait: an id that
        waits for nothing, or an id answered twice, is bad usage (before anything
        runs, the session unchanged, SPEC R11)."""
        waiting = {r.call_id: r for r in self.pending_requests()}
        session = shlex.quote(self.args.session)
        if self.args.store:
            session = f"{session} --store {shlex.quote(self.args.store)}"
        begun = [c.id for c in self.session.pending_tool_calls if c.id in self.session.running]
        if not waiting and begun:  # SPEC R16
            raise UsageError(f"--respond: {', '.join(begun)} started in an earlier run that "
                             "never finished (it was killed), so it may have partly run and is "
                             "not run again; send a message to go on, and the model hears that "
                             f"it was interrupted: agentflow chat --session {session} "
                             "\"MESSAGE\"")
        if not waiting:
            raise UsageError(f"--respond: {self.args.session} has no call waiting for "
                             "approval (it is not paused), so there is nothing to answer; "
                             f"send a message instead: agentflow chat --session {session} "
                             "\"MESSAGE\"")
        listing = "; ".join(f"{i} ({r.name} {self.summary(r)})" for i, r in waiting.items())
        responses, seen = [], set()
        for item in self.args.respond:
            call_id, sep, answer = item.partition("=")
            verdict, _, reason = answer.partition(":")
            call_id = call_id.strip()
            if not sep or verdict.strip().lower() not in ("yes", "y", "no", "n"):
                raise UsageError(f"--respond {item!r}: write CALL_ID=yes or CALL_ID=no[:REASON]")
            if call_id not in waiting:
                raise UsageError(f"--respond {item!r}: no call {call_id!r} waits for approval "
                                 f"in {self.args.session}. Waiting: {listing}")
            if call_id in seen:
                raise UsageError(f"--respond: {call_id} is answered twice; give one answer "
                                 "per call")
            seen.add(call_id)
            request = waiting[call_id]
            responses.append(request.approve(_user()) if verdict.strip().lower() in ("yes", "y")
                             else request.reject(reason or None, _user()))
        unanswered = [i for i in waiting if i not in seen]
        if unanswered:
            self.say(f"(no --respond for {', '.join(unanswered)}: rejected, as if you said no)")
        return responses

    # -- the whole command -----------------------------------------------------------------

    def main(self) -> int:
        """The whole command: answer ``--respond`` or a paused session first (SPEC R4),
        then send the message, or start the prompt.

        Returns:
            int: the exit status (module docstring).

        Raises:
            UsageError: bad ``--respond`` answers, or no message where one is needed.
            AgentflowError: as ``run``.
        """
        message = [self.args.message] if self.args.message is not None else []
        if self.args.respond:
            return self.converse(message, self.responses_from_flags())
        if self.session.approvals.pending:
            if not (self.interactive or self.args.approve_all or self.args.deny_all):
                # Sending the message would reject the waiting calls unseen (SPEC R4).
                if message:
                    self.say("This session is paused, so your message was not sent: answer "
                             "the calls that wait first.")
                return self.paused()
            self.say("This session is paused; answer its pending calls first.")
            responses = self.decide(self.pending_requests())
            if responses is None:
                return self.paused()
            status = self.converse([], responses)
            if status != EXIT_OK or not (self.interactive and not message):
                return status
        if message:
            return self.converse(message)
        if self.args.json:
            raise UsageError("--json runs one message and prints no prompt: give the message "
                             "as an argument, e.g. agentflow chat --json \"MESSAGE\"")
        if not self.interactive:
            raise UsageError("no message given, and standard input is not a terminal, so "
                             "there is no prompt: give the message as an argument, e.g. "
                             "agentflow chat \"MESSAGE\"")
        return self.repl()

    def repl(self) -> int:
        """The interactive prompt: one conversation until an empty line, Ctrl-D, a
        Ctrl-C at the prompt, or a pause that is left unanswered.

        Returns:
            int: ``EXIT_OK``, ``EXIT_INTERRUPTED`` or ``EXIT_PAUSED``.
        """
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


@contextlib.contextmanager
def _sigint_deferred():
    """SIGINT is held back while the block runs and delivered after it (POSIX; where
    signals cannot be masked, the block just runs)."""
    import signal
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        yield
        return
    mask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        mask(signal.SIG_UNBLOCK, {signal.SIGINT})


def policy_layers(policy_file, tools, workspace=".", notes=None) -> tuple:
    """The approval policies of ``agentflow chat`` (SPEC R19).

    Each is checked against every built-in tool and the MCP tools in ``tools``. A rule
    on a built-in switched off in this run, or on an MCP server not connected in it, is
    kept and simply cannot apply.

    Args:
        policy_file: the ``--policy`` file's path (str), or ``None``.
        tools: the chat's tools, a mapping of name to ``Tool``.
        workspace: the folder whose ``.agentflow/policy.json`` is the project file.
        notes: a list that, when given, gets a line naming MCP servers whose rules
            cannot apply because they are not connected.

    Returns:
        tuple: ``(run_policy, [project, user])``: the ``--policy`` file's
        ``ApprovalPolicy`` (``None`` without one) and the standard files' layers.

    Raises:
        UsageError: a file cannot be read, or has a bad rule (naming the file and
            the rule).
    """
    from ..builtin_tools import builtin_tools
    from ..errors import PolicyError
    from ..policy import ApprovalPolicy, policy_name, standard_layers
    catalogue = [*builtin_tools(workspace=workspace), *tools.values()]
    try:
        run = ApprovalPolicy.load(policy_file, "--policy") if policy_file else None
        layers = standard_layers(workspace)
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


def _user() -> str | None:
    import getpass
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def _check_flags(args) -> None:
    """Usage errors that need neither the session nor the network."""
    if args.respond and not args.session:
        raise UsageError("--respond needs --session FILE (the paused session)")
    if args.store and not args.session:
        raise UsageError("--store needs --session ID (the session's id in the store)")
    for flag, value, least in (("--max-rounds", args.max_rounds, 1),
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


def _session_problem(path: str, error: Exception) -> str:
    """Why ``path`` could not be opened as a session, in words a CLI user can act on."""
    start = f"--session {path}"
    fresh = "give another file name to start a new session (this file is left as it is)"
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        return f"{start}: cannot read it ({exc.strerror})"
    if not raw.strip():
        return (f"{start} is empty, not a saved session: delete it (rm {shlex.quote(path)}) "
                "to start a new session there, or give another file")
    try:
        data = json.loads(raw)
    except ValueError:
        return f"{start} is not a saved session (it is not JSON); {fresh}"
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(data, dict) and "signature" in data:
        return (f"{start} is signed (saved with AgentSession.open(..., secret=...)), and "
                f"agentflow chat opens unsigned sessions only; {fresh}")
    if version is None:
        return (f"{start} is not a saved session (JSON without a schema_version, so not "
                f"written by agentflow); {fresh}")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        return (f"{start} was written by a newer agentflow (schema_version {version}; this "
                f"one reads up to {SCHEMA_VERSION}): upgrade agentflow "
                "(pip install -U agentflow), or " + fresh)
    detail = str(error).removeprefix(f"{path} is not a saved session: ")
    return f"{start} is not a usable session ({detail}); {fresh}"


def cli_words(text: str) -> str:
    """A library message in the words a CLI user types.

    Args:
        text: the message (str).

    Returns:
        str: the message with its Python words (``base_url``, ``read_timeout``,
        ``AgentSession``) replaced by the flags (``--base-url`` …).
    """
    for pattern, words in _CLI_WORDS:
        text = pattern.sub(words, text)
    return text


def _start_mcp_servers(specs, stack) -> list:
    """Start each ``--mcp`` server (stopped when ``stack`` closes); the SDK is imported
    only here, so a chat without ``--mcp`` never loads it."""
    if not specs:
        return []
    try:
        from ..mcp import MCPServer
    except ImportError as exc:
        raise UsageError(f"--mcp: {exc}") from None
    servers = []
    for spec in specs:
        try:
            server = MCPServer.from_command_line(spec)
        except ValueError as exc:
            raise UsageError(f"--mcp {spec!r}: {exc}") from None
        servers.append(stack.enter_context(server))
        names = [s.name for s in servers]
        if names.count(server.name) > 1:
            raise UsageError(f"two --mcp servers are both named {server.name!r}: name one "
                             f"with --mcp {shlex.quote('OTHER=' + server.describe())}")
    return servers


def main(args) -> int:
    """Run ``agentflow chat``.

    Args:
        args: the ``argparse.Namespace`` of the flags ``add_arguments`` adds.

    Returns:
        int: the exit status: 0 done, 1 error, 2 bad usage, 3 paused, 130 interrupted
        (module docstring). Errors are reported on stderr (and as an ``error`` object
        with ``--json``), not raised.

    Raises:
        AgentflowError, ValueError, OSError: only with ``--debug``, to show the
            traceback.
    """
    out = Output(args.json)

    def fail(status: int, kind: str, message: str) -> int:
        if args.json:
            out.emit({"type": "error", "kind": kind, "message": message})
        print(f"agentflow: {'error: ' if status == EXIT_ERROR else ''}{message}",
              file=sys.stderr)
        return status

    interactive = sys.stdin.isatty() and not args.json
    try:
        _check_flags(args)
        with contextlib.ExitStack() as stack:
            if args.store:
                from ..stores import open_store
                store = stack.enter_context(open_store(args.store))
                session = stack.enter_context(store.open(args.session))
            elif args.session:
                try:
                    session = stack.enter_context(AgentSession.open(args.session))
                except SessionLockedError:
                    raise
                except (ValueError, SessionError) as exc:
                    raise UsageError(_session_problem(args.session, exc)) from None
            else:
                session = AgentSession()
            servers = _start_mcp_servers(args.mcp, stack)
            for server in servers:
                out.say(mcp_summary(server))
            return Chat(args, session, out, interactive=interactive, mcp_servers=servers).main()
    except UsageError as exc:
        return fail(EXIT_USAGE, "UsageError", str(exc))
    except KeyboardInterrupt:
        if args.json:
            out.emit({"type": "interrupted", "message": "stopped by Ctrl-C"})
        return EXIT_INTERRUPTED
    except (AgentflowError, ValueError, OSError) as exc:
        if args.debug:
            raise
        return fail(EXIT_ERROR, type(exc).__name__, cli_words(str(exc)))


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
    width = max((len(t.name) for t in tools), default=0)
    lines = [f"MCP server {server.name} ({server.describe()}): {len(tools)} tools"]
    lines += [f"  {t.name:<{width}}  {'asks' if t.requires_approval() else 'runs'} "
              f"({t.approval_reason})" for t in tools]
    subjects = [f"{t.mcp_name}({t.subject})" for t in tools if t.subject]
    lines.append(f"  policy rules name them {server.name}.TOOL"
                 + (f"; patterns match {', '.join(subjects)}" if subjects else "")
                 + (f"; paths from {server.root}" if any(
                     t.subject_kind == "path" for t in tools if t.subject) else ""))
    return "\n".join(lines)
