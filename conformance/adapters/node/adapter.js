// A second-language check of the conformance protocol (conformance/README.md): a minimal
// implementation of the approval flow in plain Node (18+, no packages), written from the
// README alone, behind the JSON-lines protocol. It declares the `core` suite and, as
// `cannot`, the features it leaves out; tests/test_conformance.py runs it on the cases it
// implements, so the README and the protocol cannot drift apart.
"use strict";
const readline = require("node:readline");

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const DENIED = "User denied"; // SPEC R7

// RFC 8785 (JCS): members sorted by UTF-16 code units (what Array.prototype.sort does),
// numbers and strings as JSON.stringify writes them (RFC 8785 §3.2.2 is defined by it),
// no whitespace. What has no canonical form throws, and the caller hashes the text as
// sent: a number beyond the double range (JSON.parse made it Infinity, which
// JSON.stringify would write as null) and a lone surrogate (not Unicode, §3.1).
// tests/test_conformance_canonical.py checks it against conformance/digest-vectors.json.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
function canonical(value) {
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  if (value && typeof value === "object") {
    return "{" + Object.keys(value).sort()
      .map((k) => canonical(k) + ":" + canonical(value[k])).join(",") + "}";
  }
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new RangeError("a number beyond the IEEE 754 double range has no RFC 8785 form");
  }
  if (typeof value === "string" && LONE_SURROGATE.test(value)) {
    throw new RangeError("a lone surrogate is not Unicode: it has no RFC 8785 form");
  }
  return JSON.stringify(value);
}

let agent = null;

function setup(message) {
  agent = { ...message, history: [], executions: [] };
  send({
    type: "ready", implementation: `node-minimal ${process.version}`, suites: ["core"],
    derives: [],
    cannot: {
      unknown_call_ids: "answers are matched to pending calls only",
      answers_without_a_pause: "answers are matched to pending calls only",
      duplicate_approvals: "answers are matched to pending calls only",
      reload_session: "no serialised session form",
      context_providers: "no context providers",
    },
  });
}

// SSE (WHATWG HTML §9.2.6, the parts the cases use): events split by blank lines,
// `data:` lines joined; each chunk's deltas assembled per tool-call index (SPEC §6).
async function modelCall(emit) {
  const body = {
    model: agent.model, stream: true,
    messages: [...(agent.instructions ? [{ role: "system", content: agent.instructions }] : []),
      ...agent.history],
  };
  if (agent.tools.length) {
    body.tools = agent.tools.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
  }
  const response = await fetch(agent.base_url + "/chat/completions", {
    method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${agent.api_key}` },
  });
  if (!response.ok) throw { kind: "ProviderError", message: `HTTP ${response.status}: ${await response.text()}` };
  const text = (await response.text()).replace(/^\uFEFF/, "");
  let content = "", finish = null, usage = null, done = false;
  const calls = [];
  for (const event of text.split(/\r\n\r\n|\n\n|\r\r/)) {
    const data = event.split(/\r\n|\n|\r/).filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
    if (!data) continue;
    if (data === "[DONE]") { done = true; break; }
    const chunk = JSON.parse(data);
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices || []) {
      const delta = choice.delta || {};
      if (delta.content) { content += delta.content; emit({ type: "text", text: delta.content }); }
      for (const part of delta.tool_calls || []) {
        let call = calls[part.index ?? calls.length - 1];
        if (!call) {
          call = calls[part.index] = { id: part.id, name: part.function.name, arguments: "" };
          emit({ type: "tool_call_start", call_id: call.id, name: call.name, index: part.index });
        }
        let piece = part.function?.arguments ?? "";
        if (typeof piece !== "string") piece = JSON.stringify(piece);
        if (piece) { call.arguments += piece; emit({ type: "tool_call_args", call_id: call.id, delta: piece }); }
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  if (!finish && !done) throw { kind: "IncompleteStreamError", message: "stream ended without finish_reason" };
  for (const call of calls) emit({ type: "tool_call_end", call_id: call.id });
  return { content, calls, finish: finish || "stop", usage };
}

function execute(call) {
  const tool = agent.tools.find((t) => t.name === call.name);
  if (!tool) return `Error: unknown tool '${call.name}'`;
  const args = JSON.parse(call.arguments || "{}");
  agent.executions.push({ tool: tool.name, arguments: args });
  const b = tool.behaviour || { kind: "return", value: "ok" };
  if (b.kind === "echo") return canonical(args);
  if (b.kind === "raise") return `Error: ${b.type}: ${b.message}`; // failures are data
  return b.value;
}

async function run(message) {
  agent.executions = [];
  const emit = (update) => send({ type: "update", update });
  let error = null;
  let usage = null;
  const addResult = (call, result) => {
    agent.history.push({ role: "tool", content: result, tool_call_id: call.id });
    emit({ type: "tool_result", call_id: call.id, name: call.name, result });
  };
  try {
    // Resume (R4): answer every unanswered call of the last assistant message.
    const last = agent.history[agent.history.length - 1];
    if (last && last.role === "assistant" && last.tool_calls) {
      for (const c of last.tool_calls) {
        const call = { id: c.id, name: c.function.name, arguments: c.function.arguments };
        const answer = (message.approvals || []).find((a) => a.call_id === call.id);
        const reason = answer && answer.reason && answer.reason.trim() ? answer.reason : DENIED;
        addResult(call, answer && answer.approved ? execute(call) : `Rejected: ${reason}`);
      }
    }
    agent.history.push(...(message.input || []));
    for (;;) {
      const turn = await modelCall(emit);
      if (turn.usage) {
        usage = usage || { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
        for (const k of Object.keys(usage)) usage[k] += turn.usage[k] || 0;
      }
      const stored = { role: "assistant", content: turn.content || null };
      if (turn.calls.length) {
        stored.tool_calls = turn.calls.map((c) => ({
          id: c.id, type: "function", function: { name: c.name, arguments: c.arguments || "{}" },
        }));
      }
      agent.history.push(stored);
      if (turn.finish !== "tool_calls" || !turn.calls.length) {
        emit({ type: "finish", finish_reason: turn.finish, usage });
        break;
      }
      const asking = turn.calls.filter((c) => agent.tools.find((t) => t.name === c.name)?.requires_approval);
      if (asking.length) { // R3, R5: pause; no sibling runs before the answers
        for (const c of asking) {
          const tool = agent.tools.find((t) => t.name === c.name);
          emit({ type: "approval_request", call_id: c.id, name: c.name,
            arguments: JSON.parse(c.arguments || "{}"), description: tool.description });
        }
        emit({ type: "finish", finish_reason: "awaiting_approval", usage });
        break;
      }
      for (const c of turn.calls) addResult(c, execute(c));
    }
  } catch (exc) {
    error = exc && exc.kind ? exc : { kind: "Error", message: String(exc) };
  }
  send({ type: "end", error, history: agent.history, executions: agent.executions });
}

// The protocol's loop, one message at a time: a run finishes before the next line is
// read. Shared with the peer adapters beside this one.
function serve(setup, run) {
  const lines = readline.createInterface({ input: process.stdin });
  const queue = [];
  let busy = false;
  async function pump() {
    if (busy) return;
    busy = true;
    while (queue.length) {
      const message = JSON.parse(queue.shift());
      if (message.type === "setup") setup(message);
      else if (message.type === "run") await run(message);
      else if (message.type === "exit") process.exit(0);
    }
    busy = false;
  }
  lines.on("line", (line) => { if (line.trim()) { queue.push(line); pump(); } });
}

module.exports = { canonical, serve };
if (require.main !== module) return;

serve(setup, run);
