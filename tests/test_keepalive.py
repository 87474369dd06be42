"""One connection per conversation (issue 18), over a keep-alive loopback server.

Hosted providers keep the connection open and send each stream with
``Transfer-Encoding: chunked``; ``data: [DONE]`` comes a few bytes before the body's
end. The client finishes reading a complete turn's body before its next request, so
every model call of a conversation reuses one connection (``ReplayServer.connections``
counts them). A body that goes on beyond ``_DRAIN_BYTES`` / ``_DRAIN_SECONDS``, a turn
that failed or was abandoned, and a connection the server closed are not reused, and
never change what the next turn reads. Timing is measured in bench/keepalive.py.
"""

from __future__ import annotations

import threading

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalRequiredTool, ChatClientAgent,
                       ChatMessage, Finish, FinishReason, OpenAIChatClient, TextDelta,
                       ToolApprovalRequest, ToolResult, tool)
from agentflow import openai_client
from agentflow.errors import ProviderError
from agentflow.testing.replay import Reply, ReplayServer, chat_stream

FRAMINGS = ["chunked", "length"]


@tool
def lookup(query: str) -> str:
    """Look a query up."""
    return f"found {query}"


def call(i: int) -> bytes:
    return chat_stream(tool_calls=[(f"call_{i}", "lookup", f'{{"query": "q{i}"}}')])


def client_for(server: ReplayServer) -> OpenAIChatClient:
    return OpenAIChatClient(model="m", base_url=server.base_url, api_key="sk-test",
                            max_retries=0)


def agent_for(server: ReplayServer, **kwargs) -> ChatClientAgent:
    return ChatClientAgent(client_for(server), **kwargs)


def run(agent, *args):
    updates = list(agent.run(*args))
    assert isinstance(updates[-1], Finish)
    assert not any(isinstance(u, Finish) for u in updates[:-1])
    return updates


def text(updates) -> str:
    return "".join(u.text for u in updates if isinstance(u, TextDelta))


def results(updates) -> list[str]:
    return [u.result for u in updates if isinstance(u, ToolResult)]


# -- one connection ----------------------------------------------------------------------

@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_multi_round_conversation_uses_one_connection(framing):
    """Three tool rounds, then a second run of the same conversation: five model calls
    on the connection the first one opened."""
    replies = [call(0), call(1), call(2), chat_stream(text="all found"),
               chat_stream(text="again")]
    with ReplayServer(replies, keep_alive=framing) as server:
        agent = agent_for(server, tools=[lookup])
        session = AgentSession()
        first = run(agent, "find three", session)
        second = run(agent, "once more", session)
        assert len(server.requests) == 5
        assert server.connections == 1
    assert results(first) == ["found q0", "found q1", "found q2"]
    assert text(first) == "all found" and text(second) == "again"
    assert first[-1].finish_reason is second[-1].finish_reason is FinishReason.STOP
    sent = server.requests[4].json["messages"]
    assert [m["role"] for m in sent] == (["user"] + ["assistant", "tool"] * 3
                                         + ["assistant", "user"])


def test_the_close_framing_opens_one_connection_per_call():
    """The default replay server closes every connection, as before: the count says so."""
    with ReplayServer([call(0), chat_stream(text="ok")]) as server:
        run(agent_for(server, tools=[lookup]), "find")
        assert server.connections == 2


@pytest.mark.parametrize("framing", FRAMINGS)
def test_approval_pauses_and_resumes_in_one_process_share_one_connection(framing):
    """Two pauses for approval (SPEC R3/R4), each resumed by a new run of the same agent:
    four model calls, one connection, and the approved calls ran once each."""
    ran = []

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    replies = [chat_stream(tool_calls=[("d1", "delete", '{"path": "a"}')]),
               chat_stream(tool_calls=[("d2", "delete", '{"path": "b"}')]),
               chat_stream(text="both gone")]
    with ReplayServer(replies, keep_alive=framing) as server:
        agent = agent_for(server, tools=[ApprovalRequiredTool(delete)])
        session = AgentSession()
        paused = run(agent, "delete a and b", session)
        for answer in ("d1", "d2"):
            assert paused[-1].finish_reason is FinishReason.AWAITING_APPROVAL
            (request,) = [u for u in paused if isinstance(u, ToolApprovalRequest)]
            assert request.call_id == answer
            options = AgentRunOptions().with_tool_approval_responses([request.approve()])
            paused = run(agent, [], session, options)
        assert server.connections == 1
        assert len(server.requests) == 3
    assert paused[-1].finish_reason is FinishReason.STOP and text(paused) == "both gone"
    assert ran == ["a", "b"]


