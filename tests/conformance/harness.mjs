// Runs conformance scenarios through the real pi-agent-core 1.6.0 loop (runAgentLoopContinue).
//
// Protocol: one scenario (JSON, see tests/conformance/scenario.py) per stdin line. For each, one
// JSON line per Pi event (projected at emit time, because Pi's partials are shallow copies that
// later deltas mutate), then one {"t": "scenario_end", ...} line. The process serves scenarios
// until stdin closes, so hundreds of scenarios share one Node start-up.
//
// The packages are resolved from the repository's node/node_modules (what `npm ci` installs).
import { createInterface } from "node:readline";

const NODE_MODULES = new URL("../../node/node_modules/@earendil-works/", import.meta.url);
const core = await import(new URL("pi-agent-core/dist/index.js", NODE_MODULES).href);
const ai = await import(new URL("pi-ai/dist/index.js", NODE_MODULES).href);
// mule's tool gate follows pi-ai 1.6.0 (pi-schema); until this harness runs 1.6.0's loop, each tool
// gates its arguments with 1.6.0's validateToolArguments through 0.73.1's prepareArguments hook
// (a throw there becomes the call's error result, as a failed validation does).
const { validateToolArguments } = await import(
  new URL("../../node/node_modules/@earendil-works/pi-ai/dist/utils/validation.js", import.meta.url).href
);

const MODEL = {
  id: "scripted-1",
  name: "Scripted",
  api: "scripted-api",
  provider: "scripted",
  baseUrl: "",
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 1000,
  maxTokens: 100,
};
const ZERO_USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};
// Fields that carry no loop semantics (clocks, model ids, usage) and are left out of projections.
const DROPPED = new Set(["timestamp", "usage", "api", "provider", "model", "partial", "durationMs"]);

/** A JSON projection of a Pi value: undefined dropped, volatile fields removed, deep copy. */
function strip(value) {
  if (Array.isArray(value)) return value.map(strip);
  if (value === null || typeof value !== "object") return value;
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined || DROPPED.has(k)) continue;
    out[k] = strip(v);
  }
  return out;
}

function project(event) {
  switch (event.type) {
    case "agent_start":
    case "turn_start":
      return { t: event.type };
    case "agent_end":
      return { t: "agent_end", messages: strip(event.messages) };
    case "message_start":
    case "message_end":
      return { t: event.type, m: strip(event.message) };
    case "message_update":
      return { t: event.type, m: strip(event.message), e: strip(event.assistantMessageEvent) };
    case "tool_execution_start":
      return { t: event.type, id: event.toolCallId, name: event.toolName, args: strip(event.args) };
    case "tool_execution_update":
      return {
        t: event.type,
        id: event.toolCallId,
        name: event.toolName,
        args: strip(event.args),
        partial: strip(event.partialResult),
      };
    case "tool_execution_end":
      return {
        t: event.type,
        id: event.toolCallId,
        name: event.toolName,
        isError: event.isError,
        result: strip(event.result),
      };
    case "turn_end":
      return { t: event.type, m: strip(event.message), results: strip(event.toolResults) };
    default:
      return { t: "unknown", raw: strip(event) };
  }
}

