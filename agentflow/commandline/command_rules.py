"""Options and sub-commands that make a program run another program, write a file, or
read one the line does not name (SPEC R19 addendum).

A wildcard rule (``git *``, ``sed *``, a bare ``run_command``) allows a family of
lines; a person writing it means the program's ordinary work, not ``git -c
core.fsmonitor='touch X' status``. So a wildcard rule never allows a command that
uses an entry of ``TABLE``; an exact rule (no wildcard) still may. For programs whose
job is to run code (``make``, ``npm run``, ``pytest``) the entries are the options that
change which code runs or where it writes.

``TABLE`` is data: each ``Entry`` names the program, where the option stands, what it
does and the source that says so (the program's manual page, or the published advisory
of another agent that fixed it as a vulnerability). ``used(command)`` gives the first
entry a ``shell.Command`` uses; ``agentflow policy check`` prints it.

How an option is recognised: a long option (``--output``) as itself, ``--output=…`` or
an abbreviation of three characters or more (``--out``: git, GNU tools and argparse
accept them); a short one (``-o``) as itself, with its value attached (``-ofile``) or at
the end of a cluster of flags (``-sSo``); an option of ``find`` (``-exec``) only as the
whole word. A word holding an unquoted glob counts as any option it could expand to.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from . import options, paths

RUNS, WRITES, READS = ("runs another program", "writes a file the line does not name",
                       "reads a file the line does not name")
SECRETS = "prints the environment, which holds every secret"


@dataclass(frozen=True)
class Entry:
    """One row of the table.

    Attributes:
        programs: the program names it applies to (tuple of str, base names).
        what: what it does (str, one of ``RUNS``, ``WRITES``, ``READS``, ``SECRETS``).
        source: where that is documented (str: manual page and section, or advisory).
        options: the options (tuple of str); empty with ``check`` or ``always``.
        sub: the sub-commands the options belong to (tuple of str), ``None`` for the
            program's own options; with no options, using the sub-command is enough.
        before_sub: the options stand before the sub-command (git's global options).
        check: the name of an operand check (``sed-script``, ``awk-program``,
            ``env-command``, ``make-variables``, ``python``, ``less-commands``,
            ``inline-code``, ``sets-variables``, ``unzip-writes``, ``uniq-output``,
            ``jq-program``, ``ps-environment``, ``no-operand``) or ``None``.
        always: every use of the program counts (bool).
    """

    programs: tuple
    what: str
    source: str
    options: tuple = ()
    sub: tuple | None = None
    before_sub: bool = False
    check: str | None = None
    always: bool = False

    def __str__(self) -> str:
        head = "/".join(self.programs)
        if self.sub:
            head += " " + "/".join(self.sub)
        if self.options:
            head += " " + "/".join(self.options)
        elif self.check:
            head += f" ({self.check})"
        return f"{head}: {self.what} (source: {self.source})"


_GIT_DIFF = ("log", "show", "diff", "whatchanged", "diff-tree", "diff-files", "diff-index",
             "range-diff", "format-patch")

TABLE = (
    # -- git --------------------------------------------------------------------------------
    Entry(("git",), RUNS, "git(1) OPTIONS -c, --config-env; git-config(1) core.fsmonitor, "
          "core.pager, alias.*; CVE-2022-24765", options=("-c", "--config-env"),
          before_sub=True),
    Entry(("git",), RUNS, "git(1) OPTIONS --exec-path; --git-dir (a repository whose "
          "config the line does not show: core.fsmonitor, aliases run programs)",
          options=("--exec-path", "--git-dir"), before_sub=True),
    Entry(("git",), RUNS, "git-config(1): alias.* and core.* settings run programs later",
          sub=("config",)),
    Entry(("git",), RUNS, "git-grep(1) -O/--open-files-in-pager",
          options=("-O", "--open-files-in-pager"), sub=("grep",)),
    Entry(("git",), RUNS, "git-clone(1) -u/--upload-pack, --template (hooks), -c/--config",
          options=("-u", "--upload-pack", "--template", "-c", "--config"), sub=("clone",)),
    Entry(("git",), RUNS, "git-fetch(1), git-pull(1), git-push(1), git-ls-remote(1), "
          "git-archive(1): --upload-pack, --receive-pack, --exec",
          options=("--upload-pack", "--receive-pack", "--exec"),
          sub=("fetch", "pull", "push", "ls-remote", "archive", "remote", "fetch-pack",
               "send-pack")),
    Entry(("git",), WRITES, "git-archive(1) -o/--output; git-bundle(1) create writes the "
          "bundle", options=("-o", "--output"), sub=("archive",)),
    Entry(("git",), WRITES, "git-log(1), git-diff(1) --output; git-format-patch(1) "
          "-o/--output-directory",
          options=("--output", "-o", "--output-directory"), sub=_GIT_DIFF),
    Entry(("git",), RUNS, "git-diff(1) --ext-diff, git-difftool(1) -x/--extcmd",
          options=("--ext-diff", "-x", "--extcmd", "-t", "--tool"), sub=_GIT_DIFF + ("difftool",)),
    Entry(("git",), RUNS, "git-rebase(1) -x/--exec", options=("-x", "--exec"),
          sub=("rebase",)),
    Entry(("git",), RUNS, "git-bisect(1) run, git-submodule(1) foreach, git-filter-branch(1), "
          "git-mergetool(1), git-difftool(1), git-send-email(1)",
          sub=("bisect", "filter-branch", "mergetool", "difftool", "send-email",
               "instaweb", "daemon", "submodule", "hook", "bundle", "web--browse")),
    Entry(("git",), SECRETS, "git-credential(1): prints stored passwords",
          sub=("credential", "credential-store", "credential-cache")),
    Entry(("git",), READS, "git-blame(1) --contents", options=("--contents",),
          sub=("blame", "annotate")),
    # -- find -------------------------------------------------------------------------------
    Entry(("find",), RUNS, "find(1) ACTIONS -exec, -execdir, -ok, -okdir",
          options=("-exec", "-execdir", "-ok", "-okdir")),
    Entry(("find",), WRITES, "find(1) ACTIONS -fprint, -fprint0, -fprintf, -fls, -delete",
          options=("-fprint", "-fprint0", "-fprintf", "-fls", "-delete")),
    # -- sed, awk ---------------------------------------------------------------------------
    Entry(("sed", "gsed"), WRITES, "sed(1) -i/--in-place", options=("-i", "--in-place")),
    Entry(("sed", "gsed"), RUNS, "sed(1) -f/--file: the script comes from a file",
          options=("-f", "--file")),
    Entry(("sed", "gsed"), RUNS, "GNU sed manual, 3.2/3.8: the e command and the s///e "
          "flag run a command, w/W and s///w write a file, r/R read one; the advisory "
          "\"Claude Code: Sed Command Validation Bypass that Allows Arbitrary File Writes\" "
          "(fixed in 2.0.31)", check="sed-script"),
    Entry(("awk", "gawk", "mawk", "nawk", "busybox-awk"), RUNS, "awk(1p), gawk(1): system(), "
          "print | cmd, cmd | getline, print > file, getline < file, ENVIRON, ARGV/ARGC (the "
          "files read)", check="awk-program"),
    Entry(("awk", "gawk", "mawk", "nawk"), RUNS, "gawk(1) -f/--file, -i/--include, "
          "-l/--load (a shared library), -E/--exec; -W (gawk: any long option, "
          "-W source=…; mawk(1): -W exec file)",
          options=("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec",
                   "-W")),
    Entry(("awk", "gawk", "mawk", "nawk"), WRITES, "gawk(1) -o/--pretty-print, -p/--profile, "
          "-d/--dump-variables", options=("-o", "--pretty-print", "-p", "--profile", "-d",
                                           "--dump-variables")),
    # -- rg, grep ---------------------------------------------------------------------------
    Entry(("rg",), RUNS, "rg(1) --pre COMMAND, --hostname-bin COMMAND",
          options=("--pre", "--hostname-bin")),
    # -- tar --------------------------------------------------------------------------------
    Entry(("tar", "gtar"), RUNS, "GNU tar manual 3.4 and tar(1): --checkpoint-action=exec, "
          "--to-command, -I/--use-compress-program, --rsh-command, --rmt-command, "
          "-F/--info-script/--new-volume-script; GTFOBins tar",
          options=("--checkpoint-action", "--to-command", "-I", "--use-compress-program",
                   "--rsh-command", "--rmt-command", "-F", "--info-script",
                   "--new-volume-script")),
    Entry(("tar", "gtar"), WRITES, "tar(1) -x/--extract/--get writes the archive's files; "
          "-g/--listed-incremental, --index-file",
          options=("-x", "--extract", "--get", "-g", "--listed-incremental", "--index-file")),
    # -- programs whose job is to run another -----------------------------------------------
    Entry(options.RUNNERS, RUNS,
          "each program's manual page (xargs(1), sudo(8), timeout(1), watch(1), sh(1), "
          "systemd-run(1), gdb(1) -ex, vim(1) -c/+cmd/:!, emacs(1) --eval …): it runs the "
          "command its operands name", always=True),
    # bash(1) SHELL BUILTIN COMMANDS: these set a variable (PATH, LD_PRELOAD, BASH_ENV …)
    # that changes which programs the line's later commands run, as NAME=value does
    Entry(("read", "getopts", "mapfile", "readarray"), RUNS, "bash(1) read, getopts, "
          "mapfile: each sets the variables its operands name (PATH …)", always=True),
    Entry(("printf",), RUNS, "bash(1) printf -v VAR: sets the variable (PATH …)",
          options=("-v",)),
    Entry(("export", "readonly", "declare", "typeset", "local"), RUNS, "sh(1p), bash(1) "
          "export NAME=value …: sets the variable (PATH, LD_PRELOAD …) for later commands",
          check="sets-variables"),
    Entry(("env",), RUNS, "env(1): runs COMMAND (-S/--split-string too); with none it "
          "prints the environment, which holds every secret",
          check="env-command"),
    Entry(("printenv",), SECRETS, "printenv(1)", always=True),
    Entry(("enable",), RUNS, "bash(1) SHELL BUILTIN COMMANDS enable -f (loads a library)",
          options=("-f",)),
    Entry(("hash",), RUNS, "bash(1) hash -p: a name then runs another file",
          options=("-p",)),
    # -- programs whose job is to run code: what changes which code runs, where it writes ----
    Entry(("perl", "ruby", "node", "nodejs", "php", "lua", "luajit", "Rscript", "tclsh",
           "bun", "deno", "ts-node", "tsx", "osascript", "irb", "pwsh", "powershell"), RUNS,
          "perl(1) -e/-E, ruby(1) -e, node(1) -e/--eval/-p/--print/-r/--require, php(1) "
          "-r, lua(1) -e/-l, Rscript(1) -e, bun -e/--eval, deno eval, osascript(1) -e, "
          "pwsh -c/-Command: code given on the line, not the script the line names",
          check="inline-code"),
    Entry(("python", "python3", "python2", "pypy", "pypy3"), RUNS,
          "python(1) -c, -m (a module other than pytest); the script operand is the job",
          check="python"),
    Entry(("pytest", "py.test"), WRITES, "pytest reference, command-line flags: --basetemp "
          "(emptied and written), --junitxml/--junit-xml, --resultlog/--result-log, "
          "--report-log, --debug, --log-file, --html",
          options=("--basetemp", "--junitxml", "--junit-xml", "--resultlog", "--result-log",
                   "--report-log", "--debug", "--log-file", "--html", "--cache-dir")),
    Entry(("pytest", "py.test"), RUNS, "pytest reference: -p (a plugin module), -c/"
          "--config-file/--inifile, --rootdir, --confcutdir, -o/--override-ini, --pdbcls, "
          "--pastebin (sends the output)",
          options=("-p", "-c", "--config-file", "--inifile", "--rootdir", "--confcutdir", "-o",
                   "--override-ini", "--pdbcls", "--pastebin")),
    Entry(("make", "gmake"), RUNS, "GNU make manual 9.8 Options Summary: -f/--file/"
          "--makefile, -C/--directory, -I/--include-dir, -e/--environment-overrides, "
          "--eval, -W/--what-if/--new-file/--assume-new, -o/--old-file",
          options=("-f", "--file", "--makefile", "-C", "--directory", "-I", "--include-dir",
                   "-e", "--environment-overrides", "--eval", "-W", "--what-if", "--new-file",
                   "--assume-new", "-o", "--old-file", "--assume-old")),
    Entry(("make", "gmake"), RUNS, "GNU make manual 9.5 Overriding Variables (VAR=value "
          "sets SHELL, CC … the recipes run)", check="make-variables"),
    Entry(("npm", "pnpm", "yarn"), RUNS, "npm-exec(1), npm-install(1) (lifecycle scripts), "
          "npm-config(1), npm-explore(1), npm-init(1) (runs create-* packages), "
          "npm-publish(1), npm-pack(1), npm-rebuild(1)",
          sub=("exec", "x", "dlx", "install", "i", "ci", "add", "update", "up", "upgrade",
               "rebuild", "rb", "explore", "init", "create", "config", "set", "publish",
               "pack", "link", "ln", "it", "cit", "install-test", "install-ci-test",
               "isntall", "in", "ins", "inst", "insta", "instal", "isnt", "isnta", "isntal",
               "edit", "pkg", "set-script", "audit", "dedupe", "ddp", "import")),
    Entry(("npm", "pnpm", "yarn"), RUNS, "npm-config(1) settings: --script-shell, --prefix, "
          "-C, --userconfig, --globalconfig, --node-options, --call/-c (npm exec)",
          options=("--script-shell", "--prefix", "-C", "--userconfig", "--globalconfig",
                   "--node-options", "--call", "-c")),
    Entry(("yarn",), RUNS, "yarn install: a bare yarn installs (lifecycle scripts)",
          check="no-operand"),
    Entry(("npx", "pnpx", "bunx"), RUNS, "npx(1): downloads and runs a package",
          always=True),
    # -- archives, copies over the network, manuals, sorting ----------------------------------
    Entry(("zip",), RUNS, "zip(1) -TT/--unzip-command (the test command), GTFOBins zip",
          options=("-TT", "--unzip-command")),
    Entry(("unzip",), WRITES, "unzip(1): extracts the archive's files (like tar -x), "
          "unless -l/-t/-v/-p/-Z only list, test or print", check="unzip-writes"),
    Entry(("rsync",), RUNS, "rsync(1) -e/--rsh, --rsync-path, GTFOBins rsync",
          options=("-e", "--rsh", "--rsync-path")),
    Entry(("scp", "sftp"), RUNS, "scp(1) -S program, -o ProxyCommand=…, -F ssh_config, "
          "-J; sftp(1) -S, -D, -o, -F", options=("-S", "-o", "-F", "-J", "-D")),
    Entry(("man",), RUNS, "man(1) -P/--pager, -H/--html (a browser), --browser, "
          "-X/--gxditview, -t/-T (a formatter), --preprocessor/-p; GTFOBins man",
          options=("-P", "--pager", "-H", "--html", "--browser", "-X", "--gxditview",
                   "-p", "--preprocessor", "-l", "--local-file", "-C", "--config-file")),
    Entry(("sort",), RUNS, "sort(1) --compress-program runs a program",
          options=("--compress-program",)),
    Entry(("sort",), WRITES, "sort(1) -o/--output FILE, -T/--temporary-directory",
          options=("-o", "--output", "-T", "--temporary-directory")),
    Entry(("uniq",), WRITES, "uniq(1) [INPUT [OUTPUT]]: a second operand is written",
          check="uniq-output"),
    Entry(("jq", "gojq", "yq"), SECRETS, "jq manual: $ENV, env (the environment), "
          "input_filename; -L/--library-path, import/include read modules",
          check="jq-program"),
    Entry(("ps",), SECRETS, "ps(1) e (BSD style, \"show the environment after the "
          "command\"), -o/o/-O/O/--format environ fields", check="ps-environment"),
    # -- downloads ----------------------------------------------------------------------------
    Entry(("curl",), WRITES, "curl(1) -o/--output, -O/--remote-name, --remote-name-all, "
          "--output-dir, -D/--dump-header, -c/--cookie-jar, --trace, --trace-ascii, "
          "--stderr, --libcurl, --etag-save, --hsts, --alt-svc",
          options=("-o", "--output", "-O", "--remote-name", "--remote-name-all", "--output-dir",
                   "-D", "--dump-header", "-c", "--cookie-jar", "--trace", "--trace-ascii",
                   "--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc")),
    Entry(("curl",), READS, "curl(1) -K/--config (options from a file), -n/--netrc, "
          "--netrc-file, --netrc-optional",
          options=("-K", "--config", "-n", "--netrc", "--netrc-file", "--netrc-optional")),
    Entry(("wget",), WRITES, "wget(1): saves what it downloads (-O/--output-document, "
          "-o/--output-file, -a/--append-output, -P/--directory-prefix); -e/--execute and "
          "--config read wgetrc commands", always=True),
    # -- pagers -----------------------------------------------------------------------------
    Entry(("less",), WRITES, "less(1) -o/-O/--log-file/--LOG-FILE, -k/--lesskey-file, "
          "--lesskey-src, --lesskey-content",
          options=("-o", "-O", "--log-file", "--LOG-FILE", "-k", "--lesskey-file",
                   "--lesskey-src", "--lesskey-content")),
    Entry(("less", "more"), RUNS, "less(1) +cmd and more(1) +cmd: initial commands, ! runs a "
          "shell command, | pipes to one", check="less-commands"),
)

# Programs whose words never name a program to run, whatever they expand to (each one's
# manual page: no option runs a command, reads a script or loads a library), so that
# ``ls *.py`` or ``echo $HOME`` cannot meet ``rm -rf *`` (SPEC R19 addendum).
RUNS_NOTHING = frozenset((
    "ls", "cat", "echo", "grep", "egrep", "fgrep", "wc", "head", "tail", "cut", "tr",
    "pwd", "true", "false", "test", "[", "basename", "dirname", "realpath", "readlink",
    "stat", "file", "du", "df", "touch", "mkdir", "rmdir", "rm", "cp", "mv", "ln", "chmod",
    "diff", "cmp", "comm", "nl", "tac", "rev", "seq", "date", "whoami", "id", "uname",
    "printf", "sleep", "md5sum", "sha1sum", "sha256sum", "base64", "od", "xxd", "strings",
    "tee", "mktemp", "paste", "join", "fold", "expand", "unexpand", "shuf", "cd", "pushd"))

# NAME=value before a command: PATH, LD_PRELOAD, BASH_ENV, GIT_*, PAGER … change what runs
ASSIGNMENTS = Entry(("NAME=value",), RUNS, "ld.so(8) LD_PRELOAD; sh(1p) PATH and ENV; "
                    "bash(1) BASH_ENV; git(1) ENVIRONMENT (GIT_CONFIG_PARAMETERS, "
                    "GIT_SSH_COMMAND, GIT_PAGER): a variable set for a command changes "
                    "which programs it runs", always=True)

_GIT_ARG_OPTIONS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix",
                    "--config-env", "--list-cmds"}


def _long(word: str, option: str) -> bool:
    name = word.split("=", 1)[0]
    return name == option or (len(name) >= 3 and option.startswith(name) and name != "--")


def _short(word: str, option: str, glob: bool) -> bool:
    if glob and word.startswith("-"):
        return True
    if not word.startswith("-") or word.startswith("--") or len(word) < 2:
        return False
    letter = option[1]
    if word[1] == letter:
        return True
    flags = re.match(r"-[A-Za-z0-9]*", word).group()
    return letter in flags[2:]


def _uses_option(words: list, option: str, globs: set, whole: bool) -> bool:
    for index, word in enumerate(words):
        glob = index in globs
        if whole:
            hit = word == option or (glob and word.startswith("-"))
        elif option.startswith("--"):
            hit = _long(word, option) or (glob and word.startswith("-"))
        else:
            hit = _short(word, option, glob)
        if hit:
            return True
    return False


def _git_sub(args: list) -> int:
    """The index in ``args`` of git's sub-command, ``len(args)`` when none."""
    index = 0
    while index < len(args):
        arg = args[index]
        if not arg.startswith("-"):
            return index
        index += 2 if arg in _GIT_ARG_OPTIONS else 1
    return index


def used(command) -> Entry | None:
    """The first entry of ``TABLE`` a command uses (SPEC R19 addendum).

    Args:
        command: a ``shell.Command`` (its ``words`` and ``globs``).

    Returns:
        Entry | None: the entry, or ``None`` when the command uses none.
    """
    if command.assignments:
        return ASSIGNMENTS
    if not command.words:
        return None
    # lower case: on a case-insensitive disk (macOS, Windows) GIT is git
    program = command.words[0].rsplit("/", 1)[-1].lower()
    if not any(program in entry.programs for entry in TABLE):
        # a versioned name is the same program: python3.12, perl5.36, lua5.4, gawk-5.1
        program = re.sub(r"-?[0-9][0-9.]*\Z", "", program) or program
    args = list(command.words[1:])
    globs = {i - 1 for i in command.globs}
    if program in ("tar", "gtar") and args and not args[0].startswith("-"):
        args[0] = "-" + args[0]  # tar's old style: the first word is a cluster of keys
    for entry in TABLE:
        if program not in entry.programs:
            continue
        scope, scope_globs = args, globs
        if entry.sub is not None or entry.before_sub:
            split = _git_sub(args) if program == "git" else next(
                (i for i, a in enumerate(args) if not a.startswith("-")), len(args))
            if entry.before_sub:
                scope, scope_globs = args[:split], globs
            else:
                if split >= len(args) or args[split] not in entry.sub:
                    continue
                scope = args[split + 1:]
                scope_globs = {i - split - 1 for i in globs}
        if entry.always or (entry.sub and not entry.options and not entry.check):
            return entry
        whole = program == "find"
        if any(_uses_option(scope, option, scope_globs, whole) for option in entry.options):
            return entry
        check = _inline_code(program) if entry.check == "inline-code" else \
            _CHECKS.get(entry.check)
        if check and check(scope, scope_globs):
            return entry
    return None


# -- operand checks ----------------------------------------------------------------------

def _operands(args: list, with_value: set) -> list:
    """The operands of a getopt-style argument list: options and their values skipped."""
    out, index = [], 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            return out + args[index + 1:]
        if arg.startswith("-") and len(arg) > 1:
            index += 2 if arg in with_value else 1
            continue
        out.append(arg)
        index += 1
    return out


def _values(args: list, short: str, long: str) -> list:
    """The values given to one option (``-e X``, ``-eX``, ``--expression=X``)."""
    out = []
    for index, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if arg == short or (arg.startswith("--") and _long(arg, long) and not eq):
            out.extend(args[index + 1:index + 2])
        elif arg.startswith(short) and not arg.startswith("--"):
            out.append(arg[len(short):])
        elif arg.startswith("--") and eq and _long(name, long):
            out.append(value)  # --expr=X: getopt_long takes an abbreviation
    return out


_SED_SIMPLE = set("=dDgGhHlnNpPqQxzF}")
_SED_LABEL = set("btT:")


def _sed_unsafe(script: str) -> bool:
    """Whether a sed script may run a command, write or read a file: a small reader of
    the GNU sed grammar that answers ``True`` for whatever it does not know."""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;":
            i += 1
            continue
        if c == "#":
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        # addresses: numbers, $, /re/, \cREc, first~step, +N, ~N, ",", "!"
        while i < n and (script[i] in "0123456789$,~+! \t" or script[i] in "/\\"):
            if script[i] in "/\\":
                delim = script[i] if script[i] == "/" else script[i + 1:i + 2]
                i += 1 if script[i] == "/" else 2
                while i < n and script[i] != delim:
                    i += 2 if script[i] == "\\" else 1
                i += 1
                while i < n and script[i] in "IM":
                    i += 1
            else:
                i += 1
        if i >= n:
            return False
        c = script[i]
        if c in _SED_SIMPLE or c == "{":
            i += 1
            if c in "qQlL":
                while i < n and script[i] in "0123456789 ":
                    i += 1
        elif c in _SED_LABEL:
            end = min([p for p in (script.find(";", i), script.find("\n", i)) if p >= 0],
                      default=n)
            i = end
        elif c in "aic":
            end = script.find("\n", i)
            i = n if end < 0 else end
        elif c in "sy":
            if i + 1 >= n or script[i + 1] in "\\\n":
                return True
            delim, i, parts = script[i + 1], i + 2, 0
            while i < n and parts < 2:
                if script[i] == "\\":
                    i += 2
                    continue
                if script[i] == delim:
                    parts += 1
                i += 1
            if parts < 2:
                return True
            while i < n and script[i] not in ";\n}":
                if script[i] in "ewWrR" or (c == "s" and script[i] not in "gpiImM0123456789 \t"):
                    return True
                i += 1
        else:
            return True  # e, w, W, r, R, v, anything unknown
    return False


def _sed_script(args: list, globs: set) -> bool:
    scripts = _values(args, "-e", "--expression")
    if not scripts:
        operands = _operands(args, {"-e", "-f", "-l", "--line-length", "-s"})
        if not operands:
            return False
        scripts = operands[:1]
        if args.index(operands[0]) in globs:
            return True
    return any(_sed_unsafe(s) for s in scripts)


def _awk_program(args: list, globs: set) -> bool:
    programs = _values(args, "-e", "--source")
    if not programs:
        operands = _operands(args, {"-F", "-v", "-f", "--field-separator", "--assign"})
        if not operands:
            return False
        programs = operands[:1]
        if args.index(operands[0]) in globs:
            return True
    for program in programs:
        bare = program.replace("||", "").replace(">=", "")
        # @: gawk's indirect call (f = "sys" "tem"; @f("…")), @load, @include; ARGV,
        # ARGC: the files awk reads, which a program may set to a name it builds
        # (ARGV[1] = ".e" "nv" reads a file the line does not name)
        if re.search(r"system|getline|ENVIRON|PROCINFO|ARGV|ARGC|[@|>]", bare):
            return True
    return False


def _env_command(args: list, globs: set) -> bool:
    # with a command env runs it; with none (NAME=VALUE only) it prints the environment
    return not any(a in ("--help", "--version") for a in args)


def _make_variables(args: list, globs: set) -> bool:
    return any("=" in a and not a.startswith("-") for a in args)


def _python(args: list, globs: set) -> bool:
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-", "--") or (index in globs and arg.startswith("-")):
            return arg != "--"
        # a cluster of flags ends at the first letter that takes a value: -Ic is -I -c
        letters = re.match(r"-[bBdEhiIOPqRsSuvx]*", arg).group() if arg[:1] == "-" \
            and arg[1:2] != "-" else ""
        if letters and len(arg) > len(letters) and arg[len(letters)] in "cm":
            arg = "-" + arg[len(letters):]
        if arg.startswith("-c"):
            return True
        if arg.startswith("-m"):
            module = arg[2:] or (args[index + 1] if index + 1 < len(args) else "")
            if module != "pytest":
                return True
            from . import shell
            rest = args[index + (1 if arg[2:] else 2):]
            return used(shell.Command("", [], words=["pytest", *rest])) is not None
        if not arg.startswith("-"):
            return False
        index += 2 if arg in ("-W", "-X", "-Q") or (letters and arg[len(letters):] in (
            "W", "X", "Q")) else 1
    return False


def _less_commands(args: list, globs: set) -> bool:
    return any(a.startswith("+") or (a.startswith("-") and "+" in a) for a in args)


_INLINE = {"perl": ("-e", "-E", "-M", "-m", "-x"), "ruby": ("-e", "-r", "-x"),
           "node": ("-e", "--eval", "-p", "--print", "-r", "--require", "--import",
                    "--loader", "--experimental-loader", "-i", "--interactive"),
           "php": ("-r", "-B", "-R", "-E", "-F", "-a", "-d"), "lua": ("-e", "-l", "-i"),
           "Rscript": ("-e",), "bun": ("-e", "--eval", "-p", "--print", "x"),
           "deno": ("eval", "repl", "-e"), "osascript": ("-e",), "irb": ("-r",),
           "pwsh": ("-c", "-Command", "-command", "-EncodedCommand", "-e", "-ec"),
           "tclsh": (), "ts-node": ("-e", "--eval", "-p", "--print", "-r", "--require"),
           "tsx": ("-e", "--eval", "-p", "--print")}
_INLINE.update(nodejs=_INLINE["node"], luajit=_INLINE["lua"],
               powershell=_INLINE["pwsh"])


def _inline_code(program: str):
    """The check for an interpreter: code on the line (``perl -e``, ``node -e``, a
    cluster ending in the letter, ``perl -le``), or no script operand (the code then
    comes from standard input: nothing the line names)."""
    def check(args: list, globs: set) -> bool:
        options = _INLINE.get(program, ())
        for index, arg in enumerate(args):
            if index in globs and arg.startswith("-"):
                return True
            if not arg.startswith("-"):
                return arg in options  # the script (or deno's eval sub-command)
            if arg == "--":
                return index + 1 >= len(args)
            name = arg.split("=", 1)[0]
            for option in options:
                if not option.startswith("-"):
                    continue
                if option.startswith("--") or len(option) > 2:
                    if name == option or (option.startswith("--") and _long(name, option)):
                        return True
                elif _short(arg, option, False):
                    return True
        return True  # no script: code from standard input, or an interactive prompt
    return check


def _sets_variables(args: list, globs: set) -> bool:
    return any("=" in a and not a.startswith("-") for a in args) or any(
        index in globs for index in range(len(args)))


def _unzip_writes(args: list, globs: set) -> bool:
    return not any(re.fullmatch(r"-[A-Za-z]*[ltvpZz][A-Za-z]*", a) for a in args)


def _uniq_output(args: list, globs: set) -> bool:
    return len(_operands(args, {"-f", "-s", "-w", "--skip-fields", "--skip-chars",
                                "--check-chars", "--group", "--all-repeated"})) > 1


def _jq_program(args: list, globs: set) -> bool:
    if any(_long(a, "--library-path") or a.startswith("-L") for a in args):
        return True
    operands = _operands(args, {"--arg", "--argjson", "--slurpfile", "--rawfile",
                                "--args", "--jsonargs", "-f", "--from-file", "--indent",
                                "--tab"})
    if any(a in ("-f", "--from-file") or _long(a, "--from-file") for a in args):
        return True
    program = operands[0] if operands else "."
    return bool(re.search(r"\benv\b|\$ENV|\$__prog|input_filename|\bimport\b|\binclude\b"
                          r"|\$__loc__", program))


def _ps_environment(args: list, globs: set) -> bool:
    for index, arg in enumerate(args):
        before = args[index - 1] if index else ""
        value = (before[-1:] in tuple("CGUgpstuoOqkNT") and before[:2] != "--") or (
            before.startswith("--") and "=" not in before)
        if not arg.startswith("-") and "e" in arg and not value:
            return True  # BSD style: "ps eww", "ps aux e"
        if "environ" in arg:
            return True
    return False


def _no_operand(args: list, globs: set) -> bool:
    return not any(not a.startswith("-") for a in args)


_CHECKS = {"sed-script": _sed_script, "awk-program": _awk_program,
           "env-command": _env_command, "make-variables": _make_variables,
           "python": _python, "less-commands": _less_commands,
           "sets-variables": _sets_variables, "unzip-writes": _unzip_writes,
           "uniq-output": _uniq_output, "jq-program": _jq_program,
           "ps-environment": _ps_environment, "no-operand": _no_operand}


# Programs that read every file below the folders they name (grep -r, rg, tar c, cp -r):
# ``grep -r KEY .`` names no secret file yet sends ``.env`` to the model. The value:
# the options that make it recursive (``None``: always), and whether it skips hidden
# names unless told (rg, ag: ``--hidden``, ``-u``).
_RECURSIVE = {"grep": (r"-[A-Za-z]*[rR][A-Za-z]*|--recursive|--dereference-recursive|"
                       r"-d\s*recurse|--directories=recurse", False),
              "egrep": None, "fgrep": None, "rgrep": (None, False),
              "rg": (None, True), "ag": (None, True), "ack": (None, False),
              "tar": (r"--create|-[A-Za-z]*c[A-Za-z]*", False), "zip": (r"-[A-Za-z]*r[A-Za-z]*|--recurse-paths", False),
              "cp": (r"-[A-Za-z]*[rRa][A-Za-z]*|--recursive|--archive", False),
              "rsync": (r"-[A-Za-z]*[ra][A-Za-z]*|--recursive|--archive", False)}
_RECURSIVE["egrep"] = _RECURSIVE["fgrep"] = _RECURSIVE["grep"]
_WALK_LIMIT = 20_000  # entries looked at; past it the walk counts as reaching a secret


def walks_into_secret(command, root: str, secret) -> str | None:
    """Whether a recursive reader (``grep -r``, ``rg``, ``tar c``, ``cp -r`` …) reads a
    secret file below a folder it names, or below ``root`` when a search names none
    (SPEC R19 addendum: no wildcard rule allows reading a secret file).

    Args:
        command: a ``shell.Command``.
        root: the folder it runs in (str, absolute).
        secret: ``(path) -> kind or None``, the workspace's secret-file check.

    Returns:
        str | None: the kind of the first secret file found (or why the walk gave up),
        ``None`` when there is none or the command reads no folder.
    """
    if not command.words:
        return None
    program = command.words[0].rsplit("/", 1)[-1]
    known = _RECURSIVE.get(program)
    if known is None:
        return None
    options, skips_hidden = known
    args = command.words[1:]
    if program == "tar" and args and not args[0].startswith("-"):
        args = ["-" + args[0], *args[1:]]  # tar's old style: czf is -czf
    if options is not None and not any(re.fullmatch(options, a) for a in args):
        return None
    if skips_hidden and any(a in ("--hidden", "-.", "--no-ignore") or re.fullmatch(
            r"-[A-Za-z]*u[A-Za-z]*", a) for a in args):
        skips_hidden = False
    operands = [w for w in args if not w.startswith("-")]
    searcher = program in ("grep", "egrep", "fgrep", "rgrep", "rg", "ag", "ack")
    if searcher and not any(
            re.fullmatch(r"-[A-Za-z]*[ef][A-Za-z]*|--regexp(=.*)?|--file(=.*)?", a)
            for a in args):
        operands = operands[1:]  # the first is the pattern
    folders, named = [], False
    for word in operands:
        try:
            path = paths.resolve(word, root)
        except (ValueError, OSError):
            continue
        named = named or os.path.exists(path)
        if os.path.isdir(path):
            folders.append(path)
    if searcher and not named:  # no file or folder named: it searches the current one
        folders = [root]
    seen, walked = 0, set()
    for folder in folders:
        # through links too (grep -R, rg -L follow them; a repository may ship
        # docs/keys -> ~/.ssh), each entry judged where it really lies
        for here, dirs, files in os.walk(folder, followlinks=True):
            if skips_hidden:
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                files = [f for f in files if not f.startswith(".")]
            real = os.path.realpath(here)
            if real in walked:  # a link back to a folder already read (src/me -> ..)
                dirs[:] = []
                continue
            walked.add(real)
            for name in files + dirs:
                seen += 1
                if seen > _WALK_LIMIT:
                    return f"more than {_WALK_LIMIT} entries to look through"
                path = os.path.join(real, name)
                kind = secret(path) or (secret(os.path.realpath(path))
                                        if os.path.islink(path) else None)
                if kind is not None:
                    return kind
    return None