def test_a_finish_without_done_still_reuses_the_connection():
    """SPEC §6: a stream may end without [DONE] once its finish reason arrived; its
    chunked body was then read to the end, so its connection is reusable as is."""
    with ReplayServer([chat_stream(text="one", done=False), chat_stream(text="two")],
                      keep_alive="chunked") as server:
        agent = agent_for(server)
        assert text(run(agent, "a")) == "one"
        assert text(run(agent, "b")) == "two"
        assert server.connections == 1


def test_a_short_tail_after_done_is_read_and_the_connection_reused():
    """Bytes after [DONE] within the bound (a comment, a stray usage event) are read
    and dropped; they never reach the next turn."""
    tail = (b": trailing comment\n\n" + b'data: {"choices": [], "usage": {"prompt_tokens": 1, '
            b'"completion_tokens": 1, "total_tokens": 2}}\n\n')
    replies = [Reply(chunks=[chat_stream(text="first"), tail]), chat_stream(text="second")]
    with ReplayServer(replies, keep_alive="chunked") as server:
        agent = agent_for(server)
        assert text(run(agent, "a")) == "first"
        second = run(agent, "b")
        assert server.connections == 1
    assert text(second) == "second"
    assert second[-1].usage.prompt_tokens == 10  # chat_stream's own, not the tail's


# -- the final update is not delayed -------------------------------------------------------

def test_the_last_update_does_not_wait_for_the_end_of_the_body(monkeypatch):
    """The server holds its body open after [DONE] until the run has ended: the run
    ends (its Finish in the caller's hands) without those bytes, and the next request
    still reuses the connection, because the rest is read only then. A client that
    waited for the body's end would hold the run for the server's 10 s; one that
    gave up on the body would open a second connection."""
    run_ended = threading.Event()
    ended_first = []

    def hold() -> bytes:
        ended_first.append(run_ended.wait(10))
        return b""  # then the terminator

    # the terminator comes when the test says; give the next request time to see it
    monkeypatch.setattr(openai_client, "_DRAIN_SECONDS", 10.0)
    replies = [Reply(chunks=[chat_stream(text="held"), hold]), chat_stream(text="next")]
    with ReplayServer(replies, keep_alive="chunked") as server:
        agent = agent_for(server)
        updates = run(agent, "a")
        run_ended.set()
        assert text(run(agent, "b")) == "next"
        assert server.connections == 1
    assert text(updates) == "held" and updates[-1].finish_reason is FinishReason.STOP
    assert ended_first == [True]


# -- not reused ------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["idle timeout", "Connection: close", "reset"])
def test_a_connection_the_server_closed_is_replaced(how):
    """Closed between two turns (while the client still holds the first one's unread
    terminator), announced by ``Connection: close``, or reset (RST) after the body."""
    first = Reply(chat_stream(text="one"), reset=how == "reset",
                  headers={"Connection": "close"} if how == "Connection: close" else {})
    replies = [first, chat_stream(text="two"), chat_stream(text="three")]
    with ReplayServer(replies, keep_alive="chunked") as server:
        agent = agent_for(server)
        assert text(run(agent, "a")) == "one"
        if how == "idle timeout":
            server.close_connections()
        assert text(run(agent, "b")) == "two"
        assert text(run(agent, "c")) == "three"
        assert server.connections == 2  # one fresh connection, then kept again


def test_a_kept_connection_closed_as_the_next_request_arrives_is_replaced_at_once():
    """The idle-timeout race (RFC 9112 §9.3.1): the server closes the kept connection
    just as the next request reaches it, with no answer. The request goes out once more
    on a new connection at once, even with ``max_retries=0``: nothing was answered."""
    replies = [chat_stream(text="one"), Reply(drop=True), chat_stream(text="two")]
    with ReplayServer(replies, keep_alive="chunked") as server:
        agent = agent_for(server)
        assert text(run(agent, "a")) == "one"
        assert text(run(agent, "b")) == "two"
        assert len(server.requests) == 3 and server.connections == 2


def test_a_fresh_connection_that_fails_is_not_sent_again_outside_max_retries():
    """The extra attempt is only for a connection taken from the pool: a first request
    that the server drops fails with max_retries=0."""
    with ReplayServer([Reply(drop=True), chat_stream(text="unused")],
                      keep_alive="chunked") as server:
        with pytest.raises(ProviderError):
            run(agent_for(server), "a")
        assert len(server.requests) == 1


