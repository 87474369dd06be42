"""Connect and read timeouts, in seconds (issue 4): each names its limit, and a run that
times out leaves the session unchanged (SPEC R10)."""

import socket
import time

import pytest

from agentflow import AgentSession, ChatClientAgent, ChatMessage, OpenAIChatClient, TextDelta
from agentflow.errors import ProviderTimeoutError
from agentflow.testing.replay import Reply, ReplayServer


def stalled_body():
    """One text event, then silence longer than the client's read_timeout, then the rest."""
    yield b'data: {"choices":[{"index":0,"delta":{"content":"Thinking"}}]}\n\n'
    time.sleep(1.5)
    yield b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def test_a_stalled_stream_names_the_limit_and_leaves_the_session_unchanged():
    with ReplayServer([Reply(chunks=stalled_body())]) as server:
        agent = ChatClientAgent(OpenAIChatClient(base_url=server.base_url, api_key="k",
                                                 read_timeout=0.1))
        session = AgentSession(messages=[ChatMessage.user("earlier"), ChatMessage.assistant("ok")])
        before = session.to_dict()
        seen = []
        with pytest.raises(ProviderTimeoutError, match=r"read_timeout=0\.1 s") as info:
            for update in agent.run("next", session):
                seen.append(update)
    assert seen == [TextDelta("Thinking")]
    assert session.to_dict() == before
    assert len(server.requests) == 1  # part of the body was yielded: no retry
    assert info.value.status is None


def test_a_connect_timeout_names_the_limit():
    """A listening socket whose accept queue is full: the kernel drops further SYNs, so
    connecting hangs until connect_timeout (loopback only)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(8):  # fill the backlog; the later ones hang, so don't wait long
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        client = OpenAIChatClient(base_url=f"http://127.0.0.1:{port}/v1", api_key="k",
                                  connect_timeout=0.1, max_retries=0)
        with pytest.raises(ProviderTimeoutError, match=r"connect_timeout=0\.1 s"):
            list(client.run([ChatMessage.user("hi")]))
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
