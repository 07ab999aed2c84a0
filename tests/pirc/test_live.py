"""The bridge against the REAL pi CLI, pointed at the fake OpenAI server on 127.0.0.1.

Each test starts one pi (cold start ~1-2 s) and runs several scenarios on it in sequence.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mule.effects import MessageStart, MessageUpdate, RunEnd, ToolExecutionEnd
from mule.pi import AssistantMessage, UserMessage, text_of
from mule.pirc import (
    AutoRetryEnd,
    AutoRetryStart,
    Bridge,
    BridgeEvent,
    ExtensionUIRequest,
    ProcessExited,
)
from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, openai_error, tool_call
from tests.pirc.helpers import HERE, assert_reaped, both_pis, config, make_home, pi_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.pi,
    pytest.mark.skipif(not pi_available(), reason="pi CLI not installed"),
]

EXT = str(HERE / "ui_ext.ts")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def dirs(fake: FakeOpenAI, tmp_path: Path) -> dict[str, str]:
    fake.reset()
    return make_home(tmp_path, fake.base_url)


def texts(ev: BridgeEvent) -> str:
    if isinstance(ev, ToolExecutionEnd):
        return "".join(getattr(b, "text", "") for b in ev.result.content)
    return ""


def user_texts(result_messages: Any) -> list[str]:
    return [text_of(m) for m in result_messages if isinstance(m, UserMessage)]


@pytest.mark.anyio
@pytest.mark.parametrize("pi", both_pis())
async def test_conversation_on_one_pi(fake: FakeOpenAI, dirs: dict[str, str], pi: str) -> None:
    """Text, built-in tool, steer, follow-up, abort, dialogs answered and cancelled, 200 KB."""
    (Path(dirs["work"]) / "a.txt").write_text("alpha\n")
    cfg = config(
        dirs,
        tools=("ls", "read", "ask_user", "big_output"),
        extensions=(EXT,),
        executable=pi,
    )
    async with Bridge(cfg) as b:
        # 1. plain text, with U+2028 inside the answer
        fake.push(chat_text("hi\u2028there", pieces=3))
        r = await b.run("hello")
        assert (r.outcome, r.text, r.attempts) == ("completed", "hi\u2028there", 1)

        # 2. pi's built-in ls tool on the work dir
        fake.push(chat_stream(calls=[tool_call("c1", "ls", {"path": "."})]), chat_text("listed"))
        seen: list[BridgeEvent] = []
        r = await b.run("list", on_event=seen.append)
        assert r.text == "listed"
        assert any("a.txt" in texts(e) for e in seen)

        # 3. steer while the first answer streams: it opens a new turn in the same run
        fake.push(chat_text("first", pieces=20, delay_ms=20), chat_text("steered"))
        steered = False

        async def steer(ev: BridgeEvent) -> None:
            nonlocal steered
            if isinstance(ev, MessageUpdate) and not steered:
                steered = True
                await b.steer("change course")

        r = await b.run("long", on_event=steer)
        assert r.outcome == "completed"
        assert r.text == "steered"
        assert "change course" in user_texts(r.messages)

        # 4. follow-up: delivered when the agent would stop
        fake.push(chat_text("one", pieces=20, delay_ms=20), chat_text("two"))
        sent = False

        async def follow(ev: BridgeEvent) -> None:
            nonlocal sent
            if isinstance(ev, MessageUpdate) and not sent:
                sent = True
                await b.follow_up("and then?")

        r = await b.run("start", on_event=follow)
        assert r.text == "two"
        assert "and then?" in user_texts(r.messages)

        # 5. abort mid-stream: cancelled, and pi stays usable
        fake.push(chat_text("z" * 400, pieces=200, delay_ms=20))
        aborted = False

        async def abort(ev: BridgeEvent) -> None:
            nonlocal aborted
            if isinstance(ev, MessageUpdate) and not aborted:
                aborted = True
                await b.abort()

        r = await b.run("ramble", on_event=abort)
        assert r.outcome == "cancelled"
        assert r.message is not None
        assert r.message.stop_reason == "aborted"

        # 6. an extension tool's confirm and select, answered
        ask = tool_call("c2", "ask_user", {"question": "ok?"})
        for answer, expected in (
            (True, "confirmed=true pick=green"),
            (None, "confirmed=false pick=none"),
        ):
            fake.push(chat_stream(calls=[ask]), chat_text("asked"))
            results: list[str] = []

            async def on_ui(
                ev: BridgeEvent, answer: bool | None = answer, results: list[str] = results
            ) -> None:
                if isinstance(ev, ExtensionUIRequest) and ev.expects_answer:
                    if answer is None:
                        await b.cancel_ui(ev.id)
                    elif ev.method == "confirm":
                        await b.respond_ui(ev.id, confirmed=answer)
                    else:
                        assert ev.options == ("red", "green")
                        await b.respond_ui(ev.id, value="green")
                if t := texts(ev):
                    results.append(t)

            r = await b.run("ask", on_event=on_ui)
            assert results == [expected]
            assert r.text == "asked"

        # 7. a 200 KB tool output: lines far beyond 64 KB pass through whole
        fake.push(chat_stream(calls=[tool_call("c3", "big_output", {"size": 200_000})]))
        fake.push(chat_text("big"))
        big: list[str] = []
        r = await b.run("big", on_event=lambda ev: big.append(texts(ev)) if texts(ev) else None)
        assert r.text == "big"
        assert len(big[0]) == 200_000 + 4
        assert big[0].endswith("\u2028end")
        assert b.stats.frames.oversize_lines == 0
        assert b.stats.frames.bad_lines == 0
        state = await b.get_state()
        assert state["isStreaming"] is False
        commands = await b.get_commands()
        assert isinstance(commands, list)
    assert b.returncode == 0


@pytest.mark.anyio
@pytest.mark.parametrize("pi", both_pis())
async def test_auto_retry_results(fake: FakeOpenAI, dirs: dict[str, str], pi: str) -> None:
    """A 500 then success completes with the retry's answer; exhausted retries fail once."""
    async with Bridge(config(dirs, no_tools=True, executable=pi)) as b:
        fake.push(openai_error(500, "boom"), chat_text("recovered"))
        seen: list[BridgeEvent] = []
        r = await b.run("go", on_event=seen.append)
        assert (r.outcome, r.text, r.attempts) == ("completed", "recovered", 2)
        assert [type(e) for e in seen if isinstance(e, AutoRetryStart | AutoRetryEnd)] == [
            AutoRetryStart,
            AutoRetryEnd,
        ]
        assert sum(isinstance(e, RunEnd) for e in seen) == 1

        fake.push(*[openai_error(500, "boom")] * 3)
        seen.clear()
        r = await b.run("go", on_event=seen.append)
        assert (r.outcome, r.attempts) == ("failed", 3)
        # pi 0.73.1 writes "500 boom"; 1.6.0 adds the body: '500: {"message":"boom",...}'
        assert r.error is not None
        assert r.error.startswith("500")
        assert "boom" in r.error
        assert isinstance(r.message, AssistantMessage)
        assert r.message.stop_reason == "error"
        ends = [e for e in seen if isinstance(e, RunEnd)]
        assert [e.outcome for e in ends] == ["failed"]
        assert seen[-1] is ends[0]


@pytest.mark.anyio
async def test_sigkill_mid_run_is_a_typed_failure(fake: FakeOpenAI, dirs: dict[str, str]) -> None:
    """A SIGKILLed pi while streaming: run() raises ProcessExited at once; the child is reaped."""
    fake.push(chat_stream(text="never finishes", then="stall"))
    b = Bridge(config(dirs, no_tools=True))
    async with b:

        def kill(ev: BridgeEvent) -> None:
            if isinstance(ev, MessageStart) and isinstance(ev.value, AssistantMessage):
                b.kill()

        with anyio.fail_after(20), pytest.raises(ProcessExited) as info:
            await b.run("go", on_event=kill)
        assert info.value.returncode == -9
    assert b.returncode == -9
    assert_reaped(b.pid)
