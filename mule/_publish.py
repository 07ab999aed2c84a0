"""Makes a package face the home of the names it exports.

A class defined in `mule.effects._lifecycle` and exported by `mule.effects` should say so:
`repr`, tracebacks, pickling and the reference docs all read `__module__`, and a reader
should see the face to import from, never a private room. Each face calls `publish` once,
after its imports.

Classes written with `from __future__ import annotations` hold their annotations as strings,
which `typing.get_type_hints` (cattrs, mule's codec) evaluates in the globals of `__module__`:
so a class's annotations are resolved in its own module first and stored resolved, and the
face's globals are never asked for a name only the private module imports.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from types import CodeType
from typing import Any

import attrs


def publish(face: str, namespace: MutableMapping[str, object], names: Iterable[str]) -> None:
    """Set `__module__` to `face` on each exported class and function defined under it."""
    private = face + "._"
    for name in names:
        obj = namespace.get(name)  # a lazily imported name is published when first read
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        home = getattr(obj, "__module__", "")
        if not home.startswith(private):
            continue  # defined elsewhere (re-exported from a lower face) or already public
        if inspect.isclass(obj):
            _resolve_annotations(obj)
        obj.__module__ = face


def lazy(
    face: str, namespace: MutableMapping[str, object], names: Mapping[str, str]
) -> Callable[[str], Any]:
    """Return a face's module `__getattr__` (PEP 562) importing `names` on first read.

    Each name is imported from its module (the mapping's value), then bound and published like
    the others: for what a run may not need (the codecs), which `import mule` need not pay for.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {face!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        publish(face, namespace, (name,))
        return value

    return __getattr__


def listing(namespace: Mapping[str, object], names: Iterable[str]) -> Callable[[], list[str]]:
    """Return a face's module `__dir__`: its names and the lazy ones not yet imported."""
    lazy = tuple(names)

    def __dir__() -> list[str]:
        return sorted({*namespace, *lazy})

    return __dir__


_WRITTEN: dict[type, dict[str, Any]] = {}


def written_annotations(cls: type) -> dict[str, Any]:
    """Return a class's own annotations as its source wrote them (before `publish`)."""
    return _WRITTEN.get(cls) or inspect.get_annotations(cls)


_COMPILED: dict[str, CodeType] = {}


def _evaluate(text: str, module: dict[str, Any], scope: dict[str, Any]) -> Any:
    """`eval(text, module, scope)`, with a bare name looked up and each text compiled once."""
    if text.isidentifier():  # half of them ("str", "MuleIdentity"): no compile
        if text in scope:
            return scope[text]
        if text in module:
            return module[text]
    code = _COMPILED.get(text)
    if code is None:
        code = _COMPILED[text] = compile(text, "<annotation>", "eval")
    return eval(code, module, scope)


def _resolve_annotations(cls: type) -> None:
    own = inspect.get_annotations(cls)
    if not any(isinstance(v, str) for v in own.values()):
        return
    # One evaluation per annotation, in the defining module; inherited ones were resolved when
    # their own class was published (a base is published with or before its subclasses).
    module = sys.modules[cls.__module__].__dict__
    scope = dict(vars(cls))
    resolved = {k: _evaluate(v, module, scope) if isinstance(v, str) else v for k, v in own.items()}
    _WRITTEN[cls] = own  # as written: mule.pi's codec reads aliases by name (`declared`)
    cls.__annotations__ = resolved
    if attrs.has(cls):
        for field in attrs.fields(cls):
            if isinstance(field.type, str) and field.name in resolved:
                object.__setattr__(field, "type", resolved[field.name])
