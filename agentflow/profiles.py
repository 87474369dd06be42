"""Provider profiles: how the stored history becomes one provider's request (SPEC R21).

A session keeps what each provider gave: the keys of an assistant message and of its
calls that agentflow does not know (``extra``: Gemini's ``extra_content`` …) and the
turn's reasoning (``reasoning_content``). Providers differ in what they need back and
in what they refuse, so a request's messages are built by a *profile*. A profile adapts
the request only: the stored messages are never changed, and a session recorded with
one profile can be continued with another.

    OpenAIChatClient("gemini-3-flash-preview", base_url=..., profile="gemini")
    agentflow chat --profile gemini ...

Without ``profile`` it is guessed from the base URL's host (``resolve_profile``), else
``openai``; ``OpenAIChatClient.profile_note`` says which and why.

=========  ===============================================  =============================
profile    sends back                                       adapts the request
=========  ===============================================  =============================
openai     unknown keys that no other profile owns          call ids of at most 40
                                                            characters
deepseek   the same, and reasoning of tool-call turns       "" where none was stored
gemini     the same, and ``extra_content``                  placeholder thought signature
mistral    OpenAI's keys only                               assistant after tool results;
                                                            9-character call ids
groq       OpenAI's keys only                               -
openrouter the same as openai, and ``reasoning_details``    -
           (accumulated across the stream's deltas)
=========  ===============================================  =============================

Call ids are kept as the provider gave them (R21). Where a provider refuses some ids
(``call_id_limit``, ``call_id_fits``), the request carries a short id derived from each
refused one (``short_call_id``) on the call and on its tool result: the same in every
request, and unique among the request's ids.

Streamed fields: a delta key is kept with its first value and dropped when its value
changes from delta to delta (data about each chunk). A provider that streams a field in
parts documents how the parts make the whole; ``accumulates`` names those fields, each
with its accumulator (``ReasoningDetails`` for OpenRouter's ``reasoning_details``).

Adding a profile: subclass ``Profile``, set ``name`` and ``hosts``, override what
differs (``owns``, ``send_unknown``, ``call_id_limit``, ``accumulates``, ``message``,
``messages``), cite the provider's documentation in its docstring, and add an instance
to ``PROFILES``. A strict replay rule for it (``agentflow.testing.strict``) lets tests
fail the way the provider would.
"""

from __future__ import annotations

import hashlib
import re
from typing import Sequence
from urllib.parse import urlsplit

from .types import ChatMessage

# The message and call keys of OpenAI's chat-completions format that agentflow writes
# itself; everything else on a stored message is reasoning or ``extra``.
_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id")
_CALL_KEYS = ("id", "type", "function")


