"""Tools: plain Python functions the model may call.

``@tool`` turns a function into a ``FunctionTool``: its name is the function's name,
its description the docstring's first paragraph, and its JSON schema is read off the
signature's type hints (a parameter with a default is optional). Parameter
descriptions come from a Google-style ``Args:`` section or ``:param name:`` lines.

``ApprovalRequiredTool(tool)`` wraps any tool so that the loop pauses for the caller's
decision before it runs (SPEC R3); ``ApprovalRequiredTool(tool, when=predicate)`` asks
only when ``predicate(arguments)`` says so (R18).

A tool may declare its *subject*, the one argument approval policies match patterns
against (R19): ``@tool(subject="command", subject_kind="shell")``.

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
import functools
import inspect
import json
import re
import types
import typing
import warnings

from .errors import ResultConversionError
from typing import Any, Callable, Literal, NamedTuple, Union

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
               "array": list, "object": dict, "null": type(None)}
SUPPORTED_ANNOTATIONS = ("str, int, float, bool, list[X], tuple[X, ...], tuple[X, Y], "
                         "dict[str, X], Literal[...], an Enum subclass, X | None, "
                         "Union[X, Y], Any")


class ToolDefinitionWarning(UserWarning):
    """A tool's function has a parameter its JSON schema cannot describe: one
    without a type annotation (offered as a string) or ``*args`` / ``**kwargs`` (not
    offered). Issued once, when the tool is made."""


class Tool:
    """A tool the model may call.

    Subclasses set ``name`` (str), ``description`` (str) and ``parameters`` (a JSON
    schema dict of ``type: object``), and implement ``invoke``.
    """

    name: str = ""
    description: str = ""
    parameters: dict = {"type": "object", "properties": {}}
    idempotent: bool = False  # running it twice does no more than once (SPEC R16)
    subject: str | None = None  # the argument policy patterns match (SPEC R19)
    subject_kind: str = "text"  # "shell", "path" or "text": how (agentflow.policy)
    workspace: str | None = None  # the folder relative paths are opened from (None: cwd)
    qualified_name: str | None = None  # the name policy rules use, if not name (MCP: s.t)
    expands_home: bool = False  # a path subject's "~/" is the home folder (MCP servers)

    def invoke(self, arguments: dict) -> str:
        """Run the tool.

        Args:
            arguments: the model's parsed arguments (dict, a JSON object), or the
                human's edited ones (SPEC R20).

        Returns:
            str: the text sent back to the model as the call's ``tool`` result.

        Raises:
            Exception: any; the loop reports it to the model as
                ``Error: <type>: <message>`` (SPEC R13).
            ResultConversionError: the work is done but its result cannot be turned
                into text (R16: the loop never invites a second run).
        """
        raise NotImplementedError

    def requires_approval(self) -> bool:
        """Whether a call may have to wait for the caller's approval (SPEC R3); when
        true, ``needs_approval`` decides for each call (R18)."""
        return False

    def needs_approval(self, arguments: dict) -> bool | str:
        """Whether this call waits for approval, asked once at the gate (SPEC R18).

        Args:
            arguments: the call's parsed arguments (dict).

        Returns:
            bool | str: truthy means approval is required; a non-empty str also says
            why (recorded and shown). The default is ``requires_approval()``.
        """
        return self.requires_approval()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


UNCONVERTED = "the tool ran; its result could not be converted: "  # SPEC R16


class Outcome(NamedTuple):
    """What a call produced: ``text`` sent to the model, and whether it ``failed``
    (an ``Error: …`` result, counted by SPEC R13)."""

    text: str
    failed: bool


def interrupted_text(tool: str) -> str:
    """The result of a call that started and never finished (SPEC R16).

    Args:
        tool: the tool's name (str).

    Returns:
        str: ``Error: interrupted: <tool> may have partly run and was not run again``.
    """
    return f"Error: interrupted: {tool} may have partly run and was not run again"


def run_tool(tool: Tool | None, call, before_running: Callable[[Any], None],
             on_interrupt: Callable[[], None]) -> Outcome:
    """Run one of the model's calls and turn what happens into the result text.

    Args:
        tool: the ``Tool`` the call names, or ``None`` when no tool has that name.
        call: the ``ToolCall``; its ``arguments`` (JSON text, ``""`` meaning ``{}``)
            must decode to an object.
        before_running: called with ``call`` right before the tool runs, never for a
            call that is refused first: the write-ahead record (SPEC R16). What it
            raises propagates, and the tool does not run.
        on_interrupt: called when ``KeyboardInterrupt`` or ``SystemExit`` leaves the
            tool, before it propagates (the loop stores ``Error: interrupted: …``).

    Returns:
        Outcome: ``Error: unknown tool '<name>'`` or ``Error: arguments are not valid
        JSON: …`` (failed, R14); ``Error: <Type>: <message>`` when the tool raises
        (failed, R13); ``the tool ran; its result could not be converted: …`` when
        it raised ``ResultConversionError`` or its result's ``str()`` failed (not
        failed, R16); else the result, ``str()`` of it when not a str.

    Raises:
        KeyboardInterrupt, SystemExit: from inside the tool, after ``on_interrupt``.
    """
    if tool is None:
        return Outcome(f"Error: unknown tool '{call.name}'", True)
    try:
        arguments = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError) as exc:
        return Outcome(f"Error: arguments are not valid JSON: {exc}", True)
    if not isinstance(arguments, dict):
        return Outcome("Error: arguments are not valid JSON: expected an object, got "
                       f"{type(arguments).__name__}", True)
    before_running(call)
    try:
        result = tool.invoke(arguments)
    except (KeyboardInterrupt, SystemExit):
        on_interrupt()
        raise
    except ResultConversionError as exc:
        return Outcome(UNCONVERTED + _text(exc), False)
    except Exception as exc:  # the model hears about it; the loop goes on (R13)
        return Outcome(f"Error: {type(exc).__name__}: {_text(exc)}", True)
    if isinstance(result, str):
        return Outcome(result, False)
    try:
        return Outcome(str(result), False)
    except Exception as exc:  # it ran: say so, never "Error" (R16)
        return Outcome(f"{UNCONVERTED}{type(exc).__name__}: {_text(exc)}", False)


def _text(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in when even that fails: what a tool raises must never
    break the loop or a save (R16)."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose message could not be read>"


class FunctionTool(Tool):
    """A tool made from a plain function.

    Args:
        func: the function; it is called with the model's arguments as keywords.
        name: defaults to ``func.__name__``.
        description: defaults to the docstring's first paragraph.
        idempotent: ``True`` when running it twice does no more than once (a read, a
            lookup): a call cut short by a crash is then run again on the next run
            instead of being answered ``Error: interrupted: …`` (SPEC R16).
        subject, subject_kind: the parameter approval policies match, and how (see
            ``tool``; SPEC R19).

    A return value that is not a str is sent to the model as JSON.
    """

    def __init__(self, func: Callable, name: str | None = None,
                 description: str | None = None, idempotent: bool = False,
                 subject: str | None = None, subject_kind: str = "text"):
        if not callable(func):
            raise TypeError(f"a FunctionTool needs a function, got {type(func).__name__}")
        name = name or getattr(func, "__name__", "")
        if not _NAME.fullmatch(name):
            raise ValueError(f"tool name {name!r} is not allowed: use 1 to 64 letters, "
                             "digits, '_' or '-' (OpenAI's rule); pass name=...")
        functools.update_wrapper(self, func)  # keeps __name__, __doc__ for introspection
        self.func = func
        self.name = name
        self.idempotent = idempotent
        summary, param_docs = _parse_docstring(inspect.getdoc(func) or "")
        self.description = description if description is not None else summary
        self.parameters = schema_from_signature(func, param_docs)
        self.subject, self.subject_kind = _check_subject(self.parameters, name, subject,
                                                         subject_kind)
        # Enum parameters get their member, not the raw value; found once, not per call.
        self._enums = {n: h for n, h in typing.get_type_hints(func).items()
                       if isinstance(h, type) and issubclass(h, enum.Enum)}

    def invoke(self, arguments: dict) -> str:
        result = self.func(**_check_arguments(self.parameters, arguments, self._enums))
        if isinstance(result, str):
            return result
        if isinstance(result, bytes):
            return result.decode("utf-8", "replace")
        try:
            return json.dumps(result, default=str)
        except Exception as exc:  # the function ran: say so, not "Error" (R16)
            raise ResultConversionError(f"{type(exc).__name__}: {exc}") from exc

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs)


class ApprovalRequiredTool(Tool):
    """Wraps ``tool`` (any ``Tool``, or a plain function) so that its calls wait for
    the caller's ``ToolApprovalResponse`` before they run (SPEC R3).

    Args:
        tool: the ``Tool`` or function.
        when: optional ``predicate(arguments: dict) -> bool | str``: a call waits only
            when it returns a true value (a non-empty str also says why, and is
            recorded). Evaluated once, at the gate, and its answer stored with the
            pending approval, so a resume never asks it again. A predicate that raises,
            or arguments that are not a JSON object, mean approval (fail closed; R18).
    """

    def __init__(self, tool: Tool | Callable, when: Callable[[dict], bool | str] | None = None):
        self.tool = tool if isinstance(tool, Tool) else FunctionTool(tool)
        if when is not None and not callable(when):
            raise TypeError(f"when must be a function of the arguments, got "
                            f"{type(when).__name__}")
        self.when = when
        self.name = self.tool.name
        self.description = self.tool.description
        self.parameters = self.tool.parameters
        self.idempotent = self.tool.idempotent
        self.subject = self.tool.subject
        self.subject_kind = self.tool.subject_kind
        self.workspace = self.tool.workspace
        self.qualified_name = self.tool.qualified_name
        self.expands_home = self.tool.expands_home

    def invoke(self, arguments: dict) -> str:
        return self.tool.invoke(arguments)

    def requires_approval(self) -> bool:
        return True

    def needs_approval(self, arguments: dict) -> bool | str:
        return True if self.when is None else self.when(arguments)


def tool(func: Callable | None = None, *, name: str | None = None,
         description: str | None = None, idempotent: bool = False,
         subject: str | None = None, subject_kind: str = "text"):
    """Decorator: ``@tool`` or ``@tool(name=..., ...)`` makes a ``FunctionTool`` of the
    function, which stays callable as before (SPEC §3).

    Args:
        func: the function, when used bare as ``@tool``.
        name: the tool's name (str); default the function's name.
        description: what the model is told (str); default the docstring's summary.
        idempotent: ``True`` when running it twice does no harm, so a call
            interrupted by a crash runs again instead of being answered
            ``Error: interrupted`` (SPEC R16).
        subject: the parameter (str) approval policies match (SPEC R19).
        subject_kind: how the subject is matched: ``"shell"`` command lines,
            ``"path"`` file paths or plain ``"text"``.

    Returns:
        FunctionTool, or a decorator that makes one when called with options only.

    Raises:
        TypeError: ``func`` is not callable (e.g. ``@tool("name")``), or an annotation
            has no JSON-schema form (see ``schema_from_signature``).
    """
    if func is None:
        return lambda f: FunctionTool(f, name=name, description=description,
                                      idempotent=idempotent, subject=subject,
                                      subject_kind=subject_kind)
    if not callable(func):
        raise TypeError(f"@tool decorates a function; got {type(func).__name__} (for a "
                        "name, write @tool(name=...))")
    return FunctionTool(func, name=name, description=description, idempotent=idempotent,
                        subject=subject, subject_kind=subject_kind)


def _check_subject(schema: dict, name: str, subject, kind: str) -> tuple:
    kinds = ("shell", "path", "text")
    if kind not in kinds:
        raise ValueError(f"subject_kind of {name} must be one of {', '.join(kinds)}, got "
                         f"{kind!r}")
    if subject is None:
        return None, kind
    prop = schema.get("properties", {}).get(subject)
    if prop is None:
        raise ValueError(f"the subject of {name} must be one of its parameters "
                         f"({', '.join(schema.get('properties', {})) or 'none'}), got "
                         f"{subject!r}")
    if prop.get("type") not in ("string", ["string", "null"]):
        raise ValueError(f"the subject {subject!r} of {name} must be a str parameter")
    return subject, kind


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


def _check_arguments(schema: dict, arguments: dict, enums: dict) -> dict:
    """Refuse arguments whose JSON type does not fit the schema (the model sent
    ``"five"`` for an int), and turn values of the ``enums`` parameters (name → Enum
    class) into members. The ``TypeError`` becomes the ``Error: …`` result the model
    sees (SPEC R13)."""
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
    (``ToolDefinitionWarning``, pointing at the function's ``def`` line).

    Raises:
        TypeError: an annotation with no JSON-schema form; the message names the
            parameter, lists the supported annotations and says what to use instead.
    """
    param_docs = param_docs or {}
    hints = typing.get_type_hints(func)
    properties: dict[str, dict] = {}
    required: list[str] = []
    for param in inspect.signature(func).parameters.values():
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


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into its first paragraph and per-parameter descriptions."""
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
