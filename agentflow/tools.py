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

The schema itself, what it cannot say (``ToolDefinitionWarning``) and the argument
checks live in ``schema.py``; this module keeps the tool types and running a call.
"""

from __future__ import annotations

import enum
import functools
import inspect
import json
import re
import typing
from typing import Any, Callable, NamedTuple

from .errors import ResultConversionError
from .schema import (SUPPORTED_ANNOTATIONS, ToolDefinitionWarning, check_arguments,
                     parse_docstring, schema_errors, schema_from_signature)

__all__ = ["Tool", "FunctionTool", "ApprovalRequiredTool", "tool", "run_tool", "Outcome",
           "interrupted_text", "ResultConversionError", "UNCONVERTED", "schema_errors",
           "schema_from_signature", "SUPPORTED_ANNOTATIONS", "ToolDefinitionWarning"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


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


def bad_call_text(tool: Tool | None, call) -> str | None:
    """The result of a call that can never run (SPEC R14), or ``None`` when it can.

    Args:
        tool: the ``Tool`` the call names, or ``None`` when no tool has that name.
        call: the ``ToolCall``.

    Returns:
        str | None: ``Error: unknown tool '<name>'``, or ``Error: arguments are not
        valid JSON: <detail>`` when the text is not a JSON object (such a call is
        never put to a person either, R18); ``None`` otherwise.
    """
    if tool is None:
        return f"Error: unknown tool '{call.name}'"
    try:
        arguments = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError) as exc:
        return f"Error: arguments are not valid JSON: {exc}"
    if not isinstance(arguments, dict):
        return ("Error: arguments are not valid JSON: expected an object, got "
                f"{type(arguments).__name__}")
    return None


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
    refused = bad_call_text(tool, call)
    if refused is not None:
        return Outcome(refused, True)
    arguments = json.loads(call.arguments or "{}")
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
        summary, param_docs = parse_docstring(inspect.getdoc(func) or "")
        self.description = description if description is not None else summary
        self.parameters = schema_from_signature(func, param_docs)
        self.subject, self.subject_kind = _check_subject(self.parameters, name, subject,
                                                         subject_kind)
        # Enum parameters get their member, not the raw value; found once, not per call.
        self._enums = {n: h for n, h in typing.get_type_hints(func).items()
                       if isinstance(h, type) and issubclass(h, enum.Enum)}

    def invoke(self, arguments: dict) -> str:
        result = self.func(**check_arguments(self.parameters, arguments, self._enums))
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


