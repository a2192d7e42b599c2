"""Shared test configuration. Peer fixtures live in ``tests/peers/`` and are loaded here."""

pytest_plugins = [
    "tests.peers.python_sdk",
    "tests.peers.haproxy",
    "tests.peers.reference",
    "tests.peers.typescript_sdk",
    # After typescript_sdk, whose cache helpers it imports (so pytest rewrites that module first).
    "tests.peers.real_agents",
]
