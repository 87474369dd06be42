"""``agentflow worker --store URL``: resume the sessions whose waiting calls were
answered (``agentflow inbox``, ``SessionStore.answer``; SPEC R4, R22, R26).

A worker has the chat's built-in tools and its ``--mcp`` servers, set up by the same
flags as ``agentflow chat``. It resumes a session only when the settings the session
remembers (endpoint, model, API-key variable, tools, workspace, system prompt …) are
the worker's own, so an answer given in the inbox never runs with an endpoint, key or
workspace the person did not give this worker (R26); it skips the others, and sessions
whose approved calls need tools it lacks, saying why once per session. Several
workers may serve one store: the session's lease lets one resume it, the others skip
it. A worker whose own checks refuse an answer (an edit its tools' schemas or policies
refuse, R20) marks it refused, so the inbox asks for a new one.

A worker is left running (SPEC R22 addendum, fourth batch): it continues sessions whose
run another worker's death cut short (``store.cut_short()``), reports and skips a
session it cannot read, and waits out the store's failures (a database restart, a
held lock, a database not up yet when it starts), saying so once each.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

from ..errors import (AgentflowError, ApprovalError, SessionConflictError,
                      SessionIntegrityError, SessionLockedError, StoreError)
from .errors import UsageError
from ..stores import open_store_waiting
from ..stores.base import CUT_SHORT, readiness

_LONGEST_PAUSE = 5.0  # seconds between a failing store's tries, at most
_AGAIN_SOON = 0.05  # seconds before a look at a session that was just locked
_SCAN_EVERY = 60.0  # seconds between looks at every inbox row (for forged ones)
_LONGEST_RETRY = 300.0  # seconds before a cut-short run that failed is tried again, at most
from ..stores.answers import ready_responses, refuse_answers

# The chat flags a worker takes (the rest keep chat's defaults: no prompt, no message).
_CHAT_FLAGS = ("base_url", "model", "api_key_env", "profile", "system", "tools", "mcp",
               "mcp_approval",
               "max_rounds", "read_timeout", "max_retries", "command_timeout", "output_cap",
               "workspace",
               "policy", "debug", "store_key", "unsigned", "sandbox", "sandbox_network",
               "sandbox_required")


def add_arguments(parser) -> None:
    """Add ``agentflow worker``'s flags: ``--store``, ``--once``, ``--poll`` and the
    chat flags that set up the agent (``agentflow chat --help``).

    Args:
        parser: the ``worker`` subcommand's ``argparse.ArgumentParser``.
    """
    from .flags import add_arguments as add_chat_arguments
    chat = argparse.ArgumentParser(add_help=False)
    add_chat_arguments(chat)
    parser.add_argument("--store", required=True, metavar="URL",
                        help="sqlite:///sessions.db, postgresql://… or file:///folder")
    parser.add_argument("--once", action="store_true",
                        help="resume what is answered now, then stop")
    parser.add_argument("--poll", type=float, default=1.0, metavar="SECONDS",
                        help="seconds between looks at the store (default 1)")
    for action in chat._actions:
        if action.dest in _CHAT_FLAGS:
            parser._add_action(action)


def chat_args(args) -> argparse.Namespace:
    """The ``agentflow chat`` arguments a worker's sessions run with: chat's defaults
    (no message, no prompt, no ``--approve-all``), the worker's flags over them.

    Args:
        args: the worker's ``argparse.Namespace``.

    Returns:
        argparse.Namespace: for ``Chat``.
    """
    from .flags import add_arguments as add_chat_arguments
    parser = argparse.ArgumentParser(add_help=False)
    add_chat_arguments(parser)
    made = parser.parse_args([])
    for name in _CHAT_FLAGS:
        setattr(made, name, getattr(args, name))
    made.store = args.store
    return made


def own_settings(args) -> dict:
    """The settings a chat with these flags would remember (``chat.SETTINGS``), with
    which a session's remembered ones are compared (SPEC R26).

    Args:
        args: the ``agentflow chat`` ``argparse.Namespace`` (``chat_args``).

    Returns:
        dict: setting name → value.
    """
    from .settings import DEFAULTS
    mine = {name: getattr(args, name) if getattr(args, name) is not None else default
            for name, default in DEFAULTS.items()}
    mine["workspace"] = os.path.realpath(args.workspace or os.getcwd())
    return mine


def settings_problem(remembered, mine: dict) -> str | None:
    """Why a worker may not resume a session with these remembered settings (SPEC
    R26), or ``None`` when they are its own.

    Args:
        remembered: the session's ``state["chat"]`` (dict), or ``None``.
        mine: ``own_settings`` of the worker.

    Returns:
        str | None: which settings differ, e.g. ``--base-url: the session remembers
        'http://a/v1', this worker has 'http://b/v1'``.
    """
    from .settings import DEFAULTS
    if not isinstance(remembered, dict):
        return ("it was not started by agentflow chat (no remembered settings); resume it "
                "with the application's own agent (store.answered())")
    differ = []
    for name, default in DEFAULTS.items():
        held = remembered.get(name, default)
        if name == "tools":
            held, own = _names(held), _names(mine[name])
        else:
            own = mine[name]
        if held != own:
            from ..redact import mask_url
            flag = f"--{name.replace('_', '-')}"
            # None is "not given" (issue 34: "this worker has None")
            shown = (lambda v: f"no {flag}" if v is None
                     else repr(mask_url(v) if isinstance(v, str) else v))
            differ.append(f"{flag}: the session remembers {shown(held)}, this worker has "
                          f"{shown(own)}")
    return "; ".join(differ) or None


def _names(tools) -> list:
    text = tools if isinstance(tools, str) else ""
    return sorted(n.strip() for n in text.split(",") if n.strip() and n.strip() != "none")


class Worker:
    """Resumes answered sessions of one store.

    Args:
        args: the worker's ``argparse.Namespace`` (``add_arguments``).
        servers: the started MCP servers (``MCPServer`` list).
        out: a text stream for what it does; default ``sys.stdout``.
    """

    def __init__(self, args, servers=(), out=None):
        self.args, self.servers = args, list(servers)
        self.out = out or sys.stdout
        self.chat_args = chat_args(args)
        self.mine = own_settings(self.chat_args)
        self.reported: dict[str, str] = {}  # session id -> why it was skipped (said once)
        self.resumed = 0
        self.trouble: str | None = None  # what the store last failed with, said once
        self.scanned: float | None = None  # when every inbox row was last looked at
        self.retry: dict[str, tuple[float, float]] = {}  # id -> (when, pause) after a failure
        self.locked: set = set()  # the sessions another process held at the last look
        self.soon = False  # look again in a moment (sweep)

    def say(self, text: str) -> None:
        """Print one line of the worker's log.

        Args:
            text: the line (str), without its newline.
        """
        self.out.write(f"worker: {text}\n")
        self.out.flush()

    def sweep(self, store) -> int:
        """Resume every session answered now, and continue every session whose run
        was cut short (its worker died inside it) and whose holder is gone (SPEC R22
        addendum, fourth batch).

        Args:
            store: the open ``SessionStore``.

        Returns:
            int: how many sessions this call resumed or continued.
        """
        done = 0
        now = time.monotonic()
        if self.scanned is None or now - self.scanned >= _SCAN_EVERY:
            self.scanned = now  # every row, now and then: the polled listings are small
            for entry in store.pending():  # SPEC R27: a forged row is never resumed, and said
                if entry.error is not None:
                    self.report(entry.session_id, f"refused: {entry.error} (nothing was run)")
        locked: set = set()
        todo = [(i, False) for i in store.answered()]
        todo += [(i, True) for i in store.cut_short()
                 if self.retry.get(i, (0.0, 0.0))[0] <= now]
        for session_id, continuing in todo:
            try:
                done += self.resume_soon(store, session_id, continuing)
                self.retry.pop(session_id, None)
            except SessionLockedError:
                locked.add(session_id)  # another worker has it open: it resumes it
                continue
            except SessionConflictError as exc:
                self.say(f"{session_id}: another worker wrote it first ({exc})")
            except SessionIntegrityError as exc:  # SPEC R27: forged, or another key's
                self.report(session_id, f"refused: {exc} (an answer, edit or waiting call "
                                        "this store's key did not sign: nothing was run)")
            except StoreError as exc:  # what the failed step began was not stored
                self.say(f"{session_id}: the store failed ({exc}); it is tried again at "
                         "the next look")
            except AgentflowError as exc:  # this session cannot go on; the others do
                self.report(session_id, f"{type(exc).__name__}: {exc}")
                if continuing:  # still cut short: tried again later, not at every look
                    pause = min(self.retry.get(session_id, (0.0, 5.0))[1] * 2, _LONGEST_RETRY)
                    self.retry[session_id] = (time.monotonic() + pause, pause)
        # An inbox holds the lease for the moment of its write, and the store tells of
        # the answer at its commit, before the lease is given back: a session locked now
        # and not at the last look is looked at again soon, not after the whole poll.
        self.soon = bool(locked - self.locked)
        self.locked = locked
        return done

    def serve(self, store, once: bool = False, sleep=time.sleep) -> None:
        """Sweep the store every ``--poll`` seconds until Ctrl-C (or once), through
        the store's failures: a database restart or a held lock is said once and
        waited out with growing pauses, never an exit (SPEC R22 addendum, fourth
        batch).

        Args:
            store: the open ``SessionStore`` (it reconnects by itself).
            once: one sweep, then return (``--once``).
            sleep: the function that waits (seconds); replaceable in tests.

        Raises:
            StoreError: with ``once``, the sweep failed.
        """
        pause = self.args.poll
        while True:
            try:
                self.sweep(store)
            except StoreError as exc:
                if once:
                    raise
                if self.trouble != str(exc):
                    self.say(f"the store failed: {exc} (trying again every "
                             f"{_LONGEST_PAUSE:g} s at most; Ctrl-C stops)")
                self.trouble = str(exc)
                pause = min(max(pause, 0.1) * 2, max(_LONGEST_PAUSE, self.args.poll))
                sleep(pause)
                continue
            if self.trouble is not None:
                self.say("the store answers again")
                self.trouble, pause = None, self.args.poll
            if once:
                return
            poll = min(self.args.poll, _AGAIN_SOON) if self.soon else self.args.poll
            if sleep is time.sleep:
                store.wait(poll)  # early when the store can tell of work
            else:
                sleep(poll)

    def report(self, session_id: str, problem: str) -> None:
        """Say once why a session is not resumed (again only when the reason changes).

        Args:
            session_id: the session's id (str).
            problem: why (str).
        """
        if self.reported.get(session_id) != problem:
            self.reported[session_id] = problem
            self.say(f"skipped {session_id}: {problem}")

    def resume_soon(self, store, session_id: str, continuing: bool) -> int:
        """``resume``, tried again twice 10 ms apart when the session is locked and was
        not at the last look: an inbox's write holds the lease a moment past the
        commit that woke this worker.

        Args:
            store: the open ``SessionStore``.
            session_id: the session's id (str).
            continuing: as for ``resume``.

        Returns:
            int: as ``resume``.

        Raises:
            SessionLockedError: it is still locked.
        """
        for attempt in range(3):
            try:
                return self.resume(store, session_id, continuing)
            except SessionLockedError:
                if attempt == 2 or session_id in self.locked:
                    raise
                time.sleep(0.01)
        raise AssertionError("unreachable")

    def resume(self, store, session_id: str, continuing: bool = False) -> int:
        """Resume one answered session (or continue one whose run was cut short),
        unless it is not this worker's to resume.

        Args:
            store: the open ``SessionStore``.
            session_id: the session's id (str).
            continuing: the session is one of ``store.cut_short()``: continued
                without answers (a call that may have run is answered
                ``interrupted``, R16; a stored result goes on to the model).

        Returns:
            int: 1 when it ran, else 0.
        """
        from .chat import Chat
        from .render import Output
        from .settings import SETTINGS
        with store.open(session_id) as session:
            ready = readiness(session)
            responses = ready_responses(session) if not continuing else []
            if (ready is None or ready[0] != ("cut short" if continuing else "answered")
                    or not (continuing or responses)):
                return 0  # another worker took it up first
            problem = settings_problem(session.state.get(SETTINGS), self.mine)
            chat = None
            if problem is None:
                try:
                    chat = Chat(self.chat_args, session, Output(False, self.out),
                                interactive=False, mcp_servers=self.servers)
                except UsageError as exc:
                    problem = str(exc)
            if chat is not None:
                lacking = sorted({c.name for c in session.pending_tool_calls
                                  if c.name not in chat.tools and (any(
                                      r.call_id == c.id and r.approved for r in responses)
                                      or continuing and c.id not in session.running)})
                if lacking:
                    problem = f"its approved calls need tools this worker lacks: " \
                              f"{', '.join(lacking)} (give the --tools or --mcp it ran with)"
            if problem is not None:
                self.report(session_id, problem)
                return 0
            outside = self.unsandboxed(session, responses)
            if outside:  # SPEC R27: the worker's own settings decide, not the answer
                reason = (f"call {', '.join(outside)} would run outside the sandbox "
                          "(sandbox: false), and this worker runs commands only in its "
                          "sandbox (--sandbox-required); answer it without leaving the "
                          "sandbox, or let a worker without --sandbox-required run it")
                refuse_answers(session, reason)
                self.say(f"refused the answers to {session_id}: {reason}")
                return 0
            self.reported.pop(session_id, None)
            self.chat_args.session = session_id
            chat.serving = True
            if continuing:
                self.say(f"continuing {session_id} (its run was cut short: {CUT_SHORT})")
            else:
                self.say(f"resuming {session_id} ({len(responses)} answer"
                         f"{'s' if len(responses) > 1 else ''})")
            try:
                status = chat.converse([], responses)
            except ApprovalError as exc:
                refuse_answers(session, str(exc))
                self.say(f"refused the answers to {session_id}: {exc}")
                return 0
        if status == 130:  # Ctrl-C, which the chat's run took: it stops the worker too
            self.say(f"{session_id}: stopped by Ctrl-C; its run is left for a worker to "
                     "continue")
            raise KeyboardInterrupt
        self.resumed += 1
        self.say(f"{session_id}: {'paused again' if status == 3 else 'done'}")
        return 1


    def unsandboxed(self, session, responses) -> list[str]:
        """The approved calls that would run outside the sandbox (``"sandbox":
        false``, in the call or in the edit approved) where this worker's settings
        forbid it (``--sandbox-required``): an edit's ``sandbox`` field is checked
        like any other argument (SPEC R27).

        Args:
            session: the open ``AgentSession``.
            responses: the ``ToolApprovalResponse`` list it is resumed with.

        Returns:
            list[str]: their call ids, in call order; empty when none.
        """
        if not self.chat_args.sandbox_required:
            return []
        calls = {c.id: c for c in session.pending_tool_calls}
        outside = []
        for response in responses:
            call = calls.get(response.call_id)
            if not response.approved or call is None or call.name != "run_command":
                continue
            arguments = response.arguments
            if arguments is None:
                import json
                try:
                    arguments = json.loads(call.arguments or "{}")
                except ValueError:
                    continue  # never run: its result says why (SPEC R14)
            if isinstance(arguments, dict) and arguments.get("sandbox") is False:
                outside.append(call.id)
        return outside


def worker_command(args, out=None) -> int:
    """``agentflow worker``: resume answered sessions until Ctrl-C (or, with
    ``--once``, those answered now).

    Args:
        args: the ``argparse.Namespace`` of ``add_arguments``' flags.
        out: a text stream for the log; default ``sys.stdout``.

    Returns:
        int: the exit status: 0, or 2 for bad usage (a flag, a missing API key).

    Raises:
        StoreError: the store refuses this worker (a wrong password, not a database),
            or with ``--once`` it failed; a store that is down is waited for.
    """
    from .servers import mcp_summary, start_mcp_servers
    out = out or sys.stdout
    try:
        with contextlib.ExitStack() as stack:
            servers = start_mcp_servers(args.mcp, stack, args.mcp_approval)
            for server in servers:
                out.write(mcp_summary(server) + "\n")
            from .store_key import store_secret
            secret = store_secret(args, "worker")
            worker = Worker(args, servers, out)
            store = stack.enter_context(open_store_waiting(args.store, secret, worker.say,
                                                           _LONGEST_PAUSE))
            worker.say(f"serving {_shown_store(args.store)}")
            worker.serve(store, args.once)
            return 0
    except UsageError as exc:
        print(f"agentflow: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


def _shown_store(url: str) -> str:
    from ..redact import mask_url
    return mask_url(url)
