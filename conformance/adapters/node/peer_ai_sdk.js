// The Vercel AI SDK (`ai` 6, pinned in package.json) behind the conformance protocol
// (conformance/README.md). `make conformance-peers` runs it after `npm install` here.
//
// The framework's documented loop, as its "Tool Execution Approval" page shows it:
// `streamText({model, messages, tools, stopWhen})` with `tool({..., needsApproval})`;
// the conversation is the `ModelMessage[]` the caller keeps, extended after each run by
// `(await result.response).messages`; a call that needs approval ends the run with a
// `tool-approval-request` part, and the answer is a `tool` message of
// `{type: "tool-approval-response", approvalId, approved, reason}` parts appended as the
// last message of the next run. The SDK keeps no session: the adapter keeps that list,
// as the documentation does (README, "Mapping a framework").
"use strict";
const { streamText, tool, jsonSchema, stepCountIs } = require("ai");
const { createOpenAI } = require("@ai-sdk/openai");
const { canonical, serve } = require("./adapter.js");

const VERSION = `ai ${require("ai/package.json").version} + @ai-sdk/openai ${
  require("@ai-sdk/openai/package.json").version}`;
const DEFAULT_ROUNDS = 40; // SPEC R8: the SDK's default stopWhen is one step
// SPEC R7's text: a denial's `reason` is sent to the model as it is
// (@ai-sdk/openai convert-to-openai-chat-messages.ts: `output.reason ?? "Tool call
// execution denied."`), so the SDK's own parameter carries it (README, "Mapping").
const rejectionText = (reason) =>
  `Rejected: ${reason != null && String(reason).trim() ? reason : "User denied"}`;

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");

let peer = null;

function setup(message) {
  const executions = [];
  const specs = Object.fromEntries((message.tools || []).map((t) => [t.name, t]));
  const tools = {};
  for (const t of message.tools || []) {
    const behaviour = t.behaviour || { kind: "return", value: "ok" };
    tools[t.name] = tool({
      description: t.description || "",
      inputSchema: jsonSchema(t.parameters || { type: "object", properties: {} }),
      needsApproval: Boolean(t.requires_approval),
      execute: async (args) => {
        executions.push({ tool: t.name, arguments: args });
        if (behaviour.kind === "echo") return canonical(args);
        if (behaviour.kind === "raise") {
          throw Object.assign(new Error(behaviour.message), { name: behaviour.type });
        }
        return behaviour.value;
      },
    });
  }
  const provider = createOpenAI({ baseURL: message.base_url, apiKey: message.api_key });
  peer = {
    model: provider.chat(message.model), tools, specs, executions,
    instructions: message.instructions || undefined,
    providers: message.context_providers || [],
    messages: [],       // the ModelMessage[] the documented loop carries from run to run
    approvalIds: {},    // call id -> the approvalId of its tool-approval-request
  };
  send({
    type: "ready", implementation: VERSION, suites: ["core"],
    derives: ["index"],
    // the SDK keeps no session: every case is already run without one, the ModelMessage[]
    // carried from run to run (README, "A run without a session")
    can: ["no_session"],
    configured: [
      "max_rounds: stopWhen: stepCountIs(max_rounds), 40 when the case gives none (the SDK's default is one step)",
      "context providers: prepareStep returns the system text and the provider messages before the history",
      "rejection text: the tool-approval-response's reason, set to SPEC R7's text",
      "a failed run: the messages of (await result.response), which resolves with the steps completed before a stream error",
    ],
    cannot: {
      resume_counts_a_round: "stopWhen: stepCountIs(n) is `steps.length === n` (ai src/generate-text/stop-condition.ts:8-10; the Loop Control guide, ai/docs/03-agents/04-loop-control.mdx, counts steps), and the approved calls of a resume run before the first step, as no step (stream-text.ts:1533-1540, 1717)",
    },
  });
}

// ModelMessage[] in OpenAI form, as @ai-sdk/openai's convertToOpenAIChatMessages sends it
// (approval requests and responses are the SDK's bookkeeping and are not sent).
function toOpenAI(messages) {
  const out = [];
  for (const m of messages) {
    const parts = typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content;
    if (m.role === "assistant") {
      const text = parts.filter((p) => p.type === "text").map((p) => p.text).join("");
      const calls = parts.filter((p) => p.type === "tool-call").map((p) => ({
        id: p.toolCallId, type: "function",
        function: { name: p.toolName, arguments: JSON.stringify(p.input) },
      }));
      if (text || calls.length) out.push({ role: "assistant", content: text || null, ...(calls.length ? { tool_calls: calls } : {}) });
    } else if (m.role === "tool") {
      for (const p of parts.filter((p) => p.type === "tool-result")) {
        out.push({ role: "tool", content: outputText(p.output), tool_call_id: p.toolCallId });
      }
    } else {
      out.push({ role: m.role, content: parts.filter((p) => p.type === "text").map((p) => p.text).join("") });
    }
  }
  return out;
}

function outputText(output) {
  if (output.type === "text" || output.type === "error-text") return output.value;
  if (output.type === "execution-denied") return output.reason ?? "Tool call execution denied.";
  return JSON.stringify(output.value);
}

// Kinds by behaviour (README, EXPECT "error"): the SDK's refusals of the answers or of a
// history it cannot send, raised before anything ran, are what ApprovalError means.
const REFUSALS = ["AI_InvalidToolApprovalError", "AI_ToolCallNotFoundForApprovalError",
  "AI_MissingToolResultsError"];
