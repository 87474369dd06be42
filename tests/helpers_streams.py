"""Shared helpers for the tests that read recorded provider streams and split bytes.

* ``find_streams_dir()`` / ``streams_dir()``: locate ``../shared/fixtures/streams``
  (beside the repository: the recorded examples of SPEC §6). The recorded
  streams are third-party data kept outside the repository, so a plain clone may not
  have them: ``streams_dir()`` then skips the calling test, except in CI (the
  environment variable ``CI`` is ``"true"``, see .ci/run), where a missing folder is a
  broken checkout and the test fails.
  ``missing_shared_part(reason)`` is that skip-or-fail, for any other shared file.
* ``random_splits(data, seed)``: cut bytes at seeded random places, to feed a
  sans-IO parser the way a network delivers them.
* ``summarize(updates)``: the text, reasoning, tool calls, ends and finishes a list of
  updates adds up to.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentflow.types import (Finish, ReasoningDelta, TextDelta, ToolCallArgs,
                             ToolCallEnd, ToolCallStart)

# tests/ -> the repository root -> the folder that holds it and ``shared``.
SHARED_DIR = Path(__file__).resolve().parents[1].parent / "shared"
STREAMS_DIR = SHARED_DIR / "fixtures" / "streams"


def find_streams_dir() -> Path | None:
    """The recorded-streams folder, or ``None`` when it is not there. Never skips, so
    it is safe at collection time (e.g. to build a parameter list)."""
    return STREAMS_DIR if STREAMS_DIR.is_dir() else None


def streams_dir() -> Path:
    """The recorded-streams folder. When it is missing, skip the calling test with the
    reason, or fail it when ``CI == "true"`` (CI always has ../shared beside main)."""
    found = find_streams_dir()
    if found is not None:
        return found
    missing_shared_part(f"recorded provider streams not found at {STREAMS_DIR}; they "
                        "live in the shared folder beside the repository "
                        "(../shared/fixtures/streams)")


def missing_shared_part(reason: str):
    """Skip the calling test for ``reason``, something of ../shared being absent; or
    fail it when ``CI == "true"``, where .ci/run always puts the shared folder there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the shared folder must be present)")
    pytest.skip(reason)


def random_splits(data: bytes, seed: int, max_piece: int = 97) -> list[bytes]:
    """``data`` cut into pieces of 1..``max_piece`` bytes at places chosen by a
    ``random.Random(seed)``; joined again they are ``data``."""
    rng = random.Random(seed)
    pieces, start = [], 0
    while start < len(data):
        size = rng.randint(1, max_piece)
        pieces.append(data[start:start + size])
        start += size
    assert b"".join(pieces) == data
    return pieces


@dataclass
class Summary:
    """What a list of updates adds up to.

    ``tool_calls``: ``[id, name, arguments]`` per ``ToolCallStart``, in start order,
    ``arguments`` being that call's ``ToolCallArgs`` fragments joined.
    ``ends``: how many ``ToolCallEnd`` each call id got. ``finishes``: every ``Finish``.
    ``finish_last``: whether the last update is a ``Finish``.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: list = field(default_factory=list)
    ends: dict = field(default_factory=dict)
    finishes: list = field(default_factory=list)
    orphan_args: list = field(default_factory=list)
    finish_last: bool = False


def summarize(updates) -> Summary:
    updates = list(updates)
    text, reasoning = [], []
    calls: dict[str, list] = {}
    summary = Summary()
    for update in updates:
        if isinstance(update, TextDelta):
            text.append(update.text)
        elif isinstance(update, ReasoningDelta):
            reasoning.append(update.text)
        elif isinstance(update, ToolCallStart):
            assert update.call_id not in calls, f"second ToolCallStart for {update.call_id!r}"
            calls[update.call_id] = [update.call_id, update.name, []]
        elif isinstance(update, ToolCallArgs):
            if update.call_id in calls:
                calls[update.call_id][2].append(update.delta)
            else:
                summary.orphan_args.append(update)
        elif isinstance(update, ToolCallEnd):
            summary.ends[update.call_id] = summary.ends.get(update.call_id, 0) + 1
        elif isinstance(update, Finish):
            summary.finishes.append(update)
    summary.text = "".join(text)
    summary.reasoning = "".join(reasoning)
    summary.tool_calls = [[i, n, "".join(a)] for i, n, a in calls.values()]
    summary.finish_last = bool(updates) and isinstance(updates[-1], Finish)
    return summary
