"""What `mule serve` checks and prepares once, at start-up: pi itself, and the model pi is to use.

`--model`, `--provider`, `--base-url` and `--api` mean what they mean for `mule run`; they become
an isolated pi agent dir holding only the `models.json` they imply (never the user's
`~/.pi/agent`), so a local OpenAI-compatible server needs no hand-written file. Any problem is a
`SetupError` whose message says what to do; `mule serve` prints it and exits 2 before binding.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, final
from urllib.parse import urlsplit

from attrs import field, frozen

from mule.pi.models import get_model, get_models, get_providers
from mule.pi.providers import ENV_API_KEYS
from mule.pirc import project_pi

PI_PACKAGE: Final = "@earendil-works/pi-coding-agent@1.6.0"
PI_NODE: Final = "22.19"  # the oldest Node.js pi 1.6.0 runs on (older ones: a missing export)
PI_INSTALL: Final = f"npm install -g {PI_PACKAGE}"
CUSTOM_API: Final = "openai-completions"
CUSTOM_KEY_ENV: Final = "MULE_API_KEY"
NO_KEY: Final = "none"  # local servers need no key, but pi insists on one
VERSION_TIMEOUT_S: Final = 30.0


class SetupError(ValueError):
    """`mule serve` cannot start as asked; the message says why and what to do."""


def known_apis() -> frozenset[str]:
    """Return the wire APIs of pi's built-in catalogue (what `--api` may name)."""
    return frozenset(m.api for p in get_providers() for m in get_models(p))


# -- pi ------------------------------------------------------------------------------------------


@final
@frozen
class PiExecutable:
    """The pi to run, where it was found, and what `pi --version` said."""

    path: str
    source: str
    version: str


