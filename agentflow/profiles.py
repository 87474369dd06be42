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
openai     unknown keys that no other profile owns          -
deepseek   the same, and reasoning of tool-call turns       "" where none was stored
gemini     the same, and ``extra_content``                  placeholder thought signature
mistral    OpenAI's keys only                               assistant after tool results;
                                                            9-character call ids
groq       OpenAI's keys only                               -
=========  ===============================================  =============================

Adding a profile: subclass ``Profile``, set ``name`` and ``hosts``, override what
differs (``owns``, ``send_unknown``, ``message``, ``messages``), cite the provider's
documentation in its docstring, and add an instance to ``PROFILES``. A strict replay
rule for it (``agentflow.testing.strict``) lets tests fail the way the provider would.
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
    """

    name = "openai"
    hosts: tuple[str, ...] = ("api.openai.com",)
    owns: frozenset = frozenset()
    send_unknown = True

    def messages(self, messages: Sequence[ChatMessage]) -> list[dict]:
        """The request's messages for the stored ones.

        Args:
            messages: the prompt (sequence of ``ChatMessage``), as stored.

        Returns:
            A list of dicts in the provider's form, possibly with messages added (never
            stored). ``messages`` and everything they hold are left unchanged: a dict
            that differs from the stored form is a new one.
        """
        return [self.message(message) for message in messages]

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
                {key: value for key, value in wire.items()
                 if key in _CALL_KEYS or (key in call.extra and self.sends(key))}
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
    BRIDGE = "(tool results received)"

    def messages(self, messages: Sequence[ChatMessage]) -> list[dict]:
        out: list[dict] = []
        for message in messages:
            data = self.message(message)
            if out and out[-1]["role"] == "tool" and data["role"] not in ("assistant", "tool"):
                out.append({"role": "assistant", "content": self.BRIDGE})
            out.append(data)
        ids = {m.get("tool_call_id") for m in out} | {
            c["id"] for m in out for c in m.get("tool_calls", ())}
        mapping = _mistral_ids(sorted(i for i in ids if i))
        if not mapping:
            return out
        for position, data in enumerate(out):
            if data.get("tool_call_id") in mapping:
                out[position] = {**data, "tool_call_id": mapping[data["tool_call_id"]]}
            elif data.get("tool_calls"):
                out[position] = {**data, "tool_calls": [
                    {**call, "id": mapping.get(call["id"], call["id"])}
                    for call in data["tool_calls"]]}
        return out


def _mistral_ids(ids: list[str]) -> dict[str, str]:
    """New ids for those of ``ids`` Mistral refuses: 9 base-62 digits of the id's
    SHA-256, unique among all of ``ids``."""
    taken, mapping = {i for i in ids if _MISTRAL_ID.fullmatch(i)}, {}
    for original in ids:
        if original in taken:
            continue
        salt = 0
        while True:
            digest = hashlib.sha256(f"{original}\0{salt}".encode("utf-8", "surrogatepass"))
            number = int.from_bytes(digest.digest()[:8], "big")
            new = ""
            for _ in range(9):
                number, digit = divmod(number, 62)
                new += _ALPHABET[digit]
            if new not in taken:
                break
            salt += 1
        taken.add(new)
        mapping[original] = new
    return mapping


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


PROFILES: dict[str, Profile] = {p.name: p for p in (Profile(), DeepSeek(), Gemini(),
                                                     Mistral(), Groq())}


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


