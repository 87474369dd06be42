"""Reading what the person types at the terminal."""

from __future__ import annotations

from ..display import safe_text


class Quit(Exception):
    """The user chose q at the approval prompt (or ended its input)."""


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
