"""How a shell command line is read into the commands a policy rule can match (SPEC R19
and its addendum, "Rules about command lines").

A rule such as ``run_command(git status)`` is about *one* command, but the model sends
a *line*: ``git status && rm -rf /`` runs two programs. ``parse`` reads a line exactly
as ``sh`` (dash) and ``bash`` both read it and returns:

* ``commands``: the simple commands of the line, in order, each with the operator
  that joins it to the previous one (``&&``, ``||``, ``;``, ``|``, ``&``, a newline),
  its words (``argv``, unquoted), its assignments and redirections. A rule is matched
  against each command on its own, never against the line;
* ``nested``: the command lines that ``sh -c '…'``, ``eval …`` and the shell
  commands of ``git -c alias.x='!…'`` (or ``core.fsmonitor=…``) run;
* ``unreadable``: why the line is not fully understood, or ``None``.

A line is **unreadable** when it holds anything this reader does not read exactly as
both shells do: a control character (``\\r`` included), a character outside ASCII
outside quotes (``²>``, ``１>``, a no-break space), an expansion (``$…``, backticks,
``$'…'``, ``~user``, brace expansion), bash-only or dash-only syntax (``$[…]``, ``|&``,
``&>``, ``<<<``, ``{fd}>``, multi-digit descriptors, ``a[…]=``, array subscripts in
names given to ``printf -v`` / ``test -v`` / ``read`` …), a compound command
(``if``, ``(…)``, ``{ …; }``, ``!``), a here-document, an alias, a syntax error, an
unquoted glob that could expand into an option or a command's name, a shell reading
its commands from a pipe or a file on its standard input (``echo … | sh``), or a line
past a size or nesting limit. Every check uses explicit ASCII sets (``str.isdigit`` accepts
``²``). Such a line is allowed by no rule and denied whenever the tool has a deny rule
(``policy.py``); the commands read before the trouble are still returned, with the
whole line as one more command, so a deny rule can name the one it meets.

Each command is kept in a canonical form, so quoting and spacing do not change what a
rule matches: words are unquoted, then joined by one space, each re-quoted (POSIX
single quotes) only where it holds a blank, a quote or a shell metacharacter. A
leading ``~`` or ``~/`` is the home folder, as the shell expands it (SPEC R19 addendum:
``~`` means the home folder in rules and tools alike). Redirections that change
nothing on disk (``2>/dev/null``, ``2>&1``) are dropped; any other output redirection
marks the command as one that ``writes`` a file.

Rule patterns are read by the same code with ``pattern=True``: there ``*`` is the
rule's wildcard, not a glob, and ``$`` or a backtick is plain text (``unreadable`` then
only names what a line would be refused for).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from ..errors import UnreadableCommandLine
from . import options

ASCII_DIGITS = frozenset("0123456789")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # \Z: "$" would accept a final newline
_PRINTABLE = frozenset(chr(c) for c in range(0x20, 0x7f))
_WRITING = {">", ">>", ">|", "<>"}
# \x00 and \x01 stand for ``\*`` and ``\\`` while a policy pattern is read (policy.py)
_SAFE_WORD = re.compile(r"[^\s'\"\\;&|<>()$`#\x01]+")
_RESERVED = {"!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for",
             "if", "in", "then", "until", "while", "function", "select", "time",
             "coproc", "[[", "]]"}
# builtins whose arguments bash reads as variable names, where a[...] runs $(...)
_NAME_TAKERS = {"printf", "test", "[", "read", "unset", "export", "readonly", "declare",
                "typeset", "local", "getopts", "mapfile", "readarray", "wait", "let"}
POSIX_SHELLS = {"sh", "bash", "dash", "ash", "ksh", "mksh", "posh", "rbash"}
OTHER_SHELLS = {"zsh", "fish", "csh", "tcsh", "pwsh", "nu", "xonsh", "elvish", "yash"}
_SHELL_OPTION_ARGS = {"--rcfile", "--init-file"}
MAX_LINE, MAX_DEPTH, MAX_WORDS, MAX_TEXT = 65_536, 8, 256, 16_384
WILD = "\x03"  # a parameter expansion in a soft reading: any text
_PARAMETER = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")
# The scanner takes a run of characters that need no decision in one step, not one call
# per character (a long line has thousands): unquoted, printable ASCII other than a blank
# and the characters the shell reads specially (a "#" only starts a comment at a word's
# start); inside double quotes, anything but the quote, \, $, ` and control characters.
_SPECIAL = "\\'\"$`<>()#;&|"
_ORDINARY = "".join(chr(c) for c in range(0x21, 0x7f) if chr(c) not in _SPECIAL)
_PLAIN_RUN = re.compile(f"[{re.escape(_ORDINARY)}][{re.escape(_ORDINARY + '#')}]*")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # refused even inside quotes
_QUOTED_RUN = re.compile(r'[^"\\$`\x00-\x08\x0b-\x1f\x7f-\x9f]+')
_NAME_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TILDE_AFTER = re.compile(r"[=:]~")
_BRACES = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_BRACKETS = re.compile(r"\[.*\]")


@dataclass
class Command:
    """One simple command of a line.

    Attributes:
        text: the canonical form (str), what allow rules are matched against.
        tails: the canonical form of the command from each of its words on, and where
            that word is a path, also from its base name (``/bin/rm`` → ``rm``); list
            of str, ``tails[0]`` is ``text`` without redirections. Deny and ask rules
            are matched against every tail, so ``sudo rm -rf /``, ``xargs rm -rf``,
            ``find . -exec rm -rf {} ;`` and ``/bin/rm -rf /`` all meet ``rm -rf *``.
        writes: whether it redirects output to a file (bool).
        op_before: the operator joining it to the previous command, ``None`` first.
        words: the command's words after its assignments, unquoted (list of str):
            ``words[0]`` is the program.
        assignments: its leading ``NAME=value`` words (list of str).
        redirects: ``(fd, op, target)`` triples (str, str, str), harmless ones too,
            ``fd`` ``""`` when none is written.
        globs: the indexes in ``words`` of words holding an unquoted glob (list of
            int); the shell may replace them with file names.
    """

    text: str
    tails: list
    writes: bool = False
    op_before: str | None = None
    words: list = field(default_factory=list)
    assignments: list = field(default_factory=list)
    redirects: list = field(default_factory=list)
    globs: list = field(default_factory=list)


@dataclass
class CommandLine:
    """A line as read: ``commands`` (list of ``Command``), ``nested`` (list of
    ``CommandLine`` that ``sh -c`` and ``eval`` run) and ``unreadable`` (str or
    ``None``, for this line and every nested one), see the module's docstring."""

    commands: list[Command] = field(default_factory=list)
    nested: list["CommandLine"] = field(default_factory=list)
    unreadable: str | None = None
    stopped: bool = False  # reading stopped at the trouble (a pattern: it can never match)
    # an unreadable line read again with its parameter expansions and globs as WILD
    # (words that may stand for any words): ``None`` when something else stops it
    soft: "CommandLine | None" = None
    softly: bool = False  # this is such a reading

    def every_command(self):
        """Walk the line and the lines it runs (``sh -c``, ``eval``).

        Yields:
            Command: each command, this line's first.
        """
        yield from self.commands
        for line in self.nested:
            yield from line.every_command()

    def every_line(self):
        """Walk this line and every nested one.

        Yields:
            CommandLine: this line first.
        """
        yield self
        for line in self.nested:
            yield from line.every_line()


