"""What the peer adapters share: the JSON-lines loop of conformance/README.md
("Adapters"), the case tools' fixed behaviours, and the error kinds by behaviour.

Each peer adapter (``peer_*.py``) is run from the repository root as
``python -m conformance.adapters.peer_NAME`` in .conformance-venv, where its framework is
installed at the version pinned in ``requirements.txt``. Of agentflow they import only
``agentflow.canonical.canonical_json``, the one RFC 8785 definition of the repository
(checked against conformance/digest-vectors.json), so an adapter's ``echo`` cannot
differ from the digest's canonical form; nothing of agentflow's loop is used.
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback

from agentflow.canonical import canonical_json

__all__ = ["canonical_json", "rejection_text", "tool_body", "error_kind", "counting", "Peer",
           "json_lines", "serve"]


def rejection_text(reason) -> str:
    """SPEC R7's text for a rejection with ``reason`` (``None``, blank or whitespace:
    ``User denied``), for frameworks whose documented parameter is the text the model
    gets (README, "Mapping a framework")."""
    return f"Rejected: {reason if reason and reason.strip() else 'User denied'}"


def tool_body(spec: dict, executions: list):
    """A function doing what the case tool ``spec`` does when executed: record the
    execution, then return its value, echo its arguments or fail with ``type`` and
    ``message`` (an exception whose class is named ``type``, which is what a Python
    framework formats as ``Error: <type>: <message>`` if it follows SPEC R13)."""
    behaviour = spec.get("behaviour") or {"kind": "return", "value": "ok"}

    def body(**arguments):
        executions.append({"tool": spec["name"], "arguments": arguments})
        if behaviour["kind"] == "echo":
            return canonical_json(arguments)
        if behaviour["kind"] == "raise":
            raise type(behaviour["type"], (Exception,), {})(behaviour["message"])
        return behaviour["value"]
    return body


def error_kind(exc: BaseException) -> str:
    """The README's kinds by behaviour: an HTTP or stream failure of the provider is a
    ``ProviderError``; anything else keeps its class name (and so fails a case that
    expects a kind)."""
    seen = exc
    while seen is not None:
        module = type(seen).__module__ or ""
        if module.startswith(("openai", "httpx")):
            return "ProviderError"
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


def counting(emit, seen: list):
    """``emit`` that also appends each update's type to ``seen``: an adapter reads from
    it whether a run failed before it yielded anything (with no execution and the
    session unchanged, the README's ``ApprovalError`` behaviour)."""
    def counted(update: dict) -> None:
        seen.append(update["type"])
        emit(update)
    return counted


class Peer:
    """One framework behind the protocol: ``setup(message) -> ready`` and
    ``async run(message, emit) -> end`` (README, "Adapters")."""

    def setup(self, message: dict) -> dict:
        raise NotImplementedError

    async def run(self, message: dict, emit) -> dict:
        raise NotImplementedError


def json_lines(setup, run) -> int:
    """The JSON-lines loop of the README ("Adapters"): one message per stdin line,
    answers on stdout. ``setup(message) -> ready``; ``run(message, emit) -> end``, where
    ``emit(update)`` sends one update as it happens. Returns 0 at ``exit`` or end of
    input. Used by every adapter of this repository, the reference one included."""
    def send(message: dict) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if message["type"] == "setup":
            send(setup(message))
        elif message["type"] == "run":
            send(run(message, lambda u: send({"type": "update", "update": u})))
        elif message["type"] == "exit":
            break
    return 0


def serve(peer: Peer) -> int:
    """``json_lines`` for a peer, with one event loop for the whole process (the
    frameworks' clients are bound to it)."""
    runner = asyncio.Runner()

    def run(message: dict, emit) -> dict:
        try:
            return runner.run(peer.run(message, emit))
        except Exception as exc:  # the adapter's own fault: say so, keep serving
            traceback.print_exc()
            return {"type": "end", "error": {"kind": "AdapterError", "message": repr(exc)},
                    "history": [], "executions": []}

    try:
        return json_lines(peer.setup, run)
    finally:
        runner.close()
