"""A loopback HTTP server that plays recorded responses back, for tests and the demo.

``ReplayServer`` listens on 127.0.0.1 (a free port), answers each
``POST …/chat/completions`` with the next queued reply, in order, and keeps every
request it received so that a test can check what the client sent. It runs in a
background thread; this is test tooling, the library itself uses no threads.

    with ReplayServer([sse_body_1, sse_body_2]) as server:
        client = OpenAIChatClient(base_url=server.base_url, api_key="test")
        ...
        assert server.requests[0].json["stream"] is True

By default every reply closes its connection. ``keep_alive="chunked"`` (or
``"length"``) keeps connections open between replies, as hosted providers do, and
``connections`` counts the ones accepted, so a test can tell how many a run opened.
"""

from __future__ import annotations

import json
import selectors
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from .exchange import RecordedRequest, Reply
from .strict import strict_check

if TYPE_CHECKING:
    import ssl


class ReplayServer:
    """Serves queued ``Reply`` objects (or plain bodies) in order on 127.0.0.1.

    Use as a context manager, or call ``start()`` and ``stop()``. ``base_url`` is the
    URL to give a client (``http://127.0.0.1:PORT/v1``). ``queue(reply)`` adds a reply
    later (the demo does, once it knows the caller's decision). When the queue is
    empty a request gets HTTP 500 with a JSON error saying so. ``requests`` (list of
    ``RecordedRequest``) keeps every request received; ``connections`` (int) counts
    the connections accepted, in every mode.

    Args:
        replies: the first replies, in order (``Reply``, or bytes/str bodies).
        check: ``check(number, request) -> None | str | Reply`` called for each
            request (``number`` counts from 0): ``None`` when the request is as
            expected; a str naming the first difference makes the server answer HTTP
            400 with that text (code ``request_mismatch``), keep the queued reply and
            append the text to ``mismatches``; a ``Reply`` is sent instead (its body is
            appended to ``mismatches``).
        strict: a provider profile name (str) whose refusals the server plays: a
            request that provider would refuse gets its error (``agentflow.testing.strict``,
            SPEC R21), checked before ``check``.
        keep_alive: ``None`` (close after each reply), ``"chunked"`` (keep the
            connection, send each body with ``Transfer-Encoding: chunked``, each item
            of ``Reply.chunks`` one chunk, as OpenAI's API streams) or ``"length"``
            (keep it, with ``Content-Length``). A reply whose ``headers`` say
            ``Connection: close`` still closes its connection (RFC 9112 §9.6).
        ssl_context: a server-side ``ssl.SSLContext`` to serve HTTPS, or ``None``.

    Raises:
        ValueError: ``keep_alive`` is not one of the three values.
    """

    def __init__(self, replies=(), check=None, strict: str | None = None,
                 keep_alive: str | None = None, ssl_context: ssl.SSLContext | None = None):
        if keep_alive not in (None, "chunked", "length"):
            raise ValueError(f"keep_alive is None, 'chunked' or 'length', not {keep_alive!r}")
        self.keep_alive = keep_alive
        self.ssl_context = ssl_context
        self.connections = 0
        self._open: set[socket.socket] = set()
        self._replies = [_as_reply(r) for r in replies]
        if strict is not None:
            check = _first_of(strict_check(strict, self._replies), check)
        self._check = check
        self.requests: list[RecordedRequest] = []
        self.mismatches: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def queue(self, reply) -> None:
        """Add a reply after the ones queued (safe while the server runs).

        Args:
            reply: a ``Reply``, or the body (bytes or str) of a 200 event stream.
        """
        with self._lock:
            self._replies.append(_as_reply(reply))

    @property
    def base_url(self) -> str:
        """The URL (str) to give a client, ``http(s)://127.0.0.1:PORT/v1``; only once
        started."""
        host, port = self._server.server_address[:2]
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host}:{port}/v1"

    def start(self) -> "ReplayServer":
        """Listen on a free port of 127.0.0.1 and serve from a background thread.

        Returns:
            ReplayServer: this server, so ``server = ReplayServer(...).start()`` works.
        """
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.replay = self
        self._server.daemon_threads = True
        self._wake, self._waker = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, name="agentflow-replay",
                                        daemon=True)
        self._thread.start()
        return self

    def _answer(self, request: RecordedRequest) -> Reply:
        """Record ``request`` and pick its reply: the check's answer, else the next
        queued reply, else HTTP 500 saying the queue is empty."""
        with self._lock:
            self.requests.append(request)
            problem = self._check(len(self.requests) - 1, request) if self._check else None
            if isinstance(problem, Reply):
                self.mismatches.append(_text(problem.body))
                return problem
            if problem:
                self.mismatches.append(problem)
                return Reply(json.dumps({"error": {
                    "message": problem, "code": "request_mismatch"}}),
                    status=400, content_type="application/json")
            if self._replies:
                return self._replies.pop(0)
        return Reply(json.dumps({"error": {
            "message": "replay server: no reply queued for this request",
            "code": "replay_exhausted"}}), status=500, content_type="application/json")

    def _serve(self) -> None:
        # Not serve_forever(): it notices shutdown() only at its next poll, so every stop
        # would wait up to a poll interval; a byte on the wake-up socket ends this at once.
        with selectors.DefaultSelector() as selector:
            selector.register(self._server, selectors.EVENT_READ)
            selector.register(self._wake, selectors.EVENT_READ)
            while True:
                if any(key.fileobj is self._wake for key, _ in selector.select()):
                    return
                self._server.handle_request()

    def stop(self) -> None:
        """Stop listening and wait for the requests being answered to finish."""
        if self._server is not None:
            self._waker.send(b"\0")
            self._thread.join()
            self._server.server_close()
            self._wake.close()
            self._waker.close()
            self._server = None

    def close_connections(self) -> None:
        """Close every connection now open, as a server's idle timeout does; the
        client finds out at its next request (``connections`` then grows)."""
        with self._lock:
            open_now = list(self._open)
        for connection in open_now:
            try:
                connection.shutdown(socket.SHUT_RDWR)  # wakes a handler waiting to read
            except OSError:
                pass  # already closed

    def __enter__(self) -> "ReplayServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    """One connection to a ``ReplayServer``: records each request and answers it with
    the reply the server picks (``ReplayServer._answer``)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep test output clean
        pass

    def setup(self):
        replay = self.server.replay
        with replay._lock:
            replay.connections += 1
        if replay.keep_alive:
            # each event leaves at once, as the client reads it (no Nagle wait)
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if replay.ssl_context is not None:
            self.request = replay.ssl_context.wrap_socket(self.request, server_side=True)
        with replay._lock:
            replay._open.add(self.request)
        super().setup()

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.replay._lock:
                self.server.replay._open.discard(self.connection)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        self._send(self.server.replay._answer(RecordedRequest(
            "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body,
            parsed)))

    def _send(self, reply: Reply):
        if reply.drop:
            self.close_connection = True
            return
        if reply.raw is not None:
            self._write([reply.raw], reply)
            return
        if self.server.replay.keep_alive:
            self._send_kept_alive(reply)
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        # No Content-Length: the body ends when the connection closes, as a
        # streaming provider's does.
        self.send_header("Connection", "close")
        self.end_headers()
        self._write(reply.chunks if reply.chunks is not None else [reply.body], reply)

    def _write(self, pieces, reply: Reply):
        try:
            for piece in pieces:
                if reply.delay:
                    time.sleep(reply.delay)
                self.wfile.write(_bytes(piece))
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading, as it may
        self.close_connection = True
        if reply.reset:
            self._reset()

    def _reset(self):
        # SO_LINGER with a zero timeout makes close() send RST, not FIN
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                   struct.pack("ii", 1, 0))
        self.connection.close()

    def _send_kept_alive(self, reply: Reply):
        chunked = self.server.replay.keep_alive == "chunked"
        pieces = (reply.chunks if reply.chunks is not None else [reply.body]) or [b""]
        if not chunked:
            pieces = [b"".join(_bytes(piece) for piece in pieces)]
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(pieces[0])))
        self.end_headers()
        try:
            for number, piece in enumerate(pieces, 1):
                if reply.delay:
                    time.sleep(reply.delay)
                data = _bytes(piece() if callable(piece) else piece)
                if chunked and data:  # an empty chunk would end the body
                    data = b"%x\r\n%s\r\n" % (len(data), data)
                if chunked and number == len(pieces):
                    data += b"0\r\n\r\n"  # the terminator, with the last chunk
                self.wfile.write(data)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading, as it may
        if reply.headers.get("Connection", "").lower() == "close":
            self.close_connection = True
        if reply.reset:
            self._reset()


