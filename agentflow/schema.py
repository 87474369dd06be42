"""A tool's JSON schema: read off a function's signature and docstring, and checked
against arguments (SPEC R14, R20).

``schema_from_signature`` turns type hints into a JSON schema (a parameter with a
default is optional); ``parse_docstring`` reads the description and a Google-style
``Args:`` section or ``:param name:`` lines. ``schema_errors`` checks a value against a
schema (an edited call before it runs, R20); ``check_arguments`` checks the model's
arguments' JSON types before a ``FunctionTool`` runs.

What the schema cannot say is reported when the tool is made, not when the model calls
it: an annotation with no JSON-schema form (``datetime``, ``set[int]``, ``bytes``, a
class) is a ``TypeError`` listing the supported ones, because no schema would be true.
A parameter without an annotation (and without a str/int/float/bool default to infer
the type from) and ``*args`` / ``**kwargs`` are a ``ToolDefinitionWarning``: the tool
still works (the first is offered as a string, the others are not offered), but the
model cannot know better than the schema. Make them errors with
``warnings.simplefilter("error", ToolDefinitionWarning)``.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
import warnings
from typing import Any, Callable, Literal, Union

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
_JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
               "array": list, "object": dict, "null": type(None)}
SUPPORTED_ANNOTATIONS = ("str, int, float, bool, list[X], tuple[X, ...], tuple[X, Y], "
                         "dict[str, X], Literal[...], an Enum subclass, X | None, "
                         "Union[X, Y], Any")


class ToolDefinitionWarning(UserWarning):
    """A tool's function has a parameter its JSON schema cannot describe: one
    without a type annotation (offered as a string) or ``*args`` / ``**kwargs`` (not
    offered). Issued once, when the tool is made."""


# -- JSON schema from a signature ------------------------------------------------------

def schema_from_signature(func: Callable, param_docs: dict[str, str] | None = None) -> dict:
    """The JSON schema (dict) of ``func``'s keyword arguments, from its type hints.

    Args:
        func: the function (callable) whose signature is read.
        param_docs: a description (str) per parameter name, e.g. from the docstring's
            ``Args:`` section; ``None`` means none.

    Supported: ``SUPPORTED_ANNOTATIONS`` (str, int, float, bool, list[X], tuple,
    dict / dict[str, X], Literal[...] and Enum as enums, Optional[X] and ``X | None``
    as nullable, Union, Any). A parameter without a default is required. Without an
    annotation the type is read from a str/int/float/bool default, else it is
    ``string``; ``*args``/``**kwargs`` are not offered. Both warn
    (``ToolDefinitionWarning``, pointing at the function's ``def`` line). Without a
    ``**kwargs`` the schema says ``"additionalProperties": false``: an argument the
    function does not take is refused before it runs, an edited one too (SPEC R20).

    Raises:
        TypeError: an annotation with no JSON-schema form; the message names the
            parameter, lists the supported annotations and says what to use instead.
    """
    param_docs = param_docs or {}
    hints = typing.get_type_hints(func)
    properties: dict[str, dict] = {}
    required: list[str] = []
    takes_more = False
    for param in inspect.signature(func).parameters.values():
        takes_more = takes_more or param.kind is param.VAR_KEYWORD
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            _warn(func, f"{func.__name__}({star}{param.name}): the model cannot pass "
                        f"{star}{param.name}, so it is left out of the tool's schema; name "
                        "each parameter the model may pass instead")
            continue
        annotation = hints.get(param.name)
        if annotation is None:
            default = param.default
            annotation = (type(default) if type(default) in _SCALARS else str)
            if annotation is str and not isinstance(default, str):
                _warn(func, f"parameter {param.name!r} of {func.__name__} has no type "
                            "annotation, so the model is told it is a string; annotate it, "
                            f"e.g. {param.name}: str (supported: {SUPPORTED_ANNOTATIONS})")
        try:
            schema = _schema(annotation)
        except TypeError as exc:
            raise TypeError(f"parameter {param.name!r} of {func.__name__}: {exc}. "
                            f"Supported: {SUPPORTED_ANNOTATIONS}") from None
        if param.name in param_docs:
            schema["description"] = param_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        else:
            schema["default"] = param.default
        properties[param.name] = schema
    result = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    if not takes_more:
        result["additionalProperties"] = False
    return result


def _schema(annotation: Any) -> dict:
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [member.value for member in annotation]
        kinds = {_SCALARS.get(type(v)) for v in values}
        return {"enum": values, **({"type": kinds.pop()} if len(kinds) == 1 else {})}
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        return {"type": "array", "prefixItems": [_schema(a) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    if annotation in (list, tuple) or origin in (list, tuple):
        return {"type": "array", "items": _schema(args[0])} if args else {"type": "array"}
    if annotation is dict or origin is dict:
        if len(args) == 2:
            return {"type": "object", "additionalProperties": _schema(args[1])}
        return {"type": "object"}
    if origin is Literal:
        kinds = {_SCALARS.get(type(value)) for value in args}
        schema: dict = {"enum": list(args)}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1 and len(args) == 2:
            inner = _schema(options[0])
            if "enum" in inner:
                inner["enum"] = [*inner["enum"], None]
            if isinstance(inner.get("type"), str):
                return {**inner, "type": [inner["type"], "null"]}
            return {"anyOf": [inner, {"type": "null"}]}
        return {"anyOf": [_schema(a) if a is not type(None) else {"type": "null"}
                          for a in args]}
    if annotation is Any:
        return {}
    raise TypeError(f"no JSON schema for the annotation {_annotation_name(annotation)}"
                    f"{_instead(annotation)}")


def _annotation_name(annotation: Any) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


def _instead(annotation: Any) -> str:
    """What to annotate instead of an unsupported type, and convert in the function."""
    origin = typing.get_origin(annotation) or annotation
    if origin in (set, frozenset):
        return " (use list[X] and make the set inside the function)"
    if origin in (bytes, bytearray):
        return " (use str, e.g. base64 text, and decode it inside the function)"
    if getattr(origin, "__module__", "") == "datetime":
        return (" (use str, e.g. ISO 8601 text, and parse it inside the function with "
                f"{origin.__name__}.fromisoformat)")
    if isinstance(origin, type):
        return (" (take its fields as parameters, or a dict[str, X], and build the "
                "object inside the function)")
    return ""


def _warn(func: Callable, text: str) -> None:
    """Warn at the function's ``def`` line: that is what the author must change."""
    code = getattr(inspect.unwrap(func), "__code__", None)
    if code is None:
        warnings.warn(text, ToolDefinitionWarning, stacklevel=4)
    else:
        warnings.warn_explicit(text, ToolDefinitionWarning, code.co_filename,
                               code.co_firstlineno)


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_GOOGLE_PARAM = re.compile(r"^\s+(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[\w\[\], |]+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into its first paragraph and per-parameter descriptions.

    Args:
        doc: the docstring (str), as ``inspect.getdoc`` gives it; Google-style
            ``Args:`` sections and ``:param name:`` lines are read.

    Returns:
        tuple[str, dict[str, str]]: the summary (the first paragraph on one line) and
        a description per parameter name.
    """
    summary_lines = []
    for line in doc.strip().splitlines():
        if not line.strip() or _ARGS_HEADER.match(line) or _SPHINX_PARAM.match(line):
            break
        summary_lines.append(line.strip())
    params: dict[str, str] = {}
    indent_of: dict[str, int] = {}
    in_args = False
    current = None
    for line in doc.splitlines():
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if in_args:
            google = _GOOGLE_PARAM.match(line)
            indent = len(line) - len(line.lstrip())
            if not line.strip():
                continue
            if indent == 0:
                in_args = False
            elif google and (current is None or indent <= indent_of[current]):
                current = google.group(1).lstrip("*")
                params[current] = google.group(3).strip()
                indent_of[current] = indent
            elif current:
                params[current] = f"{params[current]} {line.strip()}".strip()
    return " ".join(summary_lines), params


# -- checking values against a schema ---------------------------------------------------

def schema_errors(schema: dict, value: Any, where: str = "arguments") -> list[str]:
    """What in ``value`` does not fit a JSON schema; checks an edited call before it
    runs (SPEC R20).

    Covers what ``schema_from_signature`` writes and the usual hand-written schemas:
    ``type`` (``integer`` excludes bool), ``properties``, ``required``,
    ``additionalProperties``, ``items``, ``prefixItems``, ``minItems`` / ``maxItems``,
    ``enum``, ``const``, ``anyOf`` / ``oneOf``; other keywords are ignored.

    Args:
        schema: the JSON schema (dict); an empty or non-dict schema accepts anything.
        value: the parsed JSON value to check.
        where: how messages name the value (str), e.g. ``"arguments"``.

    Returns:
        list[str]: one message per problem, empty when ``value`` fits.
    """
    if not isinstance(schema, dict) or not schema:
        return []
    for key in ("anyOf", "oneOf"):
        if key in schema:
            if not any(not schema_errors(option, value, where) for option in schema[key]):
                return [f"{where} fits none of the allowed shapes"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where} must be one of {json.dumps(schema['enum'])}, got "
                f"{json.dumps(value)[:80]}"]
    if "const" in schema and value != schema["const"]:
        return [f"{where} must be {json.dumps(schema['const'])}"]
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds or []
    if kinds and not any(_is_json_type(value, k) for k in kinds):
        return [f"{where} must be {' or '.join(kinds)}, got {json.dumps(value)[:80]}"]
    errors = []
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{where} lacks the required {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                errors += schema_errors(properties[name], item, f"{where}.{name}")
            elif extra is False:
                errors.append(f"{where} has {name!r}, which the tool does not take")
            elif isinstance(extra, dict):
                errors += schema_errors(extra, item, f"{where}.{name}")
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems",
                                                                               len(value)):
            errors.append(f"{where} has {len(value)} items, which is not allowed")
        prefix = schema.get("prefixItems", [])
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else schema.get("items")
            if sub is not None:
                errors += schema_errors(sub, item, f"{where}[{index}]")
    return errors


def _is_json_type(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(kind, object))


def check_arguments(schema: dict, arguments: dict, enums: dict) -> dict:
    """Refuse arguments whose JSON type does not fit the schema (the model sent
    ``"five"`` for an int), and turn values of the Enum parameters into members.

    Args:
        schema: the tool's JSON schema (dict, ``type: object``).
        arguments: the model's parsed arguments (dict).
        enums: the Enum class of each Enum parameter (dict, name -> class).

    Returns:
        dict: a copy of ``arguments``, Enum values replaced by their members.

    Raises:
        TypeError: an argument of the wrong JSON type; it becomes the ``Error: …``
            result the model sees (SPEC R13).
    """
    checked = dict(arguments)
    for name, value in arguments.items():
        prop = schema.get("properties", {}).get(name)
        if prop is None:
            continue
        kinds = prop.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds or []
        if kinds and not any(isinstance(value, _JSON_TYPES[k])
                             and not (k in ("integer", "number") and isinstance(value, bool))
                             for k in kinds):
            raise TypeError(f"argument {name!r} must be {' or '.join(kinds)}, got "
                            f"{json.dumps(value)[:80]}")
        if name in enums:
            checked[name] = enums[name](value)
    return checked
