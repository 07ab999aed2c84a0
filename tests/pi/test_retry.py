"""Retry classification and backoff, against pi-ai 1.6.0's `retryAssistantCall` classifier.

Tests the private rule `mule.pi._retry`'s pattern lists (`_RETRYABLE_PATTERNS`,
`_NON_RETRYABLE_PATTERNS`): exactly pi-ai's.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mule.pi import (
    PI_CODING_AGENT_RETRY_DEFAULTS,
    ZERO_USAGE,
    AssistantMessage,
    RetryPolicy,
    StopReason,
    is_retryable_assistant_error,
    retry_delay_ms,
)
from mule.pi._retry import _NON_RETRYABLE_PATTERNS, _RETRYABLE_PATTERNS
from tests.node import NodeLines


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


@pytest.mark.parametrize(
    ("text", "retryable"),
    [
        ("prompt has 15000 tokens, limit 8192", False),
        ("id req_5002", False),
        ("id req_4290", False),
        ("HTTP429", False),
        ("status=429;", True),
        ("(503)", True),
        ("error 520: unknown", True),
        ("timeout_5000ms", True),  # the word, not the number
    ],
)
def test_status_codes_match_only_as_whole_tokens(text: str, retryable: bool) -> None:
    """1.6.0 reads a status code only when no letter or digit touches it (#11057)."""
    assert is_retryable_assistant_error(failed(text)) is retryable


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
    """The coding-agent defaults wait 2 s, 4 s, 8 s, never over 60 s; the policy is frozen."""
    assert RetryPolicy(True, 3, 2000) == PI_CODING_AGENT_RETRY_DEFAULTS
    assert PI_CODING_AGENT_RETRY_DEFAULTS.max_agent_delay_ms == 60_000
    assert [retry_delay_ms(PI_CODING_AGENT_RETRY_DEFAULTS, k) for k in (1, 2, 3, 5, 6, 2000)] == [
        2000,
        4000,
        8000,
        32000,
        60000,
        60000,
    ]
    assert retry_delay_ms(RetryPolicy(True, 3, 0.5), 2) == 1.0
    assert retry_delay_ms(RetryPolicy(True, 3, 100, max_agent_delay_ms=250), 3) == 250
    with pytest.raises(ValueError, match="start at 1"):
        retry_delay_ms(PI_CODING_AGENT_RETRY_DEFAULTS, 0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        PI_CODING_AGENT_RETRY_DEFAULTS.max_retries = 5  # type: ignore[misc]


# --- Differential: pi-ai 1.6.0's isRetryableAssistantError and retryDelayMs in Node ---

REPO = Path(__file__).resolve().parents[2]
PI_AI = REPO / "node/node_modules/@earendil-works/pi-ai/dist/utils/retry.js"
PI_AGENT_SESSION = (
    REPO / "node/node_modules/@earendil-works/pi-coding-agent/dist/core/agent-session.js"
)
NODE_SCRIPT = REPO / "tests/node/retry.mjs"


class PiRetry(NodeLines):
    """A long-lived Node process answering pi-ai 1.6.0's retry questions, one JSON line each."""

    def __init__(self) -> None:
        super().__init__(NODE_SCRIPT)

    def ask(self, question: object) -> Any:
        """Return Node's answer to one case."""
        return super().ask(question)["result"]


@pytest.fixture(scope="module")
def pi() -> Iterator[PiRetry]:
    """Start one Node process for the module."""
    if not PI_AI.exists():
        pytest.skip("node/node_modules is missing (run ./dev setup)")
    runner = PiRetry()
    yield runner
    runner.close()


# Error texts as providers, gateways and transports write them (status lines, JSON bodies, SDK
# and Node errors), and near misses.
PROVIDER_TEXTS = [
    *RETRYABLE,
    *NON_RETRYABLE,
    '500: {"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
    '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
    '{"type":"error","error":{"type":"api_error","message":"Connection closed."}}',
    "429 You exceeded your current quota, please check your plan and billing details.",
    '429 {"error":{"code":"1308","message":"Usage limit reached for 5 hour"}}',
    '429 {"error":{"code":1308,"message":"limit"}}',
    '{"code": 13080}',
    "520: Web server is returning an unknown error",
    "The model is at capacity. Please try again later.",
    "Servers are currently busy",
    "We are currently experiencing high demand",
    "server_busy",
    "The service is temporarily unavailable",
    "The upstream provider returned an error",
    "upstream request failed",
    "upstream_stream_read_error",
    "Unable to forward upstream response",
    "stream was interrupted",
    "HTTP/2 stream failed",
    "read ECONNRESET",
    "write EPIPE",
    "connect ETIMEDOUT 1.2.3.4:443",
    "MY_ECONNRESET_FLAG",
    "ECONNRESETS",
    "request to https://oauth2.googleapis.com/token failed, reason: ",
    "Connection reset by peer",
    "Responses websocket connection limit reached",
    "websocket_connection_limit_reached",
    "stream disconnected before completion: stream closed before response.completed",
    "Claude Code's stream from Anthropic was cut short after the reply had begun",
    "ERR_HTTP2_STREAM_CANCEL: The pending stream has been canceled",
    "subscription_sharing_usage_limit_exceeded",
    "subscription_sharing_usage_unavailable",
    "subscription_sharing_user_unavailable",
    "400 invalid_request_error: max_tokens: 15000 > 8192",
    "req_5002: bad request",
    "Invalid API key",
    "401 Unauthorized",
    "404 model not found",
    "prompt is too long: 200500 tokens > 200000 maximum",
    "rate\rlimit",
    "rate\u2028limit",
    "rate limit",
    "\u017fervice unavailable",
    "RATE\u212aLIMIT",
    "rate\U0001f600limit",
    "connection\U0001f600closed",
    "timed\xa0out",
    "request to\x1cx failed, reason:",
    "request to \ufeff failed, reason:",
]


@pytest.mark.pi
@pytest.mark.parametrize("text", PROVIDER_TEXTS)
def test_classifier_matches_pi_on_provider_texts(pi: PiRetry, text: str) -> None:
    """Each provider text gets 1.6.0's verdict."""
    assert is_retryable_assistant_error(failed(text)) is pi.ask({"text": text})


FRAGMENTS = st.sampled_from(
    [
        *("429", "500", "5", "00", "520", "_", "-", "x", "0", " ", ".", ":", '"', "\n", "\r"),
        *("\u2028", "\xa0", "\ufeff", "\x1c", "\u017f", "\u212a", "\U0001f600", "\ud800"),
        *("billing", "quota", "timed", " out", "rate", "limit", "ECONNRESET", "EPIPE", "code"),
        *("1308", "connection", "closed", "request to ", "failed, reason:", "service", "is"),
        *("temporarily", "unavailable", "websocket", "ResourceExhausted", "HTTP/2 stream failed"),
    ]
)


@pytest.mark.pi
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40) | st.lists(FRAGMENTS, max_size=8).map("".join))
def test_classifier_matches_pi_on_generated_texts(pi: PiRetry, text: str) -> None:
    """On generated text (fragments of the families, separators, odd Unicode) the verdicts agree."""
    assert is_retryable_assistant_error(failed(text)) is (bool(text) and pi.ask({"text": text}))


