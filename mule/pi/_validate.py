r"""Pi's tool-argument gate: coerce a call's arguments against the tool's schema, then validate.

Mirrors pi-ai 0.73.1 `validateToolArguments` (`dist/utils/validation.js`) and the TypeBox 1.4
validator it compiles. A Python `Tool.parameters` is plain JSON, and TypeBox's own `Value.Convert`
pass is a no-op in Pi for plain JSON schemas (it acts only on in-memory TypeBox types), so only
Pi's JSON-Schema coercion applies; it is mirrored here.

Validity is decided by `jsonschema` (Draft 2020-12, extended with what TypeBox also accepts:
array-form `items`, `additionalItems`, `dependencies`, and TypeBox's tolerant `multipleOf`). The
error lines of a failure follow TypeBox's error walk (its keyword order, its cap of 8 errors per
context, its English messages), so the failure text matches Pi's line for line.

The gate is built from parts, each in its own module: JS value semantics (`_js_values`), Pi's
coercion (`_coerce`), the compiled jsonschema dialect (`_schema`), TypeBox's error walk
(`_error_walk`) and the failure text (`_error_text`).

Known divergences from Pi (outside what tool schemas normally use):
- `pattern`/`patternProperties` are JS `RegExp(p, "u")` translated to RE2 (`_pattern`, linear
  time): backreferences and lookaround are refused (`ToolSchemaError`); `format` uses
  jsonschema's format checker, whose set of known formats differs from TypeBox's registry.
- Error lines follow only local `$ref`s (`#`, `#/...`); for `$dynamicRef`, `$recursiveRef`,
  `unevaluatedItems` and `unevaluatedProperties` jsonschema still decides validity, but when the
  walk finds nothing the lines fall back to jsonschema's own paths and messages.
- JS `key in value` also sees inherited names ("toString", "constructor"); Python does not.
- Numbers are JS doubles: a coerced integral value within 2**53 comes back as `int`, otherwise as
  `float`; an `int` beyond 2**53 is printed (String(), "Received arguments") as the double JS sees.

The gate is total, unlike Pi's (whose JS engine has a deeper stack): whatever the schema and the
arguments, it returns or raises `ToolArgumentsError` or `ToolSchemaError`. Schemas are checked
once by `_schema_bounds` (depth, patterns, references that resolve within the schema or a
host's `referencing.Registry`, never fetched; no self-referential cycle); arguments nested deeper
than `MAX_ARGUMENT_DEPTH` fail validation with a line that says so.
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, final

from mule.pi._coerce import Coercer
from mule.pi._content import ToolCall
from mule.pi._context import Tool
from mule.pi._error_text import (
    ToolArgumentsError,
    ToolSchemaError,
    arguments_error,
    display_path,
    error_message,
)
from mule.pi._error_walk import MAX_ERRORS, ErrorContext, ErrorWalker
from mule.pi._js_values import clone_json
from mule.pi._json import JsonObject, JsonValue, nested_deeper_than
from mule.pi._schema import Schema, check_schema, formats, pi_validator
from mule.pi._schema_bounds import MAX_ARGUMENT_DEPTH, MAX_SCHEMA_DEPTH, schema_problem
from mule.pi._simple_schema import simple_check

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from referencing import Registry


@functools.cache
def _empty() -> Registry[Any]:
    """No resources and no retrieval: nothing is ever fetched (made with the first validator)."""
    from referencing import Registry

    return Registry()


@final
class ToolValidator:
    """A tool's compiled argument gate: jsonschema validators built once, reused for every call.

    `registry` (a `referencing.Registry`) is where `$ref`s that leave the schema resolve; without
    one they are a `ToolSchemaError`, and no reference is ever retrieved from the network.

    Attributes:
        name: The tool's name (in its errors).
        parameters: The tool's parameters schema, as given.

    """

    _cache: ClassVar[dict[int, tuple[weakref.ref[Tool], ToolValidator]]] = {}

    def __init__(
        self, name: str, parameters: Schema, registry: Registry[Any] | None = None
    ) -> None:
        self.name = name
        self.parameters = parameters
        self._given = registry
        self._compiled: Validator | None = None
        # A plain schema (most tools') is decided without jsonschema, which then never loads:
        # the same verdicts (`_simple_schema`), and nothing in it that a registry resolves.
        self._is_valid: Callable[[Any], bool]
        simple = None
        if not nested_deeper_than(parameters, MAX_SCHEMA_DEPTH):
            simple = simple_check(parameters)
        if simple is not None:
            self._is_valid = simple
        else:
            try:
                problem = check_schema(parameters) or schema_problem(parameters, self._registry)
                if problem is not None:
                    raise ToolSchemaError(name, problem)
                self._is_valid = self._validator.is_valid
            except RecursionError:
                raise ToolSchemaError(name, "nested too deeply to compile") from None
        self._members: dict[int, Validator | None] = {}
        self._coercer = Coercer(self._member_valid)
        self._walker = ErrorWalker(parameters)
        self._flat = _flat_plan(parameters)

    @property
    def _registry(self) -> Registry[Any]:
        return _empty() if self._given is None else self._given

    @property
    def _validator(self) -> Validator:
        """The schema compiled by jsonschema (for a plain schema, only if a walk needs it)."""
        if self._compiled is None:
            self._compiled = pi_validator()(
                self.parameters, format_checker=formats(), registry=self._registry
            )
        return self._compiled

    @classmethod
    def for_tool(cls, tool: Tool) -> ToolValidator:
        """Return the tool's validator, compiled once and cached.

        Cached per `Tool` object while it lives, and by schema content (a bounded LRU), so a
        host that rebuilds equal tools for every run does not pay for compiling them again.
        """
        key = id(tool)
        hit = cls._cache.get(key)
        if hit is not None and hit[0]() is tool:
            return hit[1]
        if nested_deeper_than(tool.parameters, MAX_SCHEMA_DEPTH):  # before json.dumps recurses
            raise ToolSchemaError(tool.name, f"nested deeper than {MAX_SCHEMA_DEPTH} levels")
        try:
            text = json.dumps(tool.parameters, default=repr)
        except ValueError as exc:  # a circular reference
            raise ToolSchemaError(tool.name, str(exc)) from None
        made = _by_content(tool.name, text)
        cls._cache[key] = (weakref.ref(tool, lambda _: cls._cache.pop(key, None)), made)
        return made

    def _member_valid(self, member: Schema, value: Any) -> bool:
        """Return whether a union member, compiled on its own as Pi does, accepts `value`."""
        key = id(member)
        if key not in self._members:
            try:
                self._members[key] = pi_validator()(
                    member, format_checker=formats(), registry=self._registry
                )
            except Exception:
                self._members[key] = None
        validator = self._members[key]
        if validator is None:
            return False
        try:
            return bool(validator.is_valid(value))
        except Exception:  # an unresolvable $ref or a bad pattern: Pi's compiled member rejects too
            return False

    def _valid(self, value: Any) -> bool:
        try:
            return bool(self._is_valid(value))
        except (
            Exception
        ) as why:  # a schema jsonschema cannot evaluate (bad regex, unresolvable $ref)
            raise ToolSchemaError(self.name, str(why)) from why

    def coerce(self, arguments: JsonObject) -> dict[str, Any]:
        """Return Pi's coercion of a deep copy of `arguments` (the input is never mutated)."""
        args = clone_json(arguments)
        assert isinstance(args, dict)
        coerced = self._coercer.coerce(args, self.parameters)
        # Pi refills the copy when a union swapped in a coerced clone. Coercion never turns an
        # object into a non-object, so Pi's branch for that case cannot arise from a JSON object.
        if coerced is not args and isinstance(coerced, dict):
            args.clear()
            args.update(coerced)
        return args

    def errors(self, value: Any) -> tuple[tuple[str, str], ...]:
        """Return Pi's (path, message) error lines for an invalid value."""
        ctx = ErrorContext()
        self._walker.walk(ctx, "", self.parameters, value)
        lines = tuple(
            (display_path(k, p, params), error_message(k, params)) for k, p, params in ctx.items
        )
        if lines:
            return lines
        # The walk missed what jsonschema saw (a keyword it does not model): use jsonschema's view.
        found = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        return tuple(
            (".".join(str(p) for p in e.absolute_path) or "root", e.message)
            for e in found[:MAX_ERRORS]
        )

    def validate(self, call: ToolCall) -> dict[str, JsonValue]:
        """Return the call's coerced arguments, or raise `ToolArgumentsError` with Pi's text.

        Raises `ToolSchemaError` when the schema cannot be evaluated on these arguments.
        """
        flat = self._flat
        if flat is not None:
            accepted = _flat_accepts(flat, call.arguments)
            if accepted is not None:
                return accepted
        if nested_deeper_than(call.arguments, MAX_ARGUMENT_DEPTH):
            raise _too_deep(call.name)
        try:
            coerced = self.coerce(call.arguments)
            if self._valid(coerced):
                return coerced
            raise arguments_error(call.name, self.errors(coerced), call.arguments)
        except (ToolArgumentsError, ToolSchemaError):
            raise
        except RecursionError:  # a recursive schema on deep arguments: deeper than the stack
            raise _too_deep(call.name) from None
        except Exception as exc:  # the gate is total: no raw error reaches the caller
            raise ToolSchemaError(
                self.name, f"cannot be evaluated on these arguments: {type(exc).__name__}: {exc}"
            ) from exc


