"""``OpenAIChatClient`` over real HTTP on 127.0.0.1 (``agentflow.testing.replay.ReplayServer``,
or a tiny ``http.server`` where a test needs to hold the response open).

Covers what the client sends (SPEC §2/§3: POST {base_url}/chat/completions, stream=true,
messages and tools in OpenAI form, options passed through) and how it treats what comes
back (SPEC §6): provider quirks, errors in the stream, HTTP errors, timeouts, streams
that end early, and yielding each update as soon as its bytes arrive.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentflow.errors import (AuthenticationError, IncompleteStreamError, InternalServerError,
                              NotFoundError, PermissionDeniedError, ProviderError,
                              ProviderTimeoutError, RateLimitError)
from agentflow.openai_client import OpenAIChatClient
from agentflow.testing.replay import Reply, ReplayServer, chat_stream
from agentflow.tools import Tool
from agentflow.types import (AgentRunOptions, ChatMessage, Finish, FinishReason,
                             ReasoningDelta, TextDelta, ToolCall, ToolCallArgs,
                             ToolCallEnd, ToolCallStart, Usage)
from helpers_streams import summarize

KEY = "sk-test-0123456789abcdefSECRET"


# -- helpers ---------------------------------------------------------------------------

def sse(*chunks) -> bytes:
    """An SSE body: one ``data:`` event per chunk (dict → JSON, str as is)."""
    out = []
    for chunk in chunks:
        data = chunk if isinstance(chunk, str) else json.dumps(chunk)
        out.append(f"data: {data}\n\n")
    return "".join(out).encode("utf-8")


def delta(d: dict | None = None, finish=None, index: int = 0, **extra) -> dict:
    """A chat.completion.chunk with one choice."""
    return {"object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": index, "delta": d or {}, "finish_reason": finish}],
            **extra}


def collect(client, messages=None, options=None, tools=()):
    """Run the client; return (updates, exception or None)."""
    updates = []
    try:
        for update in client.run(messages or [ChatMessage.user("hi")], options, tools):
            updates.append(update)
    except ProviderError as exc:
        return updates, exc
    return updates, None


def run_body(body, **client_args):
    """Serve one body (bytes or Reply) and run a client with api_key KEY on it.
    Retries are off unless asked for: they have tests of their own (test_retries.py)."""
    with ReplayServer([body]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url,
                                  **{"api_key": KEY, "max_retries": 0, **client_args})
        updates, error = collect(client)
    return updates, error, server


class WeatherTool(Tool):
    name = "get_weather"
    description = "Current weather for a city."
    parameters = {"type": "object", "properties": {"city": {"type": "string"}},
                  "required": ["city"]}

    def invoke(self, arguments):
        return "sunny"


class HoldingServer:
    """A loopback HTTP server whose handler writes ``parts[0]``, then waits (at most
    ``wait`` seconds) on ``gates[0]`` before writing ``parts[1]``, and so on; after the
    last part it waits on the remaining gate, if any, before closing the connection.
    ``gate_results`` records, per gate, whether it was set (True) or timed out (False).
    """

    def __init__(self, parts: list[bytes], gates: list[threading.Event], wait: float = 5.0):
        self.parts, self.gates, self.wait = parts, gates, wait
        self.gate_results: list[bool] = []
        self.done = threading.Event()
        holder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for number, part in enumerate(holder.parts):
                        self.wfile.write(part)
                        self.wfile.flush()
                        if number < len(holder.gates):
                            holder.gate_results.append(holder.gates[number].wait(holder.wait))
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    self.close_connection = True
                    holder.done.set()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # serve_forever notices shutdown() only at its next poll: poll often (the
        # default, 0.5 s, would be most of each test's time)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,),
                                        daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        for gate in self.gates:
            gate.set()  # never leave the handler waiting
        self._server.shutdown()
        self._server.server_close()


# -- the request -----------------------------------------------------------------------

def test_request_body_and_headers():
    """SPEC §2: one POST {base_url}/chat/completions with stream=true; messages in
    OpenAI form (SPEC §3 ChatMessage "converts to and from the OpenAI dict form"),
    including an assistant message with tool_calls and a tool message; tools in
    OpenAI's function format; usage requested; bearer token sent."""
    messages = [
        ChatMessage.system("Be brief."),
        ChatMessage.user("Weather in Paris?"),
        ChatMessage.assistant(None, [ToolCall("call_1", "get_weather", '{"city":"Paris"}')]),
        ChatMessage.tool("sunny", "call_1"),
    ]
    with ReplayServer([chat_stream("It is sunny.")]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key=KEY)
        updates = list(client.run(messages, None, [WeatherTool()]))
    assert summarize(updates).text == "It is sunny."

    [request] = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"].startswith("application/json")
    body = request.json
    assert body["model"] == "m"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather",
                                      "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]


