"""Recorded provider streams (../shared/fixtures/streams/*.sse, SPEC §6) assembled by
``OpenAIChatClient`` over real HTTP on 127.0.0.1, compared with the independently
worked-out values in ``stream_expectations.EXPECTED``.

Every ``*.sse`` file in the folder is a case; a stream added later needs only its
entry in ``EXPECTED``. The same bytes are then fed in-process through ``SSEParser`` +
``ChunkAssembler`` in seeded random splits, which must give the same updates as the
HTTP run (SPEC §7: bytes may be split anywhere).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from agentflow.assembler import ChunkAssembler
from agentflow.errors import ProviderError
from agentflow.openai_client import OpenAIChatClient
from agentflow.testing.replay import Reply, ReplayServer
from agentflow.sse import SSEParser
from agentflow.types import ChatMessage, FinishReason, Usage
from helpers_streams import find_streams_dir, random_splits, streams_dir, summarize
from stream_expectations import EXPECTED


def _fixture_names() -> list[str]:
    found = find_streams_dir()
    on_disk = {p.name for p in found.glob("*.sse")} if found else set()
    return sorted(on_disk | set(EXPECTED))


NAMES = _fixture_names()
SEEDS = [11, 23, 5150]
# A key that occurs in no recording. The client scrubs the key from every provider
# message (SPEC §6, last item), so a one-letter key such as "k" would (rightly, by that
# rule) turn the provider's "Token limit reached" into "To***en limit reached".
API_KEY = "sk-test-replay-key-0000"


def _digest(text: str) -> tuple[int, str, str]:
    return len(text), hashlib.sha256(text.encode("utf-8")).hexdigest(), text[:24]


@pytest.fixture(scope="module")
def over_http():
    """``over_http(raw) -> (updates, exception or None)``: ``raw`` served by one
    module-wide replay server and run by the client. Each recording crosses HTTP once;
    the tests that compare with that run share its result."""
    runs: dict[bytes, tuple] = {}
    with ReplayServer() as server:
        def run(raw: bytes):
            if raw not in runs:
                served = len(server.requests)
                server.queue(Reply(body=raw))
                client = OpenAIChatClient(model="m", base_url=server.base_url, api_key=API_KEY)
                updates, error = [], None
                try:
                    for update in client.run([ChatMessage.user("hi")]):
                        updates.append(update)
                except Exception as exc:  # noqa: BLE001 - compared with the expectation
                    error = exc
                # exactly this body was served, once, so the next run gets its own
                assert len(server.requests) == served + 1
                runs[raw] = updates, error
            return runs[raw]
        yield run


def _run_in_process(pieces: list[bytes]):
    """The same turn without HTTP: SSEParser over ``pieces``, each event's JSON to a
    ChunkAssembler, with OpenAI's stream conventions (SPEC §6): ``event: error`` and an
    ``error`` object raise ``ProviderError``; ``data: [DONE]`` ends the turn."""
    parser, assembler = SSEParser(), ChunkAssembler()
    updates, saw_done = [], False
    try:
        for piece in pieces:
            for event in parser.feed(piece):
                if event.type == "error":
                    body = json.loads(event.data)
                    error = body.get("error", body)
                    raise ProviderError(error.get("message", event.data),
                                        code=error.get("code"))
                if event.data == "[DONE]":
                    saw_done = True
                    break
                updates.extend(assembler.feed(json.loads(event.data)))
            if saw_done:
                break
        parser.close()
        updates.extend(assembler.finish(saw_done))
    except ProviderError as exc:
        return updates, exc, assembler
    return updates, None, assembler


def _read(name: str) -> bytes:
    path = streams_dir() / name
    assert path.is_file(), f"{name} has an EXPECTED entry but no file in {path.parent}"
    raw = path.read_bytes()
    assert API_KEY.encode() not in raw
    return raw


def test_every_fixture_has_an_expectation():
    """Each recorded stream must have its expected values in stream_expectations.py."""
    folder = streams_dir()
    missing = sorted(p.name for p in folder.glob("*.sse") if p.name not in EXPECTED)
    assert missing == [], f"add EXPECTED entries to tests/stream_expectations.py for {missing}"


def test_every_expectation_has_a_fixture():
    """An EXPECTED entry whose stream is gone is stale."""
    folder = streams_dir()
    stale = sorted(name for name in EXPECTED if not (folder / name).is_file())
    assert stale == []


def test_missing_shared_folder_skips_locally_and_fails_in_ci(monkeypatch, tmp_path):
    """helpers_streams.streams_dir(): a missing shared folder skips the test, except
    when CI == "true" (.ci/run sets it), where it fails."""
    import helpers_streams

    monkeypatch.setattr(helpers_streams, "STREAMS_DIR", tmp_path / "absent")
    monkeypatch.delenv("CI", raising=False)
    assert helpers_streams.find_streams_dir() is None
    with pytest.raises(pytest.skip.Exception, match="absent"):
        helpers_streams.streams_dir()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        helpers_streams.streams_dir()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="absent"):
        helpers_streams.streams_dir()
    monkeypatch.setattr(helpers_streams, "STREAMS_DIR", tmp_path)
    assert helpers_streams.streams_dir() == tmp_path


@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_over_http(name, over_http):
    """The HTTP run of one recorded stream gives EXPECTED[name] (SPEC §6)."""
    raw = _read(name)
    assert name in EXPECTED, f"no EXPECTED entry for {name}"
    want = EXPECTED[name]
    updates, error = over_http(raw)
    got = summarize(updates)

    assert _digest(got.text) == (want["text_len"], want["text_sha256"], want["text_head"])
    assert _digest(got.reasoning) == (want["reasoning_len"], want["reasoning_sha256"],
                                      want["reasoning_head"])

    calls = []
    for call_id, call_name, arguments in got.tool_calls:
        expected_args = want["tool_calls"][len(calls)][2] if len(calls) < len(
            want["tool_calls"]) else None
        if isinstance(expected_args, dict):  # long arguments stored as len/sha256/head
            len_, sha, head = _digest(arguments)
            arguments = {"len": len_, "sha256": sha, "head": head}
        calls.append([call_id, call_name, arguments])
    assert calls == want["tool_calls"]
    assert got.orphan_args == [], "ToolCallArgs before (or without) its ToolCallStart"

    if want["error"] is None:
        assert error is None, f"unexpected {type(error).__name__}: {error}"
        # SPEC §6 "ToolCallEnd: once per call, when the model's turn ends"
        assert got.ends == {c[0]: 1 for c in want["tool_calls"]}
        # SPEC §3 "Finish: always the last update", once
        assert len(got.finishes) == 1 and got.finish_last
        finish = got.finishes[0]
        assert finish.finish_reason == FinishReason(want["finish_reason"])
        assert finish.usage == (Usage(*want["usage"]) if want["usage"] else None)
    else:
        # SPEC §6: ProviderError with the provider's message and code, after the
        # updates before it (checked above: text, reasoning, calls up to the error).
        assert error is not None, "the stream should have raised"
        assert type(error).__name__ == want["error"]["kind"]
        assert want["error"]["message_contains"] in str(error)
        assert error.code == want["error"]["code"]
        assert got.finishes == [] and want["finish_reason"] is None
        assert want["usage"] is None


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_in_random_splits(name, seed, over_http):
    """SPEC §7 (bytes split anywhere): SSEParser + ChunkAssembler fed the recording in
    seeded random pieces give the same updates as the HTTP run."""
    raw = _read(name)
    http_updates, http_error = over_http(raw)
    updates, error, assembler = _run_in_process(random_splits(raw, seed, max_piece=97))

    assert updates == http_updates
    assert (error is None) == (http_error is None)
    if error is not None:
        assert error.code == http_error.code
        assert error.message in str(http_error)
    else:
        got = summarize(http_updates)
        assert assembler.text == got.text
        assert [[c.id, c.name, c.arguments] for c in assembler.tool_calls] == got.tool_calls
