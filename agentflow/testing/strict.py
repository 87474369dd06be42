"""Strict provider mode for the replay server: a request the real provider would
refuse is refused, with that provider's status and style of error, so a test fails
the way production would (SPEC R21). Test tooling, like ``agentflow.testing.replay``.

    ReplayServer(replies, strict="gemini")

One rule per profile of ``agentflow.profiles``, each checking what that profile's
docstring cites. Every rule also checks that tool calls and tool results pair up,
which all of them refuse in their own words.
"""

from __future__ import annotations

import json
import re
from typing import Callable

from ..profiles import Gemini, thought_signature
from .exchange import RecordedRequest, Reply

# Keys each API takes on a message of a role, and on a tool call.
_OPENAI_KEYS = {"system": {"role", "content", "name"}, "developer": {"role", "content", "name"},
                "user": {"role", "content", "name"},
                "assistant": {"role", "content", "name", "refusal", "audio", "tool_calls",
                              "function_call"},
                "tool": {"role", "content", "tool_call_id"}}
_MISTRAL_KEYS = {"system": {"role", "content"}, "user": {"role", "content"},
                 "assistant": {"role", "content", "tool_calls", "prefix"},
                 "tool": {"role", "content", "tool_call_id", "name"}}
_CALL_KEYS = {"id", "type", "function", "index"}
_OPENAI_ID_LIMIT = 40  # OpenAI's answer to a longer id: "string too long" (profiles.Profile)
# Google's documented placeholders for calls that did not come from Gemini
_PLACEHOLDERS = {Gemini.PLACEHOLDER, "context_engineering_is_the_way_to_go"}


def strict_check(profile: str, replies=()) -> Callable[[int, RecordedRequest], Reply | None]:
    """A ``check`` for ``ReplayServer``: ``check(number, request)`` returns ``None``
    when the provider ``profile`` (str, a name of ``agentflow.profiles.PROFILES``)
    would take the request, else the ``Reply`` it would answer.

    Args:
        profile: the provider's profile name.
        replies: the replies the server serves (bodies as bytes or str, or
            ``Reply``); Gemini's rule takes only the thought signatures found in them,
            or a documented placeholder.

    Raises:
        ValueError: no rule for ``profile``.
    """
    if profile == "gemini":
        issued = set()
        for text in _bodies(replies):
            issued.update(re.findall(r'"thought_signature"\s*:\s*"([^"]*)"', text))
        rule = _gemini(issued | _PLACEHOLDERS)
    elif profile == "openrouter":
        rule = _openrouter(_gemini_details(replies))
    elif profile in _RULES:
        rule = _RULES[profile]
    else:
        raise ValueError(f"no strict rule for profile {profile!r}; rules exist for "
                         f"{', '.join(['gemini', 'openrouter', *_RULES])}")

    def check(number: int, request: RecordedRequest) -> Reply | None:
        body = request.json
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return _error(400, {"error": {"message": "messages must be a list of objects",
                                          "type": "invalid_request_error"}})
        if profile == "openrouter":
            return rule(messages, body.get("model"))
        return rule(messages)
    return check


def _bodies(replies) -> list[str]:
    """The text of each reply's body."""
    out = []
    for reply in replies:
        body = reply.body if isinstance(reply, Reply) else reply
        out.append(body.decode("utf-8", "replace") if isinstance(body, bytes) else body)
    return out


def _gemini_details(replies) -> dict[str, dict]:
    """The Gemini thought signatures the replies carry as OpenRouter sends them: each
    ``reasoning.encrypted`` detail of format ``google-gemini-v1``, by its ``id`` (the id
    of the tool call it signs)."""
    found: dict[str, dict] = {}
    for text in _bodies(replies):
        whole = text.lstrip().startswith("{")  # a JSON body, else an event stream
        for line in [text] if whole else text.splitlines():
            data = line if whole else line[5:].strip() if line.startswith("data:") else ""
            try:
                chunk = json.loads(data) if data.lstrip().startswith("{") else None
            except ValueError:
                continue
            for choice in (chunk or {}).get("choices") or []:
                delta = (choice.get("delta") or choice.get("message") or {}) if isinstance(
                    choice, dict) else {}
                for detail in delta.get("reasoning_details") or []:
                    if (isinstance(detail, dict) and detail.get("type") == "reasoning.encrypted"
                            and detail.get("format") == "google-gemini-v1"
                            and isinstance(detail.get("id"), str)):
                        found[detail["id"]] = detail
    return found


def _error(status: int, body: dict) -> Reply:
    return Reply(json.dumps(body), status=status, content_type="application/json")


