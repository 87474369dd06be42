"""Turns OpenAI-style ``chat.completion.chunk`` dicts into updates (SPEC §6).

Sans-IO like the SSE parser: ``feed(chunk)`` takes one parsed chunk and returns the
updates it produced; ``finish(saw_done)`` ends the turn and returns the closing
updates (``ToolCallEnd`` per call, then ``Finish``). Providers bend the format in many
small ways; every rule below is one of SPEC §6's items, and ``quirks`` records which
ones a stream needed, for people debugging a provider.

Tool calls are kept in *slots*, in the order they were opened; that order is the
order of the calls in the message, of their ``ToolCallStart`` updates, and of their
execution. A slot is opened by a new ``index``; by a different id *and* a name on an
index whose slot already has an id (servers that put every call on index 0); or,
when a provider sends no ``index``, by a new non-empty ``id`` (such a slot takes the
next unused index, which later fragments may name). A ``ToolCallStart`` is sent once
the slot knows its id and its whole name (its arguments began, or a later call was
opened: a name may come in pieces) and every earlier slot has started; argument
fragments that arrive before that wait in the slot and follow the start.

Every field read is checked for its JSON type: valid JSON of the wrong shape is a
``ProviderError`` naming the event and the field, never a bare ``TypeError``.

Keys the assembler does not know, on the delta or on a tool call (Gemini's
``extra_content``), are kept as the provider sent them and stored on the message and
its calls (``extra``), to be sent back (SPEC R21). A key sent in several deltas keeps
its first non-empty value, as ``id`` and ``name`` do; a key whose value changes from
delta to delta is data about each chunk (Together's ``token_id``), not about the
message, and is dropped, named once in ``quirks``, unless the provider profile lists
it as streamed in parts (``accumulate``, OpenRouter's ``reasoning_details``): then its
parts are joined the way that provider documents.

Ids the assembler makes (for a call without one, or renaming one the conversation
already holds) are ``id_limit`` characters at most, so that a 40-character id sent
twice does not become one OpenAI refuses.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from .errors import IncompleteStreamError, ProviderError, ProviderTimeoutError
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
ID_LIMIT = 40  # OpenAI's limit on a call id, the shortest a provider taking any id has
# R14: calls of a turn that ended for one of these reasons are never executed
_CUT_SHORT = (FinishReason.LENGTH, FinishReason.CONTENT_FILTER)


class TextBuffer:
    """Text that arrives in many small pieces (str). Every 1024 pieces are joined into
    one block, so a long stream costs about its text's size in memory rather than one
    Python object per token (make bench: memory), and joining it is linear."""

    __slots__ = ("_blocks", "_pieces")

    def __init__(self) -> None:
        self._blocks: list[str] = []
        self._pieces: list[str] = []

    def append(self, piece: str) -> None:
        """Add one piece at the end.

        Args:
            piece: the next piece of text (str), in arrival order.
        """
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
    index: int          # reported on ToolCallStart: the provider's index, or the position
    id: str = ""        # the id used from here on: unique in the conversation
    wire_id: str = ""   # the first non-empty id the provider sent
    name: str = ""      # pieces joined, a piece equal to the name so far taken as re-sent
    joined: str = ""    # every piece joined: the other reading of a re-sent name
    arguments: TextBuffer = field(default_factory=TextBuffer)
    waiting: list[str] = field(default_factory=list)  # fragments sent before the start
    started: bool = False
    extra: dict = field(default_factory=dict)  # unknown keys, as sent (SPEC R21)


def _show(value, limit: int = 60) -> str:
    """A wrong value as JSON text of at most ``limit`` characters, for an error message."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


