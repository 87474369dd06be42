"""What ``@tool`` says about a function whose signature the JSON schema cannot
describe (issue 16; ``agentflow.tools`` module docstring): an unsupported annotation
is a ``TypeError`` that lists the supported ones and what to use instead; a parameter
without an annotation and ``*args`` / ``**kwargs`` are a ``ToolDefinitionWarning`` at
the function's ``def`` line, and the tool still works."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import warnings
from typing import Any, Literal, Union

import pytest

from agentflow import tool
from agentflow.tools import SUPPORTED_ANNOTATIONS, ToolDefinitionWarning


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Colour(enum.Enum):
    RED = "red"


def _error_for(annotation) -> str:
    def when(value):
        """A tool."""
        return ""
    when.__annotations__ = {"value": annotation}
    with pytest.raises(TypeError) as info:
        tool(when)
    return str(info.value)


@pytest.mark.parametrize("annotation, name, instead", [
    (datetime.datetime, "datetime", "use str, e.g. ISO 8601 text, and parse it inside the "
                                    "function with datetime.fromisoformat"),
    (datetime.date, "date", "use str, e.g. ISO 8601 text, and parse it inside the function "
                            "with date.fromisoformat"),
    (set[int], "set[int]", "use list[X] and make the set inside the function"),
    (frozenset[str], "frozenset[str]", "use list[X] and make the set inside the function"),
    (bytes, "bytes", "use str, e.g. base64 text, and decode it inside the function"),
    (Point, "Point", "take its fields as parameters, or a dict[str, X], and build the "
                     "object inside the function"),
    (list[datetime.datetime], "datetime", "use str, e.g. ISO 8601 text, and parse it "
                                          "inside the function with datetime.fromisoformat"),
])
def test_unsupported_annotation_lists_what_is_supported(annotation, name, instead):
    assert _error_for(annotation) == (
        f"parameter 'value' of when: no JSON schema for the annotation {name} ({instead}). "
        f"Supported: {SUPPORTED_ANNOTATIONS}")


def test_every_listed_annotation_is_supported():
    """The list in the message is true: each kind it names makes a schema."""
    def every(a: str, b: int, c: float, d: bool, e: list[int], f: tuple[int, ...],
              g: tuple[int, str], h: dict[str, int], i: Literal["x", "y"], j: Colour,
              k: int | None, m: Union[int, str], n: Any) -> str:
        """All of them."""
        return ""

    assert len(tool(every).parameters["properties"]) == 13


def _warnings_for(func) -> tuple[object, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = tool(func)
    return made, caught


def test_unannotated_parameter_warns_at_the_def_line_and_is_a_string():
    def lookup(key, limit=10, default=None) -> str:
        """Look a key up."""
        return f"{key} {limit} {default}"

    made, caught = _warnings_for(lookup)
    assert [str(w.message) for w in caught] == [
        f"parameter {name!r} of lookup has no type annotation, so the model is told it is "
        f"a string; annotate it, e.g. {name}: str (supported: {SUPPORTED_ANNOTATIONS})"
        for name in ("key", "default")]  # limit's type comes from its default
    assert {w.category for w in caught} == {ToolDefinitionWarning}
    assert {(w.filename, w.lineno) for w in caught} == {
        (__file__, lookup.__code__.co_firstlineno)}
    assert made.parameters["properties"] == {
        "key": {"type": "string"}, "limit": {"type": "integer", "default": 10},
        "default": {"type": "string", "default": None}}
    assert made.invoke({"key": "k"}) == "k 10 None"


def test_star_args_and_kwargs_warn_and_are_not_offered():
    def run(command: str, *argv, **options) -> str:
        """Run it."""
        return command

    made, caught = _warnings_for(run)
    assert [str(w.message) for w in caught] == [
        "run(*argv): the model cannot pass *argv, so it is left out of the tool's schema; "
        "name each parameter the model may pass instead",
        "run(**options): the model cannot pass **options, so it is left out of the tool's "
        "schema; name each parameter the model may pass instead"]
    assert made.parameters == {"type": "object", "properties": {"command": {"type": "string"}},
                               "required": ["command"]}


def test_fully_annotated_function_does_not_warn():
    def fine(path: str, count: int = 1, mode="r") -> str:
        """Fine: mode's type comes from its str default."""
        return path

    assert _warnings_for(fine)[1] == []


def test_warning_can_be_made_an_error():
    def loose(thing) -> str:
        """Loose."""
        return thing

    with warnings.catch_warnings():
        warnings.simplefilter("error", ToolDefinitionWarning)
        with pytest.raises(ToolDefinitionWarning, match="'thing' of loose has no type"):
            tool(loose)
