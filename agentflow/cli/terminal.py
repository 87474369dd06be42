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
