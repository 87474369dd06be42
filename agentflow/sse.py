"""A sans-IO parser for ``text/event-stream`` (Server-Sent Events).

Theory of operation
-------------------
The parser never touches a socket. You hand it bytes as they arrive with
``feed(data)``, in pieces of any size, and it hands back the events those bytes
completed. ``iter_events(chunks)`` is the same thing as a generator over an iterable of
byte chunks, which is how the provider client uses it.

It follows WHATWG HTML §9.2.6 "Parsing an event stream", in three layers:

1. **Decoding.** Bytes go through an incremental UTF-8 decoder, so a character split
   across two network reads decodes once both halves are here. Invalid bytes become
   U+FFFD, as the spec's "UTF-8 decode" does. One BOM at the very start is dropped;
   a second one is an ordinary character (and so spoils the first field name).
2. **Lines.** A line ends at CRLF, LF or a lone CR. Because a CR may be the last byte
   of one read and its LF the first byte of the next, a trailing CR is remembered and
   a leading LF of the next read is then swallowed: the pair is one line ending.
   The text after the last line ending waits in a buffer for more bytes.
3. **Fields.** Each complete line is, in order of the spec's steps:
   a blank line → dispatch the event being built; ``:…`` → a comment, ignored;
   ``name:value`` → a field (one leading space of the value removed); a line with no
   colon → that field with an empty value. ``data`` lines accumulate joined by LF,
   ``event`` sets the type, ``id`` sets the last event ID unless it contains NUL,
   ``retry`` sets the reconnection time (ms) only if it is all ASCII digits; any other
   name is ignored. Names are case-sensitive.

An event with no ``data`` line is not dispatched (only its ``id`` takes effect).
At end of stream, ``close()`` discards an event whose blank line never came.
The parser knows nothing of OpenAI's ``[DONE]``; that is the client's business.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Iterable, Iterator


@dataclass(slots=True)
class ServerSentEvent:
    """One dispatched event: ``type`` (str, default ``"message"``), ``data`` (str, the
    data lines joined with LF) and ``id`` (str, the last event ID when it was
    dispatched; ``""`` if none was ever set)."""

    type: str
    data: str
    id: str = ""


class SSEParser:
    """Incremental event-stream parser (WHATWG HTML §9.2.6). See the module docstring.

    Attributes after feeding: ``last_event_id`` (str) and ``retry`` (int milliseconds,
    or ``None`` when the stream never set a valid one).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._at_start = True        # the BOM check has not happened yet
        self._after_cr = False       # the previous text ended in CR; a leading LF pairs with it
        self._partial: list[str] = []  # text after the last line ending, in pieces
        self._data: list[str] = []   # the data lines of the event being built
        self._type = ""
        self.last_event_id = ""
        self.retry: int | None = None

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        """Parse the next bytes of the stream (WHATWG HTML §9.2.6).

        Args:
            data: the next bytes (any length, ``b""`` allowed); they may split a UTF-8
                character, a CRLF pair or a line anywhere.

        Returns:
            list[ServerSentEvent]: the events these bytes completed, in order; often
            empty.
        """
        return self._feed_text(self._decoder.decode(data))

    def close(self) -> list[ServerSentEvent]:
        """Signal end of stream. An incomplete last line is a line, but the event it
        belongs to never got its blank line, so it is discarded (WHATWG: "once the end
        of the file is reached, any pending data must be discarded"). Returns ``[]``."""
        self._feed_text(self._decoder.decode(b"", final=True))
        self._partial = []
        self._data = []
        self._type = ""
        return []

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if self._at_start:
            self._at_start = False
            if text[0] == "\ufeff":
                text = text[1:]
        if self._after_cr:
            self._after_cr = False
            if text[:1] == "\n":
                text = text[1:]
        if "\r" in text:
            self._after_cr = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            # One huge event arrives in many reads: keep the pieces and join them once
            # its line ends, so its cost stays linear in its size.
            self._partial.append(text)
            return []
        if self._partial:
            self._partial.append(text)
            text = "".join(self._partial)
        lines = text.split("\n")
        last = lines.pop()
        self._partial = [last] if last else []
        events: list[ServerSentEvent] = []
        data = self._data
        for line in lines:
            # "data:" lines are nearly all of a chat stream: handled inline, for speed
            if line[:5] == "data:":
                data.append(line[6:] if line[5:6] == " " else line[5:])
            elif not line:
                if data:
                    events.append(ServerSentEvent(self._type or "message", "\n".join(data),
                                                  self.last_event_id))
                    data = self._data = []
                self._type = ""
            elif line[0] != ":":
                self._field(line)
        return events

    def _field(self, line: str) -> None:
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self.retry = int(value)



def iter_events(chunks: Iterable[bytes]) -> Iterator[ServerSentEvent]:
    """Parse a whole stream lazily (WHATWG HTML §9.2.6; SPEC §7).

    Args:
        chunks: an iterable of byte chunks (bytes), e.g. a response body read as it
            arrives; chunk boundaries may fall anywhere.

    Yields:
        ServerSentEvent: each event as soon as the chunk completing it arrives (no
        read-ahead). An event whose closing blank line never came is discarded.
    """
    parser = SSEParser()
    for chunk in chunks:
        yield from parser.feed(chunk)
    parser.close()
