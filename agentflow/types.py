"""The public data types of SPEC §3: messages, the updates a run yields, and options.

Everything here is a plain dataclass or enum with no behaviour beyond converting to
and from the OpenAI chat-completions wire form.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from typing import Any


class MessageRole(str, enum.Enum):
    """Who wrote a message. Values are the OpenAI role strings."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class FinishReason(str, enum.Enum):
    """Why a run (or one model turn) ended.

    ``TOOL_CALLS`` only passes between the provider client and the decorator; a
    caller of ``ChatClientAgent.run`` never sees it (SPEC R9).
    """

    STOP = "stop"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"
    TOOL_CALLS = "tool_calls"
    AWAITING_APPROVAL = "awaiting_approval"
    MAX_ROUNDS = "max_rounds"


class Decision(str, enum.Enum):
    """What is decided about one call, by a policy rule or by the gate (SPEC R3, R18,
    R19): the one spelling of a decision. The values are the policy file's keys.

    ``ALLOW``: it runs without asking; ``ASK``: it waits for a human; ``DENY``: it
    never runs (``Rejected: denied by policy (<rule>)``).
    """

    DENY = "deny"
    ASK = "ask"
    ALLOW = "allow"

    def __str__(self) -> str:
        return self.value

    @property
    def audited(self) -> str:
        """The audit trail's outcome for a decision taken without a human:
        ``allowed``, ``asked`` or ``denied`` (``AuditRecord.outcome``)."""
        return {"deny": "denied", "ask": "asked", "allow": "allowed"}[self.value]