def test_a_body_going_on_beyond_the_bound_after_done_is_closed_not_read():
    """A server that keeps sending after [DONE] (here 100 KiB of comments, far beyond
    ``_DRAIN_BYTES``): the turn is complete at [DONE], the rest is not read to its end,
    the connection is closed and the next request opens another."""
    assert openai_client._DRAIN_BYTES < 100 * 1024
    flood = [b": still here\n\n" * 73] * 100  # about 100 KiB in 100 chunks
    replies = [Reply(chunks=[chat_stream(text="complete"), *flood]), chat_stream(text="next")]
    with ReplayServer(replies, keep_alive="chunked") as server:
        agent = agent_for(server)
        first = run(agent, "a")
        second = run(agent, "b")
        assert server.connections == 2
    assert text(first) == "complete" and first[-1].finish_reason is FinishReason.STOP
    assert text(second) == "next"


def test_a_body_whose_end_takes_longer_than_the_bound_is_closed():
    """The terminator does not come within ``_DRAIN_SECONDS``: the next request does not
    wait for it any longer, and goes out on a new connection."""
    never = threading.Event()
    replies = [Reply(chunks=[chat_stream(text="complete"), lambda: never.wait(10) and b""]),
               chat_stream(text="next")]
    with ReplayServer(replies, keep_alive="chunked") as server:
        agent = agent_for(server)
        assert text(run(agent, "a")) == "complete"
        assert text(run(agent, "b")) == "next"
        assert server.connections == 2
        never.set()


def test_an_abandoned_turn_closes_its_connection():
    """The caller stops reading mid-turn: the rest of that body (here 2,000 events, one
    chunk each, more than the client has read) must never reach the next request, so
    the connection is closed."""
    events = [event + b"\n\n" for event in chat_stream(text="word " * 2000).split(b"\n\n")
              if event]
    replies = [Reply(chunks=events), chat_stream(text="fresh")]
    with ReplayServer(replies, keep_alive="chunked") as server:
        agent = agent_for(server)
        updates = agent.run("a")
        assert isinstance(next(updates), TextDelta)
        updates.close()
        assert text(run(agent, "b")) == "fresh"
        assert server.connections == 2


def test_a_turn_that_failed_mid_stream_closes_its_connection():
    body = (b'data: {"choices": [{"index": 0, "delta": {"content": "partial"}}]}\n\n'
            b'data: {"error": {"message": "overloaded", "code": "busy"}}\n\n'
            b"data: [DONE]\n\n")
    replies = [Reply(chunks=[body, b": more\n\n"]), chat_stream(text="fresh")]
    with ReplayServer(replies, keep_alive="chunked") as server:
        agent = agent_for(server)
        with pytest.raises(ProviderError, match="overloaded"):
            list(agent.run("a"))
        assert text(run(agent, "b")) == "fresh"
        assert server.connections == 2


def test_interleaved_turns_on_one_client_each_read_their_own_body():
    """Two turns of one client read in turns (a caller may hold two generators): each
    has its own connection while both are open, and each gets its own reply."""
    with ReplayServer([chat_stream(text="first reply"), chat_stream(text="second reply"),
                       chat_stream(text="third")], keep_alive="chunked") as server:
        client = client_for(server)
        one = client.run([ChatMessage.user("a")])
        head = next(one)
        two = list(client.run([ChatMessage.user("b")]))
        rest = list(one)
        three = list(client.run([ChatMessage.user("c")]))
        assert server.connections == 2
    assert text([head, *rest]) == "first reply"
    assert text(two) == "second reply" and text(three) == "third"


def test_a_stall_after_the_finish_reason_ends_the_turn_without_waiting_for_read_timeout():
    """SPEC §6: a turn whose finish_reason arrived is complete, whatever the connection
    does next. Here the server stalls before usage and [DONE] and holds them until the
    test lets go (at most 8 s); the client's read_timeout is 60 s. The run must end on
    finish_wait of silence (10 s by default; 0.1 s here, to keep the suite quick), so
    the test lets go before the server's own limit, and the turn is whole."""
    body = chat_stream(text="done early")
    head, _, _ = body.partition(b"data: [DONE]")
    released, answered = threading.Event(), threading.Event()
    held_to_the_end = []

    def hold():
        held_to_the_end.append(not released.wait(8))
        answered.set()
        return b"data: [DONE]\n\n"

    with ReplayServer([Reply(chunks=[head, hold])], keep_alive="chunked") as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key="sk-test",
                                  max_retries=0, read_timeout=60, finish_wait=0.1)
        updates = list(ChatClientAgent(client).run("a"))
        released.set()
        assert answered.wait(10)  # the server's thread has noted how its hold ended
    assert text(updates) == "done early"
    assert updates[-1].finish_reason is FinishReason.STOP
    assert held_to_the_end == [False]  # the run ended while the server still held on
