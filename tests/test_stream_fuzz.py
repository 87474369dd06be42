"""Seeded random faults over every recorded stream (issue 12; SPEC §6, §7).

Each recording in ../shared/fixtures/streams is fed through ``stream_updates`` (the SSE
parser and the ``ChunkAssembler``) in seeded random splits, and again with one chunk
mutated: a value somewhere in its JSON replaced by one of the wrong shape (``null``,
``true``, ``1.5``, ``"x"``, ``[null]``, ``{}``, JSON nested 100 000 deep …). The
only outcomes allowed are the recording's own result or a typed ``ProviderError``;
a mutation of a field the assembler does not read must give the recording's result
(unless it is too deep to decode at all).

Every run is made twice, through ``feed`` and through the general path alone, so
the assembler's fast paths are proven to agree with it on all of these inputs
(STYLE.md: a fast path must be proven to agree, or dropped).
"""

from __future__ import annotations

import json
import random

import pytest

from agentflow.assembler import ChunkAssembler, stream_updates
from agentflow.errors import ProviderError
from agentflow.sse import SSEParser
from helpers_streams import find_streams_dir, random_splits, streams_dir

SEED = 12
MUTANTS = 8  # per recording: about 1 s for all 39 of them
DEEP = "[" * 100_000 + "]" * 100_000
WRONG = [None, True, False, 0, -1, 1.5, "", "x", "0", [], [None], [1], ["x"], {}, {"x": 1},
         DEEP]
# Top-level chunk fields the assembler reads; a mutation elsewhere changes nothing.
READ = {"choices", "usage", "x_groq", "error"}

found = find_streams_dir()
NAMES = sorted(p.name for p in found.glob("*.sse")) if found else ["(no streams)"]


class GeneralPathOnly(ChunkAssembler):
    """A ChunkAssembler whose fast paths are switched off."""

    def feed(self, chunk):
        self._chunks += 1
        return self._chunk(chunk)


def outcome(pieces, assembler_class=ChunkAssembler):
    """What one turn gives: (updates, the Finish message's dict or None, the error's
    type and text or None). Any exception but ProviderError fails the test."""
    assembler = assembler_class()
    updates = []
    try:
        for update in stream_updates(pieces, assembler):
            updates.append(update)
    except ProviderError as exc:
        return updates, None, (type(exc).__name__, str(exc))
    message = updates[-1].message
    return updates, message.to_openai() if message is not None else None, None


def both_paths(pieces):
    fast = outcome(pieces)
    assert outcome(pieces, GeneralPathOnly) == fast, "a fast path disagrees with the general one"
    return fast


def events_of(raw: bytes) -> list[tuple[str, str]]:
    parser = SSEParser()
    events = [(e.type, e.data) for e in parser.feed(raw)]
    parser.close()
    return events


def body_of(events) -> bytes:
    out = []
    for kind, data in events:
        if kind != "message":
            out.append(f"event: {kind}\n")
        out.extend(f"data: {line}\n" for line in data.split("\n"))
        out.append("\n")
    return "".join(out).encode("utf-8")


def paths(value, prefix=()):
    """Every place in a JSON value (tuples of keys and list positions)."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, prefix + (key,))
    elif isinstance(value, list):
        for position, item in enumerate(value):
            yield from paths(item, prefix + (position,))


def replaced(chunk, path, new):
    """``chunk`` as JSON text with the value at ``path`` replaced by ``new``."""
    marker = "\x00wrong\x00"
    if not path:
        return DEEP if new is DEEP else json.dumps(new)
    copy = json.loads(json.dumps(chunk))
    holder = copy
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = marker if new is DEEP else new
    return json.dumps(copy).replace(json.dumps(marker), DEEP)


@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_split_and_mutated_gives_its_result_or_a_provider_error(name):
    raw = (streams_dir() / name).read_bytes()
    rng = random.Random(f"{SEED}:{name}")
    expected = both_paths([raw])
    assert both_paths(random_splits(raw, rng.randrange(1 << 30))) == expected

    events = events_of(raw)
    candidates = []
    for number, (kind, data) in enumerate(events):
        try:
            chunk = json.loads(data)
        except ValueError:
            continue  # [DONE]
        candidates.append((number, chunk))
    for _ in range(MUTANTS):
        number, chunk = rng.choice(candidates)
        path = rng.choice(list(paths(chunk)))
        new = rng.choice(WRONG)
        mutant = list(events)
        mutant[number] = (events[number][0], replaced(chunk, path, new))
        body = body_of(mutant)
        got = both_paths(random_splits(body, rng.randrange(1 << 30), max_piece=4096))
        if path and path[0] not in READ and new is not DEEP and events[number][0] == "message":
            assert got == expected, f"mutating {path} (unread) changed the result"