const PROVIDER = ["AI_APICallError", "AI_RetryError", "AI_TypeValidationError", "AI_JSONParseError"];

function errorKind(exc, nothingRan) {
  const name = (exc && exc.name) || "";
  if (REFUSALS.includes(name)) return nothingRan ? "ApprovalError" : name;
  if (PROVIDER.includes(name) || (exc && exc.fromStream && !name.startsWith("AI_"))) {
    return "ProviderError";
  }
  return name || "Error";
}

async function run(message) {
  peer.executions.length = 0;
  if (message.reload_session) peer.messages = JSON.parse(JSON.stringify(peer.messages));
  const before = peer.messages;
  const turn = [];
  const answers = message.approvals || [];
  if (answers.length) {
    turn.push({
      role: "tool",
      content: answers.map((a) => ({
        type: "tool-approval-response",
        approvalId: peer.approvalIds[a.call_id] ?? a.call_id,
        approved: a.approved, ...(a.approved ? {} : { reason: rejectionText(a.reason) }),
      })),
    });
  }
  for (const m of message.input || []) turn.push({ role: m.role, content: m.content ?? "" });
  const limit = (message.options || {}).max_rounds ?? DEFAULT_ROUNDS;
  const system = [peer.instructions, ...peer.providers.map((p) => p.instructions)]
    .filter((s) => s).join("\n");
  const extra = peer.providers.flatMap((p) => p.messages || []).map((m) => ({ role: m.role, content: m.content ?? "" }));
  let error = null, finishReason = null, usage = null, asked = 0, steps = 0, emitted = 0;
  let result = null, failed = null;
  const emit = (update) => { emitted += 1; send({ type: "update", update }); };
  try {
    result = streamText({
      model: peer.model, tools: peer.tools, messages: [...before, ...turn],
      stopWhen: stepCountIs(limit), maxRetries: 0, onError: () => {}, // reported in `end`
      ...(system || extra.length ? {
        prepareStep: ({ messages }) => ({ system: system || undefined, messages: [...extra, ...messages] }),
      } : {}),
    });
    for await (const part of result.fullStream) {
      switch (part.type) {
        case "text-delta": emit({ type: "text", text: part.text }); break;
        case "reasoning-delta": emit({ type: "reasoning", text: part.text }); break;
        case "tool-input-start": emit({ type: "tool_call_start", call_id: part.id, name: part.toolName }); break;
        case "tool-input-delta": emit({ type: "tool_call_args", call_id: part.id, delta: part.delta }); break;
        case "tool-input-end": emit({ type: "tool_call_end", call_id: part.id }); break;
        case "tool-result":
          emit({ type: "tool_result", call_id: part.toolCallId, name: part.toolName,
            result: typeof part.output === "string" ? part.output : JSON.stringify(part.output) });
          break;
        case "tool-error":
          emit({ type: "tool_result", call_id: part.toolCallId, name: part.toolName,
            result: part.error instanceof Error ? part.error.message : String(part.error) });
          break;
        case "tool-output-denied": {
          const a = answers.find((x) => x.call_id === part.toolCallId);
          emit({ type: "tool_result", call_id: part.toolCallId, name: part.toolName,
            result: a ? rejectionText(a.reason) : "Tool call execution denied." });
          break;
        }
        case "tool-approval-request": {
          const call = part.toolCall;
          asked += 1;
          peer.approvalIds[call.toolCallId] = part.approvalId;
          emit({ type: "approval_request", call_id: call.toolCallId, name: call.toolName,
            arguments: call.input ?? null, description: peer.specs[call.toolName]?.description });
          break;
        }
        case "finish-step": steps += 1; break;
        case "finish":
          finishReason = part.finishReason;
          usage = part.totalUsage;
          break;
        case "error": // the stream's own error part: the provider's HTTP or stream failure;
          // read on to the stream's end (the adapter adds no stop of its own), so the SDK
          // settles what the run completed
          failed = failed || Object.assign(new Error(part.error?.message ?? String(part.error)),
            { name: part.error?.name || "", fromStream: true });
          break;
        default: break;
      }
    }
    if (failed) throw failed;
    const response = await result.response;
    peer.messages = [...before, ...turn, ...response.messages];
    const reason = asked ? "awaiting_approval"
      : finishReason === "tool-calls" && steps >= limit ? "max_rounds"
      : finishReason === "content-filter" ? "content_filter"
      : finishReason === "length" ? "length" : "stop";
    emit({ type: "finish", finish_reason: reason,
      usage: usage && usage.totalTokens != null ? { prompt_tokens: usage.inputTokens,
        completion_tokens: usage.outputTokens, total_tokens: usage.totalTokens } : null });
  } catch (exc) {
    // What a failed run leaves (README): what the SDK returned, its completed steps;
    // with none completed, `response` rejects and the history stays as it was.
    const response = result && await result.response.catch(() => null);
    if (response && response.messages.length) peer.messages = [...before, ...turn, ...response.messages];
    // The run's error is the first one: an error part already read (a chunk the SDK's
    // schema refused) is the cause of what the SDK throws after it (119: the refused
    // header leaves a nameless call, "Expected 'function.name' to be a string")
    const first = failed || exc;
    error = { kind: errorKind(first, !emitted && !peer.executions.length),
      message: `${first && first.name}: ${first && first.message}` };
  }
  send({ type: "end", error, history: toOpenAI(peer.messages), executions: [...peer.executions] });
}

serve(setup, run);