def test_no_authorization_header_when_api_key_is_empty(monkeypatch):
    """api_key="" sends no Authorization header (local servers need none), even when
    OPENAI_API_KEY is set: an explicit empty key is not "no argument"."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with ReplayServer([chat_stream("ok")]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key="")
        list(client.run([ChatMessage.user("hi")]))
    assert "authorization" not in server.requests[0].headers


def test_no_authorization_header_without_any_key(monkeypatch):
    """No api_key argument and no OPENAI_API_KEY: no Authorization header."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ReplayServer([chat_stream("ok")]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url)
        list(client.run([ChatMessage.user("hi")]))
    assert "authorization" not in server.requests[0].headers


def test_base_url_and_api_key_default_to_environment(monkeypatch):
    """base_url defaults to $OPENAI_BASE_URL and api_key to $OPENAI_API_KEY."""
    with ReplayServer([chat_stream("from env")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key")
        client = OpenAIChatClient(model="m")
        updates = list(client.run([ChatMessage.user("hi")]))
    assert summarize(updates).text == "from env"
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-env-key"


def test_base_url_with_trailing_slash():
    """``{base_url}/chat/completions`` with no doubled slash when base_url ends in /."""
    with ReplayServer([chat_stream("ok")]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url + "/", api_key=KEY)
        list(client.run([ChatMessage.user("hi")]))
    assert server.requests[0].path == "/v1/chat/completions"


def test_options_are_passed_through():
    """SPEC §3 AgentRunOptions: chat options (model, temperature, tool_choice,
    parallel_tool_calls, max_tokens) reach the provider; the options' model overrides
    the client's."""
    options = AgentRunOptions(model="override-model", temperature=0.25, max_tokens=64,
                              tool_choice="required", parallel_tool_calls=False)
    with ReplayServer([chat_stream("ok")]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key=KEY)
        list(client.run([ChatMessage.user("hi")], options, [WeatherTool()]))
    body = server.requests[0].json
    assert body["model"] == "override-model"
    assert body["temperature"] == 0.25
    assert body["max_tokens"] == 64
    assert body["tool_choice"] == "required"
    assert body["parallel_tool_calls"] is False


def test_tool_choice_object_is_passed_through():
    """tool_choice may be OpenAI's object form; it is sent as given."""
    choice = {"type": "function", "function": {"name": "get_weather"}}
    with ReplayServer([chat_stream("ok")]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key=KEY)
        list(client.run([ChatMessage.user("hi")], AgentRunOptions(tool_choice=choice),
                        [WeatherTool()]))
    assert server.requests[0].json["tool_choice"] == choice


def test_unset_options_are_not_sent():
    """Chat options are passed "when not None": a plain run sends none of them."""
    with ReplayServer([chat_stream("ok")]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key=KEY)
        list(client.run([ChatMessage.user("hi")]))
    body = server.requests[0].json
    for name in ("temperature", "max_tokens", "tool_choice", "parallel_tool_calls", "tools"):
        assert name not in body


# -- a normal stream -------------------------------------------------------------------

def test_openai_shaped_stream_updates_in_order():
    """SPEC §3 updates: text deltas, a tool call's start and argument fragments, then at
    the turn's end ToolCallEnd per call and Finish (last) with the usage."""
    body = chat_stream("Let me check.", [("call_9", "get_weather", '{"city":"Oslo"}')],
                       usage=(12, 7))
    updates, error, _ = run_body(body)
    assert error is None
    assert updates == [
        TextDelta("Let"), TextDelta(" me"), TextDelta(" check."),
        ToolCallStart("call_9", "get_weather", 0),
        ToolCallArgs("call_9", '{"city"'), ToolCallArgs("call_9", ':"Oslo"}'),
        ToolCallEnd("call_9"),
        Finish(FinishReason.TOOL_CALLS, Usage(12, 7, 19)),
    ]


# -- malformed input -------------------------------------------------------------------

def test_malformed_chunk_json_names_event_and_cuts_data():
    """docstring of run(): malformed chunk JSON → ProviderError naming the event, its
    data cut to 200 characters (a >300-character bad event is not quoted whole). The
    update before it was already yielded (SPEC §6: updates yielded as bytes arrive)."""
    bad = '{"choices": [{"index": 0, "delta": {"content": "' + "x" * 400
    assert len(bad) > 300
    body = sse(delta({"content": "Hi"})) + f"data: {bad}\n\n".encode()
    updates, error, _ = run_body(body)
    assert updates == [TextDelta("Hi")]
    assert type(error) is ProviderError
    message = str(error)
    assert "event 2" in message
    assert bad[:200] in message
    assert bad[:201] not in message
    assert bad not in message


def test_chunk_that_is_not_a_json_object_is_cut_to_200():
    """Valid JSON that is not an object (here a >300-character list) is also malformed:
    ProviderError quoting at most 200 characters of it."""
    bad = json.dumps(list(range(200)))
    assert len(bad) > 300
    body = sse(delta({"content": "Hi"}), bad)
    updates, error, _ = run_body(body)
    assert updates == [TextDelta("Hi")]
    assert type(error) is ProviderError
    assert bad[:200] in str(error)
    assert bad[:201] not in str(error)


def test_connection_refused_names_url_and_hint():
    """docstring of run(): a connection failure → ProviderError with the URL and a hint
    (check the server / base_url)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    client = OpenAIChatClient(model="m", base_url=base_url, api_key=KEY,
                              connect_timeout=5, retry_backoff=0)  # retried, without waits
    updates, error = collect(client)
    assert updates == []
    assert type(error) is ProviderError
    message = str(error)
    assert f"{base_url}/chat/completions" in message
    assert "base_url" in message or "OPENAI_BASE_URL" in message
    assert error.status is None


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def log_records():
    """Every log record of the test, at every level (make test runs without pytest's
    logging plugin, whose per-test set-up cost more than this one test needs)."""
    root, handler = logging.getLogger(), _Records()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler.records
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_says_so_and_never_shows_key(status, log_records):
    """SPEC §6: HTTP errors raise ProviderError with the status and the provider's
    message; "the API key never appears in any message, log or recording". OpenAI's
    401 body quotes the key it got; the error must say authentication failed."""
    error_body = {"error": {
        "message": f"Incorrect API key provided: {KEY}. You can find your API key at "
                   "https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}
    reply = Reply(json.dumps(error_body), status=status, content_type="application/json")
    updates, error, _ = run_body(reply)
    assert updates == []
    # issue 24: typed by status, as the openai SDK's errors are
    assert type(error) is {401: AuthenticationError, 403: PermissionDeniedError}[status]
    assert error.status == error.status_code == status and error.attempts == 1
    assert error.code == "invalid_api_key"
    assert "authentication failed" in str(error).lower()
    assert "Incorrect API key provided" in str(error)
    for text in (str(error), repr(error), error.message, *map(str, error.args)):
        assert KEY not in text
    assert log_records  # urllib3 logged the request: the check below saw real records
    assert all(KEY not in record.getMessage() for record in log_records)


def test_client_repr_hides_key():
    """SPEC §6: the key never appears in any message."""
    client = OpenAIChatClient(model="m", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    assert KEY not in repr(client) and KEY not in str(client)


@pytest.mark.parametrize("status, code, message", [
    (404, "model_not_found",
     "The model `m` does not exist or you do not have access to it."),
    (429, "rate_limit_exceeded",
     "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM)."),
    (500, "internal_error",
     "The server had an error while processing your request. Sorry about that!"),
])
def test_http_errors_carry_status_code_and_message(status, code, message):
    """SPEC §6: HTTP 4xx/5xx raise ProviderError with the status and the provider's
    error message (and its code, run()'s docstring)."""
    body = {"error": {"message": message, "type": "some_type", "param": None, "code": code}}
    reply = Reply(json.dumps(body), status=status, content_type="application/json")
    updates, error, _ = run_body(reply)
    assert updates == []
    assert type(error) is {404: NotFoundError, 429: RateLimitError,
                           500: InternalServerError}[status]  # issue 24
    assert error.status == error.status_code == status
    assert error.code == code
    assert message in error.message
    assert f"HTTP {status}" in str(error) and message in str(error)


def test_http_error_with_non_json_body():
    """An HTTP error whose body is not JSON (a proxy's HTML page) is still a
    ProviderError with the status."""
    reply = Reply("<html><body>502 Bad Gateway</body></html>", status=502,
                  content_type="text/html")
    updates, error, _ = run_body(reply)
    assert type(error) is InternalServerError
    assert error.status == 502
    assert "502 Bad Gateway" in str(error)


# -- how a stream ends -----------------------------------------------------------------

def test_no_finish_reason_and_no_done_is_incomplete():
    """SPEC §6: the stream ends without [DONE] and no finish reason arrived →
    IncompleteStreamError, after the updates that did arrive."""
    body = sse(delta({"role": "assistant", "content": "Hel"}), delta({"content": "lo"}))
    updates, error, _ = run_body(body)
    assert updates == [TextDelta("Hel"), TextDelta("lo")]
    assert isinstance(error, IncompleteStreamError)


def test_finish_reason_without_done_is_fine():
    """SPEC §6: no [DONE] is fine when a finish reason arrived."""
    body = sse(delta({"content": "Hi"}), delta({}, "stop"))
    updates, error, _ = run_body(body)
    assert error is None
    assert updates == [TextDelta("Hi"), Finish(FinishReason.STOP, None)]


def test_length_finish_reason():
    """finish_reason "length" → Finish(LENGTH)."""
    body = sse(delta({"content": "Hi"}), delta({}, "length"), "[DONE]")
    updates, error, _ = run_body(body)
    assert error is None
    assert updates[-1] == Finish(FinishReason.LENGTH, None)


def test_done_ends_the_turn_before_later_events():
    """SPEC §6: `data: [DONE]` ends the turn; events after it are not read."""
    body = sse(delta({"content": "A"}), delta({}, "stop"), "[DONE]",
               delta({"content": "B"}), {"error": {"message": "after done", "code": "x"}})
    updates, error, _ = run_body(body)
    assert error is None
    assert updates == [TextDelta("A"), Finish(FinishReason.STOP, None)]


def test_done_ends_the_turn_while_connection_stays_open():
    """SPEC §6: "`data: [DONE]` ends the turn even if the connection stays open". The
    server keeps the connection open after [DONE] until the test, having seen the run
    end, sets a gate. Had the client waited for the connection to close, the gate
    would time out (5 s) first."""
    body = sse(delta({"content": "A"}), delta({}, "stop"), "[DONE]")
    run_ended = threading.Event()
    with HoldingServer([body], [run_ended]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key=KEY)
        updates = list(client.run([ChatMessage.user("hi")]))
        run_ended.set()
        assert server.done.wait(10)
    assert updates == [TextDelta("A"), Finish(FinishReason.STOP, None)]
    assert server.gate_results == [True]


# -- errors inside the stream ----------------------------------------------------------

def test_error_object_in_chunk_after_updates():
    """SPEC §6: a chunk with an `error` object raises ProviderError carrying the
    provider's message and code, after the updates before it."""
    body = sse(delta({"content": "Hel"}), delta({"content": "lo"}),
               {"error": {"message": "The server is overloaded", "code": "overloaded"}},
               delta({}, "stop"), "[DONE]")
    updates, error, _ = run_body(body)
    assert updates == [TextDelta("Hel"), TextDelta("lo")]
    assert type(error) is ProviderError
    assert "The server is overloaded" in str(error)
    assert error.code == "overloaded"


def test_error_event_after_updates():
    """SPEC §6: an SSE event of type `error` raises ProviderError with the provider's
    message and code, after the updates before it."""
    body = (sse(delta({"reasoning": "thinking"}), delta({"content": "Hi"}))
            + b'event: error\ndata: {"error": {"message": "Tool call validation failed",'
              b' "type": "invalid_request_error", "code": "tool_use_failed"}}\n\n'
            + sse(delta({}, "stop"), "[DONE]"))
    updates, error, _ = run_body(body)
    assert updates == [ReasoningDelta("thinking"), TextDelta("Hi")]
    assert type(error) is ProviderError
    assert "Tool call validation failed" in str(error)
    assert error.code == "tool_use_failed"


def test_error_in_stream_is_scrubbed_of_key():
    """SPEC §6: the key never appears in any message, including a mid-stream error."""
    body = sse(delta({"content": "Hi"}),
               {"error": {"message": f"key {KEY} was revoked", "code": "revoked"}})
    updates, error, _ = run_body(body)
    assert updates == [TextDelta("Hi")]
    assert isinstance(error, ProviderError)
    assert "was revoked" in str(error)
    assert KEY not in str(error) and KEY not in error.message


# -- timeouts --------------------------------------------------------------------------

def test_read_timeout_names_the_limit():
    """run()'s docstring: the stream silent for longer than read_timeout →
    ProviderTimeoutError naming the limit. The server waits 1.0 s before each chunk;
    the client tolerates 0.1 s of silence."""
    first = sse(delta({"content": "Hi"}))
    second = sse(delta({}, "stop"), "[DONE]")
    reply = Reply(chunks=[first, second], delay=1.0)
    updates, error, _ = run_body(reply, read_timeout=0.1)
    assert isinstance(error, ProviderTimeoutError)
    assert "read_timeout" in str(error)
    assert "0.1" in str(error)
    assert not any(isinstance(u, Finish) for u in updates)


# -- provider quirks (SPEC §6), small hand-written bodies -------------------------------

def test_empty_choices_first_middle_and_last():
    """SPEC §6: `choices` may be empty (first, middle or last chunk): read usage from
    it, skip the rest; the last usage seen is kept."""
    body = sse({"choices": [], "prompt_filter_results": [{"prompt_index": 0}]},
               delta({"content": "Hel"}),
               {"choices": [], "usage": None},
               delta({"content": "lo"}),
               delta({}, "stop"),
               {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3,
                                         "total_tokens": 8}},
               "[DONE]")
    updates, error, _ = run_body(body)
    assert error is None
    assert updates == [TextDelta("Hel"), TextDelta("lo"),
                       Finish(FinishReason.STOP, Usage(5, 3, 8))]


def test_usage_twice_and_under_x_groq_keeps_last():
    """SPEC §6: usage may arrive twice or under `x_groq.usage`: keep the last one."""
    body = sse(delta({"content": "Hi"}, usage={"prompt_tokens": 1, "completion_tokens": 1,
                                               "total_tokens": 2}),
               delta({}, "stop", x_groq={"usage": {"prompt_tokens": 9, "completion_tokens": 4,
                                                   "total_tokens": 13}}),
               "[DONE]")
    updates, error, _ = run_body(body)
    assert error is None
    assert updates[-1] == Finish(FinishReason.STOP, Usage(9, 4, 13))


def test_content_as_list_of_parts():
    """SPEC §6: content may be a list of typed parts: text parts are text, thinking
    parts are reasoning; content null is skipped."""
    body = sse(delta({"content": None}),
               delta({"content": [{"type": "thinking",
                                   "thinking": [{"type": "text", "text": "Let me add."}]}]}),
               delta({"content": [{"type": "text", "text": "2+2"}]}),
               delta({"content": "=4"}, "stop"))
    updates, error, _ = run_body(body)
    assert error is None
    assert updates == [ReasoningDelta("Let me add."), TextDelta("2+2"), TextDelta("=4"),
                       Finish(FinishReason.STOP, None)]


def test_refusal_is_shown_as_text():
    """SPEC §6: `refusal` text is shown as text."""
    body = sse(delta({"role": "assistant", "content": None, "refusal": ""}),
               delta({"refusal": "I'm sorry, "}), delta({"refusal": "I can't."}),
               delta({}, "stop"), "[DONE]")
    updates, error, _ = run_body(body)
    assert error is None
    assert updates == [TextDelta("I'm sorry, "), TextDelta("I can't."),
                       Finish(FinishReason.STOP, None)]


def test_reasoning_content_and_reasoning_fields():
    """SPEC §3: ReasoningDelta from `reasoning_content` / `reasoning`."""
    body = sse(delta({"reasoning_content": "a"}), delta({"reasoning": "b"}),
               delta({"content": "c"}, "stop"))
    updates, error, _ = run_body(body)
    assert error is None
    assert updates == [ReasoningDelta("a"), ReasoningDelta("b"), TextDelta("c"),
                       Finish(FinishReason.STOP, None)]


def test_only_choice_index_zero_is_used():
    """SPEC §6: only choice index 0 is used."""
    body = sse(delta({"content": "zero"}), delta({"content": "one"}, index=1),
               delta({}, "stop"), delta({}, "stop", index=1), "[DONE]")
    updates, error, _ = run_body(body)
    assert error is None
    assert updates == [TextDelta("zero"), Finish(FinishReason.STOP, None)]


def test_tool_calls_without_index():
    """SPEC §6: when `index` is missing, a new non-empty id opens a new slot and
    anything else continues the last slot."""
    body = sse(
        delta({"tool_calls": [{"id": "call_a", "function": {"name": "f", "arguments": ""}}]}),
        delta({"tool_calls": [{"function": {"arguments": '{"x":'}}]}),
        delta({"tool_calls": [{"function": {"arguments": "1}"}}]}),
        delta({"tool_calls": [{"id": "call_b", "function": {"name": "g",
                                                             "arguments": "{}"}}]}),
        delta({}, "tool_calls"), "[DONE]")
    updates, error, _ = run_body(body)
    assert error is None
    got = summarize(updates)
    assert got.tool_calls == [["call_a", "f", '{"x":1}'], ["call_b", "g", "{}"]]
    assert got.ends == {"call_a": 1, "call_b": 1}
    assert updates[-1] == Finish(FinishReason.TOOL_CALLS, None)


def test_resent_headers_are_never_concatenated():
    """SPEC §6: id, name and type may be re-sent on later deltas, empty or in full: the
    first non-empty value wins, never concatenated; one ToolCallStart per call."""
    body = sse(
        delta({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]}),
        delta({"tool_calls": [{"index": 0, "id": "", "type": "function",
                               "function": {"name": "", "arguments": '{"city":'}}]}),
        delta({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "get_weather",
                                            "arguments": '"Paris"}'}}]}),
        delta({}, "tool_calls"), "[DONE]")
    updates, error, _ = run_body(body)
    assert error is None
    assert [u for u in updates if isinstance(u, ToolCallStart)] == [
        ToolCallStart("call_1", "get_weather", 0)]
    got = summarize(updates)
    assert got.tool_calls == [["call_1", "get_weather", '{"city":"Paris"}']]
    assert got.ends == {"call_1": 1}


