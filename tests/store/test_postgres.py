"""PostgresSessionStore beyond the contract: the optional driver, the DSN as shown, schemas,
bounded connections, and a database that goes away (connections cut, the server stopped)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acp_client import ConfigurationError, SessionStoreError, SessionStoreUnavailable
from acp_client.store import PostgresSessionStore
from acp_client.store._pg_schema import redact_dsn
from acp_client.testing.store_contract import EP, record
from tests.peers.postgres import Database

ROOT = Path(__file__).resolve().parents[2]


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )


def test_importing_the_store_does_not_import_psycopg() -> None:
    done = python(
        """
        import sys
        from acp_client.store import PostgresSessionStore
        from acp_client import PostgresSessionStore as again
        assert again is PostgresSessionStore
        assert not [name for name in sys.modules if name.startswith("psycopg")], sorted(sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr


def test_without_psycopg_the_error_is_typed_and_names_the_extra() -> None:
    done = python(
        """
        import sys
        sys.modules["psycopg"] = None  # not installed
        from acp_client import SessionStoreDriverMissing, SessionStoreError
        from acp_client.store import PostgresSessionStore
        try:
            PostgresSessionStore("postgresql://app:hunter2@db.example/sessions")
        except SessionStoreDriverMissing as exc:
            assert isinstance(exc, SessionStoreError)
            assert "hunter2" not in str(exc) and "hunter2" not in exc.path, exc
            print(exc)
        else:
            raise SystemExit("no error")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'psycopg[binary]>=3.1' 'psycopg-pool>=3.2'" in done.stdout
    assert "the 'postgres' extra" in done.stdout


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://app:hunter2@db.example:5432/sessions", "postgresql://app:***@db.example:5432/sessions"),
        (
            "postgres://app@db.example/s?password=hunter2&sslmode=require",
            "postgres://app@db.example/s?password=***&sslmode=require",
        ),
        ("host=db.example user=app password=hunter2 dbname=s", "host=db.example user=app password=*** dbname=s"),
        ("host=db password = 'hun ter2' dbname=s", "host=db password = *** dbname=s"),
        ("host=/run/postgresql dbname=s", "host=/run/postgresql dbname=s"),
    ],
)
def test_the_dsn_is_shown_without_its_password(dsn: str, shown: str) -> None:
    assert redact_dsn(dsn) == shown


def test_an_unreachable_database_is_a_typed_error_naming_it_without_the_password(tmp_path: Path) -> None:
    dsn = f"host={tmp_path} port=1 user=app password=hunter2 dbname=nowhere"  # no server on that socket
    with pytest.raises(SessionStoreUnavailable, match="cannot reach the database") as info:
        PostgresSessionStore(dsn, connect_timeout=2)
    assert "hunter2" not in str(info.value) and "hunter2" not in info.value.path
    assert "dbname=nowhere" in info.value.path


@pytest.mark.parametrize("schema", ["", "has space", 'quo"te', "pg_catalog", "x" * 64, "semi;colon"])
def test_a_schema_name_that_is_not_a_plain_identifier_is_refused(schema: str) -> None:
    with pytest.raises(ConfigurationError, match="schema"):
        PostgresSessionStore("host=/nonexistent dbname=x", schema=schema)


@pytest.mark.parametrize("options", [{"pool_size": 0}, {"connect_timeout": 0}, {"reconnect_timeout": -1}])
def test_bad_options_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        PostgresSessionStore("host=/nonexistent dbname=x", **options)  # type: ignore[arg-type]


def test_a_url_and_keywords_reach_the_same_store(postgres_database: Database) -> None:
    with PostgresSessionStore(postgres_database.url) as by_url:
        by_url.save(record())
        assert by_url.path.startswith("postgresql://") and by_url.path.endswith("(schema acp_client)")
    with PostgresSessionStore(postgres_database.dsn) as by_keywords:
        assert by_keywords.load(EP) == [record()]


def test_two_schemas_in_one_database_are_two_stores(postgres_database: Database) -> None:
    with (
        PostgresSessionStore(postgres_database.dsn, schema="app_one") as one,
        PostgresSessionStore(postgres_database.dsn, schema="app_two") as two,
    ):
        one.save(record("a"))
        two.save(record("b"))
        assert [item.session_id for item in one.load(EP)] == ["a"]
        assert [item.session_id for item in two.load(EP)] == ["b"]
        assert (one.schema, two.schema) == ("app_one", "app_two")


def test_create_false_does_not_create(postgres_database: Database) -> None:
    with pytest.raises(SessionStoreError, match="does not exist"):
        PostgresSessionStore(postgres_database.dsn, create=False)
    with PostgresSessionStore(postgres_database.dsn):
        pass
    with PostgresSessionStore(postgres_database.dsn, create=False) as store:
        assert store.schema_version >= 1


def test_a_closed_store_raises_a_store_error(postgres_database: Database) -> None:
    store = PostgresSessionStore(postgres_database.dsn)
    store.close()
    store.close()
    assert store.closed
    with pytest.raises(SessionStoreError, match="closed"):
        store.load(EP)
    with pytest.raises(SessionStoreError, match="closed"):
        store.save(record())
