"""The session store contract (``acp_client.testing.store_contract``) and the ownership contract
(``acp_client.testing.lease_contract``) on both built-in stores: SQLite in a temporary file,
PostgreSQL on a real throwaway server (``tests/peers/postgres.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_client.testing.lease_contract import SharedSessionStoreContract
from acp_client.testing.store_contract import SessionStoreContract
from tests.peers.postgres import Database

from ._backends import PostgresBackend, SqliteBackend


class TestSqliteSessionStore(SessionStoreContract):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[SqliteBackend]:
        backend = SqliteBackend(tmp_path)
        yield backend
        backend.close()


class TestPostgresSessionStore(SessionStoreContract):
    @pytest.fixture
    def backend(self, postgres_database: Database) -> Iterator[PostgresBackend]:
        backend = PostgresBackend(postgres_database)
        yield backend
        backend.close()


class TestPostgresSessionStoreLeases(SharedSessionStoreContract):
    @pytest.fixture
    def backend(self, postgres_database: Database) -> Iterator[PostgresBackend]:
        backend = PostgresBackend(postgres_database)
        yield backend
        backend.close()
