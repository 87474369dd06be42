// agentflow inbox: the page's script. Every piece of HTML inserted here was written (and
// escaped) by the server; this script never builds markup from data (SPEC R25).
//
// Access (agentflow/cli/inbox_access.py): the link's one-time code, in the fragment, is
// exchanged once for a page token kept in this origin's localStorage (no other server
// can read it) and sent in a header (never sent by the browser by itself, unlike a
// cookie). One event stream serves every tab of this browser: the tab holding a Web
// Lock reads it and tells the others over a BroadcastChannel, so six tabs do not use up
// the browser's six connections to the server. Where locks are missing (not a secure
// context), each tab asks for the version now and then instead.
"use strict";

const KEY = "agentflow-inbox";
const channel = "BroadcastChannel" in window ? new BroadcastChannel(KEY) : null;
let access = null;
let seen = null;
let over = false, overTimer = null, held = null;

const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

function stored() {
  try { return JSON.parse(localStorage.getItem(KEY)); } catch (error) { return null; }
}

// The server's reply as {ok, message, ...}, whatever it sent (a proxy's page, a crash).
async function parse(reply) {
  try { return await reply.json(); } catch (error) {
    return {ok: false, message: `the inbox answered HTTP ${reply.status} without a message`};
  }
}

async function api(path, options = {}) {
  const headers = Object.assign({"Accept": "application/json",
                                 "Authorization": "Bearer " + (access && access.token)},
                                options.headers || {});
  const reply = await fetch(path, Object.assign({}, options, {headers, cache: "no-store"}));
  if (reply.status !== 401) return reply;
  const data = await parse(reply);
  ended(data.message, true);
  return new Response(JSON.stringify(data), {status: 401});  // its body read once more
}

function ended(message, tell) {
  const box = $("ended");
  box.textContent = message;
  box.hidden = false;
  status("ended", "live off");
  if (access && stored() && stored().token === access.token) localStorage.removeItem(KEY);
  if (tell && channel) channel.postMessage({ended: message});
}

function status(text, kind) {
  const box = $("live");
  box.textContent = text;
  box.className = kind || "live";
}

async function login() {
  const code = /^#login=([\w-]+)$/.exec(location.hash);
  if (code) {
    history.replaceState(null, "", location.pathname + location.search);
    const reply = await fetch("/login", {method: "POST", cache: "no-store",
      headers: {"X-Agentflow-Link": code[1], "Accept": "application/json"}});
    const data = await parse(reply);
    if (data.ok) {
      access = {token: data.token};
      localStorage.setItem(KEY, JSON.stringify(access));
      return true;
    }
    access = stored();  // a spent link, in a browser that has access already
    if (!access) { ended(data.message); return false; }
    return true;
  }
  access = stored();
  if (!access) {
    ended("This page needs its link: open the link agentflow inbox printed.");
    return false;
  }
  return true;
}

function ages() {
  const now = Date.now() / 1000;
  for (const el of document.querySelectorAll(".age[data-issued]")) {
    const s = Math.max(0, now - parseFloat(el.dataset.issued));
    const [n, u] = s >= 86400 ? [s / 86400, "d"] : s >= 3600 ? [s / 3600, "h"]
      : s >= 60 ? [s / 60, "m"] : [s, "s"];
    el.textContent = Math.floor(n) + u + " ago";
  }
}

const article = (key) => document.querySelector(`article.call[data-key="${key}"]`);

function show(key, text, kind) {
  const found = article(key);
  if (!found) return;
  const result = found.querySelector(".result");
  result.className = "result" + (kind ? " " + kind : "");
  result.textContent = text;
}

async function send(path, body, buttons, key) {
  for (const b of buttons) b.disabled = true;
  if (key) show(key, "sending…");
  let data;
  try {
    data = await parse(await api(path, {method: "POST", body}));
  } catch (error) {
    data = {ok: false, message: "could not reach the inbox: " + error.message};
  }
  return data;
}

async function submit(event) {
  const form = event.target;
  if (form.id === "filter") return;  // a navigation to the filtered list
  event.preventDefault();
  if (form.id === "bulk") return rejectPicked(form, event.submitter);
  if (!form.classList.contains("answer")) return;
  // Only a pressed button answers, and only with its own action: nothing defaults.
  const button = event.submitter;
  if (!button || !button.value) return;
  const key = form.closest("article").dataset.key;
  const body = new URLSearchParams(new FormData(form));
  body.set("action", button.value);
  const own = form.closest("article").querySelectorAll("form button");
  const data = await send("/answer", body, own, key);
  show(key, data.message, data.ok ? "ok" : "error");
  const now = article(key);
  if (now && data.ok) now.dataset.state = "answered";
  if (now && !data.ok) for (const b of now.querySelectorAll("form button")) b.disabled = false;
}

async function rejectPicked(form, button) {
  if (!button || button.value !== "reject") return;
  const picks = [...document.querySelectorAll("input.pick:checked")];
  if (!picks.length) { say("Select the calls to reject first.", "error"); return; }
  const body = new URLSearchParams();
  body.set("reason", form.elements.reason.value);
  for (const pick of picks) {
    body.append("ref", pick.dataset.ref);
    body.append("digest", pick.dataset.digest);
    body.append("request_id", pick.dataset.request);
  }
  const data = await send("/answer-many", body, [button], null);
  button.disabled = false;
  say(data.message, data.ok ? "ok" : "error");
  if (data.ok) form.elements.reason.value = "";
  counted();
}

function notice(text) {
  $("notice").textContent = text;
  $("notice").hidden = false;
}

function say(text, kind) {  // the outcome of "reject selected"
  const box = $("said");
  box.textContent = text;
  box.className = "said " + kind;
  box.hidden = false;
}

