"""Redirects from the model endpoint (issue 41 item 9), over real HTTP on 127.0.0.1.

A 307 or 308 keeps the method and the body, and the body is the whole conversation.
``requests`` followed one to any origin (dropping the key, keeping the body). Now only
a 307/308 to the same origin (scheme, host, port) is followed, at most
``MAX_REDIRECTS`` (3) in a row; anything else is a ``ProviderError`` naming where it
pointed, and the other origin is sent nothing.
"""

from __future__ import annotations

import pytest

from agentflow import ChatMessage, OpenAIChatClient
from agentflow.errors import ProviderError
from agentflow.openai_client import MAX_REDIRECTS
from agentflow.testing.replay import Reply, ReplayServer, chat_stream

KEY = "sk-test-redirect-0123456789"


def redirect(status: int, location: str) -> Reply:
    return Reply(status=status, headers={"Location": location}, content_type="text/plain")


def ask(server: ReplayServer) -> list:
    client = OpenAIChatClient(model="m", base_url=server.base_url, api_key=KEY,
                              max_retries=0)
    return list(client.run([ChatMessage.user("my secret plans")]))


def origin_of(server: ReplayServer) -> str:
    return server.base_url.rsplit("/v1", 1)[0]


@pytest.mark.parametrize("status", [307, 308])
def test_a_redirect_to_another_origin_is_refused_and_that_origin_gets_nothing(status):
    """Another port of the same host is another origin: the error names where the
    redirect pointed and says how to go there on purpose; nothing reached it."""
    with ReplayServer([chat_stream(text="stolen")]) as elsewhere:
        target = f"{elsewhere.base_url}/chat/completions"
        with ReplayServer([redirect(status, target)]) as server:
            with pytest.raises(ProviderError) as caught:
                ask(server)
        assert elsewhere.requests == []
    error = caught.value
    assert error.status == status
    assert f"answered HTTP {status}, a redirect to another origin" in str(error)
    assert f"it pointed to {target}" in str(error) and "base_url" in str(error)
    assert KEY not in str(error)


@pytest.mark.parametrize("status", [307, 308])
def test_a_same_origin_redirect_is_followed_with_the_body_and_the_key(status):
    """The path moved on the same server: the request is sent again there, the same
    body and the same key, and the turn is read from the answer."""
    with ReplayServer([redirect(status, "/v2/chat/completions"),
                       chat_stream(text="moved fine")]) as server:
        updates = ask(server)
    first, second = server.requests
    assert second.path == "/v2/chat/completions"
    assert second.body == first.body and second.json["messages"][0]["content"] == (
        "my secret plans")
    assert second.headers["authorization"] == f"Bearer {KEY}"
    assert updates[-1].message.content == "moved fine"


def test_more_than_three_redirects_in_a_row_are_refused():
    hops = [redirect(307, f"/v1/hop{n}") for n in range(MAX_REDIRECTS + 1)]
    with ReplayServer([*hops, chat_stream(text="never")]) as server:
        origin = origin_of(server)
        with pytest.raises(ProviderError, match="more than 3 redirects in a row") as caught:
            ask(server)
    assert len(server.requests) == MAX_REDIRECTS + 1
    assert f"it pointed to {origin}/v1/hop3" in str(caught.value)


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_redirect_that_drops_the_body_is_refused_even_on_the_same_origin(status):
    """301/302/303 turn a POST into a GET without its body: no endpoint answers that,
    so it is named, not followed."""
    with ReplayServer([redirect(status, "/v2/chat/completions")]) as server:
        origin = origin_of(server)
        with pytest.raises(ProviderError, match="without its body") as caught:
            ask(server)
    assert len(server.requests) == 1
    assert f"it pointed to {origin}/v2/chat/completions" in str(caught.value)


def test_a_location_holding_a_credential_is_shown_masked():
    with ReplayServer([redirect(307, "http://example.invalid/v1?api_key=leaked-token")]) as server:
        with pytest.raises(ProviderError) as caught:
            ask(server)
    assert "leaked-token" not in str(caught.value)
    assert "http://example.invalid/v1?api_key=***" in str(caught.value)
