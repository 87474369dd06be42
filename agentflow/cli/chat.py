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
import os
import re
import sys
import time

from ..display import safe_text
from ..policy import needs_a_person
from ..errors import AgentflowError, Setting, Wording
from ..builtin.sandbox import Sandbox, widened
from ..session import AgentSession
from ..types import (AgentRunOptions, ChatMessage, Finish, FinishReason, ReasoningDelta,
                    TextDelta, ToolApprovalRequest, ToolApprovalResponse, ToolResult,
                    update_to_json)
from .endpoint import make_client
from .flags import (EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_PAUSED, EXIT_USAGE,
                    UsageError, add_arguments, check_flags)
from .pause import paused
from .policies import policy_layers
from .prompt import ask
from .repl import repl
from .render import Output, call_line, result_line, show_request, summary
from .respond import responses_from_flags
from .servers import mask_results_of, mcp_summary, start_mcp_servers
from .sessions import open_session
from .store_key import decisive_files
from .settings import (ALWAYS, chat_settings, check_grants, sign_grants, sign_settings,
                       tool_names, user_name)
from .terminal import Quit, line_editing, read, with_piped_input

__all__ = ["Chat", "UsageError", "add_arguments", "main"]

# The provider client is imported when a chat starts, not with this module:
# `agentflow --help` should cost little more than `import agentflow` (make bench).

class CLIWording(Wording):
    """Library messages name Python arguments; a CLI user typed flags
    (tests/test_cli_messages.py pins what the user sees)."""

    def word(self, setting: Setting) -> str:
        """The flag a setting is (``--base-url``), a limit as its value (``120.0 s``).

        Args:
            setting: the ``Setting`` a library message names.

        Returns:
            str: the words a CLI user types.
        """
        if setting.name == "session":
            return "give the --session file the run paused in"
        if setting.seconds is not None:
            return f"{setting.seconds} s"
        return "--" + setting.name.replace("_", "-")


