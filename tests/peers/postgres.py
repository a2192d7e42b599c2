"""Fixtures: a real throwaway PostgreSQL server (``acp_client.testing.postgres``) for the store tests.

- ``postgres_server`` (session): one cluster for the whole run, ``initdb`` into a temporary
  directory and started with ``pg_ctl`` (a Unix socket in that directory and a loopback port),
  stopped and removed after the session. As root, the server runs as the ``postgres`` system user.
- ``postgres_database`` (per test): a fresh empty database on it (``CREATE DATABASE``, ~30 ms),
  dropped after the test; its value is a :class:`Database` (name, DSN, the server).

When the server binaries are missing the tests that use them FAIL with what to install (Debian's
``postgresql`` package; ``.ci/run`` installs it): PostgreSQL is part of this project's test setup,
and a skip would hide that the PostgreSQL store went untested.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest

from acp_client.testing.postgres import PostgresNotInstalled, TemporaryPostgres

__all__ = ["Database", "postgres_database", "postgres_server"]


@attrs.frozen
class Database:
    """One test's database on the session's server."""

    server: TemporaryPostgres
    name: str

    @property
    def dsn(self) -> str:
        """A libpq keyword DSN over the Unix socket."""
        return self.server.dsn(self.name)

    @property
    def url(self) -> str:
        """A ``postgresql://`` URL over loopback TCP."""
        return self.server.url(self.name)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres]:
    try:
        server = TemporaryPostgres()
    except PostgresNotInstalled as exc:
        pytest.fail(str(exc), pytrace=False)
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def postgres_database(postgres_server: TemporaryPostgres) -> Iterator[Database]:
    name = postgres_server.create_database()
    try:
        yield Database(postgres_server, name)
    finally:
        postgres_server.drop_database(name)
