"""What a chat remembers in its session: the endpoint and options it began with, so a
later run needs only ``--session``. Flags win; then what the session remembers; then
the defaults."""

from __future__ import annotations

import os

from ..builtin_tools import BUILTIN_NAMES
from ..errors import UsageError

ALWAYS = "always_approve"  # old session.state key (tools always approved): now grants
SETTINGS = "chat"          # session.state key: the endpoint and options the chat began with
DEFAULTS = {"base_url": None, "model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY",
            "system": None, "tools": ",".join(BUILTIN_NAMES), "max_rounds": 40,
            "profile": None, "workspace": None}


def chat_settings(args, session) -> dict:
    """The settings this run uses, the workspace resolved and checked.

    Args:
        args: the ``argparse.Namespace`` of ``agentflow chat``.
        session: the ``AgentSession``; its ``state["chat"]`` is what earlier runs used.

    Returns:
        dict: one value per ``DEFAULTS`` key; ``workspace`` is a real, existing folder.

    Raises:
        UsageError: the workspace (given or remembered) is not a folder.
    """
    remembered = session.state.get(SETTINGS) or {}
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
