"""How a shell command line is cut into the commands a policy rule can match (SPEC R19).

A rule such as ``run_command(git status)`` is about *one* command, but the model sends
a *line*: ``git status && rm -rf /`` runs two programs. ``parse`` reads a line the way
a POSIX shell splits it and returns:

* ``commands``: the simple commands of the line, in order, each with the operator
  that joins it to the previous one (``&&``, ``||``, ``;``, ``|``, ``|&``, ``&``, a
  newline). A rule is matched against each command on its own, never against the line;
* ``nested``: the command lines inside ``$(…)``, backticks, ``<(…)`` / ``>(…)``,
  ``sh -c '…'`` and ``eval …``, which run too;
* ``opaque``: why the line's effect cannot be read from its text (a substitution, a
  variable expansion, a subshell, a here-document, unbalanced quotes), or ``None``.

Each command is kept in a canonical form, so quoting and spacing do not change what a
rule matches: words are unquoted, then joined by one space, each re-quoted (POSIX
single quotes) only where it holds a blank, a quote or a shell metacharacter.
``git  status``, ``'git' status`` and ``g""it status`` are all ``git status``.
Redirections that change nothing on disk (``2>/dev/null``, ``2>&1``) are dropped;
any other output redirection marks the command as one that ``writes`` a file.

Why not ``shlex``: in POSIX mode it cannot tell an operator from a quoted one (``'&&'``
and ``&&`` are the same token) and it does not see ``$(…)`` at all, which are the two
things this module exists to see. The scanner below is deliberately small: what it does
not understand makes the line ``opaque``, and an opaque line is never allowed by a
pattern (policy.py), so a gap here can only make agentflow ask, never run silently.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

OPERATORS = ("&&", "||", ";;", "|&", "&", ";", "|", "\n")
REDIRECTIONS = ("&>>", "<<<", "<<-", "&>", "<<", "<>", "<&", ">>", ">|", ">&", "<", ">")
_WRITING = {">", ">>", ">|", "&>", "&>>", "<>", ">&"}
# \x01 stands for an escaped backslash while a policy pattern is read (policy.py)
_SAFE_WORD = re.compile(r"[^\s'\"\\;&|<>()$`#\x01]+")
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "ash", "fish"}
_MAX_DEPTH = 8
_MAX_TAIL_WORDS, _MAX_TAIL_TEXT = 256, 16_384  # beyond: opaque, not quadratic


@dataclass
class Command:
    """One simple command of a line.

    Attributes:
        text: the canonical form (str), what allow rules are matched against.
        tails: the canonical form of the command from each of its words on, and where
            that word is a path, also from its base name (``/bin/rm`` → ``rm``); list
            of str, ``tails[0]`` is ``text`` without redirections. Deny and ask rules are matched against every
            tail, so ``sudo rm -rf /``, ``xargs rm -rf``, ``find . -exec rm -rf {} ;``
            and ``/bin/rm -rf /`` all meet ``rm -rf *``.
        writes: whether it redirects output to a file (bool).
        op_before: the operator joining it to the previous command, ``None`` first.
    """

    text: str
    tails: list
    writes: bool = False
    op_before: str | None = None


@dataclass
class CommandLine:
    """A parsed line: ``commands`` (list of ``Command``), ``nested`` (list of
    ``CommandLine`` run by substitutions and ``sh -c``) and ``opaque`` (str or
    ``None``), see the module's docstring."""

    commands: list[Command] = field(default_factory=list)
    nested: list["CommandLine"] = field(default_factory=list)
    opaque: str | None = None

    def every_command(self):
        """Walk the line and its nested lines (substitutions).

        Yields:
            Command: each command, this line's first.
        """
        yield from self.commands
        for line in self.nested:
            yield from line.every_command()


def quote(word: str) -> str:
    """A word as it appears in a canonical command.

    Args:
        word: the word (str).

    Returns:
        str: bare when it is safe, else in POSIX single quotes. ``*`` stays bare, so a
        rule's wildcard lines up with it.
    """
    return word if _SAFE_WORD.fullmatch(word) else shlex.quote(word)