class Profile:
    """``openai``, the default: OpenAI's chat-completions API, and every endpoint
    without a profile of its own (https://platform.openai.com/docs/api-reference/chat).

    Sends back the unknown keys of each message and call as they were stored (SPEC
    R21: what the provider gave, it gets back), except keys another profile owns:
    OpenAI refuses any key its schema lacks ("Unknown parameter:
    'messages[1].tool_calls[0].…'"), and a key such as Gemini's ``extra_content`` is
    only ever Gemini's to read. Reasoning is never sent: older reasoning models answer
    400 when ``reasoning_content`` is in the input ("If the reasoning_content field is
    included in the sequence of input messages, the API will return a 400 error",
    https://api-docs.deepseek.com/guides/reasoning_model).

    Attributes:
        name: the profile's name (str), as given to ``profile=`` and ``--profile``.
        hosts: host names (tuple of str) whose base URL selects this profile; a host
            matches itself and its subdomains.
        owns: unknown keys (frozenset of str) that belong to this provider; other
            profiles leave them out of their requests.
        send_unknown: whether unknown keys are sent at all (``False``: only OpenAI's
            documented keys, for providers that refuse any other).
        call_id_limit: the longest tool call id (int, characters) the provider takes,
            or ``None`` for no documented limit. OpenAI's is 40: a longer one is refused
            with HTTP 400 ("Invalid 'messages[2].tool_calls[0].id': string too long.
            Expected a string with maximum length 40, but got a string with length 46
            instead.", code ``string_above_max_length``), and vLLM and other servers
            issue 46-character ids (``chatcmpl-tool-`` and 32 hex digits).
        accumulates: delta keys (dict: key -> accumulator class, such as
            ``ReasoningDetails``) that this provider documents as streamed in parts,
            each part to be joined with the ones before; every other key that
            changes from delta to delta is per-chunk data and dropped (SPEC R21).
    """

    name = "openai"
    hosts: tuple[str, ...] = ("api.openai.com",)
    owns: frozenset = frozenset()
    send_unknown = True
    call_id_limit: int | None = 40
    accumulates: dict = {}

    def messages(self, messages: Sequence[ChatMessage]) -> list[dict]:
        """The request's messages for the stored ones.

        Args:
            messages: the prompt (sequence of ``ChatMessage``), as stored.

        Returns:
            A list of dicts in the provider's form, possibly with messages added (never
            stored), with each call id the provider would refuse replaced by its
            ``short_call_id`` (``map_call_ids``). ``messages`` and everything they hold
            are left unchanged: a dict that differs from the stored form is a new one.
        """
        return self.map_call_ids([self.message(message) for message in messages])

    def call_id_fits(self, call_id: str) -> bool:
        """Whether the provider takes a call id as it is (SPEC R21).

        Args:
            call_id: a tool call id (str), as stored.

        Returns:
            bool: ``True`` when there is no ``call_id_limit`` or the id is within it.
        """
        return self.call_id_limit is None or len(call_id) <= self.call_id_limit

    def short_call_id(self, call_id: str, salt: int = 0) -> str:
        """The id sent for a call id the provider refuses: its beginning, ``_``, and
        12 base-62 digits of the SHA-256 of the id and ``salt``, ``call_id_limit``
        characters at most. Derived from the id alone, so it is the same in every
        request (SPEC R21).

        Args:
            call_id: the stored id (str).
            salt: 0, raised (int) only while the candidate equals another id of the
                request.

        Returns:
            str: the id to send.
        """
        digits = _digits(call_id, salt, 12)
        keep = max(0, (self.call_id_limit or 40) - len(digits) - 1)
        return f"{call_id[:keep]}_{digits}" if keep else digits[:self.call_id_limit]

    def map_call_ids(self, out: list[dict]) -> list[dict]:
        """Each call id that does not ``call_id_fits``, replaced on its call and on its
        tool result by its ``short_call_id`` (SPEC R21).

        Args:
            out: the request's message dicts (list of dict); a changed message is
                replaced by a new dict, in place.

        Returns:
            list[dict]: ``out``. No new id equals another id of the request: a real
            id that equals a candidate keeps it, and the candidate takes the next salt.
        """
        ids = {m.get("tool_call_id") for m in out} | {
            c.get("id") for m in out for c in m.get("tool_calls", ())}
        mapping = self._short_ids(sorted(i for i in ids if isinstance(i, str)))
        if not mapping:
            return out
        for position, data in enumerate(out):
            if data.get("tool_call_id") in mapping:
                out[position] = {**data, "tool_call_id": mapping[data["tool_call_id"]]}
            elif data.get("tool_calls"):
                out[position] = {**data, "tool_calls": [
                    {**call, "id": mapping.get(call.get("id"), call.get("id"))}
                    for call in data["tool_calls"]]}
        return out

    def _short_ids(self, ids: list[str]) -> dict[str, str]:
        """New ids for those of ``ids`` the provider refuses, unique among all of
        ``ids`` and each other."""
        taken, mapping = {i for i in ids if self.call_id_fits(i)}, {}
        for original in ids:
            if original in taken:
                continue
            salt = 0
            new = self.short_call_id(original)
            while new in taken:
                salt += 1
                new = self.short_call_id(original, salt)
            taken.add(new)
            mapping[original] = new
        return mapping

    def message(self, message: ChatMessage) -> dict:
        """One stored message as this provider is sent it (SPEC R21).

        Args:
            message: the stored ``ChatMessage`` (not changed).

        Returns:
            dict: a new OpenAI message dict with the keys this provider gets.
        """
        stored = message.to_openai()
        data = {key: value for key, value in stored.items()
                if key in _MESSAGE_KEYS or (key in message.extra and self.sends(key))}
        if message.tool_calls:
            data["tool_calls"] = [
                _with_sent_arguments(call, {key: value for key, value in wire.items()
                                            if key in _CALL_KEYS
                                            or (key in call.extra and self.sends(key))})
                for call, wire in zip(message.tool_calls, stored["tool_calls"])]
        return data

    def sends(self, key: str) -> bool:
        """Whether an unknown key of a stored message or call is sent (SPEC R21).

        Args:
            key: the key (str), e.g. ``extra_content``.

        Returns:
            bool: sent when the profile sends unknown keys and no other profile owns it.
        """
        if not self.send_unknown:
            return False
        return key in self.owns or not any(
            key in profile.owns for profile in PROFILES.values() if profile.name != self.name)

    def __repr__(self) -> str:
        return f"<profile {self.name}>"


