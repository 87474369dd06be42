"""``agentflow inspect-stream FILE``: what a recorded SSE body assembles to, and which
provider quirks (SPEC §6) it needed. For users whose provider misbehaves."""

from __future__ import annotations

import json
import sys

from .assembler import ChunkAssembler, stream_updates
from .errors import ProviderError


def inspect_stream(data: bytes, out=None) -> int:
    """Print the assembled message of the SSE body ``data`` (bytes) and the quirks
    met, to ``out`` (default stdout). Returns 0, or 1 when the stream raised."""
    out = out or sys.stdout
    assembler = ChunkAssembler()
    error = None
    try:
        for _ in stream_updates([data], assembler):
            pass
    except ProviderError as exc:
        error = exc
    write = lambda line="": out.write(line + "\n")  # noqa: E731
    text, reasoning = assembler.text, assembler.reasoning
    write(f"text ({len(text)} characters):")
    write("  " + (text.replace("\n", "\n  ") if text else "(none)"))
    if reasoning:
        write(f"reasoning ({len(reasoning)} characters): {reasoning[:120]!r}"
              + (" ..." if len(reasoning) > 120 else ""))
    calls = assembler.tool_calls
    write(f"tool calls ({len(calls)}):")
    for call in calls:
        write(f"  {call.id or '(no id)'}  {call.name or '(no name)'}  {call.arguments}")
    reason = assembler.finish_reason.value if assembler.finish_reason else "(none)"
    write(f"finish_reason: {reason}")
    usage = assembler.usage
    write("usage: " + (json.dumps(usage.__dict__) if usage else "(none)"))
    write(f"quirks ({len(assembler.quirks)}):")
    for quirk in assembler.quirks:
        write(f"  - {quirk}")
    if error is not None:
        write(f"error: {type(error).__name__}: {error}")
        return 1
    return 0
