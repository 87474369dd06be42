"""``agentflow inspect-stream FILE``: what a recorded SSE body assembles to, which
provider quirks (SPEC §6) it needed, and what of it the next request sends back under
a provider profile (SPEC R21). For users whose provider misbehaves."""

from __future__ import annotations

import json
import sys

from ..assembler import ID_LIMIT, ChunkAssembler, stream_updates
from ..display import safe_text
from ..errors import ProviderError
from ..profiles import resolve_profile
from ..types import Finish


def inspect_stream(data: bytes, out=None, profile: str | None = None,
                   base_url: str | None = None) -> int:
    """Print the assembled message of the SSE body ``data`` (bytes), the quirks met,
    and the message as the next request sends it back, to ``out`` (default stdout).

    Args:
        profile: the provider profile's name; default: guessed from ``base_url``, the
            way ``OpenAIChatClient`` guesses it, else ``openai``.

    Returns:
        0, or 1 when the stream raised.

    Raises:
        ValueError: ``profile`` names no profile.
    """
    out = out or sys.stdout
    chosen, note = resolve_profile(profile, base_url or "")
    if profile is None and not base_url:
        note = "profile openai, the default (give --profile or --base-url)"
    assembler = ChunkAssembler(accumulate=chosen.accumulates,
                               id_limit=chosen.call_id_limit or ID_LIMIT)
    error, message = None, None
    try:
        for update in stream_updates([data], assembler):
            if isinstance(update, Finish):
                message = update.message
    except ProviderError as exc:
        error = exc
    # The stream is untrusted: what it says is shown escaped (SPEC R25).
    write = lambda line="": out.write(safe_text(line, multiline=True) + "\n")  # noqa: E731
    text, reasoning = assembler.text, assembler.reasoning
    write(f"text ({len(text)} characters):")
    write("  " + (text.replace("\n", "\n  ") if text else "(none)"))
    if reasoning:
        write(f"reasoning ({len(reasoning)} characters): {reasoning[:120]!r}"
              + (" ..." if len(reasoning) > 120 else ""))
    calls = assembler.tool_calls
    write(f"tool calls ({len(calls)}):")
    for call in calls:
        write(safe_text(f"  {call.id or '(no id)'}  {call.name or '(no name)'}  {call.arguments}"))
    reason = assembler.finish_reason.value if assembler.finish_reason else "(none)"
    write(f"finish_reason: {reason}")
    usage = assembler.usage
    write("usage: " + (json.dumps(usage.__dict__) if usage else "(none)"))
    write(f"quirks ({len(assembler.quirks)}):")
    for quirk in assembler.quirks:
        write(f"  - {quirk}")
    if message is not None:
        kept = [f"  message: {json.dumps(message.extra)}"] if message.extra else []
        kept += [f"  call {c.id}: {json.dumps(c.extra)}" for c in message.tool_calls if c.extra]
        write(f"provider fields kept ({len(kept)}):")
        for line in kept:
            write(line)
        write(f"{note}; the next request sends this turn as:")
        write("  " + json.dumps(chosen.message(message)))
    if error is not None:
        write(f"error: {type(error).__name__}: {error}")
        return 1
    return 0
