"""Turns: open one, inject pending messages, start the model attempt, end it, poll."""

from __future__ import annotations

from collections.abc import Sequence

from attrs import evolve

from mule.effects import _make as make
from mule.effects._limits import reached
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
from mule.effects._txn import _complete, _Txn
from mule.pi import AssistantMessage, Message, ToolResultMessage


def _open_turn(t: _Txn) -> None:
    t.turn = t.ident("turn", t.cfg.run)
    t.cmds.append(make.turn_start(t.cfg.run, t.turn))


def _turn_body(t: _Txn, pending: Sequence[Message]) -> None:
    """One pass of Pi's inner loop: open a turn (after the first), inject, call the model."""
    if not t.first_turn:
        _open_turn(t)
    t.first_turn = False
    turn = t.current_turn()
    for m in pending:
        mid = t.ident("message", turn)
        t.cmds.append(make.message_start(t.cfg.run, turn, mid, m))
        t.cmds.append(make.message_end(t.cfg.run, turn, mid, m))
    if pending:
        t.context += tuple(pending)
        t.new += tuple(pending)
    _attempt(t, 1)


def _on_poll(t: _Txn, phase: Polling, messages: tuple[Message, ...]) -> None:
    if phase.kind == "steering":
        if t.first_turn or messages or t.more:
            _turn_body(t, messages)
        elif t.cfg.has_follow_up:
            t.phase = Polling("follow_up")
            t.cmds.append(ASK_FOLLOW_UP)
        else:
            _complete(t)
    elif messages:
        _turn_body(t, messages)
    else:
        _complete(t)


def _end_turn(
    t: _Txn, message: AssistantMessage, results: tuple[ToolResultMessage, ...], more: bool
) -> None:
    t.cmds.append(make.turn_end(t.cfg.run, t.current_turn(), message, results))
    t.turns += 1
    if more or t.cfg.has_steering or t.cfg.has_follow_up:
        # A limit stops the run only where another turn could start.
        limit = reached(t.cfg.limits, t.turns, t.usage)
        if limit is not None:
            t.limit = limit
            _complete(t)
            return
    if t.cfg.has_stop:
        t.phase = AwaitingStop(more)
        turn = MuleCompletedTurn(message, results, t.context, t.new)
        t.cmds.append(AskStop(turn))
    else:
        _after_stop(t, more)


def _after_stop(t: _Txn, more: bool) -> None:
    t.more = more
    if t.cfg.has_steering:
        t.phase = Polling("steering")
        t.cmds.append(ASK_STEERING)
    elif more:
        _turn_body(t, ())
    elif t.cfg.has_follow_up:
        t.phase = Polling("follow_up")
        t.cmds.append(ASK_FOLLOW_UP)
    else:
        _complete(t)


def _attempt(t: _Txn, attempt: int) -> None:
    if t.cfg.has_key_hook:
        t.phase = ResolvingKey(attempt)
        t.cmds.append(ResolveKey(t.cfg.model.provider))
    else:
        _call_model(t, attempt, None)


def _call_model(t: _Txn, attempt: int, key: str | None) -> None:
    cfg = t.cfg
    turn = t.current_turn()
    t.cmds.append(make.model_prompt(cfg.run, turn, attempt, cfg.system_prompt))
    options = cfg.stream_options
    if key:
        options = evolve(options, api_key=key)
    context = make.context(t.context, cfg.system_prompt, cfg.descriptors)
    t.phase = Streaming(attempt, turn, t.ident("message", turn), started=False)
    t.cmds.append(CallModel(context, options))
