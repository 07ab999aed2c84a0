// Regenerates mule's golden wire fixtures from the real Pi 1.6.0 packages in node/node_modules.
//
//   node tests/golden/generate.mjs [output-dir]
//
// Every value below is produced by Pi itself (its faux provider through a Models collection,
// agentLoop, calculateCost, createAssistantMessageDiagnostic, the generated model catalogue),
// serialised with JSON.stringify exactly as Pi would put it on the wire. The clocks (Date.now and
// the monotonic performance.now that times responses and tools) are pinned and stream chunking is
// fixed so that reruns give identical files.

import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const OUT = process.argv[2] ?? HERE; // tests pass a scratch directory to check for drift
// Pi is installed under <repo>/node, not next to this script, so import it by path.
const PI = join(HERE, "..", "..", "node", "node_modules", "@earendil-works");
const load = (pkg, file = "index.js") => import(pathToFileURL(join(PI, pkg, "dist", file)).href);
const { agentLoop } = await load("pi-agent-core");
const {
	calculateCost,
	createAssistantMessageDiagnostic,
	createInitialSystemMessage,
	createModels,
	fauxAssistantMessage,
	fauxProvider,
	fauxText,
	fauxThinking,
	fauxToolCall,
	toToolDeclaration,
} = await load("pi-ai");
const { MODELS } = await load("pi-ai", "models.generated.js");
const { arr, int, num, obj, opt, str } = await load("pi-schema");

const EPOCH = 1767225600000; // 2026-01-01T00:00:00Z
let tick = 0;
Date.now = () => EPOCH + tick++;
let monotonic = 0;
performance.now = () => (monotonic += 7); // every measured span is a multiple of 7 ms

const wire = (value) => JSON.parse(JSON.stringify(value));
const write = (name, value) => {
	writeFileSync(join(OUT, name), `${JSON.stringify(value, null, 1)}\n`);
	console.log(`wrote ${name}`);
};

const IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";

const faux = fauxProvider({
	api: "faux",
	provider: "faux",
	// A macrotask per chunk: the consumer serialises each event before the partial moves on.
	tokensPerSecond: 1e9,
	tokenSize: { min: 2, max: 2 },
	models: [
		{ id: "faux-1", name: "Faux One", cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 } },
		{ id: "faux-reasoner", reasoning: true, input: ["text"] },
	],
});
const model = faux.getModel();
const models = createModels();
models.setProvider(faux.provider);

// ---------------------------------------------------------------- streams (AssistantMessageEvent)

const streams = [];
const messages = [];
const contexts = [];

async function record(name, response, { context, options } = {}) {
	faux.setResponses(response === undefined ? [] : [response]);
	const ctx = context ?? {
		systemPrompt: "You are terse.",
		messages: [{ role: "user", content: "hello", timestamp: Date.now() }],
	};
	const events = [];
	const stream = models.streamSimple(model, ctx, { ...options, sessionId: "golden" });
	for await (const event of stream) {
		events.push(wire(event));
		if (options?.abortAfter && events.length === options.abortAfter) options.controller.abort();
	}
	const final = await stream.result();
	streams.push({ name, events });
	messages.push({ name: `${name}: final`, message: wire(final) });
	contexts.push({ name, context: wire(ctx) });
}

