"""Retries of a model call that failed before its first body byte: HTTP 429 and 5xx,
dropped connections; exponential backoff with jitter; Retry-After (issue 4; SPEC §6
says HTTP errors raise ProviderError with the status, which they do once retries are
spent). The client's sleep is replaced by a recorder, so no test waits."""

import email.utils
import json
import time

import pytest

from agentflow import ChatMessage, Finish, OpenAIChatClient, ProviderError, TextDelta
from agentflow.errors import IncompleteStreamError
from agentflow.testing.replay import Reply, ReplayServer, chat_stream

OK = chat_stream(text="fine")


def error(status, message="busy", headers=None):
    return Reply(json.dumps({"error": {"message": message, "code": f"e{status}"}}),
                 status=status, content_type="application/json", headers=headers or {})


def run(replies, **client_args):
    """Serve ``replies``; return (updates, error, number of requests, sleeps asked)."""
    with ReplayServer(replies) as server:
        client = OpenAIChatClient(base_url=server.base_url, api_key="sk-retry-test", **client_args)
        sleeps = []
        client._sleep = sleeps.append
        updates, failure = [], None
        try:
            for update in client.run([ChatMessage.user("hi")]):
                updates.append(update)
        except ProviderError as exc:
            failure = exc
        return updates, failure, len(server.requests), sleeps


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_429_and_5xx_are_retried(status):
    updates, failure, requests, sleeps = run([error(status), OK])
    assert failure is None
    assert requests == 2 and len(sleeps) == 1
    assert updates[0] == TextDelta("fine") and isinstance(updates[-1], Finish)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(status):
    _, failure, requests, sleeps = run([error(status), OK])
    assert failure.status == status
    assert requests == 1 and sleeps == []


def test_at_most_max_retries_then_the_last_error():
    _, failure, requests, sleeps = run([error(503, "one"), error(503, "two"), error(503, "three"), OK])
    assert requests == 3  # the first try and 2 retries (the default)
    # issue 24: the message says it tried three times, the error carries it
    assert failure.status == 503 and failure.message == "three (tried 3 times)"
    assert failure.attempts == 3
    assert len(sleeps) == 2


def test_max_retries_zero_means_one_try():
    _, failure, requests, sleeps = run([error(500), OK], max_retries=0)
    assert failure.status == 500 and requests == 1 and sleeps == []


def test_backoff_doubles_with_jitter():
    _, failure, requests, sleeps = run([error(500)] * 4, max_retries=3, retry_backoff=1.0)
    assert requests == 4
    assert 0.5 <= sleeps[0] < 1.0 and 1.0 <= sleeps[1] < 2.0 and 2.0 <= sleeps[2] < 4.0


def test_retry_after_in_seconds_is_honoured():
    _, failure, _, sleeps = run([error(429, headers={"Retry-After": "7"}), OK])
    assert failure is None and sleeps == [7.0]


def test_retry_after_as_an_http_date_is_honoured():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    _, failure, _, sleeps = run([error(503, headers={"Retry-After": when}), OK])
    assert failure is None
    assert 25 <= sleeps[0] <= 30  # whole seconds in the date; the rest is clock drift


def test_a_retry_after_beyond_the_limit_is_reported_not_slept():
    _, failure, requests, sleeps = run([error(429, "slow down", {"Retry-After": "3600"}), OK])
    assert failure.status == 429 and requests == 1 and sleeps == []


def test_a_dropped_connection_before_any_byte_is_retried():
    updates, failure, requests, sleeps = run([Reply(drop=True), OK])
    assert failure is None and requests == 2 and len(sleeps) == 1
    assert updates[0] == TextDelta("fine")


def test_nothing_is_retried_once_part_of_the_body_arrived():
    """A stream cut after its first event: the caller may already hold updates, so
    a retry could duplicate them. IncompleteStreamError, one request."""
    partial = chat_stream(text="half", done=False).split(b"\n\n")[1] + b"\n\n"
    updates, failure, requests, sleeps = run([Reply(partial), OK])
    assert isinstance(failure, IncompleteStreamError)
    assert updates == [TextDelta("half")]
    assert requests == 1 and sleeps == []


def test_retries_never_show_the_key():
    _, failure, _, _ = run([error(500, "bad key sk-retry-test")] * 3)
    assert "sk-retry-test" not in str(failure)
