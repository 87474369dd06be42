"""How ``agentflow chat`` shows things: the output stream (for people, or ``--json``
lines), a call that waits for approval, the one-line summary of a call, a tool result."""

from __future__ import annotations

import contextlib
import json
import sys

from ..types import ToolApprovalRequest


class Output:
    """Standard output for people, or (``--json``) one JSON object a line, always
    ending with a closing object (``finish``, ``paused``, ``interrupted``, ``error``)."""

    def __init__(self, json_mode: bool, stream=None):
        self.json_mode = json_mode
        self.stream = stream or sys.stdout

    def say(self, text: str = "", end: str = "\n") -> None:
        """Write text for people and flush; nothing in ``--json`` mode.

        Args:
            text: the text (str); characters the stream's encoding cannot hold are
                written as backslash escapes instead of failing.
            end: appended to ``text`` (str, default a newline).
        """
        if not self.json_mode:
            try:
                self.stream.write(text + end)
            except UnicodeEncodeError:  # e.g. a file name that is not UTF-8: shown escaped
                encoding = getattr(self.stream, "encoding", None) or "utf-8"
                self.stream.write((text + end).encode(encoding, "backslashreplace")
                                  .decode(encoding))
            self.stream.flush()

    def emit(self, data: dict) -> None:
        """Write one JSON object as one line and flush; Ctrl-C waits until the line is
        out (POSIX), so a reader never gets half an object.

        Args:
            data: the object (dict, JSON-serialisable; e.g. ``update_to_json(update)``).

        Raises:
            TypeError: ``data`` holds a value ``json.dumps`` cannot write.
        """
        line = json.dumps(data) + "\n"
        # Ctrl-C waits until the line is out: a reader never gets half an object.
        with sigint_deferred():
            self.stream.write(line)
            self.stream.flush()



@contextlib.contextmanager
def sigint_deferred():
    """SIGINT is held back while the block runs and delivered after it (POSIX; where
    signals cannot be masked, the block just runs)."""
    import signal
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        yield
        return
    mask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        mask(signal.SIG_UNBLOCK, {signal.SIGINT})


def request_block(request: ToolApprovalRequest, why: str | None, preview: str | None) -> str:
    """A call that waits: its id, tool, description, why it asks (SPEC R18, R19), its
    arguments as indented JSON, and the tool's preview.

    Args:
        request: the ``ToolApprovalRequest``.
        why: the reason recorded at the gate (str), or ``None``.
        preview: the tool's preview of the call (str: the command line, a diff), or ``None``.

    Returns:
        str: the lines, joined by newlines, with no final newline.
    """
    lines = [f"\n── approval needed ── {request.call_id}",
             f"tool:        {request.name}",
             f"description: {request.description.splitlines()[0] if request.description else ''}"]
    if why and why != f"{request.name} always asks":
        lines.append(f"why:         {why}")
    arguments = (json.dumps(request.arguments, indent=2, ensure_ascii=False)
                 if request.arguments is not None else "(not valid JSON)")
    lines.append("arguments:\n" + "\n".join("  " + line for line in arguments.splitlines()))
    if preview:
        lines.append(preview.rstrip("\n"))
    return "\n".join(lines)


def summary(request: ToolApprovalRequest) -> str:
    """One line that lets a user judge a call of a tool without a preview summary.

    Args:
        request: the ``ToolApprovalRequest``.

    Returns:
        str: the arguments as JSON.
    """
    if request.arguments is None:
        return "(arguments are not valid JSON)"
    return json.dumps(request.arguments, ensure_ascii=False)


def result_line(name: str, result: str) -> str:
    """A tool result in one line of at most 200 characters.

    Args:
        name: the tool's name (str).
        result: the result text the model gets (str).

    Returns:
        str: ``  [NAME] RESULT``, its lines joined by `` ⏎ ``.
    """
    shown = " ⏎ ".join(result.strip().splitlines())
    return f"  [{name}] {shown[:200]}{'…' if len(shown) > 200 else ''}"
