"""An MCP server that bends its tool list, for tests/test_mcp_listing.py: JSON-RPC on
stdin/stdout written by hand, as servers made without an SDK are (the SDK's own server
classes refuse to send these lists, so they cannot play them).

    python tests/mcp_bent_server.py MODE

MODE ``same-cursor``: every page lists ``note`` and names the cursor ``again`` (a
``nextCursor`` that never advances). ``new-cursors``: every page lists ``note`` and
names a new cursor, for ever. ``no-type``: one page, whose ``loose`` tool has an input
schema without ``type``, ``broken`` one whose schema is not an object, and ``note`` a
well-formed one. Every ``tools/list`` request is counted on stderr (``listed N``);
each call answers ``NAME ran with ARGUMENTS`` (canonical JSON).
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]
NOTE = {"name": "note", "description": "Write a note.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                        "required": ["text"]}}


def tools_page(cursor):
    if MODE == "same-cursor":
        return {"tools": [NOTE], "nextCursor": "again"}
    if MODE == "new-cursors":
        return {"tools": [NOTE], "nextCursor": str(int(cursor or 0) + 1)}
    loose = {"name": "loose", "description": "A schema without type.",
             "inputSchema": {"properties": {"path": {"type": "string"}}, "required": ["path"]}}
    broken = {"name": "broken", "description": "No schema.", "inputSchema": "none"}
    return {"tools": [loose, broken, NOTE]}


def answer(message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "bent", "version": "1"}}
    if method == "tools/list":
        answer.listed += 1
        print(f"listed {answer.listed}", file=sys.stderr, flush=True)
        return tools_page(params.get("cursor"))
    if method == "tools/call":
        text = f"{params['name']} ran with {json.dumps(params.get('arguments'), sort_keys=True)}"
        return {"content": [{"type": "text", "text": text}]}
    if method == "ping":
        return {}
    return None


answer.listed = 0

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue  # a notification
    result = answer(message)
    reply = ({"jsonrpc": "2.0", "id": message["id"], "result": result} if result is not None
             else {"jsonrpc": "2.0", "id": message["id"],
                   "error": {"code": -32601, "message": f"no method {message.get('method')}"}})
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