class DeepSeek(Profile):
    """``deepseek``: DeepSeek's API, whose thinking mode is on by default.

    For every assistant turn that made tool calls, ``reasoning_content`` must be sent
    back in all later requests, or the API answers 400 ("Missing `reasoning_content`
    field in the assistant message at message index N"); for turns without tool calls
    it is ignored, so it is not sent (https://api-docs.deepseek.com/guides/thinking_mode,
    "Tool calls" and "Multi-turn conversation"). A tool-call turn with no stored
    reasoning (recorded with another profile) is sent ``""``: the check is for the
    field.
    """

    name = "deepseek"
    hosts = ("api.deepseek.com",)
    call_id_limit = None  # none documented

    def message(self, message: ChatMessage) -> dict:
        data = super().message(message)
        if not message.tool_calls:
            return data
        # where DeepSeek's own response puts it: after content
        out = {}
        for key, value in data.items():
            out[key] = value
            if key == "content":
                out["reasoning_content"] = message.reasoning_content or ""
        return out


class Gemini(Profile):
    """``gemini``: Google's OpenAI-compatible endpoint for Gemini
    (https://ai.google.dev/gemini-api/docs/openai).

    Thinking models return a thought signature with the first function call of each
    step, as ``extra_content: {"google": {"thought_signature": "…"}}`` on the call,
    and Gemini 3 refuses (400) a request whose current turn lacks one: it is sent
    back exactly as received (https://ai.google.dev/gemini-api/docs/thought-signatures,
    "Signatures in function call parts" and "OpenAI compatibility"). A call that did
    not come from Gemini (a history recorded with another profile, a call added by
    hand) has none; for these Google documents a placeholder that skips the check
    (same page, FAQ; also Vertex AI's thought-signatures page), which this profile
    puts on the first call of each tool-call message without a signature, in the
    request only.
    """

    name = "gemini"
    hosts = ("generativelanguage.googleapis.com", "aiplatform.googleapis.com")
    owns = frozenset({"extra_content"})
    call_id_limit = None  # none documented
    PLACEHOLDER = "skip_thought_signature_validator"

    def message(self, message: ChatMessage) -> dict:
        data = super().message(message)
        calls = data.get("tool_calls")
        if calls and not thought_signature(calls[0]):
            first = dict(calls[0])
            content = first.get("extra_content")
            content = dict(content) if isinstance(content, dict) else {}
            google = content.get("google")
            content["google"] = {**(google if isinstance(google, dict) else {}),
                                 "thought_signature": self.PLACEHOLDER}
            first["extra_content"] = content
            data["tool_calls"] = [first, *calls[1:]]
        return data


def _with_sent_arguments(call, wire: dict) -> dict:
    """``wire`` with the arguments a request sends: ``{}`` for a call whose stored text
    is not a JSON object (SPEC §6, fourth batch)."""
    sent = call.sent_arguments()
    if sent != call.arguments:
        wire["function"] = {**wire["function"], "arguments": sent}
    return wire


def thought_signature(call: dict) -> str | None:
    """The Gemini thought signature on a tool call (SPEC R21).

    Args:
        call: the call's OpenAI dict form.

    Returns:
        str | None: ``extra_content.google.thought_signature``, or ``None``.
    """
    content = call.get("extra_content")
    google = content.get("google") if isinstance(content, dict) else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    return signature if isinstance(signature, str) and signature else None


_MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _digits(text: str, salt: int, count: int) -> str:
    """``count`` base-62 digits of the SHA-256 of ``text`` and ``salt``."""
    digest = hashlib.sha256(f"{text}\0{salt}".encode("utf-8", "surrogatepass")).digest()
    # 8 bytes hold 10 digits: Mistral's 9 are what they were before OpenAI's were added
    number, out = int.from_bytes(digest[:8 if count <= 10 else 16], "big"), ""
    for _ in range(count):
        number, digit = divmod(number, 62)
        out += _ALPHABET[digit]
    return out


class Mistral(Profile):
    """``mistral``: Mistral's API (https://docs.mistral.ai/api/).

    Mistral checks requests the way its reference implementation, mistral-common,
    documents (``MistralRequestValidator``,
    https://github.com/mistralai/mistral-common, src/mistral_common/protocol/instruct/validator.py):

    - after ``tool`` results only ``assistant`` or ``tool`` may follow ("Unexpected
      role 'user' after role 'tool'"), which is the order R6 makes when a caller
      answers an approval and adds a message. The request gets an assistant message
      between them; an assistant message needs content or tool calls (same
      validator), so it says ``BRIDGE``.
    - tool call ids are 9 characters of a-z, A-Z, 0-9 ("Tool call id was … but must
      be a-z, A-Z, 0-9, with a length of 9."). Other ids (a history from another
      provider) are replaced, in the request only, by 9 such characters derived from
      the id: the same in every request.
    - extra fields are refused (HTTP 422 "Extra inputs are not permitted"): only
      OpenAI's documented keys are sent, no reasoning and no unknown keys.
    """

    name = "mistral"
    hosts = ("api.mistral.ai",)
    send_unknown = False
    call_id_limit = 9
    BRIDGE = "(tool results received)"

    def messages(self, messages: Sequence[ChatMessage]) -> list[dict]:
        out: list[dict] = []
        for message in messages:
            data = self.message(message)
            if out and out[-1]["role"] == "tool" and data["role"] not in ("assistant", "tool"):
                out.append({"role": "assistant", "content": self.BRIDGE})
            out.append(data)
        return self.map_call_ids(out)

    def call_id_fits(self, call_id: str) -> bool:
        return bool(_MISTRAL_ID.fullmatch(call_id))

    def short_call_id(self, call_id: str, salt: int = 0) -> str:
        return _digits(call_id, salt, 9)


class Groq(Profile):
    """``groq``: GroqCloud (https://console.groq.com/docs/api-reference#chat-create).

    Refuses any message property its schema lacks, with HTTP 400 ("'messages.2' : for
    'role:assistant' the following must be satisfied[('messages.2' : property
    'reasoning_content' is unsupported)]"): only OpenAI's documented keys are sent.
    Its streams mark reasoning deltas with ``channel``, a key of Groq's that other
    profiles leave out too.
    """

    name = "groq"
    hosts = ("api.groq.com",)
    owns = frozenset({"channel"})  # gpt-oss on Groq marks each delta "analysis"/"final"
    send_unknown = False
    call_id_limit = None  # none documented