def json_object(text: str) -> dict | None:
    """A model's argument text parsed as a tool needs it (SPEC R14, R18).

    Args:
        text: the call's JSON arguments (str); empty means ``{}``.

    Returns:
        dict | None: the JSON object, or ``None`` when the text is not valid JSON
        (nesting too deep for the decoder included) or not an object.
    """
    try:
        value = json.loads(text or "{}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


@dataclass
class ToolCall:
    """One tool call the model made (SPEC §3).

    Attributes:
        id: the ``tool_call_id`` (str), unique within the conversation (SPEC §6).
        name: the tool's name (str).
        arguments: the raw JSON text the model produced (str), not parsed: a model may
            produce invalid JSON and the history must keep exactly what it sent.
        extra: the keys of the call that agentflow does not know (dict), as the
            provider sent them (Gemini's ``extra_content`` with its
            ``thought_signature``), so that they can be sent back exactly as received
            (SPEC R21).
    """

    id: str
    name: str
    arguments: str = "{}"
    extra: dict = field(default_factory=dict)

    @property
    def parsed_arguments(self) -> dict | None:
        """The arguments as the JSON object they must be (SPEC R14): ``json_object``
        of the text; ``None`` for a call that never runs and is never put to a person
        (R14, R18)."""
        return json_object(self.arguments)

    def sent_arguments(self) -> str:
        """The arguments as a request sends them back to the provider (SPEC §6, fourth
        batch): the stored text when it is a JSON object, else ``{}``, so a server that
        parses old arguments (vLLM, llama-server) does not refuse every later request.
        The session keeps the text as received; the call's result says what was wrong.

        Returns:
            str: JSON text of an object.
        """
        return self.arguments if self.parsed_arguments is not None else "{}"

    def to_openai(self) -> dict:
        """The OpenAI form: ``{"id", "type": "function", "function": {"name",
        "arguments"}}``, then ``extra``'s keys (an extra key never replaces a known
        one)."""
        data = {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}
        return _with_extra(data, self.extra)

    @classmethod
    def from_openai(cls, data: dict) -> "ToolCall":
        """The inverse of ``to_openai``; missing arguments mean ``{}``.

        Args:
            data: one entry of an OpenAI ``tool_calls`` list (dict); keys other than
                ``id``, ``type``, ``function`` and ``index`` go to ``extra`` (SPEC R21).

        Returns:
            ToolCall: the call.

        Raises:
            KeyError: ``data`` has no ``id``.
        """
        function = data.get("function") or {}
        return cls(id=data["id"], name=function.get("name", ""),
                   arguments=function.get("arguments") or "{}",
                   extra={k: v for k, v in data.items() if k not in _CALL_KEYS})


@dataclass
class ChatMessage:
    """One message of a conversation (SPEC §3).

    Attributes:
        role: the ``MessageRole`` (a role string is converted).
        content: the text (str), or ``None`` on an assistant message that only called
            tools.
        tool_calls: the ``ToolCall`` list of an assistant message that called tools,
            else empty.
        tool_call_id: on a ``TOOL`` message, the id (str) of the call it answers.
        reasoning_content: the reasoning (str) the model showed in this turn, kept
            with it, or ``None``.
        extra: the keys of the message that agentflow does not know (dict), as the
            provider sent them.

    Reasoning and ``extra`` are stored with the session and survive save/load; what
    of them a request carries is decided by the provider profile
    (``agentflow.profiles``, SPEC R21).
    """

    role: MessageRole
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    reasoning_content: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        self.role = MessageRole(self.role)

    @classmethod
    def system(cls, content: str) -> "ChatMessage":
        """A system message.

        Args:
            content: the instructions (str).

        Returns:
            ChatMessage: role ``SYSTEM``.
        """
        return cls(MessageRole.SYSTEM, content)

    @classmethod
    def user(cls, content: str) -> "ChatMessage":
        """A user message.

        Args:
            content: what the user wrote (str).

        Returns:
            ChatMessage: role ``USER``.
        """
        return cls(MessageRole.USER, content)

    @classmethod
    def assistant(cls, content: str | None = None, tool_calls: list[ToolCall] | None = None,
                  reasoning_content: str | None = None,
                  extra: dict | None = None) -> "ChatMessage":
        """An assistant message.

        Args:
            content: the reply text (str), or ``None`` for a turn that only called tools.
            tool_calls: the turn's calls (list of ``ToolCall``, copied), in the order
                their stream slots opened (SPEC §6); ``None`` means none.
            reasoning_content: the turn's reasoning (str) or ``None`` (SPEC R21).
            extra: the provider's unknown message keys (dict, copied; SPEC R21).

        Returns:
            ChatMessage: role ``ASSISTANT``.
        """
        return cls(MessageRole.ASSISTANT, content, list(tool_calls or []),
                   reasoning_content=reasoning_content, extra=dict(extra or {}))

    @classmethod
    def tool(cls, result: str, call_id: str) -> "ChatMessage":
        """A tool result message (SPEC R2, R4).

        Args:
            result: the tool's result text (str), ``Rejected: …`` (R7) or ``Error: …``
                (R13, R14).
            call_id: the ``tool_call_id`` (str) of the call it answers.

        Returns:
            ChatMessage: role ``TOOL``.
        """
        return cls(MessageRole.TOOL, result, tool_call_id=call_id)

    def to_openai(self) -> dict:
        """The message as stored: OpenAI's chat-completions dict form, plus
        ``reasoning_content`` when there is any and the ``extra`` keys after the known
        ones. This is what the provider gave; a request is built from it by a provider
        profile, which decides what of it is sent (SPEC R21)."""
        data: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.reasoning_content:
            data["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            data["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        return _with_extra(data, self.extra)

    @classmethod
    def from_openai(cls, data: dict) -> "ChatMessage":
        """Build a message from its dict form (the inverse of ``to_openai``).

        Args:
            data: an OpenAI chat message dict; keys it does not know go to ``extra``
                (SPEC R21).

        Returns:
            ChatMessage: the message.

        Raises:
            KeyError: ``data`` has no ``role``, or a call has no ``id``.
            ValueError: ``role`` is not one of the four role strings.
        """
        return cls(role=MessageRole(data["role"]), content=data.get("content"),
                   tool_calls=[ToolCall.from_openai(c) for c in data.get("tool_calls") or []],
                   tool_call_id=data.get("tool_call_id"),
                   reasoning_content=data.get("reasoning_content"),
                   extra={k: v for k, v in data.items() if k not in _MESSAGE_KEYS})


# The keys ToolCall and ChatMessage read themselves; any other key is kept in ``extra``.
# "index" is the stream's slot number, not part of a stored call.
_CALL_KEYS = frozenset({"id", "type", "function", "index"})
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id",
                           "reasoning_content"})


def _with_extra(data: dict, extra: dict) -> dict:
    for key, value in extra.items():
        data.setdefault(key, value)
    return data