def quote(word: str) -> str:
    """A word as it appears in a canonical command.

    Args:
        word: the word (str).

    Returns:
        str: bare when it is safe, else in POSIX single quotes. ``*`` stays bare, so a
        rule's wildcard lines up with it.
    """
    return word if _SAFE_WORD.fullmatch(word) else shlex.quote(word)


def parse(line: str, pattern: bool = False, _depth: int = 0,
          _soft: bool = False) -> CommandLine:
    """Read a command line, see the module's docstring. Never raises.

    Args:
        line: the command line (str).
        pattern: ``True`` to read a rule's pattern (``*`` a wildcard, see above).

    Returns:
        CommandLine: the commands; an unreadable line also holds the commands read
        before the trouble and the whole text (blanks collapsed) as one more command.
    """
    result = CommandLine(softly=_soft)
    scanner = _Scanner(line, result, pattern, _depth)
    try:
        if len(line) > MAX_LINE and not pattern:
            raise UnreadableCommandLine(f"a line longer than {MAX_LINE} characters")
        scanner.scan()
        _build(scanner.out, result, pattern, _depth, final=True)
    except UnreadableCommandLine as exc:
        result.unreadable, result.stopped = str(exc), True
        if not result.commands:
            try:
                _build(scanner.out, result, pattern, _depth, final=False)
            except UnreadableCommandLine:
                pass
        text = " ".join(line[:MAX_LINE].split())
        if text and all(c.text != text for c in result.commands):
            result.commands.append(Command(text, [text]))
    for nested in result.nested:
        if nested.unreadable and result.unreadable is None:
            result.unreadable = nested.unreadable
    if _soft:
        return None if result.stopped else result
    if result.unreadable and not pattern:
        result.soft = parse(line, _depth=_depth, _soft=True)
    return result


