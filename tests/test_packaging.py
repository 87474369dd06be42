"""Packaging and public-surface tests.

SPEC §1: "Runtime dependency: ``requests`` only. ... Everything else (SSE parsing, the
replay server, JSON-schema from signatures) is written here, small and readable, with
the standard library." SPEC §3 lists the public names and their fields/members.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
import pathlib
import re
import sys

import pytest

import agentflow
from agentflow import (
    AgentRunOptions, ChatMessage, FinishReason, MessageRole, ToolApprovalResponse)
from agentflow.types import ToolCall

from helpers_source import nodes

PACKAGE_DIR = pathlib.Path(agentflow.__file__).resolve().parent

# SPEC §3 table, the four actors (SPEC §2), the loop's state machine and the errors
# (R11, §6): module path of each. The top level holds what a caller needs (issue 10:
# at most 30 names); the rest is reached by module path, as in requests.
SPEC_NAMES = {
    "MessageRole": "agentflow", "ToolCall": "agentflow.types", "ChatMessage": "agentflow",
    "FinishReason": "agentflow", "Usage": "agentflow.types",
    "AgentResponseUpdate": "agentflow", "TextDelta": "agentflow",
    "ReasoningDelta": "agentflow", "ToolCallStart": "agentflow", "ToolCallArgs": "agentflow",
    "ToolCallEnd": "agentflow", "ToolResult": "agentflow", "ToolApprovalRequest": "agentflow",
    "Finish": "agentflow", "ToolApprovalResponse": "agentflow",
    "AgentRunOptions": "agentflow", "Tool": "agentflow", "FunctionTool": "agentflow",
    "tool": "agentflow", "ApprovalRequiredTool": "agentflow", "AgentSession": "agentflow",
    "ContextProvider": "agentflow", "ChatClientAgent": "agentflow",
    "FunctionInvokingChatClient": "agentflow", "OpenAIChatClient": "agentflow",
    "LoopState": "agentflow.function_invoking", "ProviderError": "agentflow",
    "IncompleteStreamError": "agentflow.errors", "ApprovalError": "agentflow",
}


# -- the distribution ------------------------------------------------------------------

# The distribution's name on the package index; the import name stays ``agentflow``
# (issue 22: ``agentflow`` on the public index is an unrelated project).
DISTRIBUTION = "agentflow-approvals"

def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def test_distribution_depends_on_requests_alone():
    """SPEC §1: "Runtime dependency: ``requests`` only." — the installed distribution
    ``agentflow-approvals`` declares exactly one requirement, ``requests`` (no extras, no
    markers that would add others)."""
    requires = importlib.metadata.requires(DISTRIBUTION)
    assert requires is not None
    core = [r for r in requires if "extra ==" not in r]  # optional extras: agentflow[mcp]
    assert [_requirement_name(r) for r in core] == ["requests"]
    assert all(";" not in r for r in core), requires


def test_distribution_metadata_matches_package():
    """SPEC §1: the installed distribution is this package (same version), so the
    dependency check above is about the code under test."""
    assert importlib.metadata.version(DISTRIBUTION) == agentflow.__version__


# -- public names ----------------------------------------------------------------------

@pytest.mark.parametrize("name", SPEC_NAMES)
def test_public_name_importable(name):
    """SPEC §3: every public name is importable from its module; those at the top level
    are listed in ``__all__``, the others are not at the top level at all."""
    module = importlib.import_module(SPEC_NAMES[name])
    assert hasattr(module, name), name
    assert (name in agentflow.__all__) == (SPEC_NAMES[name] == "agentflow"), name


def test_the_top_level_is_small():
    """Issue 10: at most 30 names at the top level, and every one of them is there."""
    assert len(agentflow.__all__) <= 30
    assert all(hasattr(agentflow, name) for name in agentflow.__all__)
    internals = {"LoopEvent", "LoopStateError", "ApprovalLedger", "PendingApproval",
                 "arguments_digest", "LoopState"}
    assert not internals & set(dir(agentflow))


def test_errors_are_exceptions():
    """SPEC R11/§6: ``ApprovalError``, ``ProviderError`` and ``IncompleteStreamError``
    are raised, so they are Exception subclasses."""
    import agentflow.errors
    for name in ("ProviderError", "IncompleteStreamError", "ApprovalError"):
        assert issubclass(getattr(agentflow.errors, name), Exception), name


def test_update_types_are_dataclasses_of_the_base():
    """SPEC §3: ``AgentResponseUpdate`` is the base class of the updates; they are plain
    dataclasses with the listed fields, in order (``digest`` added by issue 5: the
    arguments a decision is bound to)."""
    expected = {
        "TextDelta": ["text"],
        "ReasoningDelta": ["text"],
        "ToolCallStart": ["call_id", "name", "index"],
        "ToolCallArgs": ["call_id", "delta"],
        "ToolCallEnd": ["call_id"],
        "ToolResult": ["call_id", "name", "result"],
        "ToolApprovalRequest": ["call_id", "name", "arguments", "description", "digest",
                                "request_id"],
        "Finish": ["finish_reason", "usage", "message", "model"],  # the last two: a turn's
    }
    for name, fields in expected.items():
        cls = getattr(agentflow, name)
        assert issubclass(cls, agentflow.AgentResponseUpdate), name
        assert dataclasses.is_dataclass(cls), name
        assert [f.name for f in dataclasses.fields(cls)] == fields, name


def test_message_role_values_are_openai_strings():
    """SPEC §3 MessageRole: ``SYSTEM, USER, ASSISTANT, TOOL``; values are the OpenAI
    strings."""
    assert {m.name: m.value for m in MessageRole} == {
        "SYSTEM": "system", "USER": "user", "ASSISTANT": "assistant", "TOOL": "tool"}
    assert MessageRole("assistant") is MessageRole.ASSISTANT


def test_finish_reason_has_exactly_the_six_members():
    """SPEC §3 FinishReason: exactly ``STOP, LENGTH, CONTENT_FILTER, TOOL_CALLS,
    AWAITING_APPROVAL, MAX_ROUNDS``."""
    assert [m.name for m in FinishReason] == [
        "STOP", "LENGTH", "CONTENT_FILTER", "TOOL_CALLS", "AWAITING_APPROVAL",
        "MAX_ROUNDS"]


def test_tool_approval_response_reason_defaults_to_none():
    """SPEC §3 ToolApprovalResponse: ``call_id, approved, reason=None``."""
    response = ToolApprovalResponse("call_1", False)
    assert (response.call_id, response.approved, response.reason) == ("call_1", False, None)


# -- AgentRunOptions ---------------------------------------------------------------------

def test_with_tool_approval_responses_returns_new_options():
    """SPEC §3 AgentRunOptions: ``with_tool_approval_responses(list)`` returns a **new**
    options object carrying the responses; the original is unchanged and the other
    options are kept."""
    original = AgentRunOptions(max_rounds=5, model="m", temperature=0.2)
    responses = [ToolApprovalResponse("call_1", True),
                 ToolApprovalResponse("call_2", False, "no")]
    updated = original.with_tool_approval_responses(responses)

    assert updated is not original
    assert list(original.tool_approval_responses) == []
    assert list(updated.tool_approval_responses) == responses
    assert (updated.max_rounds, updated.model, updated.temperature) == (5, "m", 0.2)
    # Changing the caller's list afterwards does not reach into the options.
    responses.append(ToolApprovalResponse("call_3", True))
    assert len(updated.tool_approval_responses) == 2


def test_with_tool_approval_responses_on_default_options():
    """SPEC §3 / R4: ``AgentRunOptions().with_tool_approval_responses([...])`` is the
    resume idiom; defaults (``max_rounds`` 40, R8) carry over."""
    base = AgentRunOptions()
    updated = base.with_tool_approval_responses([ToolApprovalResponse("c", True)])
    assert base.tool_approval_responses == ()
    assert updated.max_rounds == 40
    assert [r.call_id for r in updated.tool_approval_responses] == ["c"]


# -- ChatMessage -------------------------------------------------------------------------

def test_chat_message_constructors():
    """SPEC §3 ChatMessage: constructors ``system/user/assistant/tool(result, call_id)``
    set role, content, tool_calls and tool_call_id."""
    system = ChatMessage.system("Be careful.")
    user = ChatMessage.user("Hi")
    assistant = ChatMessage.assistant("Hello")
    result = ChatMessage.tool("42", "call_9")

    assert (system.role, system.content) == (MessageRole.SYSTEM, "Be careful.")
    assert (user.role, user.content) == (MessageRole.USER, "Hi")
    assert (assistant.role, assistant.content, assistant.tool_calls) == (
        MessageRole.ASSISTANT, "Hello", [])
    assert (result.role, result.content, result.tool_call_id) == (
        MessageRole.TOOL, "42", "call_9")
    for message in (system, user, assistant):
        assert message.tool_call_id is None


def test_simple_messages_to_openai():
    """SPEC §3 ChatMessage: converts to the OpenAI dict form
    (``{"role": ..., "content": ...}``)."""
    assert ChatMessage.system("S").to_openai() == {"role": "system", "content": "S"}
    assert ChatMessage.user("U").to_openai() == {"role": "user", "content": "U"}
    assert ChatMessage.assistant("A").to_openai() == {"role": "assistant", "content": "A"}


def test_assistant_with_tool_calls_round_trip():
    """SPEC §3 ChatMessage / ToolCall: an assistant message with tool calls converts to
    OpenAI's form (``tool_calls`` with ``type: function`` and the raw ``arguments``
    text, byte for byte) and back to an equal message."""
    calls = [ToolCall("call_1", "echo", '{"text": "Freeing disk space"}'),
             ToolCall("call_2", "run_command", '{"command":"rm -rf /"}')]
    message = ChatMessage.assistant("I'll clear it out.", calls)
    wire = message.to_openai()
    assert wire == {
        "role": "assistant",
        "content": "I'll clear it out.",
        "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "echo", "arguments": '{"text": "Freeing disk space"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "run_command", "arguments": '{"command":"rm -rf /"}'}},
        ],
    }
    back = ChatMessage.from_openai(wire)
    assert back == message
    assert back.tool_calls[1].arguments == '{"command":"rm -rf /"}'  # raw text kept
    assert back.to_openai() == wire


def test_assistant_tool_calls_without_content_round_trip():
    """SPEC §3 ChatMessage: OpenAI sends ``content: null`` on an assistant turn that
    only calls tools; it round-trips as ``None``."""
    wire = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "call_x", "type": "function",
                            "function": {"name": "read_file",
                                         "arguments": '{"path": "a.txt"}'}}]}
    message = ChatMessage.from_openai(wire)
    assert message.role is MessageRole.ASSISTANT
    assert message.content is None
    assert message.tool_calls == [ToolCall("call_x", "read_file", '{"path": "a.txt"}')]
    assert message.to_openai() == wire


def test_tool_message_round_trip():
    """SPEC §3 ChatMessage: ``tool(result, call_id)`` converts to
    ``{"role": "tool", "content": result, "tool_call_id": call_id}`` and back."""
    message = ChatMessage.tool("Rejected: User denied", "call_1")
    wire = message.to_openai()
    assert wire == {"role": "tool", "content": "Rejected: User denied",
                    "tool_call_id": "call_1"}
    assert ChatMessage.from_openai(wire) == message


def test_from_openai_with_string_role():
    """SPEC §3 ChatMessage: the dict form carries the role as a string; it becomes the
    MessageRole member."""
    message = ChatMessage.from_openai({"role": "user", "content": "hi"})
    assert message.role is MessageRole.USER
    assert message == ChatMessage.user("hi")


# -- standard library only ------------------------------------------------------------------

ALLOWED_THIRD_PARTY = {"requests", "urllib3"}
EXTRA_IMPORTS = {  # an optional extra's packages
                 "sql.py": {"psycopg"}, "mcp.py": {"mcp", "httpx2"}, "mcp_listing.py": {"mcp"},
                 "tracing.py": {"opentelemetry"}, "telemetry.py": {"opentelemetry"}}


def _top_level_imports(path: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for node in nodes(path):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_package_files_found():
    """Guard for the scan below: it really reads the package's modules."""
    files = {p.name for p in PACKAGE_DIR.rglob("*.py")}
    assert {"__init__.py", "tools.py", "types.py", "openai_client.py"} <= files


