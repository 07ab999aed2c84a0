"""Tests of mule.promise: the facade that raises, and its tools and sync entry."""