@dataclass
class _Word:
    """A word being read, as ``(chars, plain)`` pieces: ``chars`` unquoted, ``plain``
    whether they stood unquoted (for globs, ``~``, ``{``, reserved words)."""

    pieces: list = field(default_factory=list)

    def add(self, chars: str, plain: bool) -> None:
        self.pieces.append((chars, plain))

    def value(self) -> str:
        return "".join(chars for chars, _ in self.pieces)

    def unquoted(self) -> str:
        """The word with every quoted character replaced by ``\\x02``."""
        return "".join(chars if plain else "\x02" * len(chars) for chars, plain in self.pieces)


class _Scanner:
    """Turns a line into ``("word", _Word)``, ``("redirect", (fd, op, _Word))`` and
    ``("op", str)`` tokens."""

    def __init__(self, line: str, result: CommandLine, pattern: bool, depth: int):
        self.s, self.i, self.result, self.pattern = line, 0, result, pattern
        self.out: list = []
        self.word: _Word | None = None

    def refuse(self, why: str) -> None:
        """A line: stop, unreadable. A pattern: note what a line would be refused for."""
        if not self.pattern:
            raise UnreadableCommandLine(why)
        if self.result.unreadable is None:
            self.result.unreadable = why

    def add(self, chars: str, plain: bool) -> None:
        if self.word is None:
            self.word = _Word()
        self.word.add(chars, plain)

    def end_word(self) -> None:
        if self.word is None:
            return
        word, self.word = self.word, None
        if self.out and self.out[-1][0] == "redirect" and self.out[-1][1][2] is None:
            fd, op, _ = self.out.pop()[1]
            self.out.append(("redirect", (fd, op, word)))
        else:
            self.out.append(("word", word))

    def pending_redirect(self) -> bool:
        return bool(self.out) and self.out[-1][0] == "redirect" and self.out[-1][1][2] is None

    def emit_op(self, op: str) -> None:
        self.end_word()
        if self.pending_redirect():
            raise UnreadableCommandLine("a redirection without a target")
        self.out.append(("op", op))

    def wild_parameter(self, plain: bool, at: int | None = None) -> bool:
        """In a soft reading (``CommandLine.soft``): ``$NAME`` or ``${NAME}`` at ``at``
        becomes ``WILD``, a part that may be any text (unquoted: any words). Returns
        whether it did; then ``self.i`` is past it."""
        if not self.result.softly:
            return False
        found = _PARAMETER.match(self.s, self.i if at is None else at)
        if found is None:
            return False
        self.add(WILD, plain)
        self.i = found.end()
        return True

    def check_char(self, c: str, quoted: bool) -> None:
        if self.pattern or c in _PRINTABLE or c in "\t\n":
            return
        if ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0:
            self.refuse(f"a control character ({c!r})")
        elif not quoted:
            self.refuse(f"a character outside ASCII outside quotes ({c!r}, U+{ord(c):04X})")

    def scan(self) -> None:
        s = self.s
        while self.i < len(s):
            run = _PLAIN_RUN.match(s, self.i)
            if run:
                self.add(run.group(), True)
                self.i = run.end()
                continue
            c = s[self.i]
            self.check_char(c, quoted=False)
            if c == "\\":
                nxt = s[self.i + 1:self.i + 2]
                if nxt == "\n":  # a line continuation
                    self.i += 2
                    continue
                if not nxt:
                    self.refuse("a backslash at the end of the line")
                    nxt = "\\"
                self.check_char(nxt, quoted=False)
                self.add(nxt, False)
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise UnreadableCommandLine("unbalanced quotes")
                control = _CONTROL.search(s, self.i + 1, end)
                if control and not self.pattern:
                    self.check_char(control.group(), quoted=True)
                self.add(s[self.i + 1:end], False)
                self.i = end + 1
            elif c == '"':
                self.double_quoted()
            elif c == "$":
                if s.startswith("$'", self.i):
                    self.refuse("ANSI-C quoting ($'…'), read differently by dash and bash")
                elif s.startswith('$"', self.i):
                    self.refuse('a translated string ($"…"), bash only')
                elif s.startswith("$[", self.i):
                    self.refuse("an arithmetic expansion ($[…]), bash only")
                elif self.wild_parameter(plain=True):
                    continue
                else:
                    self.refuse("an expansion ($…)")
                self.add("$", True)
                self.i += 1
            elif c == "`":
                self.refuse("a command substitution (`…`)")
                self.add("`", True)
                self.i += 1
            elif c in " \t":
                self.end_word()
                self.i += 1
            elif c == "#" and self.word is None:  # a comment: the shell runs none of it
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif c in "<>":
                self.redirection()
            elif c in "()":
                self.refuse("a subshell, group or function (parentheses)")
                self.add(c, True)
                self.i += 1
            elif c in ";&|\n":
                self.operator()
            else:
                self.add(c, True)
                self.i += 1
        self.end_word()
        if self.pending_redirect():
            raise UnreadableCommandLine("a redirection without a target")

    def operator(self) -> None:
        s, i = self.s, self.i
        two = s[i:i + 2]
        if two in ("&&", "||"):
            op = two
        elif two == ";;" or two == ";&":
            self.refuse(f"{two} outside a case (a syntax error)")
            op = ";"
        elif two == "|&":
            self.refuse("|& (bash only)")
            op = "|&"
        elif two == "&>":
            self.refuse("&> (bash writes a file, dash runs the command in the background)")
            self.end_word()
            self.out.append(("redirect", ("", "&>", None)))
            self.i += 2
            return
        else:
            op = s[i]
        self.emit_op(op)
        self.i += len(op)

    def double_quoted(self) -> None:
        s, i = self.s, self.i + 1
        self.add("", False)
        while i < len(s) and s[i] != '"':
            run = _QUOTED_RUN.match(s, i)
            if run:
                self.add(run.group(), False)
                i = run.end()
                continue
            c = s[i]
            self.check_char(c, quoted=True)
            if c == "\\" and i + 1 < len(s) and s[i + 1] in '$`"\\\n':
                if s[i + 1] != "\n":
                    self.add(s[i + 1], False)
                i += 2
                continue
            if c == "$" and self.wild_parameter(plain=False, at=i):
                i = self.i
                continue
            if c == "$" or c == "`":
                self.refuse("an expansion inside double quotes")
            self.add(c, False)
            i += 1
        if i >= len(s):
            raise UnreadableCommandLine("unbalanced quotes")
        self.i = i + 1

    def redirection(self) -> None:
        s = self.s
        fd = ""
        if self.word is not None:
            text, bare = self.word.value(), self.word.unquoted()
            if text and text == bare and set(text) <= ASCII_DIGITS:
                if len(text) > 1:
                    self.refuse(f"a file descriptor of more than one digit ({text}), "
                                "read differently by dash and bash")
                fd, self.word = text, None
            elif bare.startswith("{") and bare.endswith("}"):
                self.refuse("a named file descriptor ({var}>), bash only")
        self.end_word()
        if self.pending_redirect():
            raise UnreadableCommandLine("a redirection without a target")
        for op in ("<<<", "<<-", "<<", "<>", "<&", ">>", ">|", ">&", "<", ">"):
            if s.startswith(op, self.i):
                break
        if op == "<<<":
            self.refuse("a here-string (<<<), bash only")
        elif op in ("<<", "<<-"):
            self.refuse("a here-document")
        self.i += len(op)
        self.out.append(("redirect", (fd, op, None)))


