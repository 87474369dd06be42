"""The approval inbox's HTML (``agentflow inbox``, SPEC R25): every text that came from a
model, a tool, an MCP server or a session is made visible (control characters, escape
sequences, bidirectional overrides and invisible separators shown as ``\\x1b``,
``\\u202e``) and then HTML-escaped, here and nowhere else; the page's script only
swaps in fragments this module wrote. A call whose text needed escaping says so.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import time
import unicodedata

from ..display import safe_text  # SPEC R25, shared with the terminal
from ..stores import PendingEntry
from ..stores.answers import who

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


def render_entry(entry: PendingEntry, csrf: str) -> str:
    """One waiting call as an ``<article>``: tool, subject, why, arguments, age,
    session, and the answer form (or who answered it).

    Args:
        entry: the ``PendingEntry`` (``SessionStore.pending``).
        csrf: the server's CSRF token (str), put in the form.

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
    parts = [f'<header><span class="tool">{e(entry.tool)}</span>'
             f'<span class="age" data-issued="{entry.issued_at:.3f}">'
             f'{age_text(entry.age)} ago</span>'
             f'<span class="where">session <code>{e(entry.session_id)}</code> · call '
             f'<code>{e(entry.call_id)}</code></span></header>']
    subject = []
    if entry.mcp_tool:
        subject.append(f'<p class="mcp">MCP tool <code>{e(entry.mcp_tool)}</code></p>')
    if entry.subject and arguments is not None and entry.subject in arguments and not (
            entry.preview or "").startswith("$ "):  # a command's preview is its line
        subject.append(f'<p class="subject-arg">{e(entry.subject)}: <code>'
                       f'{e(arguments[entry.subject], multiline=True)}</code></p>')
    if entry.preview:
        subject.append(f'<pre class="preview">{e(entry.preview, multiline=True)}</pre>')
    parts.append(f'<div class="subject">{"".join(subject)}</div>')
    if entry.why:
        parts.append(f'<p class="why">why it asks: {e(entry.why)}</p>')
    shown = visible_json(entry.arguments) if arguments is not None else None
    parts.append('<details class="arguments" open><summary>arguments</summary><pre>'
                 + (e(shown, multiline=True) if shown is not None
                    else "(the model's arguments are not a JSON object)") + "</pre></details>")
    if entry.description or entry.parameters:
        parts.append('<details class="tool-doc"><summary>the tool</summary><pre>'
                     + e(entry.description or "", multiline=True) + "</pre><pre>"
                     + e(visible_json(entry.parameters), multiline=True)
                     + "</pre></details>")
    answer = entry.answer
    if answer is not None and answer.refused is None:
        parts.append(f'<p class="answered">answered by {e(who(answer))}; waiting for a '
                     "worker to resume the session</p>")
    else:
        if answer is not None:
            parts.append(f'<p class="refused">a worker could not use the answer '
                         f'({e(who(answer))}): {e(answer.refused)}. Answer again.</p>')
        parts.append(_form(entry, csrf, shown, e))
    if e.escaped:
        parts.insert(1, '<p class="escaped">⚠ text of this call holds control or '
                        'invisible characters; they are shown as escapes such as '
                        '<code>\\x1b</code> or <code>\\u202e</code></p>')
    state = "answered" if answer is not None and answer.refused is None else "waiting"
    return (f'<article class="call {state}" id="call-{entry_key(entry)}" '
            f'data-key="{entry_key(entry)}" data-state="{state}">'
            + "".join(parts) + '<p class="result" role="status"></p></article>')


def _form(entry: PendingEntry, csrf: str, shown: str | None, e: Shown) -> str:
    hidden = {"csrf": csrf, "session": entry.session_id, "call_id": entry.call_id,
              "digest": entry.digest, "request_id": entry.request_id or ""}
    fields = "".join(f'<input type="hidden" name="{n}" value="{e(v)}">'
                     for n, v in hidden.items())
    rules = "\n".join(entry.exact_rules or [])
    edit = ""
    if shown is not None and entry.parameters is not None:
        edit = ('<details class="edit"><summary>Edit</summary>'
                f'<textarea name="arguments" rows="6" spellcheck="false">{e(shown, True)}'
                '</textarea><button name="action" value="edit">Approve edited</button>'
                "</details>")
    return (f'<form class="answer" method="post" action="/answer">{fields}'
            '<button name="action" value="approve" class="approve">Approve</button>'
            '<span class="reject"><input name="reason" maxlength="2000" '
            'placeholder="reason the model will see">'
            '<button name="action" value="reject">Reject</button></span>'
            f"{edit}"
            '<details class="always"><summary>Always allow</summary>'
            '<label>rules (one a line) added to this session\'s grants:'
            f'<textarea name="rules" rows="2" spellcheck="false">{e(rules, True)}</textarea>'
            '</label><label>for <select name="ttl"><option value="">the whole session'
            '</option><option value="3600">1 hour</option><option value="86400">1 day'
            '</option></select></label>'
            '<button name="action" value="always">Approve and always allow</button>'
            "</details></form>")


def render_entries(entries: list, csrf: str, after: str | None, total: int,
                   next_cursor: str | None) -> str:
    """The list of calls (a page of it) and the pager, as the page's ``<main>``
    holds it and as ``/entries`` sends it for a live update.

    Args:
        entries: the page's ``PendingEntry`` list.
        csrf: the server's CSRF token (str).
        after: the cursor this page starts after (str), or ``None`` for the first.
        total: how many calls wait in all (int).
        next_cursor: the cursor of the next page (str), or ``None`` on the last.

    Returns:
        str: HTML.
    """
    if not entries:
        body = '<p class="empty">Nothing waits for approval.</p>'
    else:
        body = "".join(render_entry(entry, csrf) for entry in entries)
    pager = [f'<span class="count">{total} waiting</span>']
    if after:
        pager.append('<a href="/">first page</a>')
    if next_cursor:
        pager.append(f'<a href="/?after={html.escape(next_cursor, quote=True)}">next page</a>')
    return (f'<div id="calls" data-after="{html.escape(after or "", quote=True)}">{body}'
            f'</div><nav class="pager">{" · ".join(pager)}</nav>')


def render_page(content: str, csrf: str, store_name: str, version: int,
                approver: str) -> str:
    """The whole page: no inline script or style (the CSP allows only ``/inbox.js``
    and ``/inbox.css``).

    Args:
        content: ``render_entries``' HTML.
        csrf: the server's CSRF token (str).
        store_name: the store as shown (str, without any password).
        version: the inbox's change counter (int) the content is of.
        approver: the default approver name (str).

    Returns:
        str: the HTML document.
    """
    e = Shown()
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>agentflow inbox</title>"
            f'<meta name="csrf" content="{e(csrf)}">'
            '<link rel="stylesheet" href="/inbox.css"><script src="/inbox.js" defer>'
            f'</script></head><body data-version="{version}">'
            f'<header class="top"><h1>Approval inbox</h1><span class="store">'
            f'{e(store_name)}</span><label>answering as <input id="approver" '
            f'maxlength="100" value="{e(approver)}"></label>'
            '<span id="live" class="live">live</span></header>'
            f"<main>{content}</main><footer>Generated {time.strftime('%H:%M:%S')}; "
            "oldest first.</footer></body></html>")
