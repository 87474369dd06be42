"""The approval inbox's HTML (``agentflow inbox``, SPEC R25): every text that came from a
model, a tool, an MCP server or a session is made visible (control characters, escape
sequences, bidirectional overrides and invisible separators shown as ``\\x1b``,
``\\u202e``) and then HTML-escaped, here and nowhere else; the page's script only
swaps in fragments this module wrote. A call whose text needed escaping says so.

A call's forms name it by ``ref``, its ids in ASCII (JSON escapes in base64), never by
the ids as shown, so a call whose id holds an invisible character can be answered.
What runs is what is shown: an edit approved shows the edited call (SPEC R20, R25);
risky parts are marked (``inbox_risk``), diffs coloured, a command shown once.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import html
import json
import re
import unicodedata

from ..display import safe_text  # SPEC R25, shared with the terminal
from ..stores import PendingEntry
from ..stores.answers import who
from .inbox_risk import risk_spans, risks

_JSON_UNSAFE = re.compile(r"[^\x20-\x7e\n]")
PAGE_SIZE = 50


class Shown:
    """Escapes untrusted text for the page and remembers whether any needed it."""

    def __init__(self):
        self.escaped = False

    def __call__(self, text, multiline: bool = False) -> str:
        """Untrusted text as HTML: made visible (R25), then HTML-escaped.

        Args:
            text: the text (anything else is shown as ``str(text)``).
            multiline: keep newlines and tabs (a ``<pre>`` block).

        Returns:
            str: HTML-safe text.
        """
        text = "" if text is None else str(text)
        visible = safe_text(text, multiline)
        self.escaped = self.escaped or visible != text
        return html.escape(visible, quote=True)


def visible_json(value) -> str:
    """``value`` as indented JSON that shows every unsafe character as a JSON escape
    (``\\u001b``, ``\\u202e``): still valid JSON for the same value, so an edit of it
    round-trips exactly (SPEC R20, R25).

    Args:
        value: a JSON value.

    Returns:
        str: the JSON text (not yet HTML-escaped).
    """
    text = json.dumps(value, indent=2, ensure_ascii=False)

    def escape(match: re.Match) -> str:
        char = match.group()
        if unicodedata.category(char) not in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            return char
        encoded = char.encode("utf-16-be", "surrogatepass")
        return "".join(f"\\u{int.from_bytes(encoded[i:i + 2], 'big'):04x}"
                       for i in range(0, len(encoded), 2))
    return _JSON_UNSAFE.sub(escape, text)


def entry_key(entry: PendingEntry) -> str:
    """A short, page-safe id of a waiting call (hex), stable across refreshes.

    Args:
        entry: the ``PendingEntry``.

    Returns:
        str: 16 hex digits.
    """
    return hashlib.sha256(f"{entry.session_id}\0{entry.call_id}\0{entry.digest}".encode(
        "utf-8", "surrogatepass")).hexdigest()[:16]


def age_text(seconds: float) -> str:
    """An age for people: ``42s``, ``3m``, ``5h``, ``2d``.

    Args:
        seconds: the age (float).

    Returns:
        str: the rounded age with its unit.
    """
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{max(0.0, seconds):.0f}s"


def ref(entry: PendingEntry) -> str:
    """The call an answer form names: its session and call ids as ASCII JSON in URL-safe
    base64, so every id (one holding ``\\u202e`` or a lone surrogate) goes through a
    form unchanged.

    Args:
        entry: the ``PendingEntry``.

    Returns:
        str: the ref.
    """
    data = json.dumps([entry.session_id, entry.call_id], ensure_ascii=True).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unref(text: str) -> tuple[str, str] | None:
    """The ids a ``ref`` names.

    Args:
        text: the ref (str) a form sent.

    Returns:
        tuple | None: ``(session_id, call_id)``, or ``None`` when it does not parse.
    """
    try:
        session_id, call_id = json.loads(base64.urlsafe_b64decode(
            text.encode("ascii") + b"=" * (-len(text) % 4)))
    except (ValueError, TypeError, binascii.Error, UnicodeEncodeError):
        return None
    if not (isinstance(session_id, str) and isinstance(call_id, str)):
        return None
    return session_id, call_id


@dataclasses.dataclass
class Filters:
    """What the page's address asks to see (``/?tool=&session=&q=&group=session``):
    triage of many waiting calls."""

    tool: str = ""
    session: str = ""
    q: str = ""
    group: bool = False

    @classmethod
    def of(cls, query: dict) -> "Filters":
        """The filters of the page's address.

        Args:
            query: the parsed query string (``parse_qs``'s dict of lists of str);
                each value is cut to 200 characters.

        Returns:
            Filters: the filters.
        """
        def first(name):
            return (query.get(name) or [""])[0].strip()[:200]
        return cls(first("tool"), first("session"), first("q"), first("group") == "session")

    @property
    def active(self) -> bool:
        """Whether they choose anything (else the store's own paging serves)."""
        return bool(self.tool or self.session or self.q or self.group)

    def apply(self, entries: list) -> list:
        """The entries kept: the tool named exactly, a session id holding the text,
        a search (case-insensitive) in ids, tool, preview and arguments; grouped by
        session (the oldest session first), each oldest first.

        Args:
            entries: every waiting ``PendingEntry``, oldest first.

        Returns:
            list[PendingEntry]: those kept, in the page's order.
        """
        q = self.q.lower()
        kept = [e for e in entries if (not self.tool or e.tool == self.tool)
                and (not self.session or self.session.lower() in e.session_id.lower())
                and (not q or q in _haystack(e))]
        if self.group:
            first = {}
            for e in kept:
                first.setdefault(e.session_id, len(first))
            kept.sort(key=lambda e: first[e.session_id])  # stable: oldest first within
        return kept

    def query(self, after: str | None = None) -> str:
        """The page's address for these filters.

        Args:
            after: a cursor (str) to start after, or ``None``.

        Returns:
            str: the query string, with its ``?`` (empty when there is nothing).
        """
        from urllib.parse import urlencode
        pairs = [(k, v) for k, v in (("tool", self.tool), ("session", self.session),
                                     ("q", self.q)) if v]
        if self.group:
            pairs.append(("group", "session"))
        if after:
            pairs.append(("after", after))
        return "?" + urlencode(pairs) if pairs else ""


def _haystack(entry: PendingEntry) -> str:
    return " ".join(str(part) for part in (
        entry.session_id, entry.call_id, entry.tool, entry.preview or "",
        json.dumps(entry.arguments, ensure_ascii=False))).lower()


def why_text(entry: PendingEntry) -> str:
    """Why a call asks, in words that name the real reason: the policy rule and its
    layer, the tool's own check, or, for a tool that asks for every call, that no
    rule allowed this one (SPEC R18, R19).

    Args:
        entry: the ``PendingEntry``.

    Returns:
        str: the reason (untrusted text: escape it).
    """
    why = entry.why or ""
    if why.startswith(f"{entry.tool} always asks"):
        why = (f"no policy rule allows this call, and {entry.tool} asks for every call "
               "no rule allows" + why[len(f"{entry.tool} always asks"):])
    if entry.rule and entry.rule not in why:
        why += f" (rule {entry.rule}" + (f", {entry.layer})" if entry.layer else ")")
    return why


def render_preview(text: str, e: Shown, classes: str = "preview") -> str:
    """A preview as a ``<pre>``: a unified diff with its added, removed and hunk lines
    coloured; anything else with its risky parts marked (``inbox_risk``).

    Args:
        text: the preview (str, untrusted).
        e: the call's ``Shown`` (it notes what needed escaping).
        classes: the ``<pre>``'s classes.

    Returns:
        str: HTML.
    """
    visible = safe_text(text, True)
    e.escaped = e.escaped or visible != text
    if visible.startswith("--- ") or visible.startswith("@@"):
        lines = []
        for line in visible.split("\n"):
            kind = ("hunk" if line.startswith("@@") else "file" if line[:4] in ("--- ", "+++ ")
                    else "add" if line.startswith("+") else "del" if line.startswith("-")
                    else "same")
            lines.append(f'<span class="{kind}">{html.escape(line, quote=True)}</span>')
        return f'<pre class="{classes} diff">' + "\n".join(lines) + "</pre>"
    out, at = [], 0
    for start, end, kind in risk_spans(visible):
        out.append(html.escape(visible[at:start], quote=True))
        out.append(f'<mark class="risk" title="{html.escape(kind, quote=True)}">'
                   f"{html.escape(visible[start:end], quote=True)}</mark>")
        at = end
    out.append(html.escape(visible[at:], quote=True))
    return f'<pre class="{classes}">' + "".join(out) + "</pre>"


def _risk_list(entry: PendingEntry, arguments, e: Shown) -> str:
    text = safe_text(entry.preview or "", True) or (
        safe_text(str(arguments.get(entry.subject, "")), True)
        if arguments is not None and entry.subject else "")
    found = risks(text, arguments)
    if not found:
        return ""
    items = []
    for kind, part in found:
        part = part if len(part) <= 160 else part[:159] + "…"
        items.append(f"<li><b>{html.escape(kind)}</b>: <code>{e(part)}</code></li>")
    return '<ul class="risks" aria-label="look twice">' + "".join(items) + "</ul>"


def _what_runs(entry: PendingEntry, arguments: dict, e: Shown) -> str:
    """The call as the approved edit makes it run (SPEC R20, R25)."""
    subject = entry.subject
    shown = ""
    if subject and subject in arguments:
        value = arguments[subject]
        line = f"$ {value}" if (entry.preview or "").startswith("$ ") else f"{subject}: {value}"
        shown = render_preview(str(line), e, "preview edited")
    return (f'<div class="runs">{shown}<details class="arguments" open><summary>the edited '
            f'arguments (what runs)</summary><pre>{e(visible_json(arguments), True)}'
            "</pre></details></div>")


def render_entry(entry: PendingEntry) -> str:
    """One waiting call as an ``<article>``: risk marks, tool, subject, why, arguments,
    age, session, and the answer forms (or who answered it, and what runs).

    Args:
        entry: the ``PendingEntry`` (``SessionStore.pending``).

    Returns:
        str: HTML.
    """
    e = Shown()
    if entry.error:  # a session the store cannot read (SPEC R22 addendum)
        return (f'<article class="call broken" id="call-{entry_key(entry)}" '
                f'data-key="{entry_key(entry)}" data-state="broken"><header>session '
                f'<code>{e(entry.session_id)}</code></header><p class="refused">the store '
                f'cannot read this session: {e(entry.error)}</p></article>')
    if getattr(entry, "needs_run", None):  # cut short; a worker continues it (issue 38)
        return (f'<article class="call stopped" id="call-{entry_key(entry)}" '
                f'data-key="{entry_key(entry)}" data-state="needs-run"><header>session '
                f'<code>{e(entry.session_id)}</code></header><p>{e(entry.needs_run)}; a '
                'worker continues it</p></article>')
    arguments = entry.arguments if isinstance(entry.arguments, dict) else None
    answer = entry.answer
    answered = answer is not None and answer.refused is None
    edited = answer.arguments if answered and answer.approved else None
    pick = "" if answered else (
        f'<label class="pick"><input type="checkbox" class="pick" data-ref="{ref(entry)}" '
        f'data-digest="{e(entry.digest)}" data-request="{e(entry.request_id or "")}" '
        'aria-label="select for reject selected"></label>')
    parts = [f'<header>{pick}<span class="tool">{e(entry.tool)}</span>'
             f'<span class="age" data-issued="{entry.issued_at:.3f}">'
             f'{age_text(entry.age)} ago</span>'
             f'<span class="where">session <code>{e(entry.session_id)}</code> · call '
             f'<code>{e(entry.call_id)}</code></span></header>']
    if edited is None:
        parts.append(_risk_list(entry, arguments, e))
    subject = []
    if entry.mcp_tool:
        subject.append(f'<p class="mcp">MCP tool <code>{e(entry.mcp_tool)}</code></p>')
    command_like = (entry.preview or "").startswith("$ ")  # a command's preview is its line
    if entry.subject and arguments is not None and entry.subject in arguments and \
            not command_like:
        subject.append(f'<p class="subject-arg">{e(entry.subject)}: <code>'
                       f'{e(arguments[entry.subject], multiline=True)}</code></p>')
    if entry.preview:
        subject.append(render_preview(entry.preview, e))
    shown = visible_json(entry.arguments) if arguments is not None else None
    # the command is on the preview's first line: its arguments stay folded (shown once)
    folded = command_like and arguments is not None and set(arguments) <= {
        entry.subject, "sandbox"}
    subject.append(f'<details class="arguments"{"" if folded else " open"}><summary>'
                   + ("the arguments the model sent" if edited is not None else "arguments")
                   + "</summary><pre>" + (e(shown, multiline=True) if shown is not None
                                          else "(the model's arguments are not a JSON "
                                               "object)") + "</pre></details>")
    if edited is not None:
        parts.append(f'<p class="answered">approved (edited) by {e(who(answer))}; waiting '
                     "for a worker to resume the session. What runs is the edit:</p>")
        parts.append(_what_runs(entry, edited, e))
        parts.append('<details class="asked"><summary>what the model asked for (replaced '
                     f'by the edit)</summary><div class="subject">{"".join(subject)}</div>'
                     "</details>")
    else:
        parts.append(f'<div class="subject">{"".join(subject)}</div>')
        if entry.why:
            parts.append(f'<p class="why">why it asks: {e(why_text(entry))}</p>')
    if entry.description or entry.parameters:
        parts.append('<details class="tool-doc"><summary>the tool</summary><pre>'
                     + e(entry.description or "", multiline=True) + "</pre><pre>"
                     + e(visible_json(entry.parameters), multiline=True)
                     + "</pre></details>")
    if answered and edited is None:
        parts.append(f'<p class="answered">answered by {e(who(answer))}; waiting for a '
                     "worker to resume the session</p>")
    elif not answered:
        if answer is not None:
            parts.append(f'<p class="refused">a worker could not use the answer '
                         f'({e(who(answer))}): {e(answer.refused)}. Answer again.</p>')
        parts.append(_forms(entry, shown, e))
    if e.escaped:
        parts.insert(1, '<p class="escaped">⚠ text of this call holds control or '
                        'invisible characters; they are shown as escapes such as '
                        '<code>\\x1b</code> or <code>\\u202e</code></p>')
    state = "answered" if answered else "waiting"
    return (f'<article class="call {state}" id="call-{entry_key(entry)}" '
            f'data-key="{entry_key(entry)}" data-state="{state}">'
            + "".join(parts) + '<p class="result" role="status"></p></article>')


def _forms(entry: PendingEntry, shown: str | None, e: Shown) -> str:
    """One form per answer: Enter in the reason submits the reject form (its only
    button); the approve form has no field, so no key but a press of its button
    approves."""
    hidden = "".join(f'<input type="hidden" name="{n}" value="{e(v)}">' for n, v in (
        ("ref", ref(entry)), ("digest", entry.digest), ("request_id", entry.request_id or "")))
    form = f'<form class="answer" method="post" action="/answer">{hidden}'
    rules = "\n".join(entry.exact_rules or [])
    edit = ""
    if shown is not None and entry.parameters is not None:
        edit = (f'<details class="edit"><summary>Edit</summary>{form}'
                f'<textarea name="arguments" rows="6" spellcheck="false" aria-label="the '
                f'arguments to run with">{e(shown, True)}</textarea><button name="action" '
                'value="edit">Approve edited</button></form></details>')
    return ('<div class="answers">'
            f'{form}<button name="action" value="approve" class="approve">Approve</button>'
            f'</form>{form}<input name="reason" maxlength="2000" enterkeyhint="send" '
            'placeholder="reason the model will see" aria-label="reason the model will see">'
            '<button name="action" value="reject" class="reject">Reject</button></form>'
            f"{edit}"
            f'<details class="always"><summary>Always allow</summary>{form}'
            '<label>rules (one a line) added to this session\'s grants:'
            f'<textarea name="rules" rows="2" maxlength="4000" spellcheck="false">{e(rules, True)}</textarea>'
            '</label><label>for <select name="ttl"><option value="">the whole session'
            '</option><option value="3600">1 hour</option><option value="86400">1 day'
            '</option></select></label>'
            '<button name="action" value="always">Approve and always allow</button>'
            "</form></details></div>")


def render_entries(entries: list, after: str | None, total: int, next_cursor: str | None,
                   filters: Filters | None = None, tools=(), approver: str = "",
                   store_name: str = "", version: int = 0) -> str:
    """The list of calls (a page of it) and the pager, as ``/entries`` sends it to the
    page's script for its ``<main>``.

    Args:
        entries: the page's ``PendingEntry`` list.
        after: the cursor this page starts after (str), or ``None`` for the first.
        total: how many calls wait in all, or pass the filters (int).
        next_cursor: the cursor of the next page (str), or ``None`` on the last.
        filters: the page's ``Filters`` (grouping by session draws a heading for each).
        tools: the tool names waiting (for the filter's suggestions).
        approver: whose page token asked (str), shown as "answering as".
        store_name: the store as shown (str, without any password).
        version: the inbox's change counter (int) the list is of.

    Returns:
        str: HTML.
    """
    filters = filters or Filters()
    e = Shown()
    if not entries:
        body = ('<p class="empty">No call waiting matches the filter.</p>' if filters.active
                else '<p class="empty">Nothing waits for approval.</p>')
    else:
        parts, group = [], None
        for entry in entries:
            if filters.group and entry.session_id != group:
                group = entry.session_id
                count = sum(1 for x in entries if x.session_id == group)
                parts.append(f'<h2 class="group">session <code>{e(group)}</code> · {count} '
                             "on this page</h2>")
            parts.append(render_entry(entry))
        body = "".join(parts)
    pager = [f'<span class="count">{total} waiting{" (filtered)" if filters.active else ""}'
             "</span>"]
    if after:
        pager.append(f'<a href="/{html.escape(filters.query(), quote=True)}">first page</a>')
    if next_cursor:
        pager.append(f'<a href="/{html.escape(filters.query(next_cursor), quote=True)}">'
                     "next page</a>")
    options = "".join(f'<option value="{e(tool)}"></option>' for tool in tools)
    return (f'<div id="context" hidden data-approver="{e(approver)}" '
            f'data-store="{e(store_name)}" data-version="{version}"></div>'
            f'<datalist id="tools">{options}</datalist>'
            f'<div id="calls" data-after="{html.escape(after or "", quote=True)}">{body}'
            f'</div><nav class="pager">{" · ".join(pager)}</nav>')


def render_shell() -> str:
    """The page itself, the same for everyone and holding no data: its script gets the
    list with the page token (``inbox_access``). No inline script or style (the CSP
    allows only ``/inbox.js`` and ``/inbox.css``).

    Returns:
        str: the HTML document.
    """
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<title>agentflow inbox</title>"
            '<link rel="stylesheet" href="/inbox.css"><script src="/inbox.js" defer>'
            '</script></head><body><header class="top"><h1>Approval inbox</h1>'
            '<span class="store" id="store"></span><span class="me">answering as '
            '<b id="approver">…</b></span><span id="live" class="live">connecting…</span>'
            '</header><p id="ended" class="ended" role="alert" hidden></p>'
            '<form id="filter" class="filter" method="get" action="/">'
            '<label>tool <input name="tool" list="tools" autocomplete="off"></label>'
            '<label>session <input name="session" autocomplete="off"></label>'
            '<label>search <input name="q" type="search" enterkeyhint="search"></label>'
            '<label class="check"><input type="checkbox" name="group" value="session">'
            " group by session</label><button>Filter</button><a href=\"/\">show all</a>"
            '</form><form id="bulk" class="bulk"><input name="reason" maxlength="2000" '
            'placeholder="reason for every selected call" aria-label="reason for every '
            'selected call"><button name="action" value="reject" class="reject">Reject '
            'selected (<span id="picked">0</span>)</button></form>'
            '<main id="list"><p class="empty">loading…</p></main>'
            '<div class="dock"><p id="said" class="said" role="status" hidden></p>'
            '<p id="notice" class="notice" role="status" hidden></p></div>'
            "<footer>Oldest first. Approving is one call at a time.</footer></body></html>")
