"""Secrets never reach output (SPEC R26, issue 26 item 3): the API key echoed by a server
in any field of an error, whole or cut short, and credentials written into URLs.

The server side is a real loopback HTTP server (``ReplayServer``) answering with the
error bodies such servers send; what is checked is every text of the error the caller
gets: its message, its ``code`` and its ``str()``."""

from __future__ import annotations

import json

import pytest

from agentflow import ChatMessage, OpenAIChatClient, ProviderError
from agentflow.redact import MASK, RUN, mask_url, scrub
from agentflow.testing.replay import Reply, ReplayServer

KEY = "sk-proj-Zq8vR2mN5xT1bW7yK4pL0sD3fG6hJ9cE"


def error_texts(reply: Reply, key: str = KEY) -> list[str]:
    """Every text of the ``ProviderError`` a client with ``key`` raises for ``reply``."""
    with ReplayServer([reply]) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key=key,
                                  max_retries=0)
        with pytest.raises(ProviderError) as caught:
            list(client.run([ChatMessage.user("hi")]))
    error = caught.value
    return [error.message, str(error.code), str(error), repr(error.args)]


def leaked(texts: list[str], key: str = KEY) -> list[str]:
    """Every run of ``RUN`` key characters that survives in ``texts``."""
    return [key[i:i + RUN] for i in range(len(key) - RUN + 1)
            if any(key[i:i + RUN] in t for t in texts)]


@pytest.mark.parametrize("field", ["code", "type", "message", "param"])
def test_a_key_echoed_in_any_error_field_is_masked(field):
    """Issue 26: a server that echoes the key in ``error.code`` or ``error.type`` put
    the whole key in the error and in ``--json``."""
    error = {"message": "bad request", field: f"invalid_key:{KEY}"}
    texts = error_texts(Reply(json.dumps({"error": error}), status=400,
                              content_type="application/json"))
    assert leaked(texts) == []
    if field != "param":  # a field agentflow shows: shown masked, not dropped
        assert any(MASK in t for t in texts)


@pytest.mark.parametrize("cut", [1, 2, 5, 17])
def test_a_body_cut_short_leaves_no_part_of_the_key(cut):
    """A text body is cut at 200 characters: cut before scrubbing, the key lost only
    its last characters and survived. The body holds the key cut at ``cut``
    characters from its end, and again across the 200-character mark."""
    text = f"upstream said: Authorization: Bearer {KEY[:-cut]} " + "x" * 140 + KEY
    assert len(text) > 200
    texts = error_texts(Reply(text, status=400, content_type="text/plain"))
    assert leaked(texts) == []


def test_a_key_in_a_malformed_stream_event_is_masked():
    """An SSE event that is not JSON is quoted (cut to 200 characters) in the error."""
    body = f"data: {{not json {KEY}\n\n"
    texts = error_texts(Reply(body))
    assert leaked(texts) == []


def test_a_short_local_key_is_not_treated_as_a_secret():
    """A key of fewer than 8 characters (``"x"``, ``"none"`` for local servers) would
    garble every message holding those letters: left as it is."""
    assert scrub("none of the models", "none") == "none of the models"


def test_scrub_masks_each_run_and_keeps_the_rest():
    assert scrub(f"a {KEY} b {KEY[3:20]} c {KEY[:RUN - 1]} d", KEY) == \
        f"a {MASK} b {MASK} c {KEY[:RUN - 1]} d"


# -- credentials in URLs ----------------------------------------------------------------------

@pytest.mark.parametrize("url, shown", [
    ("postgresql://app:s3cr%et@db.example:5432/agentflow",
     "postgresql://app:***@db.example:5432/agentflow"),
    ("postgresql://app:p@ss@word@db/x", "postgresql://app:***@db/x"),
    ("postgresql://app@db/x", "postgresql://app@db/x"),
    ("http://127.0.0.1:9000/mcp?api_key=TOKEN123&x=1", "http://127.0.0.1:9000/mcp?api_key=***&x=1"),
    ("https://h/mcp?X-Api-Key=abc#frag", "https://h/mcp?X-Api-Key=***#frag"),
    ("https://h/v1?access_token=t&sig=s&model=m", "https://h/v1?access_token=***&sig=***&model=m"),
    ("https://user:pw@h:notaport/v1", "https://user:***@h:notaport/v1"),
    ("sqlite:///sessions.db", "sqlite:///sessions.db"),
    ("not a url", "not a url"),
])
def test_mask_url(url, shown):
    assert mask_url(url) == shown


def test_an_endpoint_with_credentials_is_masked_in_errors_and_repr():
    """A base URL holding a password or a token is never printed with it: in the
    connection error and in ``repr`` of the client."""
    client = OpenAIChatClient(model="m", base_url="http://me:hunter22@127.0.0.1:9/v1?key=K9",
                              api_key=KEY, max_retries=0, connect_timeout=2)
    with pytest.raises(ProviderError) as caught:
        list(client.run([ChatMessage.user("hi")]))
    for text in (str(caught.value), repr(client)):
        assert "hunter22" not in text and "K9" not in text
    assert "me:***@127.0.0.1:9" in str(caught.value)
