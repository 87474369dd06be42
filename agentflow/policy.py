"""Approval policies: grants as data (SPEC R19).

An ``ApprovalPolicy`` is three lists of rules, ``deny``, ``ask`` and ``allow``. A rule
is ``tool_name`` (every call of that tool) or ``tool_name(pattern)``, where the pattern
is matched against the tool's *subject*, the one argument the tool declares with
``@tool(subject=..., subject_kind=...)``:

===========  ========================================  ===================================
subject      what the pattern is matched against        wildcards
===========  ========================================  ===================================
``shell``    each command of the line, in canonical     ``*``: any characters
             form (``agentflow.commandline.shell``)
``path``     the path as the OS will open it: absolute, ``*``: any characters but ``/``;
             ``..`` collapsed, symlinks followed;       ``**``: any, ``/`` too; ``**/``:
             a relative pattern is relative to the      any folders, or none
             tool's workspace (else the current
             folder), ``~/`` is the home folder
``text``     the argument as it is                     ``*``: any characters
===========  ========================================  ===================================

A pattern ending in `` *`` or ``:*`` is a prefix at a word boundary: ``ls *`` matches
``ls`` and ``ls -la`` but not ``lsof`` (for paths the boundary is ``/``: ``src:*`` is
``src`` and everything under it). ``\\*`` is a literal star, ``\\\\`` a backslash.

**Compound commands.** A line such as ``git status && rm -rf /`` is cut into its
commands (``&&``, ``||``, ``;``, ``|``, ``&``, newlines) and each is judged on its own,
as Claude Code does with its ``Bash(…)`` rules and as Codex's exec policy does with
``bash -lc`` scripts it can split:

* a ``deny`` or ``ask`` rule decides when it matches *any* command of the line,
  including commands inside ``sh -c '…'``, ``eval``, ``trap``, ``su -c`` and
  ``watch``, and starting at any word of a command (``sudo rm -rf /`` meets
  ``rm -rf *``); a deny or ask pattern may name a pipeline or chain (``curl * | sh``),
  which then matches those commands next to each other;
* an ``allow`` decides only when *every* command of the line is allowed (each by a
  rule of its own).

**Rules about command lines** (SPEC R19 addendum). A line ``agentflow.commandline.shell`` cannot
read exactly as dash and bash read it (an expansion, a control character, bash-only
syntax …) is *unreadable*: no rule allows it, not even an exact one or the whole
tool. A deny rule reads every way a line could run (``_could_meet``: a glob or an
expansion may be any words): an unreadable line that some reading lets meet one asks,
and only a person may answer (``needs_a_person``); one no reading lets meet it is not
denied by it. An unreadable line meets the tool's first ask rule. A *wildcard* rule (a
``*`` in it, or a bare tool name) is an allowlist: it allows a command only when every
word is known harmless (``commandline.allowlist``), and never one that writes a file
with ``>``, uses an entry of ``command_rules.TABLE`` (an option that runs another
program, writes or reads a file the line does not name, or ``NAME=value`` before it),
or names a secret file (``workspace.SECRET_FILES``, also after a ``cd``), nor a path
tool's secret file; an *exact* rule still may. Paths are
read by ``agentflow.commandline.paths.resolve`` for tools and rules alike (``~`` the home folder).

Rules are checked ``deny``, then ``ask``, then ``allow``; within each, the layers in
their fixed order (run options, session grants, project file, user file); the first
match decides and specificity does not change the order, so no layer can widen what a
``deny`` anywhere forbids. No match: the tool's own ``requires_approval`` (R18).

A rule that can never match — an unknown tool, a pattern on a tool without a subject,
an allow pattern naming a chain — is a ``PolicyError`` when the policy meets the tools,
not a rule silently ignored.

**MCP tools** (``agentflow.mcp``) are named in rules as people write them,
``server.tool`` (``MCPTool.qualified_name``; the server's name has no dot, so the first
dot splits): ``filesystem.write_file(src/**)``. The wire name the model sees
(``filesystem__write_file``) is refused with a message giving the rule to write: it is
mangled to fit OpenAI's function names, so it is not a stable name for a policy file,
and one spelling per tool keeps a ``deny`` from being missed by a reader. Their subject
is read from the server's input schema (``agentflow.mcp``); a path subject is resolved
against the server's ``root`` (relative patterns too), with ``~/`` as the home folder,
as MCP filesystem servers do. A rule naming a server that is not among the tools is an
error, unless the check is told to keep it (``keep_other_servers``: ``agentflow chat``
for rules of servers not connected in that chat, as for a built-in switched off).
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from .commandline import allowlist, command_rules, paths, shell
from .commandline.paths import user_policy_path  # noqa: F401  (public here since SPEC R19)
from .commandline.patterns import (BACKSLASH, Glob, glob_tokens, path_matches,
                                   pattern_glob, protect, split_prefix)
from .commandline.workspace import SECRET_FILES, Workspace
from .durable import write_atomically
from .errors import PolicyError
from .types import Decision

EFFECTS = ("deny", "ask", "allow")  # the order rules are checked in (SPEC R19)
SUBJECT_KINDS = ("shell", "path", "text")
PROJECT_FILE = os.path.join(".agentflow", "policy.json")
# tool_name, or server.tool for an MCP tool (its MCP name: no spaces or parentheses)
_RULE = re.compile(r"([A-Za-z0-9_-]{1,64}(?:\.[^\s()]{1,128})?)(?:\((.*)\))?", re.DOTALL)
# A tool name in double quotes, for an MCP tool whose name holds what a bare name cannot
# (a space, a parenthesis): ``"notes.my tool"(pattern)``; ``\"`` and ``\\`` inside.
_QUOTED_RULE = re.compile(r'"((?:[^"\\]|\\.)+)"(?:\((.*)\))?', re.DOTALL)
_OP_KIND = {"|&": "|", "\n": ";", ";;": ";"}


def policy_name(tool) -> str:
    """The name rules use for a tool (SPEC R19).

    Args:
        tool: a ``Tool``.

    Returns:
        str: an MCP tool's ``qualified_name`` (``server.tool``), else its ``name``.
    """
    return getattr(tool, "qualified_name", None) or tool.name


def escape(text: str) -> str:
    """A pattern that matches exactly the given text.

    Args:
        text: the literal text (str).

    Returns:
        str: ``text`` with ``\\`` and ``*`` escaped.
    """
    return text.replace("\\", "\\\\").replace("*", "\\*")


@dataclass(frozen=True)
class Rule:
    """One rule as written: ``tool`` (str) and ``pattern`` (str or ``None`` for the
    whole tool). ``str(rule)`` gives it back."""

    tool: str
    pattern: str | None = None

    @classmethod
    def parse(cls, text) -> "Rule":
        """Read a rule (SPEC R19).

        Args:
            text: ``tool`` or ``tool(pattern)`` (str).

        Returns:
            Rule: the parsed rule.

        Raises:
            PolicyError: ``text`` is not a str of that shape, or the pattern is empty.
        """
        if not isinstance(text, str):
            raise PolicyError(f"a rule must be a string like 'run_command(git status)', "
                              f"got {type(text).__name__}")
        text = text.strip()
        quoted = _QUOTED_RULE.fullmatch(text) if text.startswith('"') else None
        if quoted is not None:
            tool = re.sub(r"\\(.)", r"\1", quoted.group(1), flags=re.DOTALL)
            if quoted.group(2) is not None and not quoted.group(2).strip():
                raise PolicyError(f"the rule {text!r} has an empty pattern; write "
                                  f"{quoted.group(0)[:quoted.end(1) + 1]!r} for every call "
                                  "of the tool")
            return cls(tool, quoted.group(2))
        match = _RULE.fullmatch(text)
        if match is None:
            raise PolicyError(f"cannot read the rule {text!r}: write tool_name or "
                              "tool_name(pattern), e.g. run_command(git status), or "
                              "server.tool(pattern) for an MCP tool (in double quotes "
                              "when its name holds a space or a parenthesis: "
                              "\"server.my tool\"(pattern))")
        if match.group(2) is not None and not match.group(2).strip():
            raise PolicyError(f"the rule {text!r} has an empty pattern; write "
                              f"{match.group(1)!r} for every call of the tool")
        return cls(match.group(1), match.group(2))

    def __str__(self) -> str:
        tool = self.tool
        if not _RULE.fullmatch(tool) or "(" in tool:  # a name only quotes can hold
            tool = '"' + tool.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return tool if self.pattern is None else f"{tool}({self.pattern})"


@dataclass
class ApprovalPolicy:
    """One layer of rules (SPEC R19): ``deny``, ``ask`` and ``allow`` are lists of rule
    strings. ``name`` says which layer it is in the audit trail (``run``, ``session``,
    ``project``, ``user`` …); ``source`` is the file it came from, if any.
    """

    deny: list = field(default_factory=list)
    ask: list = field(default_factory=list)
    allow: list = field(default_factory=list)
    name: str = "policy"
    source: str | None = None
    sandbox: dict = field(default_factory=dict)

    def __post_init__(self):
        _check_sandbox(self.sandbox, self._where())
        for effect in EFFECTS:
            rules = getattr(self, effect)
            if isinstance(rules, str) or not isinstance(rules, (list, tuple)):
                raise PolicyError(f"{self._where()}{effect!r} must be a list of rules, got "
                                  f"{type(rules).__name__}")
            for text in rules:
                try:
                    Rule.parse(text)
                except PolicyError as exc:
                    raise PolicyError(f"{self._where()}{effect}: {exc}") from None
            setattr(self, effect, list(rules))

    def _where(self) -> str:
        return f"{self.source}: " if self.source else ""

    def rules(self, effect: str) -> list[Rule]:
        """One of the three lists, parsed.

        Args:
            effect: ``"deny"``, ``"ask"`` or ``"allow"``.

        Returns:
            list[Rule]: in order.
        """
        return [Rule.parse(text) for text in getattr(self, effect)]

    def add(self, effect: str, rule: str) -> bool:
        """Append a rule to one list unless it is there.

        Args:
            effect: ``"deny"``, ``"ask"`` or ``"allow"``.
            rule: the rule text (str).

        Returns:
            bool: whether it was added.

        Raises:
            PolicyError: the rule cannot be read.
        """
        Rule.parse(rule)
        rules = getattr(self, effect)
        if rule in rules:
            return False
        rules.append(rule)
        return True

    def restricted(self, names) -> "ApprovalPolicy":
        """A copy holding only the rules about some tools.

        Args:
            names: an iterable of tool names (str), e.g. the tools of one run, after
                ``check`` against all of them.

        Returns:
            ApprovalPolicy: the copy, same ``name`` and ``source``.
        """
        keep = set(names)
        return ApprovalPolicy(*([t for t in getattr(self, effect) if Rule.parse(t).tool in keep]
                                for effect in EFFECTS), name=self.name, source=self.source,
                              sandbox=dict(self.sandbox))

    def check(self, tools, keep_other_servers: bool = False) -> None:
        """Refuse rules that can never match ``tools`` (``Tool`` objects or a mapping of
        name → ``Tool``): an unknown tool, an MCP tool named by its wire name, a
        pattern on a tool without a subject, a pattern that cannot be read, an allow
        pattern naming a chain.

        Args:
            tools: the tools the rules may name (rules name an MCP tool
                ``server.tool``, ``policy_name``).
            keep_other_servers: ``True``: a ``server.tool`` rule whose server gives
                none of ``tools`` is kept (it cannot apply here), not refused.

        Raises:
            PolicyError: naming the rule, its list and this layer's file.
        """
        index = _Index(tools.values() if isinstance(tools, Mapping) else tools)
        for effect in EFFECTS:
            for rule in self.rules(effect):
                try:
                    _check_rule(rule, effect, index, keep_other_servers)
                except PolicyError as exc:
                    raise PolicyError(f"{self._where()}{effect} rule {str(rule)!r}: {exc}") \
                        from None

    # -- JSON ----------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """``{"deny": [...], "ask": [...], "allow": [...]}``, and ``"sandbox"`` when it
        has settings: the file format."""
        data = {effect: list(getattr(self, effect)) for effect in EFFECTS}
        return {**data, "sandbox": dict(self.sandbox)} if self.sandbox else data

    @classmethod
    def from_dict(cls, data, name: str = "policy", source: str | None = None
                  ) -> "ApprovalPolicy":
        """The inverse of ``to_dict``.

        Args:
            data: the parsed JSON (dict with ``deny`` / ``ask`` / ``allow`` lists, and
                optionally ``sandbox``: ``{"auto_allow": bool, "network": bool}``,
                ``agentflow.builtin.sandbox``).
            name: the layer's name (str) in audit records.
            source: where it came from (str, a path), for error messages.

        Returns:
            ApprovalPolicy: the policy.

        Raises:
            PolicyError: anything but an object with those lists of rules (a misspelt
                key such as ``alow`` is an error, not a list silently ignored).
        """
        where = f"{source}: " if source else ""
        if not isinstance(data, dict):
            raise PolicyError(f"{where}a policy is a JSON object with deny, ask and allow "
                              f"lists, got {type(data).__name__}")
        unknown = sorted(set(data) - set(EFFECTS) - {"version", "sandbox"})
        if unknown:
            raise PolicyError(f"{where}unknown key(s) {', '.join(unknown)}; a policy has "
                              "only deny, ask, allow and sandbox")
        return cls(*(data.get(effect, []) for effect in EFFECTS), name=name, source=source,
                   sandbox=data.get("sandbox", {}))

    @classmethod
    def load(cls, path, name: str | None = None) -> "ApprovalPolicy":
        """Read a policy file (JSON, see ``to_dict``).

        Args:
            path: the file (str or path-like).
            name: the layer's name (str); default the path.

        Returns:
            ApprovalPolicy: the policy.

        Raises:
            OSError: the file cannot be read.
            PolicyError: it is not valid JSON or not a policy.
        """
        path = os.fspath(path)
        with open(path, "rb") as handle:
            return cls.loads(handle.read(), name or path, path)

    @classmethod
    def loads(cls, data: bytes, name: str, source: str | None = None) -> "ApprovalPolicy":
        """A policy from a file's bytes: what was judged is what applies (SPEC R26
        trusts a project file by the hash of these same bytes).

        Args:
            data: the file's contents (bytes, UTF-8 JSON).
            name: the layer's name (str).
            source: the file it came from (str), for messages.

        Returns:
            ApprovalPolicy: the policy.

        Raises:
            PolicyError: not valid UTF-8 JSON, or not a policy.
        """
        try:
            parsed = json.loads(data.decode("utf-8"))
        except ValueError as exc:
            raise PolicyError(f"{source or name} is not valid JSON: {exc}") from None
        return cls.from_dict(parsed, name, source)

    def save(self, path) -> bytes:
        """Write the policy as JSON, atomically (a temporary file in the same folder,
        fsync, rename, fsync of the folder), creating the folder.

        Args:
            path: the file (str or path-like).

        Returns:
            bytes: what was written (to trust exactly that, SPEC R26).

        Raises:
            OSError: the file could not be written (the old file is left as it was).
        """
        path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        text = json.dumps(self.to_dict(), ensure_ascii=False, indent=2) + "\n"
        write_atomically(path, text, prefix=".policy-")
        return text.encode("utf-8")


SANDBOX_SETTINGS = ("auto_allow", "network")  # a policy's sandbox switches (issue 27)
# a policy's sandbox lists (issue 37, SPEC R27): home folders shown, and environment
# variables let through or kept out (agentflow.builtin.sandbox, agentflow.builtin.environment)
SANDBOX_LISTS = ("home_read", "home_write", "env_include", "env_exclude")


def _check_sandbox(settings, where: str) -> None:
    """A policy's ``sandbox`` object: ``auto_allow`` (sandboxed commands run without
    asking) and ``network`` (sandboxed commands reach the network), both bool; and
    ``home_read``, ``home_write`` (folders of the home folder commands see), and
    ``env_include``, ``env_exclude`` (patterns of environment variable names), each a
    list of str."""
    if not isinstance(settings, dict):
        raise PolicyError(f"{where}'sandbox' must be an object such as "
                          f"{{\"auto_allow\": true}}, got {type(settings).__name__}")
    for key, value in settings.items():
        if key in SANDBOX_LISTS:
            if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
                raise PolicyError(f"{where}sandbox setting {key!r} must be a list of "
                                  f"non-empty strings, got {value!r}")
            continue
        if key not in SANDBOX_SETTINGS:
            raise PolicyError(f"{where}unknown sandbox setting {key!r}; the settings are "
                              f"{', '.join(SANDBOX_SETTINGS + SANDBOX_LISTS)}")
        if not isinstance(value, bool):
            raise PolicyError(f"{where}sandbox setting {key!r} must be true or false, got "
                              f"{value!r}")


def standard_layers(project_dir=".") -> list[ApprovalPolicy]:
    """The file layers of SPEC R19: the project file, then the user file.

    Args:
        project_dir: the project's folder (str or path-like); its
            ``.agentflow/policy.json`` is the project layer.

    Returns:
        list[ApprovalPolicy]: the project and user (``user_policy_path()``) layers, in
        that order, each when its file exists.

    Raises:
        PolicyError: a file that exists is not a valid policy.
    """
    layers = []
    for name, path in (("project", os.path.abspath(os.path.join(project_dir, PROJECT_FILE))),
                       ("user", user_policy_path())):
        if os.path.isfile(path):
            layers.append(ApprovalPolicy.load(path, name))
    return layers


# -- deciding ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """What the policy decided for one call.

    Attributes:
        effect: a ``Decision`` (given as one or as its value, ``"deny"`` …).
        rules: the deciding rule(s) as written (tuple of str): one for deny and ask;
            for an allowed command line, one per command.
        layers: the layer of each rule (tuple of str, same order).
    """

    effect: Decision
    rules: tuple
    layers: tuple

    def __post_init__(self):
        object.__setattr__(self, "effect", Decision(self.effect))

    @property
    def rule(self) -> str:
        """The deciding rule(s), joined with ``; ``."""
        return "; ".join(dict.fromkeys(self.rules))

    @property
    def layer(self) -> str:
        """The deciding layer(s), joined with ``; ``."""
        return "; ".join(dict.fromkeys(self.layers))


def decide(layers: Iterable[ApprovalPolicy], tool, arguments) -> tuple[Verdict | None, str]:
    """Decide one call by the rules of ``layers`` (in their order, SPEC R19).

    Args:
        layers: ``ApprovalPolicy`` objects, first layer first.
        tool: the ``Tool`` called.
        arguments: the parsed arguments (dict), or ``None`` when the model's text is
            not a JSON object (then only rules naming the whole tool can match).

    Returns:
        ``(verdict, note)``: ``verdict`` is ``None`` when no rule decides (the tool's
        own ``requires_approval`` does); ``note`` then says why no allow rule applied
        (or ``""``), for the audit trail and the prompt. A tool's
        ``allow_refusal(arguments)`` (``RunCommand``'s: a call leaving the sandbox) can
        keep every allow rule from a call; deny and ask rules still apply.
    """
    layers = list(layers)
    name = policy_name(tool)
    subject = _Subject(tool, arguments)
    for effect in ("deny", "ask"):
        for layer in layers:
            for rule in layer.rules(effect):
                if rule.tool == name and subject.hits(rule):
                    return Verdict(effect, (str(rule),), (layer.name,)), ""
        if effect == "deny" and subject.kind == "shell" and (
                subject.unreadable or subject.soft is not None):
            # a line not read fully that some reading lets meet a deny rule goes to a
            # person, and only to one; one that no reading lets meet it is not denied
            could = next(((r, l) for l in layers for r in l.rules("deny")
                          if r.tool == name and subject.could_hit(r)), None)
            if could:
                trouble = (f"the line could not be read fully: {subject.unreadable}"
                           if subject.unreadable else "a glob could expand into words "
                           "that meet it")
                return Verdict("ask", (f"{could[0]}; {trouble}; {PERSON_ONLY}",),
                               (could[1].name,)), ""
            if subject.unreadable:
                continue
        # never fail open: a line not read fully, or a subject no pattern can read (a
        # path given as a number, a list holding an object), meets the tool's first
        # rule (addendum)
        unclear = subject.unreadable or (subject.opaque if arguments is not None else None)
        first = unclear and next(((r, l) for l in layers for r in l.rules(effect)
                                  if r.tool == name), None)
        if first:
            why = (f"{first[0]}; the line could not be read fully: {unclear}"
                   if subject.unreadable else f"{first[0]}; it could not be read: {unclear}")
            return Verdict(effect, (why,), (first[1].name,)), ""
    refusal = getattr(tool, "allow_refusal", None)  # e.g. a call leaving the sandbox
    refused = refusal(arguments) if refusal is not None else None
    if refused:
        return None, f"no allow rule applies: {refused}"
    allows = [(rule, layer) for layer in layers for rule in layer.rules("allow")
              if rule.tool == name]
    if not allows:
        return None, ""
    if subject.unreadable:
        return None, f"no rule allows a line that could not be read fully ({subject.unreadable})"
    if subject.opaque or not subject.parts:  # only a rule naming the whole tool can
        whole = next(((r, l) for r, l in allows if r.pattern is None), None)
        if whole is not None:
            return Verdict("allow", (str(whole[0]),), (whole[1].name,)), ""
        return None, f"no pattern can allow {subject.opaque}" if subject.opaque else ""
    found = []
    for index, part in enumerate(subject.parts):
        match, refused = None, None
        for rule, layer in allows:
            if subject.covers(rule, part):
                refused = subject.refusal(rule, index)
                if refused is None:
                    match = (rule, layer)
                    break
        if match is None:
            what = f"`{part[0]}`" if len(subject.parts) > 1 else "this call"
            if refused:
                return None, f"{what} {refused}, which only an exact rule (no wildcard) allows"
            return None, f"no allow rule matches {what}"
        found.append(match)
    return Verdict("allow", tuple(str(r) for r, _ in found),
                   tuple(l.name for _, l in found)), ""


PERSON_ONLY = "only a person can let it run"


def needs_a_person(rule: str | None) -> bool:
    """Whether a call asks because its command line could meet a deny rule but was not
    read fully (SPEC R19 addendum): no allow rule, grant, ``auto_allow`` or blanket
    approval (``--approve-all``) lets it run; where nobody can be asked it is refused.

    Args:
        rule: the deciding rule of the call's verdict or pending record (str or
            ``None``).

    Returns:
        bool: whether only a person's answer may let it run.
    """
    return rule is not None and rule.endswith(PERSON_ONLY)


def exact_rules(tool, arguments) -> list[str]:
    """The allow rules that let exactly this call run from now on (a grant, SPEC R19).

    Args:
        tool: the ``Tool`` called.
        arguments: the call's parsed arguments (dict), or ``None``.

    Returns:
        list[str]: one rule per command of a command line, the tool's name
        (``policy_name``) for a tool without a subject; empty when no rule can (a line
        with a substitution, arguments without their subject, an MCP tool whose name a
        rule cannot spell, a call no allow rule may let run: ``allow_refusal``).
    """
    name = policy_name(tool)
    refusal = getattr(tool, "allow_refusal", None)
    if _RULE.fullmatch(name) is None or (refusal is not None and refusal(arguments)):
        return []
    if getattr(tool, "subject", None) is None:
        return [name]
    subject = _Subject(tool, arguments)
    if subject.opaque or not subject.parts:
        return []
    if tool.subject_kind == "path":
        inside = _root(tool).rstrip("/") + "/"
        return list(dict.fromkeys(
            f"{name}({escape(value[len(inside):] if value.startswith(inside) else value)})"
            for value, _ in subject.parts))
    return list(dict.fromkeys(f"{name}({escape(text)})" for text, _ in subject.parts))


# -- matching ------------------------------------------------------------------------------

class _Subject:
    """The subject of one call, read once: ``parts`` (list of ``(text, writes)``) must
    each be allowed; ``opaque`` says why none can be by a pattern."""

    def __init__(self, tool, arguments):
        self.kind = getattr(tool, "subject_kind", "text")
        self.root = _root(tool) if self.kind == "path" else ""
        self.lines: list[shell.CommandLine] = []
        self.commands: list[shell.Command] = []
        self.parts: list[tuple[str, bool]] = []
        self.opaque: str | None = None
        self.unreadable: str | None = None  # a command line not read fully (shell.py)
        self.soft: shell.CommandLine | None = None  # its soft reading (shell.py)
        self.tool = tool
        name = getattr(tool, "subject", None)
        value = arguments.get(name) if isinstance(arguments, dict) and name else None
        # A list of strings (an MCP tool's ``paths``) is judged as each of its values:
        # a deny or ask that hits one decides, an allow must cover all.
        values = [value] if isinstance(value, str) else value if (
            self.kind != "shell" and isinstance(value, list) and value
            and all(isinstance(v, str) for v in value)) else None
        if values is None:
            self.opaque = "a call without its subject" if name else None
            return
        if self.kind == "shell":
            line = shell.parse(value)
            # globs in a line read fully may expand into any words too (``nice r*``)
            self.soft = line.soft if line.unreadable else line if any(
                c.globs for c in line.every_command()) else None
            self.lines = list(line.every_line())
            self.commands = line.commands
            self.parts = [(c.text, c.writes) for c in line.commands]
            self.opaque = self.unreadable = line.unreadable
        elif self.kind == "path":
            try:
                self.parts = [(paths.resolve(v, self.root), False) for v in values]
            except (ValueError, OSError):
                self.opaque = "a path that cannot be resolved"
        else:
            self.parts = [(v, False) for v in values]

    def hits(self, rule: Rule) -> bool:
        """Whether a deny or ask ``rule`` matches anywhere in the call."""
        if rule.pattern is None:
            return True
        if self.kind != "shell":
            return any(pattern_glob(rule.pattern, self.kind, self.root).fullmatch(text)
                       for text, _ in self.parts)
        pattern = _shell_pattern(rule.pattern)
        for line in self.lines:
            commands = line.commands
            for start in range(len(commands) - len(pattern) + 1):
                if all(_command_hit(piece, commands[start + k], k)
                       for k, piece in enumerate(pattern)):
                    return True
        return False

    def could_hit(self, rule: Rule) -> bool:
        """Whether a deny ``rule`` could meet an unreadable command line in some reading:
        each expansion and glob may be any words, options included; a line whose
        trouble is anything else could meet every rule (SPEC R19 addendum)."""
        if rule.pattern is None or self.soft is None:
            return True
        return _could_meet(self.soft, _shell_pattern(rule.pattern))

    def covers(self, rule: Rule, part: tuple[str, bool]) -> bool:
        """Whether an allow ``rule`` allows ``part`` (one command or the value)."""
        if rule.pattern is None:
            return True
        text, writes = part
        if self.kind == "shell":
            pattern = _shell_pattern(rule.pattern)
            return len(pattern) == 1 and pattern[0].regex.fullmatch(text) is not None
        return pattern_glob(rule.pattern, self.kind, self.root).fullmatch(text) is not None

    def refusal(self, rule: Rule, index: int) -> str | None:
        """Why a wildcard ``rule`` that covers part ``index`` still does not allow it:
        a write, an entry of ``command_rules.TABLE``, a secret file (SPEC R19
        addendum); ``None`` for an exact rule, or nothing to refuse."""
        if self.kind == "text" or not _wildcard(rule, self.kind):
            return None
        secrets = getattr(self.tool, "secret_files", None)
        if self.kind == "path":
            kind = _secret(self.parts[index][0], self.root, secrets)
            return None if kind is None else f"is a secret file ({kind})"
        command = self.commands[index]
        if command.writes:
            return "writes to a file"
        entry = command_rules.used(command)
        if entry is not None:
            return f"uses {entry}"
        # the command runs in the tool's workspace, not in this process's folder
        for folder in _folders(self.commands[:index], _root(self.tool)):
            kind = _names_secret(command, folder, secrets)
            if kind is not None:
                return f"names a secret file ({kind})"
            kind = command_rules.walks_into_secret(
                command, folder, lambda path, root=folder: _secret(path, root, secrets))
            if kind is not None:
                return f"reads the folders it names, which hold a secret file ({kind})"
        after_cd = any(c.words[:1] in (["cd"], ["pushd"]) for c in self.commands[:index])
        # the rule spells the program when its first word holds no wildcard
        pieces = _shell_pattern(rule.pattern)[0].regex.pieces if rule.pattern else ["", ""]
        named = " " in pieces[0] or len(pieces) == 1
        why = allowlist.unknown(command, _root(self.tool),
                                bool(getattr(self.tool, "sandboxed", False)), after_cd,
                                named)
        return None if why is None else f"is not known to be harmless ({why})"


def _wildcard(rule: Rule, kind: str) -> bool:
    """A bare tool name, or a pattern with a wildcard (SPEC R19 addendum)."""
    if rule.pattern is None:
        return True
    if kind == "shell":
        return any(piece.wild for piece in _shell_pattern(rule.pattern))
    return "*" in protect(rule.pattern)


def _secret(resolved: str, root: str, secret_files) -> str | None:
    return Workspace(root, SECRET_FILES if secret_files is None else secret_files
                     ).secret(resolved)


def _folders(before: list, root: str) -> list[str]:
    """The folders a command's relative paths may start from: the workspace, and each
    folder a ``cd`` or ``pushd`` earlier in the line went to (``cd ~/.aws && cat
    credentials`` reads a secret)."""
    folders = [root]
    for command in before:
        if command.words and command.words[0] in ("cd", "pushd"):
            target = next((w for w in command.words[1:] if not w.startswith("-")), "~")
            try:
                folders.append(paths.resolve(target, folders[-1]))
            except (ValueError, OSError):
                pass
    return list(dict.fromkeys(folders))


def _names_secret(command: shell.Command, root: str, secret_files) -> str | None:
    """The kind of the first secret file a command's words may name: each word, its
    value after ``=`` or ``@``, a redirection's target, a glob's current matches."""
    import glob
    candidates = []
    for index, word in enumerate(command.assignments + command.words):
        candidates += _named_in(word)
        if index - len(command.assignments) in command.globs:
            candidates += glob.glob(word, root_dir=root)
    candidates += [target for _, _, target in command.redirects]
    for candidate in dict.fromkeys(c for c in candidates if c):
        try:
            resolved = paths.resolve(candidate, root)
        except (ValueError, OSError):
            continue
        for path in (resolved, resolved.rstrip("/") + "/x"):  # x: a folder of secrets
            kind = _secret(path, root, secret_files)
            if kind is not None:
                return kind
    return None


def _named_in(word: str) -> list[str]:
    """The paths a word may name: itself, an option's attached value (``-T.env``), what
    follows each ``=``, ``:``, ``@``, ``<`` or ``,`` (``--data=@.env``, ``-F a=<.env``,
    ``HEAD:.env``, ``file:///…``), each also percent-decoded (``file:///%2eenv``)."""
    from urllib.parse import unquote
    found = [word, word[2:] if word[:1] == "-" and word[1:2] != "-" else ""]
    found += [word[i + 1:] for i, c in enumerate(word) if c in "=:@<,"]
    found += [unquote(w) for w in found if "%" in w]
    return found


def _root(tool) -> str:
    return os.path.realpath(getattr(tool, "workspace", None) or os.getcwd())


@dataclass(frozen=True)
class _Piece:
    """One command of a shell pattern: its regex, whether it has a wildcard, and the
    operator before it (normalised: ``|&`` is ``|``, a newline is ``;``)."""

    regex: Glob
    wild: bool
    op: str | None


def _command_hit(piece: _Piece, command: shell.Command, position: int) -> bool:
    if position and _OP_KIND.get(command.op_before, command.op_before) != piece.op:
        return False
    return any(piece.regex.fullmatch(text) for text in [command.text, *command.tails])


def _could_meet(line: shell.CommandLine, pattern: tuple) -> bool:
    commands = line.commands
    for start in range(len(commands) - len(pattern) + 1):
        if all(_command_could_hit(piece, commands[start + k], k)
               for k, piece in enumerate(pattern)):
            return True
    for nested in line.nested:
        if nested.unreadable and (nested.soft is None or _could_meet(nested.soft, pattern)):
            return True
        if not nested.unreadable and _could_meet(nested, pattern):
            return True
    return False


def _command_could_hit(piece: _Piece, command: shell.Command, position: int) -> bool:
    """A command of a soft reading (its ``globs``: words that may be any words) against
    one command of a pattern: from its program on, and from every word on unless the
    program runs nothing its words name (``ls *.py`` is no ``rm``)."""
    if position and _OP_KIND.get(command.op_before, command.op_before) != piece.op:
        return False
    words, assigned = command.words, len(command.assignments)
    wild = {assigned + i for i in command.globs}
    everything = command.assignments + words
    if not words:
        return bool(wild) or piece.regex.fullmatch(command.text) is not None
    program = words[0].rsplit("/", 1)[-1]
    starts = range(assigned + 1) if program in command_rules.RUNS_NOTHING and (
        assigned not in wild) else range(len(everything))
    tokens = [_word_tokens(word, index in wild) for index, word in enumerate(everything)]
    for start in starts:
        rest = [t for later in tokens[start + 1:] for t in [("lit", " "), *later]]
        names = [tokens[start]]
        if start not in wild and "/" in everything[start]:
            names.append([("lit", shell.quote(everything[start].rsplit("/", 1)[-1]))])
        if any(piece.regex.meets(name + rest) for name in names):
            return True
    return False


def _word_tokens(word: str, wild: bool) -> list:
    """A word as ``Glob`` tokens: itself, or, for a word that expands, its literal
    start and then anything (``src/*.py`` can only expand to words starting
    ``src/``; ``*.py`` and ``$X`` to any words, options included)."""
    if not wild:
        return [("lit", shell.quote(word))]
    start = re.match(r"[^*?\[\x03]*", word).group()
    return ([("lit", start)] if start and shell.quote(start) == start else []) + [
        ("star", "any")]


@functools.lru_cache(maxsize=1024)
def _shell_pattern(pattern: str) -> tuple[_Piece, ...]:
    """A shell pattern, cut into commands and canonicalised like a command line, so
    that quoting and spacing do not matter on either side."""
    pieces = []
    for index, command in enumerate(shell.parse(protect(pattern), pattern=True).commands):
        body, prefix = split_prefix(command.text.replace(BACKSLASH, "\\"))
        regex = Glob(glob_tokens(body, "any"), " " if prefix else "")
        op = _OP_KIND.get(command.op_before, command.op_before) if index else None
        pieces.append(_Piece(regex, prefix or "*" in body, op))
    return tuple(pieces)


class _Index:
    """The tools a policy is checked against, by the names rules use, by wire name,
    and the MCP servers they come from."""

    def __init__(self, tools):
        tools = list(tools)
        self.by_name = {policy_name(t): t for t in tools}
        self.by_wire = {t.name: t for t in tools if policy_name(t) != t.name}
        self.servers = sorted({n.partition(".")[0] for n in self.by_name if "." in n})


def _check_rule(rule: Rule, effect: str, index: _Index, keep_other_servers: bool) -> None:
    tool = index.by_name.get(rule.tool)
    server = rule.tool.partition(".")[0] if "." in rule.tool else None
    if tool is None:
        if server is not None and server not in index.servers and keep_other_servers:
            return
        wired = index.by_wire.get(rule.tool)
        if wired is not None:
            right = policy_name(wired)
            raise PolicyError(
                f"{rule.tool!r} is the name the model sees for the MCP tool {right}; rules "
                f"name MCP tools server.tool: write {right}"
                + (f"({rule.pattern})" if rule.pattern is not None else ""))
        if server is not None and server not in index.servers:
            raise PolicyError(f"there is no MCP server {server!r} among the tools (MCP "
                              f"servers: {', '.join(index.servers) or 'none'}), so it can "
                              "never match")
        known = ", ".join(sorted(index.by_name)) or "none"
        hint = ""
        if "__" in rule.tool and server is None:
            hint = (f"; an MCP tool is named server.tool in rules "
                    f"({rule.tool.replace('__', '.', 1)})")
        raise PolicyError(f"there is no tool {rule.tool!r} (tools: {known}), so it can "
                          f"never match{hint}")
    if rule.pattern is None:
        return
    subject = getattr(tool, "subject", None)
    if subject is None:
        how = (f"MCPServer(..., subjects={{{tool.mcp_name!r}: ARGUMENT}})"
               if getattr(tool, "mcp_name", None) else "@tool(subject=...)")
        raise PolicyError(f"{rule.tool} declares no subject argument for a pattern to "
                          f"match, so it can never match; write {rule.tool!r} for every "
                          f"call, or declare one: {how}")
    kind = getattr(tool, "subject_kind", "text")
    if kind != "shell":
        return
    line = shell.parse(protect(rule.pattern), pattern=True)
    if line.stopped:
        raise PolicyError(f"the pattern has {line.unreadable}, so it can never match")
    if effect == "allow" and len(line.commands) > 1:
        raise PolicyError(
            "an allow pattern matches one command, and a line is allowed when each of its "
            "commands is; write one rule per command: "
            + ", ".join(f"{rule.tool}({c.text.replace(BACKSLASH, chr(92))})"
                        for c in line.commands))
    if effect == "allow" and line.unreadable:
        raise PolicyError(f"the pattern holds {line.unreadable}, and a line holding it is "
                          "never allowed by a pattern (nor by any rule)")
    if not line.commands:
        raise PolicyError("the pattern holds no command, so it can never match")