def _unpaired(messages: list[dict]) -> str | None:
    """Tool calls each answered by a tool message before anything else, and tool
    messages only answering the calls just before them."""
    waiting: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in waiting:
                return (f"messages[{index}]: a 'tool' message must answer a tool call of the "
                        f"assistant message before it (tool_call_id "
                        f"{message.get('tool_call_id')!r})")
            waiting.remove(message["tool_call_id"])
            continue
        if waiting:
            return (f"messages[{index}]: the tool calls {', '.join(waiting)} have no 'tool' "
                    "message answering them")
        waiting = [c.get("id") for c in message.get("tool_calls") or []
                   if isinstance(c, dict)] if role == "assistant" else []
    return None


def _unknown(messages: list[dict], allowed: dict) -> tuple[int, int | None, str] | None:
    """The first key the API does not take: (message index, call index or None, key)."""
    for index, message in enumerate(messages):
        for key in message:
            if key not in allowed.get(message.get("role"), ()):
                return index, None, key
        for number, call in enumerate(message.get("tool_calls") or []):
            for key in call:
                if key not in _CALL_KEYS:
                    return index, number, key
    return None


def _openai(messages: list[dict]) -> Reply | None:
    def refuse(message: str, param: str | None, code: str) -> Reply:
        return _error(400, {"error": {"message": message, "type": "invalid_request_error",
                                      "param": param, "code": code}})
    found = _unknown(messages, _OPENAI_KEYS)
    if found:
        index, call, key = found
        where = f"messages[{index}]" + (f".tool_calls[{call}]" if call is not None else "")
        return refuse(f"Unknown parameter: '{where}.{key}'.", f"{where}.{key}",
                      "unknown_parameter")
    for index, message in enumerate(messages):
        if message.get("content") is None and not message.get("tool_calls"):
            return refuse(f"Invalid value for 'messages[{index}].content': expected a "
                          "string, got null.", f"messages[{index}].content", "invalid_value")
        ids = [(f"messages[{index}].tool_calls[{number}].id", call.get("id"))
               for number, call in enumerate(message.get("tool_calls") or [])]
        if "tool_call_id" in message:
            ids.append((f"messages[{index}].tool_call_id", message["tool_call_id"]))
        for param, call_id in ids:
            if isinstance(call_id, str) and len(call_id) > _OPENAI_ID_LIMIT:
                return refuse(f"Invalid '{param}': string too long. Expected a string with "
                              f"maximum length {_OPENAI_ID_LIMIT}, but got a string with "
                              f"length {len(call_id)} instead.", param,
                              "string_above_max_length")
    problem = _unpaired(messages)
    return refuse(problem, "messages", "invalid_value") if problem else None


def _deepseek(messages: list[dict]) -> Reply | None:
    def refuse(message: str) -> Reply:
        return _error(400, {"error": {"message": message, "type": "invalid_request_error",
                                      "param": None, "code": "invalid_request_error"}})
    for index, message in enumerate(messages):
        if (message.get("role") == "assistant" and message.get("tool_calls")
                and not isinstance(message.get("reasoning_content"), str)):
            return refuse(f"Missing `reasoning_content` field in the assistant message at "
                          f"message index {index}. For more information, please refer to "
                          "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls")
    problem = _unpaired(messages)
    return refuse(problem) if problem else None


def _gemini(accepted: set[str]) -> Callable[[list[dict]], Reply | None]:
    def refuse(message: str) -> Reply:
        return _error(400, {"error": {"code": 400, "message": message,
                                      "status": "INVALID_ARGUMENT"}})

    def rule(messages: list[dict]) -> Reply | None:
        # The current turn begins after the last user message; each of its steps (an
        # assistant message with calls) needs a signature on its first call.
        start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        for index, message in enumerate(messages):
            calls = message.get("tool_calls") or []
            for position, call in enumerate(calls):
                signature = thought_signature(call)
                name = (call.get("function") or {}).get("name")
                if signature is not None and signature not in accepted:
                    return refuse(f"Invalid thought_signature on function call "
                                  f"`default_api:{name}`, position {index}: it is not one "
                                  "this API returned. Pass signatures back exactly as "
                                  "received.")
                if position == 0 and index > start and signature is None:
                    return refuse(
                        f"Function call is missing a thought_signature in functionCall "
                        f"parts. This is required for tools to work correctly. Additional "
                        f"data, function call `default_api:{name}`, position {index}. "
                        "Please refer to https://ai.google.dev/gemini-api/docs/"
                        "thought-signatures for more details.")
        problem = _unpaired(messages)
        return refuse(problem) if problem else None
    return rule


_MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")


def _mistral(messages: list[dict]) -> Reply | None:
    def refuse(message: str, kind: str = "invalid_request_error", code=None) -> Reply:
        return _error(400, {"object": "error", "message": message, "type": kind,
                            "param": None, "code": code})
    found = _unknown(messages, _MISTRAL_KEYS)
    if found:
        index, call, key = found
        location = ["body", "messages", index] + (["tool_calls", call] if call is not None
                                                  else []) + [key]
        return _error(422, {"detail": [{"type": "extra_forbidden", "loc": location,
                                        "msg": "Extra inputs are not permitted"}]})
    for before, message in zip(messages, messages[1:]):
        if before.get("role") == "tool" and message.get("role") not in ("assistant", "tool"):
            return refuse(f"Unexpected role '{message.get('role')}' after role 'tool'",
                          "invalid_request_message_order", "3230")
    for message in messages:
        ids = [message.get("tool_call_id")] if message.get("role") == "tool" else [
            c.get("id") for c in message.get("tool_calls") or []]
        for call_id in ids:
            if not isinstance(call_id, str) or not _MISTRAL_ID.fullmatch(call_id):
                return refuse(f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with "
                              "a length of 9.")
        if message.get("role") == "assistant" and not (message.get("content")
                                                       or message.get("tool_calls")):
            return refuse("Assistant message must have either content or tool_calls")
    problem = _unpaired(messages)
    return refuse(problem) if problem else None


def _groq(messages: list[dict]) -> Reply | None:
    def refuse(message: str) -> Reply:
        return _error(400, {"error": {"message": message, "type": "invalid_request_error"}})
    found = _unknown(messages, _OPENAI_KEYS)
    if found:
        index, call, key = found
        role = messages[index].get("role")
        where = f"messages.{index}" + (f".tool_calls.{call}" if call is not None else "")
        return refuse(f"'{where}' : for 'role:{role}' the following must be satisfied"
                      f"[('{where}' : property '{key}' is unsupported)]")
    problem = _unpaired(messages)
    return refuse(problem) if problem else None


def _openrouter(signed: dict[str, dict]) -> Callable[[list[dict], object], Reply | None]:
    """OpenRouter's answer when a Gemini tool-call step of the current turn comes back
    without the ``reasoning_details`` that carry its thought signature
    (https://openrouter.ai/docs/use-cases/reasoning-tokens, "Preserving Reasoning"):
    a step is Gemini's when the request's model is a Gemini model or a call of it is
    one this server signed (``signed``: the details it issued, by call id); the
    signature must come back unmodified."""
    def refuse(upstream: str) -> Reply:
        raw = ("Gemini models require OpenRouter reasoning details to be preserved in each "
               "request. Please refer to our docs: https://openrouter.ai/docs/guides/"
               "best-practices/reasoning-tokens#preserving-reasoning-blocks. Upstream error: "
               + json.dumps({"error": {"code": 400, "message": upstream,
                                       "status": "INVALID_ARGUMENT"}}, indent=2))
        return _error(400, {"error": {"message": "Provider returned error", "code": 400,
                                      "metadata": {"raw": raw,
                                                   "provider_name": "Google AI Studio"}}})

    def rule(messages: list[dict], model) -> Reply | None:
        gemini_model = isinstance(model, str) and "gemini" in model.lower()
        start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        for index, message in enumerate(messages):
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
            if index <= start or not calls:
                continue
            ours = [signed[c.get("id")] for c in calls if c.get("id") in signed]
            if not (gemini_model or ours):
                continue
            details = message.get("reasoning_details")
            details = details if isinstance(details, list) else []
            name = (calls[0].get("function") or {}).get("name")
            sent = [d for d in details if isinstance(d, dict)
                    and d.get("type") == "reasoning.encrypted"]
            if not sent or any(detail not in details for detail in ours):
                return refuse(
                    "Function call is missing a thought_signature in functionCall parts. "
                    "This is required for tools to work correctly, and missing "
                    "thought_signature may lead to degraded model performance. Additional "
                    f"data, function call `default_api:{name}` , position {index}. Please "
                    "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for "
                    "more details.")
        problem = _unpaired(messages)
        if problem:
            return _error(400, {"error": {"message": problem, "code": 400}})
        return None
    return rule


# Gemini's and OpenRouter's rules are made per server, from the signatures it issues
# (strict_check).
_RULES: dict[str, Callable[[list[dict]], Reply | None]] = {
    "openai": _openai, "deepseek": _deepseek, "mistral": _mistral, "groq": _groq}
