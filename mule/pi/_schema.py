"""Tool schemas compiled by `jsonschema`, extended with the dialect TypeBox also accepts.

Draft 2020-12 plus array-form `items`, `additionalItems`, `dependencies`, TypeBox's tolerant
`multipleOf`, patterns matched by RE2 in linear time (`_pattern`), and a `$ref` that cannot be
resolved failing its schema instead of raising (Pi compiles union members on their own, away
from the root's `$defs`).

`jsonschema` is imported when the first schema is compiled (`pi_validator()`, `formats()`,
`check_schema`), not with `mule.pi`: a run without tools never pays for it (~85 ms).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from mule.pi._js_values import is_js_number, to_double
from mule.pi._pattern import jsonschema_keywords

if TYPE_CHECKING:
    from jsonschema import FormatChecker
    from jsonschema.exceptions import ValidationError

# A schema as Pi sees it: usually a mapping; `true`/`false` are schemas too.
Schema: TypeAlias = Any


def _items(
    validator: Any, items: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array"):
        return
    if isinstance(items, list):  # draft-7 tuple form, which TypeBox still honours
        for index, (item, sub) in enumerate(zip(instance, items, strict=False)):
            yield from validator.descend(item, sub, path=index, schema_path=index)
        return
    start = len(schema.get("prefixItems", []))
    for index in range(start, len(instance)):
        yield from validator.descend(instance[index], items, path=index)


def _additional_items(
    validator: Any, extra: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array") or not isinstance(schema.get("items"), list):
        return
    for index in range(len(schema["items"]), len(instance)):
        yield from validator.descend(instance[index], extra, path=index)


def _dependencies(
    validator: Any, dependencies: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    from jsonschema.exceptions import ValidationError

    for key, dependency in dependencies.items():
        if key not in instance:
            continue
        if isinstance(dependency, list):
            for each in dependency:
                if each not in instance:
                    yield ValidationError(f"{each!r} is a dependency of {key!r}")
        else:
            yield from validator.descend(instance, dependency, schema_path=key)


def _ref(
    validator: Any, ref: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    # TypeBox treats a `$ref` it cannot resolve as a failing schema, not as a fatal error. That
    # matters for union members, which Pi compiles on their own, away from the root's `$defs`.
    from jsonschema.exceptions import ValidationError
    from referencing.exceptions import Unresolvable

    try:
        errors = list(validator._validate_reference(ref=ref, instance=instance))
    except (Unresolvable, LookupError, AttributeError, TypeError):  # also a pointer through a list
        errors = [ValidationError(f"cannot resolve $ref {ref!r}")]
    yield from errors


def multiple_of(divisor: Any, value: Any) -> bool:
    """Return TypeBox's tolerant `multipleOf` (JS `%` is `math.fmod`)."""
    if not is_js_number(value):
        return True
    if to_double(value).is_integer() and divisor != 0 and math.fmod(1 / divisor, 1) == 0:
        return True
    try:
        mod = math.fmod(value, divisor)
    except (ValueError, ZeroDivisionError):
        return False
    return bool(min(abs(mod), abs(mod - divisor), abs(mod + divisor)) < 1e-10)


def _multiple_of_keyword(
    validator: Any, divisor: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    from jsonschema.exceptions import ValidationError

    if not multiple_of(divisor, instance):
        yield ValidationError(f"{instance!r} is not a multiple of {divisor}")


@functools.cache
def pi_validator() -> Any:
    """Return the validator class of Pi's dialect (built, and jsonschema imported, on first use)."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        {
            "items": _items,
            "additionalItems": _additional_items,
            "dependencies": _dependencies,
            "multipleOf": _multiple_of_keyword,
            "$ref": _ref,
            **jsonschema_keywords(),  # every pattern matched in linear time (RE2)
        },
    )


@functools.cache
def formats() -> FormatChecker:
    """Return the format checker every tool schema shares (made on first use)."""
    from jsonschema import FormatChecker

    return FormatChecker()


@functools.cache
def _schema_formats() -> FormatChecker:
    """Return the meta-schema's format checker, without `regex`.

    Python's `re` is not how patterns are read: they are JavaScript, judged by `_pattern` when
    the schema's bounds are checked.
    """
    from jsonschema import FormatChecker

    return FormatChecker(formats=[f for f in FormatChecker.checkers if f != "regex"])


def check_schema(schema: Schema) -> str | None:
    """Return why `schema` is not a JSON Schema (Draft 2020-12, or Draft 7 for tuples), or None."""
    if not isinstance(schema, Mapping | bool):
        return f"expected a JSON object, got {type(schema).__name__}"
    from jsonschema import Draft7Validator, Draft202012Validator
    from jsonschema.exceptions import best_match

    modern = best_match(
        Draft202012Validator(
            Draft202012Validator.META_SCHEMA, format_checker=_schema_formats()
        ).iter_errors(schema)
    )
    if modern is None:
        return None
    legacy = best_match(
        Draft7Validator(Draft7Validator.META_SCHEMA, format_checker=_schema_formats()).iter_errors(
            schema
        )
    )
    return None if legacy is None else modern.message


__all__ = ["Schema", "check_schema", "formats", "multiple_of", "pi_validator"]
