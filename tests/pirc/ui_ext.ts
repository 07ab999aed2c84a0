// Test extension for mule's pi bridge tests: a dialog tool, a dialog command, a big-output tool.
// No imports, so pi loads it from anywhere; parameters are plain JSON Schema.

export default function (pi: any) {
	pi.registerTool({
		name: "ask_user",
		label: "Ask user",
		description: "Ask the user to confirm, then to pick a colour.",
		parameters: {
			type: "object",
			properties: { question: { type: "string" } },
			required: ["question"],
		},
		async execute(_id: string, params: any, _signal: any, _onUpdate: any, ctx: any) {
			const ok = await ctx.ui.confirm("Confirm?", params.question);
			const pick = await ctx.ui.select("Pick a colour", ["red", "green"]);
			return {
				content: [{ type: "text", text: `confirmed=${ok} pick=${pick ?? "none"}` }],
				details: {},
			};
		},
	});
	pi.registerCommand("askme", {
		description: "Ask for a confirmation, then report it (a slow person may answer).",
		handler: async (args: string, ctx: any) => {
			const ok = await ctx.ui.confirm("Sure?", args || "really?");
			ctx.ui.notify(`askme confirmed=${ok}`, "info");
		},
	});
	pi.registerTool({
		name: "big_output",
		label: "Big output",
		description: "Return a large text.",
		parameters: {
			type: "object",
			properties: { size: { type: "number" } },
			required: ["size"],
		},
		async execute(_id: string, params: any) {
			const text = "x".repeat(params.size) + "\u2028end";
			return { content: [{ type: "text", text }], details: {} };
		},
	});
}
