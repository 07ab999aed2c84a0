"""Regenerate `_catalogue.json` from pi-ai's `models.generated.js` (run by hand, not at import).

Usage: `python -m mule.pi.models._generate_catalogue [path/to/pi-ai/dist/models.generated.js]`.
Node evaluates the module (it is data written as JavaScript); only the providers in `PROVIDERS`
and only models whose api is one that mule speaks are kept, so the file stays small.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROVIDERS = (
    "anthropic",
    "cerebras",
    "deepseek",
    "google",
    "groq",
    "openai",
    "openrouter",
    "xai",
    "zai",
)
APIS = ("anthropic-messages", "google-generative-ai", "openai-completions", "openai-responses")
SOURCE_VERSION = "pi-ai 1.6.0"

_HERE = Path(__file__).resolve().parent
_DEFAULT_SOURCE = (
    _HERE.parents[2] / "node/node_modules/@earendil-works/pi-ai/dist/models.generated.js"
)
_DUMP = "import(process.argv[1]).then(({MODELS}) => process.stdout.write(JSON.stringify(MODELS)));"


def build(source: Path) -> str:
    """Return the catalogue JSON text for the pi-ai models module at `source`."""
    out = subprocess.run(
        ["node", "-e", _DUMP, source.as_uri()], check=True, capture_output=True, text=True
    ).stdout
    every = json.loads(out)
    lines = ["{", f'"source": {json.dumps(SOURCE_VERSION)},', '"providers": {']
    blocks = []
    for provider in PROVIDERS:
        models = [m for m in every.get(provider, {}).values() if m["api"] in APIS]
        rows = []
        for model in models:  # Pi's order: its first model gives a provider's defaults
            assert model["provider"] == provider, model
            slim = {k: v for k, v in model.items() if k != "provider"}
            rows.append(json.dumps(slim, separators=(",", ":"), ensure_ascii=False))
        blocks.append(f"{json.dumps(provider)}: [\n" + ",\n".join(rows) + "\n]")
    lines.append(",\n".join(blocks))
    lines.append("}}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    """Write `_catalogue.json` next to this script."""
    source = Path(argv[1]) if len(argv) > 1 else _DEFAULT_SOURCE
    (_HERE / "_catalogue.json").write_text(build(source), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv)
