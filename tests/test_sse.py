"""The SSE parser against every row of ../shared/fixtures/sse-cases.md (SPEC §7,
WHATWG HTML §9.2.6 "Parsing an event stream").

Each row is written here as the byte feeds the fixture describes. Every row must hold
(sse-cases.md, header: "every row must also hold when the input is fed one byte at a
time and in random splits") when fed:

* as the row gives it (rows 17, 19 and 25 name their own feed boundaries),
* whole, in one ``feed``,
* one byte at a time,
* in seeded random splits.

The stream always ends with ``close()``, which returns no events (an unterminated
event is discarded, SPEC §7 last item).
"""

from __future__ import annotations

import pytest

from agentflow.sse import ServerSentEvent, SSEParser, iter_events
from helpers_streams import random_splits

LF, CR = b"\n", b"\r"
BOM = b"\xef\xbb\xbf"

# (row, feeds, expected events as (type, data), expected last_event_id, expected retry)
# last_event_id "" and retry None are the parser's initial values: rows without a valid
# ``id``/``retry`` field leave them unchanged (WHATWG HTML §9.2.6, "id"/"retry" steps).
ROWS = [
    (1, [b"data:1\n\n"], [("message", "1")], "", None),
    # one leading space of the value is removed
    (2, [b"data: 1\n\n"], [("message", "1")], "", None),
    # only one space is removed
    (3, [b"data:  2\n\n"], [("message", " 2")], "", None),
    # a tab is not a space: kept
    (4, [b"data:\ttest\n\n"], [("message", "\ttest")], "", None),
    # data lines joined with LF
    (5, [b"data:a\ndata:b\n\n"], [("message", "a\nb")], "", None),
    # no colon: the field name is the whole line, the value empty
    (6, [b"data\n\n"], [("message", "")], "", None),
    (7, [b"data:\n\ndata\ndata\n\ndata:x\n\n"],
     [("message", ""), ("message", "\n"), ("message", "x")], "", None),
    # a line starting with ':' is a comment
    (8, [b": comment\ndata:1\n\n"], [("message", "1")], "", None),
    # a comment then a blank line: no data, nothing dispatched
    (9, [b":\n\n"], [], "", None),
    (10, [b"event:ping\ndata:x\n\n"], [("ping", "x")], "", None),
    # an empty event type falls back to "message"
    (11, [b"event:\ndata:x\n\n"], [("message", "x")], "", None),
    # field names are case-sensitive: "Data" is unknown
    (12, [b"Data:1\n\n"], [], "", None),
    # a leading space makes the field name " data": unknown
    (13, [b" data:1\n\n"], [], "", None),
    # unknown fields are ignored
    (14, [b"foo:bar\ndata:1\n\n"], [("message", "1")], "", None),
    # CRLF line endings
    (15, [b"data:1\r\n\r\n"], [("message", "1")], "", None),
    # bare CR line endings
    (16, [b"data:1\r\r"], [("message", "1")], "", None),
    # a CRLF split across two feeds is one line ending
    (17, [b"data:a\r\ndata\ndata:b\r\n\r", b"\n"], [("message", "a\n\nb")], "", None),
    # one leading BOM is stripped
    (18, [BOM + b"data:1\n\n"], [("message", "1")], "", None),
    # a second BOM is an ordinary character and spoils the first field name
    (19, [BOM, BOM, b"data:1\n\ndata:2\n\n"], [("message", "2")], "", None),
    # the event without its closing blank line is discarded at end of stream
    (20, [b"data:1\n\ndata:2"], [("message", "1")], "", None),
    # NUL in data is kept
    (21, [b"data:\x00\n\n"], [("message", "\x00")], "", None),
    # an id containing NUL is ignored: the last event id stays unchanged ("")
    (22, [b"id:a\x00b\ndata:1\n\n"], [("message", "1")], "", None),
    # retry only when all ASCII digits: 1000x is ignored, 3000 stays
    (23, [b"retry:3000\nretry:1000x\ndata:1\n\n"], [("message", "1")], "", 3000),
    # 03000 is all digits: decimal 3000; no data, so no event
    (24, [b"retry:03000\n\n"], [], "", 3000),
    # a multi-byte character split between two feeds decodes once both halves arrive
    (25, [b"data:\xc3", b"\xa9\n\n"], [("message", "\u00e9")], "", None),
    # the parser knows nothing of [DONE]: it is an ordinary data value
    (26, [b"data: [DONE]\n\n"], [("message", "[DONE]")], "", None),
]

