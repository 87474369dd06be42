"""Provider errors typed by status, with the openai SDK's names (issue 24 item 12):
``RateLimitError``, ``AuthenticationError`` … carrying ``status_code``, ``retry_after``
and the number of attempts; and a client without key or base URL fails when it is
made. Over real HTTP on 127.0.0.1 (the replay server); the client's sleep is recorded."""

from __future__ import annotations

import pytest

from agentflow import OpenAIChatClient
from agentflow.errors import (AuthenticationError, BadRequestError, ConflictError,
                              InternalServerError, NotFoundError, PermissionDeniedError,
                              ProviderError, RateLimitError, UnprocessableEntityError,
                              provider_error)

from test_retries import OK, error, run


@pytest.mark.parametrize("status, kind", [
    (400, BadRequestError), (401, AuthenticationError), (403, PermissionDeniedError),
    (404, NotFoundError), (418, BadRequestError), (422, UnprocessableEntityError)])
def test_a_client_error_is_its_status_class_after_one_attempt(status, kind):
    _, failure, requests, _ = run([error(status), OK])
    assert type(failure) is kind and issubclass(kind, ProviderError)
    assert (failure.status_code, failure.status, failure.attempts, requests) == (
        status, status, 1, 1)
    assert "tried" not in failure.message


@pytest.mark.parametrize("status, kind", [(429, RateLimitError), (409, ConflictError),
                                          (500, InternalServerError),
                                          (503, InternalServerError)])
def test_a_retried_error_says_how_often_it_tried(status, kind):
    _, failure, requests, sleeps = run([error(status, "busy")] * 3)
    assert type(failure) is kind and failure.attempts == requests == 3
    assert failure.message == "busy (tried 3 times)"


def test_retry_after_is_a_field_in_seconds():
    _, failure, _, sleeps = run([error(429, "slow down", {"retry-after-ms": "1500"})] * 3)
    assert type(failure) is RateLimitError
    assert failure.retry_after == 1.5 and sleeps == [1.5, 1.5]
    _, failure, _, _ = run([error(429, "slow down", {"Retry-After": "3600"}), OK])
    assert failure.retry_after == 3600.0 and failure.attempts == 1  # longer than it waits


def test_the_factory_picks_the_class_by_status():
    assert type(provider_error("x", status=None)) is ProviderError
    assert type(provider_error("x", status=408)) is ProviderError  # a timeout, retried
    assert type(provider_error("x", status=599)) is InternalServerError


def test_no_key_and_no_base_url_fails_when_the_client_is_made(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(AuthenticationError, match="no API key and no base_url"):
        OpenAIChatClient()
    OpenAIChatClient(base_url="http://127.0.0.1:9/v1")  # a local server needs no key
    OpenAIChatClient(api_key="sk-x")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    OpenAIChatClient()