def _words(value: _Word, pattern: bool) -> str:
    """A word's final text: ``~`` expanded, checked for expansions bash or dash make."""
    text, bare = value.value(), value.unquoted()
    if bare.startswith("~"):
        if text == "~" or (bare.startswith("~/")):
            home = os.environ.get("HOME")
            if home is None:
                if not pattern:
                    raise UnreadableCommandLine("~ with no HOME set")
            else:
                text = home + text[1:]
                bare = "\x02" * len(home) + bare[1:]
        elif not pattern:
            raise UnreadableCommandLine("a ~ expansion other than ~ and ~/ (~user, ~+ …)")
    if not pattern:
        if _TILDE_AFTER.search(bare):
            raise UnreadableCommandLine("a ~ after = or : (bash expands it in some words)")
        if _BRACES.search(bare):
            raise UnreadableCommandLine("brace expansion ({a,b}, {1..3}), bash only")
    return text


def _is_glob(bare: str) -> bool:
    return "*" in bare or "?" in bare or _BRACKETS.search(bare) is not None


def _build(tokens: list, result: CommandLine, pattern: bool, depth: int,
           final: bool) -> None:
    """Group tokens into commands, checking the operators' grammar (a line starting
    with ``;``, two operators in a row or one at the end is a syntax error)."""
    parts: list = []
    op, after = None, "start"  # after: "start", "and" (&&, ||, |), "sep" (; &), "cmd"
    for kind, value in tokens + [("end", None)]:
        if kind in ("word", "redirect"):
            parts.append((kind, value))
            continue
        if parts:
            result.commands.append(_command(parts, op, result, pattern, depth))
            parts, after, op = [], "cmd", None
        if kind == "end":
            if after == "and" and final and not pattern:
                raise UnreadableCommandLine("a line ending in an operator (a syntax error)")
            break
        if value == "\n":
            if after in ("cmd", "sep"):
                op, after = "\n", "sep"
            continue
        if after != "cmd" and not pattern:
            raise UnreadableCommandLine(f"{value!r} where a command belongs (a syntax error)")
        op, after = value, ("sep" if value in (";", "&") else "and")


