"""agentflow against its peers: the same agent, the same tool, the same loopback server.

Libraries (``LIBRARIES``): ``agentflow``, ``agent-framework`` (Microsoft Agent Framework,
its ``OpenAIChatCompletionClient`` from the ``agent-framework-openai`` package),
``openai-agents`` (the OpenAI Agents SDK with ``OpenAIChatCompletionsModel``) and
``pydantic-ai`` (``OpenAIChatModel`` with ``OpenAIProvider``). Every one talks to an
OpenAI-compatible chat-completions endpoint in its streaming mode (``"stream": true``),
with model ``bench-model`` and key ``sk-bench``, and offers one tool
``lookup(query: str) -> str`` (returns ``"42"``, no approval). Tracing, telemetry and
retries are off wherever a library has them:

* agentflow: ``OpenAIChatClient(max_retries=0)``.
* agent-framework: ``disable_instrumentation()`` (OpenTelemetry spans; on by default),
  ``AGENT_FRAMEWORK_USER_AGENT_DISABLED`` / ``AGENT_FRAMEWORK_FEATURE_MASK_DISABLED``
  (the user-agent telemetry header), ``AsyncOpenAI(max_retries=0)``.
* openai-agents: ``set_tracing_disabled(True)`` and ``RunConfig(tracing_disabled=True)``
  (its tracing would otherwise export to api.openai.com), ``AsyncOpenAI(max_retries=0)``;
  runner-managed retries are opt-in and left off.
* pydantic-ai: instrumentation is off by default (``agent.instrument = False`` made
  explicit), ``AsyncOpenAI(max_retries=0)``.

The three async libraries share one persistent event loop (``_loop()``), so no
measurement includes creating or closing a loop; clients and agents are built before
the timed region, as a program would hold them.

Functions: ``loop_seconds``, ``first_update_seconds``, ``import_seconds`` (see each),
``build`` (the agent of one library), ``run_loop`` (a ``ReplayServer``, one timed loop and
a check of every request), ``FirstTextServer``. ``python peers.py [rounds]`` prints a
quick comparison.

Known differences the numbers carry: ``lookup`` is a plain ``def``; agentflow calls it
inline, the three async libraries run it on a worker thread (``asyncio.to_thread`` /
anyio). The three async libraries all send through the ``openai`` SDK, whose request
``transform`` walks the whole message history on every call, so their cost per model call
grows with the number of rounds. ``ReplayServer`` closes every connection, so each model
call of every library opens a new one (bench/keepalive.py runs this loop over kept-alive
connections).

agent-framework needs ``agent-framework-openai`` (its OpenAI connector, not part of
``agent-framework-core``): ``.bench-venv/bin/pip install agent-framework-openai``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# Telemetry switches read at import time by the libraries: set before any is imported.
os.environ.setdefault("AGENT_FRAMEWORK_USER_AGENT_DISABLED", "true")
os.environ.setdefault("AGENT_FRAMEWORK_FEATURE_MASK_DISABLED", "true")
os.environ.setdefault("ENABLE_INSTRUMENTATION", "false")        # agent-framework
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")     # openai-agents

ROOT = Path(__file__).resolve().parents[1]
BENCH_PYTHON = ROOT / ".bench-venv" / "bin" / "python"

LIBRARIES = ("agentflow", "agent-framework", "openai-agents", "pydantic-ai")
MODEL = "bench-model"
API_KEY = "sk-bench"
PROMPT = "Look it up."
FIRST_TEXT = "Hello"             # the first text event of FirstTextServer
REST_DELAY = 0.2                 # seconds FirstTextServer waits after the first event

IMPORTS = {
    "agentflow": "from agentflow import ChatClientAgent, OpenAIChatClient",
    "agent-framework": ("from agent_framework import Agent\n"
                        "from agent_framework.openai import OpenAIChatCompletionClient\n"
                        "from openai import AsyncOpenAI"),
    "openai-agents": ("from agents import Agent, Runner, RunConfig, function_tool, "
                      "set_tracing_disabled, OpenAIChatCompletionsModel\n"
                      "from openai import AsyncOpenAI"),
    "pydantic-ai": ("from pydantic_ai import Agent\n"
                    "from pydantic_ai.models.openai import OpenAIChatModel\n"
                    "from pydantic_ai.providers.openai import OpenAIProvider\n"
                    "from openai import AsyncOpenAI"),
}


class PeerError(RuntimeError):
    """A library could not be built or run as the benchmark needs, or it did something
    other than the expected run (so its number would be wrong)."""


def lookup(query: str) -> str:
    """Look a query up.

    Args:
        query: what to look up.
    """
    return "42"


def _check_name(name: str) -> None:
    if name not in LIBRARIES:
        raise ValueError(f"unknown library {name!r}; one of {', '.join(LIBRARIES)}")


# -- the persistent event loop of the async libraries ---------------------------------

_RUNNER: asyncio.Runner | None = None


def _loop() -> asyncio.Runner:
    global _RUNNER
    if _RUNNER is None:
        _RUNNER = asyncio.Runner()
    return _RUNNER


def _run(coro):
    return _loop().run(coro)


# -- building the agents ----------------------------------------------------------------

@dataclass
class Built:
    """One library's agent, ready to run: ``name``, ``agent`` and whatever the run needs
    (``max_calls``: the model calls its limits allow, ``extra``)."""
    name: str
    agent: object
    max_calls: int
    extra: dict = field(default_factory=dict)


def _async_openai(base_url: str):
    from openai import AsyncOpenAI
    return AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)


def build(name: str, base_url: str, max_calls: int = 1, tools: bool = True) -> Built:
    """The agent of library ``name`` against ``base_url``, its turn/request limits set
    to allow ``max_calls`` model calls, offering ``lookup`` when ``tools``.
    Raises ``PeerError`` when the library (or a part it needs) cannot be imported or
    refuses the configuration."""
    _check_name(name)
    if max_calls < 1:
        raise ValueError("max_calls must be at least 1")
    tool_list = [lookup] if tools else []
    try:
        if name == "agentflow":
            from agentflow import AgentRunOptions, ChatClientAgent, OpenAIChatClient
            client = OpenAIChatClient(MODEL, base_url=base_url, api_key=API_KEY,
                                      max_retries=0)
            agent = ChatClientAgent(client, tools=tool_list,
                                    options=AgentRunOptions(max_rounds=max_calls))
            return Built(name, agent, max_calls)

        if name == "agent-framework":
            from agent_framework import Agent
            from agent_framework.observability import disable_instrumentation
            try:
                from agent_framework.openai import OpenAIChatCompletionClient
            except ModuleNotFoundError as exc:
                raise PeerError("agent-framework: its OpenAI connector is not installed "
                                "(agent-framework-core has none); install it with "
                                "`.bench-venv/bin/pip install agent-framework-openai`") from exc
            disable_instrumentation()
            client = OpenAIChatCompletionClient(
                model=MODEL, async_client=_async_openai(base_url),
                function_invocation_configuration={"max_iterations": max_calls})
            agent = Agent(client=client, tools=tool_list or None)
            return Built(name, agent, max_calls)

        if name == "openai-agents":
            from agents import (Agent, OpenAIChatCompletionsModel, RunConfig,
                                function_tool, set_tracing_disabled)
            set_tracing_disabled(True)
            model = OpenAIChatCompletionsModel(model=MODEL,
                                               openai_client=_async_openai(base_url))
            agent = Agent(name="bench", model=model,
                          tools=[function_tool(t) for t in tool_list])
            return Built(name, agent, max_calls,
                         {"run_config": RunConfig(tracing_disabled=True)})

        if name == "pydantic-ai":
            from pydantic_ai import Agent
            from pydantic_ai.models.openai import OpenAIChatModel
            from pydantic_ai.providers.openai import OpenAIProvider
            from pydantic_ai.usage import UsageLimits
            model = OpenAIChatModel(MODEL, provider=OpenAIProvider(
                openai_client=_async_openai(base_url)))
            agent = Agent(model, tools=tool_list)
            agent.instrument = False  # the default (Agent.instrument_all() not called)
            return Built(name, agent, max_calls,
                         {"usage_limits": UsageLimits(request_limit=max_calls)})
    except PeerError:
        raise
    except Exception as exc:
        raise PeerError(f"{name}: could not build the agent: {type(exc).__name__}: "
                        f"{exc}") from exc
    raise AssertionError(name)


# -- one run of each library, consuming every update it streams ---------------------------
#
# Each ``_run_*`` returns (started, first_text_at, ended, tool_results, final_text):
# perf_counter just before the library's run entry point is called, when the caller
# first held text, and after the run's final result is in hand.

def _run_agentflow(built: Built):
    from agentflow import Finish, FinishReason, TextDelta, ToolResult
    tool_results, text, first, finish = 0, [], None, None
    started = time.perf_counter()
    for update in built.agent.run(PROMPT):
        if isinstance(update, TextDelta):
            if first is None and update.text:
                first = time.perf_counter()
            text.append(update.text)
        elif isinstance(update, ToolResult):
            tool_results += 1
        elif isinstance(update, Finish):
            finish = update
    ended = time.perf_counter()
    if finish is None or finish.finish_reason is not FinishReason.STOP:
        raise PeerError(f"agentflow: the run ended with {finish!r}, not STOP")
    return started, first, ended, tool_results, "".join(text)


async def _run_agent_framework(built: Built):
    tool_results, first = 0, None
    started = time.perf_counter()
    stream = built.agent.run(PROMPT, stream=True)
    async for update in stream:
        if first is None and update.text:
            first = time.perf_counter()
        tool_results += sum(1 for c in update.contents if c.type == "function_result")
    final = await stream.get_final_response()
    ended = time.perf_counter()
    return started, first, ended, tool_results, final.text


async def _run_openai_agents(built: Built):
    from agents import Runner
    from openai.types.responses import ResponseTextDeltaEvent
    tool_results, first = 0, None
    started = time.perf_counter()
    result = Runner.run_streamed(built.agent, PROMPT, max_turns=built.max_calls,
                                 run_config=built.extra["run_config"])
    async for event in result.stream_events():
        if event.type == "raw_response_event":
            if (first is None and isinstance(event.data, ResponseTextDeltaEvent)
                    and event.data.delta):
                first = time.perf_counter()
        elif event.type == "run_item_stream_event" and event.name == "tool_output":
            tool_results += 1
    ended = time.perf_counter()
    return started, first, ended, tool_results, result.final_output


async def _run_pydantic_ai(built: Built):
    from pydantic_ai import (AgentRunResultEvent, FunctionToolResultEvent, PartDeltaEvent,
                             PartStartEvent, TextPart, TextPartDelta)
    tool_results, first, output = 0, None, None
    started = time.perf_counter()
    async with built.agent.run_stream_events(
            PROMPT, usage_limits=built.extra["usage_limits"]) as events:
        async for event in events:
            if first is None and (
                    (isinstance(event, PartStartEvent) and isinstance(event.part, TextPart)
                     and event.part.content)
                    or (isinstance(event, PartDeltaEvent)
                        and isinstance(event.delta, TextPartDelta) and event.delta.content_delta)):
                first = time.perf_counter()
            elif isinstance(event, FunctionToolResultEvent):
                tool_results += 1
            elif isinstance(event, AgentRunResultEvent):
                output = event.result.output
    ended = time.perf_counter()
    return started, first, ended, tool_results, output


_ASYNC_RUNS = {"agent-framework": _run_agent_framework, "openai-agents": _run_openai_agents,
               "pydantic-ai": _run_pydantic_ai}


def _run_once(built: Built):
    try:
        if built.name == "agentflow":
            return _run_agentflow(built)
        return _run(_ASYNC_RUNS[built.name](built))
    except PeerError:
        raise
    except Exception as exc:
        raise PeerError(f"{built.name}: the run failed: {type(exc).__name__}: {exc}") from exc


# -- 1. the tool loop -----------------------------------------------------------------------

def loop_seconds(name: str, base_url: str, rounds: int) -> float:
    """Wall seconds of ONE agent run of library ``name`` that does ``rounds`` tool rounds
    (``rounds`` + 1 streamed model calls) against ``base_url``, which must answer with
    ``rounds`` tool-call streams then one ``"done"`` stream (see ``replay_bodies``).

    Built before the timed region (not timed): the HTTP client, the chat client or
    model, the agent with ``lookup`` and its limits set to ``rounds`` + 1 model calls.

    Timed (``time.perf_counter``, in the thread running the loop): from just before the
    library's run entry point is called to the moment the run's final result is in hand,
    with every streamed update consumed by the caller on the way:

    * agentflow: ``for update in agent.run(prompt)`` to its end (the ``Finish``).
    * agent-framework: ``stream = agent.run(prompt, stream=True)``, ``async for`` over
      it, then ``await stream.get_final_response()``.
    * openai-agents: ``Runner.run_streamed(...)`` and ``async for`` over
      ``result.stream_events()`` to its end (``result.final_output`` is then set).
    * pydantic-ai: ``async with agent.run_stream_events(...)``, ``async for`` to its end
      (the ``AgentRunResultEvent``), including the context's exit.

    For the async libraries the timer runs inside the coroutine on the persistent loop,
    so neither loop creation nor ``asyncio.run`` teardown is counted. The agent is new,
    so its client's first request (about 6 ms of per-client first use for the async
    ones) is in the run; modules a library imports lazily on its first run in a process
    are too, so call once untimed first (``main`` does). ``gc.collect()`` runs before
    the timer starts. The loopback server is a thread of this process: its own work
    (parsing each request, writing each reply) is in every library's time alike.

    Raises ``PeerError`` when the run fails, runs another number of tools or does not end
    with the text ``done``.
    """
    if rounds < 0:
        raise ValueError("rounds must be 0 or more")
    built = build(name, base_url, max_calls=rounds + 1)
    gc.collect()  # no collection of an earlier run's garbage inside this one
    started, _, ended, tool_results, final = _run_once(built)
    if tool_results != rounds:
        raise PeerError(f"{name}: ran {tool_results} tool call(s), expected {rounds}")
    if final != "done":
        raise PeerError(f"{name}: the run ended with {final!r}, expected 'done'")
    return ended - started


def replay_bodies(rounds: int) -> list[bytes]:
    """The replies ``loop_seconds`` expects: ``rounds`` tool-call streams then ``done``."""
    from agentflow.testing.replay import chat_stream
    return ([chat_stream(tool_calls=[(f"call_{i}", "lookup", '{"query": "x"}')])
             for i in range(rounds)] + [chat_stream(text="done")])


def check_requests(name: str, requests, rounds: int) -> None:
    """Raise ``PeerError`` unless ``requests`` (a ReplayServer's) are the ``rounds`` + 1
    streamed calls of one tool loop: ``"stream": true``, model ``bench-model``, key
    ``sk-bench``, the tool offered, and call ``i`` carrying ``i`` results ``"42"``."""
    if len(requests) != rounds + 1:
        raise PeerError(f"{name}: made {len(requests)} model call(s), expected {rounds + 1}")
    for i, request in enumerate(requests):
        body = request.json
        where = f"{name}: request {i}"
        if not isinstance(body, dict):
            raise PeerError(f"{where} is not JSON")
        if body.get("stream") is not True:
            raise PeerError(f"{where} has stream={body.get('stream')!r}, not true")
        if body.get("model") != MODEL:
            raise PeerError(f"{where} asks for model {body.get('model')!r}")
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            raise PeerError(f"{where} sends authorization "
                            f"{request.headers.get('authorization')!r}")
        names = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        if names != ["lookup"]:
            raise PeerError(f"{where} offers tools {names}, expected ['lookup']")
        results = [m for m in body.get("messages", []) if m.get("role") == "tool"]
        if len(results) != i or any(_content_text(m) != "42" for m in results):
            raise PeerError(f"{where} carries tool results "
                            f"{[_content_text(m) for m in results]}, expected {i} x '42'")


def _content_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else repr(content)


def run_loop(name: str, rounds: int) -> float:
    """``loop_seconds`` against a fresh ``ReplayServer``, then ``check_requests``."""
    from agentflow.testing.replay import ReplayServer
    with ReplayServer(replay_bodies(rounds)) as server:
        seconds = loop_seconds(name, server.base_url, rounds)
        check_requests(name, server.requests, rounds)
        if server.mismatches:
            raise PeerError(f"{name}: {server.mismatches}")
    return seconds


# -- 2. time to first update ------------------------------------------------------------

class FirstTextServer:
    """A loopback OpenAI-compatible server for ``first_update_seconds``.

    Every ``POST`` gets HTTP 200 ``text/event-stream``: the headers are written, then
    ``time.perf_counter()`` is appended to ``stamps`` immediately before the first
    ``data:`` event (role and the text ``Hello``) is written and flushed; after
    ``REST_DELAY`` seconds the finish chunk, the usage chunk and ``data: [DONE]``
    follow. ``framing``: ``"chunked"`` (HTTP/1.1 chunked transfer coding, each event one
    chunk, as OpenAI's API answers) or ``"close"`` (no length, the body ends when the
    connection closes). The socket has ``TCP_NODELAY``, so the kernel sends each write at
    once. ``requests`` keeps each request's parsed JSON body.
    """

    def __init__(self, framing: str = "chunked"):
        if framing not in ("chunked", "close"):
            raise ValueError("framing is 'chunked' or 'close'")
        self.framing = framing
        self.stamps: list[float] = []
        self.requests: list[dict] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "FirstTextServer":
        outer = self

        def event(choices, extra=None) -> bytes:
            chunk = {"id": "chatcmpl-first", "object": "chat.completion.chunk",
                     "created": 0, "model": MODEL, "choices": choices, **(extra or {})}
            return f"data: {json.dumps(chunk)}\n\n".encode()

        first = event([{"index": 0, "delta": {"role": "assistant", "content": FIRST_TEXT},
                        "finish_reason": None}])
        rest = [event([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
                event([], {"usage": {"prompt_tokens": 10, "completion_tokens": 1,
                                     "total_tokens": 11}}),
                b"data: [DONE]\n\n"]

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _write(self, data: bytes) -> None:
                if outer.framing == "chunked":
                    data = b"%x\r\n%s\r\n" % (len(data), data)
                self.wfile.write(data)
                self.wfile.flush()

            def do_POST(self):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    outer.requests.append(json.loads(body))
                except ValueError:
                    outer.requests.append(None)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Cache-Control", "no-cache")
                if outer.framing == "chunked":
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Connection", "close")
                self.end_headers()  # writes the headers to the socket
                try:
                    outer.stamps.append(time.perf_counter())
                    self._write(first)
                    time.sleep(REST_DELAY)
                    for piece in rest:
                        self._write(piece)
                    if outer.framing == "chunked":
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                if outer.framing == "close":
                    self.close_connection = True

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,),
                         name="peers-first-text", daemon=True).start()
        _FIRST_TEXT_SERVERS[self.base_url] = self
        return self

    def stop(self) -> None:
        if self._server is not None:
            _FIRST_TEXT_SERVERS.pop(self.base_url, None)
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FirstTextServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client closing a kept-alive connection (chunked framing) resets it while the
        # handler waits for a next request: not an error of the measurement.
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


_FIRST_TEXT_SERVERS: dict[str, FirstTextServer] = {}
_FIRST_BUILT: dict[tuple[str, str], Built] = {}


def first_update_seconds(name: str, base_url: str | None = None) -> float:
    """Seconds from the moment a ``FirstTextServer`` writes the first text event of a
    single streamed model call (no tools offered) to the moment the caller holds that
    text through library ``name``'s public streaming API:

    * agentflow: ``ChatClientAgent(...).run(prompt)`` yields the ``TextDelta``.
    * agent-framework: ``Agent.run(prompt, stream=True)`` yields the first
      ``AgentResponseUpdate`` whose ``.text`` is not empty.
    * openai-agents: ``Runner.run_streamed(...).stream_events()`` yields the
      ``raw_response_event`` whose data is a ``ResponseTextDeltaEvent``.
    * pydantic-ai: ``Agent.run_stream_events(...)`` yields the first text: a
      ``PartStartEvent`` with a non-empty ``TextPart`` (pydantic-ai starts a part with
      the first delta's text) or a ``TextPartDelta``.

    Both stamps are ``time.perf_counter()`` in this process (the server is a thread of
    it), so request building, connecting and header handling are not included: only
    reading the event off the socket, SSE and JSON decoding, the library's own types
    and layers, and handing it to the caller (for the async ones, through the event
    loop). The run then goes on to its end, untimed.

    ``base_url``: a ``FirstTextServer`` started in this process; ``None`` starts one
    for this call. The agent is built once per (library, server) and reused, as a
    program would hold it; the first call in a process pays lazy imports and first-use
    costs, so take the median of many. Raises ``PeerError`` when the run fails, the
    text is not the server's, or it arrived only after the rest of the stream (the
    library or the framing buffered it).
    """
    _check_name(name)
    if base_url is None:
        with FirstTextServer() as server:
            return first_update_seconds(name, server.base_url)
    server = _FIRST_TEXT_SERVERS.get(base_url)
    if server is None:
        raise ValueError(f"{base_url} is not a FirstTextServer started in this process")
    built = _FIRST_BUILT.get((name, base_url))
    if built is None:
        built = _FIRST_BUILT[(name, base_url)] = build(name, base_url, max_calls=1,
                                                       tools=False)
    before = len(server.stamps)
    _, first, _, tool_results, final = _run_once(built)
    if len(server.stamps) != before + 1:
        raise PeerError(f"{name}: made {len(server.stamps) - before} model call(s), "
                        "expected 1")
    if server.requests[-1] is None or server.requests[-1].get("stream") is not True:
        raise PeerError(f"{name}: the request did not ask for a stream")
    if first is None:
        raise PeerError(f"{name}: the run yielded no text")
    if final != FIRST_TEXT:
        raise PeerError(f"{name}: the run's text is {final!r}, expected {FIRST_TEXT!r}")
    seconds = first - server.stamps[before]
    if seconds >= REST_DELAY:
        raise PeerError(f"{name}: the first text arrived {seconds * 1000:.0f} ms after it "
                        f"was written, after the rest of the stream ({REST_DELAY * 1000:.0f}"
                        f" ms later): something buffered it")
    if seconds < 0:
        raise PeerError(f"{name}: the text was seen before it was written")
    return seconds


# -- 3. import time ---------------------------------------------------------------------

def _process_seconds(code: str, python: str, env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise PeerError(f"`python -c {code!r}` failed: {done.stderr.strip()[-500:]}")
    return seconds


def import_seconds(name: str, repeat: int = 7, python: str | os.PathLike = BENCH_PYTHON
                   ) -> float:
    """Wall seconds of a fresh ``python -c`` process that imports what building a usable
    agent with an OpenAI-compatible client takes (``IMPORTS[name]``), minus those of
    ``python -c pass``: the median of ``repeat`` runs of each, after one unmeasured run of
    each (which writes any missing bytecode). Only the imports: modules a library loads
    lazily when an agent is built or first run are not counted. Raises ``PeerError``
    when the import fails."""
    _check_name(name)
    python = str(python)
    env = dict(os.environ)
    code = IMPORTS[name]
    _process_seconds("pass", python, env)
    _process_seconds(code, python, env)
    base, full = [], []
    for _ in range(repeat):  # interleaved, so a drift affects both alike
        base.append(_process_seconds("pass", python, env))
        full.append(_process_seconds(code, python, env))
    return statistics.median(full) - statistics.median(base)


# -- the quick check ------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    """The quick check: per library, ``run_loop(rounds)`` 3 times (after one untimed
    ``run_loop(1)`` that pays first-use costs), ``first_update_seconds`` 20 times on one
    server (after one sample reported apart as ``cold``), and ``import_seconds``."""
    rounds = int(argv[0]) if argv else 50
    samples = 20
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import summary
    failures = {}
    print(f"python {sys.version.split()[0]}; {rounds} tool rounds, 3 runs each; "
          f"first update: {samples} samples each")
    print(f"{'library':<16} {'loop ms/round (3 runs)':<24} "
          f"{'first update ms (cold; median p99)':<36} import ms")
    for name in LIBRARIES:
        cells = []
        try:
            run_loop(name, 1)  # first-use costs, untimed
            per_round = [run_loop(name, rounds) / rounds * 1000 for _ in range(3)]
            cells.append(" ".join(f"{v:6.2f}" for v in per_round))
        except Exception as exc:
            failures[name] = exc
            cells.append("failed")
        try:
            with FirstTextServer() as server:
                cold = first_update_seconds(name, server.base_url) * 1000
                values = [first_update_seconds(name, server.base_url) * 1000
                          for _ in range(samples)]
            s = summary(values)
            cells.append(f"{cold:7.3f}; {s['median']:.3f} {s['p99']:.3f}")
        except Exception as exc:
            failures.setdefault(name, exc)
            cells.append("failed")
        try:
            cells.append(f"{import_seconds(name) * 1000:.0f}")
        except Exception as exc:
            failures.setdefault(name, exc)
            cells.append("failed")
        print(f"{name:<16} {cells[0]:<24} {cells[1]:<36} {cells[2]}", flush=True)
    print("loop ms/round: one run's wall time / rounds (the run makes rounds + 1 model "
          "calls); first update: p99 of 20 is the largest")
    for name, exc in failures.items():
        print(f"{name}: {type(exc).__name__}: {exc}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