def test_arguments_null_object_and_empty():
    """SPEC §6: argument fragments are concatenated; null is skipped; an argument
    object is taken as the whole arguments, serialised; empty at the end means {}."""
    body = sse(
        delta({"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "a",
                                                                    "arguments": None}}]}),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": '{"k":'}}]}),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": None}}]}),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": "2}"}}]}),
        delta({"tool_calls": [{"index": 1, "id": "c1",
                               "function": {"name": "b", "arguments": {"city": "Rome"}}}]}),
        delta({"tool_calls": [{"index": 2, "id": "c2", "function": {"name": "c"}}]}),
        delta({}, "tool_calls"), "[DONE]")
    updates, error, _ = run_body(body)
    assert error is None
    calls = summarize(updates).tool_calls
    assert [c[:2] for c in calls] == [["c0", "a"], ["c1", "b"], ["c2", "c"]]
    assert calls[0][2] == '{"k":2}'
    assert json.loads(calls[1][2]) == {"city": "Rome"}
    assert calls[2][2] == "{}"


def test_stop_with_tool_calls_means_tool_calls_but_length_stays():
    """SPEC §6: finish_reason `stop` although tools were called → the turn ended with
    tool calls, unless it was `length`."""
    call = delta({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f",
                                                                      "arguments": "{}"}}]})
    updates, _, _ = run_body(sse(call, delta({}, "stop"), "[DONE]"))
    assert updates[-1] == Finish(FinishReason.TOOL_CALLS, None)
    updates, _, _ = run_body(sse(call, delta({}, "length"), "[DONE]"))
    assert updates[-1].finish_reason == FinishReason.LENGTH


