"""The built-in model catalogue: pi-ai's generated model list, for the APIs mule speaks.

The data lives in `_catalogue.json` (regenerate it with `_generate_catalogue.py`); it is read
once, on first use.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from mule.pi._codec import from_wire
from mule.pi._model import Model


@cache
def builtin_models() -> dict[str, tuple[Model, ...]]:
    """Return the built-in models by provider, each in pi-ai's order."""
    text = resources.files(__package__).joinpath("_catalogue.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return {
        provider: tuple(from_wire(Model, {**entry, "provider": provider}) for entry in entries)
        for provider, entries in data["providers"].items()
    }


def catalogue_source() -> str:
    """Return which pi-ai release the catalogue was generated from."""
    text = resources.files(__package__).joinpath("_catalogue.json").read_text(encoding="utf-8")
    source: str = json.loads(text)["source"]
    return source


__all__ = ["builtin_models", "catalogue_source"]