await record("text", fauxAssistantMessage("Hello there, how can I help?", { responseId: "resp_01" }));
await record(
	"thinking with signatures",
	fauxAssistantMessage([
		{ type: "thinking", thinking: "Let me think about it.", thinkingSignature: "sig-abc==" },
		{ type: "thinking", thinking: "[Reasoning redacted]", thinkingSignature: "opaque-payload", redacted: true },
		{ type: "text", text: "Done thinking.", textSignature: '{"v":1,"id":"msg_1","phase":"final_answer"}' },
	]),
);
await record(
	"tool calls",
	fauxAssistantMessage(
		[
			fauxText("Calling tools."),
			fauxToolCall("read", { path: "/tmp/a.txt", lines: [1, 2, 3] }, { id: "call_1" }),
			{ ...fauxToolCall("search", { q: "ünïcödé \"quoted\"", deep: { n: 1.5, ok: true, none: null } }, { id: "call_2" }), thoughtSignature: "g-sig" },
			fauxToolCall("noargs", {}, { id: "call_3" }),
		],
		{ stopReason: "toolUse" },
	),
);
await record("length", fauxAssistantMessage("truncated", { stopReason: "length" }));
await record(
	"provider error after content",
	fauxAssistantMessage([fauxThinking("hmm"), fauxText("partial")], {
		stopReason: "error",
		errorMessage: "503 Service Unavailable",
	}),
);
await record("no response queued (error without start)", undefined);
await record("factory throws", () => {
	throw new Error("429 Too Many Requests");
});
{
	const controller = new AbortController();
	controller.abort();
	await record("aborted before start", fauxAssistantMessage("never"), {
		options: { signal: controller.signal },
	});
}
{
	const controller = new AbortController();
	await record("aborted mid-stream", fauxAssistantMessage("one two three four five six seven eight"), {
		options: { signal: controller.signal, controller, abortAfter: 4 },
	});
}
await record(
	"diagnostics and response model",
	() => {
		const message = fauxAssistantMessage("ok", { responseId: "resp_diag" });
		const err = new Error("socket hang up");
		err.code = "ECONNRESET";
		err.stack = "Error: socket hang up\n    at golden (generate.mjs)"; // no machine paths
		const odd = { name: "HttpError", message: "bad", code: 502 };
		message.responseModel = "faux-1-2026-01-01";
		message.diagnostics = [
			createAssistantMessageDiagnostic("transport_retry", err, { attempt: 1, url: "http://localhost:0" }),
			createAssistantMessageDiagnostic("http_error", odd),
			createAssistantMessageDiagnostic("note", "a plain string"),
		];
		return message;
	},
);
await record(
	"rich context",
	fauxAssistantMessage("seen"),
	{
		context: {
			systemPrompt: "sys",
			messages: [
				{ role: "user", content: [{ type: "text", text: "look" }, { type: "image", data: IMAGE, mimeType: "image/png" }], timestamp: Date.now() },
			],
			tools: [
				{
					name: "read",
					description: "Read a file",
					parameters: obj({ path: str({ description: "file" }), lines: opt(arr(int())) }),
				},
			],
		},
	},
);

// ---------------------------------------------------------------- agent loop (messages with tool results)

async function runLoop(name, responses, tools, prompt) {
	faux.setResponses(responses);
	// The transcript starts with its system message (the prompt and the tools), as the Agent makes it.
	const system = createInitialSystemMessage("Use tools.", tools.map(toToolDeclaration));
	const context = { messages: [system], tools };
	const config = { model, convertToLlm: (m) => m, sessionId: "golden-loop" };
	let request = 0;
	// Each request's TranscriptContext, as the loop hands it to the stream function.
	const streamFn = (m, c, o) => {
		contexts.push({ name: `${name}: request ${++request}`, context: wire(c) });
		return models.streamSimple(m, c, o);
	};
	const stream = agentLoop([prompt], context, config, undefined, streamFn);
	const updates = [];
	for await (const event of stream) {
		if (event.type === "message_update") updates.push(wire(event.assistantMessageEvent));
	}
	const produced = await stream.result();
	produced.forEach((message, i) => messages.push({ name: `${name}: ${i} ${message.role}`, message: wire(message) }));
	streams.push({ name: `${name}: loop updates`, events: updates });
}

