"""The machinery behind the client facade: the engine, its options, persistence and ownership in a session store,
when a turn may be acknowledged, sessions lost again after a recovery. The modules here are private; this
package imports nothing itself."""
