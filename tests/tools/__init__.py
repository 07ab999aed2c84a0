"""Tests of mule.tools: the coding tools and their workspace."""
