"""mule._fast_init: the cheaper constructions give the objects the classes' own calls give."""

from __future__ import annotations

import inspect

import attrs
import pytest

from mule._fast_init import fast_init, maker, replacer, setters
from mule.effects import MessageUpdate
from mule.pi import TextContent, TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent
from tests.core.kit import assistant


def test_made_and_constructed_delta_events_are_the_same() -> None:
    """`maker(cls)(fields...)` is `cls(**fields)`: same type, same fields, still frozen."""
    partial = assistant(TextContent(text="ab"))
    for cls in (TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent):
        made = maker(cls)(2, "ab", partial)
        built = cls(content_index=2, delta="ab", partial=partial)
        assert type(made) is cls
        assert made == built
        assert (made.content_index, made.delta, made.partial) == (2, "ab", partial)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            made.delta = "x"  # type: ignore[misc]


def test_fast_init_keeps_the_signature_attrs_wrote() -> None:
    """Keyword-only fields stay keyword-only, aliases stay the parameter names."""
    sig = inspect.signature(TextDeltaEvent.__init__)
    assert list(sig.parameters) == ["self", "content_index", "delta", "partial"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in list(sig.parameters.values())[1:])
    with pytest.raises(TypeError):
        TextDeltaEvent(1, "a", None)  # type: ignore[call-arg, arg-type]
    assert list(inspect.signature(MessageUpdate.__init__).parameters)[1:] == [
        "run",
        "turn",
        "message",
        "value",
        "event",
    ]


def test_classes_whose_init_does_more_are_refused() -> None:
    """A default, a validator, a converter or a post-init hook: attrs' __init__ stays."""

    @attrs.frozen
    class WithDefault:
        a: int = 1

    @attrs.frozen
    class WithValidator:
        a: int = attrs.field(validator=attrs.validators.instance_of(int))

    @attrs.frozen
    class WithPostInit:
        a: int

        def __attrs_post_init__(self) -> None:
            pass

    for cls in (WithDefault, WithValidator, WithPostInit):
        with pytest.raises(TypeError, match="does more than set its fields"):
            fast_init(cls)
        with pytest.raises(TypeError, match="does more than set its fields"):
            maker(cls)


def test_setters_set_the_slots_of_the_fields_named_in_order() -> None:
    """`setters(cls, *aliases)` writes each field's slot; other aliases or order are refused."""
    partial = assistant(TextContent(text="ab"))
    set_index, set_delta, set_partial = setters(TextDeltaEvent, "content_index", "delta", "partial")
    made = object.__new__(TextDeltaEvent)
    set_index(made, 2)
    set_delta(made, "ab")
    set_partial(made, partial)
    assert made == TextDeltaEvent(content_index=2, delta="ab", partial=partial)
    for wrong in (("delta", "content_index", "partial"), ("content_index", "delta")):
        with pytest.raises(TypeError, match="fields"):
            setters(TextDeltaEvent, *wrong)

    @attrs.frozen
    class WithDefault:
        a: int = 1

    with pytest.raises(TypeError, match="does more than set its fields"):
        setters(WithDefault, "a")


def test_a_maker_with_defaults_takes_every_field() -> None:
    """`maker(cls, defaults=True)` accepts defaults and makes what the full keyword call makes."""

    @attrs.frozen
    class WithDefaults:
        a: int
        b: tuple[int, ...] = ()
        c: dict[str, int] = attrs.field(factory=dict)
        d: str | None = attrs.field(default=None, kw_only=True)

    made = maker(WithDefaults, defaults=True)(1, (2,), {"x": 3}, "d")
    assert type(made) is WithDefaults
    assert made == WithDefaults(1, (2,), {"x": 3}, d="d")
    with pytest.raises(TypeError):
        maker(WithDefaults, defaults=True)(1)  # every field is given
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.a = 2  # type: ignore[misc]


def test_a_replacer_is_evolve_for_one_field() -> None:
    """`replacer(cls, name)(obj, v)` is `attrs.evolve(obj, name=v)`; `obj` is left as it was."""

    @attrs.frozen
    class Options:
        a: int = 1
        b: str | None = None
        c: tuple[int, ...] = attrs.field(default=(), kw_only=True)

    before = Options(2, "x", c=(3,))
    after = replacer(Options, "b")(before, "y")
    assert type(after) is Options
    assert after == attrs.evolve(before, b="y")
    assert before == Options(2, "x", c=(3,))
    both = replacer(Options, "c", "a")(before, (4,), 5)
    assert both == attrs.evolve(before, a=5, c=(4,))
    with pytest.raises(TypeError, match="no field"):
        replacer(Options, "nope")
