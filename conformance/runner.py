"""The conformance runner: replays each case against an implementation and checks it
turn by turn. The rules it applies are written out in conformance/README.md; this file
is one reading of them, and must not know more than that page says.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import queue
import shlex
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass

from agentflow.testing.replay import ReplayServer

from .aspects import (ASPECTS, Difference, compared, firm, loosen_message, loosen_update,
                      matches, matches_loosely)
from .loader import (CASES, PROFILE_CASES, case_needs, case_replies, load_cases, run_message,
                     setup_message)
from .report import report


@dataclass
class Outcome:
    """One case's result. ``status`` is ``pass``, ``fail`` or ``skip`` (README,
    "Outcomes"); ``detail`` says why it failed or was skipped; ``derived`` lists the
    differences found only in fields the adapter declared it derives; ``configured``
    what the adapter's ``ready`` says it set through the framework's own parameters;
    ``broke`` the rule a failure breaks: the case's first rule, or the rule of the
    aspect or step its first difference is in (README, "What a case compares")."""
    case_id: str
    title: str
    status: str
    detail: str = ""
    suite: str = "core"
    rules: tuple = ()
    derived: tuple = ()
    implementation: str = ""
    configured: tuple = ()
    broke: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"


# What an adapter may derive when its implementation has no such event (README,
# "Derived fields"), and the update fields each one covers.
DERIVABLE = ("tool_call_start", "tool_call_end", "finish", "index", "result_name")

# The inputs an adapter may declare its framework cannot express (README, "Features");
# each hides only the cases that need it (SPEC §8).
FEATURES = ("unknown_call_ids", "answers_without_a_pause", "duplicate_approvals",
            "reload_session", "context_providers", "resume_counts_a_round")

# The inputs added to the protocol after adapters were written against it: a case that
# needs one runs only where the adapter's ``ready`` lists it in ``can``, so an adapter
# that does not know the step is skipped with a reason, never failed by an input it
# ignored (README, "Features").
DECLARED_FEATURES = ("stop_after", "no_session", "recorded_answers")

EVERY_ASPECT = frozenset(ASPECTS)


class Mismatch(Exception):
    """The implementation did something the case does not expect; ``rule`` is the
    rule its first difference breaks (``None``: the case's own)."""

    def __init__(self, text: str, rule: str | None = None):
        super().__init__(text)
        self.rule = rule


# -- normalising and comparing -----------------------------------------------------------

def _arguments(text):
    """Tool-call arguments compare as JSON values when they parse, else as text."""
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _content(content):
    """A list of text parts means the same as their texts joined (OpenAI's two forms)."""
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                         for p in content):
        return "".join(p.get("text", "") for p in content)
    return content


def normalise_message(message: dict) -> dict:
    """A message in the form the runner compares (README, "How the runner compares")."""
    out = {"role": message.get("role"), "content": _content(message.get("content"))}
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal and out["content"] in (None, ""):
        out["content"] = refusal  # SPEC §8: content or refusal hold the same text
    if out["content"] == "" and out["role"] == "assistant":
        out["content"] = None
    calls = message.get("tool_calls") or []
    if calls:
        out["tool_calls"] = [{"id": c.get("id"), "name": (c.get("function") or {}).get("name"),
                              "arguments": _arguments((c.get("function") or {}).get("arguments"))}
                             for c in calls]
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def join_system_messages(messages: list[dict]) -> list[dict]:
    """SPEC §8: a core case does not demand one system message per context provider.
    Every system message of a request counts as part of one, at the front, whose text
    is theirs in order, each run of whitespace one space."""
    system = [m for m in messages if m.get("role") == "system"]
    if not system:
        return messages
    text = " ".join(" ".join(str(m.get("content") or "").split()) for m in system)
    return ([{**system[0], "content": text.strip()}]
            + [m for m in messages if m.get("role") != "system"])


