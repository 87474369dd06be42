"""Reading an MCP server's tool list when the server bends it (issue 41).

Two faults seen in the field, each handled as a kind:

* **Pages that never end.** A server whose ``nextCursor`` never advances (it repeats a
  cursor) would be asked for the same page forever; one that hands out new cursors for
  ever would fill the list with copies. The listing ends at a repeated cursor, at a page
  that lists only tools already listed, or after ``MAX_PAGES`` pages, with a note
  saying which; the tools listed so far are used.
* **Schemas the SDK refuses.** The SDK validates every ``tools/list`` result as a
  whole: one tool whose ``inputSchema`` lacks ``"type": "object"`` (or is not an object
  at all) made the whole server fail to start. ``LenientToolList`` wraps the SDK's
  transport (``mcp.client.Transport``, its public protocol) and mends each listed
  tool before the SDK reads the result: a schema without ``type`` is read as an object
  schema (noted; MCP requires ``"type": "object"`` at the root, so that is what such a
  schema can only mean), and a tool that still is not a valid MCP tool (checked here, one
  by one, with the SDK's own ``mcp.types.Tool``) is left out (noted), so one bad tool
  never hides the others.

The notes are strings for people; ``MCPServer.listing_notes`` holds those of the last
listing and each is issued once as an ``MCPListingWarning``.
"""

from __future__ import annotations

from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCRequest, JSONRPCResponse, Tool

MAX_PAGES = 100


class MCPListingWarning(UserWarning):
    """An MCP server's tool list was bent: pages that did not end, a schema without
    ``type`` read as an object schema, or a tool left out (the message says which)."""


async def list_all(client, notes: list[str], server: str = "") -> list:
    """Every tool the server lists, page by page (``client.list_tools(cursor=…)``).

    Args:
        client: the SDK's ``mcp.Client``, connected.
        notes: a list (of str) to which what went wrong with the pages is appended.
        server: the server's name (str), for an error.

    Returns:
        list: the ``mcp.types.Tool`` objects, in the server's order, each name once.

    Raises:
        MCPError: the server lists one name twice with different definitions (which
            one it means cannot be known), or the SDK's own errors.
    """
    from .errors import MCPError

    specs: dict[str, Tool] = {}
    cursor, seen = None, set()
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        new = 0
        for spec in page.tools:
            earlier = specs.get(spec.name)
            if earlier is None:
                specs[spec.name] = spec
                new += 1
            elif earlier != spec:
                raise MCPError(f"the MCP server {server!r} lists the tool {spec.name!r} "
                               "twice, with different definitions; which one it means "
                               "cannot be known: fix the server", server)
        cursor = page.next_cursor
        if not cursor:
            return list(specs.values())
        if cursor in seen:
            notes.append(f"the server named the cursor {cursor[:40]!r} a second time: the "
                         f"listing was ended there, with {_tools(len(specs))} listed so far")
            return list(specs.values())
        if page.tools and not new:
            notes.append(f"a page of the listing named only tools already listed: the "
                         f"listing was ended there, with {_tools(len(specs))}")
            return list(specs.values())
        seen.add(cursor)
    notes.append(f"the listing still went on after {MAX_PAGES} pages: it was ended "
                 f"there, with {_tools(len(specs))} listed so far")
    return list(specs.values())


def _tools(count: int) -> str:
    return f"{count} tool" if count == 1 else f"{count} tools"


class LenientToolList:
    """A transport (``mcp.client.Transport``) that mends ``tools/list`` results before
    the SDK validates them (module docstring).

    Args:
        transport: the SDK's transport to wrap (``stdio_client(...)``,
            ``streamable_http_client(url)``).
        notes: a list (of str) to which each mended or left-out tool is appended.
    """

    def __init__(self, transport, notes: list[str]):
        self._transport = transport
        self._notes = notes
        self._asked: set = set()  # ids of the tools/list requests sent

    async def __aenter__(self):
        read, write = await self._transport.__aenter__()
        return _Mending(read, self), _Noting(write, self)

    async def __aexit__(self, *exc):
        return await self._transport.__aexit__(*exc)

    def _sent(self, item) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCRequest) and message.method == "tools/list":
            self._asked.add(message.id)

    def _received(self, item):
        message = getattr(item, "message", None)
        if not (isinstance(message, JSONRPCResponse) and message.id in self._asked):
            return item
        self._asked.discard(message.id)
        result = message.result
        if not (isinstance(result, dict) and isinstance(result.get("tools"), list)):
            return item  # the SDK says what is wrong with it
        tools = [tool for tool in map(self._mended, result["tools"]) if tool is not None]
        return SessionMessage(message=message.model_copy(update={
            "result": {**result, "tools": tools}}), metadata=item.metadata)

    def _mended(self, tool):
        name = tool.get("name") if isinstance(tool, dict) else None
        shown = repr(name) if isinstance(name, str) else "without a name"
        if isinstance(tool, dict):
            schema = tool.get("inputSchema")
            if schema is None or (isinstance(schema, dict) and "type" not in schema):
                self._notes.append(f"the tool {shown} has an input schema without a type: "
                                   "it is read as an object schema")
                tool = {**tool, "inputSchema": {**(schema or {}), "type": "object"}}
        try:
            Tool.model_validate(tool)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            first = str(exc).splitlines()
            reason = " ".join(line.strip() for line in first[1:3]) or first[0]
            self._notes.append(f"the tool {shown} was left out: it is not a valid MCP "
                               f"tool ({reason[:200]})")
            return None
        return tool


class _Forwarding:
    """A stream of the wrapped transport; what this class does not define (such as
    ``last_context``) is the wrapped stream's."""

    def __init__(self, inner, owner: LenientToolList):
        self._inner, self._owner = inner, owner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self):
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc):
        return await self._inner.__aexit__(*exc)


class _Mending(_Forwarding):
    async def receive(self):
        return self._owner._received(await self._inner.receive())

    def __aiter__(self):
        return self

    async def __anext__(self):
        return self._owner._received(await self._inner.__anext__())


class _Noting(_Forwarding):
    async def send(self, item, /) -> None:
        self._owner._sent(item)
        await self._inner.send(item)
