"""MCP servers whose tool list is bent (issue 41 items 5 and 6): pages that never end,
and schemas the SDK refuses. One bad page or tool never keeps the server's other tools
from the agent, and each is said (``MCPServer.listing_notes``, ``MCPListingWarning``).

The servers are real processes speaking MCP over stdio (``tests/mcp_bent_server.py``,
JSON-RPC by hand, as servers made without an SDK are); the agent's side is the SDK's
own client. Endless listings where a server cannot easily play them (new tools on every
page) are read from a stand-in client, sans-IO.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import pathlib
import sys
import warnings

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the optional extra: pip install '.[mcp]'")

from mcp.types import ListToolsResult, Tool  # noqa: E402

from agentflow.cli.servers import mcp_summary  # noqa: E402
from agentflow.errors import MCPError  # noqa: E402
from agentflow.mcp import MCPServer  # noqa: E402
from agentflow.mcp_listing import MAX_PAGES, MCPListingWarning, list_all  # noqa: E402

BENT = str(pathlib.Path(__file__).with_name("mcp_bent_server.py"))
MODES = ("same-cursor", "new-cursors", "no-type")


@pytest.fixture(scope="module")
def bent():
    """One started server per mode, side by side, and the warnings their starts issued
    (``(servers, warnings)``)."""
    servers = {mode: MCPServer.stdio(sys.executable, [BENT, mode], timeout=10,
                                     start_timeout=30) for mode in MODES}
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        with concurrent.futures.ThreadPoolExecutor(len(MODES)) as pool:
            for future in [pool.submit(server.start) for server in servers.values()]:
                future.result()
    try:
        yield servers, [str(w.message) for w in issued if w.category is MCPListingWarning]
    finally:
        for server in servers.values():
            server.stop()


def names(server) -> list[str]:
    return [t.mcp_name for t in server.tools]


def test_a_cursor_that_never_advances_ends_the_listing_with_the_tools_so_far(bent):
    """The server names the same cursor on every page: the listing ends when it comes
    a second time, with the tools of the pages read; it used to be asked 100 times and
    then refused with "lists tools 'note' and 'note'"."""
    servers, issued = bent
    server = servers["same-cursor"]
    assert names(server) == ["note"]
    assert server.listing_notes == ["the server named the cursor 'again' a second time: the "
                                    "listing was ended there, with 1 tool listed so far"]
    assert f"MCP server 'bent': {server.listing_notes[0]}" in issued


def test_a_relisting_of_such_a_server_ends_the_same_way(bent):
    """``relist`` (after list_changed, or forced) reads the pages the same way."""
    server = bent[0]["same-cursor"]
    with pytest.warns(MCPListingWarning, match="a second time"):
        server.relist(force=True)
    assert names(server) == ["note"] and len(server.listing_notes) == 1


def test_new_cursors_on_pages_of_tools_already_listed_end_the_listing(bent):
    """A new cursor on every page, each page the same tool: the listing ends at the
    first page that adds nothing."""
    server = bent[0]["new-cursors"]
    assert names(server) == ["note"]
    assert server.listing_notes == ["a page of the listing named only tools already "
                                    "listed: the listing was ended there, with 1 tool"]


def test_a_schema_without_type_is_an_object_schema_and_a_bad_tool_hides_no_other(bent):
    """``loose`` has ``inputSchema`` without ``type`` (the SDK refused the whole server
    for it), ``broken`` a schema that is a string. ``loose`` is listed with
    ``type: object`` assumed and runs; ``broken`` is left out; ``note`` is there; each
    fault is noted."""
    servers, issued = bent
    server = servers["no-type"]
    assert names(server) == ["loose", "note"]
    loose = {t.mcp_name: t for t in server.tools}["loose"]
    assert loose.parameters == {"type": "object", "properties": {"path": {"type": "string"}},
                                "required": ["path"]}
    assert loose.invoke({"path": "a.txt"}) == 'loose ran with {"path": "a.txt"}'
    first, second = server.listing_notes
    assert first == ("the tool 'loose' has an input schema without a type: it is read as "
                     "an object schema")
    assert second.startswith("the tool 'broken' was left out: it is not a valid MCP tool "
                             "(inputSchema")
    assert f"MCP server 'bent': {second}" in issued
    # the chat's start shows them under the server's tools
    assert mcp_summary(server).splitlines()[-2:] == [f"  note: {first}", f"  note: {second}"]


# -- pages a server would take long to play: a stand-in client ---------------------------

class Pages:
    """A stand-in for the SDK's client: ``list_tools(cursor=…)`` answers ``page(n)``
    for the n-th request (from 0)."""

    def __init__(self, page):
        self.page, self.asked = page, 0

    async def list_tools(self, cursor=None):
        self.asked += 1
        return self.page(self.asked - 1)


def tool(name: str, description: str = "") -> Tool:
    return Tool(name=name, description=description, input_schema={"type": "object"})


def test_a_listing_of_new_tools_for_ever_stops_after_max_pages():
    client = Pages(lambda n: ListToolsResult(tools=[tool(f"t{n}")], next_cursor=f"c{n}"))
    notes: list[str] = []
    specs = asyncio.run(list_all(client, notes))
    assert client.asked == MAX_PAGES == 100
    assert [s.name for s in specs] == [f"t{n}" for n in range(100)]
    assert notes == ["the listing still went on after 100 pages: it was ended there, "
                     "with 100 tools listed so far"]


def test_an_empty_page_with_a_cursor_does_not_end_the_listing():
    """Only a page that names tools, all listed already, ends it: an empty page of a
    server that filters its pages is not a sign of a loop."""
    pages = [ListToolsResult(tools=[tool("a")], next_cursor="1"),
             ListToolsResult(tools=[], next_cursor="2"),
             ListToolsResult(tools=[tool("b")])]
    notes: list[str] = []
    specs = asyncio.run(list_all(Pages(pages.__getitem__), notes))
    assert [s.name for s in specs] == ["a", "b"] and notes == []


def test_one_name_listed_twice_with_two_definitions_is_refused():
    """Which definition the server means cannot be known, and the gate decides by it."""
    pages = [ListToolsResult(tools=[tool("a", "reads")], next_cursor="1"),
             ListToolsResult(tools=[tool("a", "deletes")])]
    with pytest.raises(MCPError, match="lists the tool 'a' twice, with different definitions"):
        asyncio.run(list_all(Pages(pages.__getitem__), [], "srv"))