# The fast path for the common tool schema: an object of typed scalar properties. Only values
# that already have their property's JSON type (which Pi's coercion leaves alone and the schema
# accepts) are decided here; anything else takes the full gate, so the verdicts are the same.
_SCALARS: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
_ANNOTATIONS = frozenset({"description", "title"})
_FLAT_KEYS = frozenset({"type", "properties", "required", "additionalProperties"}) | _ANNOTATIONS
_PRIMITIVE = (str, int, float, bool, type(None))
_FlatPlan = tuple[dict[str, tuple[type, ...]], tuple[str, ...], bool]


def _flat_plan(schema: Schema) -> _FlatPlan | None:
    """Return (property types, required names, extras allowed) for a flat object schema."""
    if (
        type(schema) is not dict
        or not schema.keys() <= _FLAT_KEYS
        or schema.get("type") != "object"
    ):
        return None
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if type(props) is not dict or type(required) is not list or type(extra) is not bool:
        return None
    types: dict[str, tuple[type, ...]] = {}
    for name, sub in props.items():
        if (
            type(name) is not str
            or type(sub) is not dict
            or not sub.keys() <= _ANNOTATIONS | {"type"}
        ):
            return None
        kind = sub.get("type")
        kinds = _SCALARS.get(kind) if type(kind) is str else None
        if kinds is None:
            return None
        types[name] = kinds
    if not all(type(r) is str for r in required):
        return None
    return types, tuple(required), extra


