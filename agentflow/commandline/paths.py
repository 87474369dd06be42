"""One reading of a path for the tools and the rules about them (SPEC R19 addendum):
``~`` and ``~/…`` are the home folder, a relative path starts at a root (the tool's
workspace), ``..`` is collapsed and symlinks are followed, as the OS will open it.
``write_file("~/.bashrc")`` is the home's ``.bashrc`` for the tool that writes it, for
the approval check that finds it outside the workspace, and for the rule a person
grants for it."""

from __future__ import annotations

import os


def expand_home(path: str) -> str:
    """``~`` and ``~/…`` as the home folder; anything else (``~user`` too) unchanged.

    Args:
        path: a path (str).

    Returns:
        str: the path with a leading ``~`` expanded (``os.path.expanduser``).
    """
    return os.path.expanduser(path) if path == "~" or path.startswith("~/") else path


def resolve(path: str, root: str) -> str:
    """``path`` as the OS will open it from ``root``.

    Args:
        path: a relative or absolute path, or one starting with ``~`` (str).
        root: the folder a relative path starts from (str).

    Returns:
        str: the absolute path, ``~`` expanded, ``..`` collapsed, symlinks followed
        (it need not exist).

    Raises:
        ValueError: ``path`` contains a NUL character.
        OSError: the operating system refuses the path (``os.path.realpath``).
    """
    return os.path.realpath(os.path.join(root, expand_home(path)))


def user_policy_path() -> str:
    """The user policy file (SPEC R19); its folder holds agentflow's trust records and
    signing key too (SPEC R26), so no tool may write there unasked.

    Returns:
        str: ``$XDG_CONFIG_HOME/agentflow/policy.json``, else
        ``~/.config/agentflow/policy.json``.
    """
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"),
                                                              ".config")
    return os.path.join(base, "agentflow", "policy.json")
