"""Context providers: code that adds to the prompt before a run and sees what the run
produced after it (SPEC R1). A memory, a retrieval step or a clock are typical ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .types import ChatMessage


@dataclass
class Context:
    """What a provider adds to one run: ``instructions`` (str, sent as a system
    message after the agent's own) and ``messages`` (list of ``ChatMessage``, sent
    after that and before the session history). Neither is stored in the session."""

    instructions: str | None = None
    messages: list[ChatMessage] = field(default_factory=list)


class ContextProvider:
    """Base class; override either hook. Providers run in the order given to the agent."""

    def on_invoking(self, messages: list[ChatMessage], session) -> Context | None:
        """Before the first model call of a run. ``messages`` are the run's input
        messages, ``session`` the ``AgentSession``. Return a ``Context`` or ``None``."""
        return None

    def on_invoked(self, request_messages: list[ChatMessage],
                   response_messages: list[ChatMessage], session) -> None:
        """After a run ended normally (whatever its finish reason).
        ``request_messages`` are the input messages, ``response_messages`` every
        message the run added to the session after them (assistant and tool)."""
