"""Retry classification and backoff, against Pi's `retry.ts` families."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.pi._messages import ZERO_USAGE, AssistantMessage, StopReason
from mule.pi._retry import (
    _NON_RETRYABLE_PATTERNS,
    _RETRYABLE_PATTERNS,
    PI_CODING_AGENT_RETRY_DEFAULTS,
    RetryPolicy,
    is_retryable_assistant_error,
    retry_delay_ms,
)


def failed(text: str | None, stop: StopReason = "error") -> AssistantMessage:
    return AssistantMessage((), "api", "prov", "m", ZERO_USAGE, stop, 0, error_message=text)


RETRYABLE = [
    # load and status
    "overloaded_error: Overloaded",
    "Rate limit reached for requests",
    "rate_limit_error",
    "RATELIMIT",
    "Too Many Requests",
    "429",
    "HTTP 500",
    "502 Bad Gateway",
    "503 Service Unavailable",
    "504 Gateway Timeout",
    "524: a timeout occurred",
    "service_unavailable",
    "Internal Server Error",
    "server_error",
    "internal error",
    # gateways
    "Provider returned error",
    "exceeded request buffer limit while retrying upstream",
    # network
    "Network error",
    "connection error.",
    "Connection refused",
    "connection_lost",
    "other side closed",
    "TypeError: fetch failed",
    "getaddrinfo ENOTFOUND api.example.com",
    "ENOTFOUND",
    "EAI_AGAIN",
    "upstream connect error or disconnect/reset before headers",
    "reset before headers",
    "socket hang up",
    "The socket connection was closed unexpectedly",
    "Request timed out",
    "request time out",
    "Model stream idle timeout: no provider event for 50 ms",
    "terminated",
    "WebSocket closed 1006",
    "websocket_error",
    # truncated streams
    "request ended without sending any chunks",
    "Anthropic stream ended before message_stop",
    "stream ended before a terminal response event",
    "HTTP2 request did not get a response",
    # retry delay cap
    "Server requested retry delay of 120s, exceeding the cap",
    # advice
    "An error occurred. You can retry your request.",
    "Please try your request again later",
    "please retry your request",
    # gRPC
    "RESOURCEEXHAUSTED: out of capacity",
]

NON_RETRYABLE = [
    "GoUsageLimitError: weekly limit",
    "FreeUsageLimitError",
    "Monthly usage limit reached",
    "Enable available balance usage",
    "insufficient_quota (429)",
    "You are out of budget",
    "Quota exceeded for requests (rate limit)",
    "503: check your billing details",
]


@pytest.mark.parametrize("text", RETRYABLE)
def test_retryable_families_match(text: str) -> None:
    """Every retryable family from Pi's table classifies as retryable."""
    assert is_retryable_assistant_error(failed(text))


@pytest.mark.parametrize("text", NON_RETRYABLE)
def test_account_limits_are_not_retryable_even_with_a_status(text: str) -> None:
    """Account-limit families win over retryable words in the same message."""
    assert not is_retryable_assistant_error(failed(text))


@pytest.mark.parametrize(
    "text",
    [
        "Invalid API key",
        "prompt is too long: 2000 tokens > 1000 maximum",  # overflow is not excluded, nor matched
        "400 Bad Request: messages.0.content is empty",
        "Request was aborted",
    ],
)
def test_other_errors_are_not_retryable(text: str) -> None:
    """Errors outside every family are final."""
    assert not is_retryable_assistant_error(failed(text))


def test_bare_status_numbers_match_anywhere() -> None:
    """Pi's quirk is kept: a token count containing 500 reads as a server error."""
    assert is_retryable_assistant_error(failed("prompt has 15000 tokens, limit 8192"))
    assert is_retryable_assistant_error(failed("id req_4290"))


@pytest.mark.parametrize("stop", ["stop", "length", "toolUse", "aborted"])
def test_only_error_stop_reason_is_retryable(stop: StopReason) -> None:
    """Aborted and successful messages never retry, whatever their text says."""
    assert not is_retryable_assistant_error(failed("503 Service Unavailable", stop))


@pytest.mark.parametrize("text", [None, ""])
def test_missing_error_message_is_not_retryable(text: str | None) -> None:
    """An error without text gives the classifier nothing to match."""
    assert not is_retryable_assistant_error(failed(text))


def test_override_forces_retryable_over_account_limits() -> None:
    """A matching override makes even a quota error retryable; a non-matching one does not."""
    policy = RetryPolicy(True, 3, 10, non_retryable_overrides=("insufficient_QUOTA", "nope"))
    assert is_retryable_assistant_error(failed("insufficient_quota (429)"), policy)
    assert is_retryable_assistant_error(
        failed("Invalid API key"), RetryPolicy(True, 1, 1, ("api key",))
    )
    assert not is_retryable_assistant_error(failed("billing"), RetryPolicy(True, 1, 1, ("nope",)))
    # overrides still need an error with text
    assert not is_retryable_assistant_error(failed("billing", "aborted"), policy)


def test_invalid_override_fails_at_construction() -> None:
    """A malformed override pattern is reported when the policy is built."""
    with pytest.raises(re.error):
        RetryPolicy(True, 1, 1, ("(unclosed",))


def test_defaults_and_backoff() -> None:
    """The coding-agent defaults wait 2 s, 4 s, 8 s; the policy is frozen."""
    assert RetryPolicy(True, 3, 2000) == PI_CODING_AGENT_RETRY_DEFAULTS
    assert [retry_delay_ms(PI_CODING_AGENT_RETRY_DEFAULTS, k) for k in (1, 2, 3)] == [
        2000,
        4000,
        8000,
    ]
    assert retry_delay_ms(RetryPolicy(True, 3, 0.5), 2) == 1.0
    with pytest.raises(ValueError, match="start at 1"):
        retry_delay_ms(PI_CODING_AGENT_RETRY_DEFAULTS, 0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        PI_CODING_AGENT_RETRY_DEFAULTS.max_retries = 5  # type: ignore[misc]


WORDS = st.sampled_from(
    ["429", "5", "00", "billing", "timed", " out", "rate", "-", "limit", "x", " "]
)


@given(st.text(max_size=40) | st.lists(WORDS, max_size=6).map("".join))
def test_classifier_agrees_with_the_pattern_lists(text: str) -> None:
    """On arbitrary text the classifier is 'no limit pattern and some retryable pattern'."""

    def hit(patterns: tuple[str, ...]) -> bool:
        return any(re.search(p, text, re.IGNORECASE) for p in patterns)

    expected = bool(text) and not hit(_NON_RETRYABLE_PATTERNS) and hit(_RETRYABLE_PATTERNS)
    assert is_retryable_assistant_error(failed(text)) == expected


PI_AGENT_SESSION = (
    Path(__file__).parent.parent
    / "node/legacy/node_modules/@mariozechner/pi-coding-agent/dist/core/agent-session.js"
)


@pytest.mark.skipif(not PI_AGENT_SESSION.exists(), reason="pi-coding-agent not installed")
def test_every_pi_0731_coding_agent_family_is_still_retryable() -> None:
    """Each alternative of coding-agent 0.73.1's retry regex is in mule's retryable list."""
    source = PI_AGENT_SESSION.read_text()
    match = re.search(r"return /(overloaded\|[^/]+)/i\.test\(err\)", source)
    assert match is not None, "the 0.73.1 retry regex moved"
    assert set(match[1].split("|")) <= set(_RETRYABLE_PATTERNS)
