// Runs pi-ai 1.6.0's retry classifier and backoff for the differential tests in tests/test_retry.py.
// Protocol: one JSON case per stdin line, either {"text"} (is the error retryable?) or
// {"base", "cap", "attempt"} (retryDelayMs); one JSON result per stdout line.
// {"settings": true} answers pi-coding-agent 1.6.0's retry settings defaults.
import { createInterface } from "node:readline";
import { isRetryableAssistantError, retryDelayMs } from "../../node/node_modules/@earendil-works/pi-ai/dist/utils/retry.js";
import { SETTINGS_DEFAULTS } from "../../node/node_modules/@earendil-works/pi-coding-agent/dist/core/settings-defaults.js";

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const c = JSON.parse(line);
  let result;
  if (c.settings) {
    result = SETTINGS_DEFAULTS.retry;
  } else if (typeof c.text === "string") {
    result = isRetryableAssistantError({ role: "assistant", stopReason: "error", errorMessage: c.text });
  } else {
    const policy = { enabled: true, maxRetries: 3, baseDelayMs: c.base };
    if (c.cap !== undefined) policy.maxAgentDelayMs = c.cap;
    result = retryDelayMs(policy, c.attempt);
  }
  process.stdout.write(JSON.stringify({ result }) + "\n");
}
