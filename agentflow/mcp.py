"""MCP servers as agentflow tools, behind the same approval gate (optional extra
``agentflow-approvals[mcp]``, which installs the official ``mcp`` SDK; ``import agentflow`` never
imports this module).

    from agentflow.mcp import MCPServer

    with MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."],
                         name="filesystem") as fs:
        agent = ChatClientAgent(client, tools=fs.tools)
        ...

**Threads.** The SDK is asynchronous; agentflow is not. Each started ``MCPServer`` owns
one background thread running one asyncio event loop, which holds the SDK client for
the server's whole life. ``Tool.invoke`` hands the call to that loop and blocks until
the answer comes or ``timeout`` seconds pass (default 60; then the call is cancelled on
the server and ``MCPTimeoutError`` is raised). Starting waits ``start_timeout`` seconds
(default 60: ``npx -y`` may download the server first). Nothing is ever sent twice: a call that failed in any
way is reported to the model (``Error: …``, SPEC R13), never retried here.

**Names.** A tool is offered to the model as ``<server>__<tool>`` (OpenAI allows only
``^[a-zA-Z0-9_-]{1,64}$`` in function names, so no dot): characters outside that set
become ``_``, and a name longer than 64 is cut to 55 characters plus ``_`` and 8 hex
digits of the SHA-256 of the full name. That wire name is ``Tool.name``: the one the
model calls, the session stores and the approval requests carry. People write
``<server>.<tool>`` (``qualified_name``, the MCP tool name unchanged), the form policies
use (SPEC R19, e.g. ``filesystem.write_file(src/**)``). Two servers cannot collide;
two servers of the same name are refused by the tool loop (``ValueError``), so name them.

**Approval** (SPEC R3). A tool whose annotations say ``readOnlyHint: true`` (and not
``destructiveHint: true``) runs without asking; every other tool asks. Annotations come
from the server and are only hints (MCP says not to trust them from an untrusted
server): ``approval`` overrides them, ``True`` = ask, ``False`` = run without asking,
for every tool or per tool name (``{"write_file": True, "*": False}``).
``idempotentHint`` sets the tool's ``idempotent`` flag (SPEC R16).

**Policies** (SPEC R19, ``agentflow.policy``) name a tool ``<server>.<tool>``:
``{"allow": ["filesystem.write_file(src/**)"], "deny": ["filesystem.write_file(**/.env)"]}``.
A pattern needs the tool's *subject*, read from its input schema: among the arguments
the schema marks required, exactly one whose name (case, ``_`` and ``-`` aside) is

=====================================================  =================  ==============
argument name                                          type               subject_kind
=====================================================  =================  ==============
``path``, ``paths``, ``file``, ``filename``,           string (``paths``:  ``path``
``filepath``, ``directory``, ``dir``                   strings too)
``command``, ``cmd``                                   string             ``shell``
``url``, ``uri``                                       string             ``text``
=====================================================  =================  ==============

No such argument, or more than one (``move_file(source, destination)``): no subject, and
only rules naming the whole tool apply. ``subjects`` overrides per MCP tool name:
``{"write_file": "path"}`` (the argument; its kind from the table),
``{"move_file": ("destination", "path")}`` or ``{"fetch": None}`` (none). A list of
paths (``read_multiple_files``) is judged path by path: a deny or ask rule that matches
one decides, an allow rule must match every one.

**Paths.** A path in a call and a relative pattern are both taken relative to the
server's ``root``, then made absolute, ``..`` collapsed and symlinks followed on this
machine (as for the built-in tools); ``~/`` is the home folder, as the reference
filesystem server reads it. ``root`` defaults, for a stdio server, to the first argument
of its command line that names an existing folder (the reference filesystem server
resolves relative paths against its first allowed folder), else its working directory;
for an HTTP server, to our working directory. Give ``root=`` when the server resolves
paths elsewhere; for a server on another machine, write absolute patterns.

**Results.** Text content becomes the result text; a result with structured content but
no text is sent as JSON; images, audio and resources are summarised in a line each
(type and size in bytes); an ``isError`` result raises ``MCPToolError``, which the tool
loop turns into ``Error: MCPToolError: <the server's text>`` (R13).
"""

from __future__ import annotations

import asyncio
import atexit
import binascii
import concurrent.futures
import contextlib
import functools
import hashlib
import json
import os
import re
import shlex
import threading
import warnings
import weakref
from typing import Callable, Iterable, Mapping, Sequence

from .errors import MCPError, MCPTimeoutError, MCPToolError
from .mcp_stderr import ServerStderr
from .redact import mask_url, scrub_all
from .tools import Tool

try:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError as _SDKError
    from mcp.types import CONNECTION_CLOSED, ToolListChangedNotification
    import httpx2  # the SDK's HTTP client library (a dependency of mcp)
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("agentflow.mcp needs the MCP SDK: pip install '.[mcp]' in a checkout "
                      "of agentflow-approvals") from exc

from .mcp_listing import LenientToolList, MCPListingWarning, list_all  # noqa: E402

DEFAULT_TIMEOUT = 60.0        # seconds a tool call may take
DEFAULT_START_TIMEOUT = 60.0  # seconds to start, connect and list tools (npx may download)
# Bytes of a result's text sent to the model, as read_file caps what it reads: a server
# cannot fill the model's context (or the session) with megabytes.
DEFAULT_RESULT_CAP = 64_000
_STOP_TIMEOUT = 10.0          # the SDK's own shutdown is bounded at about 6 s
_WIRE_BAD = re.compile(r"[^A-Za-z0-9_-]")
_SERVER_NAME = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")
_MAX_WIRE = 64
SUBJECT_KINDS = ("shell", "path", "text")
# what an argument's name says about it (names compared lowercase, without "_" and "-")
SUBJECT_NAMES = {**dict.fromkeys(("path", "paths", "file", "filename", "filepath",
                                  "directory", "dir"), "path"),
                 "command": "shell", "cmd": "shell", "url": "text", "uri": "text"}


