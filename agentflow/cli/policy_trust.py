"""``agentflow policy trust [FILE]`` and ``agentflow policy untrust [FILE]``: trust a
project policy file's widening settings, or take that back, without a model or an
endpoint (SPEC R26, issue 34).

The file is read once; what is shown (its allow rules, its sandbox settings that widen,
its whole contents, escaped: R25) is what is judged, and the SHA-256 of those same bytes
is what is recorded, in the user's configuration folder (``trust.trust``). A file
changed afterwards is not trusted until it is trusted again."""

from __future__ import annotations

import os
import sys

from ..display import safe_text
from ..policy import PROJECT_FILE
from . import trust
from .errors import Quit
from .terminal import read

EXIT_DECLINED = 1


def project_file_path(path: str | None) -> str:
    """The path under which ``agentflow chat`` looks a project file up: the workspace
    resolved (``realpath``, as the chat resolves it), then ``.agentflow/policy.json``.

    Args:
        path: the file given (str), or ``None`` for ``.agentflow/policy.json`` here.

    Returns:
        str: the absolute path the trust record is kept under.
    """
    given = os.path.abspath(path or PROJECT_FILE)
    suffix = os.sep + os.path.normpath(PROJECT_FILE)
    if given.endswith(suffix):
        return os.path.join(os.path.realpath(given[:-len(suffix)] or os.sep), PROJECT_FILE)
    return os.path.join(os.path.realpath(os.path.dirname(given)), os.path.basename(given))


def trust_command(path: str | None, yes: bool = False) -> int:
    """Show a project policy file's widening settings and, once the person says yes,
    trust exactly the bytes shown.

    Args:
        path: the project file (str), or ``None`` for ``.agentflow/policy.json`` here.
        yes: trust without asking (``--yes``); needed where standard input is not a
            terminal.

    Returns:
        int: 0 trusted (or nothing to trust, or trusted already), 1 the person said
        no, 2 the file cannot be read or is not a policy, or no terminal without
        ``--yes``.
    """
    from ..errors import PolicyError
    from ..policy import ApprovalPolicy
    path = project_file_path(path)
    found = trust.digest_of(path)
    if found is None:
        return _complain(f"policy trust: cannot read {path}: give the project policy file "
                         f"({PROJECT_FILE} of the folder agentflow chat works in)")
    digest, data = found
    try:
        layer = ApprovalPolicy.loads(data, "project", path)
    except PolicyError as exc:
        return _complain(f"policy trust: {exc}")
    shown = safe_text(path)
    if not trust.widens(layer):
        print(f"{shown} widens nothing (no allow rule, no sandbox setting that lets "
              "commands run unasked or reach the network): its deny and ask rules apply "
              "without trust")
        return 0
    if trust.is_trusted_digest(path, digest):
        print(f"{shown} is trusted as it is now (SHA-256 {digest})")
        return 0
    print(trust.widening_text(layer, data))
    if not yes:
        if not sys.stdin.isatty():
            return _complain("policy trust: not trusted: standard input is not a terminal, "
                             "so nobody can answer; give --yes to trust what is shown above")
        try:
            answer = read(print, f"Trust this file's {trust.widening_names(layer)} "
                                 "(remembered until it changes)? [y/N] ")
        except Quit:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print(f"not trusted: its {trust.widening_names(layer)} are not applied")
            return EXIT_DECLINED
    trust.trust(path, data)
    print(f"trusted {shown} (SHA-256 {digest}); a change to it is asked about again")
    return 0


def untrust_command(path: str | None) -> int:
    """Forget that the person trusted a project policy file.

    Args:
        path: the project file (str), or ``None`` for ``.agentflow/policy.json`` here.

    Returns:
        int: 0 (also when it was not trusted; it says so).
    """
    path = project_file_path(path)
    if trust.untrust(path):
        print(f"untrusted {safe_text(path)}: its allow rules and sandbox settings are not "
              "applied until it is trusted again")
    else:
        print(f"{safe_text(path)} was not trusted; nothing changed")
    return 0


def _complain(text: str) -> int:
    print(f"agentflow: {safe_text(text, multiline=True)}", file=sys.stderr)
    return 2
