"""Reading cases: a case's JSON and the response bodies it names (README, "Files")."""

from __future__ import annotations

import json
from pathlib import Path

from agentflow.testing.replay import Reply

CASES = Path(__file__).resolve().parent / "cases"
PROFILE_CASES = CASES.parent / "profiles"  # README, "Provider profiles"


def load_case(ref: str) -> dict:
    """A case, from the path of its ``.json`` or from its id in ``conformance/cases``.

    Args:
        ref: a path ending in ``.json``, or an id such as ``"001-approve"``.

    Returns:
        The case as parsed JSON (dict), plus ``"_folder"``: the ``Path`` of the folder
        its response bodies are read from.

    Raises:
        FileNotFoundError: no such case; the message names both ways to give one.
    """
    path = Path(ref)
    if not path.suffix:
        path = CASES / f"{ref}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no case {ref!r}: give the path of a case .json or the id "
                                f"of one in {CASES}")
    case = json.loads(path.read_text(encoding="utf-8"))
    case["_folder"] = path.parent
    return case


def load_cases(folder: Path = CASES) -> list[dict]:
    """Every ``*.json`` case in ``folder``, in file-name order (README, "Files")."""
    return [load_case(str(path)) for path in sorted(folder.glob("*.json"))]


def case_replies(case: dict) -> list[Reply]:
    """The bodies a case serves, over all its turns in order, as replay-server replies:
    a body file is served as ``text/event-stream`` with status 200, an object as its
    ``status`` with ``application/json`` (README, "MODEL_CALL")."""
    replies = []
    for turn in case["turns"]:
        for call in turn.get("model_calls", []):
            response = call["response"]
            if isinstance(response, str):
                replies.append(Reply((case["_folder"] / response).read_bytes()))
            else:
                body = json.dumps(response["json"]) if "json" in response else response.get("body", "")
                replies.append(Reply(body, status=response.get("status", 200),
                                     content_type=response.get("content_type", "application/json")))
    return replies
