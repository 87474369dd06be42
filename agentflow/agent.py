"""``ChatClientAgent``, the caller's entry point, and its context providers
(SPEC §2, R1, R10).

The agent assembles the prompt (instructions, context providers, session history),
hands it and the run's input to the ``FunctionInvokingChatClient``, forwards every
update, and appends each new message to the session as the loop reports it. Where the
input goes (R6) and when it is stored (R10) is the loop's business, in one place.

The loop writes through a ``SessionJournal`` (``journal.py``): each message it stores
joins the session, a call about to run goes into ``session.running`` (the write-ahead
record, R16) and its result takes it out, and a session opened from a store is saved
(``session.checkpoint()``) after every step: each message the loop stores, each call
about to run, the ledger's records (``records()``), and before the final ``Finish``.

A context provider is code that adds to the prompt before a run and sees what the run
produced after it (R1): a memory, a retrieval step or a clock are typical ones.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from . import tracing
from .function_invoking import FunctionInvokingChatClient
from .journal import SessionJournal
from .session import AgentSession
from .types import AgentResponseUpdate, AgentRunOptions, ChatMessage, Finish


@dataclass
class Context:
    """What a context provider adds to one run (SPEC R1).

    Attributes:
        instructions: str sent as a system message after the agent's own, or ``None``.
        messages: list of ``ChatMessage`` sent after that and before the session
            history. Neither is stored in the session.
    """

    instructions: str | None = None
    messages: list[ChatMessage] = field(default_factory=list)


class ContextProvider:
    """Base class of context providers; override either hook. Providers run in the
    order given to the agent (SPEC R1)."""

    def on_invoking(self, messages: list[ChatMessage], session) -> Context | None:
        """Called before the first model call of a run.

        Args:
            messages: the run's input messages (list of ``ChatMessage``).
            session: the ``AgentSession``.

        Returns:
            A ``Context`` to add to this run's prompt, or ``None``.
        """
        return None

    def on_invoked(self, request_messages: list[ChatMessage],
                   response_messages: list[ChatMessage], session) -> None:
        """Called after a run ended normally, whatever its finish reason.

        Args:
            request_messages: the run's input messages.
            response_messages: every message the run added to the session after them
                (assistant and tool), oldest first.
            session: the ``AgentSession``.
        """


class ChatClientAgent:
    """An agent: a chat client, instructions, tools and context providers.

    Args:
        chat_client: a provider client such as ``OpenAIChatClient``, or an already
            built ``FunctionInvokingChatClient`` (then ``tools`` must be empty).
        instructions: the system prompt (str), sent first on every model call.
        tools: ``Tool`` objects or plain functions; wrap risky ones in
            ``ApprovalRequiredTool``.
        context_providers: ``ContextProvider`` objects, run in order (R1).
        options: the default ``AgentRunOptions`` of every run.
        approval_ttl: seconds an approval request stays valid (``None``: forever); a
            later answer counts as a rejection with reason ``approval expired``.
        policy: an ``agentflow.policy.ApprovalPolicy`` or a list of them, in layer
            order, after a run's own policy and the session's grants (SPEC R19).
        name: the agent's name (str), for traces (``gen_ai.agent.name``,
            ``agentflow.tracing``); ``None``: ``agentflow``.

    Raises:
        PolicyError: a policy rule that can never match the tools (R19).
    """

    def __init__(self, chat_client, *, instructions: str | None = None,
                 tools: Iterable = (), context_providers: Iterable[ContextProvider] = (),
                 options: AgentRunOptions | None = None, approval_ttl: float | None = None,
                 policy=None, name: str | None = None):
        self.name = name
        if isinstance(chat_client, FunctionInvokingChatClient):
            if list(tools) or approval_ttl is not None or policy is not None:
                raise ValueError("give tools, approval_ttl and policy to the "
                                 "FunctionInvokingChatClient, not to the agent, when you "
                                 "pass one")
            self.chat_client = chat_client
        else:
            self.chat_client = FunctionInvokingChatClient(chat_client, tools,
                                                          approval_ttl=approval_ttl,
                                                          policy=policy)
        self.instructions = instructions
        self.context_providers = list(context_providers)
        self.options = options or AgentRunOptions()

    def run(self, messages: str | ChatMessage | Iterable[ChatMessage] = (),
            session: AgentSession | None = None,
            options: AgentRunOptions | None = None) -> Iterator[AgentResponseUpdate]:
        """Run one turn of the conversation; a generator of updates (SPEC R1–R10).

        Args:
            messages: the new input: a str (one user message), a ``ChatMessage``, an
                OpenAI message dict, or a list of those; empty when resuming.
            session: the ``AgentSession`` to read and extend (a throwaway one when
                ``None``).
            options: this run's ``AgentRunOptions``, e.g.
                ``options.with_tool_approval_responses([...])`` to resume (R4).

        Yields:
            AgentResponseUpdate: text, reasoning, tool-call and ``ToolResult`` updates
            as they come; the last is one ``Finish`` (R9). ``AWAITING_APPROVAL``
            means: show the ``ToolApprovalRequest`` updates to a human, then call
            ``run`` again with the responses.

        Raises:
            TypeError: at once, for arguments of the wrong type.
            ApprovalError: while iterating, before anything runs; the session is
                unchanged (R11, R17, R20).
            ProviderError: while iterating; the session holds every completed step
                and nothing of the failed one (R10).
            SessionConflictError: a session opened from a store was written by
                another worker first; nothing more ran (R16, R22).
        """
        new_input = _as_messages(messages)
        if session is not None and not isinstance(session, AgentSession):
            raise TypeError(f"session must be an AgentSession, got {type(session).__name__}")
        if options is not None and not isinstance(options, AgentRunOptions):
            raise TypeError(f"options must be AgentRunOptions, got {type(options).__name__}")
        session = session if session is not None else AgentSession()
        return self._run(new_input, session, options or self.options)

    def _prompt(self, new_input: list[ChatMessage],
                session: AgentSession | None) -> list[ChatMessage]:
        """What a run sends before its history (SPEC R1): the instructions as a system
        message, then each context provider's instructions and messages in order.

        Args:
            new_input: the run's input ``ChatMessage`` list (handed to the providers).
            session: the ``AgentSession`` handed to the providers, or ``None`` for a
                loop run without one (its caller keeps the history).

        Returns:
            list[ChatMessage]: oldest first; the history is not included.
        """
        prompt: list[ChatMessage] = []
        if self.instructions:
            prompt.append(ChatMessage.system(self.instructions))
        for provider in self.context_providers:
            context = provider.on_invoking(list(new_input), session)
            if context is not None:
                if context.instructions:
                    prompt.append(ChatMessage.system(context.instructions))
                prompt.extend(context.messages)
        return prompt

    def _run(self, new_input: list[ChatMessage], session: AgentSession,
             options: AgentRunOptions) -> Iterator[AgentResponseUpdate]:
        prompt = self._prompt(new_input, session) + session.messages
        journal = SessionJournal(session, new_input)
        traced = tracing.start(self.name, session, self.chat_client)
        audited = len(session.approvals.audit)
        updates = self.chat_client.run(prompt, options, journal, new_input)
        if traced is not None:
            updates = traced.stepping(updates)
        with contextlib.closing(updates):  # a caller's close() reaches the loop at once
            for update in updates:
                if isinstance(update, Finish) and traced is not None:
                    # the journal saved the session just before the Finish (finished())
                    traced.answered([r for r in session.approvals.audit[audited:]
                                     if r.outcome in tracing.HUMAN_OUTCOMES])
                yield update
        for provider in self.context_providers:
            provider.on_invoked(list(new_input), journal.added, session)


def _as_messages(messages) -> list[ChatMessage]:
    """A str, a ``ChatMessage``, an OpenAI message dict, or a list of those."""
    if isinstance(messages, (str, ChatMessage, dict)):
        messages = [messages]
    try:
        items = list(messages)
    except TypeError:
        raise TypeError(f"messages must be a str, a ChatMessage or a list of them, got "
                        f"{type(messages).__name__}") from None
    result = []
    for item in items:
        if isinstance(item, str):
            item = ChatMessage.user(item)
        elif isinstance(item, dict):
            item = ChatMessage.from_openai(item)
        elif not isinstance(item, ChatMessage):
            raise TypeError(f"each message must be a str, a ChatMessage or an OpenAI "
                            f"message dict, got {type(item).__name__}")
        result.append(item)
    return result
