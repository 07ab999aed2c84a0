// Test extension for the page: one tool that opens every dialog kind, and one that streams
// progress and then fails. No imports, so pi loads it from anywhere.

export default function (pi: any) {
	pi.registerTool({
		name: "survey",
		label: "Survey",
		description: "Ask the user four questions.",
		parameters: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
		async execute(_id: string, params: any, _signal: any, _onUpdate: any, ctx: any) {
			const ok = await ctx.ui.confirm("Go ahead?", `Survey about ${params.topic}`);
			const colour = await ctx.ui.select("Pick a colour", ["red", "green", "blue"]);
			const name = await ctx.ui.input("Your name", "name here");
			const notes = await ctx.ui.editor("Notes", "line one");
			const text = `ok=${ok} colour=${colour} name=${name} notes=${JSON.stringify(notes)}`;
			return { content: [{ type: "text", text }], details: {} };
		},
	});
	pi.registerTool({
		name: "flaky",
		label: "Flaky",
		description: "Report progress, then fail.",
		parameters: { type: "object", properties: { steps: { type: "number" } }, required: ["steps"] },
		async execute(_id: string, params: any, _signal: any, onUpdate: any) {
			for (let i = 1; i <= params.steps; i++) {
				onUpdate?.({ content: [{ type: "text", text: `step ${i} of ${params.steps}` }], details: {} });
				await new Promise((r) => setTimeout(r, 150));
			}
			throw new Error("disk quota exceeded on /data");
		},
	});
}