def _command(parts: list, op: str | None, result: CommandLine, pattern: bool,
             depth: int) -> Command:
    words, assignments, redirects, globs, shown = [], [], [], [], []
    writes = False
    for kind, value in parts:
        if kind == "redirect":
            fd, bare_op, target_word = value
            if target_word is None:  # a line read only in part
                continue
            target = _words(target_word, pattern)
            if not pattern:
                bare = target_word.unquoted()
                if bare_op in (">&", "<&") and not (
                        target == bare and (target == "-" or (
                            len(target) == 1 and target in ASCII_DIGITS))):
                    raise UnreadableCommandLine(f"{bare_op}{target} (bash writes a file there, "
                                      "dash refuses it)")
                if _is_glob(bare):
                    raise UnreadableCommandLine("a glob in a redirection (bash expands it, dash "
                                      "does not)")
            redirects.append((fd, bare_op, target))
            if target == "/dev/null" or bare_op in (">&", "<&"):
                continue
            writes = writes or bare_op in _WRITING
            shown.append(fd + bare_op + quote(target))
            continue
        bare = value.unquoted()
        text = _words(value, pattern)
        if not words and not assignments and not pattern and bare in _RESERVED:
            raise UnreadableCommandLine(f"a compound command or reserved word ({bare})")
        if not words and not pattern:
            name = _NAME_START.match(bare)
            rest = bare[name.end():] if name else ""
            if name and rest.startswith("="):
                assignments.append(text)
                shown.append(quote(text))
                continue
            if name and (rest.startswith("[") or rest.startswith("+=")):
                raise UnreadableCommandLine("a bash array or += assignment")
        if not pattern and (_is_glob(bare) or WILD in bare) and result.softly:
            globs.append(len(words))  # a word that may stand for any words
        elif not pattern and _is_glob(bare):
            if not words:
                raise UnreadableCommandLine("a glob in a command's name")
            if bare[:1] in "*?[-\x02" and (bare[:1] != "\x02" or text[:1] == "-"):
                raise UnreadableCommandLine(f"an unquoted glob ({text}) that could expand into an "
                                  "option")
            globs.append(len(words))
        words.append(text)
        shown.append(quote(text))
    if not pattern and words:
        _bash_only_builtins(words)
    text = " ".join(shown)
    if not pattern and (len(words) + len(assignments) > MAX_WORDS or len(text) > MAX_TEXT):
        raise UnreadableCommandLine(f"a command of more than {MAX_WORDS} words or {MAX_TEXT} "
                          "characters")
    tails = []
    everything = assignments + words
    quoted = [quote(w) for w in everything]  # once, not once per tail
    for start in range(len(everything)):
        rest = " ".join(quoted[start + 1:])
        program = everything[start]
        names = [quoted[start]]
        if "/" in program.rstrip("/") and _SAFE_WORD.fullmatch(program):
            names.append(quote(program.rstrip("/").rsplit("/", 1)[-1]))  # /bin/rm: rm
        tails += [f"{name} {rest}".rstrip(" ") for name in names]
    if not pattern:
        # its standard input: a pipe or a file, else /dev/null (run_command's)
        piped = op in ("|", "|&") or any(fd in ("", "0") and o in ("<", "<>", "<&")
                                         for fd, o, _ in redirects)
        _nested_scripts(words, result, depth, piped)
    return Command(text, tails or [text], writes, op, words, assignments, redirects, globs)


