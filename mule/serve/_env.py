"""The environment each job's pi gets: explicit and minimal, never the server's token.

pi, its bash tool and its extensions run whatever a model or a prompt asks; anything in their
environment can leak. So a child gets only: the variables a process needs to run at all (PATH,
HOME, locale, TMPDIR, proxies and CA bundles), the API key variable(s) of the job's provider,
what the host allows by name (`ServerConfig.env_allow`, `mule serve --pass-env NAME`), and the
bridge config's own `env`. The server's token is removed by name and by value whatever is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from mule.pi.providers import ENV_API_KEYS

TOKEN_ENV: Final = "MULE_SERVE_TOKEN"
"""The server's token, if the host sets it; never passed to a child."""

BASE_ALLOW: Final[tuple[str, ...]] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TERM",
    "TMPDIR",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
"""What any child may see: enough to run node and reach the network, nothing that authorises."""


def provider_key_names(provider: str) -> tuple[str, ...]:
    """Return the variables pi reads `provider`'s API key from (none for a custom provider)."""
    return ENV_API_KEYS.get(provider, ())


def child_environment(
    environ: Mapping[str, str],
    *,
    provider: str,
    allow: Iterable[str] = (),
    fixed: Mapping[str, str] | None = None,
    secret_values: Iterable[str] = (),
) -> dict[str, str]:
    """Return a job's environment from ours: the base allow-list, the key, `allow`, `fixed`.

    `TOKEN_ENV`, and any variable holding its value or one of `secret_values`, is left out.
    """
    names = [*BASE_ALLOW, *provider_key_names(provider), *allow]
    env = {n: environ[n] for n in names if n in environ}
    env.update(fixed or {})
    values = {v for v in (environ.get(TOKEN_ENV), *secret_values) if v}
    return {k: v for k, v in env.items() if k != TOKEN_ENV and v not in values}


__all__ = ["BASE_ALLOW", "TOKEN_ENV", "child_environment", "provider_key_names"]
