"""Fixtures: typescript_sdk peer (filled in by its owner)."""