@pytest.mark.parametrize("path", sorted(PACKAGE_DIR.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_module_imports_only_stdlib_and_requests(path):
    """SPEC §1: runtime dependency ``requests`` only; everything else is standard
    library. Every absolute import of every module (at any depth, including inside
    functions) is the standard library, ``requests`` / ``urllib3`` (which requests
    brings), or agentflow itself."""
    allowed = (set(sys.stdlib_module_names) | ALLOWED_THIRD_PARTY | {"agentflow"}
               | EXTRA_IMPORTS.get(path.name, set()))
    outside = sorted(_top_level_imports(path) - allowed)
    assert outside == [], f"{path.name} imports {outside}"


def test_the_distribution_provides_the_agentflow_package_and_command():
    """The distribution installs the ``agentflow`` import package and its console script,
    and keeps the extras' names (``[mcp]``, ``[postgres]``, ``[otel]``, ``[otel-export]``)."""
    dist = importlib.metadata.distribution(DISTRIBUTION)
    scripts = {e.name: e.value for e in dist.entry_points if e.group == "console_scripts"}
    assert scripts == {"agentflow": "agentflow.cli.main:main"}
    assert set(dist.metadata.get_all("Provides-Extra")) == {"mcp", "postgres", "otel",
                                                            "otel-export"}


def test_the_readme_never_installs_the_unrelated_agentflow_from_the_index():
    """Until ``agentflow-approvals`` is published, the README installs from a checkout: no
    ``pip install agentflow…`` line names the index's unrelated ``agentflow``."""
    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    lines = re.findall(r"pip install ([^`\n]*)", readme)
    assert lines
    assert [line for line in lines if re.match(r"['\"]?agentflow\b(?!-approvals)", line)] == []


def test_help_and_messages_never_name_the_taken_distribution():
    """Issue 34: ``agentflow chat --help`` said "needs agentflow[mcp]", the extra of the
    index's unrelated ``agentflow``; help texts, messages and docstrings name
    ``agentflow-approvals`` (or a checkout's ``.[mcp]``)."""
    import contextlib
    import io
    from agentflow.cli.main import main
    taken = re.compile(r"(?<![\w.-])agentflow\[")
    helps = []
    for command in (["--help"], ["chat", "--help"], ["worker", "--help"],
                    ["policy", "check", "--help"]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            main(command)
        helps.append(out.getvalue())
    assert "agentflow-approvals" in helps[1]
    assert [h for h in helps if taken.search(h)] == []
    sources = [p for p in PACKAGE_DIR.rglob("*.py") if taken.search(p.read_text("utf-8"))]
    assert sources == []


# -- the repository (issue 34) -------------------------------------------------------------

REPO = PACKAGE_DIR.parent
# What a run of agentflow in a checkout writes: stores, and a session file's lock and
# revision marks (a session file itself is any JSON, so it is caught by its marks).
RUN_LEFTOVERS = re.compile(r"(\.db|\.db-(journal|wal|shm)|\.sqlite3?|\.json\.(lock|rev))$")


def _git(*args) -> str:
    import subprocess
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0 or not (REPO / ".git").exists():
        pytest.skip(f"not a git checkout: {done.stderr.strip()}")
    return done.stdout


def test_the_repository_holds_no_store_or_session_and_ignores_them():
    """A fresh clone's ``agentflow pending --store sqlite:///sessions.db`` (the README's
    command) lists nothing: no database or session mark is committed, and what a run
    writes there stays out of ``git status``."""
    assert [f for f in _git("ls-files").splitlines() if RUN_LEFTOVERS.search(f)] == []
    made = ["sessions.db", "sessions.db-wal", "s.json.lock", "s.json.rev", "x.sqlite3"]
    assert _git("check-ignore", "--no-index", *made).split() == made
