"""One reader of a program's options for the allow side and the deny side alike (SPEC
R19 addendum: an abbreviation a program accepts, ``--split-s`` for ``--split-string``,
is that option on both sides).

Programs built on ``getopt_long`` (GNU coreutils, util-linux, procps …) accept a long
option by any unique prefix of its name (``su --comm X`` is ``su --command X``), a short
option's value attached (``-cX``) or at the end of a cluster (``-lc X``), and a long
option's value after ``=`` or as the next word. ``read`` reads a word list as such a
program does, from the ``Spec`` of its options; what it cannot read as the program would
(an unknown or ambiguous option, an option missing its value) raises ``Unclear``, and
the caller treats the line as not read fully: it asks, never silently passes.
"""

from __future__ import annotations

from dataclasses import dataclass

# a word the reader cannot read as the program would; str() says which
from ..errors import UnreadableCommandLine as Unclear


@dataclass(frozen=True)
class Spec:
    """A program's options, as its ``getopt_long`` call declares them.

    Attributes:
        program: its name (str), for messages.
        flags: short options without a value (str of letters).
        valued: short options that take a value (str of letters).
        long_flags: long options without a value (tuple of str, no ``--``).
        long_valued: long options that take a value (tuple of str).
        long_optional: long options whose value may follow ``=`` only (tuple of str).
        stops: options end at the first operand (``+`` in the option string: env,
            flock, watch), else they may follow operands (GNU's permutation).
        source: where the option list comes from (str: the program's manual or
            source file).
    """

    program: str
    flags: str = ""
    valued: str = ""
    long_flags: tuple = ()
    long_valued: tuple = ()
    long_optional: tuple = ()
    stops: bool = False
    source: str = ""

    def long_name(self, word: str) -> str:
        """The long option a word (``--name`` or ``--name=value``) stands for.

        Args:
            word: the word (str), starting with ``--``.

        Returns:
            str: the option's full name, without ``--``.

        Raises:
            Unclear: no option, or more than one, has that name or prefix.
        """
        name = word[2:].split("=", 1)[0]
        every = self.long_flags + self.long_valued + self.long_optional
        if name in every:
            return name
        found = [option for option in every if option.startswith(name)]
        if len(found) == 1 and name:
            return found[0]
        what = "is ambiguous" if found else "is not one it is known to take"
        raise Unclear(f"{self.program} option {word.split('=', 1)[0]} {what}")


def read(args: list, spec: Spec) -> tuple[list, list]:
    """Read ``args`` as ``spec``'s program reads them.

    Args:
        args: the words after the program's name (list of str).
        spec: its ``Spec``.

    Returns:
        tuple[list, list]: ``(options, operands)``: options as ``(name, value)`` pairs
        in order (a short one by its letter, ``"c"``; a long one by its full name,
        ``"command"``; ``value`` ``None`` for a flag), and the operands in order.

    Raises:
        Unclear: an option the spec does not know, an ambiguous abbreviation, or a
            value missing at the end.
    """
    options, operands, index = [], [], 0
    while index < len(args):
        word = args[index]
        index += 1
        if word == "--":
            operands += args[index:]
            break
        if word.startswith("--"):
            name = spec.long_name(word)
            _, eq, value = word.partition("=")
            if name in spec.long_valued and not eq:
                if index >= len(args):
                    raise Unclear(f"{spec.program} option {word} without its value")
                value, index = args[index], index + 1
            elif name in spec.long_flags and eq:
                raise Unclear(f"{spec.program} option --{name} takes no value")
            options.append((name, value if eq or name in spec.long_valued else None))
            continue
        if word.startswith("-") and word != "-":
            position = 1
            while position < len(word):
                letter = word[position]
                position += 1
                if letter in spec.valued:
                    value = word[position:]
                    if not value:
                        if index >= len(args):
                            raise Unclear(f"{spec.program} option -{letter} without its "
                                          "value")
                        value, index = args[index], index + 1
                    options.append((letter, value))
                    break
                if letter not in spec.flags:
                    raise Unclear(f"{spec.program} option -{letter} is not one it is known "
                                  "to take")
                options.append((letter, None))
            continue
        operands.append(word)
        if spec.stops:
            operands += args[index:]
            break
    return options, operands


