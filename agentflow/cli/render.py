"""How ``agentflow chat`` shows things: the output stream (for people, or ``--json``
lines), a call that waits for approval, the one-line summary of a call, a tool result."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys

from ..display import needs_escaping, safe_text
from ..types import ToolApprovalRequest


class Output:
    """Standard output for people, or (``--json``) one JSON object a line, always
    ending with a closing object (``finish``, ``paused``, ``interrupted``, ``error``).

    Everything written for people passes ``safe_text`` (SPEC R25): no character that
    reached ``say`` can move the cursor or set the clipboard; the only escape sequences
    written are this class's own colours, on a terminal that wants them."""

    def __init__(self, json_mode: bool, stream=None, colour: bool | None = None):
        self.json_mode = json_mode
        self.stream = stream or sys.stdout
        self.colour = wants_colour(self.stream) if colour is None else colour
        self.at_line_start = True  # whether the last text written ended a line

    def say(self, text: str = "", end: str = "\n", style: str | None = None) -> None:
        """Write text for people and flush; nothing in ``--json`` mode.

        Args:
            text: the text (str), made safe to show (``safe_text``, newlines and tabs
                kept); characters the stream's encoding cannot hold are written as
                backslash escapes instead of failing.
            end: appended to ``text`` (str, default a newline).
            style: a ``STYLES`` name (str) to colour the text with on a colour
                terminal, or ``None``.
        """
        if self.json_mode:
            return
        text = self.paint(safe_text(text, multiline=True), style) + end
        if text:
            self.at_line_start = text.endswith("\n")
        try:
            self.stream.write(text)
        except UnicodeEncodeError:  # e.g. a file name that is not UTF-8: shown escaped
            encoding = getattr(self.stream, "encoding", None) or "utf-8"
            self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        self.stream.flush()

    def paint(self, text: str, style: str | None) -> str:
        """``text`` in a colour when this output is coloured.

        Args:
            text: text already safe to show (str).
            style: a ``STYLES`` name (str), or ``None`` for none.

        Returns:
            str: the text, wrapped in SGR sequences when coloured.
        """
        if not (self.colour and style and text):
            return text
        return f"\x1b[{STYLES[style]}m{text}\x1b[0m"

    def say_diff(self, diff: str) -> None:
        """Write a unified diff, its lines coloured by kind on a colour terminal.

        Args:
            diff: the diff (str), lines separated by newlines.
        """
        for line in diff.rstrip("\n").split("\n"):
            style = ("bold" if line.startswith(("--- ", "+++ ")) else
                     "cyan" if line.startswith("@@") else
                     "green" if line.startswith("+") else
                     "red" if line.startswith("-") else None)
            self.say(line, style=style)

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


STYLES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def wants_colour(stream) -> bool:
    """Whether to colour what goes to ``stream``: a terminal, ``NO_COLOR`` unset or
    empty (no-color.org), ``TERM`` not ``dumb``, and no ``--no-color``.

    Args:
        stream: a text stream.

    Returns:
        bool: ``True`` to colour.
    """
    if os.environ.get("NO_COLOR") or os.environ.get("TERM", "") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


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


ESCAPED_NOTE = ("note:        some text above held control or invisible characters, "
                "shown escaped (\\x1b, \\u202e …); the call runs with the real ones")


