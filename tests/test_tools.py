"""Tests of ``@tool`` / ``FunctionTool`` / ``ApprovalRequiredTool`` / ``Tool``.

SPEC §3: ``Tool`` has ``name, description, parameters (JSON schema),
invoke(arguments: dict) -> str, requires_approval() -> bool``; ``FunctionTool`` /
``@tool`` is "a tool made from a plain Python function; schema from type hints,
description from the docstring"; ``ApprovalRequiredTool`` "wraps any ``Tool``;
``requires_approval()`` is ``True``". R3 makes the loop pause for tools whose
``requires_approval()`` is true; R2 runs the others.
"""

from __future__ import annotations

import json
from typing import Literal, Optional

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalRequiredTool,
                       ChatClientAgent, Finish, FinishReason, FunctionTool,
                       OpenAIChatClient, Tool, ToolApprovalRequest,
                       ToolApprovalResponse, ToolResult, tool)
from agentflow.testing.replay import ReplayServer, chat_stream


# -- name and description ------------------------------------------------------------

def test_name_is_the_function_name():
    """SPEC §3 FunctionTool: a tool made from a plain function; its name is the
    function's ``__name__``."""
    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return path

    assert isinstance(read_file, FunctionTool)
    assert isinstance(read_file, Tool)
    assert read_file.name == "read_file"


def test_description_is_the_docstrings_first_paragraph():
    """SPEC §3 FunctionTool: "description from the docstring" — the first paragraph
    only (wrapped lines joined), not the later paragraphs or the Args section."""
    @tool
    def search(query: str) -> str:
        """Search the web for a query
        and return the top hits.

        The results are plain text, one per line.

        Args:
            query: what to look for.
        """
        return query

    assert search.description == "Search the web for a query and return the top hits."


def test_no_docstring_gives_empty_description():
    """SPEC §3 FunctionTool: the description comes from the docstring; a function
    without one has an empty description (a str, never None)."""
    @tool
    def ping() -> str:
        return "pong"

    assert ping.description == ""


def test_tool_with_name_and_description_overrides():
    """SPEC §3 ``@tool``: ``@tool(name=..., description=...)`` overrides the function's
    name and docstring, and the schema is still read off the signature."""
    @tool(name="fs_read", description="Read a text file from the workspace.")
    def read_file(path: str) -> str:
        """Something else entirely."""
        return f"contents of {path}"

    assert isinstance(read_file, FunctionTool)
    assert read_file.name == "fs_read"
    assert read_file.description == "Read a text file from the workspace."
    assert read_file.parameters == {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    assert read_file.invoke({"path": "a.txt"}) == "contents of a.txt"


def test_tool_override_name_only_keeps_docstring_description():
    """SPEC §3 ``@tool``: overriding only the name leaves the docstring's description."""
    @tool(name="renamed")
    def original(x: int) -> int:
        """Double a number."""
        return 2 * x

    assert original.name == "renamed"
    assert original.description == "Double a number."


# -- schema from type hints ----------------------------------------------------------

def _props(t: Tool) -> dict:
    return t.parameters["properties"]


def test_scalar_types():
    """SPEC §3 FunctionTool: "schema from type hints" — str, int, float, bool map to
    JSON schema string, integer, number, boolean; the schema is a ``type: object``."""
    @tool
    def f(s: str, i: int, x: float, b: bool) -> str:
        """Scalars."""
        return ""

    assert f.parameters == {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
        },
        "required": ["s", "i", "x", "b"],
        "additionalProperties": False,
    }


def test_list_types():
    """SPEC §3 FunctionTool: ``list[str]`` / ``list[int]`` are arrays with typed items."""
    @tool
    def f(names: list[str], counts: list[int]) -> str:
        """Lists."""
        return ""

    assert _props(f) == {
        "names": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "array", "items": {"type": "integer"}},
    }


