"""Fixtures: python_sdk peer (filled in by its owner)."""
