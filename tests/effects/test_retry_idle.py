"""Section 6 scenarios 23-26, 28 and 33: retries, retry-after, the idle watchdog, API keys."""

from __future__ import annotations

import math

import anyio
import anyio.lowlevel
import pytest
from returns.result import Failure, Result

from mule.effects import MessageEnd, MessageStart, MessageUpdate, ModelPrompt, MuleError
from mule.pi import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEventStream,
    Model,
    RetryPolicy,
    StreamOptions,
    TranscriptContext,
)
from mule.pi.scripted import Reply, ScriptedModel, Text, error_reply, reply
from tests.effects.kit import (
    MODEL,
    KeyHook,
    Recorder,
    Root,
    make_input,
    model_of,
    of_type,
    project,
    run_root,
    text_of,
)

pytestmark = pytest.mark.anyio

OK_TEXT = ["MS", "MU", "MU", "MU", "ME(stop)"]
SLACK_MS = 2.0  # timer granularity: a sleep may wake a hair before its nominal deadline


def gap(rec: Recorder, first: str, then: str, nth: int = 0) -> float:
    """Return the milliseconds between the nth `first` and the next `then` event."""
    proj = project(rec.events)
    i = [k for k, p in enumerate(proj) if p == first][nth]
    j = proj.index(then, i)
    return rec.times[j] - rec.times[i]


# -- 23-25: retry ---------------------------------------------------------------------------------


async def test_s23_retry_after_a_transient_error(root: Root) -> None:
    """23: 503 then ok: MP(1) MS ME(error) [>= base] MP(2) ...; the failure is never committed."""
    model = model_of(error_reply("503 Service Unavailable"), reply("ok"))
    rec = Recorder()
    inp = make_input(model, retry=RetryPolicy(True, 2, 10))
    ran = await run_root(root, inp, rec)
    assert ran.proj == [
        "RS",
        "TS",
        "MP(1)",
        "MS",
        "ME(error)",
        "MP(2)",
        *OK_TEXT,
        "TE()",
        "RE(completed)",
    ]
    assert gap(rec, "ME(error)", "MP(2)") >= 10 - SLACK_MS
    out = ran.ok
    assert [m.stop_reason for m in out.messages if type(m) is AssistantMessage] == ["stop"]
    assert model.calls[1][1].messages == model.calls[0][1].messages
    # Both attempts belong to the same turn, each with its own message identity.
    starts = of_type(ran.events, MessageStart)
    assert starts[0].turn is starts[1].turn
    assert starts[0].message != starts[1].message
    assert [p.attempt for p in of_type(ran.events, ModelPrompt)] == [1, 2]


async def test_s24_retries_exhausted(root: Root) -> None:
    """24: always 429 with maxRetries 2: three attempts, then RE(failed) with the last error."""
    model = model_of(*(error_reply(f"429 rate limited #{i}") for i in range(3)))
    ran = await run_root(root, make_input(model, retry=RetryPolicy(True, 2, 1)))
    assert ran.proj == [
        "RS",
        "TS",
        *("MP(1)", "MS", "ME(error)"),
        *("MP(2)", "MS", "ME(error)"),
        *("MP(3)", "MS", "ME(error)"),
        "TE()",
        "RE(failed)",
    ]
    err = ran.failed
    assert err.phase == "model"
    assert err.message == "429 rate limited #2"
    assert err.cause == of_type(ran.events, MessageEnd)[-1].value
    assert len(model.calls) == 3


async def test_s24_backoff_doubles(root: Root) -> None:
    """24: base 50 with 3 retries waits at least 50, 100 and 200 ms."""
    model = model_of(*(error_reply("429") for _ in range(4)))
    rec = Recorder()
    ran = await run_root(root, make_input(model, retry=RetryPolicy(True, 3, 50)), rec)
    assert ran.failed.phase == "model"
    assert [p.attempt for p in of_type(ran.events, ModelPrompt)] == [1, 2, 3, 4]
    for nth, want in enumerate((50, 100, 200)):
        assert gap(rec, "ME(error)", f"MP({nth + 2})", nth) >= want - SLACK_MS


@pytest.mark.parametrize(
    ("message", "policy"),
    [
        ("insufficient_quota (429)", RetryPolicy(True, 3, 1)),
        ("429", None),
        ("429", RetryPolicy(False, 3, 1)),
        ("429", RetryPolicy(True, 0, 1)),
        ("invalid request: bad schema", RetryPolicy(True, 3, 1)),
    ],
    ids=["non-retryable", "no-policy", "disabled", "zero-retries", "not-transient"],
)
async def test_s25_no_retry(root: Root, message: str, policy: RetryPolicy | None) -> None:
    """25: a non-retryable error, or no/disabled policy: one attempt, RE(failed)."""
    asked: list[AssistantMessage] = []

    def retry_after(m: AssistantMessage) -> float | None:
        asked.append(m)
        return 1.0

    model = model_of(error_reply(message), reply("never"))
    ran = await run_root(root, make_input(model, retry=policy, retry_after_ms=retry_after))
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(error)", "TE()", "RE(failed)"]
    assert ran.failed.message == message
    assert asked == []  # consulted only once a retry is decided