class ReasoningDetails:
    """Accumulates OpenRouter's streamed ``reasoning_details`` (SPEC R21), as
    OpenRouter documents them (https://openrouter.ai/docs/use-cases/reasoning-tokens,
    "Reasoning Details API Shape"): each delta's ``reasoning_details`` is a list of
    detail objects (``type`` ``reasoning.text``, ``reasoning.summary`` or
    ``reasoning.encrypted``; ``id``, ``format``, ``index``), and "the complete
    reasoning sequence is built by concatenating all chunks in order".

    A text or summary detail that continues the previous one (same ``type`` and
    ``index``) is one block streamed in parts, as OpenRouter's own SDK joins them
    (``@openrouter/ai-sdk-provider``, ``doStream``): its ``text`` (``summary``) is the
    parts joined, every other key keeps its first non-empty value (the ``signature``
    often comes with the last part). Any other detail, and every encrypted one, is a
    block of its own, kept exactly as sent. The whole list goes back unmodified on the
    assistant message ("Preserving Reasoning Blocks").
    """

    _JOINED = {"reasoning.text": "text", "reasoning.summary": "summary"}

    def __init__(self) -> None:
        self._details: list[dict] = []
        self._parts: list[list[str]] = []  # per detail, the pieces of its joined key

    def add(self, value) -> None:
        """Take one delta's ``reasoning_details``.

        Args:
            value: the delta's value (list of dicts).

        Raises:
            ValueError: ``value`` is not a list of objects, or a joined key is not a
                string; the message says what was expected.
        """
        if type(value) is not list or not all(type(d) is dict for d in value):
            raise ValueError("a list of reasoning detail objects")
        for detail in value:
            key = self._JOINED.get(detail.get("type"))
            piece = detail.get(key) if key else None
            if piece is not None and type(piece) is not str:
                raise ValueError(f"a string in each {detail.get('type')} detail's {key!r}")
            last = self._details[-1] if self._details else None
            if (key and last is not None and last.get("type") == detail.get("type")
                    and last.get("index") == detail.get("index")):
                for name, item in detail.items():
                    if name != key and last.get(name) in (None, "") and item not in (None, ""):
                        last[name] = item
                if piece:
                    self._parts[-1].append(piece)
            else:
                self._details.append(dict(detail))
                self._parts.append([piece] if key and piece else [])

    def value(self) -> list[dict]:
        """The accumulated details (list of dicts; empty when none came)."""
        out = []
        for detail, parts in zip(self._details, self._parts):
            key = self._JOINED.get(detail.get("type"))
            out.append({**detail, key: "".join(parts)} if key and parts else dict(detail))
        return out


class OpenRouter(Profile):
    """``openrouter``: OpenRouter (https://openrouter.ai/docs/api-reference).

    Reasoning models stream ``reasoning_details`` on each delta, in parts
    (``ReasoningDetails``); the accumulated list is kept on the message and sent back
    unmodified on the assistant message: "Reasoning Details must be preserved when
    using multi-turn tool calling", and for Gemini models OpenRouter refuses a tool
    turn without them (HTTP 400 "Gemini models require OpenRouter reasoning details
    to be preserved in each request", the Gemini thought signature being a
    ``reasoning.encrypted`` detail) (https://openrouter.ai/docs/use-cases/reasoning-tokens,
    "Preserving Reasoning"). The key is OpenRouter's, left out by other profiles.
    Call ids are passed to the upstream provider as they are; OpenRouter documents
    no limit of its own.
    """

    name = "openrouter"
    hosts = ("openrouter.ai",)
    owns = frozenset({"reasoning_details"})
    call_id_limit = None
    accumulates = {"reasoning_details": ReasoningDetails}


PROFILES: dict[str, Profile] = {p.name: p for p in (Profile(), DeepSeek(), Gemini(),
                                                     Mistral(), Groq(), OpenRouter())}


def resolve_profile(profile: "str | Profile | None", base_url: str) -> tuple[Profile, str]:
    """The profile a client uses, and a note (str) saying how it was chosen.

    Args:
        profile: a name from ``PROFILES``, a ``Profile`` object, or ``None`` to guess
            from the host of ``base_url``: the profile whose ``hosts`` hold it, else
            ``openai``.
        base_url: the client's API root (str).

    Raises:
        ValueError: ``profile`` names no profile; the message lists the names.
    """
    if isinstance(profile, Profile):
        return profile, f"profile {profile.name} (given)"
    if profile is not None:
        try:
            return PROFILES[profile], f"profile {profile} (given)"
        except KeyError:
            raise ValueError(f"unknown provider profile {profile!r}; choose one of "
                             f"{', '.join(PROFILES)}") from None
    host = (urlsplit(base_url).hostname or "").lower()
    for candidate in PROFILES.values():
        if any(host == h or host.endswith(("." + h, "-" + h)) for h in candidate.hosts):
            return candidate, (f"profile {candidate.name}, guessed from the base URL's host "
                               f"{host}; choose another with profile=... (--profile)")
    return PROFILES["openai"], (f"profile openai, the default: no profile knows the host "
                                f"{host or base_url}; choose one with profile=... (--profile)")