def show_request(out: Output, request: ToolApprovalRequest, why: str | None,
                 preview: str | None, position: tuple[int, int] = (1, 1)) -> None:
    """Show a call that waits: its id, tool, description, why it asks (SPEC R18, R19),
    its arguments as indented JSON, the tool's preview, and a note when any of it
    had to be escaped (SPEC R25). With a preview, an argument of several lines (a
    write's content) is left to the preview (the diff), not repeated as JSON.

    Args:
        out: the ``Output``.
        request: the ``ToolApprovalRequest``.
        why: the reason recorded at the gate (str), or ``None``.
        preview: the tool's preview of the call (str: the command line, a diff), or ``None``.
        position: ``(number, count)``: the call's place among the turn's waiting calls.
    """
    number, count = position
    of = f" (call {number} of {count})" if count > 1 else ""
    description = request.description.splitlines()[0] if request.description else ""
    texts = [request.call_id, request.name, description, why or "", preview or ""]
    out.say(f"\n── approval needed ── {safe_text(request.call_id)}{of}", style="bold")
    out.say(f"tool:        {safe_text(request.name)}")
    out.say(f"description: {safe_text(description)}")
    if why:  # also "write_file always asks": a prompt always says why it asks
        out.say(f"why:         {safe_text(why)}")
    if request.arguments is None:
        arguments = "(not valid JSON)"
    else:
        shown_below = bool(preview) and not preview.startswith("(no preview")
        arguments = _arguments_json(request.arguments, elide=shown_below)
        texts += _strings(request.arguments)
    out.say("arguments:\n" + "\n".join("  " + line for line in arguments.splitlines()))
    if preview and preview.startswith("--- "):
        out.say_diff(preview)
    elif preview:
        out.say(preview.rstrip("\n"))
    if any(needs_escaping(text, multiline=True) for text in texts):
        out.say(ESCAPED_NOTE, style="yellow")


_ELIDED = "\x00agentflow-elided:"


def _arguments_json(arguments, elide: bool) -> str:
    """The arguments as indented JSON; with ``elide``, a string of several lines is
    written ``<N lines, B bytes: see below>`` (not JSON, so no string can pose as it)."""
    def walk(value):
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if elide and isinstance(value, str) and "\n" in value.rstrip("\n"):
            lines = len(value.splitlines())
            size = len(value.encode("utf-8", "surrogatepass"))
            return f"{_ELIDED}<{lines} lines, {size} bytes: see below>"
        return value
    text = json.dumps(walk(arguments), indent=2, ensure_ascii=False)
    return safe_text(re.sub(r'"\\u0000agentflow-elided:(<[^"]*>)"', r"\1", text),
                     multiline=True)


def _strings(value) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def summary(request: ToolApprovalRequest, summarized: str | None = None) -> str:
    """One line that lets a user judge a call without the prompt, safe to show (SPEC R25).

    Args:
        request: the ``ToolApprovalRequest``.
        summarized: the tool's ``preview_summary`` of the call (str: the command line,
            a write's path and size), or ``None`` when it has none.

    Returns:
        str: the summary, or else the arguments as JSON.
    """
    if summarized is not None:
        return safe_text(summarized)
    if request.arguments is None:
        return "(arguments are not valid JSON)"
    return safe_text(json.dumps(request.arguments, ensure_ascii=False))


def call_line(name: str, subject: str) -> str:
    """A call that runs (or is refused) without a prompt, before its result: each shows
    what it does, so two different denied commands do not look alike.

    Args:
        name: the tool's name (str).
        subject: the call in one line (str, already safe: ``Chat.call_subject``).

    Returns:
        str: ``  → NAME SUBJECT``.
    """
    return f"  → {safe_text(name)} {subject}".rstrip()


def result_line(name: str, result: str, shown_live: int = 0) -> str:
    """A tool result in one line of at most 200 characters.

    Args:
        name: the tool's name (str).
        result: the result text the model gets (str).
        shown_live: how many lines of the command's output were already shown as they
            came (int); then only the result's first line (the exit status) is repeated,
            not the output a second time.

    Returns:
        str: ``  [NAME] RESULT``, its lines joined by `` ⏎ ``, safe to show (SPEC R25).
    """
    lines = result.strip().replace("\r\n", "\n").split("\n")
    if shown_live:
        plural = "s" if shown_live > 1 else ""
        lines = [f"{lines[0]} ({shown_live} line{plural} of output above)"]
    shown = safe_text(" ⏎ ".join(lines))
    return f"  [{safe_text(name)}] {shown[:200]}{'…' if len(shown) > 200 else ''}"