class ChunkAssembler:
    """Assembles one model turn from its chunks. This is the only place a turn is
    assembled: the last update, ``Finish``, carries the finished assistant message
    (``Finish.message``), and the tool loop stores that message as it is.

    Args:
        taken_ids: the tool call ids (iterable of str) already used in the
            conversation; no call of this turn gets one of them, whether the provider
            sent it again or sent none and one is invented (SPEC §6: ids are unique
            across the whole conversation).
        accumulate: delta keys streamed in parts (mapping of str to an accumulator
            class with ``add(value)`` and ``value()``, such as
            ``agentflow.profiles.ReasoningDetails``); the provider profile's
            ``accumulates``. Their joined value is kept with the message (SPEC R21).
        id_limit: the longest id (int, characters) the assembler makes when it
            invents or renames one; ids the provider sent are kept as they are.
        tool_names: the names (iterable of str) of the tools offered in the
            request. A name sent in pieces is joined, and a piece equal to the name
            so far is taken as the name re-sent; where those two readings differ,
            the one naming an offered tool wins (SPEC §6, fourth batch).

    After ``finish``: ``text`` (str), ``reasoning`` (str), ``tool_calls``
    (list of ``ToolCall``), ``finish_reason`` (``FinishReason``), ``usage``
    (``Usage`` or ``None``) describe the turn; ``extra`` (dict) holds the unknown
    keys of the deltas, kept for the message; ``quirks`` (list of str) names each
    deviation from OpenAI's own format that was met, with the chunk number.
    """

    def __init__(self, taken_ids: Iterable[str] = (), accumulate=None,
                 id_limit: int = ID_LIMIT, tool_names: Iterable[str] = ()) -> None:
        self._tool_names = frozenset(tool_names)
        self._accumulate = dict(accumulate or {})
        self._parts: dict = {}  # key -> its accumulator, once the key was seen
        self._id_limit = id_limit
        self._text = TextBuffer()
        self._reasoning = TextBuffer()
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}  # the provider's index -> its latest slot
        self._started = 0  # slots[:_started] have been announced with ToolCallStart
        self._taken = set(taken_ids)
        self._raw_finish: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None  # the chunks' own "model" (traces' response model)
        self.finish_reason: FinishReason | None = None
        self.quirks: list[str] = []
        self.extra: dict = {}
        self._varying: set[tuple[int, str]] = set()  # (id of the extra dict, key) dropped
        self._chunks = 0
        self._body = False  # fed a non-streaming response body (completion_updates)

    @property
    def text(self) -> str:
        """The turn's visible text so far (str; ``""`` when none)."""
        return str(self._text)

    @property
    def reasoning(self) -> str:
        """The turn's reasoning text so far (str; ``""`` when none)."""
        return str(self._reasoning)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The turn's calls so far, in slot order (list of ``ToolCall``; arguments as
        the JSON text received, ``extra`` the unknown keys kept, SPEC R21)."""
        return [ToolCall(s.id, s.name, str(s.arguments), dict(s.extra)) for s in self._slots]

    @property
    def accumulated(self) -> dict:
        """The keys streamed in parts seen so far and their joined values (dict: key
        -> value, as ``accumulate``'s accumulators give it; SPEC R21)."""
        return {key: accumulator.value() for key, accumulator in self._parts.items()}

    @property
    def chunk_count(self) -> int:
        """How many chunks were fed so far."""
        return self._chunks

    @property
    def finish_reason_seen(self) -> bool:
        """Whether a ``finish_reason`` arrived: from then on the turn is complete,
        whatever happens to the connection (SPEC §6)."""
        return self._raw_finish is not None

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

    # -- shapes ----------------------------------------------------------------------

    def _bad(self, path: str, value, expected: str) -> ProviderError:
        where = "the response body" if self._body else f"stream event {self._chunks}"
        return ProviderError(f"malformed {where}: {path} is {_show(value)}, expected "
                             f"{expected} (OpenAI's chat-completions format)")

    def _object(self, value, path: str, optional: bool = True) -> dict:
        if type(value) is dict:
            return value
        if value is None and optional:
            return {}
        raise self._bad(path, value, "an object")

    def _list(self, value, path: str) -> list:
        if type(value) is list:
            return value
        if value is None:
            return []
        raise self._bad(path, value, "a list")

    def _str(self, value, path: str) -> str:
        if type(value) is str:
            return value
        if value is None:
            return ""
        raise self._bad(path, value, "a string")

    def _index(self, value, path: str) -> int | None:
        if value is None or (type(value) is int and value >= 0):
            return value
        raise self._bad(path, value, "a whole number from 0")

    def _count(self, value, path: str) -> int:
        if value is None:
            return 0
        if type(value) is int and value >= 0:
            return value
        raise self._bad(path, value, "a whole number of tokens")

    def _call_id(self, value, path: str) -> str:
        if type(value) is str:
            return value
        if value is None:
            return ""
        if type(value) is int:  # SPEC §6: ids are strings; a numeric id is converted
            self._quirk("numeric tool call id")
            return str(value)
        raise self._bad(path, value, "a string")

    # -- one chunk -------------------------------------------------------------------

    def feed(self, chunk: dict) -> list[AgentResponseUpdate]:
        """Take one parsed chunk; return its updates (SPEC §6).

        Args:
            chunk: one ``chat.completion.chunk`` as decoded from an event's JSON data
                (normally a dict; anything else is reported).

        Returns:
            list[AgentResponseUpdate]: the ``TextDelta``, ``ReasoningDelta``,
            ``ToolCallStart`` and ``ToolCallArgs`` updates this chunk produced, in
            order; often empty.

        Raises:
            ProviderError: the chunk carries an ``error`` object (with the provider's
                message and code); the chunk is not a JSON object; or a field has the
                wrong JSON type (``choices: [null]``, ``delta: "x"``,
                ``usage.prompt_tokens: "n/a"`` …), naming the event and the field.
                The updates of earlier chunks were already returned by then.
        """
        self._chunks += 1
        # Fast paths for the chunks that are nearly all of a stream: one choice whose
        # delta is a bit of text, or a fragment of a started call's arguments. They
        # must agree with _chunk: tests/test_stream_fuzz.py (both_paths) runs every
        # recorded stream, split and mutated, through both and compares the results.
        if type(chunk) is dict:
            choices = chunk.get("choices")
            if (type(choices) is list and len(choices) == 1 and chunk.get("usage") is None
                    and "error" not in chunk and "x_groq" not in chunk):
                choice = choices[0]
                delta = choice.get("delta") if type(choice) is dict else None
                if type(delta) is dict and len(delta) == 1 and choice.get("finish_reason") is None:
                    index = choice.get("index", 0)
                    if index == 0 and type(index) is int:
                        content = delta.get("content")
                        if type(content) is str:
                            if not content:
                                return []
                            self._text.append(content)
                            return [TextDelta(content)]
                        update = self._arguments_fast(delta.get("tool_calls"))
                        if update is not None:
                            return [update]
        return self._chunk(chunk)

    def _arguments_fast(self, calls) -> ToolCallArgs | None:
        """The update of a delta that is only ``[{"index": i, "function":
        {"arguments": "…"}}]`` for a started call; ``None`` for anything else."""
        if type(calls) is not list or len(calls) != 1:
            return None
        call = calls[0]
        if type(call) is not dict or len(call) != 2:
            return None
        function, index = call.get("function"), call.get("index")
        if type(function) is not dict or len(function) != 1 or type(index) is not int:
            return None
        fragment = function.get("arguments")
        slot = self._by_index.get(index)
        if type(fragment) is not str or not fragment or slot is None or not slot.started:
            return None
        slot.arguments.append(fragment)
        return ToolCallArgs(slot.id, fragment)

    def _chunk(self, chunk) -> list[AgentResponseUpdate]:
        if type(chunk) is not dict:
            raise ProviderError(f"stream event {self._chunks} is not a JSON object: "
                                f"{_show(chunk, 203)}")
        if chunk.get("error"):
            raise error_from_body(chunk, "the provider reported an error mid-stream")
        self._take_usage(chunk)
        if type(chunk.get("model")) is str and chunk["model"]:
            self.model = chunk["model"]
        choices = self._list(chunk.get("choices"), "choices")
        if not choices:
            self._quirk("chunk with empty choices")
        updates: list[AgentResponseUpdate] = []
        for position, choice in enumerate(choices):
            path = f"choices[{position}]"
            choice = self._object(choice, path, optional=False)
            if self._index(choice.get("index"), f"{path}.index") not in (None, 0):
                continue  # n > 1: only the first choice is used
            self._choice(choice, path, updates)
        return updates

    def _take_usage(self, chunk: dict) -> None:
        usage, path = chunk.get("usage"), "usage"
        if usage is None and chunk.get("x_groq") is not None:
            usage, path = self._object(chunk["x_groq"], "x_groq").get("usage"), "x_groq.usage"
            if usage is not None:
                self._quirk("usage under x_groq")
        if usage is None:
            return
        usage = self._object(usage, path)
        if self.usage is not None:
            self._quirk("usage sent again (the last one is kept)")
        prompt = self._count(usage.get("prompt_tokens"), f"{path}.prompt_tokens")
        completion = self._count(usage.get("completion_tokens"), f"{path}.completion_tokens")
        total = self._count(usage.get("total_tokens"), f"{path}.total_tokens")
        self.usage = Usage(prompt, completion, total or prompt + completion)

    def _choice(self, choice: dict, where: str, updates: list) -> None:
        path = where + (".message" if self._body else ".delta")
        delta = self._object(choice.get("delta"), path)
        known = _KNOWN_DELTA_KEYS
        if self._accumulate and not self._body:  # a body's values are whole already
            known = known | self._accumulate.keys()
            for key, kind in self._accumulate.items():
                if delta.get(key) is not None:
                    self._add_part(key, kind, delta[key], f"{path}.{key}")
        self._keep_unknown(delta, known, self.extra, "delta")
        # Reasoning first: when one delta carries both, the model thought before it
        # wrote (SPEC §6).
        key = "reasoning_content" if delta.get("reasoning_content") is not None else "reasoning"
        reasoning = self._str(delta.get(key), f"{path}.{key}")
        if reasoning:
            self._reasoning.append(reasoning)
            updates.append(ReasoningDelta(reasoning))
        content = delta.get("content")
        if type(content) is list:
            self._quirk("content as a list of parts")
            for number, part in enumerate(content):
                self._content_part(part, f"{path}.content[{number}]", updates)
        else:
            content = self._str(content, f"{path}.content")
            if content:
                self._add_text(content, updates)
        refusal = self._str(delta.get("refusal"), f"{path}.refusal")
        if refusal:
            self._add_text(refusal, updates)
        calls = self._list(delta.get("tool_calls"), f"{path}.tool_calls")
        for number, call in enumerate(calls):
            self._tool_call_delta(call, f"{path}.tool_calls[{number}]", updates)
        reason = self._str(choice.get("finish_reason"), f"{where}.finish_reason")
        if reason:
            if self._raw_finish is not None:
                self._quirk("finish_reason repeated")
            self._raw_finish = reason

    def _add_part(self, key: str, kind, value, path: str) -> None:
        accumulator = self._parts.get(key)
        if accumulator is None:
            accumulator = self._parts[key] = kind()
            self.extra.setdefault(key, None)  # its place among the kept keys
        try:
            accumulator.add(value)
        except ValueError as exc:
            raise self._bad(path, value, str(exc)) from None

    def _add_text(self, text: str, updates: list) -> None:
        self._text.append(text)
        updates.append(TextDelta(text))

    def _content_part(self, part, path: str, updates: list) -> None:
        if type(part) is str:
            if part:
                self._add_text(part, updates)
            return
        part = self._object(part, path, optional=False)
        kind = part.get("type")
        if kind == "text":
            text = self._str(part.get("text"), f"{path}.text")
            if text:
                self._add_text(text, updates)
        elif kind in ("thinking", "reasoning"):
            thinking = part.get(kind)
            pieces = thinking if type(thinking) is list else [thinking]
            for number, piece in enumerate(pieces):
                where = f"{path}.{kind}[{number}]" if type(thinking) is list else f"{path}.{kind}"
                if type(piece) is dict:
                    piece, where = piece.get("text"), f"{where}.text"
                text = self._str(piece, where)
                if text:
                    self._reasoning.append(text)
                    updates.append(ReasoningDelta(text))
        # other parts (images, citations) carry no text of the turn

    # -- tool calls ------------------------------------------------------------------

    def _tool_call_delta(self, call, path: str, updates: list) -> None:
        call = self._object(call, path, optional=False)
        index = self._index(call.get("index"), f"{path}.index")
        call_id = self._call_id(call.get("id"), f"{path}.id")
        function = self._object(call.get("function"), f"{path}.function")
        name = self._str(function.get("name"), f"{path}.function.name")
        arguments = function.get("arguments")
        if type(arguments) in (dict, list):
            self._quirk("tool call arguments as a JSON object")
            try:
                arguments = json.dumps(arguments)
            except RecursionError:
                raise self._bad(f"{path}.function.arguments", arguments,
                                "JSON nested less deeply") from None
        else:
            arguments = self._str(arguments, f"{path}.function.arguments")
        slot = self._slot_for(index, call_id, name)
        self._keep_unknown(call, _KNOWN_CALL_KEYS, slot.extra, "tool call")
        # Re-sent headers (empty or in full) must never be concatenated: first wins.
        if call_id and not slot.wire_id:
            slot.wire_id = call_id
        elif call_id and call_id != slot.wire_id:
            self._quirk("tool call id changed mid-call (the first is kept)")
        if name:
            self._add_name(slot, name)
        elif slot.started and "id" in call:
            self._quirk("tool call header re-sent")
        if arguments:
            self._add_arguments(slot, arguments, updates)
        self._start_ready(updates)

    def _add_name(self, slot: _Slot, piece: str) -> None:
        """SPEC §6: a name may be re-sent in full (a piece equal to the name so far)
        or split in pieces, which are joined. A call is announced once, with the name
        it keeps, so a piece that comes after the start changes nothing."""
        if slot.started:
            if piece != slot.name:
                self._quirk("a piece of the tool name after its arguments began (ignored)")
            else:
                self._quirk("tool call header re-sent")
            return
        if slot.name and piece != slot.name:
            self._quirk("tool name sent in pieces (joined)")
        elif slot.name:
            self._quirk("tool name re-sent")
        if piece != slot.name:
            slot.name += piece
        slot.joined += piece

    def _settle_name(self, slot: _Slot) -> None:
        # A piece equal to the name so far is read as a re-send; where joining it
        # instead names an offered tool and the re-sent reading does not, the joined
        # reading is the name the model meant (SPEC §6, fourth batch).
        names = self._tool_names
        if slot.joined != slot.name and slot.joined in names and slot.name not in names:
            self._quirk(f"tool name {slot.joined!r} read from pieces that repeat "
                        "(it names an offered tool)")
            slot.name = slot.joined

    def _slot_for(self, index: int | None, call_id: str, name: str) -> _Slot:
        if index is not None:
            slot = self._by_index.get(index)
            if slot is None:
                if index != len(self._slots):
                    self._quirk(f"tool call index {index} where {len(self._slots)} was expected")
                slot = self._by_index[index] = self._open(index)
            elif call_id and slot.wire_id and call_id != slot.wire_id:
                for other in self._slots:
                    if other.wire_id == call_id:
                        return other
                if name:  # a new call on an index already used (Ollama: all on 0)
                    self._quirk(f"a second tool call on index {index}")
                    slot = self._by_index[index] = self._open(len(self._slots))
            return slot
        self._quirk("tool call without index")
        last = self._slots[-1] if self._slots else None
        if call_id:
            for slot in self._slots:
                if slot.wire_id == call_id:
                    return slot
            # The id of a call whose header came in pieces; but a call that already
            # has its name and arguments is whole, and a new id after it is a new call.
            if last is not None and not last.wire_id and not (last.name and last.arguments):
                return last
            return self._open_unindexed()
        return last if last is not None else self._open_unindexed()

    def _open(self, index: int) -> _Slot:
        slot = _Slot(index)
        self._slots.append(slot)
        return slot

    def _open_unindexed(self) -> _Slot:
        """A slot opened without an index takes the next unused index (counting from
        its position), so later fragments naming that index continue it (SPEC §6,
        fourth batch: a header without ``index``, its arguments with ``index: 0``)."""
        index = len(self._slots)
        while index in self._by_index:
            index += 1
        slot = self._by_index[index] = self._open(index)
        return slot

    def _add_arguments(self, slot: _Slot, fragment: str, updates: list) -> None:
        slot.arguments.append(fragment)
        if slot.started:
            updates.append(ToolCallArgs(slot.id, fragment))
        else:
            slot.waiting.append(fragment)

    def _start_ready(self, updates: list, final: bool = False) -> None:
        """Announce, in slot order, every slot that knows its id and its whole name
        (every slot, when ``final``); a slot never starts before an earlier one. A
        name may come in pieces (SPEC §6), so it is whole once the call's arguments
        began or a later call was opened."""
        while self._started < len(self._slots):
            slot = self._slots[self._started]
            if not (final or (slot.wire_id and slot.name and (
                    slot.arguments or self._started + 1 < len(self._slots)))):
                return
            self._settle_name(slot)
            slot.id = self._unique_id(slot)
            self._taken.add(slot.id)
            slot.started = True
            self._started += 1
            updates.append(ToolCallStart(slot.id, slot.name, slot.index))
            updates.extend(ToolCallArgs(slot.id, fragment) for fragment in slot.waiting)
            slot.waiting = []

    def _unique_id(self, slot: _Slot) -> str:
        # Two calls with one id would make their results ambiguous, and strict
        # providers refuse such a history, also across turns (SPEC §6).
        taken = self._taken
        if not slot.wire_id:
            self._quirk("tool call without id")
            number = slot.index
            while f"call_{number}" in taken:
                number += 1
            return f"call_{number}"
        if slot.wire_id not in taken:
            return slot.wire_id
        # The suffix stays whole and the id is cut to fit the limit (SPEC R21).
        suffixes = (f"_{slot.index}" if number == 1 else f"_{slot.index}_{number}"
                    for number in itertools.count(1))
        for suffix in suffixes:
            unique = slot.wire_id[:max(0, self._id_limit - len(suffix))] + suffix
            if unique not in taken:
                break
        self._quirk(f"duplicate tool call id {slot.wire_id!r} (renamed {unique!r})")
        return unique

    # -- end of the turn -------------------------------------------------------------

    def finish(self, saw_done: bool) -> list[AgentResponseUpdate]:
        """End the turn.

        Args:
            saw_done: whether ``data: [DONE]`` arrived (bool).

        Returns:
            list[AgentResponseUpdate]: any ``ToolCallStart`` / ``ToolCallArgs`` still
            held back (a call without arguments gets ``{}``), ``ToolCallEnd`` for each
            call in order, then one ``Finish`` with the turn's finish reason, usage,
            and the assembled assistant message (``Finish.message``). The reason is
            ``TOOL_CALLS`` whenever calls were made, unless the turn was cut by
            ``length`` or ``content_filter``: then the reason stays and the message
            keeps its text only, so those calls never run (SPEC R14). A turn with
            neither text nor calls has content ``""``, never ``null`` (SPEC §6).

        Raises:
            IncompleteStreamError: neither a finish reason nor ``[DONE]`` arrived:
                the connection dropped mid-turn; nothing of the turn is kept.
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
                self._add_arguments(slot, "{}", updates)
        self._start_ready(updates, final=True)
        updates.extend(ToolCallEnd(slot.id) for slot in self._slots)
        if self._raw_finish is None:
            self._quirk("no finish_reason")
        reason = _FINISH_REASONS.get(self._raw_finish or "stop", FinishReason.STOP)
        if self._slots and reason not in _CUT_SHORT:
            if reason is not FinishReason.TOOL_CALLS and self._raw_finish is not None:
                self._quirk(f"finish_reason {self._raw_finish!r} although tools were called")
            reason = FinishReason.TOOL_CALLS
        self.finish_reason = reason
        for key, value in self.accumulated.items():
            self.extra[key] = value
            if not value:
                del self.extra[key]  # only empty parts came: nothing to send back
        calls = self.tool_calls if reason is FinishReason.TOOL_CALLS else []
        # A turn with neither text nor calls is "" rather than null: several providers
        # refuse an assistant message whose content is null without tool calls (SPEC §6).
        content = self.text or (None if calls else "")
        message = ChatMessage.assistant(content, calls, self.reasoning or None, self.extra)
        updates.append(Finish(reason, self.usage, message, model=self.model))
        return updates


def error_from_body(body, fallback: str, status: int | None = None) -> ProviderError:
    """A ``ProviderError`` from a provider's JSON error body, keeping its message and code.

    Args:
        body: the decoded error body: ``{"error": {"message": …, "code": …}}``,
            ``{"error": "text"}``, ``{"message": …}``, or any other value (its text
            becomes the message).
        fallback: the message (str) to use when the body has none.
        status: the HTTP status code (int), if the error came with a response.

    Returns:
        ProviderError: with ``message``, ``status`` and ``code`` (``error.code``, else
        ``error.type``, else ``None``). It is returned, not raised. A router's
        ``error.metadata.raw`` (OpenRouter's error from the upstream provider, whose
        own ``message`` is only "Provider returned error") follows the message, with
        ``metadata.provider_name``, cut to 2000 characters.
    """
    error = (body.get("error") or body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        message = error.get("message") or error.get("msg") or fallback
        code = error.get("code") or error.get("type")
        metadata = error.get("metadata")
        raw = metadata.get("raw") if isinstance(metadata, dict) else None
        if isinstance(raw, str) and raw:
            who = metadata.get("provider_name")
            who = f"{who}: " if isinstance(who, str) and who else ""
            message = f"{message} ({who}{raw[:2000]})"
    else:
        message, code = (str(error) if error else fallback), None
    return ProviderError(str(message), status=status, code=code)


_raw_decode = json.JSONDecoder().raw_decode


def _decode(data: str, number: int):
    """The JSON value of one event's data; ``ProviderError`` naming the event when
    it is not JSON, or nested too deeply for Python's recursive decoder."""
    if data[:1].isspace():
        data = data.lstrip()
    try:
        value, end = _raw_decode(data)  # json.loads minus its wrappers: this is hot
        if end != len(data) and data[end:].strip():
            raise ValueError("extra data after the JSON value")
    except ValueError:
        raise ProviderError(f"malformed stream event {number}: not JSON: "
                            f"{data[:200]!r}") from None
    except RecursionError:
        raise ProviderError(f"malformed stream event {number}: JSON nested too deeply "
                            f"to decode: {data[:200]!r}") from None
    return value


def _until_broken(chunks: Iterable[bytes], assembler: ChunkAssembler) -> Iterator[bytes]:
    """``chunks``, ending quietly when the connection breaks or stalls after the
    finish reason arrived (SPEC §6: a finished turn is complete)."""
    try:
        yield from chunks
    except (IncompleteStreamError, ProviderTimeoutError) as exc:
        if not assembler.finish_reason_seen:
            raise
        assembler._quirk(f"the connection failed after the finish_reason ({exc.message})")


def stream_updates(chunks: Iterable[bytes], assembler: ChunkAssembler | None = None
                   ) -> Iterator[AgentResponseUpdate]:
    """The updates of one streamed model turn, from the raw bytes of its SSE body.

    The body is decoded as WHATWG HTML §9.2.6 event streams are (``agentflow.sse``);
    ``data: [DONE]`` ends the turn even if more bytes follow. When ``chunks`` raises
    ``IncompleteStreamError`` or ``ProviderTimeoutError`` (a broken or silent
    connection) after the finish reason arrived, the turn is complete and ends
    normally (SPEC §6).

    Args:
        chunks: the body's bytes, an iterable of byte chunks of any size.
        assembler: a ``ChunkAssembler`` of your own, to read its ``quirks`` and totals
            afterwards or to give it the conversation's ids; ``None``: a new one.

    Yields:
        AgentResponseUpdate: each update as soon as its bytes are in; the last is the
        ``Finish`` carrying the assembled message (see ``ChunkAssembler.finish``).

    Raises:
        ProviderError: an ``event: error``, an ``error`` object, data that is not a
            JSON object or has a field of the wrong shape (naming the event, its data
            cut to 200 characters).
        IncompleteStreamError: the bytes end mid-turn (no finish reason, no
            ``[DONE]``), or ``chunks`` raised it before the finish reason arrived.
        ProviderTimeoutError: from ``chunks``, before the finish reason arrived.
    """
    assembler = assembler if assembler is not None else ChunkAssembler()
    saw_done = False
    feed = assembler.feed
    for number, event in enumerate(iter_events(_until_broken(chunks, assembler)), 1):
        if event.type == "error":
            try:
                body = json.loads(event.data)
            except (ValueError, RecursionError):
                body = event.data[:200]
            raise error_from_body(body, "the provider sent an error event")
        if event.data == "[DONE]":
            saw_done = True
            break
        yield from feed(_decode(event.data, number))
    yield from assembler.finish(saw_done)


def completion_updates(body: dict, assembler: ChunkAssembler | None = None
                       ) -> list[AgentResponseUpdate]:
    """The same updates as a stream would give, from a non-streaming response.

    Args:
        body: the decoded ``chat.completion`` response body (dict); only its first
            choice is used.
        assembler: a ``ChunkAssembler`` of your own (see ``stream_updates``);
            ``None``: a new one.

    Returns:
        list[AgentResponseUpdate]: the turn's updates, ending in the ``Finish`` that
        carries the assembled message.

    Raises:
        ProviderError: an error body (with its message and code), or a field of the
            wrong shape (naming it).
    """
    assembler = assembler if assembler is not None else ChunkAssembler()
    assembler._body = True
    if isinstance(body, dict) and body.get("error"):
        raise error_from_body(body, "the provider answered with an error")
    body = assembler._object(body, "the body", optional=False)
    chunk_choices = []
    for choice in assembler._list(body.get("choices"), "choices")[:1]:
        choice = assembler._object(choice, "choices[0]", optional=False)
        message = dict(assembler._object(choice.get("message"), "choices[0].message"))
        calls = assembler._list(message.get("tool_calls"), "choices[0].message.tool_calls")
        message["tool_calls"] = [
            {**assembler._object(call, f"choices[0].message.tool_calls[{position}]",
                                 optional=False), "index": position}
            for position, call in enumerate(calls)]
        chunk_choices.append({"index": 0, "delta": message,
                              "finish_reason": choice.get("finish_reason")})
    updates = assembler.feed({"choices": chunk_choices, "usage": body.get("usage")})
    return updates + assembler.finish(saw_done=True)
