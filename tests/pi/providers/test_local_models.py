"""Local and OpenAI-compatible servers from Python: `custom_model`, `MULE_API_KEY` or no key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from attrs import evolve

import mule
from mule.pi import StreamOptions
from mule.pi.models import custom_model, get_model
from mule.pi.providers import ProviderSetupError, custom_api_key
from mule.testing.fake_openai import FakeOpenAI, chat_text


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def _inp(model: mule.pi.Model, **kw: object) -> mule.MuleRunInput:
    return mule.MuleRunInput(model=model, system_prompt="", messages="Hi", **kw)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_local_server_needs_no_key(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MULE_API_KEY", raising=False)
    server.push(chat_text("Hello from llama."))
    out = await mule.run(_inp(custom_model("llama3.2", server.base_url)))
    assert out.text == "Hello from llama."
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer none"
    assert request["body"]["model"] == "llama3.2"


@pytest.mark.anyio
async def test_mule_api_key_is_the_custom_servers_key(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MULE_API_KEY", "sk-local")
    server.push(chat_text("a"), chat_text("b"))
    model = custom_model("qwen", server.base_url, provider="my-vllm")
    await mule.run(_inp(model))
    await mule.run(_inp(model, stream_options=StreamOptions(api_key="sk-explicit")))
    keys = [r["headers"]["authorization"] for r in server.requests]
    assert keys == ["Bearer sk-local", "Bearer sk-explicit"]  # an explicit key wins


@pytest.mark.anyio
async def test_a_registry_provider_never_falls_back_to_mule_api_key(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MULE_API_KEY", "sk-local")
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    groq = get_model("groq", "llama-3.3-70b-versatile")
    assert groq is not None
    with pytest.raises(mule.MuleRunFailed) as caught:
        await mule.run(_inp(evolve(groq, base_url=server.base_url)))
    assert isinstance(caught.value.error.cause, ProviderSetupError)
    assert "No API key for provider: groq" in str(caught.value.error.cause)
    assert server.requests == []


def test_custom_api_key_only_for_providers_pi_does_not_know() -> None:
    env = {"MULE_API_KEY": "k"}
    assert custom_api_key("local", env) == "k"
    assert custom_api_key("local", {}) == "none"
    assert custom_api_key("openai", env) is None
    assert custom_api_key("anthropic", env) is None


def test_custom_model_defaults() -> None:
    model = custom_model("m", "http://127.0.0.1:8080/v1/", api="anthropic-messages")
    assert (model.provider, model.api, model.base_url) == (
        "local",
        "anthropic-messages",
        "http://127.0.0.1:8080/v1",
    )
    assert model.context_window > 0
    assert model.max_tokens > 0
