"""``OpenAIChatClient``: the provider client for any OpenAI-compatible endpoint.

One model call is one ``POST {base_url}/chat/completions`` with ``stream: true``. The
response body is read as it arrives, fed to the SSE parser, and each chunk to the
``ChunkAssembler``, whose updates are yielded at once (SPEC §6: no read-ahead).

One connection serves a whole conversation. A turn ends at ``data: [DONE]``, often a
few bytes before its HTTP body does (a chunked body's terminator), and a connection
whose body was not read to its end cannot go back to the pool. So a complete turn's
response is kept, and the rest of it is read (``_DRAIN_BYTES`` and ``_DRAIN_SECONDS``
at most) just before the client's next request, which then reuses the connection.
Not at the end of the turn: the loop reads a provider turn to its end before it
hands the caller its last update, so any wait there would delay that update.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from .assembler import (ID_LIMIT, ChunkAssembler, completion_updates, error_from_body,
                        stream_updates)
from .errors import (AuthenticationError, IncompleteStreamError, ProviderError,
                     ProviderTimeoutError, Setting, provider_error)
from .profiles import Profile, resolve_profile
from .redact import mask_url, scrub, scrub_value
from .types import AgentResponseUpdate, AgentRunOptions, ChatMessage

if TYPE_CHECKING:
    import requests

# requests (and urllib3) are imported when the first client is made, not with
# agentflow: they take longer to import than all of agentflow (make bench).

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_RETRY_WAIT = 60.0  # seconds; a longer Retry-After is reported, not slept through
_READ_SIZE = 65536
FINISH_WAIT = 10.0  # seconds: finish_wait's default (SPEC §6, fourth batch)
MAX_REDIRECTS = 3  # same-origin 307/308 redirects followed for one request
# What is read, at most, after a complete turn to reuse its connection: the rest of a
# chunked body is its 5-byte terminator, perhaps after a trailing comment or usage
# chunk; more than this, or a wait longer than a new connection's handshake (tens of
# ms), and the connection is closed instead.
_DRAIN_BYTES = 16384
_DRAIN_SECONDS = 0.05


class OpenAIChatClient:
    """Streams chat completions from an OpenAI-compatible endpoint.

    Args:
        model: model name (str) sent unless ``AgentRunOptions.model`` overrides it.
        base_url: the API root, e.g. ``http://localhost:11434/v1`` for Ollama; default
            ``$OPENAI_BASE_URL``, else OpenAI's own.
        api_key: sent as a bearer token; default ``$OPENAI_API_KEY``; ``None`` or
            empty sends no ``Authorization`` header (local servers need none).
        connect_timeout: seconds to wait for the TCP connection.
        read_timeout: seconds to wait for the next bytes of the response, i.e. the
            longest silence tolerated mid-stream (not the whole call's duration).
        finish_wait: seconds of silence after the turn's finish reason that end the
            turn (default ``FINISH_WAIT``, 10 s; at most ``read_timeout``). Chunks
            that come sooner continue the turn: some gateways send ``stop`` early,
            then the call (SPEC §6, fourth batch). The turn is complete either way;
            only a connection its server keeps open waits this long.
        headers: extra HTTP headers (dict) sent with every request.
        stream: ``True`` (default) streams with SSE; ``False`` asks for one JSON
            response, for endpoints that cannot stream, and yields the same updates.
        max_retries: how often a call that failed before its first body byte is
            retried (connection failure or reset, timeout, an empty body, HTTP 408,
            409, 429 or 5xx); default 2.
        retry_backoff: seconds before the first retry, doubled for each next one and
            scaled by a random factor in [0.5, 1). A wait the server asks for takes
            precedence: ``retry-after-ms`` (milliseconds), else ``Retry-After``
            (seconds or an HTTP date); one longer than ``MAX_RETRY_WAIT`` seconds is
            not slept but named in the error (SPEC §6).
        profile: the provider profile (``agentflow.profiles``) that builds the
            request's messages from the stored ones and says which streamed fields
            accumulate: a name (``"openai"``, ``"deepseek"``, ``"gemini"``,
            ``"mistral"``, ``"groq"``, ``"openrouter"``) or a ``Profile``;
            default: guessed from the base URL's host, else ``openai`` (SPEC R21).
            ``profile_note`` (str) says which was chosen and how.

    Raises:
        ValueError: ``profile`` names no known profile, or ``finish_wait`` is not
            above 0.
        AuthenticationError: neither a key nor a base URL was given (or set in the
            environment): the default endpoint, OpenAI, needs a key.
    """

    def __init__(self, model: str = "gpt-4o-mini", *, base_url: str | None = None,
                 api_key: str | None = None, connect_timeout: float = 10.0,
                 read_timeout: float = 120.0, finish_wait: float = FINISH_WAIT,
                 headers: dict | None = None,
                 stream: bool = True, max_retries: int = 2, retry_backoff: float = 0.5,
                 profile: "str | Profile | None" = None):
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL")
                         or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not self._api_key and not (base_url or os.environ.get("OPENAI_BASE_URL")):
            # as the openai SDK does: fail when made, not at the first request
            raise AuthenticationError(
                "no API key and no base_url: give api_key=... (or set OPENAI_API_KEY) for "
                f"{DEFAULT_BASE_URL}, or base_url=... (or OPENAI_BASE_URL) for a local "
                "server, e.g. http://localhost:11434/v1")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        if not finish_wait > 0:
            raise ValueError(f"finish_wait is a number of seconds above 0, not {finish_wait!r}")
        self.finish_wait = min(finish_wait, read_timeout)
        self.headers = dict(headers or {})
        # where the key comes from, for the hint of an authentication error
        self.key_source = "api_key=... or the OPENAI_API_KEY environment variable"
        self.stream = stream
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.profile, self.profile_note = resolve_profile(profile, self.base_url)
        import requests
        self._http = requests.Session()
        self._sleep = time.sleep
        self._unfinished: "requests.Response | None" = None  # see _keep_alive

    def __repr__(self) -> str:  # never show the key
        return (f"OpenAIChatClient(model={self.model!r}, "
                f"base_url={mask_url(self.base_url)!r})")

    @property
    def url(self) -> str:
        """The endpoint (str): ``{base_url}/chat/completions``."""
        return f"{self.base_url}/chat/completions"

    @property
    def shown_url(self) -> str:
        """The endpoint as messages show it (str): ``url`` with any credential in it
        masked (``agentflow.redact.mask_url``, SPEC R26)."""
        return mask_url(self.url)

    def build_request(self, messages: Sequence[ChatMessage],
                      options: AgentRunOptions | None = None, tools: Iterable = ()) -> dict:
        """The JSON body of the chat-completions request, without sending it.

        Args:
            messages: the conversation (sequence of ``ChatMessage``); the client's
                ``profile`` builds the request's messages from them and never changes
                them (SPEC R21).
            options: model, ``temperature``, ``max_tokens``, ``tool_choice``,
                ``parallel_tool_calls`` and ``extra`` keys (``AgentRunOptions``);
                ``None`` means the defaults. ``tool_choice`` and
                ``parallel_tool_calls`` are sent only when tools are offered.
            tools: the ``Tool`` objects offered, in OpenAI's function format.

        Returns:
            dict: the body; ``stream_options.include_usage`` is set when streaming.
        """
        options = options or AgentRunOptions()
        body: dict = {
            "model": options.model or self.model,
            "messages": self.profile.messages(messages),
            "stream": self.stream,
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        tools = list(tools)
        if tools:
            body["tools"] = [{"type": "function",
                              "function": {"name": t.name, "description": t.description,
                                           "parameters": t.parameters}} for t in tools]
            if options.tool_choice is not None:
                body["tool_choice"] = options.tool_choice
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.max_tokens is not None:
            body["max_tokens"] = options.max_tokens
        body.update(options.extra)
        return body

    def run(self, messages: Sequence[ChatMessage], options: AgentRunOptions | None = None,
            tools: Iterable = ()) -> Iterator[AgentResponseUpdate]:
        """Call the model once and yield its updates as their bytes arrive (SPEC §6).

        Args:
            messages: the conversation so far (sequence of ``ChatMessage``).
            options: per-call options (``AgentRunOptions``), as in ``build_request``.
            tools: the ``Tool`` objects the model may call.

        Yields:
            AgentResponseUpdate: ``TextDelta``, ``ReasoningDelta``, ``ToolCallStart``,
            ``ToolCallArgs`` as they arrive, then one ``ToolCallEnd`` per call and a
            last ``Finish`` whose ``message`` is the assembled assistant turn and
            whose reason may be ``TOOL_CALLS`` (the decorator removes that one,
            SPEC R9). Retries happen only before the first body byte (SPEC §6).

        Raises:
            ProviderError: HTTP 4xx/5xx (status, provider code and message, also
                from an error body framed as SSE), a redirect other than a 307 or 308
                to the same origin, or more than ``MAX_REDIRECTS`` (3) of those in a
                row (naming where it pointed), connection failure (URL and a
                hint), malformed SSE or chunk JSON (the event, cut to 200 characters),
                a chunk field of the wrong shape (the event and the field), an
                ``error`` object or ``event: error`` in the stream (after the updates
                before it).
            ProviderTimeoutError: connecting took longer than ``connect_timeout`` or
                the stream was silent for longer than ``read_timeout`` (seconds)
                before the turn's finish reason arrived.
            IncompleteStreamError: the stream ended, or the connection broke, with
                neither a finish reason nor ``[DONE]``. After the finish reason the
                turn is complete whatever the connection does (SPEC §6).
        """
        tools = list(tools)
        body = self.build_request(messages, options, tools)
        # SPEC §6: a call id of this turn never repeats one of the conversation; a
        # name sent in pieces is read with the offered tools' names at hand
        assembler = ChunkAssembler(_ids_in(messages), self.profile.accumulates,
                                   self.profile.call_id_limit or ID_LIMIT,
                                   tool_names=[t.name for t in tools])
        response, chunks = self._open(body)
        try:
            try:
                if not self.stream or _is_json(response):
                    # Non-streaming mode, or a server that ignored "stream": true.
                    yield from completion_updates(self._json(chunks), assembler)
                else:
                    yield from stream_updates(
                        _after_finish(chunks, response, assembler, self.finish_wait),
                        assembler)
            except ProviderError as exc:
                message = self._scrub(exc.message)
                kind = response.headers.get("Content-Type", "")
                if (isinstance(exc, IncompleteStreamError) and assembler.chunk_count == 0
                        and "event-stream" not in kind):
                    message = (f"{self.shown_url} did not answer with an event stream "
                               f"(Content-Type: {kind or 'none'}); is it an OpenAI-compatible "
                               "chat-completions endpoint?")
                raise type(exc)(message, status=exc.status,
                                code=scrub_value(exc.code, self._api_key)) from None
        except BaseException:  # a failed or abandoned turn: its connection is closed
            response.close()
            raise
        # After the last yield: this runs when the caller asks past the Finish, which
        # the tool loop does before it hands the caller its own last update.
        self._keep_alive(response)

    # -- HTTP --------------------------------------------------------------------------

    def _open(self, body: dict) -> tuple["requests.Response", Iterator[bytes]]:
        """POST ``body``; return the response and an iterator over its body bytes whose
        first chunk has already arrived. Failures before that first byte (connection,
        HTTP 408, 409, 429 and 5xx, a response broken, silent or empty before its
        first byte) are retried up to ``max_retries`` times with exponential backoff
        and jitter, honouring ``retry-after-ms`` and ``Retry-After`` (SPEC §6); after
        it nothing is retried, because updates may already have reached the caller.

        One loop holds every retry: urllib3's ``Retry`` ends where the response
        headers arrive (three of these failures come later), clamps a long
        ``Retry-After`` and sleeps it where this client must name it, and knows no
        ``retry-after-ms``. Its parser of ``Retry-After`` values is used."""
        attempt = 0
        while True:
            headers: dict = {}
            try:
                response = self._post(body)
                chunks = self._read(response)
                first = next(chunks, b"")
                if first:
                    return response, itertools.chain([first], chunks)
                response.close()
                error = ProviderError(
                    f"{self.shown_url} answered HTTP {response.status_code} with an empty body; "
                    "is it an OpenAI-compatible chat-completions endpoint?")
            except (ProviderTimeoutError, IncompleteStreamError) as exc:
                error = exc
            except ProviderError as exc:
                if exc.status is not None and not exc.retryable:
                    raise
                error, headers = exc, exc.headers or {}  # could not connect, or retryable
            asked = _asked_wait(headers)
            if attempt < self.max_retries and (asked is None or asked[0] <= MAX_RETRY_WAIT):
                attempt += 1
                self._sleep(asked[0] if asked else self._backoff(attempt - 1))
                continue
            parts = list(error.parts or (error.message,))  # its Settings kept
            if asked is not None:
                seconds, header = asked
                longer = (f", longer than this client waits (MAX_RETRY_WAIT = "
                          f"{MAX_RETRY_WAIT:g} s)" if seconds > MAX_RETRY_WAIT else "")
                parts = _appended(parts, f"; the server asked to wait {seconds:g} s before "
                                         f"a retry ({header}){longer}")
            if attempt:
                parts = _appended(parts, f" (tried {attempt + 1} times)")
            raise type(error).naming(*parts, status=error.status, code=error.code,
                                     headers=error.headers,
                                     retry_after=asked[0] if asked else error.retry_after,
                                     attempts=attempt + 1)

    def _backoff(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt + 1`` when the server named no wait."""
        import random
        return self.retry_backoff * (2 ** attempt) * random.uniform(0.5, 1.0)

    def _keep_alive(self, response: "requests.Response") -> None:
        """Keep a complete turn's ``response``, whose body may go on after ``[DONE]``,
        for ``_reuse_connection``; it returns at once, so the caller's last update is
        not delayed."""
        connection = response.raw.connection
        if response.raw.closed or connection is None or connection.sock is None:
            # read to its end (the connection is back in the pool), or a connection
            # the server closes after this response (Connection: close, no length)
            response.close()
            return
        earlier, self._unfinished = self._unfinished, response
        if earlier is not None:  # two turns interleaved; the earlier one is let go
            earlier.close()

    def _reuse_connection(self) -> bool:
        """Read the rest of the last complete turn's body, so that its connection goes
        back to the pool and the next request reuses it; when more than
        ``_DRAIN_BYTES`` bytes remain, or they take longer than ``_DRAIN_SECONDS``
        seconds, the connection is closed instead (the next request opens one).
        Returns whether a connection went back to the pool."""
        response, self._unfinished = self._unfinished, None
        return response is not None and _drain(response, _DRAIN_BYTES, _DRAIN_SECONDS)

    def _post(self, body: dict) -> "requests.Response":
        import requests
        reused = self._reuse_connection()
        headers = {"Content-Type": "application/json",
                   "Accept": "text/event-stream" if self.stream else "application/json",
                   # a compressed stream is decoded in blocks, which delays tokens
                   "Accept-Encoding": "identity", **self.headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = json.dumps(body)

        def post(url: str) -> "requests.Response":
            # redirects are this client's to judge (_redirected), never requests'
            return self._http.post(url, data=data, headers=headers, stream=True,
                                   allow_redirects=False,
                                   timeout=(self.connect_timeout, self.read_timeout))
        try:
            try:
                response = post(self.url)
            except requests.exceptions.ConnectionError:
                if not reused:
                    raise
                # The kept connection was closed by the server before this request
                # reached it (an idle timeout racing the request, RFC 9112 §9.3.1): one
                # new connection at once, outside max_retries, as nothing was answered.
                response = post(self.url)
            for _ in range(MAX_REDIRECTS):
                target = self._redirected(response)
                if target is None:
                    break
                response = post(target)
            if self._redirected(response) is not None:
                raise self._redirect_error(response, f"more than {MAX_REDIRECTS} redirects "
                                                     "in a row")
        except requests.exceptions.ConnectTimeout:
            raise ProviderTimeoutError.naming(
                f"could not connect to {self.shown_url} within ",
                Setting("connect_timeout", self.connect_timeout),
                "; is the host right and reachable?") from None
        except requests.exceptions.ReadTimeout:
            raise ProviderTimeoutError.naming(
                f"{self.shown_url} sent no response within ",
                Setting("read_timeout", self.read_timeout), "; raise ",
                Setting("read_timeout"), " for slow models") from None
        except requests.exceptions.RequestException as exc:
            raise ProviderError.naming(
                f"could not connect to {self.shown_url}: {_reason(exc)}. Is the server running, "
                "and is ", Setting("base_url"), " (or OPENAI_BASE_URL) right?") from None
        if response.status_code >= 400:
            try:
                error = self._http_error(response)
            finally:
                response.close()
            raise error
        return response

    def _redirected(self, response: "requests.Response") -> str | None:
        """Where a redirect ``response`` sends the request again (str), or ``None`` when
        it is no redirect. Only 307 and 308 to the same origin (scheme, host, port)
        are followed: they keep the method and the body, and the body is the whole
        conversation, which no other origin gets (issue 41). Any other redirect raises
        ``ProviderError`` naming where it pointed."""
        status = response.status_code
        if status not in (301, 302, 303, 307, 308):
            return None
        from urllib.parse import urljoin
        target = urljoin(response.url or self.url, response.headers.get("Location") or "")
        response.close()
        if status not in (307, 308):
            raise self._redirect_error(response, "a redirect that would send the request "
                                                 "again without its body", target)
        if _origin(target) != _origin(self.url):
            raise self._redirect_error(response, "a redirect to another origin, which is "
                                                 "not sent the conversation", target)
        return target

    def _redirect_error(self, response: "requests.Response", what: str,
                        target: str | None = None) -> ProviderError:
        if target is None:
            from urllib.parse import urljoin
            target = urljoin(response.url or self.url, response.headers.get("Location") or "")
            response.close()
        return ProviderError.naming(
            f"{self.shown_url} answered HTTP {response.status_code}, {what}: it pointed to "
            f"{self._scrub(mask_url(target))}. If that is the endpoint, set ",
            Setting("base_url"), " to it", status=response.status_code)

    def _http_error(self, response: "requests.Response") -> ProviderError:
        import requests
        status = response.status_code
        try:
            content = response.content
        except requests.RequestException:
            content = b""
        parsed = _error_body(content)
        if parsed is not None:
            error = error_from_body(parsed, response.reason or "error", status)
        else:
            # scrubbed before it is cut: a cut can leave most of an echoed key
            text = self._scrub(content.decode("utf-8", "replace"))
            error = ProviderError(text[:200] or response.reason or "error", status=status)
        message = self._scrub(error.message)
        stop = "" if message.endswith(".") else "."
        parts: tuple = (message,)
        if status in (401, 403):
            parts = (f"authentication failed at {self.shown_url}: {message}{stop} Check the "
                     f"API key ({self.key_source})",)
        elif status == 404:
            parts = (f"{message}{stop} URL: {self.shown_url}. Check the model name, and that ",
                     Setting("base_url"), " ends where the API starts (most servers want a "
                     "/v1 suffix)")
        asked = _asked_wait(response.headers)
        return provider_error(*parts, status=status,
                              code=scrub_value(error.code, self._api_key),
                              headers=response.headers,
                              retry_after=asked[0] if asked else None)

    def _json(self, chunks: Iterator[bytes]) -> dict:
        text = b"".join(chunks).decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            raise ProviderError(f"the response from {self.shown_url} is not JSON: "
                                f"{self._scrub(text)[:200]!r}") from None

    def _read(self, response: "requests.Response") -> Iterator[bytes]:
        # read1 returns whatever bytes have arrived (up to _READ_SIZE) instead of
        # waiting to fill a buffer, so no token waits for the next one (SPEC §6).
        import urllib3.exceptions
        raw = response.raw
        try:
            while True:
                data = raw.read1(_READ_SIZE)
                if not data:
                    return
                yield data
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            raise ProviderTimeoutError.naming(
                f"the stream from {self.shown_url} was silent for more than ",
                Setting("read_timeout", self.read_timeout),
                "; nothing of this turn was kept") from None
        except (urllib3.exceptions.ProtocolError, OSError) as exc:
            raise IncompleteStreamError(
                f"the connection to {self.shown_url} broke mid-stream ({_reason(exc)}); "
                "nothing of this turn was kept: retry the run") from None

    def _scrub(self, text: str) -> str:
        # every run of the key's characters, whole or cut short (agentflow.redact)
        return scrub(text, self._api_key)


def _appended(parts: list, text: str) -> list:
    """A message's pieces with ``text`` added after it, its final full stop dropped."""
    if parts and isinstance(parts[-1], str):
        return parts[:-1] + [parts[-1].rstrip(".") + text]
    return parts + [text]


def _after_finish(chunks: Iterator[bytes], response: "requests.Response", assembler,
                  finish_wait: float) -> Iterator[bytes]:
    """``chunks``, but once the turn's finish reason is in, a silence longer than
    ``finish_wait`` seconds (not ``read_timeout``) ends the stream: the turn is
    complete (SPEC §6), so a stalled connection must not hold back the caller's last
    update for minutes. Chunks that come within it are read: gateways that send
    ``stop`` early send the call after it, within seconds."""
    shortened = False
    for chunk in chunks:
        yield chunk
        if not shortened and assembler.finish_reason_seen:
            shortened = True
            connection = getattr(response.raw, "connection", None)
            if connection is not None and connection.sock is not None:
                connection.sock.settimeout(finish_wait)


def _drain(response: "requests.Response", limit: int, seconds: float) -> bool:
    """Read the rest of ``response``'s body: at most ``limit`` bytes, for at most
    ``seconds``. When the body ends within both, urllib3 puts the connection back in
    the pool (HTTPResponse.release_conn) and this returns ``True``; else the connection
    is closed and this returns ``False``."""
    import urllib3.exceptions
    raw = response.raw
    deadline = time.monotonic() + seconds
    released = False
    try:
        while not raw.closed and limit >= 0:
            left = deadline - time.monotonic()
            connection = raw.connection
            if left <= 0 or connection is None or connection.sock is None:
                break
            # the pool sets the socket's timeout again when the connection is reused
            connection.sock.settimeout(left)
            data = raw.read1(limit + 1)
            if not data:
                break
            limit -= len(data)
        released = raw.connection is None and limit >= 0  # urllib3 let go of it
    except (urllib3.exceptions.HTTPError, OSError):
        pass  # broken or too slow: closed below, as any unfinished body is
    response.close()  # closes the connection unless urllib3 released it
    return released


def _origin(url: str) -> tuple:
    """A URL's origin (RFC 6454): scheme, host and port, the default port filled in."""
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1  # not a port: an origin of its own, equal to no other
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _is_json(response: "requests.Response") -> bool:
    return response.headers.get("Content-Type", "").split(";")[0].strip() == "application/json"


def _ids_in(messages: Sequence[ChatMessage]) -> set[str]:
    """Every tool call id (str) the conversation already uses."""
    ids = {m.tool_call_id for m in messages if isinstance(m.tool_call_id, str)}
    ids.update(c.id for m in messages for c in m.tool_calls if isinstance(c.id, str))
    return ids


def _asked_wait(headers) -> tuple[float, str] | None:
    """The wait (seconds) a response asked for before a retry, and the header that
    asked: ``retry-after-ms`` (milliseconds, as OpenAI sends) before ``Retry-After``
    (delta-seconds or an HTTP date, RFC 9110 §10.2.3); ``None`` when neither is valid."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            seconds = float(millis) / 1000
        except ValueError:
            seconds = -1.0
        if 0 <= seconds < float("inf"):
            return seconds, f"retry-after-ms: {millis.strip()}"
    value = headers.get("Retry-After")
    if value:
        from urllib3.exceptions import InvalidHeader
        from urllib3.util import Retry
        try:
            return float(Retry().parse_retry_after(value)), f"Retry-After: {value.strip()}"
        except InvalidHeader:
            pass
    return None


def _error_body(content: bytes):
    """The JSON value of an HTTP error body, also when it is framed as SSE
    (``data: {"error": …}``, as LiteLLM's proxy sends); ``None`` when it is neither."""
    try:
        return json.loads(content)
    except (ValueError, RecursionError):
        pass
    from .sse import SSEParser
    parser = SSEParser()
    for event in parser.feed(content + b"\n\n"):
        try:
            return json.loads(event.data)
        except (ValueError, RecursionError):
            return None
    return None


def _reason(exc: BaseException) -> str:
    """The innermost cause of a requests/urllib3 exception, in a few words."""
    import http.client
    import urllib3.exceptions
    causes, stack = [], [exc]
    while stack:  # the chain through .reason, .args, __cause__ and __context__
        seen = stack.pop()
        if any(seen is known for known in causes):
            continue
        causes.append(seen)
        stack.extend(inner for inner in (getattr(seen, "reason", None), seen.__cause__,
                                         seen.__context__, *seen.args)
                     if isinstance(inner, BaseException))
    for cause in causes:
        if isinstance(cause, ConnectionRefusedError) or "Connection refused" in str(cause):
            return "connection refused"
        if isinstance(cause, ConnectionResetError):
            return "the server reset the connection"
        if isinstance(cause, (http.client.IncompleteRead, urllib3.exceptions.IncompleteRead,
                              urllib3.exceptions.InvalidChunkLength)):
            return "the server closed the connection before the end of the body"
        if isinstance(cause, http.client.RemoteDisconnected):
            return "the server closed the connection without a response"
    return str(causes[-1]).split(": ", 1)[-1][:200]