def parse(line: str, _depth: int = 0) -> CommandLine:
    """Cut a command line into commands, see the module's docstring. Never raises.

    Args:
        line: the command line (str).

    Returns:
        CommandLine: the commands; a line it cannot read is returned ``opaque`` with
        one command holding the whole text (whitespace collapsed), so a deny rule can
        still match it (SPEC R19).
    """
    result = CommandLine()
    try:
        tokens = _Scanner(line, result, _depth).tokens()
    except _Unreadable as exc:
        result.opaque = str(exc)
        text = " ".join(line.split())
        result.commands = [Command(text, [text])]
        return result
    words: list = []
    op = None
    for kind, value in tokens + [("op", None)]:
        if kind != "op":
            words.append((kind, value))
            continue
        if words:
            command = _command(words, op, result, _depth)
            if command is not None:
                result.commands.append(command)
        words, op = [], value
    return result


class _Unreadable(ValueError):
    pass


class _Scanner:
    """Turns a line into ``("word", str)``, ``("redirect", (op, target))`` and
    ``("op", str)`` tokens, recording substitutions and expansions on ``result``."""

    def __init__(self, line: str, result: CommandLine, depth: int):
        self.s, self.i, self.result, self.depth = line, 0, result, depth
        self.out: list = []
        self.buf: list[str] = []
        self.in_word = False
        self.quoted = False  # the current word has a quoted part (not an fd number)
        self.redirect: str | None = None

    def opaque(self, why: str) -> None:
        if self.result.opaque is None:
            self.result.opaque = why

    def nest(self, body: str) -> None:
        if self.depth >= _MAX_DEPTH:
            raise _Unreadable("substitutions nested too deeply")
        self.result.nested.append(parse(body, self.depth + 1))

    def end_word(self) -> None:
        if not self.in_word:
            return
        word = "".join(self.buf)
        if self.redirect is not None:
            self.out.append(("redirect", (self.redirect, word)))
            self.redirect = None
        else:
            self.out.append(("word", word))
        self.buf, self.in_word, self.quoted = [], False, False

    def emit_op(self, op: str) -> None:
        self.end_word()
        if self.redirect is not None:
            raise _Unreadable(f"a redirection ({self.redirect}) without a target")
        self.out.append(("op", op))

    def tokens(self) -> list:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                if s.startswith("\\\n", self.i):  # a line continuation
                    self.i += 2
                    continue
                self.buf.append(s[self.i + 1:self.i + 2])
                self.in_word = self.quoted = True
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise _Unreadable("unbalanced quotes")
                self.buf.append(s[self.i + 1:end])
                self.in_word = self.quoted = True
                self.i = end + 1
            elif c == '"':
                self.double_quoted()
            elif c == "$":
                self.dollar()
            elif c == "`":
                self.backtick()
            elif c in " \t\r":
                self.end_word()
                self.i += 1
            elif c == "#" and not self.in_word:  # a comment: the shell runs none of it
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif c in "<>" and s.startswith("(", self.i + 1):
                self.opaque("process substitution")
                body, self.i = _closing(s, self.i + 2)
                self.nest(body)
                self.buf.append(f"{c}({body})")
                self.in_word = True
            elif c in "<>" or s.startswith("&>", self.i):
                self.redirection()
            elif c in "()":
                self.opaque("a subshell or group")
                self.emit_op(";")
                self.i += 1
            elif c in ";&|\n":
                op = next(o for o in OPERATORS if s.startswith(o, self.i))
                self.emit_op(op)
                self.i += len(op)
            else:
                self.buf.append(c)
                self.in_word = True
                self.i += 1
        self.end_word()
        if self.redirect is not None:
            raise _Unreadable(f"a redirection ({self.redirect}) without a target")
        return self.out

    def double_quoted(self) -> None:
        s, i = self.s, self.i + 1
        self.in_word = self.quoted = True
        while i < len(s) and s[i] != '"':
            if s[i] == "\\" and i + 1 < len(s) and s[i + 1] in '$`"\\\n':
                if s[i + 1] != "\n":
                    self.buf.append(s[i + 1])
                i += 2
            elif s[i] in "$`":
                self.i = i
                (self.dollar if s[i] == "$" else self.backtick)()
                i = self.i
            else:
                self.buf.append(s[i])
                i += 1
        if i >= len(s):
            raise _Unreadable("unbalanced quotes")
        self.i = i + 1

    def dollar(self) -> None:
        s, i = self.s, self.i
        nxt = s[i + 1:i + 2]
        if s.startswith("$((", i):
            self.opaque("arithmetic expansion")
            body, end = _closing(s, i + 2)
            self.buf.append(s[i:end])
            self.i = end
        elif nxt == "(":
            self.opaque("command substitution")
            body, end = _closing(s, i + 2)
            self.nest(body)
            self.buf.append(f"$({body})")
            self.i = end
        elif nxt == "'":
            self.opaque("ANSI-C quoting")
            end = i + 2
            while end < len(s) and s[end] != "'":
                end += 2 if s[end] == "\\" else 1
            if end >= len(s):
                raise _Unreadable("unbalanced quotes")
            self.buf.append(s[i:end + 1])
            self.i = end + 1
        elif nxt == "{" or (nxt and (nxt.isalnum() or nxt in "_?$!#*@-")):
            self.opaque("variable expansion")
            self.buf.append("$")
            self.i += 1
        else:
            self.buf.append("$")
            self.i += 1
        self.in_word = True

    def backtick(self) -> None:
        s, i = self.s, self.i + 1
        self.opaque("command substitution")
        body = []
        while i < len(s) and s[i] != "`":
            if s[i] == "\\" and i + 1 < len(s):
                body.append(s[i + 1])
                i += 2
            else:
                body.append(s[i])
                i += 1
        if i >= len(s):
            raise _Unreadable("unbalanced backticks")
        self.nest("".join(body))
        self.buf.append("`" + "".join(body) + "`")
        self.in_word = True
        self.i = i + 1

    def redirection(self) -> None:
        s = self.s
        fd = ""
        if self.in_word and not self.quoted and "".join(self.buf).isdigit():
            fd, self.buf, self.in_word = "".join(self.buf), [], False
        self.end_word()
        if self.redirect is not None:
            raise _Unreadable(f"a redirection ({self.redirect}) without a target")
        op = next(o for o in REDIRECTIONS if s.startswith(o, self.i))
        self.i += len(op)
        if op in ("<<", "<<-"):
            self.opaque("a here-document")
        self.redirect = fd + op