class Chat:
    """One ``agentflow chat`` process: the agent, the session, the terminal."""

    def __init__(self, args, session: AgentSession, out: Output | None = None,
                 interactive: bool = False, mcp_servers=()):
        from ..agent import ChatClientAgent
        from ..builtin.builtin_tools import builtin_tools
        self.args = args
        self.session = session
        self.out = out or Output(args.json)
        self.say = self.out.say
        self.interactive = interactive
        self.serving = False  # a worker's: a run Ctrl-C cut short is another worker's to go on
        self.shown: set[str] = set()  # calls shown (prompt or call line) in this process
        confirm = self.confirm if interactive else None
        settings = chat_settings(args, session, confirm)
        self.workspace = settings["workspace"]
        names = tool_names(settings)
        sandbox = Sandbox(args.sandbox, args.sandbox_network, args.sandbox_required,
                          **decisive_files(args))

        def made(sandbox):  # commands never get the key's variables (SPEC R26)
            try:
                return builtin_tools(names, command_timeout=args.command_timeout,
                                     output_cap=args.output_cap, workspace=self.workspace,
                                     sandbox=sandbox, secret_env=("OPENAI_API_KEY",
                                                                  settings["api_key_env"]))
            except ValueError as exc:
                raise UsageError(f"--tools: {exc}") from None
        tools = made(sandbox) + [t for server in mcp_servers for t in server.tools]
        mask_results_of(mcp_servers, self.workspace, ("OPENAI_API_KEY", settings["api_key_env"]))
        self.tools = {t.name: t for t in tools}
        self.spinner = self.live = None
        if interactive and getattr(self.out.stream, "isatty", lambda: False)():
            from ..builtin.builtin_tools import RunCommand
            from .spinner import LiveOutput, Spinner
            # a dumb terminal cannot erase a line: no spinner, only the live output
            self.spinner = Spinner(self.out, draw=os.environ.get("TERM", "dumb") != "dumb")
            self.live = LiveOutput(self.out, self.spinner, self._announce_running)
            for tool in tools:
                if isinstance(tool, RunCommand):
                    tool.on_output = self.live
        client = make_client(args, settings)
        notes: list[str] = []
        run_policy, layers = policy_layers(args.policy, self.tools, self.workspace, notes,
                                           confirm)
        if "run_command" in names:
            wider = widened(sandbox, [run_policy, *layers])  # a project file's: if trusted
            if wider != sandbox:  # a policy lets sandboxed commands run unasked, or out
                tools[:len(names)] = made(wider)
                self.tools = {t.name: t for t in tools}
            if sandbox.note:
                print(f"agentflow: note: {sandbox.note}", file=sys.stderr)
        check_grants(session, confirm, notes)
        for note in notes:  # with --json, stdout holds JSON only: the note goes to stderr
            if args.json:
                print(f"agentflow: note: {safe_text(note)}", file=sys.stderr)
            else:
                self.say(note)
        sign_settings(session, settings)
        self.agent = ChatClientAgent(client, instructions=settings["system"], tools=tools,
                                     policy=layers)
        self.options = AgentRunOptions(max_rounds=settings["max_rounds"], policy=run_policy)
        for name in session.state.pop(ALWAYS, []):  # what 'always' meant before grants
            if name in self.tools:
                session.approvals.grant(name, time.time(), approver=user_name())
        sign_grants(session)

    def confirm(self, question: str) -> bool:
        """Ask the person a yes/no question on the terminal (default no).

        Args:
            question: the question (str), shown as it is: callers escape what came
                from outside (SPEC R25).

        Returns:
            bool: ``True`` for y or yes.
        """
        *lines, last = question.split("\n")
        for line in lines:
            self.say(line)
        try:
            return read(self.say, last).strip().lower() in ("y", "yes")
        except Quit:
            return False

    def save(self) -> None:
        """Save the session now (``AgentSession.checkpoint``; SPEC R10); without
        ``--session`` nothing is written.

        Raises:
            SessionConflictError: another writer saved the session since it was read;
                nothing was written.
            OSError: the store could not be written.
        """
        sign_grants(self.session)  # the grants answered in this run are the person's
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
            for update in self._watched(updates):
                if self.args.json and not self._answered_unasked(update):
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
                    shown_live = self.live.end() if self.live is not None else 0
                    if update.call_id not in self.shown:
                        self.shown.add(update.call_id)
                        self.say(call_line(update.name, self.call_subject(update.call_id)))
                    self.say(result_line(update.name, update.result, shown_live))
                elif isinstance(update, ToolApprovalRequest):
                    requests.append(update)
                elif isinstance(update, Finish):
                    finish = update
        except KeyboardInterrupt:
            if self.spinner is not None:
                self.spinner.stop()
            updates.close()
            # R10 keeps the input only with a completed model turn; a user who stopped
            # the reply still asked the question, and the next turn should see it.
            kept = [m for m in messages if not any(m is s for s in self.session.messages)]
            self.session.messages.extend(kept)
            if not self.serving:  # a person stopped it: no worker continues it (issue 38)
                from ..journal import RUN_MARK
                self.session.state.pop(RUN_MARK, None)
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

    def _watched(self, updates):
        """``updates``, with the spinner turning while the next one is awaited (on a
        terminal; elsewhere they pass as they are)."""
        if self.spinner is None:
            yield from updates
            return
        while True:
            self.spinner.waiting("working")
            try:
                update = next(updates)
            except StopIteration:
                return
            finally:
                self.spinner.stop()
            yield update

    def _announce_running(self) -> None:
        """Before a command's live output: the call line of a call that runs without
        having been shown (the write-ahead record, SPEC R16, names what runs)."""
        for call_id, record in self.session.running.items():
            if call_id not in self.shown:
                self.shown.add(call_id)
                self.say(call_line(record.get("tool", ""), self.call_subject(call_id)))

    def close(self) -> None:
        """Stop the spinner's thread, if there is one."""
        if self.spinner is not None:
            self.spinner.close()

    def _answered_unasked(self, update) -> bool:
        """Whether ``update`` is a pause that --approve-all / --deny-all answers at once:
        ``--json`` leaves it out, so the output ends with one closing object."""
        return (isinstance(update, Finish) and (self.args.approve_all or self.args.deny_all)
                and update.finish_reason is FinishReason.AWAITING_APPROVAL)

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
            responses = self.answer(requests)
            if isinstance(responses, int):
                return responses
            messages = []

    # -- approvals -------------------------------------------------------------------------

    def answer(self, requests) -> list[ToolApprovalResponse] | int:
        """``decide``, and the pause summary when the calls are left waiting: the same
        for q, Ctrl-D and Ctrl-C at the prompt.

        Args:
            requests: the ``ToolApprovalRequest`` list, in call order.

        Returns:
            list[ToolApprovalResponse] | int: the answers, or the exit status
            (``EXIT_PAUSED``; ``EXIT_INTERRUPTED`` after Ctrl-C).
        """
        try:
            responses = self.decide(requests)
        except KeyboardInterrupt:
            self.save()
            self.say("\n(stopped by Ctrl-C at the approval prompt: nothing ran)")
            paused(self)
            return EXIT_INTERRUPTED
        return paused(self) if responses is None else responses

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
        approver = user_name()
        if self.args.approve_all or self.args.deny_all:
            return [r.approve(approver) if self.args.approve_all and not self.person_only(r)
                    else r.reject("denied by --deny-all" if self.args.deny_all else
                                  f"--approve-all does not answer it: {self.why(r, 'rule')}",
                                  approver) for r in requests]
        if not self.interactive or self.args.json:
            return None
        responses = []
        for number, request in enumerate(requests, 1):
            self.show(request, (number, len(requests)))
            try:
                response = ask(self, request, approver)
            except Quit:
                self.save()
                return None
            responses.append(response)
        self.save()
        return responses

    def call_subject(self, call_id: str) -> str:
        """What a call of this run does, in one line, from the history: its subject
        (``$ command``, the path), else its arguments as JSON.

        Args:
            call_id: the call's ``tool_call_id`` (str).

        Returns:
            str: the line, safe to show (SPEC R25); empty when the call is not found.
        """
        from ..gate import object_or_none
        call = next((c for m in reversed(self.session.messages) for c in m.tool_calls
                     if c.id == call_id), None)
        if call is None:
            return ""
        arguments = object_or_none(call.arguments)
        tool = self.tools.get(call.name)
        value = (arguments or {}).get(tool.subject) if tool and tool.subject else None
        if isinstance(value, str):
            return safe_text(f"$ {value}" if tool.subject_kind == "shell" else value)
        return summary(ToolApprovalRequest(call_id, call.name, arguments, ""))

    def show(self, request: ToolApprovalRequest, position: tuple[int, int] = (1, 1)) -> None:
        """Print a call that waits (``render.show_request``); its result is then shown
        without the call line.

        Args:
            request: the ``ToolApprovalRequest``.
            position: ``(number, count)`` among the calls that wait.
        """
        self.shown.add(request.call_id)
        show_request(self.out, request, self.why(request),
                     self.preview_text(request.name, request.arguments), position)

    def preview(self, name: str, arguments) -> None:
        """Show the tool's preview of a call (the command line, a diff), if it has one.

        Args:
            name: the tool's name (str).
            arguments: the call's arguments (dict; anything else has no preview).
        """
        shown = self.preview_text(name, arguments)
        if shown and shown.startswith("--- "):
            self.out.say_diff(shown)
        elif shown:
            self.say(shown.rstrip("\n"))

    def preview_text(self, name: str, arguments) -> str | None:
        """The tool's preview of a call.

        Args:
            name: the tool's name (str).
            arguments: the call's arguments (dict; anything else has no preview).

        Returns:
            str | None: the preview, or ``None`` when the tool has none.
        """
        preview = getattr(self.tools.get(name), "preview", None)
        if preview is None or not isinstance(arguments, dict):
            return None
        return preview(arguments)

    def summary(self, request: ToolApprovalRequest) -> str:
        """One line that lets a user judge a call without the prompt (``render.summary``).

        Args:
            request: the ``ToolApprovalRequest``.

        Returns:
            str: the line.
        """
        summarize = getattr(self.tools.get(request.name), "preview_summary", None)
        if summarize is not None and isinstance(request.arguments, dict):
            return summary(request, summarize(request.arguments))
        return summary(request)

    def why(self, request: ToolApprovalRequest, field: str = "why") -> str | None:
        """Why a call needs approval, as recorded at the gate (SPEC R18, R19).

        Args:
            request: the ``ToolApprovalRequest``.
            field: ``"why"`` (the reason) or ``"rule"`` (the policy rule that asked).

        Returns:
            str | None: that field of the pending approval, or ``None``.
        """
        return next((getattr(r, field) for r in self.session.approvals.pending
                     if r.call_id == request.call_id), None)

    def person_only(self, request) -> bool:
        """Whether only a person may let the call run: its line could meet a deny rule
        but was not read fully (SPEC R19 addendum), so --approve-all refuses it.

        Args:
            request: the ``ToolApprovalRequest``.

        Returns:
            bool: ``policy.needs_a_person`` of its recorded rule.
        """
        return needs_a_person(self.why(request, "rule"))

    def layers(self) -> list:
        """The policy layers in the loop's order: --policy, the session's grants, the
        project and user files (R19)."""
        return self.agent.chat_client.layers(self.options.policy, self.session.approvals)

    def pending_requests(self) -> list[ToolApprovalRequest]:
        """The approval requests of a session that was left paused."""
        return self.session.approval_requests(self.tools.values())

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
            return self.converse(message, responses_from_flags(self))
        if self.session.approvals.pending:
            if not (self.interactive or self.args.approve_all or self.args.deny_all):
                # Sending the message would reject the waiting calls unseen (SPEC R4).
                if message:
                    self.say("This session is paused, so your message was not sent: answer "
                             "the calls that wait first.")
                return paused(self)
            self.say("This session is paused; answer its pending calls first.")
            responses = self.answer(self.pending_requests())
            if isinstance(responses, int):
                return responses
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
        """The interactive prompt (``repl.repl``).

        Returns:
            int: ``EXIT_OK``, ``EXIT_INTERRUPTED`` or ``EXIT_PAUSED``.
        """
        return repl(self)


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
    out = Output(args.json, colour=False if args.no_color else None)

    def fail(status: int, kind: str, message: str) -> int:
        if args.json:
            out.emit({"type": "error", "kind": kind, "message": message})
        print(f"agentflow: {'error: ' if status == EXIT_ERROR else ''}"
              f"{safe_text(message, multiline=True)}", file=sys.stderr)
        return status

    interactive = sys.stdin.isatty() and not args.json
    if interactive:
        line_editing()
    try:
        check_flags(args)
        if not args.respond:
            args.message = with_piped_input(args.message)
        with contextlib.ExitStack() as stack:
            session = open_session(args, stack)
            servers = start_mcp_servers(args.mcp, stack, args.mcp_approval)
            for server in servers:
                out.say(mcp_summary(server))
            chat = Chat(args, session, out, interactive=interactive, mcp_servers=servers)
            stack.callback(chat.close)
            return chat.main()
    except UsageError as exc:
        return fail(EXIT_USAGE, "UsageError", str(exc))
    except KeyboardInterrupt:
        if args.json:
            out.emit({"type": "interrupted", "message": "stopped by Ctrl-C"})
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader left (`| head`): main() exits quietly
        raise
    except (AgentflowError, ValueError, OSError) as exc:
        if args.debug:
            raise
        text = exc.worded(CLIWording()) if isinstance(exc, AgentflowError) else str(exc)
        return fail(EXIT_ERROR, type(exc).__name__, text)
