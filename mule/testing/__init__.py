"""Test helpers for mule users: hypothesis strategies in `mule.testing.strategies`."""