def test_dict_types():
    """SPEC §3 FunctionTool: a bare ``dict`` is an object; ``dict[str, int]`` is an
    object whose values are integers (``additionalProperties``)."""
    @tool
    def f(anything: dict, scores: dict[str, int]) -> str:
        """Dicts."""
        return ""

    assert _props(f) == {
        "anything": {"type": "object"},
        "scores": {"type": "object", "additionalProperties": {"type": "integer"}},
    }


def test_optional_and_pipe_none_are_nullable():
    """SPEC §3 FunctionTool: ``Optional[int]`` and ``int | None`` are both a nullable
    integer; with a ``None`` default they are optional and the default is recorded."""
    @tool
    def f(a: Optional[int], b: int | None, c: Optional[int] = None,
          d: int | None = None) -> str:
        """Nullable."""
        return ""

    nullable_int = {"type": ["integer", "null"]}
    props = _props(f)
    assert props["a"] == nullable_int
    assert props["b"] == nullable_int
    assert props["c"] == {**nullable_int, "default": None}
    assert props["d"] == {**nullable_int, "default": None}
    assert f.parameters["required"] == ["a", "b"]


def test_literal_is_enum_with_type():
    """SPEC §3 FunctionTool: ``Literal["a", "b"]`` is an enum of those values carrying
    their JSON type."""
    @tool
    def f(mode: Literal["a", "b"]) -> str:
        """Enum."""
        return mode

    assert _props(f)["mode"] == {"type": "string", "enum": ["a", "b"]}
    assert f.parameters["required"] == ["mode"]


def test_default_makes_parameter_optional_and_is_recorded():
    """SPEC §3 FunctionTool: a parameter with a default is optional (not in
    ``required``) and its default is recorded in the schema; parameters without a
    default are required, in signature order."""
    @tool
    def read_lines(path: str, start: int = 0, count: int = 10,
                   encoding: str = "utf-8", strict: bool = False) -> str:
        """Read some lines."""
        return ""

    assert read_lines.parameters == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "start": {"type": "integer", "default": 0},
            "count": {"type": "integer", "default": 10},
            "encoding": {"type": "string", "default": "utf-8"},
            "strict": {"type": "boolean", "default": False},
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_all_defaults_means_no_required_list_entries():
    """SPEC §3 FunctionTool: when every parameter has a default nothing is required."""
    @tool
    def f(a: int = 1, b: str = "x") -> str:
        """All optional."""
        return ""

    assert f.parameters.get("required", []) == []
    assert set(_props(f)) == {"a", "b"}


def test_schema_is_valid_json():
    """SPEC §3 Tool: ``parameters`` is a JSON schema, so it must survive JSON encoding
    unchanged (it is sent to the provider in the request body)."""
    @tool
    def f(a: Optional[int], mode: Literal["x", "y"] = "x", tags: list[str] | None = None,
          scores: dict[str, int] | None = None) -> str:
        """Mixed."""
        return ""

    assert json.loads(json.dumps(f.parameters)) == f.parameters


class Unsupported:
    pass


def test_unsupported_annotation_raises_type_error_naming_parameter():
    """SPEC §3 FunctionTool: the schema is read from the type hints; an annotation with
    no JSON-schema form raises ``TypeError`` that names the offending parameter."""
    def f(fine: str, weird: Unsupported) -> str:
        """Bad."""
        return ""

    with pytest.raises(TypeError) as info:
        tool(f)
    assert "weird" in str(info.value)
    assert "'fine'" not in str(info.value)


def test_unsupported_set_annotation_raises_type_error_naming_parameter():
    """SPEC §3 FunctionTool: ``set[int]`` has no JSON schema form here either; the
    ``TypeError`` names the parameter (also through ``FunctionTool(...)`` directly)."""
    def g(items: set[int]) -> str:
        """Bad."""
        return ""

    with pytest.raises(TypeError, match="items"):
        FunctionTool(g)


# -- parameter descriptions from docstrings ------------------------------------------

