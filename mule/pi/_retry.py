"""Pi's retry policy and its classifier of transient provider errors (newer pi-ai `retry.ts`)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, final

from attrs import field, frozen

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
)

# Unanchored on purpose, like Pi: a bare "500" also matches inside "15000 tokens".
_RETRYABLE_PATTERNS: tuple[str, ...] = (
    # load and HTTP status
    "overloaded",
    "rate.?limit",
    "too many requests",
    "429",
    "500",
    "502",
    "503",
    "504",
    "524",
    "service.?unavailable",
    "server.?error",
    "internal.?error",
    # gateways
    "provider.?returned.?error",
    "exceeded request buffer limit while retrying upstream",
    # network and transport
    "network.?error",
    "connection.?error",
    "connection.?refused",
    "connection.?lost",
    "other side closed",
    "fetch failed",
    "getaddrinfo",
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
    # truncated streams
    "ended without",
    "stream ended before message_stop",
    "stream ended before a terminal response event",
    "http2 request did not get a response",
    # a server-requested wait longer than the provider's cap
    "retry delay",
    # explicit advice from the provider
    "you can retry your request",
    "try your request again",
    "please retry your request",
    # gRPC
    "ResourceExhausted",
)


def _compile(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(patterns), re.IGNORECASE)


@lru_cache(maxsize=1)
def _families() -> tuple[re.Pattern[str], re.Pattern[str]]:
    # Compiled with the first failed call, not with `import mule` (a few ms; most runs never
    # retry): the account limits, then the retryable families.
    return _compile(_NON_RETRYABLE_PATTERNS), _compile(_RETRYABLE_PATTERNS)


@lru_cache(maxsize=64)
def _overrides(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    # Policies are frozen and few, so each distinct override set compiles once.
    return _compile(patterns) if patterns else None


def _check_overrides(_: Any, __: Any, value: tuple[str, ...]) -> None:
    _overrides(value)  # raises re.error at construction, not at the first failed call


@final
@frozen
class RetryPolicy:
    """Bounded retries of a failed assistant call with exponential backoff (no jitter, no cap).

    `max_retries` counts retries only (0 = a single call). `non_retryable_overrides` are regex
    sources; an error message matching one is retryable even when it names an account limit.

    Attributes:
        enabled: Whether failed attempts are retried at all.
        max_retries: Retries after the first attempt (0: a single call).
        base_delay_ms: The first backoff; each retry doubles it.
        non_retryable_overrides: Regex sources: an error message matching one is retried
            even when it names an account limit.

    """

    enabled: bool
    max_retries: int
    base_delay_ms: float
    non_retryable_overrides: tuple[str, ...] = field(default=(), validator=_check_overrides)


PI_CODING_AGENT_RETRY_DEFAULTS = RetryPolicy(enabled=True, max_retries=3, base_delay_ms=2000)
"""pi-coding-agent's `retry` settings: three retries after 2 s, 4 s and 8 s."""


def is_retryable_assistant_error(
    message: AssistantMessage, policy: RetryPolicy | None = None
) -> bool:
    """Return whether a failed assistant message looks like a transient provider error.

    Only `stopReason "error"` with a non-empty `error_message` qualifies; context overflow is not
    singled out (callers handle it first if they compact).

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
    if non_retryable.search(text):
        return False
    return retryable.search(text) is not None


def retry_delay_ms(policy: RetryPolicy, retry_number: int) -> float:
    """Return the backoff before retry `retry_number` (1-based): base * 2**(k-1).

    >>> retry_delay_ms(PI_CODING_AGENT_RETRY_DEFAULTS, 3)
    8000.0
    """
    if retry_number < 1:
        raise ValueError(f"retry numbers start at 1, got {retry_number}")
    return policy.base_delay_ms * float(2 ** (retry_number - 1))


__all__ = [
    "PI_CODING_AGENT_RETRY_DEFAULTS",
    "RetryPolicy",
    "is_retryable_assistant_error",
    "retry_delay_ms",
]
