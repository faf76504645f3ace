"""PostgreSQL behind the Engine interface."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg

from openslob.config.option import BLOCK_SIZE
from openslob.engines.common.engine import SlobEngine
from openslob.engines.common.rows import one
from openslob.engines.postgres import guard
from openslob.engines.postgres.datafiles import relation_compressibility
from openslob.engines.postgres.dataset import DatasetLoader, TableSpec
from openslob.engines.postgres.precondition import PageRewriter
from openslob.engines.postgres.verify import TableVerifier, amcheck_available
from openslob.engines.postgres.workload import install_procedures
from openslob.model.compressibility import Compressibility
from openslob.model.errors import SetupError
from openslob.model.secrets import redact

MIN_SERVER_VERSION = 130000
DESCRIBED_SETTINGS = (
    "shared_buffers",
    "max_connections",
    "block_size",
    "track_io_timing",
    "track_wal_io_timing",
    "synchronous_commit",
    "fsync",
    "full_page_writes",
    "data_checksums",
    "debug_io_direct",
    "io_method",
    "wal_level",
    "max_wal_size",
    "shared_preload_libraries",
)


class PostgresEngine(SlobEngine):
    name = "postgresql"
    table_spec = TableSpec
    guard = guard

    def __init__(self, conninfo: str) -> None:
        super().__init__(conninfo, DatasetLoader(conninfo), PageRewriter(conninfo))
        self.conninfo = conninfo

    def _connect(self) -> psycopg.Connection:
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True, application_name="openslob")
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[-1]
            raise SetupError(f"cannot connect to {redact(self.conninfo)}: {reason}") from exc
        if conn.info.server_version < MIN_SERVER_VERSION:
            conn.close()
            raise SetupError(
                f"PostgreSQL {conn.info.server_version // 10000} is too old (need 13 or later)"
            )
        block_size = int(one(conn.execute("SHOW block_size").fetchone())[0])
        if block_size != BLOCK_SIZE:
            conn.close()
            raise SetupError(f"block_size is {block_size}; openslob's layout needs {BLOCK_SIZE}")
        return conn

    def describe(self) -> dict[str, Any]:
        with self._connect() as conn:
            version = one(conn.execute("SHOW server_version").fetchone())[0]
            settings: dict[str, str] = dict(
                conn.execute(
                    "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
                    [list(DESCRIBED_SETTINGS)],
                ).fetchall()
            )
        return {
            "name": self.name,
            "version": version,
            "target": redact(self.conninfo),
            "settings": settings,
        }

    def identity(self) -> tuple[str, str]:
        """(cluster, database): the same for two conninfos that reach the same database.
        The cluster is its system identifier, or its address and port for a role that may
        not read pg_control_system()."""
        with self._connect() as conn:
            (database,) = one(conn.execute("SELECT current_database()").fetchone())
            try:
                with conn.transaction():
                    (cluster,) = one(
                        conn.execute(
                            "SELECT system_identifier::text FROM pg_control_system()"
                        ).fetchone()
                    )
            except psycopg.errors.InsufficientPrivilege:
                (cluster,) = one(
                    conn.execute(
                        "SELECT coalesce(host(inet_server_addr()), 'socket') || ':' ||"
                        " current_setting('port')"
                    ).fetchone()
                )
        return cluster, database

    def check_server(self) -> None:
        self._connect().close()  # version and block size

    @contextlib.contextmanager
    def verifier(self) -> Iterator[TableVerifier]:
        with self._connect() as conn:
            yield TableVerifier(conn, amcheck_available(conn))

    def relation_compressibility(
        self, relations: list[str], sample_bytes: int
    ) -> list[Compressibility]:
        with self._connect() as conn:
            return [relation_compressibility(conn, name, sample_bytes) for name in relations]

    def data_bytes(self, rows: int) -> int:
        return rows * BLOCK_SIZE  # one row per page

    def install_procedures(self, schemas: list[str]) -> None:
        with self._connect() as conn:
            install_procedures(conn, schemas)

    def end_loops(self, ids: list[int]) -> str:
        guard.end_loops(self.conninfo, ids)
        return "pg_terminate_backend"

    def end_loops_advice(self, ids: list[int]) -> str:
        return f"SELECT pg_terminate_backend(pid) FROM unnest(ARRAY{sorted(ids)}) pid"