def test_google_args_section_gives_parameter_descriptions():
    """SPEC §3 FunctionTool (description from the docstring): a Google-style ``Args:``
    section describes each parameter; a wrapped continuation line is joined to the
    parameter's description; ``name (type):`` is accepted; the summary stays the first
    paragraph."""
    @tool
    def copy_file(src: str, dst: str, overwrite: bool = False) -> str:
        """Copy a file.

        Args:
            src: the file to copy, relative to
                the working directory.
            dst (str): where to put the copy.
            overwrite: replace ``dst`` when it exists.

        Returns:
            A short confirmation.
        """
        return ""

    props = _props(copy_file)
    assert copy_file.description == "Copy a file."
    assert props["src"] == {"type": "string",
                            "description": "the file to copy, relative to the working directory."}
    assert props["dst"] == {"type": "string", "description": "where to put the copy."}
    assert props["overwrite"] == {"type": "boolean", "default": False,
                                  "description": "replace ``dst`` when it exists."}


def test_sphinx_param_lines_give_parameter_descriptions():
    """SPEC §3 FunctionTool (description from the docstring): Sphinx ``:param x:``
    lines (with or without a type) describe parameters; ``:type:`` / ``:returns:``
    lines are not parameter descriptions."""
    @tool
    def resize(width: int, height: int, keep_ratio: bool = True) -> str:
        """Resize the current image.

        :param width: new width in pixels.
        :param int height: new height in pixels.
        :type height: int
        :param keep_ratio: keep the aspect ratio.
        :returns: a confirmation.
        """
        return ""

    props = _props(resize)
    assert resize.description == "Resize the current image."
    assert props["width"] == {"type": "integer", "description": "new width in pixels."}
    assert props["height"] == {"type": "integer", "description": "new height in pixels."}
    assert props["keep_ratio"] == {"type": "boolean", "default": True,
                                   "description": "keep the aspect ratio."}
    assert resize.parameters["required"] == ["width", "height"]


def test_parameter_descriptions_do_not_leak_between_tools():
    """SPEC §3 FunctionTool: each tool's schema comes from its own function; parsing one
    docstring must not change how another (with the same parameter name) is parsed."""
    @tool
    def first(path: str, mode: str) -> str:
        """First.

        Args:
            path: first path
                continued here.
            mode: first mode.
        """
        return ""

    @tool
    def second(path: str, mode: str) -> str:
        """Second.

        Args:
          path: second path.
          mode: second mode.
        """
        return ""

    assert _props(first)["path"]["description"] == "first path continued here."
    assert _props(first)["mode"]["description"] == "first mode."
    assert _props(second)["path"]["description"] == "second path."
    assert _props(second)["mode"]["description"] == "second mode."


# -- invoke and calling ---------------------------------------------------------------

def test_invoke_calls_function_with_keywords():
    """SPEC §3 Tool: ``invoke(arguments: dict) -> str`` runs the function with the
    model's arguments as keywords (order in the dict does not matter)."""
    seen = {}

    @tool
    def move(src: str, dst: str, force: bool = False) -> str:
        """Move a file."""
        seen.update(src=src, dst=dst, force=force)
        return f"moved {src} -> {dst}"

    assert move.invoke({"dst": "b.txt", "src": "a.txt"}) == "moved a.txt -> b.txt"
    assert seen == {"src": "a.txt", "dst": "b.txt", "force": False}
    assert move.invoke({"src": "x", "dst": "y", "force": True}) == "moved x -> y"
    assert seen["force"] is True


def test_invoke_json_encodes_non_str_results():
    """SPEC §3 Tool: ``invoke`` returns a str; a function returning something else has
    its value sent as JSON."""
    @tool
    def stats(n: int) -> dict:
        """Stats."""
        return {"n": n, "squares": [i * i for i in range(n)], "ok": True, "none": None}

    @tool
    def count(n: int) -> int:
        """Count."""
        return n + 1

    result = stats.invoke({"n": 3})
    assert isinstance(result, str)
    assert json.loads(result) == {"n": 3, "squares": [0, 1, 4], "ok": True, "none": None}
    assert count.invoke({"n": 41}) == "42"