@dataclass
class Usage:
    """Token counts (tokens). On a run's ``Finish`` they are summed over every model
    call of that run."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: "Usage | None") -> "Usage":
        if other is None:
            return self
        return Usage(self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens,
                     self.total_tokens + other.total_tokens)


# -- updates: what every ``run`` generator yields ------------------------------------

@dataclass
class AgentResponseUpdate:
    """Base class of every update a ``run`` generator yields."""


@dataclass
class TextDelta(AgentResponseUpdate):
    """A piece of the model's reply text (str), in arrival order; forwarded as soon as
    its bytes arrive (SPEC §6, R9)."""

    text: str


@dataclass
class ReasoningDelta(AgentResponseUpdate):
    """A piece of reasoning text (str) from ``reasoning_content`` / ``reasoning`` /
    thinking parts. Shown to the caller; sent back only where a provider profile
    requires it (SPEC §3, R21)."""

    text: str


@dataclass
class ToolCallStart(AgentResponseUpdate):
    """The first time a tool call is seen in the stream (SPEC §3).

    Attributes:
        call_id: the call's ``tool_call_id`` (str; invented when the provider sent
            none, SPEC §6).
        name: the tool's name (str).
        index: the call's slot in the turn (int, from 0).
    """

    call_id: str
    name: str
    index: int


@dataclass
class ToolCallArgs(AgentResponseUpdate):
    """One fragment of a call's JSON arguments, in arrival order: ``call_id`` (str)
    names the call, ``delta`` (str) is the fragment. Joined, they are the call's
    ``arguments`` (SPEC §6)."""

    call_id: str
    delta: str


@dataclass
class ToolCallEnd(AgentResponseUpdate):
    """The call ``call_id`` (str) is complete; sent once per call, in call order, when
    the model's turn ends (SPEC §3)."""

    call_id: str


@dataclass
class ToolResult(AgentResponseUpdate):
    """A tool call was answered (SPEC §3, R4, R7, R13).

    Attributes:
        call_id: the answered call's ``tool_call_id`` (str).
        name: the tool's name (str).
        result: exactly the text sent back to the model: the tool's output,
            ``Rejected: <reason>`` or ``Error: …``.
    """

    call_id: str
    name: str
    result: str


@dataclass
class ToolApprovalRequest(AgentResponseUpdate):
    """A call that waits for the caller's decision (SPEC R3).

    Attributes:
        call_id: the call's ``tool_call_id`` (str).
        name: the tool's name (str).
        arguments: the parsed JSON value, or ``None`` when the model's text is not
            valid JSON.
        description: the tool's description (str).
        digest: SHA-256 (64 hex digits) of the RFC 8785 canonical arguments, which the
            decision is bound to (``agentflow.canonical``).
        request_id: the pause's id (str, 32 hex digits), the same for every request of
            one pause and unique to that pause of that session; ``""`` where no ledger
            keeps the pause (SPEC R24).

    Answer it with ``request.approve()`` or ``request.reject(reason)``, which carry the
    call id, the digest and the request id, so the answer cannot be applied to other
    arguments, another pause or another session (R24). Why the call
    needs approval (R18, R19) is recorded with its pending approval:
    ``session.approvals.pending[…].why``.
    """

    call_id: str
    name: str
    arguments: Any
    description: str
    digest: str = ""
    request_id: str = ""

    def approve(self, approver: str | None = None, *, arguments: dict | None = None,
                grant: "str | Grant | None" = None,
                grant_ttl: float | None = None) -> "ToolApprovalResponse":
        """A ``ToolApprovalResponse`` that lets this call run (SPEC R4).

        Args:
            approver: who decided (str), kept in the session's audit trail.
            arguments: edited arguments (dict) to run instead of the model's; checked
                against the tool's schema before anything runs (R20). The digest still
                binds the answer to the arguments shown.
            grant: an allow rule (str, e.g. ``"run_command(git status)"``), or a list of
                them, added to the session's grants, so matching calls run without
                asking (R19).
            grant_ttl: seconds the grant lasts (``None``: as long as the session).
        """
        if grant_ttl is not None:
            if grant is None:
                raise TypeError("grant_ttl needs a grant")
            rules = grant if isinstance(grant, (list, tuple)) else [grant]
            grant = [Grant(r if isinstance(r, str) else r.rule, grant_ttl) for r in rules]
        return ToolApprovalResponse(self.call_id, True, digest=self.digest or None,
                                    approver=approver, arguments=arguments, grant=grant,
                                    request_id=self.request_id or None)

    def reject(self, reason: str | None = None,
               approver: str | None = None) -> "ToolApprovalResponse":
        """A ``ToolApprovalResponse`` that refuses this call: the model is told
        ``Rejected: <reason>``, ``User denied`` when the reason is missing or blank
        (SPEC R7).

        Args:
            reason: why (str), sent to the model as is.
            approver: who decided (str), kept in the session's audit trail.
        """
        return ToolApprovalResponse(self.call_id, False, reason, self.digest or None,
                                    approver, request_id=self.request_id or None)