def values(options: list, *names: str) -> list:
    """The values given to any of ``names``, in order.

    Args:
        options: ``(name, value)`` pairs as ``read`` returns them.
        names: letters and full long names (str).

    Returns:
        list[str]: the values (flags, which have none, left out).
    """
    return [value for name, value in options if name in names and value is not None]


# programs whose job is to run the command their operands name (each one's manual page:
# xargs(1), sudo(8), timeout(1), watch(1), sh(1), systemd-run(1), gdb(1) -ex, vim(1) -c …)
RUNNERS = (
    "xargs", "sudo", "doas", "su", "timeout", "nice", "nohup", "setsid", "stdbuf",
    "ionice", "chrt", "taskset", "watch", "flock", "chroot", "unshare", "nsenter",
    "strace", "ltrace", "time", "busybox", "command", "builtin", "exec", "eval", "source",
    ".", "trap", "script", "ssh", "parallel", "sh", "bash", "dash", "ash", "ksh", "mksh",
    "zsh", "fish", "csh", "tcsh", "pkexec", "runuser", "sg", "systemd-run", "firejail",
    "bwrap", "proot", "fakeroot", "faketime", "valgrind", "gdb", "lldb", "expect",
    "unbuffer", "rlwrap", "xvfb-run", "at", "batch", "crontab", "setpriv", "prlimit",
    "numactl", "torsocks", "proxychains", "proxychains4", "sshpass", "run-parts", "chpst",
    "entr", "hyperfine", "start-stop-daemon", "daemonize", "catchsegv", "perf",
    "dbus-run-session", "vim", "vi", "nvim", "ex", "view", "vimdiff", "rvim", "emacs",
    "nano")


# getopt_long option lists (util-linux, coreutils, procps sources and manual pages)
ENV = Spec("env", flags="0iv", valued="uCSa", stops=True,
           long_flags=("ignore-environment", "null", "list-signal-handling", "debug",
                       "help", "version"),
           long_valued=("unset", "chdir", "split-string", "argv0"),
           long_optional=("block-signal", "default-signal", "ignore-signal"),
           source="env(1), coreutils src/env.c (\"+a:C:iS:u:v0\")")
SU = Spec("su", flags="flmpPhV", valued="cgGsw",
          long_flags=("fast", "login", "preserve-environment", "pty", "help", "version"),
          long_valued=("command", "session-command", "group", "supp-group", "shell",
                       "whitelist-environment"),
          source="su(1), util-linux login-utils/su-common.c")
RUNUSER = Spec("runuser", flags=SU.flags, valued=SU.valued + "u",
               long_flags=SU.long_flags, long_valued=SU.long_valued + ("user",),
               source="runuser(1), util-linux login-utils/su-common.c")
SCRIPT = Spec("script", flags="aefhqV", valued="cEIOBTmo", long_optional=("timing",),
              long_flags=("append", "return", "flush", "force", "quiet", "help",
                          "version"),
              long_valued=("command", "echo", "log-in", "log-out", "log-io", "log-timing",
                           "logging-format", "output-limit"),
              source="script(1), util-linux term-utils/script.c")
FLOCK = Spec("flock", flags="sexnoFuhV", valued="wE", stops=True,
             long_flags=("shared", "exclusive", "unlock", "nonblock", "nb", "no-fork",
                         "close", "verbose", "help", "version"),
             long_valued=("timeout", "wait", "conflict-exit-code"),
             source="flock(1), util-linux sys-utils/flock.c (\"+sexnoFuw:E:hV?\"; -c "
                    "only right after the file, compared whole)")
WATCH = Spec("watch", flags="bcdeghptvwrx", valued="nq", stops=True,
             long_flags=("beep", "color", "no-color", "chgexit", "errexit", "exec", "help",
                         "precise", "no-rerun", "no-title", "no-wrap", "version"),
             long_valued=("interval", "equexit"), long_optional=("differences",),
             source="watch(1), procps-ng src/watch.c")
