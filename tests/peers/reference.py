"""Fixtures: reference peer (filled in by its owner)."""