# The updates of a call at the end of a model turn, and the order SPEC fixes for each
# kind: tool_call_start in the order the calls arrived (§6), approval_request in call
# order (R3); tool_call_end "once per call, when the model's turn ends" (§3) is not
# ordered against the updates of other calls, nor is one call's tool_result against
# another's (R4 orders the history, not the updates; SPEC §8).
_CALL_BLOCK = {"tool_call_start": 0, "tool_call_end": 1, "approval_request": 2}


def _run_kind(update: dict) -> str:
    kind = update.get("type")
    return "calls" if kind in _CALL_BLOCK else "results" if kind == "tool_result" else ""


def order_call_blocks(updates: list[dict]) -> list[dict]:
    """Each run of consecutive ``tool_call_start`` / ``tool_call_end`` /
    ``approval_request`` updates in one canonical order: the starts as they came, then
    the ends in the order of their calls' starts, then the approval requests as they
    came; each run of consecutive ``tool_result`` updates in the order of their call
    ids. Applied to both sides, so no order between updates of different calls
    decides a case (SPEC §8)."""
    out = []
    for kind, run in itertools.groupby(updates, key=_run_kind):
        run = list(run)
        if kind == "calls":
            starts = [u.get("call_id") for u in run if u["type"] == "tool_call_start"]
            rank = {call_id: n for n, call_id in enumerate(starts)}
            run.sort(key=lambda u: (
                _CALL_BLOCK[u["type"]],
                rank.get(u.get("call_id"), len(rank)) if u["type"] == "tool_call_end" else 0))
        elif kind == "results":
            run.sort(key=lambda u: str(u.get("call_id")))
        out += run
    return out


def normalise_updates(updates: list[dict]) -> list[dict]:
    """Empty text and reasoning updates are dropped; adjacent ones join into one;
    ``tool_call_args`` fold into an ``arguments`` field of their call's
    ``tool_call_end``. The order within a block of call updates is made canonical
    (``order_call_blocks``) by ``check_turn``."""
    out: list[dict] = []
    arguments: dict[str, str] = {}
    for update in updates:
        kind = update.get("type")
        if kind in ("text", "reasoning") and update.get("text") == "":
            continue
        if kind == "tool_call_args":
            arguments[update["call_id"]] = arguments.get(update["call_id"], "") + update["delta"]
            continue
        if kind in ("text", "reasoning") and out and out[-1]["type"] == kind:
            out[-1] = {**out[-1], "text": out[-1]["text"] + update["text"]}
            continue
        if kind == "tool_call_end":
            if update["call_id"] in arguments or "arguments" not in update:
                update = {**update,
                          "arguments": _arguments(arguments.get(update["call_id"], ""))}
        out.append(dict(update))
    return out


