"""``AgentSession``: the conversation history, as plain data (SPEC R15).

A session is what a paused run leaves behind: the messages so far, ending with the
assistant message whose calls wait for approval. It round-trips through JSON, so a
run paused in one process can be resumed in another.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field

from .types import ChatMessage, ToolCall

SCHEMA_VERSION = 1


@dataclass
class AgentSession:
    """The history of one conversation.

    ``messages``: list of ``ChatMessage``, oldest first, without the agent's
    instructions (those are added at every run, SPEC R1). ``state``: a JSON-safe dict
    that context providers may use to keep their own data across runs.
    """

    messages: list[ChatMessage] = field(default_factory=list)
    state: dict = field(default_factory=dict)

    @property
    def pending_tool_calls(self) -> list[ToolCall]:
        """The calls of the last tool-call turn that have no result yet: the ones a
        resume will answer (SPEC R4). Empty when the session is not paused."""
        from .function_invoking import pending_calls
        return pending_calls(self.messages)[1]

    def to_dict(self) -> dict:
        """A JSON-safe dict: ``{"schema_version": 1, "messages": [OpenAI message
        dicts], "state": {...}}``."""
        return {"schema_version": SCHEMA_VERSION,
                "messages": [m.to_openai() for m in self.messages],
                "state": self.state}

    @classmethod
    def from_dict(cls, data: dict) -> "AgentSession":
        """The inverse of ``to_dict``. Raises ``ValueError`` for a missing or newer
        ``schema_version``."""
        version = data.get("schema_version") if isinstance(data, dict) else None
        if version != SCHEMA_VERSION:
            raise ValueError(f"unsupported session schema_version {version!r}; this "
                             f"agentflow reads version {SCHEMA_VERSION}")
        return cls(messages=[ChatMessage.from_openai(m) for m in data.get("messages", [])],
                   state=dict(data.get("state") or {}))

    def save(self, path) -> None:
        """Write the session as JSON to ``path`` atomically: a temporary file in the
        same folder, then a rename, so a crash never leaves half a file (SPEC R10)."""
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"cannot save the session to {path}: the folder "
                                    f"{folder} does not exist")
        fd, tmp = tempfile.mkstemp(prefix=".session-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.to_dict(), handle, ensure_ascii=False, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, path) -> "AgentSession":
        """Read a session written by ``save``. Raises ``OSError`` when the file
        cannot be read and ``ValueError`` when it is not a session."""
        with open(path, encoding="utf-8") as handle:
            try:
                data = json.load(handle)
            except ValueError as exc:
                raise ValueError(f"{os.fspath(path)} is not a saved session: {exc}") from None
        try:
            return cls.from_dict(data)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{os.fspath(path)} is not a saved session: {exc}") from None
