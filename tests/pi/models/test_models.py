"""The model registry: pi-ai's catalogue and Pi's models.json custom providers.

Also tests the private rules `mule.pi.models._generate_catalogue.build` (the committed catalogue is
what it generates from pi-ai, over its `APIS`) and `mule.pi.models._models_json.strip_json_comments`
(models.json may hold comments).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success

from mule.pi import Model, ModelCost
from mule.pi.models import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_TOKENS,
    ModelsJsonError,
    Registry,
    RequestAuth,
    clamp_thinking_level,
    default_models_json_path,
    get_model,
    get_models,
    get_providers,
    get_supported_thinking_levels,
    load_models_json,
    models_are_equal,
    resolve_config_value,
)
from mule.pi.models._generate_catalogue import _DEFAULT_SOURCE, APIS, build
from mule.pi.models._models_json import strip_json_comments

CATALOGUE = Path(__file__).parents[3] / "mule/pi/models/_catalogue.json"


def test_builtin_catalogue_covers_the_four_apis() -> None:
    """Every built-in model speaks one of mule's four APIs, and each API has models."""
    apis = {m.api for p in get_providers() for m in get_models(p)}
    assert apis == set(APIS)
    assert {"anthropic", "openai", "google", "openrouter", "groq", "xai", "cerebras"} <= set(
        get_providers()
    )


def test_get_model_returns_pi_data() -> None:
    """A known model carries pi-ai's ids, prices and limits."""
    sonnet = get_model("anthropic", "claude-sonnet-4-5")
    assert sonnet is not None
    assert (sonnet.api, sonnet.base_url) == ("anthropic-messages", "https://api.anthropic.com")
    assert sonnet.cost == ModelCost(3, 15, 0.3, 3.75)
    assert (sonnet.context_window, sonnet.max_tokens, sonnet.reasoning) == (200000, 64000, True)
    assert sonnet.input == ("text", "image")
    flash = get_model("google", "gemini-2.5-flash")
    assert flash is not None
    assert flash.api == "google-generative-ai"
    assert get_model("anthropic", "no-such-model") is None
    assert get_models("no-such-provider") == ()


@pytest.mark.skipif(
    shutil.which("node") is None or not _DEFAULT_SOURCE.exists(), reason="needs node and pi-ai"
)
def test_committed_catalogue_is_what_the_script_generates() -> None:
    """The committed JSON equals a fresh run of the generator over pi-ai's models file."""
    assert build(_DEFAULT_SOURCE) == CATALOGUE.read_text(encoding="utf-8")


def test_thinking_levels_and_clamp() -> None:
    """Supported levels follow the thinking map; a clamp goes up first, then down."""
    plain = Model("m", "m", "openai-completions", "p", "u")
    assert get_supported_thinking_levels(plain) == ("off",)
    mapped = Model(
        "m", "m", "openai-responses", "p", "u", reasoning=True,
        thinking_level_map={"minimal": None, "xhigh": "xhigh"},
    )  # fmt: skip
    assert get_supported_thinking_levels(mapped) == ("off", "low", "medium", "high", "xhigh")
    assert clamp_thinking_level(mapped, "minimal") == "low"
    top = Model("m", "m", "x", "p", "u", reasoning=True, thinking_level_map={"high": None})
    assert clamp_thinking_level(top, "xhigh") == "medium"
    assert models_are_equal(plain, plain)
    assert not models_are_equal(plain, None)


def write(tmp_path: Path, text: str) -> Path:
    """Write a models.json and return its path."""
    path = tmp_path / "models.json"
    path.write_text(text, encoding="utf-8")
    return path


MODELS_JSON = """
{
  // a local server, as in Pi's docs
  "providers": {
    "ollama": {
      "baseUrl": "http://localhost:11434/v1",
      "api": "openai-completions",
      "apiKey": "MULE_TEST_OLLAMA_KEY",
      "compat": {"supportsDeveloperRole": false},
      "headers": {"x-team": "MULE_TEST_TEAM"},
      "models": [
        {"id": "llama3.1:8b"},
        {
          "id": "qwen-think",
          "name": "Qwen (thinking)",
          "reasoning": true,
          "input": ["text", "image"],
          "cost": {"input": 1, "output": 2, "cacheRead": 0.5, "cacheWrite": 0},
          "contextWindow": 32000,
          "maxTokens": 4096,
          "headers": {"x-model": "literal-value"},
          "compat": {"maxTokensField": "max_tokens"},
        },
      ],
    },
    "anthropic": {
      "baseUrl": "https://proxy.example/anthropic",
      "modelOverrides": {
        "claude-sonnet-4-5": {"name": "Sonnet via proxy", "cost": {"input": 1}}
      },
      "models": [{"id": "claude-private-1", "reasoning": true}]
    },
    "cmd": {
      "baseUrl": "http://127.0.0.1:1/v1",
      "api": "anthropic-messages",
      "apiKey": "!printf ' from-command \\\\n'",
      "authHeader": true,
      "models": [{"id": "m1", "api": "google-generative-ai"}],
    },
  },
}
"""


