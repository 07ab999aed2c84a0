"""Agent profiles: named pi configurations the server's owner defines and clients pick by name.

A client never names a file, a directory or a flag: it names an agent (`"agent": "reviewer"`),
and the owner's profile says which model, prompt, tools, extensions and skills that agent has,
and which of the per-job settings (`OVERRIDABLE`) clients may still change on top of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, final

import attrs
from attrs import field, frozen

from mule.pirc import BridgeConfig, ConfigError, ThinkingOption

# What a client may set per job in `POST /jobs` {"config": {...}}; everything else (the pi
# executable, directories, extensions, skills, environment, API key) is fixed by whoever
# started the server, or by the agent profile the client picked.
OVERRIDABLE: Final[frozenset[str]] = frozenset(
    {"provider", "model", "thinking", "tools", "no_tools", "system_prompt", "append_system_prompt"}
)
_THINKING: Final = ("off", "minimal", "low", "medium", "high", "xhigh")
_AGENT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# The profile fields that replace the server's bridge config's (None: keep the server's).
_BRIDGE_FIELDS: Final = (
    "provider",
    "model",
    "thinking",
    "tools",
    "no_tools",
    "system_prompt",
    "append_system_prompt",
    "extensions",
    "skills",
)


def _check_overridable(instance: AgentProfile, attribute: object, keys: frozenset[str]) -> None:
    extra = keys - OVERRIDABLE
    if extra:
        raise ValueError(f"overridable names settings no client may set: {sorted(extra)}")


@final
@frozen(kw_only=True)
class AgentProfile:
    """One agent a client may pick by name: what it runs, and what a client may still change.

    Every field left None keeps the value of the server's bridge config. Paths (extensions,
    skills) are the owner's and reach pi as given; prompt texts reach pi as text (see the pirc
    guide), so a profile's prompt is never read as a file either.

    Attributes:
        description: What the agent is for (shown to clients by `GET /agents`).
        provider: pi's provider.
        model: The model id within the provider.
        thinking: pi's thinking level.
        tools: pi's built-in tools to enable.
        no_tools: Run pi with no tools at all.
        system_prompt: The text that replaces pi's system prompt.
        append_system_prompt: Texts appended to the system prompt.
        extensions: Extension files to load.
        skills: Skill files or directories to load.
        overridable: The per-job settings a client may still set on top (a subset of
            `OVERRIDABLE`; default none: the profile is what runs).

    """

    description: str = ""
    provider: str | None = None
    model: str | None = None
    thinking: ThinkingOption | None = None
    tools: tuple[str, ...] | None = None
    no_tools: bool | None = None
    system_prompt: str | None = None
    append_system_prompt: tuple[str, ...] | None = None
    extensions: tuple[str, ...] | None = None
    skills: tuple[str, ...] | None = None
    overridable: frozenset[str] = field(default=frozenset(), validator=_check_overridable)

    def apply(self, base: BridgeConfig) -> BridgeConfig:
        """Return `base` with this profile's settings; raise `ConfigError` if pi must not run it."""
        changes = {
            name: getattr(self, name) for name in _BRIDGE_FIELDS if getattr(self, name) is not None
        }
        return attrs.evolve(base, **changes)

    def to_json(self, name: str) -> dict[str, Any]:
        """Return what a client sees of the agent: never its prompt texts or paths."""
        return {
            "name": name,
            "description": self.description,
            "provider": self.provider,
            "model": self.model,
            "overridable": sorted(self.overridable),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AgentProfile:
        """Build a profile from its JSON form (lists for the tuples); raise ValueError if bad."""
        names = {a.name for a in attrs.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown agent settings: {sorted(unknown)}")
        kw: dict[str, Any] = {}
        for key, value in data.items():
            if key in ("tools", "append_system_prompt", "extensions", "skills"):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"{key} must be a list of strings")
                kw[key] = tuple(value)
            elif key == "overridable":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError("overridable must be a list of setting names")
                kw[key] = frozenset(value)
            elif key == "thinking":
                if value not in _THINKING:
                    raise ValueError(f"thinking must be one of {list(_THINKING)}")
                kw[key] = value
            elif key == "no_tools":
                if not isinstance(value, bool):
                    raise ValueError("no_tools must be a boolean")
                kw[key] = value
            else:
                if not isinstance(value, str):
                    raise ValueError(f"{key} must be a string")
                kw[key] = value
        return cls(**kw)


def check_agents(
    base: BridgeConfig, agents: Mapping[str, AgentProfile], default: str | None
) -> None:
    """Refuse a bad agent name, default, or profile (ValueError naming the agent).

    Names must be plain; the default must be one of the agents; each profile applied to the
    server's bridge config must make a valid one.
    """
    for name, profile in agents.items():
        if not _AGENT_NAME.fullmatch(name):
            raise ValueError(
                f"agent name {name[:40]!r} must be plain (letters, digits, . _ -; up to 64)"
            )
        try:
            profile.apply(base)
        except ConfigError as exc:
            raise ValueError(f"agent {name!r}: {exc}") from None
    if default is not None and default not in agents:
        raise ValueError(f"default_agent {default!r} is not one of the agents")


__all__ = ["OVERRIDABLE", "AgentProfile", "check_agents"]
