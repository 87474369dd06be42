"""The interactive prompt of ``agentflow chat``: messages, several lines at once, and the
commands ``/help``, ``/permissions`` and ``exit``."""

from __future__ import annotations

import select
import sys
import time

from ..display import safe_text
from .flags import EXIT_INTERRUPTED, EXIT_OK, EXIT_PAUSED
from .terminal import History

BANNER = ("agentflow chat — exit, quit or Ctrl-D to leave; /help for more; Ctrl-C stops a "
          "reply, a second Ctrl-C leaves.")
HELP = """\
  Type a message and Enter to send it. Several lines: end a line with \\ to go on, or
  paste them (what arrives at once is one message), or type \"\"\" and end with \"\"\".
  /permissions           the policy rules and this session's grants
  /permissions revoke N  take back the session's grant N
  /help                  this text
  exit, quit, Ctrl-D     leave (an empty line sends nothing)
  Ctrl-C                 stop a reply; at the prompt, leave"""
LEAVE = ("exit", "quit", "/exit", "/quit")


def repl(chat) -> int:
    """One conversation at the prompt, until ``exit``, Ctrl-D, a Ctrl-C at the prompt,
    or a pause that is left unanswered (by q, Ctrl-D or Ctrl-C at the approval prompt).

    Args:
        chat: the ``Chat``.

    Returns:
        int: ``EXIT_OK``, ``EXIT_INTERRUPTED`` or ``EXIT_PAUSED``.
    """
    chat.say(BANNER)
    history = History.open(chat.say)
    while True:
        try:
            message = read_message()
        except EOFError:
            chat.say()
            return EXIT_OK
        except KeyboardInterrupt:
            chat.say()
            return EXIT_INTERRUPTED
        text = message.strip()
        if not text:
            continue
        if text.lower() in LEAVE:
            return EXIT_OK
        history.add(message)
        if text.startswith("/") and "\n" not in text:
            command(chat, text)
            continue
        status = chat.converse([message])
        if status == EXIT_PAUSED or chat.session.approvals.pending:
            # q, Ctrl-D or Ctrl-C at the approval prompt: the call stays waiting, and
            # the next message would answer it "Rejected: User denied" unasked (SPEC R4)
            return status


def read_message() -> str:
    """One message from the prompt: a line, the lines that arrived with it (a paste),
    lines joined by a trailing ``\\``, or a block between two ``\"\"\"`` lines.

    Returns:
        str: the message.

    Raises:
        EOFError: input ended before a message (Ctrl-D).
        KeyboardInterrupt: Ctrl-C at the prompt.
    """
    lines = [input("you> ")]
    if lines[0].strip() == '"""':
        lines = []
        while True:
            line = input("... ")
            if line.strip() == '"""':
                return "\n".join(lines)
            lines.append(line)
    while lines[-1].endswith("\\") or _more_waiting():
        if lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1]
            lines.append(input("... "))
        else:
            lines.append(input(""))
    return "\n".join(lines)


def _more_waiting() -> bool:
    """Whether more typed input is already there: the rest of a paste."""
    try:
        ready, _, _ = select.select([sys.stdin], [], [], 0.02)
    except (OSError, ValueError):  # no select on this stream
        return False
    return bool(ready)


def command(chat, text: str) -> None:
    """Run one ``/`` command.

    Args:
        chat: the ``Chat``.
        text: the line, starting with ``/`` (str).
    """
    words = text.split()
    if words[0] == "/help":
        chat.say(HELP)
    elif words[0] == "/permissions" and len(words) == 1:
        permissions(chat)
    elif words[:2] == ["/permissions", "revoke"] and len(words) == 3:
        revoke(chat, words[2])
    else:
        chat.say(f"  unknown command {safe_text(words[0])!s}: /help lists them")


def permissions(chat) -> None:
    """List the policy layers' rules, in the order the gate reads them, and the
    session's grants, numbered for ``/permissions revoke N`` (SPEC R19).

    Args:
        chat: the ``Chat``.
    """
    now = time.time()
    for layer in chat.agent.chat_client.layers(chat.options.policy, None):
        chat.say(f"  {safe_text(layer.name)}"
                 + (f" ({safe_text(str(layer.source))})" if layer.source else "") + ":")
        rules = [(effect, rule) for effect in ("deny", "ask", "allow")
                 for rule in layer.rules(effect)]
        for effect, rule in rules:
            chat.say(f"    {effect:<5}  {safe_text(str(rule))}")
        if not rules:
            chat.say("    (no rules)")
    grants = chat.session.approvals.grants
    chat.say("  session grants:" + ("" if grants else " none"))
    for number, grant in enumerate(grants, 1):
        state = "" if grant.active(now) else " (expired)"
        by = f", by {safe_text(grant.approver)}" if grant.approver else ""
        chat.say(f"    {number}. allow  {safe_text(grant.rule)}{state}"
                 f"  (granted at call {safe_text(str(grant.call_id))}{by})")
    if grants:
        chat.say("  /permissions revoke N takes grant N back")


def revoke(chat, which: str) -> None:
    """Take back the session's grant number ``which`` and save the session (SPEC R19).

    Args:
        chat: the ``Chat``.
        which: the grant's number in ``/permissions`` (str).
    """
    grants = chat.session.approvals.grants
    if not (which.isascii() and which.isdigit() and 1 <= int(which) <= len(grants)):
        chat.say(f"  no grant {safe_text(which)}: /permissions lists them "
                 f"({len(grants)} now)")
        return
    grant = grants.pop(int(which) - 1)
    chat.save()
    chat.say(f"  revoked: allow {safe_text(grant.rule)}; such calls ask again")
