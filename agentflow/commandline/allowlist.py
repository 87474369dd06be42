"""What a wildcard rule allows: a table of the words known to be harmless, per program
(SPEC R19 addendum, fourth batch: a wildcard rule is an allowlist).

A person writing ``git *`` means ``git status`` and ``git log --oneline``, not ``git
stash show -p --output=F`` or ``git log -p`` (which prints a committed-then-removed
``.env`` from history). A list of what programs can do wrong is never complete, so a
wildcard rule allows a command only when every word after the program is one its
entry here knows: an option or sub-command that runs no other program, writes no file,
reads no file the line does not name, and prints neither the environment nor file
contents from history. A word the entry does not know makes the line ask, the message
naming the word. A program with no entry is allowed with plain words only (no option).
Programs whose job is to run the repository's code (``make``, ``npm test``,
``pytest``, interpreters), and a program named by a path or lying in the workspace, are
allowed by a wildcard rule only inside the sandbox. ``command_rules.TABLE`` (what is
known to be harmful) still applies on top; an exact rule may allow any readable line.

Options are read by ``options.read``, as each program's ``getopt_long`` (or git's
parse-options, which also takes unique prefixes) reads them, so an abbreviation is the
option it stands for on the allow side as on the deny side.

Sources: each program's manual page (cited per entry), and, for the list of programs
known safe, Codex's ``is_known_safe_command`` (openai/codex,
``codex-rs/core/src/command_safety/is_safe_command.rs`` at commit
fdfaeac6f2261cbc4b37eb59587291dee92fde4d, Apache-2.0), which this table narrows: Codex
allows ``git log`` and ``git show`` with any options, this table not ``-p`` or a blob.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field

from . import options
from .gitrepo import around, git_folder, tracked
from .options import Spec, Unclear

CODEX = ("Codex is_safe_command.rs (openai/codex@fdfaeac6f226, codex-rs/core/src/"
         "command_safety/is_safe_command.rs)")


@dataclass(frozen=True)
class Known:
    """One program's (or sub-command's) entry.

    Attributes:
        spec: its harmless options (an ``options.Spec``); any other option asks.
        operands: ``"plain"`` (words not starting with ``-``), ``"any"`` (echo prints
            whatever it is given) or ``"none"``.
        subs: sub-command → ``Known`` (git, npm); the first operand must be one.
        check: a further check of the words (``args``, ``root``) → why it asks, or
            ``None``.
        runs_code: its job is to run the repository's code (only inside the sandbox).
        source: where the entry's words are documented (str).
    """

    spec: Spec
    operands: str = "plain"
    subs: dict = field(default_factory=dict)
    check: object = None
    runs_code: bool = False
    source: str = ""


def _spec(program: str, **kw) -> Spec:
    return Spec(program, **kw)


# -- git ------------------------------------------------------------------------------------

_SUMMARY = ("stat", "name-only", "name-status", "numstat", "shortstat", "dirstat")
_DIFF_FLAGS = ("name-only", "name-status", "numstat", "shortstat", "summary", "no-color",
               "quiet", "exit-code", "ignore-all-space", "ignore-space-change",
               "ignore-blank-lines", "minimal", "patience", "histogram", "no-ext-diff",
               "no-renames", "cached", "staged", "compact-summary", "check")
_DIFF = _spec("git diff", flags="wbRz", valued="U", long_flags=_DIFF_FLAGS,
              long_valued=("unified",),
              long_optional=("stat", "color", "word-diff", "dirstat", "find-renames"))


def _summary(args: list, spec: Spec = None) -> bool:
    given = {name for name, _ in options.read(args, spec or _DIFF)[0]}
    return bool(given & set(_SUMMARY))


def _tracked_secret(root: str) -> str | None:
    """A secret file the workspace's git index holds (its copy, which a work tree's
    patch prints: a removed ``.env``, a rotated key's old value), or why it is not
    known; ``None`` when it holds none."""
    from .workspace import SECRET_FILES, Workspace
    folder = git_folder(root)
    names = [] if folder is None else tracked(folder)
    if names is None:
        return "git's index could not be read (a split index?), so it may hold one"
    space = Workspace(root, SECRET_FILES)
    found = next((n for n in names if space.secret(os.path.join(root, n))), None)
    return None if found is None else f"the index holds a secret file ({found})"


def _diff_check(args: list, root: str) -> str | None:
    """``git diff`` of the work tree; of commits or the index (``--cached``) only in a
    summary form: a patch of history prints what was committed and removed. A work
    tree's patch prints the index's copy of each changed file, so it asks where the
    index holds a secret file (``rm .env``; ``git diff`` printed its lines)."""
    spec = _DIFF
    opts, operands = options.read(args, spec)
    if _summary(args):
        return None
    if any(name in ("cached", "staged") for name, _ in opts):
        return "git diff --cached prints the committed content (only --stat and " \
               "--name-only forms are known harmless)"
    secret = _tracked_secret(root)
    if secret is not None:
        return (f"{secret}, and a patch of the work tree prints the index's copy (only "
                "--stat and --name-only forms are known harmless)")
    before = args[:args.index("--")] if "--" in args else args
    for word in before:
        if not word.startswith("-") and not os.path.exists(os.path.join(root, word)):
            return (f"`{word}` may be a revision, and a diff of commits prints history "
                    "(only --stat and --name-only forms are known harmless)")
    return None


_REVISION = re.compile(r"(HEAD|@|[A-Za-z_][A-Za-z0-9_./-]*)([~^][0-9]*)*\Z")


def _show_check(args: list, root: str) -> str | None:
    """``git show`` in a summary form of commits named by name: a patch, a blob
    (``REV:path``, a blob's id) prints history's file contents."""
    if not _summary(args, _SHOW) and not any(name in ("s", "no-patch") for name, _ in
                                      options.read(args, _SHOW)[0]):
        return "git show prints the commit's patch (only --stat, --name-only, -s are " \
               "known harmless)"
    for word in options.read(args, _SHOW)[1]:
        if not _REVISION.fullmatch(word) or re.fullmatch(r"[0-9a-fA-F]{4,64}", word):
            return (f"`{word}` may name a file's content in history (REV:path, an object "
                    "id); only commits named by name are known harmless")
    return None


_SHOW = _spec("git show", flags="s" + _DIFF.flags, valued=_DIFF.valued,
              long_flags=_DIFF.long_flags + ("no-patch", "oneline", "abbrev-commit",
                                             "no-decorate"),
              long_valued=_DIFF.long_valued,
              long_optional=_DIFF.long_optional + ("format", "pretty", "decorate",
                                                   "date"))
_LOG = _spec("git log", valued="n",
             long_flags=("oneline", "name-only", "name-status", "shortstat", "numstat",
                         "graph", "all", "reverse", "first-parent", "no-merges", "merges",
                         "abbrev-commit", "no-decorate", "follow", "date-order",
                         "topo-order", "no-color", "left-right", "boundary", "source",
                         "full-history", "simplify-by-decoration", "branches", "tags",
                         "remotes", "relative-date"),
             long_valued=("max-count", "skip", "since", "until", "after", "before",
                          "author", "committer", "grep"),
             long_optional=("stat", "decorate", "color", "format", "pretty", "date",
                            "abbrev"))


def _log_args(args: list) -> list:
    """``git log -5`` is ``-n 5``."""
    return [f"-n{w[1:]}" if re.fullmatch(r"-[0-9]+", w) else w for w in args]


def _log_check(args: list, root: str) -> str | None:
    options.read(_log_args(args), _LOG)
    return None


def _git_only(words: set, bare: bool):
    def check(args: list, root: str) -> str | None:
        if not args and not bare:
            return "a bare one changes the repository (git stash stashes the changes)"
        if not set(args) <= words:
            word = next(w for w in args if w not in words)
            return f"`{word}` is not one of the known harmless forms ({', '.join(sorted(words))})"
        return None
    return check


GIT_SOURCE = ("git(1), git-status(1), git-diff(1), git-log(1), git-show(1), git-branch(1), "
              "git-rev-parse(1), git-ls-files(1), git-describe(1); " + CODEX)
_NONE = _spec("git", long_flags=())
GIT = Known(
    _spec("git", flags="P", long_flags=("no-pager", "no-optional-locks", "version")),
    operands="plain", source=GIT_SOURCE, subs={
        # not -v/--verbose: it prints the staged patch, which is git diff --cached (a
        # .env removed with git rm, its content from HEAD)
        "status": Known(_spec("git status", flags="sbz",
                              long_flags=("short", "branch", "long", "show-stash",
                                          "ahead-behind", "no-ahead-behind", "renames",
                                          "no-renames", "null"),
                              long_optional=("porcelain", "untracked-files", "ignored",
                                             "ignore-submodules", "column",
                                             "find-renames"))),
        "diff": Known(_DIFF, check=_diff_check),
        "log": Known(_LOG, operands="any", check=_log_check),
        "show": Known(_SHOW, check=_show_check),
        "branch": Known(_spec("git branch", flags="avr",
                              long_flags=("all", "remotes", "verbose", "list",
                                          "show-current", "no-color", "merged",
                                          "no-merged")), operands="none"),
        "rev-parse": Known(_spec("git rev-parse", flags="q",
                                 long_flags=("show-toplevel", "show-prefix", "show-cdup",
                                             "is-inside-work-tree", "is-bare-repository",
                                             "abbrev-ref", "verify", "symbolic-full-name",
                                             "git-dir", "absolute-git-dir",
                                             "git-common-dir", "quiet"),
                                 long_optional=("short",))),
        "ls-files": Known(_spec("git ls-files", flags="cdmotsz",
                                long_flags=("cached", "deleted", "modified", "others",
                                            "stage", "exclude-standard", "directory",
                                            "no-empty-directory", "error-unmatch",
                                            "full-name"))),
        # names only: -v prints the URLs, which may carry a token (https://u:TOKEN@…)
        "remote": Known(_spec("git remote"), operands="none"),
        "describe": Known(_spec("git describe", long_flags=("tags", "always", "long",
                                                           "all"),
                                long_optional=("abbrev", "dirty"))),
        "stash": Known(_NONE, operands="any", check=_git_only({"list"}, bare=False)),
        "tag": Known(_NONE, operands="any", check=_git_only({"-l", "--list"}, bare=True)),
    })


# -- programs that run the repository's code ------------------------------------------------

def _npm_run_check(args: list, root: str) -> str | None:
    operands = options.read(args, _NPM_RUN)[1]
    if operands and operands[0] == "env":
        return "npm run env prints the environment, which holds every secret"
    return None


_NPM_RUN = _spec("npm run", flags="s", long_flags=("silent", "if-present",
                                                    "ignore-scripts"))
_NPM_TEST = Known(_NPM_RUN, operands="any", runs_code=True)
NPM = Known(_spec("npm", flags="v", long_flags=("version",)), source=(
    "npm-test(1), npm-run(1) (npm run env prints the environment), npm-ls(1)"), subs={
        "test": _NPM_TEST, "t": _NPM_TEST, "tst": _NPM_TEST,
        "run": Known(_NPM_RUN, operands="any", check=_npm_run_check, runs_code=True),
        "run-script": Known(_NPM_RUN, operands="any", check=_npm_run_check,
                            runs_code=True),
        "ls": Known(_spec("npm ls", flags="a", long_flags=("all",),
                          long_optional=("depth",))),
    })
MAKE = Known(_spec("make", flags="ksBn", valued="j",
                   long_flags=("keep-going", "silent", "quiet", "always-make",
                               "no-print-directory", "dry-run", "just-print"),
                   long_optional=("jobs",)),
             check=lambda args, root: next((f"`{w}` sets a variable the recipes run (SHELL, "
                                            "CC …)" for w in args if "=" in w and
                                            not w.startswith("-")), None),
             runs_code=True, source="GNU make manual 9.8 Options Summary (-p prints the "
                                    "environment, -f/-C/-e/--eval change what runs)")
PYTEST = Known(_spec("pytest", flags="qvxsl", valued="kmr",
                     long_flags=("lf", "last-failed", "ff", "failed-first", "collect-only",
                                 "co", "exitfirst", "quiet", "verbose", "no-header",
                                 "showlocals", "sw", "stepwise", "nf", "new-first",
                                 "strict-markers", "disable-warnings"),
                     long_valued=("maxfail", "tb", "durations", "deselect", "ignore")),
               runs_code=True, source="pytest reference, command-line flags (-p, -c, "
                                      "--rootdir, --basetemp … are not here)")


def _python_check(args: list, root: str) -> str | None:
    if args[:2] == ["-m", "pytest"]:
        return _words(PYTEST, "pytest", args[2:], root, True)
    if args and not args[0].startswith("-"):
        return None  # the script the line names: the repository's code (sandbox only)
    return "only `python -m pytest …` and a script the line names are known harmless"


PYTHON = Known(_spec("python"), operands="any", check=_python_check, runs_code=True,
               source="python(1): -m pytest, or the script operand")

# -- programs that only read the workspace and print it -------------------------------------

_GREP = _spec("grep", flags="rRnilcvwxEFGHhoqsLzZIUb", valued="eAmBCf",
              long_flags=("recursive", "dereference-recursive", "line-number",
                          "ignore-case", "files-with-matches", "files-without-match",
                          "count", "invert-match", "word-regexp", "line-regexp",
                          "extended-regexp", "fixed-strings", "basic-regexp",
                          "with-filename", "no-filename", "only-matching", "quiet",
                          "silent", "no-messages", "null", "null-data", "byte-offset"),
              long_valued=("regexp", "after-context", "before-context", "context",
                           "max-count", "include", "exclude", "exclude-dir", "file"),
              long_optional=("color", "colour"))
_LS = _spec("ls", flags="aAbBcCdfFghiklLmnNopqQrRsStuUvxXZ1",
            long_flags=("all", "almost-all", "human-readable", "recursive", "reverse",
                        "directory", "size", "inode", "classify", "group-directories-first",
                        "dereference", "numeric-uid-gid", "no-group", "literal"),
            long_valued=("sort", "time", "format", "ignore", "hide", "width"),
            long_optional=("color", "time-style", "indicator-style", "quoting-style"))
_HEAD = _spec("head", flags="qvz", valued="nc", long_flags=("quiet", "silent", "verbose",
                                                              "zero-terminated"),
              long_valued=("lines", "bytes"))


def _head_args(args: list) -> list:
    return [f"-n{w[1:]}" if re.fullmatch(r"-[0-9]+", w) else w for w in args]


_FIND_VALUED = {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-type",
                "-xtype", "-maxdepth", "-mindepth", "-size", "-mtime", "-mmin", "-atime",
                "-amin", "-ctime", "-cmin", "-newer", "-regex", "-iregex", "-perm", "-user",
                "-group", "-links", "-samefile", "-inum", "-regextype", "-printf"}
_FIND_FLAGS = {"-print", "-print0", "-not", "!", "-o", "-a", "-and", "-or", "(", ")",
               "-empty", "-prune", "-ls", "-true", "-false", "-readable", "-writable",
               "-executable", "-follow", "-xdev", "-mount", "-depth", "-nouser",
               "-nogroup", "-daystart", "-quit"}


def _find_check(args: list, root: str) -> str | None:
    index = 0
    while index < len(args) and not (args[index].startswith("-") or args[index] in "!()"):
        index += 1  # the folders
    while index < len(args):
        word = args[index]
        if word in _FIND_VALUED:
            index += 2
            continue
        if word not in _FIND_FLAGS and not re.fullmatch(r"-[HLP]", word):
            return f"`{word}` is not a find primary known to be harmless"
        index += 1
    return None


def _export_check(args: list, root: str) -> str | None:
    if not args:
        return "a bare export prints every exported variable (every secret)"
    for word in args:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word):
            return f"`{word}` prints or sets variables (only NAME … is known harmless)"
    return None


def _set_check(args: list, root: str) -> str | None:
    if not args:
        return "a bare set prints every variable (every secret)"
    index = 0
    while index < len(args):
        word = args[index]
        if word in ("-o", "+o") and index + 1 < len(args) and re.fullmatch(r"[a-z]+",
                                                                            args[index + 1]):
            index += 2
            continue
        if not re.fullmatch(r"[-+][euxvfCbhmnB]+", word):
            return f"`{word}` is not a known harmless form of set (set -e, set -o pipefail …)"
        index += 1
    return None


_TAR = _spec("tar", flags="tvzjJ", valued="f",
             long_flags=("list", "verbose", "gzip", "bzip2", "xz", "zstd", "numeric-owner",
                         "full-time", "utc"),
             long_valued=("file",))


def _tar_check(args: list, root: str) -> str | None:
    """A listing, every option of it known: ``--volno-file=F``, ``--index-file=F``
    write, ``-I``, ``--checkpoint-action`` run (an option tar takes in any mode)."""
    if args and not args[0].startswith("-"):
        if "t" not in args[0]:
            return f"`{args[0]}` is not a listing (tar t) known to be harmless"
        args = ["-" + args[0], *args[1:]]  # tar's old style: the first word is a cluster
    opts, _ = options.read(args, _TAR)
    if not any(name in ("t", "list") for name, _ in opts):
        return f"`{args[0] if args else 'tar'}` is not a listing (tar t) known to be harmless"
    remote = next((v for v in options.values(opts, "f", "file") if ":" in v), None)
    if remote is not None:
        return f"`{remote}` names an archive on another host, which tar reads by running rsh"
    return None


def _never(why: str):
    return lambda args, root: why


_READ = "its manual page; " + CODEX
TABLE = {
    "git": GIT, "npm": NPM, "make": MAKE, "gmake": MAKE, "pytest": PYTEST,
    "py.test": PYTEST, "python": PYTHON, "python3": PYTHON,
    "ls": Known(_LS, source="ls(1); " + CODEX),
    "grep": Known(_GREP, source="grep(1); " + CODEX),
    "egrep": Known(_GREP, source="grep(1)"), "fgrep": Known(_GREP, source="grep(1)"),
    "cat": Known(_spec("cat", flags="AbeEnstTuv",
                       long_flags=("number", "number-nonblank", "show-all", "show-ends",
                                   "show-tabs", "squeeze-blank", "show-nonprinting")),
                 source="cat(1); " + CODEX),
    "head": Known(_HEAD, operands="any", check=lambda args, root: options.read(_head_args(args), _HEAD)
                  and None, source="head(1); " + CODEX),
    "tail": Known(_spec("tail", flags="qvz", valued="nc", long_flags=_HEAD.long_flags,
                        long_valued=_HEAD.long_valued), operands="any",
                  check=lambda args, root: options.read(_head_args(args), TAIL_SPEC)
                  and None, source="tail(1) (not -f, which never ends); " + CODEX),
    "wc": Known(_spec("wc", flags="clmwL", long_flags=("bytes", "chars", "lines", "words",
                                                       "max-line-length")),
                source="wc(1) (not --files0-from); " + CODEX),
    "nl": Known(_spec("nl", flags="p", valued="bhfvinswd"), source="nl(1); " + CODEX),
    "find": Known(_spec("find"), operands="any", check=_find_check,
                  source="find(1) TESTS and ACTIONS, not -exec/-ok/-delete/-fprint/-fls; "
                         + CODEX),
    "sed": Known(_spec("sed", flags="nEsrzu", valued="el",
                       long_flags=("quiet", "silent", "regexp-extended", "separate",
                                   "null-data", "unbuffered", "posix", "sandbox",
                                   "debug"),
                       long_valued=("expression", "line-length")),
                 source="sed(1) (not -i, -f; the script's e/w/r commands are "
                        "command_rules' sed-script check); " + CODEX + " (sed -n Np)"),
    "awk": Known(_spec("awk", valued="Fv", long_valued=("field-separator", "assign")),
                 source="awk(1p) -F, -v (the program: command_rules' awk-program check)"),
    "rg": Known(_spec("rg", flags="nilcvwxFSsHoqLuN", valued="egtTmABC",
                      long_flags=("line-number", "ignore-case", "files-with-matches",
                                  "count", "invert-match", "word-regexp", "line-regexp",
                                  "fixed-strings", "smart-case", "case-sensitive",
                                  "with-filename", "no-filename", "only-matching", "quiet",
                                  "hidden", "no-ignore", "no-heading", "heading",
                                  "files", "vimgrep", "json", "no-line-number"),
                      long_valued=("regexp", "glob", "iglob", "type", "type-not",
                                   "max-count", "after-context", "before-context",
                                   "context", "max-depth", "sort"),
                      long_optional=("color", "colors")),
                source="rg(1) (not --pre, --hostname-bin, -z/--search-zip: they run "
                       "programs); " + CODEX),
    "tar": Known(_spec("tar"), operands="any", check=_tar_check,
                 source="tar(1): t/--list only (c writes the archive, x its files; "
                        "--volno-file, --index-file write, -I runs)"),
    "echo": Known(_spec("echo"), operands="any", source="echo(1), sh(1p) echo; " + CODEX),
    "pwd": Known(_spec("pwd", flags="LP"), operands="none", source="pwd(1); " + CODEX),
    "cd": Known(_spec("cd", flags="LP"), source="sh(1p) cd; " + CODEX),
    "true": Known(_spec("true"), operands="any", source=CODEX),
    "false": Known(_spec("false"), operands="any", source=CODEX),
    "which": Known(_spec("which", flags="a"), source="which(1); " + CODEX),
    "export": Known(_spec("export"), operands="any", check=_export_check,
                    source="sh(1p) export: a bare export or -p prints every variable"),
    "set": Known(_spec("set"), operands="any", check=_set_check,
                 source="sh(1p) set: a bare set prints every variable"),
    "declare": Known(_spec("declare"), operands="any", check=_export_check,
                     source="bash(1) declare: bare or -p prints every variable"),
    "typeset": Known(_spec("typeset"), operands="any", check=_export_check,
                     source="bash(1) typeset"),
    "env": Known(_spec("env"), operands="any",
                 check=_never("env prints the environment or runs a command"),
                 source="env(1)"),
    "printenv": Known(_spec("printenv"), operands="any",
                      check=_never("printenv prints the environment"), source="printenv(1)"),
}
TAIL_SPEC = TABLE["tail"].spec

# programs whose job is to run the repository's code, with no entry above: plain words,
# inside the sandbox only
RUNS_CODE = frozenset((
    "perl", "ruby", "node", "nodejs", "php", "lua", "luajit", "Rscript", "tclsh", "bun",
    "deno", "ts-node", "tsx", "java", "cargo", "go", "mvn", "gradle", "ant", "rake", "tox",
    "nox", "pnpm", "yarn", "npx", "python2", "pypy", "pypy3", "ninja", "cmake", "just",
    "invoke", "poetry", "pipenv", "uv", "hatch", "pip", "pip3"))


def _words(known: Known, name: str, args: list, root: str, sandboxed: bool) -> str | None:
    """Why ``args`` of an entry ask, or ``None`` when every word is known."""
    why = _unknown_word(known, name, args, root, sandboxed)
    if why is None and known.runs_code and not sandboxed:
        return (f"runs the repository's code ({name}), which a wildcard rule allows only "
                "inside the sandbox")
    return why


def _unknown_word(known: Known, name: str, args: list, root: str,
                  sandboxed: bool) -> str | None:
    if known.subs:
        try:
            _, operands = options.read(args, Spec(known.spec.program, **{
                k: getattr(known.spec, k) for k in ("flags", "valued", "long_flags",
                                                    "long_valued", "long_optional")},
                stops=True))
        except Unclear as exc:
            return str(exc)
        if not operands:
            return None if args else f"a bare {name} is not a known harmless form"
        sub = operands[0]
        if sub not in known.subs:
            return f"`{sub}` is not a {name} sub-command known to be harmless"
        rest = args[len(args) - len(operands) + 1:]
        return _words(known.subs[sub], f"{name} {sub}", rest, root, sandboxed)
    try:  # an entry taking "any" words reads them in its check, if at all
        _, operands = options.read(args, known.spec) if known.operands != "any" else (
            [], [])
    except Unclear as exc:
        return str(exc)
    if known.operands == "none" and operands:
        return f"`{operands[0]}` is not a word {name} is known to take harmlessly"
    if known.check is not None:
        try:
            return known.check(args, root)
        except Unclear as exc:
            return str(exc)
    return None


def unknown(command, root: str, sandboxed: bool, after_cd: bool = False,
            named: bool = True) -> str | None:
    """Why a wildcard rule does not allow ``command``: a word its program's entry does
    not know, or code of the repository run outside the sandbox (SPEC R19 addendum).

    Args:
        command: a ``shell.Command`` of a line read fully.
        root: the workspace (str, absolute).
        sandboxed: whether the command runs inside the sandbox (bool).
        after_cd: an earlier command of the line changed the folder (bool): git may
            then read another repository's configuration.
        named: the rule spells the program (``rm *``; bool); a rule that does not (a
            bare tool name, ``*``) allows no program without an entry.

    Returns:
        str | None: why it asks (naming the word), or ``None`` when all is known.
    """
    if not command.words:
        return None
    program, args = command.words[0], list(command.words[1:])
    name = program.rsplit("/", 1)[-1]
    found = shutil.which(program) if "/" not in program else None
    own = "/" in program or (found is not None and os.path.realpath(found).startswith(
        root.rstrip("/") + "/"))
    if own:  # the repository's own program: whatever it does, only in the sandbox
        return None if sandboxed else (f"runs the repository's code ({program}), which a "
                                       "wildcard rule allows only inside the sandbox")
    known = TABLE.get(name) or TABLE.get(re.sub(r"[0-9.]+\Z", "", name))
    if known is None:
        if not named:
            return (f"{name} has no entry of words known to be harmless, and the rule "
                    "does not name it")
        if name in RUNS_CODE and not sandboxed:
            return (f"runs the repository's code ({name}), which a wildcard rule allows "
                    "only inside the sandbox")
        option = next((w for w in args if w.startswith("-") and w != "-"), None)
        return None if option is None else (
            f"`{option}` is an option, and {name} has no entry of options known to be "
            "harmless")
    if name == "git" and after_cd:
        return "git after a cd may read another repository's configuration (aliases, " \
               "core.fsmonitor run programs)"
    if name == "git" and git_folder(root) is None and (
            os.path.lexists(os.path.join(root, ".git")) or around(root)):
        return ("the workspace is no repository of its own, so git would use one around "
                "it or shipped in it (its settings run programs: core.fsmonitor; its "
                "files lie outside the workspace)")
    return _words(known, name, args, root, sandboxed)
