"""What the replay server and its strict modes exchange: the ``Reply`` queued for a
request and the ``RecordedRequest`` it received (``replay.py``, ``strict.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Reply:
    """One queued answer.

    ``body``: bytes (or str, UTF-8 encoded) sent as the response body.
    ``status``: the HTTP status (int). ``content_type``: the header's value.
    ``chunks``: optional list of bytes written one at a time with a flush between
    them (and ``delay`` seconds of sleep before each), instead of ``body``. In
    ``keep_alive="chunked"`` mode an item may also be a callable returning bytes,
    called when its turn comes (a test can hold the stream there until it says so).
    ``headers``: extra response headers (dict).
    ``drop``: close the connection without any response, as a crashed server or a
    broken proxy does.
    ``raw``: bytes written to the socket as they are (status line, headers and body
    all written by the caller) instead of a response built from the fields above,
    for framing no well-behaved server sends (a chunked body cut short, a status
    line alone).
    ``reset``: end the connection with a TCP reset (RST) instead of a clean close,
    after the body (or ``raw``) was written.
    """

    body: bytes | str = b""
    status: int = 200
    content_type: str = "text/event-stream"
    chunks: list[bytes] | None = None
    delay: float = 0.0
    headers: dict = field(default_factory=dict)
    drop: bool = False
    raw: bytes | None = None
    reset: bool = False


@dataclass
class RecordedRequest:
    """A request the server received: ``method``, ``path``, ``headers`` (dict with
    lower-case names), ``body`` (bytes) and ``json`` (the parsed body, or ``None``)."""

    method: str
    path: str
    headers: dict
    body: bytes
    json: object