def test_invoke_returns_str_result_unchanged():
    """SPEC §3 Tool: a str result is the text sent to the model, exactly (not quoted
    as JSON)."""
    @tool
    def greet(name: str) -> str:
        """Greet."""
        return f"hello {name}"

    assert greet.invoke({"name": "Ada"}) == "hello Ada"


def test_decorated_function_stays_callable():
    """SPEC §3 ``@tool``: the decorated object still works as the plain function,
    positionally and by keyword."""
    @tool
    def add(a: int, b: int = 2) -> int:
        """Add."""
        return a + b

    assert add(1, 2) == 3
    assert add(5) == 7
    assert add(a=1, b=10) == 11


def test_plain_tool_does_not_require_approval():
    """SPEC R3 / §3 Tool: ``requires_approval()`` is False for a plain tool."""
    @tool
    def safe(x: str) -> str:
        """Safe."""
        return x

    assert safe.requires_approval() is False


# -- ApprovalRequiredTool -------------------------------------------------------------

def test_approval_required_tool_wraps_a_tool():
    """SPEC §3 ApprovalRequiredTool: wraps any Tool; keeps its name, description and
    parameters; ``requires_approval()`` is True; ``invoke`` delegates to the tool."""
    calls = []

    @tool
    def run_command(command: str, timeout: int = 30) -> str:
        """Run a shell command.

        Args:
            command: the command line.
        """
        calls.append((command, timeout))
        return f"ran {command}"

    wrapped = ApprovalRequiredTool(run_command)
    assert isinstance(wrapped, Tool)
    assert wrapped.name == "run_command"
    assert wrapped.description == "Run a shell command."
    assert wrapped.parameters == run_command.parameters
    assert wrapped.parameters["properties"]["command"]["description"] == "the command line."
    assert wrapped.requires_approval() is True
    assert run_command.requires_approval() is False
    assert wrapped.invoke({"command": "ls"}) == "ran ls"
    assert calls == [("ls", 30)]


def test_approval_required_tool_accepts_plain_function():
    """SPEC §3 ApprovalRequiredTool: a plain function is accepted and made into a tool
    the same way ``@tool`` would."""
    def delete_file(path: str) -> dict:
        """Delete a file."""
        return {"deleted": path}

    wrapped = ApprovalRequiredTool(delete_file)
    assert wrapped.name == "delete_file"
    assert wrapped.description == "Delete a file."
    assert wrapped.parameters == {"type": "object",
                                  "properties": {"path": {"type": "string"}},
                                  "required": ["path"], "additionalProperties": False}
    assert wrapped.requires_approval() is True
    assert json.loads(wrapped.invoke({"path": "/tmp/x"})) == {"deleted": "/tmp/x"}


# -- a hand-written Tool subclass ------------------------------------------------------

class Counter(Tool):
    """A tool written by hand, without ``@tool``."""

    name = "counter"
    description = "Add to a running total and return it."
    parameters = {"type": "object",
                  "properties": {"amount": {"type": "integer"}},
                  "required": ["amount"]}

    def __init__(self):
        self.total = 0

    def invoke(self, arguments: dict) -> str:
        self.total += arguments["amount"]
        return str(self.total)


def test_hand_written_tool_subclass_basics():
    """SPEC §3 Tool: a subclass setting name/description/parameters and implementing
    ``invoke`` is a tool; it needs no approval unless it says so; it can be wrapped by
    ApprovalRequiredTool."""
    counter = Counter()
    assert counter.requires_approval() is False
    assert counter.invoke({"amount": 2}) == "2"
    assert counter.invoke({"amount": 3}) == "5"
    wrapped = ApprovalRequiredTool(counter)
    assert (wrapped.name, wrapped.description, wrapped.parameters) == (
        "counter", "Add to a running total and return it.", Counter.parameters)
    assert wrapped.requires_approval() is True
    assert wrapped.invoke({"amount": 1}) == "6"


