"""Tests of mule.pi.models: the catalogue and custom models."""
