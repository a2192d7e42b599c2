"""Bringing sessions back after a reconnect: the decision table, the recoverer, probing instances, continuity,
the ways agents say "not found", settings restored, replay windows. The modules here are private; this package
imports nothing itself."""
