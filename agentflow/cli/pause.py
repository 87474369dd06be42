"""What a chat prints when it stops with calls waiting: each call in one line, and the
command that answers them (SPEC R4)."""

from __future__ import annotations

from ..display import safe_text
from .flags import EXIT_PAUSED
from .paste import PASSWORD_NOTE, command, without_password
from .respond import answer_key


def paused(chat) -> int:
    """Say which calls wait and how to answer them (``--json``: one ``paused`` object).

    Args:
        chat: the ``Chat`` whose session is paused.

    Returns:
        int: ``EXIT_PAUSED``.
    """
    requests = chat.pending_requests()
    if chat.args.json:
        chat.out.emit({"type": "paused", "pending": [r.call_id for r in requests]})
        return EXIT_PAUSED
    count = (f"{len(requests)} call waits" if len(requests) == 1
             else f"{len(requests)} calls wait")
    chat.say(f"paused: {count} for approval:")
    keys = [answer_key(r.call_id, n) for n, r in enumerate(requests, 1)]
    numbered = any(key != r.call_id for key, r in zip(keys, requests))
    ids = [safe_text(r.call_id) for r in requests]
    names = [safe_text(r.name) for r in requests]
    width = max([len(i) for i in ids] + [0])
    tool_width = max([len(n) for n in names] + [0])
    for number, (request, call_id, name) in enumerate(zip(requests, ids, names), 1):
        chat.say(f"  {f'{number}) ' if numbered else ''}{call_id:<{width}}  "
                 f"{name:<{tool_width}}  {chat.summary(request)}")
    if chat.args.session:
        chat.say("Answer each call: CALL_ID=yes runs it, CALL_ID=no:REASON rejects it"
                 + (" (N=yes answers the N-th)." if numbered else "."))
        line, had_password = resume_command(chat.args, keys)
        chat.say(f"Resume with: {line}")
        if had_password:
            chat.say(PASSWORD_NOTE)
    else:
        chat.say("Without --session FILE this pause cannot be resumed later: run again "
                 "with --session FILE, and answer on a terminal or with --approve-all / "
                 "--deny-all.")
    return EXIT_PAUSED


# Flags a session does not remember, with their defaults: a resume repeats those given.
_NOT_REMEMBERED = (("--read-timeout", "read_timeout", 120.0),
                   ("--max-retries", "max_retries", 2),
                   ("--command-timeout", "command_timeout", 30.0),
                   ("--output-cap", "output_cap", 16_000))


def resume_command(args, keys) -> tuple[str, bool]:
    """The command that resumes a paused session with every call approved: the
    session (and store), and what the session does not remember (``--mcp`` servers,
    ``--policy``, timeouts), shell-quoted and without the store's password (SPEC R25).

    Args:
        args: the ``argparse.Namespace`` of ``agentflow chat``.
        keys: how each waiting call is named (list of str, ``respond.answer_key``).

    Returns:
        tuple: ``(line, had_password)``: the command (str), and whether a password
        was left out of it (bool).
    """
    words, had_password = ["agentflow", "chat"], False
    if args.store:
        store, had_password = without_password(args.store)
        words += ["--store", store]
    words += ["--session", args.session]
    for spec in args.mcp:
        words += ["--mcp", spec]
    for value in getattr(args, "mcp_approval", ()):
        words += ["--mcp-approval", value]
    if args.policy:
        words += ["--policy", args.policy]
    for flag, name, default in _NOT_REMEMBERED:
        if getattr(args, name) != default:
            words += [flag, f"{getattr(args, name):g}"]
    for key in keys:
        words += ["--respond", f"{key}=yes"]
    return command(*words), had_password
