"""An approval service with many workers and one session store (SPEC R16, R22, R24).

Run two (or twenty) copies of this small HTTP service, on one machine with SQLite or
on many with PostgreSQL, behind any load balancer. A conversation is a session in the
store, so any worker can serve any request: the one that pauses a run for approval,
the one that records a human's answer, and the one that resumes the run need not be
the same process.

    export OPENAI_API_KEY=...                       # or --base-url for Ollama & co.
    python examples/approval_service.py --store sqlite:///sessions.db --port 8001 &
    python examples/approval_service.py --store sqlite:///sessions.db --port 8002 &

    # a customer writes; worker 1 runs the agent until the refund waits for approval
    curl -d '{"message": "Refund order 42, it arrived broken"}' localhost:8001/sessions/t-42
    # the approval inbox, from any worker: every call waiting, oldest first
    curl localhost:8002/pending
    # a human answers (bound to the digest the inbox showed); the answer is recorded
    curl -d '{"call_id": "call_1", "digest": "…", "approved": true, "approver": "dana"}' \\
         localhost:8002/sessions/t-42/answer
    # whichever worker looks first resumes the run; the session tells how it ended
    curl localhost:8001/sessions/t-42

People can answer from a browser too: ``agentflow inbox --store sqlite:///sessions.db``
records answers the same way, and these workers resume them.

Endpoints (JSON in, JSON out):

    POST /sessions/ID         {"message": str}                     run a turn
    POST /sessions/ID/answer  {"call_id", "digest", "approved",    record an answer
                               "reason"?, "approver"?}              (202)
    GET  /sessions/ID                                              how the session stands
    GET  /pending                                                  the approval inbox

A session answers ``{"status": "paused" | "running" | "done", "reply": the model's last
words, "pending": [call ids]}`` ("running": a worker is resuming it).

Answers are durable (``store.answer``): each is bound to the call's digest, and a
second answer to the same call (a double click, a retry, two people) is refused with
409 "already answered by …"; while the store's database is away (a restart) requests
answer 503 with the ``StoreError``, and the store reconnects by itself. Each worker
runs a resume loop beside its HTTP server:
``for session_id in store.answered()`` opens the session (its lease lets one worker
in; the others skip it) and runs the agent with the recorded answers, so the refund
runs once however many workers see the answer. The refund tool's side effect is a
line appended to ``--ledger``, so you can count how often it really ran.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from agentflow import (AgentRunOptions, ApprovalError, ApprovalRequiredTool, ChatClientAgent,
                       MessageRole, OpenAIChatClient, ToolApprovalResponse, tool)
from agentflow.errors import SessionConflictError, StoreError
from agentflow.stores import open_store
from agentflow.stores.answers import ready_responses

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


def run(agent, session, messages, responses=()) -> dict:
    """Run the agent once; what the session now says."""
    options = AgentRunOptions().with_tool_approval_responses(responses)
    for _ in agent.run(messages, session, options):
        pass  # a streaming service would forward the TextDelta updates here
    return status(session)


def status(session) -> dict:
    """``paused`` (calls wait), ``done`` (the model's last word is in) or ``running``
    (a worker is resuming it: its steps are saved as they finish)."""
    last = session.messages[-1] if session.messages else None
    finished = last is not None and last.role is MessageRole.ASSISTANT and not last.tool_calls
    words = next((m.content for m in reversed(session.messages)
                  if m.role is MessageRole.ASSISTANT and m.content), "")
    return {"status": "paused" if session.approvals.pending else
            "done" if finished else "running",
            "reply": words, "pending": [r.call_id for r in session.approvals.pending]}


def resume_loop(args, stop: threading.Event, wake: threading.Event,
                poll: float = 0.2) -> None:
    """Resume every answered session, as long as the service runs: one worker gets
    each session's lease, the others skip it (SPEC R16, R22). An answer posted to this
    process sets ``wake`` and is resumed at once; one posted to another process is seen
    within ``poll`` seconds."""
    agent = make_agent(args)  # this thread's own agent and store connection
    with open_store(args.store) as store:
        while not stop.is_set():
            wake.clear()  # before the scan: an answer stored during it wakes the next one
            try:
                answered = list(store.answered())
            except StoreError:  # the database is away; it reconnects by itself
                answered = []
            for session_id in answered:
                try:
                    with store.open(session_id) as session:
                        responses = ready_responses(session)
                        if responses:  # [] when another worker resumed it first
                            run(agent, session, [], responses)
                except (SessionConflictError, StoreError):  # another has it, or no database
                    continue
                except ApprovalError as exc:  # e.g. the history changed since the answer
                    print(f"cannot resume {session_id}: {exc}", flush=True)
            wake.wait(poll)


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
    for name in ("reason", "digest", "approver", "request_id"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise ValueError(f"{name} must be a string")
    unknown = sorted(set(body) - {"call_id", "approved", "reason", "digest", "approver",
                                  "request_id"})
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    return body


class Service(BaseHTTPRequestHandler):
    """One request at a time per process, each with its own store connection; the
    resume loop runs beside it on its own thread."""

    agent: ChatClientAgent
    store_url = ""
    wake = threading.Event()  # set by an answer: the resume loop looks at once

    def do_GET(self):
        match = re.fullmatch(r"/sessions/([\w.-]+)", self.path)
        if self.path != "/pending" and match is None:
            return self.reply(404, {"error": "no such page"})
        try:
            with open_store(self.store_url) as store:
                if self.path == "/pending":
                    return self.reply(200, [
                        {"session": e.session_id, "call_id": e.call_id, "tool": e.tool,
                         "arguments": e.arguments, "digest": e.digest,
                         "answered_by": e.answer.approver if e.answer else None,
                         "age_seconds": round(e.age, 1),
                         **({"error": e.error} if e.error else {})} for e in store.pending()])
                session = store.load(match.group(1))
                self.reply(200, status(session))
        except KeyError as exc:
            self.reply(404, {"error": str(exc)})
        except StoreError as exc:  # the database is away: say so, it reconnects by itself
            self.reply(503, {"error": str(exc)})

    def do_POST(self):
        match = re.fullmatch(r"/sessions/([\w.-]+)(/answer)?", self.path)
        if match is None:
            return self.reply(404, {"error": "no such page"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            session_id = match.group(1)
            with open_store(self.store_url) as store:
                if match.group(2):
                    body = read_answer(body)
                    answer = ToolApprovalResponse(
                        body["call_id"], body["approved"], body.get("reason"),
                        body.get("digest"), body.get("approver"),
                        request_id=body.get("request_id"))
                    store.answer(session_id, [answer])
                    self.wake.set()
                    return self.reply(202, {"status": "answered"})
                with store.open(session_id) as session:
                    self.reply(200, run(self.agent, session, [body["message"]]))
        except ApprovalError as exc:  # "already answered by …", a digest not shown …
            self.reply(409 if "already answered" in str(exc) else 400, {"error": str(exc)})
        except SessionConflictError as exc:  # another worker has the session open
            self.reply(409, {"error": str(exc)})
        except StoreError as exc:  # the database is away; nothing ran twice (R16)
            self.reply(503, {"error": str(exc)})
        except (KeyError, TypeError, ValueError) as exc:
            self.reply(400, {"error": str(exc)})

    def reply(self, code: int, data) -> None:
        payload = json.dumps(data).encode()
        self.send_response(code)
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
    open_store(args.store).close()  # create the table before serving
    Service.agent, Service.store_url = make_agent(args), args.store
    stop = threading.Event()
    resumer = threading.Thread(target=resume_loop, args=(args, stop, Service.wake))
    resumer.start()
    server = HTTPServer(("127.0.0.1", args.port), Service)
    print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        Service.wake.set()
        server.server_close()
        resumer.join()


if __name__ == "__main__":
    main()
