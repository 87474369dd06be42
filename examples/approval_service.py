"""An approval service with many workers and one session store (SPEC R16, R22).

Run two (or twenty) copies of this small HTTP service, on one machine with SQLite or
on many with PostgreSQL, behind any load balancer. A conversation is a session in the
store, so any worker can serve any request: the one that pauses a run for approval
and the one that resumes it when a human answers need not be the same process.

    export OPENAI_API_KEY=...                       # or --base-url for Ollama & co.
    python examples/approval_service.py --store sqlite:///sessions.db --port 8001 &
    python examples/approval_service.py --store sqlite:///sessions.db --port 8002 &

    # a customer writes; worker 1 runs the agent until the refund waits for approval
    curl -d '{"message": "Refund order 42, it arrived broken"}' localhost:8001/sessions/t-42
    # the approval inbox, from any worker: every call waiting, oldest first
    curl localhost:8002/pending
    # a human approves; worker 2 resumes the run from the store
    curl -d '{"call_id": "call_1", "approved": true, "approver": "dana"}' \\
         localhost:8002/sessions/t-42/answer

Endpoints (JSON in, JSON out):

    POST /sessions/ID         {"message": str}                     run a turn
    POST /sessions/ID/answer  {"call_id", "approved", "reason"?,   answer one call;
                               "approver"?, "digest"?}             the run goes on
                                                                   when none is left
    GET  /pending                                                  the approval inbox

A run answers ``{"status": "done" | "paused", "reply": str, "pending": [...]}``. Two
workers resuming the same pause (a double click, a retry) cannot both run the call:
the store's compare-and-swap refuses the second one, which answers 409 Conflict;
an answer to a call that was already answered is 400; while the store's database is
away (a restart) requests answer 503 with the ``StoreError``, and the store reconnects
by itself. The refund tool's side effect is
a line appended to ``--ledger``, so you can count how often it really ran.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from http.server import BaseHTTPRequestHandler, HTTPServer

from agentflow import (AgentRunOptions, ApprovalError, ApprovalRequiredTool, ChatClientAgent,
                       Finish, FinishReason, OpenAIChatClient, TextDelta,
                       ToolApprovalResponse, tool)
from agentflow.errors import SessionConflictError, StoreError
from agentflow.stores import open_store

ANSWERS = "answers"  # session.state: the answers given so far to the paused calls


def make_agent(args) -> ChatClientAgent:
    @tool
    def refund(order_id: str, amount: float) -> str:
        """Refund an order to the customer's card.

        Args:
            order_id: the order.
            amount: in euros.
        """
        with open(args.ledger, "a", encoding="utf-8") as ledger:
            ledger.write(f"refund {order_id} {amount:.2f}\n")
        return f"refunded {amount:.2f} EUR for order {order_id}"

    client = OpenAIChatClient(args.model, base_url=args.base_url,
                              api_key=os.environ.get("OPENAI_API_KEY", ""))
    return ChatClientAgent(client, instructions="You are a support agent. Refunds need "
                           "a human's approval.", tools=[ApprovalRequiredTool(refund)])


def read_answer(body) -> dict:
    """The answer a client sent, its fields checked (SPEC R24): ``approved`` is JSON
    ``true`` or ``false``, never a "truthy" value (``"false"`` is a non-empty string),
    and the other fields are strings. Anything else is a ``ValueError`` (HTTP 400)
    before it is stored."""
    if not isinstance(body, dict):
        raise ValueError("an answer is a JSON object: {\"call_id\": ..., \"approved\": true}")
    if not isinstance(body.get("call_id"), str):
        raise ValueError("call_id must be a string")
    if not isinstance(body.get("approved"), bool):
        raise ValueError(f"approved must be true or false, got {json.dumps(body.get('approved'))}")
    for name in ("reason", "digest", "approver"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise ValueError(f"{name} must be a string")
    unknown = sorted(set(body) - {"call_id", "approved", "reason", "digest", "approver"})
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    return body


class Service(BaseHTTPRequestHandler):
    """One request at a time per process; run more processes for more throughput."""

    agent: ChatClientAgent
    store = None

    def do_GET(self):
        if self.path != "/pending":
            return self.reply(404, {"error": "no such page"})
        try:
            entries = self.store.pending()
        except StoreError as exc:  # the database is away: say so, it reconnects by itself
            return self.reply(503, {"error": str(exc)})
        self.reply(200, [{"session": e.session_id, "call_id": e.call_id, "tool": e.tool,
                          "arguments": e.arguments, "digest": e.digest,
                          "age_seconds": round(e.age, 1),
                          **({"error": e.error} if e.error else {})} for e in entries])

    def do_POST(self):
        match = re.fullmatch(r"/sessions/([\w.-]+)(/answer)?", self.path)
        if match is None:
            return self.reply(404, {"error": "no such page"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            session_id, answering = match.group(1), bool(match.group(2))
            with self.store.open(session_id) as session:
                if answering:
                    result = self.answer(session, body)
                else:
                    result = self.run(session, [body["message"]])
            self.reply(200, result)
        except SessionConflictError as exc:  # another worker got there first
            self.reply(409, {"error": str(exc)})
        except StoreError as exc:  # the database is away; nothing ran twice (R16)
            self.reply(503, {"error": str(exc)})
        except (ApprovalError, KeyError, TypeError, ValueError) as exc:
            self.reply(400, {"error": str(exc)})

    def answer(self, session, body) -> dict:
        """Record one human's answer; resume once every paused call has one."""
        body = read_answer(body)
        waiting = {r.call_id for r in session.approvals.pending}
        if body["call_id"] not in waiting:
            raise ApprovalError(f"call {body['call_id']!r} does not wait for an answer "
                                f"(waiting: {', '.join(sorted(waiting)) or 'none'})")
        answers = session.state.setdefault(ANSWERS, {})
        answers[body["call_id"]] = body
        if waiting - set(answers):
            return {"status": "paused", "reply": "", "pending": sorted(waiting - set(answers))}
        responses = [ToolApprovalResponse(a["call_id"], a["approved"], a.get("reason"),
                                          a.get("digest"), a.get("approver"))
                     for a in answers.values()]
        del session.state[ANSWERS]
        return self.run(session, [], responses)

    def run(self, session, messages, responses=()) -> dict:
        options = AgentRunOptions().with_tool_approval_responses(responses)
        text, finish = [], None
        for update in self.agent.run(messages, session, options):
            if isinstance(update, TextDelta):
                text.append(update.text)
            elif isinstance(update, Finish):
                finish = update
        paused = finish.finish_reason is FinishReason.AWAITING_APPROVAL
        return {"status": "paused" if paused else "done", "reply": "".join(text),
                "pending": [r.call_id for r in session.approvals.pending]}

    def reply(self, status: int, data) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:  # quiet
        pass


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="sqlite:///sessions.db or postgresql://…")
    parser.add_argument("--port", type=int, default=8001, help="0: any free port")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--ledger", default="refunds.log", help="where refunds are written")
    args = parser.parse_args(argv)
    Service.agent, Service.store = make_agent(args), open_store(args.store)
    server = HTTPServer(("127.0.0.1", args.port), Service)
    print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        Service.store.close()


if __name__ == "__main__":
    main()