def _first_difference(expected, actual, where: str) -> str | None:
    if isinstance(expected, dict) and set(expected) == {"$prefix"}:
        if matches(expected, actual):
            return None
        return (f"{where}: expected text starting with {json.dumps(expected['$prefix'])}, "
                f"got {json.dumps(actual)[:160]}")
    if isinstance(expected, dict) and set(expected) in ({"$text"}, {"$result"}):
        if matches_loosely(expected, actual):
            return None
        if "$text" in expected:
            wanted = f"a text ({expected['$text']} is compared only by its rule's cases)"
        else:
            value = expected["$result"]
            shown = (f"text starting with {json.dumps(value['$prefix'])[:160]}"
                     if isinstance(value, dict) else json.dumps(value)[:160])
            wanted = f"{shown} (or an object of one member holding it)"
        return f"{where}: expected {wanted}, got {json.dumps(actual)[:160]}"
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in expected:
            if key not in actual:
                return f"{where}.{key}: missing (expected {json.dumps(expected[key])})"
            found = _first_difference(expected[key], actual[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = _first_difference(e, a, f"{where}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            extra = (f"unexpected {json.dumps(actual[len(expected)])[:160]}"
                     if len(actual) > len(expected)
                     else f"missing {json.dumps(firm(expected[len(actual)]))[:160]}")
            return f"{where}: {len(actual)} items, expected {len(expected)} ({extra})"
        return None
    if expected != actual or isinstance(expected, bool) != isinstance(actual, bool):
        return f"{where}: expected {json.dumps(expected)[:160]}, got {json.dumps(actual)[:160]}"
    return None


API_KEY = "sk-conformance"


def _shown(value) -> str:
    return "absent" if value is None else json.dumps(value)[:160]


def check_request(expected: dict, request, model: str = "conformance-model",
                  exact: bool = False, aspects=EVERY_ASPECT) -> str | None:
    """The first difference between a request the case expects and one received
    (a ``RecordedRequest``). ``exact``: compare the messages as sent, provider keys
    included, instead of their normalised form (profile cases). ``aspects``: those
    compared exactly (``aspects.compared``); the others loosely (README, "What a case
    compares")."""
    body = request.json
    if request.path != "/v1/chat/completions":
        return f"path: expected /v1/chat/completions, got {request.path}"
    if request.headers.get("authorization") != f"Bearer {API_KEY}":
        return "authorization: expected the header 'Bearer <api_key from setup>'"
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    if body.get("stream") is not True:
        return f"stream: expected true, got {_shown(body.get('stream'))}"
    if body.get("model") != model:
        return f"model: expected {json.dumps(model)}, got {_shown(body.get('model'))}"
    messages = [m if exact else normalise_message(m) for m in body.get("messages") or []]
    wanted = [loosen_message(m if exact else normalise_message(m), aspects)
              for m in expected["messages"]]
    if not exact:
        messages, wanted = join_system_messages(messages), join_system_messages(wanted)
    if "system_text" not in aspects:
        found = _system_text_missing(wanted, messages)
        if found:
            return found
        messages, wanted = ([m for m in side if m.get("role") != "system"]
                            for side in (messages, wanted))
    found = _first_difference(wanted, messages, "messages")
    if found:
        return Difference(found, "R4" if _out_of_call_order(wanted, messages) else None)
    if "tools" in expected:
        names = [(t.get("function") or {}).get("name") for t in body.get("tools") or []]
        if names != expected["tools"]:
            return f"tools: expected {json.dumps(expected['tools'])}, got {json.dumps(names)}"
    # Compared by meaning (SPEC §8): "auto" is what an absent tool_choice means when
    # tools are offered, and parallel_tool_calls defaults to true.
    offered = bool(body.get("tools"))
    choice = body.get("tool_choice")
    if "tool_choice" in expected and _choice(choice, offered) != _choice(
            expected["tool_choice"], offered):
        return f"tool_choice: expected {_shown(expected['tool_choice'])}, got {_shown(choice)}"
    parallel = body.get("parallel_tool_calls", True)
    if "parallel_tool_calls" in expected and expected["parallel_tool_calls"] != parallel:
        return (f"parallel_tool_calls: expected {_shown(expected.get('parallel_tool_calls', True))}"
                f", got {_shown(parallel)}")
    return None


def in_call_order(messages: list[dict]) -> list[dict]:
    """``messages`` with each run of ``tool`` messages after an assistant message put in
    the order of that message's calls (a result for no call of it goes last)."""
    out, rank = [], {}
    for is_tool, run in itertools.groupby(messages, key=lambda m: m.get("role") == "tool"):
        run = list(run)
        if is_tool:
            run.sort(key=lambda m: rank.get(m.get("tool_call_id"), len(rank)))
        for message in run:
            if message.get("role") == "assistant":
                rank = {c.get("id"): n for n, c in enumerate(message.get("tool_calls") or [])}
        out += run
    return out


def _out_of_call_order(wanted: list[dict], actual: list[dict]) -> bool:
    """Whether ``actual`` differs from ``wanted`` only in the order of a turn's tool
    results: SPEC R4's point ("in call order"), whatever the case is about."""
    fixed = in_call_order(actual)
    return fixed != actual and _first_difference(wanted, fixed, "") is None


def _system_text(messages: list[dict]) -> str:
    return " ".join(" ".join(str(m.get("content") or "").split())
                    for m in messages if m.get("role") == "system")


def _system_text_missing(wanted: list[dict], messages: list[dict]) -> str | None:
    """Outside R1's cases the system messages must hold the case's text; what a
    framework adds around it is R1's to judge (SPEC §8, fourth batch)."""
    text, sent = _system_text(wanted), _system_text(messages)
    if text in sent:
        return None
    return (f"messages: the system messages must hold {json.dumps(text)[:160]}, got "
            f"{json.dumps(sent)[:160]}")


def _choice(value, offered: bool):
    return None if value == "auto" and offered else value


def primary_view(updates: list[dict], derives, aspects=EVERY_ASPECT) -> list[dict]:
    """The updates without what the adapter derives (README, "Derived fields"): no
    ``tool_call_start`` or ``tool_call_end`` updates, no ``index``, no ``name`` of a
    result, no ``usage`` of the ``finish`` (its ``finish_reason`` is always checked; its
    usage too where ``aspects`` holds ``usage``: a case about usage, SPEC §8)."""
    out = []
    keep_usage = "usage" in aspects
    for update in updates:
        kind = update.get("type")
        if kind in ("tool_call_start", "tool_call_end") and kind in derives:
            continue
        drop = {"tool_call_start": ("index",) if "index" in derives else (),
                "tool_result": ("name",) if "result_name" in derives else (),
                "finish": ("usage",) if "finish" in derives and not keep_usage else ()
                }.get(kind, ())
        out.append({k: v for k, v in update.items() if k not in drop})
    return out


def check_error(expect: dict, end: dict) -> str | None:
    """The difference in the turn's error kind and message, if any."""
    error = end.get("error")
    wanted_error = expect.get("error")
    if wanted_error != (error or {}).get("kind"):
        got = f"{error['kind']}: {error.get('message', '')}"[:300] if error else "no error"
        return f"error: expected {wanted_error or 'no error'}, got {got}"
    for text in expect.get("error_mentions", []):
        if text not in (error or {}).get("message", ""):
            return (f"error.message: expected it to mention {json.dumps(text)}, got "
                    f"{json.dumps((error or {}).get('message'))[:200]}")
    return None


def check_turn(expect: dict, end: dict, updates: list[dict], exact: bool = False,
               derives=(), aspects=EVERY_ASPECT) -> tuple[list[str], list[str]]:
    """The differences between a turn's expectations and what happened: the first one
    in each of the error, the updates, the history and the executions, and apart from
    them the differences found only in derived fields (``derives``, README "Derived
    fields"). ``exact``: compare the history as stored, provider keys included
    (profile cases). ``aspects``: those compared exactly, the others loosely (README,
    "What a case compares"). A history that differs after a turn that failed as
    expected is R10's difference (what a failed run leaves, SPEC §8). The executions
    are compared in any order: a framework may run a turn's calls in parallel, and a
    case whose verdict depends on which finished first would pass or fail by chance
    (SPEC §8); the history still holds the results in call order. Returns
    ``(differences, derived_differences)``, each a ``Difference``."""
    problems, derived = [], []
    found = check_error(expect, end)
    if found:
        problems.append(Difference(found))
    if "updates" in expect:
        actual = order_call_blocks(normalise_updates(updates))
        wanted = order_call_blocks([loosen_update(u, aspects) for u in expect["updates"]])
        found = _first_difference(primary_view(wanted, derives, aspects),
                                  primary_view(actual, derives, aspects), "updates")
        if found:
            problems.append(Difference(found))
        elif derives:
            found = _first_difference(wanted, actual, "updates")
            if found:
                derived.append(Difference(found))
    if "history" in expect:
        shown = (lambda m: m) if exact else normalise_message
        wanted = [loosen_message(shown(m), aspects) for m in expect["history"]]
        actual = [shown(m) for m in end.get("history", [])]
        found = _first_difference(wanted, actual, "history")
        if found:
            failed_as_expected = expect.get("error") and not problems
            problems.append(Difference(found, "R10" if failed_as_expected else "R4" if
                                       _out_of_call_order(wanted, actual) else None))
    if "executions" in expect:
        ran = end.get("executions", [])
        found = _first_difference(expect["executions"], ran, "executions")
        if found and not _same_in_any_order(expect["executions"], ran):
            problems.append(Difference(found))
    return problems, derived


def _same_in_any_order(expected: list, actual: list) -> bool:
    """Whether each expected item matches one actual item, by ``_first_difference``'s
    rules (numbers by value, booleans apart), with none left over."""
    rest = list(actual)
    for item in expected:
        match = next((n for n, a in enumerate(rest) if _first_difference(item, a, "") is None),
                     None)
        if match is None:
            return False
        del rest[match]
    return not rest


def by_rule(compare, aspects):
    """``compare(aspects_compared_exactly)`` first with every aspect loose, whose
    differences break the case's own rule (or the one they name); then with each of
    ``aspects`` alone, whose differences break that aspect's rule. Returns the first
    differences found, each a ``Difference``, or ``[]``."""
    found = compare(frozenset())
    if found:
        return [Difference(p, getattr(p, "rule", None)) for p in found]
    for aspect in sorted(aspects):
        found = compare(frozenset({aspect}))
        if found:
            return [Difference(p, ASPECTS[aspect] or getattr(p, "rule", None)) for p in found]
    texts = aspects & {"rejection_text", "error_text", "tool_answer_text"}
    if texts and "result_wrapping" in aspects:
        # each text's own pass took it bare or as the one member of an object; where the
        # case compares the wrapping too, a wrapped text is R2's difference
        found = compare(texts | {"result_wrapping"})
        if found:
            return [Difference(p, ASPECTS["result_wrapping"]) for p in found]
    return []


# -- drivers -------------------------------------------------------------------------------

class InProcess:
    """agentflow, called directly."""

    def __init__(self):
        from .driver import CaseDriver
        self.driver = CaseDriver()

    def setup(self, message: dict) -> dict:
        return self.driver.setup(message)

    def run(self, message: dict) -> tuple[dict, list[dict]]:
        updates: list[dict] = []
        end = self.driver.run(message, updates.append)
        return end, updates

    def close(self) -> None:
        pass


class Adapter:
    """Another implementation behind the JSON-lines protocol (README, "Adapters")."""

    def __init__(self, command: str, timeout: float = 60.0):
        self.process = subprocess.Popen(shlex.split(command), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.timeout = timeout
        self.lines: queue.Queue = queue.Queue()
        # A reader thread lets a silent adapter time out instead of hanging the runner.
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put("")

    def _send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def _receive(self) -> dict:
        try:
            line = self.lines.get(timeout=self.timeout)
        except queue.Empty:
            self.process.kill()
            raise Mismatch(f"the adapter sent nothing for {self.timeout:g} s") from None
        if not line:  # its stdout closed: wait briefly for the status, to name it
            try:
                status = self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                status = "unknown"
            raise Mismatch(f"the adapter exited (status {status}) without answering")
        try:
            return json.loads(line)
        except ValueError:
            raise Mismatch(f"the adapter wrote a line that is not JSON: {line[:200]!r}")

    def setup(self, message: dict) -> dict:
        self._send(message)
        return self._receive()

    def run(self, message: dict) -> tuple[dict, list[dict]]:
        self._send(message)
        updates = []
        while True:
            answer = self._receive()
            if answer.get("type") == "update":
                updates.append(answer["update"])
            elif answer.get("type") in ("end", "skip"):
                return answer, updates
            else:
                raise Mismatch(f"unexpected adapter message {json.dumps(answer)[:200]}")

    def close(self) -> None:
        try:
            self._send({"type": "exit"})
            self.process.stdin.close()
            self.process.wait(timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


# -- running ---------------------------------------------------------------------------------

def run_case(case: dict, driver) -> Outcome:
    """Run one case through ``driver`` (``InProcess`` or ``Adapter``), starting with
    its ``setup``. The outcome is ``skip`` when the adapter's ``ready`` does not declare
    the case's suite, declares it ``cannot`` do a feature the case needs, does not list
    in ``can`` a later step the case needs (``loader.case_needs``), or answers a run
    with ``skip``; otherwise ``fail`` at the first turn with a difference
    (the refused request or the error first, then the rest of that turn's differences),
    under the rule that difference breaks, or ``pass`` (README, "Outcomes")."""
    suite = case.get("suite", "core")
    rules = tuple(case.get("rules", ()))
    outcome = dict(case_id=case["id"], title=case["title"], suite=suite, rules=rules)
    calls, where = [], []
    for turn_number, turn in enumerate(case["turns"], 1):
        for call_number, call in enumerate(turn.get("model_calls", []), 1):
            calls.append(call)
            where.append(f"turn {turn_number}, model call {call_number} "
                         f"(request {len(calls)} of the case)")
    model = case.get("model", "conformance-model")
    profile = "profile" in case
    aspects = EVERY_ASPECT if profile else compared(case)

    def check(number: int, request) -> str | None:
        if number >= len(calls):
            return (f"request {number + 1} of the case was not expected: the case has "
                    f"{len(calls)} model call(s)")
        [problem, *_] = by_rule(lambda exact: [p] if (p := check_request(
            calls[number]["request"], request, model, exact=profile, aspects=exact)) else [],
            aspects) or [None]
        return Difference(f"{where[number]}: {problem}", problem.rule) if problem else None

    server = ReplayServer(case_replies(case), check=check, strict=case.get("profile")).start()
    try:
        ready = driver.setup(setup_message(case, server.base_url, API_KEY))
        if ready.get("type") != "ready":
            raise Mismatch(f"setup: expected a 'ready' answer, got {json.dumps(ready)[:200]}")
        outcome["implementation"] = ready.get("implementation", "")
        outcome["configured"] = tuple(str(c) for c in ready.get("configured") or ())
        skip = _declared_skip(case, suite, ready)
        if skip:
            return Outcome(status="skip", detail=skip, **outcome)
        derives = [d for d in ready.get("derives", []) if d in DERIVABLE]
        served, derived = 0, []
        for number, turn in enumerate(case["turns"], 1):
            end, updates = driver.run(run_message(turn))
            if end.get("type") == "skip":
                return Outcome(status="skip", detail=f"turn {number}: the adapter skipped it: "
                               f"{end.get('reason') or 'no reason given'}", **outcome)
            served += len(turn.get("model_calls", []))
            problems, found = _turn_problems(turn, number, end, updates, server, served,
                                             profile, derives, aspects)
            derived += found
            if problems:
                text = "\n  also: ".join(problems)
                raise Mismatch(text if text.startswith(f"turn {number},") else
                               f"turn {number}: {text}", getattr(problems[0], "rule", None))
        return Outcome(status="pass", derived=tuple(derived), **outcome)
    except Mismatch as exc:
        return Outcome(status="fail", detail=str(exc),
                       broke=exc.rule or (rules[0] if rules else "?"), **outcome)
    finally:
        server.stop()


def _turn_problems(turn, number, end, updates, server, served, profile, derives, aspects):
    """A turn's differences, the first real error first (README, "Order of a turn's
    checks"), and its differences in derived fields (``turn N: …``)."""
    problems = server.mismatches[:1]
    error = check_error(turn["expect"], end)
    if problems and (end.get("error") or {}).get("kind") == "ProviderError":
        error = None  # the refusal's consequence, already reported as the refusal
    if error and error not in problems:
        problems.append(error)
    if len(server.requests) != served:
        problems.append(f"the implementation made {len(server.requests)} model "
                        f"call(s) so far, expected {served}")
    try:
        rest = by_rule(lambda exact: check_turn(turn["expect"], end, updates, profile,
                                                derives, exact)[0], aspects)
        found = [] if rest else check_turn(turn["expect"], end, updates, profile,
                                           derives, aspects)[1]
    except (KeyError, TypeError, AttributeError) as exc:  # not the README's shapes
        raise Mismatch(f"turn {number}: an update or the end message is malformed "
                       f"({type(exc).__name__}: {exc})") from None
    problems += [p for p in rest if p != error]
    return problems, [f"turn {number}: {d}" for d in found]


def _declared_skip(case: dict, suite: str, ready: dict) -> str | None:
    """Why the adapter's ``ready`` declaration rules the case out, or ``None``."""
    suites = ready.get("suites", ["core"])
    if suite not in suites:
        return f"suite {suite!r} not declared (the adapter declares {', '.join(suites)})"
    cannot = ready.get("cannot") or {}
    can = ready.get("can") or []
    known = FEATURES + DECLARED_FEATURES
    for field, names in (("cannot", cannot), ("can", can)):
        unknown = sorted(set(names) - set(known))
        if unknown:  # an old or misspelt name would hide nothing and fail cases instead
            raise Mismatch(f"setup: {field!r} names unknown feature(s) {', '.join(unknown)} "
                           f"(the features are {', '.join(known)})")
    for need in case_needs(case):
        if need in cannot:
            return f"needs {need!r}, which the adapter declares it cannot do: {cannot[need]}"
        if need in DECLARED_FEATURES and need not in can:
            return (f"needs {need!r}, which the adapter does not list in 'can' (a step "
                    "added to the protocol after it, or one its framework cannot take)")
    return None


def run_all(make_driver, cases: list[dict] | None = None) -> list[Outcome]:
    """Run ``cases`` (default: every case) in order through drivers from
    ``make_driver()``. One driver serves case after case, each beginning with its
    ``setup``; after a failed case the driver is closed and the next case gets a new
    one, so an adapter left in a bad state cannot fail the cases after it."""
    outcomes, driver = [], None
    try:
        for case in cases if cases is not None else load_cases():
            driver = driver or make_driver()
            outcomes.append(run_case(case, driver))
            if outcomes[-1].status == "fail":
                driver.close()
                driver = None
    finally:
        if driver is not None:
            driver.close()
    return outcomes


def run_repeated(make_driver, cases: list[dict] | None = None,
                 times: int = 1) -> list[Outcome]:
    """``run_all`` ``times`` times. A case with one verdict every time keeps its first
    outcome; a case whose verdict varies fails, saying how often it got each verdict
    and the first failure's text (SPEC §8: a case that passes or fails by chance is a
    defect of the case, or a race in the implementation)."""
    runs = [run_all(make_driver, cases) for _ in range(max(times, 1))]
    outcomes = []
    for per_case in zip(*runs):
        verdicts = Counter(o.status for o in per_case)
        if len(verdicts) == 1:
            outcomes.append(per_case[0])
            continue
        tally = ", ".join(f"{status} {n}" for status, n in sorted(verdicts.items()))
        number, failed = next((n, o) for n, o in enumerate(per_case, 1) if o.status == "fail")
        outcomes.append(dataclasses.replace(
            per_case[0], status="fail",
            detail=f"the verdict varies over {len(per_case)} runs ({tally}); run {number}: "
                   f"{failed.detail}"))
    return outcomes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance",
        description="Check an implementation of the agentflow approval flow against the "
                    "recorded cases in conformance/cases.",
        epilog="python -m conformance replay CASE [--trace | --mermaid] runs one case "
               "against agentflow and prints its updates (or its sequence diagram).")
    parser.add_argument("--adapter", metavar="CMD",
                        help="run the cases against another implementation through the "
                             "JSON-lines protocol of conformance/README.md")
    parser.add_argument("--case", action="append", metavar="ID",
                        help="run only this case (repeatable)")
    parser.add_argument("--profiles", action="store_true",
                        help="run the provider-profile cases of conformance/profiles instead")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run every case N times; a case whose verdict varies fails")
    parser.add_argument("--json", metavar="PATH",
                        help="also write every outcome to PATH as JSON (for PEERS.md)")
    args = parser.parse_args(argv)
    cases = load_cases(PROFILE_CASES if args.profiles else CASES)
    if args.case:
        cases = [c for c in cases if c["id"] in args.case]
    make_driver = (lambda: Adapter(args.adapter)) if args.adapter else InProcess
    outcomes = run_repeated(make_driver, cases, args.repeat)
    report(outcomes)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump([dataclasses.asdict(o) for o in outcomes], handle, indent=1)
    return 1 if any(o.status == "fail" for o in outcomes) else 0
