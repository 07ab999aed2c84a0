// Matches schema patterns with pi-schema 1.6.0's own `sharedRegex` (ECMAScript, `u` flag, falling back
// to no flag) for the differential tests in tests/test_pattern.py.
// Protocol: one JSON case per stdin line, {"pattern", "texts"}; one JSON result per stdout line:
// {"ok": true, "matches": [bool, ...]} or {"ok": false, "message": the SyntaxError's message}.
import { createInterface } from "node:readline";
import { sharedRegex } from "../../node/node_modules/@earendil-works/pi-schema/dist/shared.js";

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const { pattern, texts } = JSON.parse(line);
  let result;
  try {
    const re = sharedRegex(pattern);
    result = { ok: true, matches: texts.map((text) => re.test(text)) };
  } catch (error) {
    result = { ok: false, message: String(error?.message ?? error) };
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}
