"""[e] at the approval prompt: edit a call's arguments, check the edit, show the diff,
and approve the edited call (SPEC R20)."""

from __future__ import annotations

import json
import os
import shlex

from ..display import needs_escaping, safe_text
from ..types import ToolApprovalResponse
from .terminal import read, read_prefilled


def edit(chat, request, approver) -> ToolApprovalResponse | None:
    """[e]: edit a call's arguments, show the diff, and approve the edited call
    (SPEC R20). A lone one-line subject is edited on the prompt line, starting from
    its current value; anything else (several lines, control characters, other
    arguments) opens the editor.

    Args:
        chat: the ``Chat``.
        request: the ``ToolApprovalRequest``.
        approver: the user's name (str or ``None``).

    Returns:
        ToolApprovalResponse | None: the approval with the edited arguments;
        ``None`` when the arguments cannot be edited, the edit does not fit the
        tool's schema, a policy denies it, or the user went back.

    Raises:
        Quit: input ended.
    """
    import difflib
    from ..gate import edit_refusal
    tool = chat.tools.get(request.name)
    if tool is None or not isinstance(request.arguments, dict):
        chat.say("  these arguments cannot be edited (not a JSON object)")
        return None
    subject = tool.subject
    value = request.arguments.get(subject) if subject else None
    # A line holding control characters cannot be shown as it is, so it is never put
    # on the prompt line to edit (SPEC R25): the editor gets it (editors show them,
    # ^[), and the diff after it shows them escaped.
    if (isinstance(value, str) and len(request.arguments) == 1
            and not needs_escaping(value)):
        typed = read_prefilled(chat.say, f"  {safe_text(subject)}: ", value)
        edited = {subject: typed} if typed.strip() else dict(request.arguments)
    elif isinstance(value, str) and tool.subject_kind == "shell":
        # A command is edited as the text it is, as git hands the editor a message,
        # not as JSON with its newlines written \n; the other arguments stay.
        typed = run_editor(value, ".sh", chat.say)
        if typed is None:
            return None
        if not typed.strip():  # as git takes an empty message: nothing is changed
            chat.say("  the edited command is empty: the call is as it was")
            return None
        edited = {**request.arguments, subject: typed}
    else:
        edited = edit_in_editor(request.arguments, chat.say)
        if edited is None:
            return None
    refusal = edit_refusal(tool, edited, chat.layers())
    if refusal is not None and refusal.problems:
        chat.say("  the edit does not fit the tool: " + "; ".join(refusal.problems))
        return None
    if refusal is not None:
        chat.say(f"  the edited call is denied by policy ({refusal.rule}, {refusal.layer})")
        return None
    before = json.dumps(request.arguments, indent=2, ensure_ascii=False).splitlines(True)
    after = json.dumps(edited, indent=2, ensure_ascii=False).splitlines(True)
    diff = "".join(difflib.unified_diff(before, after, "arguments (model)",
                                        "arguments (edited)"))
    chat.say(diff.rstrip("\n") if diff else "  (no change)")
    chat.preview(request.name, edited)
    answer = read(chat.say, "  run the edited call? [y]es, [n]o (back): ")
    if answer.strip().lower() in ("y", "yes"):
        return request.approve(approver, arguments=edited)
    return None


def edit_in_editor(arguments: dict, say) -> dict | None:
    """Open the arguments as JSON in ``$VISUAL`` / ``$EDITOR`` (default ``vi``).

    Args:
        arguments: the call's arguments (dict).
        say: the chat's ``Output.say``.

    Returns:
        dict | None: the edited object; ``None`` when the editor cannot start or
        the result is not a JSON object (the reason is shown).

    Raises:
        OSError: the temporary file could not be written or read.
    """
    text = run_editor(json.dumps(arguments, indent=2, ensure_ascii=False) + "\n", ".json", say)
    if text is None:
        return None
    try:
        edited = json.loads(text)
    except ValueError as exc:
        say(f"  the edited arguments are not valid JSON: {exc}")
        return None
    if not isinstance(edited, dict):
        say("  the edited arguments must be a JSON object")
        return None
    return edited


def run_editor(text: str, suffix: str, say) -> str | None:
    """Open ``text`` in ``$VISUAL`` / ``$EDITOR`` (default ``vi``) and return it as the
    person left it; Ctrl-C meanwhile belongs to the editor.

    Args:
        text: the file's starting content (str).
        suffix: the temporary file's suffix (str: ``".sh"``, ``".json"``), for the
            editor's highlighting.
        say: the chat's ``Output.say``.

    Returns:
        str | None: the edited text, less the one final newline an editor adds when
        ``text`` had none; ``None`` when the editor cannot start (the reason is shown).

    Raises:
        OSError: the temporary file could not be written or read.
    """
    import signal
    import subprocess
    import tempfile
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    fd, path = tempfile.mkstemp(prefix="agentflow-edit-", suffix=suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        try:
            process = subprocess.Popen([*shlex.split(editor), path])
        except OSError as exc:
            say(f"  cannot start the editor {editor!r} ({exc.strerror}): set "
                "VISUAL or EDITOR to one that works, or answer y or n")
            return None
        # Ctrl-C while the editor runs is the editor's (vi cancels a command with
        # it), not a quit at the prompt; git ignores it in the same way.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            process.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
        with open(path, encoding="utf-8", newline="") as handle:
            edited = handle.read()
    finally:
        os.unlink(path)
    if not text.endswith("\n") and edited.endswith("\n"):
        edited = edited[:-1]
    return edited