const tools = [
	{
		name: "read",
		label: "Read",
		description: "Read a file",
		parameters: obj({ path: str() }),
		execute: async (_id, args) => ({
			content: [{ type: "text", text: `contents of ${args.path}` }, { type: "image", data: IMAGE, mimeType: "image/png" }],
			details: { path: args.path, bytes: 12, tags: ["a", "b"], nested: { ok: true, nothing: null } },
		}),
	},
	{
		name: "boom",
		label: "Boom",
		description: "Always fails",
		parameters: obj({}),
		execute: async () => {
			throw new Error("kaboom");
		},
	},
	{
		name: "measure",
		label: "Measure",
		description: "Structured output, its own usage, an error without throwing",
		parameters: obj({ n: num() }),
		outputSchema: { type: "object", properties: { n: { type: "number" } } },
		execute: async (_id, args) => ({
			content: [{ type: "text", text: `measured ${args.n}` }],
			details: { n: args.n },
			structuredContent: { n: args.n, unit: "cm" },
			usage: {
				input: 10,
				output: 5,
				cacheRead: 0,
				cacheWrite: 0,
				totalTokens: 15,
				cost: { input: 0.1, output: 0.2, cacheRead: 0, cacheWrite: 0, total: 0.30000000000000004, totalFromProvider: true },
			},
			isError: args.n < 0,
		}),
	},
	{
		name: "plain",
		label: "Plain",
		description: "Details are a string",
		parameters: obj({ n: num() }),
		execute: async (_id, args) => ({ content: [], details: `n=${args.n}` }),
	},
];

await runLoop(
	"loop",
	[
		fauxAssistantMessage(
			[
				fauxToolCall("read", { path: "a.txt" }, { id: "t1" }),
				fauxToolCall("boom", {}, { id: "t2" }),
				fauxToolCall("missing", { x: 1 }, { id: "t3" }),
				fauxToolCall("plain", { n: "7" }, { id: "t4" }),
				fauxToolCall("plain", { n: "not a number" }, { id: "t5" }),
				fauxToolCall("measure", { n: 3 }, { id: "t6" }),
				fauxToolCall("measure", { n: -1 }, { id: "t7" }),
			],
			{ stopReason: "toolUse" },
		),
		fauxAssistantMessage("All done."),
	],
	tools,
	{ role: "user", content: [{ type: "text", text: "go" }, { type: "image", data: IMAGE, mimeType: "image/jpeg" }], timestamp: Date.now() },
);

// ---------------------------------------------------------------- models and cost

const catalogue = Object.values(MODELS).flatMap((byId) => Object.values(byId));
const modelFixtures = [...faux.models.map((m) => ({ name: `faux ${m.id}`, model: wire(m) }))];
const seen = new Set();
for (const m of catalogue) {
	const features = Object.keys(m).join("+");
	const costFeatures = Object.keys(m.cost).join("+");
	const key = `${m.api}|${features}|${costFeatures}`;
	if (seen.has(key)) continue;
	seen.add(key);
	modelFixtures.push({ name: `${m.provider}/${m.id}`, model: wire(m) });
}

// Compact rows [price, tokens, cost] for every distinct price in the catalogue: the model's cost
// object as Pi writes it (tiers included), [input, output, cacheRead, cacheWrite, cacheWrite1h]
// (null: no 1h split), and the cost Pi computed, in its key order.
const usages = [
	{ input: 1234, output: 567, cacheRead: 89, cacheWrite: 10 },
	{ input: 987654, output: 123457, cacheRead: 2500000, cacheWrite: 33333 },
	{ input: 150000, output: 2000, cacheRead: 60000, cacheWrite: 9000, cacheWrite1h: 4000 },
];
const prices = new Map();
for (const m of catalogue) prices.set(JSON.stringify(m.cost), m.cost);
const costs = [];
for (const price of prices.values()) {
	for (const tokens of usages) {
		const usage = { ...tokens, totalTokens: 0, cost: {} };
		calculateCost({ ...model, cost: price }, usage);
		costs.push([
			wire(price),
			[tokens.input, tokens.output, tokens.cacheRead, tokens.cacheWrite, tokens.cacheWrite1h ?? null],
			wire(usage.cost),
		]);
	}
}
// The faux final messages carry zero cost; price one with Pi's own calculateCost.
{
	const last = structuredClone(messages.find((m) => m.name === "text: final").message);
	calculateCost(model, last.usage);
	messages.push({ name: "text: priced", message: wire(last) });
}

write("streams.json", streams);
write("messages.json", messages);
write("contexts.json", contexts);
write("models.json", modelFixtures);
writeFileSync(join(OUT, "costs.json"), `[\n${costs.map((row) => JSON.stringify(row)).join(",\n")}\n]\n`);
console.log("wrote costs.json");