def test_hand_written_tool_runs_in_agent_loop():
    """SPEC R2 with a hand-written ``Tool``: it is offered to the model with its
    name/description/parameters, a call to it is executed (no approval needed), and
    its result goes back to the model as ``tool(result)``."""
    counter = Counter()
    replies = [
        chat_stream(tool_calls=[("call_a", "counter", json.dumps({"amount": 7}))]),
        chat_stream(text="The total is 7."),
    ]
    with ReplayServer(replies) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key="k")
        agent = ChatClientAgent(client, tools=[counter])
        updates = list(agent.run("add 7", AgentSession()))
        requests = server.requests

    assert counter.total == 7
    offered = requests[0].json["tools"]
    assert offered == [{"type": "function", "function": {
        "name": "counter", "description": "Add to a running total and return it.",
        "parameters": Counter.parameters}}]
    results = [u for u in updates if isinstance(u, ToolResult)]
    assert [(r.call_id, r.name, r.result) for r in results] == [("call_a", "counter", "7")]
    sent = requests[1].json["messages"]
    assert sent[-1] == {"role": "tool", "content": "7", "tool_call_id": "call_a"}
    assert isinstance(updates[-1], Finish)
    assert updates[-1].finish_reason == FinishReason.STOP


def test_approval_required_hand_written_tool_pauses_then_runs():
    """SPEC R3/R4 with ``ApprovalRequiredTool`` around a hand-written Tool: the run
    pauses with a ToolApprovalRequest carrying the tool's description and parsed
    arguments, nothing runs; once approved, the resumed run executes it."""
    counter = Counter()
    replies = [
        chat_stream(tool_calls=[("call_b", "counter", json.dumps({"amount": 4}))]),
        chat_stream(text="Done."),
    ]
    with ReplayServer(replies) as server:
        client = OpenAIChatClient(model="m", base_url=server.base_url, api_key="k")
        agent = ChatClientAgent(client, tools=[ApprovalRequiredTool(counter)])
        session = AgentSession()
        first = list(agent.run("add 4", session))
        assert counter.total == 0
        requests = [u for u in first if isinstance(u, ToolApprovalRequest)]
        assert [(r.call_id, r.name, r.arguments, r.description) for r in requests] == [
            ("call_b", "counter", {"amount": 4}, "Add to a running total and return it.")]
        assert first[-1].finish_reason == FinishReason.AWAITING_APPROVAL
        options = AgentRunOptions().with_tool_approval_responses(
            [ToolApprovalResponse("call_b", True)])
        second = list(agent.run([], session, options))

    assert counter.total == 4
    assert [(u.call_id, u.result) for u in second if isinstance(u, ToolResult)] == [
        ("call_b", "4")]
    assert second[-1].finish_reason == FinishReason.STOP


def test_optional_literal_allows_null_in_the_enum_too():
    """A nullable enum must list null, or a strict validator refuses the null the type allows."""

    @tool
    def pick(mode: Optional[Literal["a", "b"]] = None) -> str:
        """Pick a mode."""
        return str(mode)

    assert pick.parameters["properties"]["mode"] == {
        "enum": ["a", "b", None], "type": ["string", "null"], "default": None}


def test_sphinx_params_right_after_the_summary_stay_out_of_the_description():
    @tool
    def pick(m: str) -> str:
        """Pick one.
        :param m: the mode.
        """
        return m

    assert pick.description == "Pick one."
    assert pick.parameters["properties"]["m"]["description"] == "the mode."


def test_the_decorated_function_keeps_its_name_and_docstring():
    @tool
    def greet(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    assert greet.__name__ == "greet"
    assert greet.__doc__ == "Say hello."
    assert greet("ann") == "hello ann"