SEEDS = [0, 1, 2, 3, 7, 42, 1234, 2024]


def _splits(feeds: list[bytes]) -> list[tuple[str, list[bytes]]]:
    whole = b"".join(feeds)
    ways = [("as-given", list(feeds)), ("whole", [whole]),
            ("bytewise", [whole[i:i + 1] for i in range(len(whole))])]
    for seed in SEEDS:
        ways.append((f"seed{seed}", random_splits(whole, seed, max_piece=5)))
    return ways


CASES = [pytest.param(row, way, pieces, events, last_id, retry, id=f"row{row}-{way}")
         for row, feeds, events, last_id, retry in ROWS
         for way, pieces in _splits(feeds)]


def test_table_covers_all_26_rows():
    """sse-cases.md has 26 rows; each one is in the table exactly once."""
    assert [row[0] for row in ROWS] == list(range(1, 27))


@pytest.mark.parametrize("row, way, pieces, expected, last_id, retry", CASES)
def test_sse_case(row, way, pieces, expected, last_id, retry):
    """sse-cases.md row ``row`` (WHATWG HTML §9.2.6), fed as ``way``."""
    parser = SSEParser()
    events: list[ServerSentEvent] = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    assert parser.close() == []
    assert [(e.type, e.data) for e in events] == expected
    assert parser.last_event_id == last_id
    assert parser.retry == retry


def test_row22_event_carries_unchanged_id():
    """Row 22: the dispatched event's id is the last event id, still "" because the id
    with NUL was ignored (WHATWG: "If the field value does not contain U+0000 NULL, then
    set the last event ID buffer to the field value")."""
    events = SSEParser().feed(b"id:a\x00b\ndata:1\n\n")
    assert [(e.type, e.data, e.id) for e in events] == [("message", "1", "")]


def test_valid_id_is_kept_and_carried_by_later_events():
    """WHATWG HTML §9.2.6: a valid ``id`` sets the last event ID, which each later
    dispatched event carries until another ``id`` changes it."""
    parser = SSEParser()
    events = parser.feed(b"id:7\ndata:a\n\ndata:b\n\nid\ndata:c\n\n")
    assert [(e.data, e.id) for e in events] == [("a", "7"), ("b", "7"), ("c", "")]
    assert parser.last_event_id == ""


def test_iter_events_over_chunks():
    """SPEC §7: a generator over an iterable of byte chunks. Rows 17 and 25 as chunks,
    plus an unterminated event at the end, which is discarded (row 20)."""
    chunks = [b"event:ping\ndata:a\r\ndata\ndata:b\r\n\r", b"\ndata:\xc3", b"\xa9\n\n",
              b"data:lost"]
    assert [(e.type, e.data) for e in iter_events(chunks)] == [
        ("ping", "a\n\nb"), ("message", "\u00e9")]


def test_iter_events_yields_without_reading_ahead():
    """iter_events yields an event as soon as the chunk completing it arrives (SPEC §6:
    no read-ahead buffering): it must not pull the next chunk first."""
    pulled = []

    def chunks():
        for chunk in (b"data:1\n\n", b"data:2\n\n"):
            pulled.append(chunk)
            yield chunk

    events = iter_events(chunks())
    first = next(events)
    assert first.data == "1"
    assert pulled == [b"data:1\n\n"]
    assert [e.data for e in events] == ["2"]


def test_close_discards_unterminated_event():
    """SPEC §7 / WHATWG: at end of stream an event without its closing blank line is
    discarded; close() returns no events, even when the last line itself is complete."""
    parser = SSEParser()
    assert parser.feed(b"data:1\n\nevent:x\ndata:2\n") == [
        ServerSentEvent("message", "1", "")]
    assert parser.close() == []


def test_close_discards_unterminated_line():
    """Row 20's shape: the last line lacks even its line ending; close() yields nothing."""
    parser = SSEParser()
    assert parser.feed(b"data:partial") == []
    assert parser.close() == []