def _bash_only_builtins(words: list[str]) -> None:
    name = words[0]
    if name == "let":
        raise UnreadableCommandLine("let (bash arithmetic)")
    if name == "alias":
        raise UnreadableCommandLine("an alias, which changes how later commands are read")
    if name in ("declare", "typeset", "local", "export", "readonly") and any(
            re.fullmatch(r"[-+][A-Za-z]*[inaA][A-Za-z]*", w) for w in words[1:]):
        # x='a[$(touch F)]' after declare -i x runs the substitution (bash arithmetic)
        raise UnreadableCommandLine(f"{name} with an integer, nameref or array attribute, "
                                    "after which bash evaluates what is assigned")
    if name in _NAME_TAKERS and any("[" in w for w in words[1:]):
        raise UnreadableCommandLine(f"{name} with a bash array subscript (a[…]) in an argument, "
                          "which bash evaluates")


def _nested_scripts(words: list[str], result: CommandLine, depth: int,
                    piped: bool = False) -> None:
    """``sh -c SCRIPT`` and ``eval WORDS`` run a line of their own, wherever they
    stand in the command (``sudo sh -c …``): read it too; past the nesting limit, or
    a script of a shell this module cannot read, the line is unreadable."""
    for position, word in enumerate(words):
        name = word.rsplit("/", 1)[-1]
        script, rest = None, words[position + 1:]
        if name == "eval" and rest:
            script = " ".join(rest)
        elif name in _RUNS_A_SCRIPT and rest:
            try:
                script = _RUNS_A_SCRIPT[name](rest)
            except options.Unclear as exc:
                # a program (``sudo su …`` too) whose options cannot be read runs what
                # no one knows: not read fully; the word as another's operand (``grep
                # env -r``) is just a word
                if position == 0 or words[0].rsplit("/", 1)[-1] in options.RUNNERS:
                    result.nested.append(CommandLine(unreadable=str(exc)))
                    return
                continue
        elif name == "git":
            script = _git_config_commands(rest)
        elif name in POSIX_SHELLS or name in OTHER_SHELLS:
            script = _shell_script(words[position + 1:])
            if script is not None and name in OTHER_SHELLS:
                raise UnreadableCommandLine(f"a script for {name}, whose syntax this reader does "
                                  "not read")
            if script is None and piped and _reads_stdin(words[position + 1:]):
                # ``echo 'rm -rf x' | sh``: the commands come through the pipe, unread;
                # the line is read on, so that a deny rule naming it (curl * | sh) meets it
                result.nested.append(CommandLine(
                    unreadable=f"{name} reading its commands from standard input"))
                return
        if script is None:
            continue
        if depth + 1 > MAX_DEPTH:
            raise UnreadableCommandLine(f"scripts nested more than {MAX_DEPTH} deep")
        result.nested.append(parse(script, _depth=depth + 1))
        return