@dataclass
class Finish(AgentResponseUpdate):
    """Always the last update of a run (SPEC R9), and of one model turn.

    Attributes:
        finish_reason: why it ended (``FinishReason``).
        usage: token counts (``Usage``) summed over the run's model calls, or ``None``
            when no model call reported them.
        message: on a provider client's ``Finish`` (one model turn), the assembled
            assistant ``ChatMessage`` of that turn, which the tool loop stores as it
            is; ``None`` on the ``Finish`` a caller of ``run`` sees. Not compared.
        model: on a provider client's ``Finish``, the ``model`` its chunks named (the
            model that answered, for traces), or ``None``. Not compared.
    """

    finish_reason: FinishReason
    usage: Usage | None = None
    message: ChatMessage | None = field(default=None, compare=False, repr=False)
    model: str | None = field(default=None, compare=False, repr=False)


# -- the caller's side ---------------------------------------------------------------

@dataclass(frozen=True)
class Grant:
    """An allow rule a human grants while approving (SPEC R19): ``rule`` (str, e.g.
    ``"run_command(git status)"``) joins the session's grants for ``ttl`` seconds from
    the decision (``None``: as long as the session)."""

    rule: str
    ttl: float | None = None

    def __post_init__(self):
        if not isinstance(self.rule, str):
            raise TypeError(f"Grant.rule must be a str, got {type(self.rule).__name__}")
        if self.ttl is not None and (isinstance(self.ttl, bool)
                                     or not isinstance(self.ttl, (int, float))
                                     or self.ttl <= 0):
            raise ValueError(f"Grant.ttl must be a positive number of seconds or None, got "
                             f"{self.ttl!r}")


@dataclass(frozen=True)
class ToolApprovalResponse:
    """The caller's decision on one ``ToolApprovalRequest`` (matched by ``call_id``).

    ``reason`` (str or None) is sent to the model on rejection as
    ``Rejected: <reason>`` (SPEC R7); ignored when ``approved`` is true.
    ``digest`` (optional): the ``ToolApprovalRequest.digest`` the human saw; when given
    it must match, so a decision cannot be applied to other arguments.
    ``approver`` (optional): who decided, kept in the session's audit trail.
    ``arguments`` (optional dict, approvals only): the call runs with these instead, once
    they fit the tool's schema; the stored call is rewritten to them (R20).
    ``grant`` (optional, approvals only): an allow rule (str or ``Grant``), or a list of
    them, added to the session, so matching calls no longer ask (R19).
    ``request_id`` (optional): the ``ToolApprovalRequest.request_id`` answered; when
    given it must be the pause's, so an answer cannot be applied to another pause or
    another session (R24).
    """

    @property
    def grants(self) -> tuple:
        """``grant`` as a tuple of ``Grant`` objects (empty without one)."""
        if self.grant is None:
            return ()
        return self.grant if isinstance(self.grant, tuple) else (self.grant,)


    call_id: str
    approved: bool
    reason: str | None = None
    digest: str | None = None
    approver: str | None = None
    arguments: dict | None = None
    grant: "str | Grant | None" = None
    request_id: str | None = None

    def __post_init__(self):
        # A "no" typed as a string is truthy: refuse anything but a real bool, since
        # this one field decides whether a risky call runs.
        if not isinstance(self.approved, bool):
            raise TypeError(f"ToolApprovalResponse.approved must be True or False, got "
                            f"{self.approved!r} ({type(self.approved).__name__})")
        if not isinstance(self.call_id, str):
            raise TypeError(f"ToolApprovalResponse.call_id must be a str, got "
                            f"{type(self.call_id).__name__}")
        for name in ("reason", "digest", "approver", "request_id"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"ToolApprovalResponse.{name} must be a str or None, got "
                                f"{type(value).__name__}")
        if self.arguments is not None and not isinstance(self.arguments, dict):
            raise TypeError(f"ToolApprovalResponse.arguments must be a dict (a JSON "
                            f"object) or None, got {type(self.arguments).__name__}")
        if isinstance(self.grant, (list, tuple)):  # one rule per command of a line
            object.__setattr__(self, "grant", tuple(_grant(g) for g in self.grant))
        elif self.grant is not None:
            object.__setattr__(self, "grant", _grant(self.grant))
        if not self.approved and (self.arguments is not None or self.grant is not None):
            raise TypeError("edited arguments and grants go with an approval "
                            "(approved=True), not with a rejection")