def test_missing_finish_reason_with_done_and_tool_calls():
    """SPEC §6: finish_reason may be missing; [DONE] ends the turn; tool calls present →
    the turn ended with tool calls."""
    call = delta({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f",
                                                                      "arguments": "{}"}}]})
    updates, error, _ = run_body(sse(call, "[DONE]"))
    assert error is None
    assert updates[-1] == Finish(FinishReason.TOOL_CALLS, None)


def test_crlf_and_comments_in_stream():
    """SPEC §7 applied to a real response: CRLF line endings and `:` keep-alive
    comments do not disturb the stream."""
    body = (b": OPENROUTER PROCESSING\r\n\r\n"
            + sse(delta({"content": "Hi"})).replace(b"\n", b"\r\n")
            + b": keepalive\n\n" + sse(delta({}, "stop"), "[DONE]"))
    updates, error, _ = run_body(body)
    assert error is None
    assert updates == [TextDelta("Hi"), Finish(FinishReason.STOP, None)]


# -- no read-ahead ---------------------------------------------------------------------

def test_first_text_delta_arrives_before_the_rest_is_written():
    """SPEC §6: every update is yielded as soon as its bytes arrive (no read-ahead
    buffering). The server writes event 1, then waits until the test has received its
    TextDelta before writing the rest. A buffering client would wait for more bytes,
    the gate would time out after 5 s, and gate_results would be [False]."""
    first = sse(delta({"role": "assistant", "content": "Hello"}))
    rest = sse(delta({"content": " world"}), delta({}, "stop"), "[DONE]")
    got_first = threading.Event()
    with HoldingServer([first, rest], [got_first]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key=KEY)
        updates = []
        for update in client.run([ChatMessage.user("hi")]):
            if isinstance(update, TextDelta) and not got_first.is_set():
                got_first.set()
            updates.append(update)
        assert server.done.wait(10)
    assert server.gate_results == [True]
    assert updates == [TextDelta("Hello"), TextDelta(" world"),
                       Finish(FinishReason.STOP, None)]