class MCPServer:
    """One MCP server: started once, its tools offered as agentflow ``Tool`` objects.

    Build one with ``MCPServer.stdio`` or ``MCPServer.http``; use it as a context
    manager (``start()`` on entry, ``stop()`` on exit).

    Args:
        target: an ``mcp.StdioServerParameters`` or a streamable-HTTP URL (str).
        name: the namespace of its tools, letters and digits separated by single
            ``-`` or ``_``; ``None``: the name the server gives itself, made to fit.
        timeout: seconds a tool call may take before ``MCPTimeoutError``; a tool's own
            ``timeout`` attribute, when not ``None``, wins.
        start_timeout: seconds to start the server, connect and list its tools.
        approval: ``True`` (every tool asks), ``False`` (none asks), or a mapping of
            MCP tool names (``"*"``: the rest) to ``True``/``False``; unset tools
            follow their annotations (module docstring).
        subjects: a mapping of MCP tool names to the argument policy patterns match:
            ``"argument"``, ``("argument", "path" | "shell" | "text")`` or ``None``
            (no subject); unset tools get one from their schema (module docstring).
        root: the folder relative paths of this server's calls, and relative path
            patterns of rules on its tools, are taken from (module docstring).
        result_cap: bytes (UTF-8) of a result's text sent to the model; the rest is cut
            with a note saying how much (default 64,000, as ``read_file``'s cap).
        secrets: ``None``, or a callable (no arguments) giving the strings no result
            may carry (iterable of str: the API key, the workspace's ``.env`` values),
            asked at each call; runs of them in a result or an error are masked
            ``***`` as in the built-in tools' results (SPEC R26, R27).

    Attributes:
        tools: the ``MCPTool`` list, in the server's order (empty before ``start``).
        server_info: the server's ``Implementation`` (name, version) or ``None``.
        listing_notes: what the last listing of its tools met (list of str): pages
            that did not end (the listing ended there), a schema without ``type``
            read as an object schema, a tool left out as invalid; each is also issued
            as an ``MCPListingWarning`` (``agentflow.mcp_listing``).
        root: the absolute folder path subjects are resolved against (str).
    """

    def __init__(self, target, *, name: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 start_timeout: float = DEFAULT_START_TIMEOUT,
                 approval: bool | Mapping[str, bool] | None = None,
                 subjects: Mapping[str, str | tuple | None] | None = None,
                 root: str | None = None, result_cap: int = DEFAULT_RESULT_CAP,
                 secrets: Callable[[], Iterable[str]] | None = None):
        if name is not None and not _SERVER_NAME.fullmatch(name):
            raise ValueError(f"MCP server name {name!r} is not allowed: use letters and digits "
                             "separated by single '-' or '_' (it prefixes tool names)")
        if not (approval is None or isinstance(approval, bool) or (
                isinstance(approval, Mapping)
                and all(isinstance(v, bool) for v in approval.values()))):
            raise TypeError("approval must be True (ask), False (do not ask), or a dict of "
                            f"MCP tool name -> True/False; got {approval!r}")
        self.subjects = _checked_subjects(subjects)
        self._target = target
        self.root = _default_root(target, root)
        self._requested_name = name
        self.name = name or ""
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.approval = approval
        self.result_cap = result_cap
        self.secrets = secrets
        self.tools: list[MCPTool] = []
        # notifications/tools/list_changed arrived: re-list before the next decision
        self._list_changed = False
        self.server_info = None
        self.listing_notes: list[str] = []
        self._notes: list[str] = []  # the listing under way notes here (mcp_listing)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._main: concurrent.futures.Future | None = None
        self._stopping: asyncio.Event | None = None
        self._client: Client | None = None
        self._dead: str | None = None  # why the connection ended, once it has
        self._lock = threading.Lock()

    @classmethod
    def stdio(cls, command: str, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
              *, cwd: str | None = None, **options) -> "MCPServer":
        """A server run as a child process speaking MCP on its stdin/stdout.

        Args:
            command: the program (str), looked up on ``PATH``.
            args: its arguments (list of str).
            env: extra environment variables; the child gets only these over the SDK's
                safe few (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``),
                so pass API keys the server needs here.
            cwd: the child's working directory (default: ours).
            **options: as for ``MCPServer`` (``name``, ``timeout``, ``approval`` …).

        The child's stderr shows on ours, each line escaped and prefixed with the
        server's name (``agentflow.mcp_stderr``, SPEC R25). On ``stop()`` its
        stdin is closed, and after 2 s its whole process group is ended.
        """
        if isinstance(args, str):
            raise TypeError("args is a list of strings; for a command line use "
                            "MCPServer.from_command_line")
        params = StdioServerParameters(command=command, args=list(args),
                                       env=dict(env) if env else None, cwd=cwd)
        return cls(params, **options)

    @classmethod
    def http(cls, url: str, **options) -> "MCPServer":
        """A server reached over MCP's streamable HTTP transport.

        Args:
            url: the server's endpoint (str), e.g. ``http://127.0.0.1:8000/mcp``.
            **options: as for ``MCPServer`` (``name``, ``timeout``, ``approval`` …).

        Returns:
            MCPServer: not yet started.

        Raises:
            ValueError: ``url`` does not start with ``http://`` or ``https://``, or
                ``name`` is not allowed.
            TypeError: ``approval`` or ``subjects`` has the wrong shape.
        """
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"an MCP server URL starts with http:// or https://, got {url!r}")
        return cls(url, **options)

    @classmethod
    def from_command_line(cls, spec: str, **options) -> "MCPServer":
        """The server of ``agentflow chat --mcp SPEC``.

        Args:
            spec: ``[NAME=]COMMAND ARGS…`` (str), split as a POSIX shell would
                (``shlex``; no shell runs it), or ``[NAME=]URL`` (``http://`` or
                ``https://``) for streamable HTTP. ``NAME`` is taken only when it is
                an allowed server name; otherwise the ``=`` is part of the command.
            **options: as for ``MCPServer``; ``name`` is overridden by ``NAME``.

        Returns:
            MCPServer: not yet started (``stdio`` or ``http``).

        Raises:
            ValueError: the command is empty, has an unclosed quote (``shlex``), or
                the name is not allowed.
            TypeError: ``approval`` or ``subjects`` has the wrong shape.
        """
        name, sep, rest = spec.partition("=")
        if sep and _SERVER_NAME.fullmatch(name) and rest.strip():
            options.setdefault("name", name)
            spec = rest
        spec = spec.strip()
        if spec.startswith(("http://", "https://")):
            return cls.http(spec, **options)
        words = shlex.split(spec)
        if not words:
            raise ValueError("an MCP server command is empty")
        return cls.stdio(words[0], words[1:], **options)

    # -- life cycle --------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server is started and its connection has not ended."""
        return self._client is not None and self._dead is None

    def start(self) -> "MCPServer":
        """Start the server (or connect to it), initialise the session and list its tools.

        Returns ``self``. Does nothing when already running. Raises ``MCPError`` when it
        cannot start, does not answer within ``start_timeout`` seconds, or lists tools
        whose names clash or that ``approval`` names wrongly; nothing is left running.
        """
        with self._lock:
            if self._loop is not None:
                if self._dead is None:
                    return self
                self._shutdown()
            self._dead = None
            self._loop = asyncio.new_event_loop()
            self._stopping = asyncio.Event()
            self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                            name=f"agentflow-mcp-{self.describe()[:40]}")
            self._thread.start()
            ready: concurrent.futures.Future = concurrent.futures.Future()
            self._notes = []
            self._main = asyncio.run_coroutine_threadsafe(self._serve(ready), self._loop)
            try:
                info, specs = ready.result(self.start_timeout)
                self._adopt(info, specs)
                self._noted()
            except concurrent.futures.TimeoutError:
                self._shutdown()
                raise MCPError(f"the MCP server {self.describe()} did not answer within "
                               f"{self.start_timeout:g} s (start_timeout)", self.name) from None
            except MCPError:
                self._shutdown()
                raise
            except BaseException as exc:
                self._shutdown()
                if not isinstance(exc, Exception):
                    raise
                raise MCPError(f"could not start the MCP server {self.describe()}: "
                               f"{_reason(exc)}", self.name) from exc
            _running.add(self)
            return self

    def stop(self) -> None:
        """Close the session and end the server (a child process is ended, see
        ``stdio``). Safe to call twice; tools then raise ``MCPError`` until ``start``."""
        with self._lock:
            self._shutdown()
            _running.discard(self)

    def restart(self) -> "MCPServer":
        """``stop()`` then ``start()``: after a server died. Tool objects stay the same
        (an agent holding them keeps working); their descriptions and schemas are
        listed anew. Returns ``self``."""
        self.stop()
        return self.start()

    def __enter__(self) -> "MCPServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "dead" if self._dead else "stopped"
        return f"MCPServer({self.name or self.describe()!r}, {state})"

    def describe(self) -> str:
        """The command line or URL of the server (str), for messages: credentials in
        the URL (a token in its query, a password) masked (SPEC R26)."""
        if isinstance(self._target, str):
            return mask_url(self._target)
        return shlex.join([self._target.command, *self._target.args])

    async def _serve(self, ready: concurrent.futures.Future) -> None:
        """The one task that holds the SDK client open from start to stop (the SDK's
        context managers must be entered and left in the same task)."""
        target, stderr = self._target, None
        if isinstance(target, StdioServerParameters):  # its stderr shown safe (SPEC R25)
            stderr = ServerStderr(lambda: self.name)
            stderr.attach(asyncio.get_running_loop())
            target = stdio_client(target, errlog=stderr.file)
        else:
            target = _http_transport(target)
        # one tool the SDK would refuse must not refuse the server (mcp_listing)
        target = LenientToolList(target, self._notes)
        try:
            async with Client(target, message_handler=self._on_message) as client:
                specs = await list_all(client, self._notes, self.name)
                self._client = client
                ready.set_result((client.server_info, specs))
                await self._stopping.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else MCPError(
                    f"the MCP server {self.describe()} was stopped while starting", self.name))
            elif not self._stopping.is_set():
                self._dead = _reason(exc)  # the transport broke (an HTTP server went away)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None
            if stderr is not None:
                stderr.close()

    async def _on_message(self, message) -> None:
        """The SDK's handler of what the server sends unasked: a changed tool list is
        noted, and read again before the next decision (``relist``)."""
        if isinstance(message, ToolListChangedNotification):
            self._list_changed = True

    def relist(self, force: bool = False) -> None:
        """Read the tool list again when the server said it changed
        (``notifications/tools/list_changed``) or when ``force`` is set, and decide
        again: a tool whose
        description, schema or annotations differ from what was listed at start asks
        for approval from then on, whatever its new annotations claim (a server that
        announced a read-only tool and then redefined it cannot run it unasked); a tool
        that appears later asks too. ``approval=`` settings still decide what they name.

        Args:
            force: read the list even when no change was announced (bool).

        Raises:
            MCPError: the server is not running or does not answer the listing within
                ``timeout`` seconds.
        """
        if not (self._list_changed or force):
            return
        client, loop = self._client, self._loop
        if client is None or loop is None or self._dead is not None:
            raise MCPError(f"the MCP server {self.name!r} is not running, and its tools "
                           "changed: restart it", self.name)
        self._list_changed = False
        self._notes.clear()
        future = asyncio.run_coroutine_threadsafe(list_all(client, self._notes, self.name),
                                                  loop)
        try:
            specs = future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            self._list_changed = True
            raise MCPError(f"the MCP server {self.name!r} said its tools changed and did "
                           f"not list them within {self.timeout:g} s", self.name) from None
        self._noted()
        known = {t.mcp_name: t for t in self.tools}
        for spec in specs:
            tool = known.get(spec.name)
            if tool is None:
                tool = MCPTool(self, spec)
                tool.decide_subject(self.subjects)
                self.tools.append(tool)
                tool.changed = True
            elif _fingerprint(spec) != tool.fingerprint:
                tool.refresh(spec)
                tool.changed = True
            tool.decide_approval(self.approval)

    def _noted(self) -> None:
        """Keep the notes of the listing just read, and issue each as a warning."""
        self.listing_notes = list(self._notes)
        for note in self.listing_notes:
            warnings.warn(f"MCP server {self.name!r}: {note}", MCPListingWarning,
                          stacklevel=3)

    def _shutdown(self) -> None:
        """Stop the serving task, then the loop and its thread. Lock held."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._main is not None:
            if self._client is None:  # still starting: it would not see the stop event
                self._main.cancel()
            elif self._stopping is not None:
                loop.call_soon_threadsafe(self._stopping.set)
            with contextlib.suppress(BaseException):
                self._main.result(_STOP_TIMEOUT)

        async def cancel_the_rest():
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(BaseException):
            asyncio.run_coroutine_threadsafe(cancel_the_rest(), loop).result(_STOP_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(_STOP_TIMEOUT)
            if not self._thread.is_alive():
                loop.close()
        self._thread = self._main = self._client = None

    def _adopt(self, info, specs) -> None:
        """Name the server, build (or refresh) its tools, apply ``approval``."""
        self.server_info = info
        if not self._requested_name:
            given = getattr(info, "name", "") or ""
            self.name = "-".join(re.findall(r"[A-Za-z0-9]+", given)) or "mcp"
        known = {t.mcp_name: t for t in self.tools}
        tools = [known[s.name].refresh(s) if s.name in known else MCPTool(self, s)
                 for s in specs]
        by_wire: dict[str, str] = {}
        for t in tools:
            if t.name in by_wire:
                raise MCPError(f"the MCP server {self.name!r} lists tools {by_wire[t.name]!r} "
                               f"and {t.mcp_name!r}, which both become {t.name!r}", self.name)
            by_wire[t.name] = t.mcp_name
        for option, given in (("approval", self.approval), ("subjects", self.subjects)):
            others = {"*"} if option == "approval" else set()
            unknown = sorted(set(given) - {t.mcp_name for t in tools} - others) if isinstance(
                given, Mapping) else []
            if unknown:
                raise MCPError(f"{option} names tools the MCP server {self.name!r} does not "
                               f"have: {', '.join(unknown)} (it has: "
                               f"{', '.join(t.mcp_name for t in tools) or 'none'})", self.name)
        for t in tools:
            t.decide_approval(self.approval)
            t.decide_subject(self.subjects)
        self.tools = tools

    # -- calls -------------------------------------------------------------------------------

    def call(self, tool: str, arguments: dict, timeout: float | None = None):
        """Call the MCP tool named ``tool`` (the server's name, not the wire name) and
        wait for its ``CallToolResult``.

        Args:
            tool: the MCP tool name.
            arguments: the arguments (dict).
            timeout: seconds to wait (default: the server's ``timeout``).

        Raises:
            MCPTimeoutError: no answer in time; the call was cancelled.
            MCPError: the server is not running, died during the call, or refused it
                (a JSON-RPC error, e.g. an unknown tool).
        """
        timeout = self.timeout if timeout is None else timeout
        client, loop = self._client, self._loop
        if self._dead is not None:
            raise MCPError(f"the MCP server {self.name!r} is not running ({self._dead}); "
                           "restart it with MCPServer.restart()", self.name)
        if client is None or loop is None:
            raise MCPError(f"the MCP server {self.name!r} is not running: start it first "
                           "(MCPServer.start() or a with block)", self.name)
        future = asyncio.run_coroutine_threadsafe(client.call_tool(tool, arguments), loop)
        try:
            done, _ = concurrent.futures.wait([future], timeout)
        except BaseException:  # KeyboardInterrupt: do not leave the call running
            future.cancel()
            raise
        if not done:
            future.cancel()
            raise MCPTimeoutError(
                f"{self.name}.{tool} gave no answer within {timeout:g} s and was cancelled; "
                "it may have partly run on the server and was not retried", self.name)
        try:
            return future.result()
        except _SDKError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._died(tool) from None
            raise MCPError(f"the MCP server {self.name!r} refused the call to {tool!r}: "
                           f"{exc.message} (JSON-RPC error {exc.code})", self.name) from None
        except (concurrent.futures.CancelledError, asyncio.CancelledError):
            raise self._died(tool) from None  # the transport's task group was torn down
        except Exception as exc:
            if self._dead is not None or self._client is None:
                raise self._died(tool) from exc
            raise MCPError(f"the call to {self.name}.{tool} failed: {_reason(exc)}",
                           self.name) from exc

    def _died(self, tool: str) -> MCPError:
        self._dead = self._dead or "its connection closed"
        return MCPError(
            f"the MCP server {self.name!r} closed the connection during the call to "
            f"{tool!r} (its process exited or the connection dropped); the call may have "
            "partly run and was not retried. Restart the server (MCPServer.restart()) to "
            "use its tools again", self.name)


class MCPTool(Tool):
    """One tool of an ``MCPServer``, as an agentflow ``Tool``.

    Attributes:
        name: the wire name ``<server>__<tool>`` (module docstring).
        qualified_name: ``<server>.<tool>``, the MCP name unchanged, for people and policies.
        mcp_name: the tool's name on its server.
        description, parameters: the server's description and input JSON schema.
        annotations: the server's ``ToolAnnotations`` or ``None``.
        idempotent: ``idempotentHint`` (SPEC R16).
        approval_reason: why the tool asks or not (str), e.g. ``"readOnlyHint"``.
        subject, subject_kind: the argument policy patterns match and how (SPEC R19),
            or ``None`` (module docstring); ``subject_reason`` says where it came from.
        timeout: seconds for this tool's calls; ``None``: the server's ``timeout``.
    """

    expands_home = True  # MCP filesystem servers read "~/x" as the home folder's x

    def __init__(self, server: MCPServer, spec):
        self.server = server
        self.mcp_name = spec.name
        self.name = wire_name(server.name, spec.name)
        self.qualified_name = f"{server.name}.{spec.name}"
        self.timeout: float | None = None
        self._asks = True
        self.approval_reason = ""
        self.subject, self.subject_kind, self.subject_reason = None, "text", ""
        self.changed = False  # redefined after start (MCPServer.relist): it asks
        self.refresh(spec)
        self.fingerprint = _fingerprint(spec)  # the definition first listed

    @property
    def workspace(self) -> str:
        """The server's ``root``: relative paths are resolved against it (R19)."""
        return self.server.root

    def refresh(self, spec) -> "MCPTool":
        """Take the description, schema and annotations of a new listing.

        Args:
            spec: the server's ``mcp.types.Tool`` for this tool; an input schema
                without ``type`` / ``properties`` gets ``object`` / ``{}``.

        Returns:
            MCPTool: ``self``. The approval and the subject are not decided again
            here (``decide_approval``, ``decide_subject``).
        """
        self.description = spec.description or spec.title or ""
        schema = dict(spec.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.parameters = schema
        self.annotations = spec.annotations
        self.idempotent = bool(spec.annotations and spec.annotations.idempotent_hint)
        return self

    def decide_approval(self, approval) -> None:
        """Decide whether this tool asks for approval (SPEC R3), and say why.

        Args:
            approval: the server's ``approval`` setting: ``True`` / ``False`` for every
                tool, a mapping of MCP tool names (``"*"``: the rest) to bool, or
                ``None``. When it does not decide, the annotations do: a tool asks
                unless ``readOnlyHint`` is set, and fails closed when it also claims
                ``destructiveHint``.

        Sets ``requires_approval()`` and ``approval_reason`` (str, e.g.
        ``"readOnlyHint"``, ``"approval['*']"``).
        """
        if isinstance(approval, bool):
            self._asks, self.approval_reason = approval, "approval=" + str(approval)
            return
        if self.changed and not (isinstance(approval, Mapping) and self.mcp_name in approval):
            self._asks = True
            self.approval_reason = "redefined by the server after it was listed"
            return
        if isinstance(approval, Mapping):
            for key in (self.mcp_name, "*"):
                if key in approval:
                    self._asks = bool(approval[key])
                    self.approval_reason = f"approval[{key!r}]"
                    return
        notes = self.annotations
        read_only = bool(notes and notes.read_only_hint)
        destructive = bool(notes and notes.destructive_hint)
        self._asks = not read_only or destructive
        self.approval_reason = ("readOnlyHint and destructiveHint" if read_only and destructive
                                else "readOnlyHint" if read_only else "not read-only")

    def decide_subject(self, subjects: Mapping) -> None:
        """Take the subject from the server's ``subjects`` setting, else from the schema
        (``infer_subject``; SPEC R19).

        Args:
            subjects: the server's checked ``subjects`` mapping of MCP tool names to
                ``"argument"``, ``("argument", "path" | "shell" | "text")`` or ``None``
                (no subject).

        Sets ``subject``, ``subject_kind`` and ``subject_reason``.

        Raises:
            MCPError: ``subjects`` names an argument the tool does not have, or one
                whose kind it cannot tell.
        """
        properties = self.parameters.get("properties") or {}
        if self.mcp_name not in subjects:
            self.subject, self.subject_kind = infer_subject(self.parameters)
            self.subject_reason = "from its schema" if self.subject else ""
            return
        given = subjects[self.mcp_name]
        self.subject_reason = f"subjects[{self.mcp_name!r}]"
        if given is None:
            self.subject, self.subject_kind = None, "text"
            return
        argument, kind = (given, SUBJECT_NAMES.get(_plain(given))) if isinstance(
            given, str) else given
        if argument not in properties:
            raise MCPError(f"subjects[{self.mcp_name!r}] names the argument {argument!r}, "
                           f"which {self.qualified_name} does not have (it has: "
                           f"{', '.join(properties) or 'none'})", self.server.name)
        if kind is None:
            raise MCPError(f"subjects[{self.mcp_name!r}]: say how {argument!r} is matched: "
                           f"({argument!r}, 'path' | 'shell' | 'text')", self.server.name)
        self.subject, self.subject_kind = argument, kind

    def requires_approval(self) -> bool:
        """Whether a call asks (SPEC R3): decided from the annotations and ``approval``
        at start. Before it answers "runs without asking", the server's list is read
        again (``MCPServer.relist``), so a tool the server redefined since it was first
        listed asks, whether or not the server announced the change and however late
        its notification arrives; when the list cannot be read, it asks (fail closed).
        A server that is not running keeps its decision: its calls fail unrun
        (``MCPError``, reported to the model).

        Returns:
            bool: ``True`` when the call must wait for a person.
        """
        if not self.server.running:
            return self._asks
        try:
            self.server.relist(force=not self._asks)
        except MCPError:
            return True
        return self._asks

    def invoke(self, arguments: dict) -> str:
        """Call the tool on its server and wait up to ``timeout`` seconds.

        Args:
            arguments: the model's (or the human's edited, SPEC R20) arguments (dict).

        Returns:
            str: the result's text, as ``result_text`` makes it.

        Raises:
            MCPToolError: the server answered with ``isError`` (its text is the message;
                the loop reports it as ``Error: …``, SPEC R13).
            MCPTimeoutError: no answer in time; the call was cancelled.
            MCPError: the server is not running, died during the call, or refused it.
        """
        try:
            result = self.server.call(self.mcp_name, arguments, self.timeout)
        except MCPError as exc:  # a JSON-RPC error's message is the server's text too
            if self.server.secrets is None:
                raise
            masked = scrub_all(str(exc), self.server.secrets())
            if masked == str(exc):
                raise
            raise type(exc)(masked, exc.server) from None
        text = _capped(result_text(result), self.server.result_cap)
        if self.server.secrets is not None:  # a server that read .env sends no value on
            text = scrub_all(text, self.server.secrets())
        if result.is_error:
            raise MCPToolError(text or "the tool reported an error without a message",
                               self.server.name)
        return text


def wire_name(server: str, tool: str) -> str:
    """The function name the model sees for a server's tool (module docstring).

    Args:
        server: the server's name (str; letters and digits, ``-`` / ``_``).
        tool: the tool's MCP name (str; any characters).

    Returns:
        str: ``<server>__<tool>`` with every character outside ``[A-Za-z0-9_-]``
        replaced by ``_``; when longer than 64 characters (OpenAI's limit), cut and
        ended with ``_`` and 8 hex digits of the SHA-256 of ``<server>.<tool>``.
    """
    name = f"{server}__{_WIRE_BAD.sub('_', tool)}"
    if len(name) <= _MAX_WIRE:
        return name
    digest = hashlib.sha256(f"{server}.{tool}".encode("utf-8")).hexdigest()[:8]
    return f"{name[:_MAX_WIRE - 9]}_{digest}"


def infer_subject(schema: dict) -> tuple:
    """The subject of an MCP tool, read off its input schema (SPEC R19).

    Args:
        schema: the tool's input JSON schema (dict).

    Returns:
        tuple: ``(argument, subject_kind)`` when exactly one required string argument
        (or array of strings, for paths) has a name ``SUBJECT_NAMES`` knows, ignoring
        case, ``_`` and ``-``; else ``(None, "text")`` (module docstring).
    """
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    found = []
    for argument in required if isinstance(required, list) else []:
        kind = SUBJECT_NAMES.get(_plain(argument)) if isinstance(argument, str) else None
        prop = properties.get(argument) if isinstance(properties, dict) else None
        if kind is not None and isinstance(prop, dict) and (
                _is_string(prop) or kind == "path" and prop.get("type") == "array"
                and _is_string(prop.get("items") or {})):
            found.append((argument, kind))
    return found[0] if len(found) == 1 else (None, "text")


def _plain(argument: str) -> str:
    return argument.lower().replace("_", "").replace("-", "")


def _is_string(prop: dict) -> bool:
    kind = prop.get("type")
    return kind == "string" or isinstance(kind, list) and "string" in kind and set(kind) <= {
        "string", "null"}


def _checked_subjects(subjects) -> dict:
    """``subjects`` as given to ``MCPServer``, checked; raises ``TypeError``."""
    if subjects is None:
        return {}
    def fits(value) -> bool:
        return value is None or isinstance(value, str) or (
            isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
            and value[1] in SUBJECT_KINDS)
    if not isinstance(subjects, Mapping) or not all(fits(v) for v in subjects.values()):
        raise TypeError("subjects is a dict of MCP tool name -> argument name, "
                        "(argument, 'path' | 'shell' | 'text') or None; got "
                        f"{subjects!r}")
    return dict(subjects)


def _default_root(target, root: str | None) -> str:
    """The folder path subjects are resolved against (module docstring)."""
    if root is not None:
        return os.path.realpath(root)
    if isinstance(target, str):  # an HTTP server: we cannot see where it runs
        return os.path.realpath(os.getcwd())
    cwd = os.path.realpath(target.cwd or os.getcwd())
    for argument in target.args:
        if not argument.startswith("-") and os.path.isdir(os.path.join(cwd, argument)):
            return os.path.realpath(os.path.join(cwd, argument))
    return cwd


def result_text(result) -> str:
    """The text sent to the model for an MCP tool's result.

    Args:
        result: the ``mcp.types.CallToolResult``.

    Returns:
        str: its text blocks joined by newlines, else its structured content as JSON
        (UTF-8 text, not ASCII-escaped); then one line per other block, e.g.
        ``[image: image/png, 1024 bytes]`` (decoded size in bytes, ``?`` when the
        base64 is broken), ``[resource <uri>: <type>, <n> bytes]``,
        ``[resource link <uri>: <type>]``. ``""`` when there is nothing.
    """
    texts, others = [], []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio"):
            others.append(f"[{kind}: {block.mime_type}, {_b64_size(block.data)} bytes]")
        elif kind == "resource":
            res = block.resource
            size = (len(res.text.encode("utf-8")) if hasattr(res, "text")
                    else _b64_size(res.blob))
            others.append(f"[resource {res.uri}: {res.mime_type or 'unknown type'}, "
                          f"{size} bytes]")
        elif kind == "resource_link":
            size = f", {block.size} bytes" if block.size is not None else ""
            others.append(f"[resource link {block.uri}: {block.mime_type or 'unknown type'}"
                          f"{size}]")
        else:
            others.append(f"[{kind or type(block).__name__} content]")
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(texts + others)


def _fingerprint(spec) -> str:
    """What a listed tool is, as far as the gate is concerned: its description, input
    schema and annotations, as canonical text."""
    notes = spec.annotations.model_dump(mode="json") if spec.annotations else None
    return json.dumps([spec.description, spec.title, spec.input_schema, notes],
                      sort_keys=True, default=str)


def _capped(text: str, cap: int) -> str:
    """``text`` cut to ``cap`` bytes of UTF-8 (at a character boundary), saying how many
    bytes were cut, as the built-in tools' caps do."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= cap:
        return text
    kept = data[:cap].decode("utf-8", "ignore")
    return (f"{kept}\n[... {len(data) - len(kept.encode('utf-8'))} more bytes cut: the "
            f"MCP result cap is {cap} bytes]")


def _b64_size(data: str) -> int | str:
    try:
        return len(binascii.a2b_base64(data))
    except (binascii.Error, ValueError):
        return "?"


def _reason(exc: BaseException) -> str:
    """The first real error inside (nested) exception groups, as ``Type: message``."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:
        exc = exc.exceptions[0]  # an ExceptionGroup from the SDK's task groups
    if isinstance(exc, _SDKError) and exc.code == CONNECTION_CLOSED:
        return ("the server closed the connection before answering (is the command an MCP "
                "server? its own messages are above)")
    return f"{type(exc).__name__}: {exc}"


@functools.lru_cache(maxsize=None)
def _tls_context():
    """The one ``ssl.SSLContext`` of this process for MCP servers over HTTP(S): the
    context httpx2 builds by default (the system's CA certificates, or ``SSL_CERT_FILE``
    / ``SSL_CERT_DIR`` as set at the first HTTP start), built once. Loading the CA
    certificates is about 0.1 s of CPU, and the SDK's default client does it on every
    start, even for http:// on loopback; contexts are meant to be shared."""
    return httpx2.create_ssl_context()


@contextlib.asynccontextmanager
async def _http_transport(url: str):
    """The SDK's streamable-HTTP transport to ``url`` over an httpx2 client with the
    SDK's own timeouts (30 s, 300 s to read an event stream, as ``create_mcp_http_client``)
    and the process's TLS context (``_tls_context``). Yields the transport's streams;
    the client is closed after the transport."""
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(timeout=timeout, verify=_tls_context()) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            yield streams


# Servers still running when the interpreter exits are stopped, so no child outlives us.
_running: "weakref.WeakSet[MCPServer]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop()