class _Server(ThreadingHTTPServer):
    replay: ReplayServer

    def server_close(self) -> None:
        # kept-alive connections would outlive the server, each holding a thread
        super().server_close()
        self.replay.close_connections()

    def handle_error(self, request, client_address):
        # a client closing or resetting a kept-alive connection is no error of the server
        import ssl
        if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError)):
            super().handle_error(request, client_address)


def _bytes(piece) -> bytes:
    return piece.encode() if isinstance(piece, str) else piece


def _as_reply(reply) -> Reply:
    return reply if isinstance(reply, Reply) else Reply(body=reply)


def _first_of(*checks):
    """One check from several: the first problem any of them finds."""
    def check(number, request):
        for each in checks:
            problem = each(number, request) if each else None
            if problem:
                return problem
        return None
    return check


def _text(body: bytes | str) -> str:
    return body.decode("utf-8", "replace") if isinstance(body, bytes) else body


def delta_event(delta: dict, finish_reason: str | None = None,
                model: str = "replay-model") -> bytes:
    """One SSE event of a chat-completions stream: a chunk of one choice.

    Args:
        delta: the choice's ``delta`` (dict), e.g. ``{"content": "Hi"}``.
        finish_reason: the choice's ``finish_reason`` (str), or ``None``.
        model: the chunk's ``model`` field (str).

    Returns:
        bytes: ``data: {chunk}`` and the blank line that ends the event.
    """
    chunk = {"id": "chatcmpl-replay", "object": "chat.completion.chunk", "created": 0,
             "model": model, "choices": [{"index": 0, "delta": delta,
                                          "finish_reason": finish_reason}]}
    return f"data: {json.dumps(chunk)}\n\n".encode("utf-8")