async def test_s25_aborted_message_is_never_retried(root: Root) -> None:
    """An "aborted" stop without cancellation is a model failure (A19), not retried."""
    model = model_of(Reply(stop_reason="aborted", error_message="503 gone"), reply("never"))
    ran = await run_root(root, make_input(model, retry=RetryPolicy(True, 3, 1)))
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(aborted)", "TE()", "RE(failed)"]
    assert ran.failed.phase == "model"
    assert len(model.calls) == 1


# -- 26: retry-after ----------------------------------------------------------------------------


async def test_s26_retry_after_extends_the_backoff(root: Root) -> None:
    """26: retryAfterMs 80 with base 1 waits >= 80 ms; the hook sees the failed message."""
    asked: list[AssistantMessage] = []

    def retry_after(m: AssistantMessage) -> float | None:
        asked.append(m)
        return 80.0

    model = model_of(error_reply("503"), reply("ok"))
    rec = Recorder()
    inp = make_input(model, retry=RetryPolicy(True, 2, 1), retry_after_ms=retry_after)
    ran = await run_root(root, inp, rec)
    assert ran.ok.status == "completed"
    assert gap(rec, "ME(error)", "MP(2)") >= 80 - SLACK_MS
    assert [m.error_message for m in asked] == ["503"]
    assert asked[0] == of_type(ran.events, MessageEnd)[0].value


@pytest.mark.parametrize("value", [math.nan, None, -5.0, math.inf, 0.0, 3])
async def test_s26_unusable_retry_after_keeps_the_backoff(root: Root, value: float | None) -> None:
    """26: NaN, None, negative, infinite or small values leave the policy's backoff in force."""
    model = model_of(error_reply("503"), reply("ok"))
    rec = Recorder()
    inp = make_input(model, retry=RetryPolicy(True, 2, 40), retry_after_ms=lambda m: value)
    ran = await run_root(root, inp, rec)
    assert ran.ok.status == "completed"
    assert gap(rec, "ME(error)", "MP(2)") >= 40 - SLACK_MS


@pytest.mark.parametrize("how", ["raises", "not-a-number"])
async def test_s26_retry_after_failure_is_a_control_error(root: Root, how: str) -> None:
    """A raising (or non-numeric) retryAfterMs hook fails the run with MuleError(control)."""
    boom = RuntimeError("no idea")

    def retry_after(m: AssistantMessage) -> float | None:
        if how == "raises":
            raise boom
        return "soon"  # type: ignore[return-value]

    model = model_of(error_reply("503"), reply("never"))
    inp = make_input(model, retry=RetryPolicy(True, 2, 1), retry_after_ms=retry_after)
    ran = await run_root(root, inp)
    err = ran.failed
    assert err.phase == "control"
    if how == "raises":
        assert err.cause is boom
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(error)", "RE(failed)"]
    assert len(model.calls) == 1


# -- 28: the idle watchdog ------------------------------------------------------------------------


async def test_s28_idle_after_start_fails(root: Root) -> None:
    """28: idle 50 ms, the stream stalls after `start`: ME(error, idle timeout), RE(failed)."""
    model = model_of(Reply(blocks=(Text(("a",)),), stall_after=2))
    ran = await run_root(root, make_input(model, model_stream_idle_timeout_ms=50))
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "MU", "ME(error)", "TE()", "RE(failed)"]
    final = of_type(ran.events, MessageEnd)[0].value
    assert type(final) is AssistantMessage
    assert final.stop_reason == "error"
    assert final.error_message == "Model stream idle timeout: no provider event for 50 ms"
    # Synthesised from the last partial seen.
    assert final.content == of_type(ran.events, MessageUpdate)[-1].value.content
    err = ran.failed
    assert err.phase == "model"
    assert "idle timeout" in err.message
    assert err.cause == final
    # The attempt's signal was aborted so the provider stops too.
    signal = model.calls[0][2].signal
    assert signal is not None
    assert signal.aborted


async def test_s28_idle_with_retry_tries_again(root: Root) -> None:
    """28: with a retry policy the idle timeout is retryable: MP(2) follows."""
    model = model_of(Reply(blocks=(Text(("a",)),), stall_after=1), reply("ok"))
    inp = make_input(model, model_stream_idle_timeout_ms=50, retry=RetryPolicy(True, 1, 1))
    ran = await run_root(root, inp)
    assert ran.proj == [
        "RS",
        "TS",
        "MP(1)",
        "MS",
        "ME(error)",
        "MP(2)",
        *OK_TEXT,
        "TE()",
        "RE(completed)",
    ]
    first, second = (c[2].signal for c in model.calls)
    assert first is not None
    assert second is not None
    assert first.aborted
    assert not second.aborted  # each attempt has its own signal


