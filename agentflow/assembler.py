"""Turns OpenAI-style ``chat.completion.chunk`` dicts into updates (SPEC §6).

Sans-IO like the SSE parser: ``feed(chunk)`` takes one parsed chunk and returns the
updates it produced; ``finish(saw_done)`` ends the turn and returns the closing
updates (``ToolCallEnd`` per call, then ``Finish``). Providers bend the format in many
small ways; every rule below is one of SPEC §6's items, and ``quirks`` records which
ones a stream needed, for people debugging a provider.

Tool calls are kept in *slots*. A slot is opened by a delta's ``index``, or, when a
provider sends no ``index``, by a new non-empty ``id``. A ``ToolCallStart`` is sent
once the slot knows both its id and its name; argument fragments that arrive before
that wait in the slot and follow the start.

Keys the assembler does not know, on the delta or on a tool call (Gemini's
``extra_content``), are kept as the provider sent them and stored on the message and
its calls (``extra``), to be sent back (SPEC R21). A key sent in several deltas keeps
its first non-empty value, as ``id`` and ``name`` do; a key whose value changes from
delta to delta is data about each chunk (Together's ``token_id``), not about the
message, and is dropped, named once in ``quirks``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from .errors import IncompleteStreamError, ProviderError
from .sse import iter_events
from .types import (AgentResponseUpdate, ChatMessage, Finish, FinishReason, ReasoningDelta,
                    TextDelta, ToolCall, ToolCallArgs, ToolCallEnd, ToolCallStart,
                    Usage)

_FINISH_REASONS = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,  # the legacy name
}
# Delta keys read here, the choice's index repeated in the delta (some servers), or
# OpenAI response fields its own request schema does not take back (annotations,
# audio); every other non-empty key is kept (SPEC R21).
_KNOWN_DELTA_KEYS = frozenset({"role", "content", "refusal", "reasoning_content", "reasoning",
                               "tool_calls", "function_call", "index", "annotations", "audio"})
_KNOWN_CALL_KEYS = frozenset({"index", "id", "type", "function"})


class TextBuffer:
    """Text that arrives in many small pieces (str). Every 1024 pieces are joined into
    one block, so a long stream costs about its text's size in memory rather than one
    Python object per token (make bench: memory)."""

    __slots__ = ("_blocks", "_pieces")

    def __init__(self) -> None:
        self._blocks: list[str] = []
        self._pieces: list[str] = []

    def append(self, piece: str) -> None:
        pieces = self._pieces
        pieces.append(piece)
        if len(pieces) >= 1024:
            self._blocks.append("".join(pieces))
            self._pieces = []

    def __str__(self) -> str:
        return "".join([*self._blocks, *self._pieces])

    def __bool__(self) -> bool:
        return bool(self._blocks or self._pieces)


@dataclass
class _Slot:
    index: int
    id: str = ""        # the id used from here on: unique within the turn
    wire_id: str = ""   # the first non-empty id the provider sent
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    started: bool = False
    sent: int = 0  # how many argument fragments were sent as updates
    extra: dict = field(default_factory=dict)  # unknown keys, as sent (SPEC R21)


class ChunkAssembler:
    """Assembles one model turn from its chunks. This is the only place a turn is
    assembled: the last update, ``Finish``, carries the finished assistant message
    (``Finish.message``), and the tool loop stores that message as it is.

    After ``finish``: ``text`` (str), ``reasoning`` (str), ``tool_calls``
    (list of ``ToolCall``), ``finish_reason`` (``FinishReason``), ``usage``
    (``Usage`` or ``None``) describe the turn; ``extra`` (dict) holds the unknown
    keys of the deltas, kept for the message; ``quirks`` (list of str) names each
    deviation from OpenAI's own format that was met, with the chunk number.
    """

    def __init__(self) -> None:
        self._text = TextBuffer()
        self._reasoning = TextBuffer()
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}
        self._raw_finish: str | None = None
        self.usage: Usage | None = None
        self.finish_reason: FinishReason | None = None
        self.quirks: list[str] = []
        self.extra: dict = {}
        self._varying: set[tuple[int, str]] = set()  # (id of the extra dict, key) dropped
        self._chunks = 0

    @property
    def text(self) -> str:
        return str(self._text)

    @property
    def reasoning(self) -> str:
        return str(self._reasoning)

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [ToolCall(s.id, s.name, "".join(s.arguments), dict(s.extra))
                for s in self._slots]

    def _quirk(self, what: str) -> None:
        self.quirks.append(f"{what} at event {self._chunks}")

    def _keep_unknown(self, data: dict, known: frozenset, into: dict, where: str) -> None:
        """Keep ``data``'s unknown non-empty keys in ``into``; drop a key whose value
        changes between deltas."""
        for key, value in data.items():
            if key in known or value is None or value == "" or value == [] or value == {}:
                continue
            if key not in into:
                if (id(into), key) not in self._varying:
                    into[key] = value
            elif into[key] != value:
                del into[key]
                self._varying.add((id(into), key))
                self._quirk(f"{where} field {key!r} changes from chunk to chunk "
                            "(not kept with the message)")

    # -- one chunk -------------------------------------------------------------------

    def feed(self, chunk: dict) -> list[AgentResponseUpdate]:
        """Take one parsed chunk (dict); return its updates.

        Raises ``ProviderError`` (with the provider's message and code) when the chunk
        carries an ``error`` object; the updates of earlier chunks were already
        returned by then.
        """
        self._chunks += 1
        # Fast path for the chunk that is nearly all of a stream: one choice whose
        # delta is a bit of text. Anything else takes the general path below.
        if type(chunk) is dict:
            choices = chunk.get("choices")
            if (type(choices) is list and len(choices) == 1 and chunk.get("usage") is None
                    and "error" not in chunk and "x_groq" not in chunk):
                choice = choices[0]
                delta = choice.get("delta") if type(choice) is dict else None
                if (type(delta) is dict and len(delta) == 1 and choice.get("finish_reason") is None
                        and choice.get("index", 0) == 0):
                    content = delta.get("content")
                    if type(content) is str:
                        if not content:
                            return []
                        self._text.append(content)
                        return [TextDelta(content)]
        if not isinstance(chunk, dict):
            raise ProviderError(f"stream event {self._chunks} is not a JSON object: "
                                f"{json.dumps(chunk)[:200]}")
        if chunk.get("error"):
            raise error_from_body(chunk, "the provider reported an error mid-stream")
        self._take_usage(chunk)
        choices = chunk.get("choices") or []
        if not choices:
            self._quirk("chunk with empty choices")
        updates: list[AgentResponseUpdate] = []
        for choice in choices:
            if choice.get("index", 0) != 0:
                continue  # n > 1: only the first choice is used
            self._choice(choice, updates)
        return updates

    def _take_usage(self, chunk: dict) -> None:
        usage = chunk.get("usage")
        groq = chunk.get("x_groq")
        if not isinstance(usage, dict) and isinstance(groq, dict):
            usage = groq.get("usage")
            if isinstance(usage, dict):
                self._quirk("usage under x_groq")
        if isinstance(usage, dict):
            if self.usage is not None:
                self._quirk("usage sent again (the last one is kept)")
            prompt = int(usage.get("prompt_tokens") or 0)
            completion = int(usage.get("completion_tokens") or 0)
            total = int(usage.get("total_tokens") or prompt + completion)
            self.usage = Usage(prompt, completion, total)

    def _choice(self, choice: dict, updates: list) -> None:
        delta = choice.get("delta") or {}
        self._keep_unknown(delta, _KNOWN_DELTA_KEYS, self.extra, "delta")
        content = delta.get("content")
        if isinstance(content, str):
            if content:
                self._add_text(content, updates)
        elif isinstance(content, list):
            self._quirk("content as a list of parts")
            for part in content:
                self._content_part(part, updates)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._add_text(refusal, updates)
        reasoning = delta.get("reasoning_content")
        if not isinstance(reasoning, str):
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            updates.append(ReasoningDelta(reasoning))
        for call in delta.get("tool_calls") or []:
            self._tool_call_delta(call, updates)
        reason = choice.get("finish_reason")
        if reason:
            if self._raw_finish is not None:
                self._quirk("finish_reason repeated")
            self._raw_finish = reason

    def _add_text(self, text: str, updates: list) -> None:
        self._text.append(text)
        updates.append(TextDelta(text))

    def _content_part(self, part, updates: list) -> None:
        if isinstance(part, str):
            self._add_text(part, updates)
            return
        if not isinstance(part, dict):
            return
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            if part["text"]:
                self._add_text(part["text"], updates)
        elif kind in ("thinking", "reasoning"):
            thinking = part.get(kind)
            pieces = thinking if isinstance(thinking, list) else [thinking]
            for piece in pieces:
                text = piece.get("text") if isinstance(piece, dict) else piece
                if isinstance(text, str) and text:
                    self._reasoning.append(text)
                    updates.append(ReasoningDelta(text))

    # -- tool calls ------------------------------------------------------------------

    def _slot_for(self, call: dict) -> _Slot:
        index = call.get("index")
        call_id = call.get("id") or ""
        if isinstance(index, int):
            slot = self._by_index.get(index)
            if slot is None:
                if index != len(self._slots):
                    self._quirk(f"tool call index {index} where {len(self._slots)} was expected")
                slot = self._by_index[index] = self._open(index)
            return slot
        self._quirk("tool call without index")
        last = self._slots[-1] if self._slots else None
        if call_id:
            for slot in self._slots:
                if slot.wire_id == call_id:
                    return slot
            if last is not None and not last.wire_id:
                return last
            return self._open(len(self._slots))
        return last if last is not None else self._open(0)

    def _open(self, index: int) -> _Slot:
        slot = _Slot(index)
        self._slots.append(slot)
        return slot

    def _tool_call_delta(self, call: dict, updates: list) -> None:
        if not isinstance(call, dict):
            return
        slot = self._slot_for(call)
        self._keep_unknown(call, _KNOWN_CALL_KEYS, slot.extra, "tool call")
        function = call.get("function") or {}
        call_id, name = call.get("id") or "", function.get("name") or ""
        # Re-sent headers (empty or in full) must never be concatenated: first wins.
        if call_id and not slot.wire_id:
            slot.wire_id = call_id
        elif call_id and call_id != slot.wire_id:
            self._quirk("tool call id changed mid-call (the first is kept)")
        if name and not slot.name:
            slot.name = name
        elif slot.started and (name or "id" in call):
            self._quirk("tool call header re-sent")
        arguments = function.get("arguments")
        if isinstance(arguments, (dict, list)):
            self._quirk("tool call arguments as a JSON object")
            arguments = json.dumps(arguments)
        if isinstance(arguments, str) and arguments:
            slot.arguments.append(arguments)
        self._flush(slot, updates, final=False)

    def _flush(self, slot: _Slot, updates: list, final: bool) -> None:
        if not slot.started and (final or (slot.wire_id and slot.name)):
            slot.id = slot.wire_id
            if not slot.id:
                self._quirk("tool call without id")
                slot.id = f"call_{slot.index}"
            taken = {other.id for other in self._slots if other.started}
            if slot.id in taken:
                # Two calls with one id would make their results ambiguous, and
                # strict providers refuse such a history.
                unique = f"{slot.id}_{slot.index}"
                while unique in taken:
                    unique += "_"
                self._quirk(f"duplicate tool call id {slot.id!r} (renamed {unique!r})")
                slot.id = unique
            slot.started = True
            updates.append(ToolCallStart(slot.id, slot.name, slot.index))
        if slot.started:
            for fragment in slot.arguments[slot.sent:]:
                updates.append(ToolCallArgs(slot.id, fragment))
            slot.sent = len(slot.arguments)

    # -- end of the turn -------------------------------------------------------------

    def finish(self, saw_done: bool) -> list[AgentResponseUpdate]:
        """End the turn. ``saw_done`` (bool): whether ``data: [DONE]`` arrived.

        Returns ``ToolCallEnd`` for each call in order, then ``Finish`` with the
        turn's finish reason (``TOOL_CALLS`` whenever calls were made, unless the turn
        was cut by ``length``), usage, and the assembled assistant message.

        Raises ``IncompleteStreamError`` when neither a finish reason nor ``[DONE]``
        arrived: the connection dropped mid-turn.
        """
        if self._raw_finish is None and not saw_done:
            raise IncompleteStreamError(
                f"the stream ended after {self._chunks} events with neither a "
                "finish_reason nor 'data: [DONE]'; the connection was probably cut. "
                "Nothing of this turn was kept: retry the run.")
        if not saw_done:
            self._quirk("stream ended without [DONE]")
        updates: list[AgentResponseUpdate] = []
        for slot in self._slots:
            if not slot.arguments:
                slot.arguments.append("{}")
            self._flush(slot, updates, final=True)
            updates.append(ToolCallEnd(slot.id))
        if self._raw_finish is None:
            self._quirk("no finish_reason")
        reason = _FINISH_REASONS.get(self._raw_finish or "stop", FinishReason.STOP)
        if self._slots and reason is not FinishReason.LENGTH:
            if reason is not FinishReason.TOOL_CALLS and self._raw_finish is not None:
                self._quirk(f"finish_reason {self._raw_finish!r} although tools were called")
            reason = FinishReason.TOOL_CALLS
        self.finish_reason = reason
        calls = self.tool_calls
        # A turn with neither text nor calls is "" rather than null: several providers
        # refuse an assistant message whose content is null without tool calls (SPEC §6).
        content = self.text or (None if calls else "")
        message = ChatMessage.assistant(content, calls, self.reasoning or None, self.extra)
        updates.append(Finish(reason, self.usage, message))
        return updates


def error_from_body(body, fallback: str, status: int | None = None) -> ProviderError:
    """A ``ProviderError`` from a provider's JSON error body (``{"error": {...}}``,
    ``{"error": "text"}`` or ``{"message": ...}``), keeping its message and code."""
    error = body.get("error") or body if isinstance(body, dict) else body
    if isinstance(error, dict):
        message = error.get("message") or error.get("msg") or fallback
        code = error.get("code") or error.get("type")
    else:
        message, code = (str(error) if error else fallback), None
    return ProviderError(str(message), status=status, code=code)


_raw_decode = json.JSONDecoder().raw_decode


def stream_updates(chunks: Iterable[bytes], assembler: ChunkAssembler | None = None
                   ) -> Iterator[AgentResponseUpdate]:
    """The updates of one streamed model turn, from the raw bytes of its SSE body
    (an iterable of byte chunks of any size), yielded as soon as their bytes are in.

    ``data: [DONE]`` ends the turn even if more bytes follow. Raises ``ProviderError``
    for an ``event: error``, an ``error`` object, or data that is not a JSON object
    (naming the event, its data cut to 200 characters), and ``IncompleteStreamError``
    when the bytes end mid-turn (SPEC §6). Pass your own ``assembler`` to read its
    ``quirks`` and totals afterwards.
    """
    assembler = assembler if assembler is not None else ChunkAssembler()
    saw_done = False
    feed = assembler.feed
    for number, event in enumerate(iter_events(chunks), 1):
        if event.type == "error":
            try:
                body = json.loads(event.data)
            except ValueError:
                body = event.data[:200]
            raise error_from_body(body, "the provider sent an error event")
        if event.data == "[DONE]":
            saw_done = True
            break
        data = event.data
        if data[:1].isspace():
            data = data.lstrip()
        try:
            chunk, end = _raw_decode(data)  # json.loads minus its wrappers: this is hot
            if end != len(data) and data[end:].strip():
                raise ValueError("extra data after the JSON value")
        except ValueError:
            raise ProviderError(f"malformed stream event {number}: not JSON: "
                                f"{data[:200]!r}") from None
        yield from feed(chunk)
    yield from assembler.finish(saw_done)


def completion_updates(body: dict, assembler: ChunkAssembler | None = None
                       ) -> list[AgentResponseUpdate]:
    """The same updates as a stream would give, from a non-streaming
    ``chat.completion`` response body (dict)."""
    assembler = assembler if assembler is not None else ChunkAssembler()
    if not isinstance(body, dict) or body.get("error"):
        raise error_from_body(body, "the provider answered with an error")
    choices = body.get("choices") or []
    chunk_choices = []
    for choice in choices[:1]:
        message = dict(choice.get("message") or {})
        message["tool_calls"] = [{**call, "index": position} for position, call
                                 in enumerate(message.get("tool_calls") or [])]
        chunk_choices.append({"index": 0, "delta": message,
                              "finish_reason": choice.get("finish_reason")})
    updates = assembler.feed({"choices": chunk_choices, "usage": body.get("usage")})
    return updates + assembler.finish(saw_done=True)
