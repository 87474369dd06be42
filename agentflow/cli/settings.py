"""What a chat remembers in its session: the endpoint and options it began with, so a
later run needs only ``--session``. Flags win; then what the session remembers; then
the defaults."""

from __future__ import annotations

import os

from ..builtin.builtin_tools import BUILTIN_NAMES
from .errors import UsageError

ALWAYS = "always_approve"  # old session.state key (tools always approved): now grants
SETTINGS = "chat"          # session.state key: the endpoint and options the chat began with
DEFAULTS = {"base_url": None, "model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY",
            "system": None, "tools": ",".join(BUILTIN_NAMES), "max_rounds": 40,
            "profile": None, "workspace": None}


def chat_settings(args, session, confirm=None) -> dict:
    """The settings this run uses, the workspace resolved and checked.

    A remembered endpoint, API-key variable or workspace (``trust.ROUTING``) that the
    person did not give again is used only when this user's agentflow wrote it (its
    signature, ``trust.signed_by_me``) or the person confirms it (SPEC R26).

    Args:
        args: the ``argparse.Namespace`` of ``agentflow chat``.
        session: the ``AgentSession``; its ``state["chat"]`` is what earlier runs used.
        confirm: ``(question) -> bool`` asking the person on a terminal; ``None``
            without one.

    Returns:
        dict: one value per ``DEFAULTS`` key; ``workspace`` is a real, existing folder.

    Raises:
        UsageError: the workspace (given or remembered) is not a folder; or a
            remembered routing setting was not written by this user's agentflow and
            nobody confirmed it (the message names it and how to give it).
    """
    remembered = session.state.get(SETTINGS) or {}
    check_remembered(args, session, remembered, confirm)
    settings = {name: getattr(args, name) if getattr(args, name) is not None
                else remembered.get(name, default) for name, default in DEFAULTS.items()}
    workspace = os.path.realpath(settings["workspace"] or os.getcwd())
    if not os.path.isdir(workspace):
        source = ("--workspace" if args.workspace is not None
                  else f"the --workspace remembered in {args.session}")
        raise UsageError(f"{source} {settings['workspace']}: {workspace} is not a "
                         "folder; give an existing one with --workspace DIR")
    settings["workspace"] = workspace
    return settings


def check_remembered(args, session, remembered: dict, confirm=None) -> None:
    """Refuse remembered routing settings this user's agentflow did not write (R26).

    Args:
        args: the ``argparse.Namespace`` (a flag given again wins, unquestioned).
        session: the ``AgentSession`` (its ``state`` holds the signature).
        remembered: the session's remembered settings (dict).
        confirm: ``(question) -> bool`` on a terminal, else ``None``.

    Raises:
        UsageError: naming each setting that differs, and how to give it.
    """
    from ..display import safe_text
    from .trust import ROUTING, SIGNATURE, signed_by_me
    used = {k: remembered[k] for k in ROUTING
            if getattr(args, k, None) is None and remembered.get(k) not in (None, DEFAULTS[k])}
    if not used or signed_by_me(remembered, session.state.get(SIGNATURE)):
        return
    listed = ", ".join(f"--{k.replace('_', '-')} {safe_text(str(v))}" for k, v in used.items())
    if confirm is not None and confirm(
            f"The session {args.session} remembers {listed}, which your agentflow did not "
            "write (the session came from elsewhere, or was changed). Use them? [y/N] "):
        return
    raise UsageError(f"--session {args.session} remembers {listed}, which your agentflow "
                     "did not write (it may send your API key elsewhere, or let the tools "
                     "work in another folder): give them on the command line to use them, "
                     "or run on a terminal to confirm them")


def sign_settings(session, settings: dict) -> None:
    """Keep ``settings`` in the session with this user's signature (SPEC R26).

    Args:
        session: the ``AgentSession``.
        settings: as ``chat_settings`` returns.
    """
    from .trust import SIGNATURE, sign
    session.state[SETTINGS] = settings
    session.state[SIGNATURE] = sign(settings)


def check_grants(session, confirm=None, notes=None) -> None:
    """Leave out the session's grants (and its old ``always_approve`` list) that this
    user's agentflow did not record: they are allow rules, and a session file from
    elsewhere could carry ``run_command`` (SPEC R26). On a terminal the person may keep
    them.

    Args:
        session: the ``AgentSession``; its unsigned grants are removed from its ledger.
        confirm: ``(question) -> bool`` on a terminal, else ``None``.
        notes: a list that gets a line naming what was left out.
    """
    from ..display import safe_text
    from .trust import GRANT_SIGNATURES, sign_grant
    signed = session.state.get(GRANT_SIGNATURES)
    signed = set(signed) if isinstance(signed, list) and all(
        isinstance(s, str) for s in signed) else set()
    grants = session.approvals.grants
    foreign = [g for g in grants if sign_grant(g) not in signed]
    old = session.state.get(ALWAYS)
    old = [n for n in old if isinstance(n, str)] if isinstance(old, list) else []
    rules = [g.rule for g in foreign] + old
    if not rules:
        return
    listed = ", ".join(safe_text(str(r)) for r in rules)
    if confirm is not None and confirm(
            f"The session remembers grants your agentflow did not record (the session "
            f"came from elsewhere, or was changed): allow {listed}. Keep them? [y/N] "):
        return
    session.approvals.grants = [g for g in grants if g not in foreign]
    session.state.pop(ALWAYS, None)
    if notes is not None:
        notes.append(f"grants: {listed} not applied: your agentflow did not record them "
                     "(the session came from elsewhere, or was changed); approve the calls "
                     "again to grant them")


def sign_grants(session) -> None:
    """Keep this user's signature of each of the session's grants in its state.

    Args:
        session: the ``AgentSession``.
    """
    from .trust import GRANT_SIGNATURES, sign_grant
    session.state[GRANT_SIGNATURES] = [sign_grant(g) for g in session.approvals.grants]


def tool_names(settings: dict) -> list[str]:
    """The built-in tools named by the ``tools`` setting (``none`` or empty: none).

    Args:
        settings: as ``chat_settings`` returns.

    Returns:
        list[str]: the names, in the order given.
    """
    text = settings["tools"]
    return [] if text.strip() in ("", "none") else \
        [n.strip() for n in text.split(",") if n.strip()]


def user_name() -> str | None:
    """The name of the person running agentflow, recorded as the approver.

    Returns:
        str | None: the login name, or ``None`` where it cannot be found.
    """
    import getpass
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