def _closing(s: str, start: int) -> tuple[str, int]:
    """The text from ``start`` to the ``)`` that closes the ``(`` just before it,
    skipping quoted text; and the index after that ``)``."""
    depth, i = 1, start
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = s.find("'", i + 1)
            if end < 0:
                break
            i = end + 1
            continue
        if c == '"':
            i += 1
            while i < len(s) and s[i] != '"':
                i += 2 if s[i] == "\\" else 1
            i += 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return s[start:i], i + 1
        i += 1
    raise _Unreadable("unbalanced parentheses")


def _harmless(op: str, target: str) -> bool:
    """A redirection that changes nothing on disk: to or from /dev/null, or a copy of
    one file descriptor onto another (``2>&1``, ``>&-``)."""
    bare = op.lstrip("0123456789")
    if target == "/dev/null":
        return True
    return bare in (">&", "<&") and (target.isdigit() or target == "-")


def _command(tokens: list, op: str | None, result: CommandLine, depth: int) -> Command | None:
    parts, words, writes = [], [], False
    for kind, value in tokens:
        if kind == "word":
            words.append(value)
            parts.append(quote(value))
            continue
        redirect, target = value
        if _harmless(redirect, target):
            continue
        writes = writes or redirect.lstrip("0123456789") in _WRITING
        parts.append(redirect + quote(target))
    if not parts:
        return None
    text = " ".join(parts)
    if len(words) > _MAX_TAIL_WORDS or len(text) > _MAX_TAIL_TEXT:
        if result.opaque is None:
            result.opaque = "a command too long to check"
        tails = [text]
    else:
        tails = []
        for start in range(len(words)):
            rest = " ".join(quote(w) for w in words[start + 1:])
            program = words[start]
            names = [program]
            if "/" in program.rstrip("/") and _SAFE_WORD.fullmatch(program):
                names.append(program.rstrip("/").rsplit("/", 1)[-1])  # /bin/rm: rm
            tails += [f"{quote(name)} {rest}".rstrip(" ") for name in names]
    _nested_scripts(words, result, depth)
    return Command(text, tails or [text], writes, op)


def _nested_scripts(words: list[str], result: CommandLine, depth: int) -> None:
    """``sh -c SCRIPT`` and ``eval WORDS`` run a line of their own, wherever they
    stand in the command (``sudo sh -c …``): parse it too."""
    if depth >= _MAX_DEPTH:
        return
    for position, word in enumerate(words):
        name = word.rsplit("/", 1)[-1]
        if name == "eval" and position + 1 < len(words):
            result.nested.append(parse(" ".join(words[position + 1:]), depth + 1))
            return
        if name in _SHELLS:
            for offset, option in enumerate(words[position + 1:-1], position + 1):
                if option.startswith("-") and not option.startswith("--") and "c" in option:
                    result.nested.append(parse(words[offset + 1], depth + 1))
                    return
