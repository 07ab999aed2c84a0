"""Turns: open one, inject pending messages, start the model attempt, end it, poll."""

from __future__ import annotations

from collections.abc import Sequence

from attrs import evolve

from mule.effects._lifecycle import MessageEnd, MessageStart, ModelPrompt, TurnEnd, TurnStart
from mule.effects._limits import LimitName, reached
from mule.effects._outcome import MuleCompletedTurn
from mule.effects._protocol import (
    ASK_FOLLOW_UP,
    ASK_STEERING,
    AskStop,
    CallModel,
    ResolveKey,
)
from mule.effects._state import (
    AwaitingStop,
    Polling,
    ResolvingKey,
    Streaming,
)
from mule.effects._txn import Txn, complete_run
from mule.pi import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    TranscriptContext,
    get_tool_state_changes,
)


def open_turn(t: Txn) -> None:
    t.turn = t.ident("turn", t.cfg.run)
    t.cmds.append(TurnStart(run=t.cfg.run, turn=t.turn))


def turn_body(t: Txn, pending: Sequence[Message]) -> None:
    """One pass of Pi's inner loop: open a turn (after the first), inject, call the model."""
    if not t.first_turn:
        open_turn(t)
    t.first_turn = False
    turn = t.current_turn()
    pending = _declare_tool_changes(t, pending)
    for m in pending:
        mid = t.ident("message", turn)
        t.cmds.append(MessageStart(run=t.cfg.run, turn=turn, message=mid, value=m))
        t.cmds.append(MessageEnd(run=t.cfg.run, turn=turn, message=mid, value=m))
    if pending:
        t.context += tuple(pending)
        t.new += tuple(pending)
    start_attempt(t, 1)


def _declare_tool_changes(t: Txn, pending: Sequence[Message]) -> Sequence[Message]:
    """Pi 1.6.0's declareToolChanges: make the transcript declare exactly the run's tools.

    The difference between the tools the transcript declares and the run's tools goes on the
    last pending system message (its own tool fields are intent and are replaced), or on a new
    system message put before the first pending message that is not one.
    """
    last = -1
    for i in range(len(pending) - 1, -1, -1):
        if type(pending[i]) is SystemMessage:
            last = i
            break
    baseline: Sequence[Message] = pending
    if last >= 0:
        baseline = [
            _with_changes(m, (), ()) if i == last else m  # type: ignore[arg-type]
            for i, m in enumerate(pending)
        ]
    t.replay = t.replay.advance(t.context)
    added, removed = get_tool_state_changes(
        t.replay.extend(baseline).tools, t.cfg.descriptors or ()
    )
    unchanged = not added and not removed
    if last >= 0:
        own = pending[last]
        assert type(own) is SystemMessage
        if unchanged and not own.tools_added and not own.tools_removed:
            return pending
        return [
            _with_changes(own, added, removed) if i == last else m for i, m in enumerate(baseline)
        ]
    if unchanged:
        return pending
    update = _with_changes(SystemMessage(content="", timestamp=t.clock), added, removed)
    at = next((i for i, m in enumerate(pending) if type(m) is not SystemMessage), len(pending))
    return [*pending[:at], update, *pending[at:]]


def _with_changes(
    message: SystemMessage, added: Sequence[object], removed: Sequence[object]
) -> SystemMessage:
    """Return the system message with its tool fields replaced (empty: the field left out)."""
    return evolve(
        message,
        tools_added=tuple(added) or None,  # type: ignore[arg-type]
        tools_removed=tuple(removed) or None,  # type: ignore[arg-type]
    )


def on_poll(t: Txn, phase: Polling, messages: tuple[Message, ...]) -> None:
    match phase.kind:
        case "steering":
            if t.first_turn or messages:
                turn_body(t, messages)
            elif t.more:
                # Pi 1.6.0 polls steering once more before the next turn when this poll was
                # empty: a message queued meanwhile lands in that turn.
                t.phase = Polling("steering_again")
                t.cmds.append(ASK_STEERING)
            elif t.cfg.has_follow_up:
                t.phase = Polling("follow_up")
                t.cmds.append(ASK_FOLLOW_UP)
            else:
                complete_run(t)
        case "steering_again":
            turn_body(t, messages)
        case "follow_up":
            if messages:
                turn_body(t, messages)
            else:
                complete_run(t)


def end_turn(
    t: Txn, message: AssistantMessage, results: tuple[ToolResultMessage, ...], more: bool
) -> None:
    """End a completed turn: the stop hook where Pi 1.6.0 calls finishTurn, then turn_end.

    A run a limit ends after this turn does not ask the hook: its answer could change nothing.
    """
    if t.cfg.has_stop and _limit(t, more, t.turns + 1) is None:
        t.phase = AwaitingStop(more, message, results)
        t.cmds.append(AskStop(MuleCompletedTurn(message, results, t.context, t.new)))
    else:
        turn_ended(t, message, results, more, stop=False)


def _limit(t: Txn, more: bool, turns: int) -> LimitName | None:
    """Return the limit that ends the run after `turns` turns, if any.

    A limit stops the run only where another turn could start.
    """
    if more or t.cfg.has_steering or t.cfg.has_follow_up:
        return reached(t.cfg.limits, turns, t.usage)
    return None


def turn_ended(
    t: Txn,
    message: AssistantMessage,
    results: tuple[ToolResultMessage, ...],
    more: bool,
    *,
    stop: bool,
) -> None:
    """Emit turn_end, then stop, or end at a limit, or poll / go on as Pi does."""
    t.cmds.append(
        TurnEnd(run=t.cfg.run, turn=t.current_turn(), message=message, tool_results=results)
    )
    t.turns += 1
    if stop:
        complete_run(t)
        return
    limit = _limit(t, more, t.turns)
    if limit is not None:
        t.limit = limit
        complete_run(t)
        return
    t.more = more
    if t.cfg.has_steering:
        t.phase = Polling("steering")
        t.cmds.append(ASK_STEERING)
    elif more:
        turn_body(t, ())
    elif t.cfg.has_follow_up:
        t.phase = Polling("follow_up")
        t.cmds.append(ASK_FOLLOW_UP)
    else:
        complete_run(t)


def _prompt(t: Txn) -> str:
    """Return the transcript's system prompt (replaying only the messages new since last time)."""
    t.replay = t.replay.advance(t.context)
    return t.replay.system_prompt


def start_attempt(t: Txn, attempt: int) -> None:
    if t.cfg.has_key_hook:
        t.phase = ResolvingKey(attempt)
        t.cmds.append(ResolveKey(t.cfg.model.provider))
    else:
        call_model(t, attempt, None)


def call_model(t: Txn, attempt: int, key: str | None) -> None:
    cfg = t.cfg
    turn = t.current_turn()
    # The prompt the model sees: the transcript's system messages replayed (pi-ai 1.6.0).
    t.cmds.append(
        ModelPrompt(
            run=cfg.run,
            turn=turn,
            attempt=attempt,
            system_prompt=_prompt(t),
        )
    )
    options = cfg.stream_options
    if key:
        options = evolve(options, api_key=key)
    context = TranscriptContext(messages=t.context)
    t.phase = Streaming(attempt, turn, t.ident("message", turn), started=False)
    t.cmds.append(CallModel(context, options))