function counted() {
  $("picked").textContent = document.querySelectorAll("input.pick:checked").length;
}

// Fetch the server's list; while the pointer is over the list, hold it (a row moving
// under the pointer would take a click meant for another call) and say so.
async function refresh(first) {
  const calls = $("calls");
  const query = new URLSearchParams(location.search);
  if (calls && calls.dataset.after) query.set("after", calls.dataset.after);
  const text = query.toString();
  let reply;
  try { reply = await api("/entries" + (text ? "?" + text : "")); } catch (error) { return; }
  if (!reply.ok) return;
  const fresh = document.createElement("template");
  fresh.innerHTML = await reply.text();  // the server's escaped HTML
  if (over && !first) {
    held = fresh;
    const now = new Set([...fresh.content.querySelectorAll("article.call")]
                        .map((a) => a.dataset.key));
    const was = new Set([...document.querySelectorAll("main article.call")]
                        .map((a) => a.dataset.key));
    const added = [...now].filter((k) => !was.has(k)).length;
    const gone = [...was].filter((k) => !now.has(k)).length;
    notice(`The list changed (${added} new, ${gone} gone, answers elsewhere); it holds ` +
           "still while the pointer is on it and updates when the pointer leaves.");
    return;
  }
  apply(fresh);
}

function apply(fresh) {
  held = null;
  // A kept article is taken out of the document and put back below, and a node leaving
  // the document loses focus (HTML's focus fixup rule): the key the person presses next
  // would go to the page, not to the field they were typing in. Give it back, caret too.
  const focused = document.activeElement;
  const caret = focused && focused.selectionStart != null
    ? [focused.selectionStart, focused.selectionEnd] : null;
  const old = new Map([...document.querySelectorAll("article.call")]
                      .map((a) => [a.dataset.key, a]));
  for (const next of fresh.content.querySelectorAll("article.call")) {
    const mine = old.get(next.dataset.key);
    if (!mine) continue;
    const result = mine.querySelector(".result").textContent;
    if (mine.dataset.state === next.dataset.state &&
        (mine.contains(document.activeElement) || mine.querySelector("details[open] form"))) {
      next.replaceWith(mine);  // the person is typing here
    } else {
      if (result) {
        next.querySelector(".result").textContent = result;
        next.querySelector(".result").className = mine.querySelector(".result").className;
      }
      const pick = mine.querySelector("input.pick");
      const again = next.querySelector("input.pick");
      if (pick && again) again.checked = pick.checked;
    }
  }
  $("list").replaceChildren(...fresh.content.childNodes);
  if (focused && focused !== document.body && focused.isConnected &&
      document.activeElement !== focused) {
    focused.focus({preventScroll: true});
    if (caret) focused.setSelectionRange(caret[0], caret[1]);
  }
  const context = $("context");
  if (context) {
    $("approver").textContent = context.dataset.approver;
    $("store").textContent = context.dataset.store;
    seen = context.dataset.version;
  }
  $("notice").hidden = true;
  ages();
  counted();
}

function changed(version) {
  if (version === seen) return;
  seen = version;
  refresh();
}

// The tab holding the lock reads the event stream (fetch: an EventSource sends no
// header) and passes each change on.
async function lead() {
  while (true) {
    try {
      const reply = await api("/events");
      if (reply.status === 401) return;
      if (!reply.ok) throw new Error("HTTP " + reply.status);
      tell({status: "live"});
      const reader = reply.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = /^data: (.*)$/m.exec(block);
          if (data && /^event: changed$/m.test(block)) tell({version: data[1]});
        }
      }
    } catch (error) { /* the server went away: try again below */ }
    tell({status: "reconnecting…"});
    await sleep(2000);
  }
}

function tell(message) {
  hear(message);
  if (channel) channel.postMessage(message);
}

function hear(message) {
  if (message.ended) ended(message.ended, false);
  if (message.status) status(message.status, message.status === "live" ? "live" : "live off");
  if (message.version) changed(message.version);
}

async function poll() {
  while (true) {
    try {
      const reply = await api("/version");
      if (reply.status === 401) return;
      const data = await parse(reply);
      status(data.ok ? "live" : "reconnecting…", data.ok ? "live" : "live off");
      if (data.ok) changed(String(data.version));
    } catch (error) { status("reconnecting…", "live off"); }
    await sleep(document.hidden ? 10000 : 2000);
  }
}

function live() {
  if (channel && navigator.locks) {
    channel.onmessage = (event) => hear(event.data);
    status("live");
    navigator.locks.request(KEY + "-events", lead);
  } else {
    poll();
  }
}

function holdStill() {
  const list = $("list");
  list.addEventListener("pointerenter", () => { over = true; clearTimeout(overTimer); });
  // A tap's click comes after its pointerleave: wait before letting the list move.
  list.addEventListener("pointerleave", () => {
    clearTimeout(overTimer);
    overTimer = setTimeout(() => { over = false; if (held) apply(held); }, 600);
  });
}

function fillFilter() {
  const query = new URLSearchParams(location.search);
  const form = $("filter");
  for (const name of ["tool", "session", "q"]) form.elements[name].value = query.get(name) || "";
  form.elements.group.checked = query.get("group") === "session";
}

document.addEventListener("DOMContentLoaded", async () => {
  document.addEventListener("submit", submit);
  document.addEventListener("change", (event) => {
    if (event.target.classList.contains("pick")) counted();
  });
  fillFilter();
  holdStill();
  if (!(await login())) return;
  await refresh(true);
  const target = location.hash.startsWith("#call-") && $(location.hash.slice(1));
  if (target) target.scrollIntoView();
  setInterval(ages, 10000);
  live();
});