def _grant(value) -> Grant:
    if isinstance(value, str):
        return Grant(value)
    if not isinstance(value, Grant):
        raise TypeError(f"ToolApprovalResponse.grant must be a rule (str), a Grant, a list "
                        f"of them or None, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class AgentRunOptions:
    """Options of one run.

    ``tool_approval_responses``: the caller's decisions on a paused run (SPEC R4).
    ``max_rounds``: the limit on rounds of one run (SPEC R8), at least 1.
    ``policy``: an ``agentflow.policy.ApprovalPolicy`` for this run, the first layer of
    rules, before the session's grants and the agent's policies (SPEC R19).
    The remaining fields are chat options passed to the provider when not ``None``;
    ``extra`` (dict) is merged into the request body as is.
    """

    tool_approval_responses: tuple[ToolApprovalResponse, ...] = ()
    max_rounds: int = 40
    model: str | None = None
    temperature: float | None = None
    tool_choice: str | dict | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    extra: dict = field(default_factory=dict)
    policy: Any = None

    def __post_init__(self):
        responses = tuple(self.tool_approval_responses)
        for response in responses:
            if not isinstance(response, ToolApprovalResponse):
                raise TypeError("tool_approval_responses must hold ToolApprovalResponse "
                                f"objects, got {type(response).__name__}")
        object.__setattr__(self, "tool_approval_responses", responses)
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1, got {self.max_rounds}")

    def with_tool_approval_responses(self, responses) -> "AgentRunOptions":
        """A copy of these options that carries approval responses (SPEC R4).

        Args:
            responses: an iterable of ``ToolApprovalResponse``, usually built with
                ``ToolApprovalRequest.approve()`` / ``.reject()``.

        Returns:
            AgentRunOptions: a new object; this one is left unchanged.
        """
        return dataclasses.replace(self, tool_approval_responses=tuple(responses))


def update_to_json(update: AgentResponseUpdate) -> dict:
    """An update in its JSON wire form: the ``UPDATE`` shapes of the conformance
    protocol (conformance/README.md, "Adapters"), also written by ``agentflow chat
    --json``. Field names are SPEC §3's.

    Args:
        update: any ``AgentResponseUpdate`` a run yields.

    Returns:
        A dict ready for ``json.dumps``: ``{"type": "text" | "reasoning" |
        "tool_call_start" | "tool_call_args" | "tool_call_end" | "tool_result" |
        "approval_request" | "finish", ...fields}``. ``finish`` carries ``usage`` as
        ``{"prompt_tokens", "completion_tokens", "total_tokens"}`` (tokens) or ``None``.
        An update type outside SPEC §3 gives ``{"type": <its class name>}``.
    """
    if isinstance(update, TextDelta):
        return {"type": "text", "text": update.text}
    if isinstance(update, ReasoningDelta):
        return {"type": "reasoning", "text": update.text}
    if isinstance(update, ToolCallStart):
        return {"type": "tool_call_start", "call_id": update.call_id, "name": update.name,
                "index": update.index}
    if isinstance(update, ToolCallArgs):
        return {"type": "tool_call_args", "call_id": update.call_id, "delta": update.delta}
    if isinstance(update, ToolCallEnd):
        return {"type": "tool_call_end", "call_id": update.call_id}
    if isinstance(update, ToolResult):
        return {"type": "tool_result", "call_id": update.call_id, "name": update.name,
                "result": update.result}
    if isinstance(update, ToolApprovalRequest):
        return {"type": "approval_request", "call_id": update.call_id, "name": update.name,
                "arguments": update.arguments, "description": update.description,
                "digest": update.digest, "request_id": update.request_id}
    if isinstance(update, Finish):
        usage = update.usage
        return {"type": "finish", "finish_reason": update.finish_reason.value,
                "usage": None if usage is None else {
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "total_tokens": usage.total_tokens}}
    return {"type": type(update).__name__}
