"""A throwaway PostgreSQL server for tests and benchmarks (no pytest here: plain start and stop).

:class:`TemporaryPostgres` runs the server binaries of the machine (Debian's ``postgresql``
package): ``initdb`` into a fresh temporary directory, ``pg_ctl start`` listening on a Unix socket
in that directory and on a free loopback port, and ``pg_ctl stop`` (the directory removed) at the
end. The cluster trusts local connections (it is reachable only from this machine, and only for
as long as the test runs) and is tuned for speed over durability (``fsync`` off).

PostgreSQL refuses to run as root. When this process is root, the server runs as the ``postgres``
system user (created by Debian's package), or as an unprivileged ``acp-postgres`` user created for
the purpose when there is none; the temporary directory is handed to that user.

Its databases are made with :meth:`TemporaryPostgres.create_database` (psycopg, the ``postgres``
extra) or the server's own ``psql``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = ["PostgresNotInstalled", "TemporaryPostgres", "find_postgres_bindir"]

#: What is missing when the binaries are not found, and how to get them.
INSTALL_HINT: Final = (
    "the PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found: install Debian's postgresql "
    "package (apt-get install postgresql), or put the directory holding them on PATH"
)
_SUPERUSER: Final = "postgres"
_FALLBACK_USER: Final = "acp-postgres"
_START_TIMEOUT: Final = 60
#: The server's settings: loopback only, speed over durability.
_SETTINGS: Final = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    " -c max_connections=200"
)


class PostgresNotInstalled(RuntimeError):
    """No PostgreSQL server binaries on this machine (the message says what to install)."""


def find_postgres_bindir() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Looked for in order: ``pg_config --bindir``; the newest ``/usr/lib/postgresql/*/bin`` (Debian
    keeps them off ``PATH``); the directory of an ``initdb`` on ``PATH``.

    Raises:
        PostgresNotInstalled: None of these holds the three binaries.
    """
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True)
            candidates.append(Path(out.stdout.strip()))

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", Path(path).parent.name))

    candidates += [Path(item) for item in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    initdb = shutil.which("initdb")
    if initdb is not None:
        candidates.append(Path(os.path.realpath(initdb)).parent)
    for directory in candidates:
        if all((directory / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return directory
    raise PostgresNotInstalled(INSTALL_HINT)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _server_user() -> str | None:
    """The user the server runs as: ``None`` (this one) unless this process is root."""
    if os.geteuid() != 0:
        return None
    import pwd

    for name in (_SUPERUSER, _FALLBACK_USER):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", _FALLBACK_USER],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return _FALLBACK_USER


class TemporaryPostgres:
    """One throwaway PostgreSQL cluster (see the module docstring); a context manager.

    Attributes:
        bindir: Where the server binaries are.
        directory: The temporary directory (the cluster in ``data/``, the socket, the log).
        port: The loopback TCP port (also the Unix socket's number).
        user: The superuser every connection uses (no password: the cluster trusts local users).

    Raises:
        PostgresNotInstalled: The server binaries are not on this machine.
    """

    def __init__(self, *, bindir: Path | None = None) -> None:
        self.bindir = bindir if bindir is not None else find_postgres_bindir()
        self.directory: Path | None = None
        self.port = 0
        self.user = _SUPERUSER
        self._run_as = _server_user()
        self._databases = 0

    def _command(self, name: str, *args: str) -> list[str]:
        argv = [str(self.bindir / name), *args]
        return argv if self._run_as is None else ["runuser", "-u", self._run_as, "--", *argv]

    def _run(self, name: str, *args: str, timeout: float = _START_TIMEOUT) -> None:
        done = subprocess.run(self._command(name, *args), capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    @property
    def data(self) -> Path:
        assert self.directory is not None, "the server was not started"
        return self.directory / "data"

    @property
    def log_file(self) -> Path:
        assert self.directory is not None, "the server was not started"
        return self.directory / "server.log"

    def start(self) -> TemporaryPostgres:
        """Create the cluster (first call) and start the server; returns ``self``.

        Raises:
            RuntimeError: ``initdb`` or ``pg_ctl`` failed (the message holds their output).
        """
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="acp-pg-"))
            if self._run_as is not None:
                shutil.chown(self.directory, user=self._run_as, group=None)
            flags = ("--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
            self._run("initdb", "-D", str(self.data), f"--username={self.user}", *flags)
            self.port = _free_port()
        options = f"-p {self.port} -k {self.directory} {_SETTINGS}"
        log = str(self.log_file)
        self._run("pg_ctl", "start", "-D", str(self.data), "-w", "-t", str(_START_TIMEOUT), "-l", log, "-o", options)
        return self

    def stop(self, *, mode: str = "fast") -> None:
        """Stop the server (``mode``: ``fast`` or ``immediate``, a crash); the cluster is kept."""
        if self.directory is not None and (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w")

    def restart(self) -> None:
        """Stop and start again (every connection is cut; the data stays)."""
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """Stop the server and remove the temporary directory (idempotent)."""
        if self.directory is None:
            return
        try:
            self.stop(mode="immediate")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def log(self) -> str:
        """The server's log so far (for a failing test's message)."""
        try:
            return self.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()

    def dsn(self, dbname: str = "postgres", *, tcp: bool = False) -> str:
        """A libpq keyword DSN for ``dbname`` (over the Unix socket, or loopback TCP with ``tcp``)."""
        host = "127.0.0.1" if tcp else str(self.directory)
        return f"host={host} port={self.port} user={self.user} dbname={dbname}"

    def url(self, dbname: str = "postgres") -> str:
        """A ``postgresql://`` URL for ``dbname`` over loopback TCP."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def execute(self, sql: str, *, dbname: str = "postgres") -> None:
        """Run SQL statements as the superuser (psycopg when installed, else ``psql``)."""
        try:
            import psycopg
        except ImportError:
            self._psql(sql, dbname)
            return
        with psycopg.connect(self.dsn(dbname), autocommit=True) as conn:
            conn.execute(sql.encode())

    def _psql(self, sql: str, dbname: str) -> None:
        argv = [str(self.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", self.dsn(dbname), "-c", sql]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr}")

    def create_database(self, name: str | None = None) -> str:
        """A new empty database (named ``name``, or ``test_N``); returns its name."""
        if name is None:
            self._databases += 1
            name = f"test_{os.getpid()}_{self._databases}"
        self.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, cutting whoever is still connected to it."""
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def terminate(self, dbname: str) -> int:
        """Cut every connection to ``dbname`` (as a server restart or a network drop would)."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchall()
        return len(rows)
