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


def case_needs(case: dict) -> list[str]:
    """The features a case needs (README, "Features"): those it lists in ``needs``, and
    those its shape implies, so that no case can forget one: ``"session": false`` needs
    ``no_session``, a turn with ``stop_after`` or ``recorded_answers`` needs the
    feature of that name.

    Returns:
        list[str]: feature names, each once, in that order.
    """
    implied = []
    if case.get("session") is False:
        implied.append("no_session")
    for key in ("stop_after", "recorded_answers"):
        if any(key in turn for turn in case["turns"]):
            implied.append(key)
    return list(dict.fromkeys([*case.get("needs", ()), *implied]))


def setup_message(case: dict, base_url: str, api_key: str) -> dict:
    """The protocol's ``setup`` message for a case (README, "Adapters"): ``profile``,
    ``policy`` and ``session`` only where the case has them."""
    message = {"type": "setup", "base_url": base_url, "api_key": api_key,
               "model": case.get("model", "conformance-model"),
               "instructions": case.get("instructions"),
               "tools": case.get("tools", []),
               "context_providers": case.get("context_providers", [])}
    for key in ("profile", "policy", "session"):  # policy: agentflow suite (R19)
        if key in case:
            message[key] = case[key]
    return message


def run_message(turn: dict) -> dict:
    """The protocol's ``run`` message for a turn (README, "Adapters"): ``stop_after``
    and ``recorded_answers`` only where the turn has them."""
    message = {"type": "run", "input": turn.get("input", []),
               "approvals": turn.get("approvals", []),
               "options": turn.get("options", {}),
               "reload_session": bool(turn.get("reload_session"))}
    for key in ("stop_after", "recorded_answers"):
        if key in turn:
            message[key] = turn[key]
    return message


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
