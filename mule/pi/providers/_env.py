"""Which environment variable holds each provider's API key (Pi's `getEnvApiKey`)."""

from __future__ import annotations

import os
from collections.abc import Mapping

# Earlier names win: Anthropic's OAuth token takes precedence over its API key, as in Pi.
ENV_API_KEYS: Mapping[str, tuple[str, ...]] = {
    "github-copilot": ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"),
    "anthropic": ("ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
    "azure-openai-responses": ("AZURE_OPENAI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "google": ("GEMINI_API_KEY",),
    "google-vertex": ("GOOGLE_CLOUD_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "minimax-cn": ("MINIMAX_CN_API_KEY",),
    "moonshotai": ("MOONSHOT_API_KEY",),
    "moonshotai-cn": ("MOONSHOT_API_KEY",),
    "huggingface": ("HF_TOKEN",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "opencode": ("OPENCODE_API_KEY",),
    "opencode-go": ("OPENCODE_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",),
    "cloudflare-workers-ai": ("CLOUDFLARE_API_KEY",),
    "cloudflare-ai-gateway": ("CLOUDFLARE_API_KEY",),
    "xiaomi": ("XIAOMI_API_KEY",),
    "xiaomi-token-plan-cn": ("XIAOMI_TOKEN_PLAN_CN_API_KEY",),
    "xiaomi-token-plan-ams": ("XIAOMI_TOKEN_PLAN_AMS_API_KEY",),
    "xiaomi-token-plan-sgp": ("XIAOMI_TOKEN_PLAN_SGP_API_KEY",),
}

# Stands for ambient credentials (Vertex ADC, AWS) that the provider resolves itself.
AMBIENT_CREDENTIALS = "<authenticated>"

_AWS_VARS = (
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)


def env_api_key(provider: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Return the provider's API key from the environment, or None.

    >>> env_api_key("openai", {"OPENAI_API_KEY": "sk-1"})
    'sk-1'
    """
    env = os.environ if environ is None else environ
    for name in ENV_API_KEYS.get(provider, ()):
        if env.get(name):
            return env[name]
    if provider == "google-vertex" and _vertex_adc(env):
        return AMBIENT_CREDENTIALS
    if provider == "amazon-bedrock" and (
        any(env.get(v) for v in _AWS_VARS)
        or (env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"))
    ):
        return AMBIENT_CREDENTIALS
    return None


def _vertex_adc(env: Mapping[str, str]) -> bool:
    creds = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    # os.path, not pathlib: pathlib (with urllib and ipaddress) is not worth `import mule`'s time.
    path = creds or os.path.join(
        os.path.expanduser("~"), ".config", "gcloud", "application_default_credentials.json"
    )
    project = env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT")
    return bool(project and env.get("GOOGLE_CLOUD_LOCATION") and os.path.exists(path))


__all__ = ["AMBIENT_CREDENTIALS", "ENV_API_KEYS", "env_api_key"]
