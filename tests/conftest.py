"""Shared test configuration. Peer fixtures live in ``tests/peers/`` and are loaded here."""

pytest_plugins = [
    "tests.peers.python_sdk",
    "tests.peers.haproxy",
    "tests.peers.reference",
    "tests.peers.typescript_sdk",
]