def find_pi(explicit: str | None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Return (path, how it was found): `--pi`, `$MULE_PI`, `pi` on PATH, the repo's node/."""
    env = os.environ if environ is None else environ
    for value, source in ((explicit, "--pi"), (env.get("MULE_PI"), "$MULE_PI")):
        if value:
            if os.sep in value:
                return str(Path(value).expanduser().absolute()), source
            return shutil.which(value, path=env.get("PATH")) or value, source
    found = shutil.which("pi", path=env.get("PATH"))
    if found:
        return found, "PATH"
    return project_pi(), "the project's ./dev setup install"


def check_pi(path: str, source: str, env: Mapping[str, str]) -> PiExecutable:
    """Run `pi --version` once; raise `SetupError` with the install command if it fails."""
    how = (
        f"install it with `{PI_INSTALL}` (it needs Node.js {PI_NODE} or newer), "
        "or name it with --pi PATH or $MULE_PI"
    )
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise SetupError(f"pi not found ({path}, from {source}): {how}") from None
    except PermissionError:
        raise SetupError(f"pi is not executable ({path}, from {source}): {how}") from None
    except OSError as exc:
        raise SetupError(f"cannot run pi ({path}, from {source}): {exc}; {how}") from None
    except subprocess.TimeoutExpired:
        raise SetupError(
            f"`{path} --version` did not answer in {VERSION_TIMEOUT_S:g} s (from {source})"
        ) from None
    said = (done.stdout.strip() or done.stderr.strip()).splitlines()  # pi prints it on stderr
    if done.returncode != 0 or not said:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        why = " | ".join(tail) or f"exit code {done.returncode}"
        raise SetupError(f"`{path} --version` failed ({why}; from {source}): {how}")
    return PiExecutable(path, source, said[-1].strip())


# -- the model -----------------------------------------------------------------------------------


@final
@frozen(kw_only=True)
class ModelSetup:
    """The provider and model pi gets, the `models.json` that defines them, and the key's route.

    `key_env` names the variable pi reads the key from; `key` is its value when mule supplies it
    (a custom server's `$MULE_API_KEY`, or "none"), else None: the variable passes through.
    """

    provider: str
    model: str
    models_json: dict[str, Any] = field(factory=dict)
    key_env: str | None = None
    key: str | None = field(default=None, repr=False)


def _check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SetupError(
            f"--base-url must be an http(s) URL, e.g. http://127.0.0.1:11434/v1: {url!r}"
        )
    return url.rstrip("/")


def split_model(model: str, provider: str | None) -> tuple[str, str]:
    """Return (provider, model id) from `--model` (PROVIDER/ID, or ID with `--provider`)."""
    if provider:
        return provider, model
    given, sep, model_id = model.partition("/")
    if not sep or not given or not model_id:
        raise SetupError(
            f"--model {model!r}: expected PROVIDER/MODEL (e.g. anthropic/claude-sonnet-4-5 or "
            "local/llama3 --base-url http://127.0.0.1:11434/v1), or pass --provider"
        )
    return given, model_id


def model_setup(
    provider: str,
    model: str,
    *,
    base_url: str | None = None,
    api: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelSetup:
    """Decide what pi needs for this model, as `mule run` resolves `--model/--base-url/--api`.

    A provider unknown to pi's catalogue is an OpenAI-compatible server at `base_url` (or the
    `api` named); a known one keeps its API and takes `base_url` as an endpoint override.
    """
    env = os.environ if environ is None else environ
    if api is not None and api not in known_apis():
        raise SetupError(f"--api {api!r} is not one of pi's APIs: {sorted(known_apis())}")
    if api is not None and base_url is None:
        raise SetupError("--api needs --base-url (it chooses the wire API of that server)")
    url = _check_url(base_url) if base_url is not None else None
    names = ENV_API_KEYS.get(provider, ())
    present = next((n for n in names if env.get(n)), None)
    known = provider in get_providers()
    if not known:
        if url is None:
            raise SetupError(
                f"unknown provider {provider!r}: pass --base-url for an OpenAI-compatible server "
                f"(e.g. --base-url http://127.0.0.1:11434/v1), or see `mule models`"
            )
        entry = {
            "baseUrl": url,
            "api": api or CUSTOM_API,
            "apiKey": CUSTOM_KEY_ENV,  # a variable's NAME: the key stays off disk and argv
            "models": [{"id": model}],
        }
        return ModelSetup(
            provider=provider,
            model=model,
            models_json={"providers": {provider: entry}},
            key_env=CUSTOM_KEY_ENV,
            key=env.get(CUSTOM_KEY_ENV) or NO_KEY,
        )
    override: dict[str, Any] = {}
    if url is not None:
        override["baseUrl"] = url
        if get_model(provider, model) is None:
            template = get_models(provider)[0]
            override["models"] = [{"id": model, "api": api or template.api}]
        elif api is not None:
            override["modelOverrides"] = {model: {"api": api}}
    elif get_model(provider, model) is None:
        raise SetupError(
            f"provider {provider!r} has no model {model!r} (see `mule models --provider "
            f"{provider}`), or pass --base-url for a server that has it"
        )
    if present is None and url is None and names:
        raise SetupError(f"no API key for provider {provider!r}: set {' or '.join(names)}")
    key_env: str | None = present
    key: str | None = None
    if (
        present is None and url is not None
    ):  # an endpoint override without the provider's key: a local server
        override["apiKey"] = CUSTOM_KEY_ENV
        key_env, key = CUSTOM_KEY_ENV, env.get(CUSTOM_KEY_ENV) or NO_KEY
    models_json = {"providers": {provider: override}} if override else {"providers": {}}
    return ModelSetup(
        provider=provider, model=model, models_json=models_json, key_env=key_env, key=key
    )


def make_agent_dir(setup: ModelSetup) -> Path:
    """Create a private pi agent dir holding `setup`'s models.json; the caller removes it."""
    root = Path(tempfile.mkdtemp(prefix="mule-serve-agent-"))  # mode 0700
    (root / "models.json").write_text(json.dumps(setup.models_json, indent=2), encoding="utf-8")
    return root


def resolve_paths(paths: tuple[str, ...], base: Path, what: str) -> tuple[str, ...]:
    """Make paths absolute against `base` (the invoking directory); each must exist."""
    out: list[str] = []
    for p in paths:
        full = (base / Path(p).expanduser()).resolve()
        if not full.exists():
            raise SetupError(f"{what} {p!r} not found (looked at {full})")
        out.append(str(full))
    return tuple(out)


__all__ = [
    "CUSTOM_KEY_ENV",
    "PI_INSTALL",
    "ModelSetup",
    "PiExecutable",
    "SetupError",
    "check_pi",
    "find_pi",
    "known_apis",
    "make_agent_dir",
    "model_setup",
    "resolve_paths",
    "split_model",
]