@pytest.mark.pi
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from([0, 1, 2, 10, 250, 2000, 10**9]),
    cap=st.sampled_from([None, 0, 1, 5000, 60_000]),
    attempt=st.integers(1, 80),
)
def test_backoff_matches_pi(pi: PiRetry, base: int, cap: int | None, attempt: int) -> None:
    """The capped exponential backoff equals retryDelayMs for integral bases."""
    policy = RetryPolicy(True, 3, base)
    if cap is not None:
        policy = attrs.evolve(policy, max_agent_delay_ms=cap)
    case: dict[str, Any] = {"base": base, "attempt": attempt}
    if cap is not None:
        case["cap"] = cap
    assert retry_delay_ms(policy, attempt) == pi.ask(case)


@pytest.mark.pi
def test_defaults_are_the_coding_agents(pi: PiRetry) -> None:
    """PI_CODING_AGENT_RETRY_DEFAULTS are pi-coding-agent 1.6.0's retry settings defaults."""
    settings_ = pi.ask({"settings": True})
    ours = PI_CODING_AGENT_RETRY_DEFAULTS
    assert (ours.enabled, ours.max_retries, ours.base_delay_ms, ours.max_agent_delay_ms) == (
        settings_["enabled"],
        settings_["maxRetries"],
        settings_["baseDelayMs"],
        settings_["maxAgentDelayMs"],
    )


def _js_pattern_lists(source: str) -> list[list[str]]:
    """Return the string lists passed to each `buildProviderErrorPattern([...])` in retry.js."""
    lists = []
    for block in re.findall(r"buildProviderErrorPattern\(\[(.*?)\]\);", source, re.DOTALL):
        lines = (line.strip() for line in block.splitlines())
        lists.append(
            [ast.literal_eval(line.rstrip(",")) for line in lines if line.startswith(('"', "'"))]
        )
    return lists


@pytest.mark.skipif(not PI_AGENT_SESSION.exists(), reason="pi-coding-agent not installed")
def test_families_are_pi_16_coding_agents() -> None:
    """The coding agent classifies with pi-ai's families, and mule's lists are exactly those."""
    session = PI_AGENT_SESSION.read_text()
    assert re.search(r"return isRetryableAssistantError\(message\);", session)
    limits, retryable = _js_pattern_lists(PI_AI.read_text())
    assert list(_NON_RETRYABLE_PATTERNS) == limits
    assert list(_RETRYABLE_PATTERNS) == retryable
