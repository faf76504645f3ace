"""MariaDB (and, later, MySQL 8) behind the Engine interface."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from openslob.engines.common.engine import SlobEngine
from openslob.engines.common.rows import one
from openslob.engines.mariadb import guard
from openslob.engines.mariadb.connection import (
    SHAPING_SETTINGS,
    check_version,
    connect,
    describe_target,
    global_variables,
    page_size,
)
from openslob.engines.mariadb.datafiles import table_compressibility
from openslob.engines.mariadb.dataset import DatasetLoader, TableSpec
from openslob.engines.mariadb.layout import RowLayout, layout_for
from openslob.engines.mariadb.precondition import RowRewriter
from openslob.engines.mariadb.verify import TableVerifier
from openslob.engines.mariadb.workload import install_procedures
from openslob.model.compressibility import Compressibility

DESCRIBED_SETTINGS = (*SHAPING_SETTINGS, "sync_binlog", "log_bin")


class MariaDBEngine(SlobEngine):
    """connect_kwargs: pymysql.connect keyword arguments (e.g. EmbeddedMariaDB.connect_kwargs())."""

    name = "mariadb"
    table_spec = TableSpec
    guard = guard

    def __init__(self, connect_kwargs: dict[str, Any]) -> None:
        super().__init__(connect_kwargs, DatasetLoader(connect_kwargs), RowRewriter(connect_kwargs))
        self.connect_kwargs = connect_kwargs
        self._layout: RowLayout | None = None

    def layout(self) -> RowLayout:
        """Row width and rows per leaf page at the server's innodb_page_size."""
        if self._layout is None:
            with connect(self.connect_kwargs) as conn:
                check_version(conn)
                self._layout = layout_for(page_size(conn))
        return self._layout

    def check_server(self) -> None:
        self._layout = None  # read it again: the version check comes with it
        self.layout()

    @contextlib.contextmanager
    def verifier(self) -> Iterator[TableVerifier]:
        layout = self.layout()
        with connect(self.connect_kwargs) as conn:
            yield TableVerifier(conn, layout)

    def install_after_load(self, schemas: list[str]) -> None:
        self.install_procedures(schemas)

    def describe(self) -> dict[str, Any]:
        with connect(self.connect_kwargs) as conn:
            version = check_version(conn)
            settings = global_variables(conn, DESCRIBED_SETTINGS)
        return {
            "name": self.name,
            "version": version,
            "target": describe_target(self.connect_kwargs),
            "settings": settings,
        }

    def relation_compressibility(
        self, relations: list[str], sample_bytes: int
    ) -> list[Compressibility]:
        page_bytes = self.layout().page_size
        with connect(self.connect_kwargs) as conn:
            return [
                table_compressibility(conn, schema, table, page_bytes, sample_bytes)
                for schema, table in (name.split(".", 1) for name in relations)
            ]

    def data_bytes(self, rows: int) -> int:
        return self.layout().table_bytes(rows)

    def install_procedures(self, schemas: list[str]) -> None:
        with connect(self.connect_kwargs) as conn:
            install_procedures(conn, schemas)

    def identity(self) -> tuple[str, str]:
        """The server (host, port, data directory): the SLOB databases are server-wide."""
        with connect(self.connect_kwargs) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@hostname, @@port, @@datadir")
            host, port, datadir = one(cur.fetchone())
        return f"{host}:{port}:{datadir}", ""

    def data_group(self) -> str | None:
        """A Galera node's cluster (wsrep_cluster_state_uuid): every node holds all the data."""
        with connect(self.connect_kwargs) as conn, conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_state_uuid'")
            row = cur.fetchone()
            cur.execute("SELECT @@wsrep_on")
            (wsrep_on,) = one(cur.fetchone())
        return f"galera:{row[1]}" if row and row[1] and int(wsrep_on) else None

    def catch_up(self) -> None:
        """A causal read (wsrep_sync_wait): returns once this node has applied every write
        set the cluster ordered before it, the loop's procedures and tables included."""
        with connect(self.connect_kwargs) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION wsrep_sync_wait = 1")
            cur.execute("SELECT 1")

    def end_loops(self, ids: list[int]) -> str:
        guard.end_loops(self.connect_kwargs, ids)
        return "KILL"

    def end_loops_advice(self, ids: list[int]) -> str:
        return "; ".join(f"KILL {i}" for i in sorted(ids))