async def test_s28_idle_covers_time_to_first_event(root: Root) -> None:
    """The timer starts at the call: no first event in time gives an empty error message."""
    rec = Recorder()
    model = model_of(Reply(blocks=(Text(("a",)),), delay_ms=2000))
    ran = await run_root(root, make_input(model, model_stream_idle_timeout_ms=60), rec)
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(error)", "TE()", "RE(failed)"]
    final = of_type(ran.events, MessageEnd)[0].value
    assert type(final) is AssistantMessage
    assert final.content == ()
    assert (final.api, final.provider, final.model) == (MODEL.api, MODEL.provider, MODEL.id)
    assert final.usage.total_tokens == 0
    assert gap(rec, "MP(1)", "ME(error)") >= 60 - SLACK_MS


async def test_s28_idle_covers_a_slow_stream_function(root: Root) -> None:
    """An async stream function that does not return in time also trips the watchdog."""
    entered = anyio.Event()

    async def slow(
        model: Model, ctx: TranscriptContext, opts: StreamOptions
    ) -> AssistantMessageEventStream:
        entered.set()
        await anyio.sleep(10)
        raise AssertionError("the watchdog should have fired")

    inp = make_input(None, stream=slow, model_stream_idle_timeout_ms=50)
    with anyio.fail_after(5):  # a hang guard, not a timing assertion
        ran = await run_root(root, inp)
    assert entered.is_set()
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(error)", "TE()", "RE(failed)"]
    assert "idle timeout" in ran.failed.message


async def test_s28_idle_timer_restarts_on_every_event(root: Root) -> None:
    """Steady events slower in total than the timeout, but each within it, complete normally."""
    model = model_of(Reply(blocks=(Text(tuple("abcdefghij")),), delay_ms=25))
    rec = Recorder()
    ran = await run_root(root, make_input(model, model_stream_idle_timeout_ms=250), rec)
    assert ran.ok.status == "completed"
    assert text_of(ran.ok.message) == "abcdefghij"
    assert rec.times[-1] - rec.times[2] >= 250  # longer than one timeout in total


async def test_idle_fractional_timeout_text(root: Root) -> None:
    """The idle message prints the configured milliseconds."""
    model = model_of(Reply(stall_after=0))
    ran = await run_root(root, make_input(model, model_stream_idle_timeout_ms=30.5))
    assert ran.failed.message == "Model stream idle timeout: no provider event for 30.5 ms"


# -- 33: API keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "sent"), [("", "fallback"), (None, "fallback"), ("k1", "k1")])
async def test_s33_resolve_api_key_per_attempt(root: Root, answer: str | None, sent: str) -> None:
    """33: resolveApiKey runs before every attempt with the provider; "" and None fall back."""
    rec = Recorder()
    seen_at: list[int] = []

    async def resolve(provider: str, signal: AbortSignal) -> Result[str | None, MuleError]:
        seen_at.append(len(rec.events))
        return await hook(provider, signal)

    hook = KeyHook(answer)
    model = model_of(error_reply("503"), reply("ok"))
    inp = make_input(
        model,
        retry=RetryPolicy(True, 1, 1),
        resolve_api_key=resolve,
        stream_options=StreamOptions(api_key="fallback", temperature=0.5),
    )
    ran = await run_root(root, inp, rec)
    assert ran.ok.status == "completed"
    assert hook.seen == [MODEL.provider, MODEL.provider]
    assert [c[2].api_key for c in model.calls] == [sent, sent]
    assert all(c[2].temperature == 0.5 for c in model.calls)  # other options pass through
    # Each resolution happens right before its model_prompt.
    proj = ran.proj
    assert [proj[i] for i in seen_at] == ["MP(1)", "MP(2)"]


async def test_s33_no_hook_uses_stream_options(root: Root) -> None:
    """Without a hook the stream options' key is sent unchanged (with the attempt signal added)."""
    model = model_of(reply("ok"))
    await run_root(root, make_input(model, stream_options=StreamOptions(api_key="plain")))
    opts = model.calls[0][2]
    assert opts.api_key == "plain"
    assert opts.signal is not None


@pytest.mark.parametrize("how", ["raises", "failure"])
async def test_s33_key_hook_failure_is_a_model_error(root: Root, how: str) -> None:
    """A raising resolveApiKey fails the run with MuleError(model) before any model_prompt."""
    boom = RuntimeError("vault sealed")

    async def resolve(provider: str, signal: AbortSignal) -> Result[str | None, MuleError]:
        if how == "raises":
            raise boom
        return Failure(MuleError("model", "no key", boom))

    model = model_of(reply("never"))
    ran = await run_root(root, make_input(model, resolve_api_key=resolve))
    assert ran.failed.phase == "model"
    assert ran.failed.cause is boom
    assert ran.proj == ["RS", "TS", "RE(failed)"]
    assert model.calls == []


async def test_stream_function_may_be_async(root: Root) -> None:
    """A stream function returning an awaitable stream works like a plain one."""
    inner = ScriptedModel([reply("hi")])

    async def stream(
        model: Model, ctx: TranscriptContext, opts: StreamOptions
    ) -> AssistantMessageEventStream:
        await anyio.lowlevel.checkpoint()
        return inner(model, ctx, opts)

    ran = await run_root(root, make_input(None, stream=stream))
    assert ran.proj == ["RS", "TS", "MP(1)", *OK_TEXT, "TE()", "RE(completed)"]
    assert text_of(ran.ok.message) == "hi"
