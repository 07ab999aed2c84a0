"""Kits for hosts testing with mule.

- `mule.testing.strategies`: hypothesis strategies for every `mule.pi` value and its wire JSON;
  `mule.testing.effects_strategies`: for mule's own values (events, outcomes, checkpoints).
- `mule.testing.crash`: the crash matrix (SIGKILL at chosen points, recover, finish) for any
  transcript owner (`mule.journal.TranscriptOwner`).
- `mule.testing.fake_openai`, `fake_anthropic`, `fake_google`: real HTTP servers on loopback that
  speak each vendor's streaming protocol from a script.
"""