// Mirrors mule.pi._scripted._split: ceil(len / pieces)-sized slices.
function split(text, pieces) {
  if (pieces <= 1 || text.length <= 1) return [text];
  const size = Math.max(1, Math.ceil(text.length / pieces));
  const out = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** A scripted stream: the exact event sequence of one reply, with fresh partial snapshots. */
function playReply(reply, hung) {
  const stream = ai.createAssistantMessageEventStream();
  const blocks = reply.blocks ?? [];
  const hasCalls = blocks.some((b) => b.type === "toolCall");
  const stop = reply.stopReason ?? (hasCalls ? "toolUse" : "stop");
  const content = [];
  const raw = [];
  const head = () => ({
    role: "assistant",
    content: [],
    api: MODEL.api,
    provider: MODEL.provider,
    model: MODEL.id,
    usage: ZERO_USAGE,
    stopReason: "pending", // 1.6.0: a partial is "pending" until the response ends
    timestamp: Date.now(),
  });
  const snapshot = () => ({ ...head(), content: structuredClone(content) });
  const final = (reason, errorMessage) => {
    const m = { ...snapshot(), stopReason: reason };
    if (errorMessage !== undefined) m.errorMessage = errorMessage;
    return m;
  };
  const run = async () => {
    await Promise.resolve();
    for (let k = 0; k < (reply.beforeStart ?? 0); k++) {
      stream.push({ type: "text_delta", contentIndex: 0, delta: "early", partial: snapshot() });
    }
    if (reply.start !== false) {
      stream.push({ type: "start", partial: snapshot() });
      for (const block of blocks) {
        const i = content.length;
        if (block.type === "text" || block.type === "thinking") {
          const key = block.type === "text" ? "text" : "thinking";
          content.push({ type: block.type, [key]: "" });
          stream.push({ type: `${block.type}_start`, contentIndex: i, partial: snapshot() });
          for (const d of block.deltas) {
            content[i][key] += d;
            stream.push({ type: `${block.type}_delta`, contentIndex: i, delta: d, partial: snapshot() });
          }
          stream.push({
            type: `${block.type}_end`,
            contentIndex: i,
            content: content[i][key],
            partial: snapshot(),
          });
        } else {
          content.push({ type: "toolCall", id: block.id, name: block.name, arguments: {} });
          raw[i] = "";
          stream.push({ type: "toolcall_start", contentIndex: i, partial: snapshot() });
          for (const d of split(JSON.stringify(block.arguments ?? {}), block.pieces ?? 1)) {
            raw[i] += d;
            content[i].arguments = ai.parseStreamingJson(raw[i]);
            stream.push({ type: "toolcall_delta", contentIndex: i, delta: d, partial: snapshot() });
          }
          content[i].arguments = structuredClone(block.arguments ?? {});
          stream.push({
            type: "toolcall_end",
            contentIndex: i,
            toolCall: structuredClone(content[i]),
            partial: snapshot(),
          });
        }
      }
    }
    if (reply.noTerminal) {
      stream.end();
      hung();
      return;
    }
    if (stop === "error" || stop === "aborted") {
      stream.push({ type: "error", reason: stop, error: final(stop, reply.errorMessage ?? "scripted failure") });
    } else {
      stream.push({ type: "done", reason: stop, message: final(stop) });
    }
    // Events after the terminal: the stream drops them (mule's loop must ignore them).
    for (let k = 0; k < (reply.trailing ?? 0); k++) {
      stream.push({ type: "text_delta", contentIndex: 0, delta: "late", partial: snapshot() });
    }
  };
  void run();
  return stream;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function toolResult(callId, name, plan) {
  const r = plan.result ?? {};
  const result = { content: [{ type: "text", text: r.text ?? `${name}:${callId}` }] };
  if (r.details !== undefined && r.details !== null) result.details = r.details;
  if (r.terminate !== undefined && r.terminate !== null) result.terminate = r.terminate;
  return result;
}

/**
 * Slots order the timed events of parallel tools without trusting the clock: a `{wait: k}` step
 * blocks until every event of a lower slot was emitted (the k-th wait of a call is the slot of
 * its k-th event: updates, then its end). A call's end frees all its slots (an immediate result
 * never reaches them). A generous fallback keeps a broken order from hanging: it then shows.
 */
function makeSlots(plans) {
  const of = {};
  const all = new Set();
  for (const [id, plan] of Object.entries(plans)) {
    of[id] = (plan.steps ?? []).filter((s) => s.wait !== undefined).map((s) => s.wait);
    for (const k of of[id]) all.add(k);
  }
  const done = new Set();
  const updates = {};
  return {
    onEvent(event) {
      const slots = of[event.toolCallId];
      if (!slots) return;
      if (event.type === "tool_execution_update") {
        const n = (updates[event.toolCallId] = (updates[event.toolCallId] ?? 0) + 1);
        if (slots[n - 1] !== undefined) done.add(slots[n - 1]);
      } else if (event.type === "tool_execution_end") {
        for (const k of slots) done.add(k);
      }
    },
    async wait(k) {
      const deadline = Date.now() + 2000;
      while (Date.now() < deadline && [...all].some((s) => s < k && !done.has(s))) await sleep(1);
    },
  };
}

function makeTool(spec, plans, slots) {
  const tool = {
    name: spec.name,
    label: spec.name,
    description: `the ${spec.name} tool`,
    parameters: spec.parameters ?? { type: "object" },
    prepareArguments(args) {
      return validateToolArguments(tool, { type: "toolCall", id: "", name: spec.name, arguments: args });
    },
    async execute(callId, _args, _signal, onUpdate) {
      const plan = plans[callId] ?? {};
      for (const s of plan.steps ?? []) {
        if (s.sleep !== undefined) await sleep(s.sleep);
        else if (s.wait !== undefined) await slots.wait(s.wait);
        else onUpdate?.({ content: [{ type: "text", text: s.update }] });
      }
      if (plan.raises !== undefined) throw new Error(plan.raises);
      return toolResult(callId, spec.name, plan);
    },
  };
  if (spec.executionMode) tool.executionMode = spec.executionMode;
  return tool;
}

/**
 * Answers a hook from a list of planned answers, then a default; `seen` records the call (as a
 * `hook` event) and `raised` notes that a hook, not the model, threw.
 */
function answers(list, fallback, name, seen, raised) {
  if (list === null || list === undefined) return undefined;
  const queue = [...list];
  return async (arg) => {
    seen(name, arg);
    const next = queue.length > 0 ? queue.shift() : fallback;
    if (next !== null && typeof next === "object" && !Array.isArray(next) && "raises" in next) {
      raised();
      throw new Error(next.raises);
    }
    return structuredClone(next);
  };
}

/** finishTurn from a boolean stop hook: true ends the run, false leaves Pi's scheduling alone. */
function stopHook(hook) {
  if (hook === undefined) return undefined;
  return async (turn) => ((await hook(turn)) === true ? { action: "end" } : undefined);
}

async function runScenario(sc, out) {
  const plans = sc.calls ?? {};
  const slots = makeSlots(plans);
  const replies = [...(sc.replies ?? [])];
  let origin = "model";
  const raised = () => {
    origin = "control";
  };
  const seen = (name, arg) => {
    const event = { t: "hook", name };
    if (name === "key") event.provider = arg;
    if (name === "stop") {
      event.newMessages = strip(arg.newMessages);
      event.context = strip(arg.context.messages);
      event.results = strip(arg.toolResults);
      event.m = strip(arg.message);
    }
    out(event);
  };
  let markHung;
  const hung = new Promise((resolve) => {
    markHung = () => setTimeout(() => resolve("hang"), 100);
  });
  const streamFn = (model, context, options) => {
    // 1.6.0 hands the stream function a TranscriptContext: the prompt and tools are in it.
    out({
      t: "model_call",
      messages: strip(context.messages),
      tools: ai.getCurrentTools(context.messages).map((t) => t.name),
      systemPrompt: ai.getCurrentSystemPrompt(context.messages),
      apiKey: options.apiKey ?? null,
    });
    const reply = replies.shift();
    if (reply === undefined) throw new Error("scripted model has no more replies");
    if (reply.raises !== undefined) throw new Error(reply.raises);
    return playReply(reply, markHung);
  };
  const config = {
    model: MODEL,
    convertToLlm: (messages) =>
      messages.filter(
        (m) => m.role === "system" || m.role === "user" || m.role === "assistant" || m.role === "toolResult",
      ),
    toolExecution: sc.toolExecution ?? "parallel",
    beforeToolCall: async ({ toolCall }) => {
      const plan = plans[toolCall.id] ?? {};
      if (plan.prepareRaises !== undefined) throw new Error(plan.prepareRaises);
      if (plan.reject !== undefined) {
        // 1.6.0: a block may ask to end the batch (terminate), as mule's rejection may.
        const block = { block: true, reason: plan.reject };
        if (plan.rejectTerminate !== undefined) block.terminate = plan.rejectTerminate;
        return block;
      }
      return undefined;
    },
    // isError through afterToolCall keeps the returned result free of an extra key.
    afterToolCall: async ({ toolCall }) => {
      const plan = plans[toolCall.id] ?? {};
      return plan.result?.isError ? { isError: true } : undefined;
    },
    getSteeringMessages: answers(sc.steering, [], "steering", seen, raised),
    getFollowUpMessages: answers(sc.followUp, [], "followUp", seen, raised),
    // mule's retained boolean stop hook in finishTurn's place: true ends the run.
    finishTurn: stopHook(answers(sc.stop, false, "stop", seen, raised)),
    getApiKey: answers(sc.keys, undefined, "key", seen, raised),
    apiKey: sc.apiKey,
  };
  const tools = (sc.tools ?? []).map((t) => makeTool(t, plans, slots));
  // mule's input is the Agent's: a system prompt, a transcript and tools. As the Agent's state
  // does, a transcript that does not open with a system message gets the initial one.
  const messages = structuredClone(sc.messages);
  const initial = ai.createInitialSystemMessage(sc.systemPrompt ?? "You are a test.", tools.map(ai.toToolDeclaration));
  if (messages.length > 0 && messages[0].role !== "system" && initial) messages.unshift(initial);
  const context = { messages, tools };
  const failOn = sc.listenerRaises;
  const abortOn = sc.abortOn;
  const controller = new AbortController();
  let seenOfType = 0;
  let abortSeen = 0;
  const emit = async (event) => {
    out(project(event));
    slots.onEvent(event);
    // The scripted stream and tools ignore the signal; 1.6.0's loop checks it before a tool runs.
    if (abortOn && event.type === abortOn.t && ++abortSeen === (abortOn.nth ?? 1)) {
      out({ t: "aborted_here" });
      controller.abort();
    }
    if (failOn && event.type === failOn.t && ++seenOfType === (failOn.nth ?? 1)) {
      origin = "listener";
      throw new Error("listener broke");
    }
  };
  let end;
  try {
    // The Agent's continue() check: a transcript of system messages alone has nothing to answer.
    if (messages.every((m) => m.role === "system")) throw new Error("Cannot continue: no messages in context");
    const loop = core
      .runAgentLoopContinue(context, config, emit, controller.signal, streamFn)
      .then((messages) => ({ kind: "returned", messages: strip(messages) }));
    const got = await Promise.race([loop, hung]);
    end = got === "hang" ? { kind: "hang" } : got;
  } catch (error) {
    end = { kind: "raised", origin, message: String(error?.message ?? error) };
  }
  out({ t: "scenario_end", id: sc.id, end });
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const sc = JSON.parse(line);
  const buffer = [];
  await runScenario(sc, (obj) => buffer.push(JSON.stringify(obj)));
  process.stdout.write(buffer.join("\n") + "\n");
}