def test_models_json_round_trip_with_custom_providers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Pi models.json (comments, trailing commas) yields Pi's defaults, overrides and auth."""
    monkeypatch.setenv("MULE_TEST_OLLAMA_KEY", "from-env")
    monkeypatch.setenv("MULE_TEST_TEAM", "blue")
    registry = load_models_json(write(tmp_path, MODELS_JSON))

    llama = registry.get_model("ollama", "llama3.1:8b")
    assert llama == Model(
        id="llama3.1:8b",
        name="llama3.1:8b",
        api="openai-completions",
        provider="ollama",
        base_url="http://localhost:11434/v1",
        reasoning=False,
        input=("text",),
        cost=ModelCost(),
        context_window=DEFAULT_CONTEXT_WINDOW,
        max_tokens=DEFAULT_MAX_TOKENS,
        compat={"supportsDeveloperRole": False},
    )
    qwen = registry.get_model("ollama", "qwen-think")
    assert qwen is not None
    assert (qwen.name, qwen.reasoning, qwen.input) == ("Qwen (thinking)", True, ("text", "image"))
    assert (qwen.cost, qwen.context_window, qwen.max_tokens) == (
        ModelCost(1, 2, 0.5, 0),
        32000,
        4096,
    )
    assert qwen.compat == {"supportsDeveloperRole": False, "maxTokensField": "max_tokens"}
    assert qwen.headers is None  # request headers resolve per request

    assert registry.request_auth(qwen) == Success(
        RequestAuth("from-env", {"x-team": "blue", "x-model": "literal-value"})
    )
    assert registry.api_key("ollama") == "from-env"

    # A built-in provider: baseUrl applies to all its models, overrides merge, custom appends.
    sonnet = registry.get_model("anthropic", "claude-sonnet-4-5")
    builtin = get_model("anthropic", "claude-sonnet-4-5")
    assert sonnet is not None
    assert builtin is not None
    assert sonnet.name == "Sonnet via proxy"
    assert sonnet.cost == ModelCost(1, builtin.cost.output, builtin.cost.cache_read, 3.75)
    assert sonnet.base_url == "https://proxy.example/anthropic"
    private = registry.get_model("anthropic", "claude-private-1")
    assert private is not None
    assert private.api == "anthropic-messages"  # inherited from the built-in provider
    assert private.base_url == "https://proxy.example/anthropic"
    assert registry.get_models("anthropic")[-1] == private
    assert len(registry.get_models("anthropic")) == len(get_models("anthropic")) + 1

    # "!command" keys run a shell; authHeader adds a bearer header.
    m1 = registry.get_model("cmd", "m1")
    assert m1 is not None
    assert m1.api == "google-generative-ai"
    assert registry.request_auth(m1) == Success(
        RequestAuth("from-command", {"Authorization": "Bearer from-command"})
    )
    assert registry.get_providers()[-2:] == ("ollama", "cmd")


def test_custom_model_replaces_builtin_of_same_id(tmp_path: Path) -> None:
    """A custom model with a built-in provider and id replaces the built-in entry in place."""
    text = '{"providers": {"openai": {"models": [{"id": "gpt-5", "name": "Mine"}]}}}'
    registry = load_models_json(write(tmp_path, text))
    models = registry.get_models("openai")
    assert len(models) == len(get_models("openai"))
    replaced = registry.get_model("openai", "gpt-5")
    assert replaced is not None
    assert (replaced.name, replaced.context_window) == ("Mine", DEFAULT_CONTEXT_WINDOW)
    assert replaced.api == get_models("openai")[0].api