def chat_stream(text: str = "", tool_calls=(), finish_reason: str | None = None,
                usage: tuple[int, int] | None = (10, 5), reasoning: str = "",
                model: str = "replay-model", done: bool = True) -> bytes:
    """An SSE body shaped like OpenAI's own chat-completions stream.

    Args:
        text: the reply text (str), sent a word at a time.
        tool_calls: ``(id, name, arguments_json)`` tuples, each sent as a header delta
            then two argument fragments.
        finish_reason: default ``"tool_calls"`` when there are calls, else ``"stop"``.
        usage: ``(prompt_tokens, completion_tokens)`` (tokens) sent on a last chunk with
            empty ``choices``, or ``None`` for no usage chunk.
        reasoning: reasoning text (str) sent a word at a time as ``reasoning_content``,
            before the text.
        model: the ``model`` field of every chunk (str).
        done: end with ``data: [DONE]`` (bool).

    Returns:
        bytes: the whole body, ``text/event-stream`` framing (WHATWG HTML §9.2.6).
    """
    def event(choices, extra=None) -> str:
        chunk = {"id": "chatcmpl-replay", "object": "chat.completion.chunk",
                 "created": 0, "model": model, "choices": choices, **(extra or {})}
        return f"data: {json.dumps(chunk)}\n\n"

    def delta(d, finish=None):
        return event([{"index": 0, "delta": d, "finish_reason": finish}])

    out = [delta({"role": "assistant", "content": ""})]
    for word in _words(reasoning):
        out.append(delta({"reasoning_content": word}))
    for word in _words(text):
        out.append(delta({"content": word}))
    for index, (call_id, name, arguments) in enumerate(tool_calls):
        out.append(delta({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                          "function": {"name": name, "arguments": ""}}]}))
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            out.append(delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(delta({}, finish_reason or ("tool_calls" if tool_calls else "stop")))
    if usage is not None:
        prompt, completion = usage
        out.append(event([], {"usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                        "total_tokens": prompt + completion}}))
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode("utf-8")


def _words(text: str) -> list[str]:
    words, start = [], 0
    for i, char in enumerate(text):
        if char == " " and i > start:
            words.append(text[start:i])
            start = i
    if start < len(text):
        words.append(text[start:])
    return words