def _flat_accepts(plan: _FlatPlan, arguments: object) -> dict[str, JsonValue] | None:
    """Return a copy of `arguments` when the flat plan accepts them as they are, else None."""
    if type(arguments) is not dict:
        return None
    types, required, extra = plan
    for name in required:
        if name not in arguments:
            return None
    for key, value in arguments.items():
        kinds = types.get(key)
        if kinds is None:
            if not extra or type(key) is not str or type(value) not in _PRIMITIVE:
                return None
        elif type(value) not in kinds:
            return None
    return dict(arguments)


def _too_deep(tool_name: str) -> ToolArgumentsError:
    line = ("root", f"must not be nested deeper than {MAX_ARGUMENT_DEPTH} levels")
    return arguments_error(tool_name, (line,), None)


@functools.lru_cache(maxsize=256)
def _by_content(name: str, schema_json: str) -> ToolValidator:
    return ToolValidator(name, json.loads(schema_json))


def validate_tool_arguments(
    tool: Tool, call: ToolCall, registry: Registry[Any] | None = None
) -> dict[str, JsonValue]:
    """Return `call`'s arguments coerced and validated against `tool.parameters`, as Pi's gate does.

    Raises `ToolArgumentsError` (Pi's failure text) or `ToolSchemaError` (an unusable schema),
    nothing else. `registry` resolves `$ref`s that leave the schema (none is ever fetched).

    >>> schema = {"type": "object", "properties": {"n": {"type": "number"}}}
    >>> tool = Tool("V", "", schema)
    >>> validate_tool_arguments(tool, ToolCall("c1", "V", {"n": "0x10"}))
    {'n': 16}
    """
    if registry is not None:
        return ToolValidator(tool.name, tool.parameters, registry).validate(call)
    return ToolValidator.for_tool(tool).validate(call)


__all__ = ["ToolValidator", "validate_tool_arguments"]
