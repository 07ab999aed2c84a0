r"""Pi's retry policy and its classifier of transient provider errors (pi-ai 1.6.0 `utils/retry`).

The two pattern families are kept as Pi writes them (JavaScript regex sources, tested with the
`i` flag and without `u`) and translated once into Python regexes that match the same texts:
case is folded for ASCII letters only (JS's non-Unicode `i` never folds a non-ASCII character
onto an ASCII one, as Python's Unicode `IGNORECASE` does with the long s and the Kelvin sign), `.`
excludes JS's four line terminators, `\s`/`\S` are JS's whitespace set, and an astral character
is two UTF-16 units.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Final, final

from attrs import field, frozen

from mule._fields_repr import fields_repr
from mule.pi._messages import AssistantMessage

# Account limits: retrying cannot help, so these win over the retryable families below.
_NON_RETRYABLE_PATTERNS: tuple[str, ...] = (
    # usage limits (OpenCode Go / free tier)
    "GoUsageLimitError",
    "FreeUsageLimitError",
    "Monthly usage limit reached",
    "available balance",
    # quota, budget and billing exhaustion
    "insufficient_quota",
    "out of budget",
    "quota exceeded",
    "billing",
    # ChatGPT subscription and workspace usage limits (reset after hours)
    "subscription_sharing_usage_limit_exceeded",
    "subscription_sharing_workplace_individual_usage_limit_exceeded",
    # Zhipu / Z.ai plan limit, error code 1308 (sent as a 429)
    '"code"\\s*:\\s*"?1308(?![0-9])',
)

_RETRYABLE_PATTERNS: tuple[str, ...] = (
    # load
    "overloaded",
    "server_busy",
    "servers are currently busy",
    "currently experiencing high demand",
    "model is at capacity",
    "rate.?limit",
    "too many requests",
    # HTTP status codes, as whole tokens only (not inside "15000 tokens" or "req_5002")
    "(?<![a-z0-9])(?:429|500|502|503|504|520|524)(?![a-z0-9])",
    "service.?(?:is.?)?(?:temporarily.?)?unavailable",
    "server.?error",
    "internal.?error",
    # gateways and their upstreams
    "provider.?returned.?(?:an.?)?error",
    "exceeded request buffer limit while retrying upstream",
    "unable to forward upstream",
    "upstream.?request.?failed",
    "upstream_stream_read_error",
    "stream was interrupted",
    "http/?2 stream failed",
    # network and transport
    "network.?error",
    "connection.?error",
    "connection.?refused",
    "connection.?lost",
    "connection.?closed",
    "other side closed",
    "fetch failed",
    "request to \\S+ failed, reason:",
    "getaddrinfo",
    "(?<![a-z0-9_])(?:ECONNRESET|ECONNABORTED|ECONNREFUSED|ETIMEDOUT|EPIPE)(?![a-z0-9_])",
    "connection reset by peer",
    "ENOTFOUND",
    "EAI_AGAIN",
    "upstream.?connect",
    "reset before headers",
    "socket hang up",
    "socket connection was closed",
    "timed? out",
    "timeout",
    "terminated",
    "websocket.?closed",
    "websocket.?error",
    "websocket.?connection.?limit.?reached",
    # truncated streams
    "ended without",
    "stream ended before message_stop",
    "stream ended before a terminal response event",
    "http2 request did not get a response",
    "stream disconnected before completion",
    "cut short after the reply had begun",
    "pending stream has been canceled",
    # a server-requested wait longer than the provider's cap
    "retry delay",
    # explicit advice from the provider
    "you can retry your request",
    "try your request again",
    "please retry your request",
    # gRPC
    "ResourceExhausted",
    # ChatGPT subscription usage temporarily unavailable
    "subscription_sharing_usage_unavailable",
    "subscription_sharing_user_unavailable",
)

DEFAULT_MAX_AGENT_DELAY_MS: Final = 60_000
"""Pi's cap on one backoff (`maxAgentDelayMs`, pi-ai's `DEFAULT_MAX_AGENT_RETRY_DELAY_MS`)."""

_MAX_SAFE_INTEGER: Final = 2**53 - 1
# ECMAScript WhiteSpace and LineTerminator: JS's `\s` (Python's differs: \x1c-\x1f, \ufeff).
_JS_SPACE: Final = (
    "\\t\\n\\v\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
_JS_DOT: Final = "[^\\n\\r\\u2028\\u2029]"


def _from_js(source: str) -> str:
    r"""Return a Python regex source matching what JS `new RegExp(source, "i")` matches.

    Covers what Pi's families use: escapes, classes, groups, lookarounds, `.`, `\s`, `\S`.
    """
    out: list[str] = []
    i, in_class = 0, False
    while i < len(source):
        ch = source[i]
        if ch == "\\" and i + 1 < len(source):
            nxt = source[i + 1]
            if nxt == "s":
                out.append(_JS_SPACE if in_class else f"[{_JS_SPACE}]")
            elif nxt == "S" and not in_class:
                out.append(f"[^{_JS_SPACE}]")
            else:
                out.append(source[i : i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
        elif ch == "]" and in_class:
            in_class = False
        elif ch == "." and not in_class:
            ch = _JS_DOT
        out.append(ch)
        i += 1
    return "".join(out)


def _compile(patterns: tuple[str, ...]) -> re.Pattern[str]:
    # re.ASCII: case folds for ASCII letters only, as JS's `i` without `u` does for these sources.
    return re.compile(_from_js("|".join(patterns)), re.IGNORECASE | re.ASCII)


@lru_cache(maxsize=1)
def _families() -> tuple[re.Pattern[str], re.Pattern[str]]:
    # Compiled with the first failed call, not with `import mule` (a few ms; most runs never
    # retry): the account limits, then the retryable families.
    return _compile(_NON_RETRYABLE_PATTERNS), _compile(_RETRYABLE_PATTERNS)


@lru_cache(maxsize=64)
def _overrides(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    # mule's own extension (Python regex sources); policies are frozen and few, so each
    # distinct override set compiles once.
    return re.compile("|".join(patterns), re.IGNORECASE) if patterns else None


def _check_overrides(_: Any, __: Any, value: tuple[str, ...]) -> None:
    _overrides(value)  # raises re.error at construction, not at the first failed call


@final
@frozen
class RetryPolicy:
    """Bounded retries of a failed assistant call with exponential backoff, capped (no jitter).

    `max_retries` counts retries only (0 = a single call). `non_retryable_overrides` are regex
    sources; an error message matching one is retryable even when it names an account limit.

    Attributes:
        enabled: Whether failed attempts are retried at all.
        max_retries: Retries after the first attempt (0: a single call).
        base_delay_ms: The first backoff; each retry doubles it.
        non_retryable_overrides: Regex sources: an error message matching one is retried
            even when it names an account limit.
        max_agent_delay_ms: The longest one backoff lasts (Pi's `maxAgentDelayMs`, 60 s).

    """

    enabled: bool
    max_retries: int
    base_delay_ms: float
    non_retryable_overrides: tuple[str, ...] = field(default=(), validator=_check_overrides)
    max_agent_delay_ms: float = field(default=DEFAULT_MAX_AGENT_DELAY_MS, kw_only=True)

    __repr__ = fields_repr


PI_CODING_AGENT_RETRY_DEFAULTS = RetryPolicy(
    enabled=True, max_retries=3, base_delay_ms=2000, max_agent_delay_ms=DEFAULT_MAX_AGENT_DELAY_MS
)
"""pi-coding-agent 1.6.0's `retry` settings: retries after 2 s, 4 s and 8 s, none over 60 s."""


def is_retryable_assistant_error(
    message: AssistantMessage, policy: RetryPolicy | None = None
) -> bool:
    """Return whether a failed assistant message looks like a transient provider error.

    Only `stopReason "error"` with a non-empty `error_message` qualifies; context overflow is not
    singled out (callers handle it first if they compact). Status codes count only as whole
    tokens: "503" is retryable, "15000 tokens" and "req_5002" are not.

    >>> from mule.pi._messages import ZERO_USAGE
    >>> msg = AssistantMessage((), "api", "p", "m", ZERO_USAGE, "error", 0, error_message="503")
    >>> is_retryable_assistant_error(msg)
    True
    """
    text = message.error_message
    if message.stop_reason != "error" or not text:
        return False
    if policy is not None and policy.non_retryable_overrides:
        forced = _overrides(policy.non_retryable_overrides)
        if forced is not None and forced.search(text):
            return True
    non_retryable, retryable = _families()
    units = _utf16_units(text)
    if non_retryable.search(units):
        return False
    return retryable.search(units) is not None


def _utf16_units(text: str) -> str:
    """Return `text` as JS sees it without `u`: an astral character is two surrogate units."""
    if text.isascii() or max(text) <= "\uffff":
        return text
    return "".join(
        ch
        if ord(ch) <= 0xFFFF
        else chr(0xD800 + ((ord(ch) - 0x10000) >> 10)) + chr(0xDC00 + ((ord(ch) - 0x10000) & 0x3FF))
        for ch in text
    )


def retry_delay_ms(policy: RetryPolicy, retry_number: int) -> float:
    """Return the backoff before retry `retry_number` (1-based): base * 2**(k-1), capped.

    The cap is `policy.max_agent_delay_ms` (60 s by default, as Pi's `maxAgentDelayMs`).

    >>> tuple(retry_delay_ms(PI_CODING_AGENT_RETRY_DEFAULTS, k) for k in (3, 6, 40))
    (8000.0, 60000.0, 60000.0)
    """
    if retry_number < 1:
        raise ValueError(f"retry numbers start at 1, got {retry_number}")
    try:
        delay = policy.base_delay_ms * float(2 ** (retry_number - 1))
    except OverflowError:
        delay = float(_MAX_SAFE_INTEGER)
    if not delay <= _MAX_SAFE_INTEGER:  # also NaN: Pi's unsafe-integer fallback
        delay = float(_MAX_SAFE_INTEGER)
    return min(delay, float(policy.max_agent_delay_ms))


__all__ = [
    "DEFAULT_MAX_AGENT_DELAY_MS",
    "PI_CODING_AGENT_RETRY_DEFAULTS",
    "RetryPolicy",
    "is_retryable_assistant_error",
    "retry_delay_ms",
]
