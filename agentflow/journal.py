"""``Journal``: what the tool loop writes, and where it goes (SPEC R10, R16, R23).

The loop (``function_invoking.py``) never knows where a run is kept. It hands one
journal each thing that must outlast its step, at the moment its docstring names, and
reads from it what earlier runs left: the approval ledger and the calls that started
and never finished. A journal has four writes:

* ``message(message)``: a completed message (the run's input, an assistant turn, a
  tool result) joins the history (R10);
* ``call_started(call)``: a call is about to run; this must be durable before its tool
  runs (R16, the write-ahead record), and an exception stops the run before it does;
* ``records()``: the ledger (``approvals``) changed and no new message carries it: a
  stored turn judged again pauses, or a stopped resume asks again and holds the run's
  input (R23); durable before the first ``ToolApprovalRequest`` is yielded;
* ``finished()``: the run is about to yield its ``Finish`` (R9).

``Journal`` keeps the messages in memory (``messages``) and saves nothing: a loop run
without an agent. ``SessionJournal`` writes into an ``AgentSession`` and saves it
(``session.checkpoint()``) after each write that must be durable: how
``ChatClientAgent`` persists a run.
"""

from __future__ import annotations

import time
from typing import Collection, Iterable

from .types import ChatMessage, MessageRole, ToolCall

# The session state key of a run that has begun running calls and has not ended: stored
# with the first start record, taken out with the run's last turn (SPEC R22 addendum,
# fourth batch). A session stored with it, and without a pause, was cut short.
RUN_MARK = "agentflow.run"


class Journal:
    """Where one run of the loop writes, in memory (see the module docstring).

    Args:
        approvals: the ``ApprovalLedger`` the gate records in and the resume checks,
            or ``None`` (then only the history is checked).
        started: ids (str) of calls an earlier run started and never finished; the
            loop answers them ``Error: interrupted: …`` (R16).

    Attributes:
        approvals: as given.
        started: frozenset of str, as given.
        messages: list of ``ChatMessage`` the run stored, oldest first.
    """

    def __init__(self, approvals=None, started: Collection[str] = ()):
        self.approvals = approvals
        self.started = frozenset(started)
        self.messages: list[ChatMessage] = []

    def message(self, message: ChatMessage) -> None:
        """A completed message joins the history (R10).

        Args:
            message: the ``ChatMessage`` (the run's input, an assistant turn or a tool
                result), in the order the run completed them.
        """
        self.messages.append(message)

    def call_started(self, call: ToolCall) -> None:
        """A call is about to run (R16); nothing to make durable in memory.

        Args:
            call: the ``ToolCall`` whose tool runs next.
        """

    def records(self) -> None:
        """New records in ``approvals`` that no message carries (R23); already in memory."""

    def finished(self) -> None:
        """The run is about to yield its ``Finish``."""


class SessionJournal(Journal):
    """A journal that writes into an ``AgentSession`` and saves it (SPEC R10, R16, R22).

    Each message is appended to ``session.messages``; a tool result also takes its call
    out of ``session.running``. The session is saved (``checkpoint(changed=True)``)
    after every message but the run's own input (saved with the next write: the model's
    first completed turn, or the end), after each call recorded in ``running``, and
    at each ``records()``; and once more (``checkpoint()``, skipped when nothing
    changed) before the ``Finish``. From its first start record to its last turn (or
    its ``finished()``), the session's ``state`` holds ``RUN_MARK``: a session stored
    with it was cut short, and a worker continues it (SPEC R22 addendum).

    Args:
        session: the ``AgentSession`` the run reads and extends.
        given: the run's input messages (iterable of ``ChatMessage``).

    Attributes:
        added: the messages the run added besides its input, oldest first (what a
            context provider's ``on_invoked`` is shown, R1).

    Raises (from the writes):
        SessionConflictError: another worker wrote the session first (R16, R22).
        OSError: the session's store could not be written.
    """

    def __init__(self, session, given: Iterable[ChatMessage] = ()):
        super().__init__(session.approvals, session.running)
        self.session = session
        self.messages = session.messages
        self.added: list[ChatMessage] = []
        self._given = {id(message) for message in given}

    def message(self, message: ChatMessage) -> None:
        self.session.messages.append(message)
        if message.role is MessageRole.TOOL:
            self.session.running.pop(message.tool_call_id, None)  # its result is in (R16)
        elif message.role is MessageRole.ASSISTANT and not message.tool_calls:
            self.session.state.pop(RUN_MARK, None)  # the run's last turn: it ends here
        if id(message) not in self._given:  # the input is saved with the model's turn
            self.added.append(message)
            self.session.checkpoint(changed=True)

    def call_started(self, call: ToolCall) -> None:
        now = time.time()
        self.session.running[call.id] = {"tool": call.name, "started_at": now}
        self.session.state.setdefault(RUN_MARK, {"since": now})
        self.session.checkpoint(changed=True)

    def records(self) -> None:
        self.session.checkpoint(changed=True)

    def finished(self) -> None:
        self.session.state.pop(RUN_MARK, None)
        self.session.checkpoint()  # the approval records, input stored at the end
