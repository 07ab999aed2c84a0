// Runs pi-ai 1.6.0's real validateToolArguments (pi-schema) for the differential tests in tests/test_validate.py.
// Protocol: one JSON case per stdin line, {"name", "schema", "args"}; one JSON result per stdout line:
// {"ok": true, "value": JSON.stringify(result, null, 2)} or {"ok": false, "message": error.message}.
import { createInterface } from "node:readline";
import { validateToolArguments } from "../../node/node_modules/@earendil-works/pi-ai/dist/utils/validation.js";

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const { name, schema, args } = JSON.parse(line);
  let result;
  try {
    const tool = { name, description: "", parameters: schema };
    const value = validateToolArguments(tool, { type: "toolCall", id: "c", name, arguments: args });
    result = { ok: true, value: JSON.stringify(value, null, 2) };
  } catch (error) {
    result = { ok: false, message: String(error?.message ?? error) };
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}
