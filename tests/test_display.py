"""SPEC R25: ``agentflow.display.safe_text`` shows every character a terminal acts on
as a visible escape, and leaves everything else as it is."""

from __future__ import annotations

import pytest

from agentflow.display import needs_escaping, safe_text

# The injections (real ESC bytes) and variants: each control a terminal acts on.
INJECTIONS = [
    ("touch PWNED #\r\x1b[2A\x1b[2K    \"command\": \"ls -la\"\x1b[2B\r\x1b[2K$ ls -la",
     "touch PWNED #\\x0d\\x1b[2A\\x1b[2K    \"command\": \"ls -la\"\\x1b[2B\\x0d\\x1b[2K$ ls -la"),
    ("desc\x1b[1A\x1b[1G\x1b[2K", "desc\\x1b[1A\\x1b[1G\\x1b[2K"),
    ("\x1b]0;title\x07\x1b]52;c;cm0gLXJmIH4=\x07", "\\x1b]0;title\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07"),
    ("\x9b2J", "\\x9b2J"),                       # C1 CSI: one byte, no ESC
    ("ab\x08\x08cd", "ab\\x08\\x08cd"),          # backspace overwrites
    ("rm -rf /\x7f", "rm -rf /\\x7f"),            # DEL
    ("safe\u202e;txt.exe", "safe\\u202e;txt.exe"),  # right-to-left override
    ("a\u2066b\u2069", "a\\u2066b\\u2069"),      # isolates
    ("rm\u200b -rf", "rm\\u200b -rf"),           # zero-width space
    ("x\ufeffy", "x\\ufeffy"),                   # byte order mark
    ("one\u2028two\u2029", "one\\u2028two\\u2029"),  # line / paragraph separators
    ("tag\U000e0041", "tag\\U000e0041"),         # tag characters (invisible ASCII)
    ("bad\udcff", "bad\\udcff"),                 # a lone surrogate (a non-UTF-8 name)
]


@pytest.mark.parametrize("text, shown", INJECTIONS)
def test_r25_controls_sequences_and_invisible_characters_are_shown_escaped(text, shown):
    assert safe_text(text) == shown
    assert needs_escaping(text)
    assert safe_text(shown) == shown  # idempotent: an escape is printable ASCII


def test_r25_printable_text_is_left_as_it_is():
    for text in ("ls -la", "naïve café — 東京 ⏎ …", "emoji 😀", "a\\x1b literal backslash",
                 "git commit -m 'x'", ""):
        assert safe_text(text) == text and not needs_escaping(text)


def test_r25_newline_and_tab_are_kept_only_in_a_multi_line_view():
    assert safe_text("a\n\tb") == "a\\x0a\\x09b"
    assert safe_text("a\n\tb", multiline=True) == "a\n\tb"
    assert not needs_escaping("a\n\tb", multiline=True)
    # a carriage return overwrites the line even in a multi-line view
    assert safe_text("a\r\nb", multiline=True) == "a\\x0d\nb"


def test_r25_every_c0_and_c1_control_is_escaped():
    for code in [*range(0x20), *range(0x7f, 0xa0)]:
        shown = safe_text(chr(code))
        assert shown == f"\\x{code:02x}", code