def _reads_stdin(args: list[str]) -> bool:
    """Whether a shell given these arguments (no ``-c``) reads its commands from
    standard input: no script operand, or ``-s`` / ``-i``."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("--", "-"):
            return index + 1 >= len(args)
        if arg.startswith("--"):
            index += 2 if arg in _SHELL_OPTION_ARGS else 1
            continue
        if len(arg) < 2 or arg[0] not in "-+":
            return False
        if "s" in arg[1:] or "i" in arg[1:]:
            return True
        index += 1 + sum(1 for letter in arg[1:] if letter in "oO")
    return True


# git-config(1): an alias starting with "!" and these settings are run by the shell
_GIT_COMMAND_KEYS = re.compile(r"(alias\..*|core\.(pager|editor|sshcommand|fsmonitor|askpass)|"
                               r"pager\..*|sequence\.editor|diff\..*\.(textconv|command)|"
                               r"diff\.external|merge\..*\.driver|filter\..*\.(clean|"
                               r"smudge|process)|credential\..*|gpg\..*program|"
                               r"uploadpack\..*|receivepack\..*|remote\..*\.(uploadpack|"
                               r"receivepack|vcs)|sendemail\..*|web\.browser|"
                               r"browser\..*\.cmd|man\..*\.cmd|difftool\..*\.cmd|"
                               r"mergetool\..*\.cmd|ssh\.variant)\Z", re.IGNORECASE)


def _git_config_commands(args: list[str]) -> str | None:
    """The commands that ``git -c KEY=VALUE`` settings hand to the shell, joined as
    one line (``git -c alias.x='!rm -rf v' x`` runs ``rm -rf v``), ``None`` when none."""
    found, index = [], 0
    while index < len(args) and args[index].startswith("-"):
        arg, value = args[index], None
        if arg == "-c" and index + 1 < len(args):
            value, index = args[index + 1], index + 2
        elif arg.startswith("-c"):
            value, index = arg[2:], index + 1
        else:
            index += 2 if arg in ("-C", "--git-dir", "--work-tree", "--namespace",
                                  "--config-env") else 1
        if value is not None:
            key, _, command = value.partition("=")
            if _GIT_COMMAND_KEYS.match(key):
                found.append(command[1:] if command.startswith("!") else command)
    return "\n".join(found) if found else None


def _script_option(spec) -> "callable":
    """The script a program runs from its ``-c`` / ``--command`` (any abbreviation it
    accepts, ``su --comm X``, read by ``options.read``), ``None`` for none."""
    def script(args: list[str]) -> str | None:
        found = options.values(options.read(args, spec)[0], "c", "command",
                               "session-command")  # su(1): --session-command runs one too
        return "\n".join(found) if found else None
    return script


def _env_script(args: list[str]) -> str | None:
    """env(1) -S / --split-string (``--split-s`` too) splits its value into the command."""
    found = options.values(options.read(args, options.ENV)[0], "S", "split-string")
    return "\n".join(found) if found else None


def _flock_script(args: list[str]) -> str | None:
    """flock(1) runs ``-c SCRIPT`` given right after its file (the words compared whole)."""
    operands = options.read(args, options.FLOCK)[1]
    if len(operands) >= 2 and operands[1] in ("-c", "--command"):
        if len(operands) < 3:
            raise options.Unclear("flock -c without its script")
        return operands[2]
    return None


def _watch_command(args: list[str]) -> str | None:
    """watch(1) joins its operands and runs them with ``sh -c``."""
    return " ".join(options.read(args, options.WATCH)[1]) or None


# programs that run a line of shell given as an argument (their manual pages)
_RUNS_A_SCRIPT = {
    "trap": lambda args: (args[1:2] or [None])[0] if args[0] == "--" else (
        None if args[0] in ("-", "-p", "-l") else args[0]),
    "su": _script_option(options.SU),
    "runuser": _script_option(options.RUNUSER),
    "script": _script_option(options.SCRIPT),
    "flock": _flock_script,
    "watch": _watch_command,
    "env": _env_script,
}


def _shell_script(args: list[str]) -> str | None:
    """The ``-c`` script of a shell's arguments (``-e``, ``-o OPT``, ``--`` … read as
    sh(1) and bash(1) read them), or ``None`` when there is no ``-c``."""
    has_c, index = False, 0
    while index < len(args):
        arg = args[index]
        if arg == "--" or arg == "-":
            index += 1
            break
        if arg.startswith("--"):
            index += 2 if arg in _SHELL_OPTION_ARGS else 1
            continue
        if len(arg) < 2 or arg[0] not in "-+":
            break
        letters = arg[1:]
        has_c = has_c or "c" in letters
        index += 1 + sum(1 for letter in letters if letter in "oO")
    if not has_c:
        return None
    if index >= len(args):
        raise UnreadableCommandLine("sh -c without its script")
    return args[index]
