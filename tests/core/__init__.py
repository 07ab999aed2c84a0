"""Conformance scenarios for mule's core (section 6 of the loop digest)."""