def test_failing_command_key_is_a_failure(tmp_path: Path) -> None:
    """A key command that fails cannot be resolved: request_auth reports Pi's message."""
    text = json.dumps(
        {
            "providers": {
                "p": {
                    "baseUrl": "http://h",
                    "api": "openai-completions",
                    "apiKey": "!exit 3",
                    "models": [{"id": "x"}],
                }
            }
        }
    )
    registry = load_models_json(write(tmp_path, text))
    model = registry.get_model("p", "x")
    assert model is not None
    assert registry.request_auth(model) == Failure(
        'Failed to resolve API key for provider "p" from shell command: exit 3'
    )


@pytest.mark.parametrize(
    ("doc", "where", "detail"),
    [
        ({}, "providers", "required property is missing"),
        ({"providers": []}, "providers", "expected an object"),
        ({"providers": {"p": {"models": [{"name": "x"}]}}}, "providers.p.models.0.id", "required"),
        (
            {"providers": {"p": {"models": [{"id": "x", "input": ["audio"]}]}}},
            "providers.p.models.0.input.0",
            "text",
        ),
        (
            {"providers": {"p": {"models": [{"id": "x", "cost": {"input": 1}}]}}},
            "providers.p.models.0.cost.output",
            "required",
        ),
        (
            {"providers": {"p": {"models": [{"id": "x"}]}}},
            "providers.p",
            '"baseUrl" is required when defining custom models',
        ),
        (
            {"providers": {"p": {"baseUrl": "u", "models": [{"id": "x"}]}}},
            "providers.p",
            '"apiKey" is required',
        ),
        (
            {"providers": {"p": {"baseUrl": "u", "apiKey": "k", "models": [{"id": "x"}]}}},
            "providers.p.models.0",
            'no "api" specified',
        ),
        (
            {"providers": {"openai": {"models": [{"id": "x", "contextWindow": 0}]}}},
            "providers.openai.models.0.contextWindow",
            "invalid contextWindow",
        ),
        ({"providers": {"p": {}}}, "providers.p", "must specify"),
        (
            {"providers": {"p": {"baseUrl": "u", "headers": {"a": 1}}}},
            "providers.p.headers.a",
            "expected a string",
        ),
    ],
)
def test_bad_models_json_raises_with_the_fault_path(
    tmp_path: Path, doc: Any, where: str, detail: str
) -> None:
    """A file that breaks Pi's schema or rules raises ModelsJsonError naming where."""
    path = write(tmp_path, json.dumps(doc))
    with pytest.raises(ModelsJsonError) as info:
        load_models_json(path)
    assert info.value.where == where
    assert detail in info.value.detail
    assert info.value.file == str(path)


def test_unparsable_and_missing_files(tmp_path: Path) -> None:
    """Broken JSON raises; a missing file gives the built-in catalogue."""
    with pytest.raises(ModelsJsonError, match=r"Failed to parse models\.json"):
        load_models_json(write(tmp_path, '{"providers": {'))
    registry = load_models_json(tmp_path / "absent.json")
    assert registry == Registry.builtin()


def test_default_path_follows_pi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PI_CODING_AGENT_DIR (with ~) picks the directory; otherwise ~/.pi/agent."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    assert default_models_json_path() == tmp_path / ".pi/agent/models.json"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "~/custom")
    assert default_models_json_path() == tmp_path / "custom/models.json"
    (tmp_path / "custom").mkdir()
    (tmp_path / "custom/models.json").write_text(
        '{"providers": {"openai": {"baseUrl": "http://gateway"}}}', encoding="utf-8"
    )
    model = load_models_json().get_model("openai", "gpt-5")
    assert model is not None
    assert model.base_url == "http://gateway"


def test_config_values_env_then_literal() -> None:
    """A config value is an env var's value when set and non-empty, else the literal."""
    assert resolve_config_value("KEY", {"KEY": "v"}) == "v"
    assert resolve_config_value("KEY", {"KEY": ""}) == "KEY"
    assert resolve_config_value("sk-literal", {}) == "sk-literal"
    assert resolve_config_value("!printf ''", {}) is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(_json)
def test_comment_stripping_keeps_plain_json(value: Any) -> None:
    """Stripping comments never changes a JSON document without comments."""
    for text in (json.dumps(value), json.dumps(value, indent=1, ensure_ascii=False)):
        assert json.loads(strip_json_comments(text)) == value


def test_comment_stripping_respects_strings() -> None:
    """Comment markers and trailing-comma shapes inside strings survive."""
    text = '{"url": "http://x//y", "s": ",}", // note\n "a": [1, 2,],}'
    assert json.loads(strip_json_comments(text)) == {"url": "http://x//y", "s": ",}", "a": [1, 2]}
