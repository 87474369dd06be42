"""The approval prompt: y, n, a (allow this exact call from now on, SPEC R19), e (edit,
R20) or q, one call at a time."""

from __future__ import annotations

from ..policy import PROJECT_FILE
from ..types import ToolApprovalRequest, ToolApprovalResponse
from .editor import edit
from .terminal import Quit, read

PROMPT = "approve? [y]es, [n]o, [a]llow from now on, [e]dit, [q]uit: "


def ask(chat, request: ToolApprovalRequest, approver) -> ToolApprovalResponse:
    """Ask at the prompt until the user answers y, n, a, e or q.

    Args:
        chat: the ``Chat``.
        request: the ``ToolApprovalRequest``.
        approver: the user's name (str or ``None``), recorded with the answer.

    Returns:
        ToolApprovalResponse: an approval (perhaps with a grant, R19, or edited
        arguments, R20) or a rejection with the typed reason (R7).

    Raises:
        Quit: the user chose q, or input ended (Ctrl-D).
    """
    while True:
        answer = read(chat.say, PROMPT).strip().lower()
        if answer in ("y", "yes"):
            return request.approve(approver)
        if answer in ("n", "no"):
            return request.reject(read(chat.say, "reason (optional): ").strip() or None,
                                  approver)
        if answer in ("a", "allow", "always"):
            response = allow_from_now_on(chat, request, approver)
            if response is not None:
                return response
        if answer in ("e", "edit"):
            response = edit(chat, request, approver)
            if response is not None:
                return response
        if answer in ("q", "quit"):
            raise Quit()


def allow_from_now_on(chat, request, approver) -> ToolApprovalResponse | None:
    """[a]: allow exactly this call from now on, in the session or the project
    file (SPEC R19).

    Args:
        chat: the ``Chat``.
        request: the ``ToolApprovalRequest``.
        approver: the user's name (str or ``None``).

    Returns:
        ToolApprovalResponse | None: the approval, carrying the rules as a grant
        when kept in the session; ``None`` when no rule can allow exactly this
        call, or the user went back.

    Raises:
        Quit: input ended at the scope question.
        PolicyError, OSError: the project file could not be read or written.
    """
    from ..policy import exact_rules
    from .policies import write_project_rules
    say = chat.say
    tool = chat.tools.get(request.name)
    arguments = request.arguments if isinstance(request.arguments, dict) else None
    rules = exact_rules(tool, arguments) if tool is not None else []
    if not rules:
        refused = getattr(tool, "allow_refusal", lambda _: None)(arguments)
        say(f"  no rule can allow exactly this call "
            f"({refused or 'what it runs cannot be read from its text'}); answer y to run "
            "it once")
        return None
    say("  allow from now on: " + ", ".join(rules))
    why = chat.why(request) or ""
    if why.startswith("policy: ask rule"):
        say(f"  note: {why[len('policy: '):]} still asks for such calls")
    while True:
        scope = read(say, f"  keep it in the [s]ession or the [p]roject file "
                          f"({PROJECT_FILE}), or [b]ack: ").strip().lower()
        if scope in ("b", "back"):
            return None
        if scope in ("s", "session"):
            return request.approve(approver, grant=rules if len(rules) > 1 else rules[0])
        if scope in ("p", "project"):
            path = write_project_rules(chat.workspace, rules, chat.agent.chat_client,
                                       chat.tools.values())
            say(f"  wrote {', '.join(rules)} to {path}")
            return request.approve(approver)
