"""What moves on a terminal while the chat waits: a spinner with the elapsed time while
the model thinks or a tool runs, and a running command's output as it comes (issue 24).
The one thread the command line starts for it draws the spinner; the library stays
single-threaded."""

from __future__ import annotations

import codecs
import threading
import time

from ..display import safe_text

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
QUIET = 0.3  # seconds of silence before the spinner shows: streaming text never blinks


class Spinner:
    """A spinner on ``out``'s terminal line; ``waiting()`` starts the clock, ``stop()``
    erases it before anything else is written.

    Args:
        out: the chat's ``Output`` (its stream is a terminal).
        draw: whether to draw at all (a terminal that can erase a line); when false
            nothing is written and no thread is started.
    """

    def __init__(self, out, draw: bool = True):
        self.out = out
        self.lock = threading.Lock()
        self.since: float | None = None
        self.shown = False
        self.label = "waiting for the model"
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._draw, name="agentflow-spinner",
                                       daemon=True)
        if draw:
            self.thread.start()

    def waiting(self, label: str) -> None:
        """Start waiting (the spinner shows after ``QUIET`` seconds).

        Args:
            label: what is waited for (str), e.g. ``"waiting for the model"``.
        """
        with self.lock:
            self.label, self.since = label, time.monotonic()

    def stop(self) -> None:
        """Stop waiting, and erase the spinner if it shows."""
        with self.lock:
            self.since = None
            self._erase()

    def close(self) -> None:
        """Stop the drawing thread."""
        self.stop()
        self.done.set()
        if self.thread.is_alive():
            self.thread.join(timeout=1)

    def _erase(self) -> None:
        if self.shown:
            self.out.stream.write("\r\x1b[K")
            self.out.stream.flush()
            self.shown = False

    def _draw(self) -> None:
        frame = 0
        while not self.done.wait(0.1):
            with self.lock:
                if (self.since is None or time.monotonic() - self.since < QUIET
                        or not self.out.at_line_start):  # never over a line's text
                    continue
                elapsed = time.monotonic() - self.since
                text = self.out.paint(f"{FRAMES[frame % len(FRAMES)]} {self.label} "
                                      f"{elapsed:.0f} s", "dim")
                self.out.stream.write(f"\r\x1b[K{text}")
                self.out.stream.flush()
                self.shown, frame = True, frame + 1


class LiveOutput:
    """A running command's output on the terminal as it comes, each line indented
    under a bar and shown safe (SPEC R25): the ``RunCommand.on_output`` hook.

    Args:
        out: the chat's ``Output``.
        spinner: the ``Spinner``, erased before each piece and restarted after.
        on_start: called (no arguments) before a command's first piece, to say which
            call it is.
    """

    def __init__(self, out, spinner: Spinner, on_start=None):
        self.out, self.spinner, self.on_start = out, spinner, on_start
        self.started = False
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.at_line_start = True
        self.lines = 0  # lines of the current command shown so far

    def __call__(self, piece: bytes) -> None:
        """Show one piece of output.

        Args:
            piece: bytes the command wrote (stdout and stderr).
        """
        text = self.decoder.decode(piece).replace("\r\n", "\n")
        self.spinner.stop()
        if not self.started and self.on_start is not None:
            self.on_start()
        self.started = True
        parts, shown = text.split("\n"), ""
        for number, part in enumerate(parts):
            last = number == len(parts) - 1
            if last and not part:
                break
            self.lines += self.at_line_start
            shown += ("  │ " if self.at_line_start else "") + safe_text(part)
            shown += "" if last else "\n"
            self.at_line_start = not last
        if shown:
            self.out.say(shown, end="", style="dim")
        self.spinner.waiting("running the command")

    def end(self) -> int:
        """A command ended: end a last line it left open.

        Returns:
            int: how many lines of its output were shown (0: none), so the result
            line need not show them again.
        """
        shown, self.lines, self.started = self.lines, 0, False
        if not self.at_line_start:
            self.out.say()
            self.at_line_start = True
        return shown
