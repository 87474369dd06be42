// agentflow inbox: answers without a page reload, and live updates by Server-Sent
// Events. Every piece of HTML inserted here was written (and escaped) by the server;
// this script never builds markup from data (SPEC R25).
"use strict";

const csrf = () => document.querySelector('meta[name="csrf"]').content;
const approverBox = () => document.getElementById("approver");

function ages() {
  const now = Date.now() / 1000;
  for (const el of document.querySelectorAll(".age[data-issued]")) {
    const s = Math.max(0, now - parseFloat(el.dataset.issued));
    const [n, u] = s >= 86400 ? [s / 86400, "d"] : s >= 3600 ? [s / 3600, "h"]
      : s >= 60 ? [s / 60, "m"] : [s, "s"];
    el.textContent = Math.floor(n) + u + " ago";
  }
}

async function submit(event) {
  const form = event.target.closest("form.answer");
  if (!form) return;
  event.preventDefault();
  const button = event.submitter;
  const body = new URLSearchParams(new FormData(form));
  body.set("action", button ? button.value : "approve");
  body.set("approver", approverBox().value);
  body.set("csrf", csrf());
  const key = form.closest("article").dataset.key;
  // A live update may replace the call's article meanwhile: find it again each time.
  const article = () => document.querySelector(`article.call[data-key="${key}"]`);
  const show = (text, kind) => {
    const found = article();
    if (!found) return;
    const result = found.querySelector(".result");
    result.className = "result" + (kind ? " " + kind : "");
    result.textContent = text;
  };
  for (const b of form.querySelectorAll("button")) b.disabled = true;
  show("sending…");
  let ok = false;
  try {
    const reply = await fetch("/answer", {
      method: "POST", body, credentials: "same-origin",
      headers: {"Accept": "application/json"}});
    const data = await reply.json();
    ok = data.ok;
    show(data.message, ok ? "ok" : "error");
  } catch (error) {
    show("could not reach the inbox: " + error, "error");
  }
  const now = article();
  if (now && ok) now.dataset.state = "answered";
  if (now && !ok) for (const b of now.querySelectorAll("form button")) b.disabled = false;
}

// Swap in the server's fresh list, keeping each call a person is typing into.
async function refresh() {
  const calls = document.getElementById("calls");
  const after = calls ? calls.dataset.after : "";
  const reply = await fetch("/entries" + (after ? "?after=" + encodeURIComponent(after) : ""),
                            {credentials: "same-origin"});
  if (!reply.ok) return;
  const fresh = document.createElement("template");
  fresh.innerHTML = await reply.text();  // the server's escaped HTML
  const old = new Map([...document.querySelectorAll("article.call")]
                      .map(a => [a.dataset.key, a]));
  for (const article of fresh.content.querySelectorAll("article.call")) {
    const mine = old.get(article.dataset.key);
    const result = mine && mine.querySelector(".result").textContent;
    if (mine && mine.dataset.state === article.dataset.state &&
        mine.contains(document.activeElement)) {
      article.replaceWith(mine);  // the person is typing here
    } else if (mine && result) {
      article.querySelector(".result").textContent = result;
      article.querySelector(".result").className = mine.querySelector(".result").className;
    }
  }
  document.querySelector("main").replaceChildren(...fresh.content.childNodes);
  ages();
}

function live() {
  const status = document.getElementById("live");
  let seen = document.body.dataset.version;
  const events = new EventSource("/events");
  events.addEventListener("changed", (event) => {
    status.textContent = "live";
    status.className = "live";
    if (event.data !== seen) {
      seen = event.data;
      refresh();
    }
  });
  events.onerror = () => { status.textContent = "reconnecting…"; status.className = "live off"; };
}

document.addEventListener("DOMContentLoaded", () => {
  const box = approverBox();
  box.value = localStorage.getItem("agentflow-approver") || box.value;
  box.addEventListener("change", () => localStorage.setItem("agentflow-approver", box.value));
  document.addEventListener("submit", submit);
  ages();
  setInterval(ages, 10000);
  live();
});
