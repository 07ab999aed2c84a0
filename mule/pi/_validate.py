r"""Pi's tool-argument gate: coerce a call's arguments towards the tool's schema, then validate.

Mirrors pi-ai 1.6.0 `validateToolArguments` (`dist/utils/validation.js`): the schema compiled
once with `@earendil-works/pi-schema` (`compile(schema, {formats, coerce: true, unresolvedRefs:
"reject"})`), the arguments copied, coerced and checked (`parse()`), and on failure one line per
pi-schema error (its path dotted, its message) followed by the arguments as received.

The gate is built from parts, each in its own module: JS value semantics (`_js_values`), the
compiled check (`_schema`, with `_schema_refs`, `_schema_formats`, `_schema_regex` and
`_schema_unevaluated`), the coercion (`_coerce`), the errors (`_error_walk`) and the failure
text (`_error_text`). No JSON Schema library is involved; a host's `referencing.Registry` only
supplies documents for `$ref`s that leave the schema (none is ever fetched).

Deliberately unlike Pi: the gate is total. Whatever the schema and the arguments, it returns or
raises `ToolArgumentsError` or `ToolSchemaError`: a schema pi-schema cannot compile (a
subschema that is not an object or a boolean, a pattern no engine compiles), one nested deeper
than `MAX_SCHEMA_DEPTH` or with a reference cycle on the same value is a `ToolSchemaError`
(pi's would throw, or overflow its stack, on every call), and arguments nested deeper than
`MAX_ARGUMENT_DEPTH` fail validation with a line that says so. The other known differences
(pattern engine, approximate URL/IDN formats, JS-only types) are in the modules that own them.
"""

from __future__ import annotations

import functools
import json
import math
import weakref
from typing import TYPE_CHECKING, Any, ClassVar, final

from mule.pi._coerce import Coercer
from mule.pi._content import ToolCall
from mule.pi._context import Tool
from mule.pi._error_text import (
    ToolArgumentsError,
    ToolSchemaError,
    arguments_error,
    display_path,
)
from mule.pi._error_walk import Explainer
from mule.pi._js_values import clone_json, to_double
from mule.pi._json import JsonObject, JsonValue, nested_deeper_than
from mule.pi._schema import Compiler, Schema, SchemaCompileError
from mule.pi._schema_bounds import MAX_ARGUMENT_DEPTH, MAX_SCHEMA_DEPTH, schema_problem
from mule.pi._schema_refs import Resolver
from mule.pi._schema_regex import PatternError

if TYPE_CHECKING:
    from referencing import Registry


@final
class ToolValidator:
    """A tool's compiled argument gate: the schema compiled once, reused for every call.

    `registry` (a `referencing.Registry`) is where `$ref`s that leave the schema find their
    documents; a reference that names nothing rejects the values at its place, as pi-ai's
    `unresolvedRefs: "reject"` does. No reference is ever retrieved from the network.

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
        if nested_deeper_than(parameters, MAX_SCHEMA_DEPTH):
            raise ToolSchemaError(name, f"nested deeper than {MAX_SCHEMA_DEPTH} levels")
        self._compiler = Compiler(parameters, Resolver(parameters, registry))
        try:
            self._check = self._compiler.root()
            problem = schema_problem(parameters, self._compiler.r)
        except (SchemaCompileError, PatternError) as exc:
            raise ToolSchemaError(name, str(exc)) from None
        except RecursionError:
            raise ToolSchemaError(name, "nested too deeply to compile") from None
        if problem is not None:
            raise ToolSchemaError(name, problem)
        self._coercer: Coercer | None = None
        self._explainer: Explainer | None = None
        self._flat = _flat_plan(parameters)

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

    def coerce(self, arguments: JsonObject) -> Any:
        """Return pi-schema's coercion of a copy of `arguments` (the input is never mutated)."""
        if self._coercer is None:  # built on the first call, as pi-schema's coercer is
            self._coercer = Coercer(self._compiler)
        return self._coercer.coerce(clone_json(arguments))

    def errors(self, value: Any) -> tuple[tuple[str, str], ...]:
        """Return pi-ai's (path, message) error lines for an invalid value."""
        if self._explainer is None:
            self._explainer = Explainer(self._compiler)
        return tuple(
            (display_path(path), message) for path, _, message in self._explainer.errors(value)
        )

    def validate(self, call: ToolCall) -> dict[str, JsonValue]:
        """Return the call's coerced arguments, or raise `ToolArgumentsError` with Pi's text.

        Raises `ToolSchemaError` when the schema cannot be evaluated on these arguments.
        """
        # 1.6.0: a call whose arguments text did not parse (cut by a `length` stop) is refused
        # with that error before any validation. The field comes with ToolCall's 1.6.0 fields.
        unparsed = getattr(call, "arguments_error", None)
        if unparsed:
            text = f'Invalid arguments for tool "{call.name}": {unparsed}'
            raise ToolArgumentsError(call.name, (), text)
        flat = self._flat
        if flat is not None:
            accepted = _flat_accepts(flat, call.arguments)
            if accepted is not None:
                return accepted
        if nested_deeper_than(call.arguments, MAX_ARGUMENT_DEPTH):
            raise _too_deep(call.name)
        try:
            coerced = self.coerce(call.arguments)
            if self._check(coerced):
                if not isinstance(coerced, dict):  # a root `type: "array"` wraps the object
                    raise ToolSchemaError(
                        self.name, "turns the arguments object into a non-object (root schema)"
                    )
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
# that already have their property's JSON type (which pi-schema's coercion leaves alone and its
# check accepts) are decided here; anything else takes the full gate, so the verdicts are the same.
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
        elif type(value) not in kinds or (
            type(value) in (int, float) and not math.isfinite(to_double(value))
        ):
            return None  # JS sees a non-finite number (NaN, or an int beyond doubles): no number
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
