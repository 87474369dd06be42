"""Reading what the person types at the terminal: line editing and history where the
standard library has readline, and a line that starts with a given text."""

from __future__ import annotations

from ..display import safe_text
from .errors import Quit


def read(say, prompt: str) -> str:
    """Read one line from the terminal.

    Args:
        say: the chat's ``Output.say``.
        prompt: the text shown before the cursor (str), made safe to show (SPEC R25).

    Returns:
        str: the line, without its newline.

    Raises:
        Quit: input ended (Ctrl-D): like q, the call stays pending.
    """
    try:
        return input(safe_text(prompt))
    except EOFError:  # Ctrl-D: like q, the call stays pending
        say()
        raise Quit() from None


def line_editing() -> bool:
    """Give ``input()`` line editing and history (the standard library's ``readline``,
    where the platform has it).

    Returns:
        bool: ``True`` when readline is in use.
    """
    try:
        import readline  # noqa: F401 - importing it is what gives input() editing
    except ImportError:
        return False
    return True


HISTORY_LENGTH = 1000  # messages kept between runs, as Python's REPL keeps its lines


class History:
    """The chat's messages, kept between runs in a file of the person's (mode 0600, as
    Python's REPL keeps ``~/.python_history``): up-arrow at ``you>`` brings them back.
    Only messages go in, never answers at the approval prompt (``y`` is not a message).

    The file is ``$AGENTFLOW_HISTORY``, or ``$XDG_STATE_HOME/agentflow/chat_history``
    (default ``~/.local/state/agentflow/chat_history``); ``AGENTFLOW_HISTORY=off`` keeps
    none. Without readline nothing is kept.
    """

    def __init__(self, readline, path: str | None):
        self.readline, self.path = readline, path

    @classmethod
    def open(cls, say) -> "History":
        """Read the history file into readline, for this run's prompt.

        Args:
            say: the chat's ``Output.say``, for a file that cannot be used (the chat
                goes on without history).

        Returns:
            History: the history; ``add`` does nothing where none is kept.
        """
        import os
        import sys
        readline = sys.modules.get("readline")
        path = history_path()
        if readline is None or path is None:
            return cls(None, None)
        readline.set_auto_history(False)  # answers at the approval prompt stay out
        readline.set_history_length(HISTORY_LENGTH)
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            # O_NOFOLLOW: a link planted in its place does not choose where messages go
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            os.close(fd)
            readline.read_history_file(path)
        except OSError as exc:
            say(f"  (no input history: {safe_text(path)}: {exc.strerror or exc}; "
                "AGENTFLOW_HISTORY=off silences this)")
            return cls(None, None)
        return cls(readline, path)

    def add(self, message: str) -> None:
        """Keep one message (each of its lines, as the REPL keeps a block) and write
        the file, so a run that is killed later loses none.

        Args:
            message: the message as typed (str).
        """
        if self.readline is None:
            return
        import os
        for line in message.splitlines():
            if line.strip():
                self.readline.add_history(line)
        try:
            self.readline.write_history_file(self.path)
            os.chmod(self.path, 0o600)
        except OSError:  # a full disk ends the history, not the chat
            self.readline = None


def history_path() -> str | None:
    """The input history's file (see ``History``).

    Returns:
        str | None: its path; ``None`` with ``AGENTFLOW_HISTORY=off`` (or empty).
    """
    import os
    chosen = os.environ.get("AGENTFLOW_HISTORY")
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off") else os.path.expanduser(chosen)
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "agentflow", "chat_history")


def read_prefilled(say, prompt: str, text: str) -> str:
    """Read one line that starts as ``text``, for the person to edit (readline); without
    readline, ``text`` is shown and an empty line keeps it.

    Args:
        say: the chat's ``Output.say``.
        prompt: the text shown before the cursor (str).
        text: the line's starting text (str; it holds no control character).

    Returns:
        str: the line as the person left it.

    Raises:
        Quit: input ended (Ctrl-D).
    """
    import sys
    readline = sys.modules.get("readline")
    if readline is None:
        say(f"{prompt}{text}")
        typed = read(say, "  (empty: keep): ")
        return typed if typed.strip() else text
    readline.set_startup_hook(lambda: readline.insert_text(text))
    try:
        return read(say, prompt)
    finally:
        readline.set_startup_hook(None)


def with_piped_input(message: str | None) -> str | None:
    """The message with what was piped to standard input: the piped text is the
    message, or goes below the one given (``cat f | agentflow chat "summarise"``).

    Args:
        message: the message given as an argument (str), or ``None``.

    Returns:
        str | None: the message to send; ``message`` as it was when standard input is
        a terminal or brought nothing.
    """
    import sys
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return message
        piped = sys.stdin.read()
    except (OSError, ValueError):  # closed, or not readable here: nothing was piped
        return message
    if not piped.strip():
        return message
    return piped if message is None else f"{message}\n\n{piped}"
