"""Tests of mule.effects: the pure machine, the interpreter, the core scenarios (section 6)."""
