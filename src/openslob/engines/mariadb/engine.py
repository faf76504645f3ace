"""MariaDB (and, later, MySQL 8) behind the Engine interface."""

from __future__ import annotations

import math
from typing import Any

from openslob.engines import tables
from openslob.engines.base import Check, Engine, ProgressCallback, SetupResult, VerifyResult
from openslob.engines.mariadb.connection import (
    check_version,
    connect,
    describe_target,
    page_size,
)
from openslob.engines.mariadb.dataset import DatasetLoader, TableSpec
from openslob.engines.mariadb.layout import RowLayout, layout_for
from openslob.engines.mariadb.verify import TableVerifier
from openslob.engines.mariadb.workload import install_procedures
from openslob.options import Config

DESCRIBED_SETTINGS = (
    "innodb_page_size",
    "innodb_buffer_pool_size",
    "innodb_flush_method",
    "innodb_flush_log_at_trx_commit",
    "innodb_doublewrite",
    "innodb_read_ahead_threshold",
    "innodb_random_read_ahead",
    "innodb_change_buffering",
    "innodb_adaptive_hash_index",
    "innodb_flush_neighbors",
    "innodb_log_file_size",
    "innodb_log_buffer_size",
    "performance_schema",
    "max_connections",
    "sync_binlog",
    "log_bin",
)


def _specs(config: Config) -> list[TableSpec]:
    return tables.config_tables(config, TableSpec)


class MariaDBEngine(Engine):
    """connect_kwargs: pymysql.connect keyword arguments (e.g. EmbeddedMariaDB.connect_kwargs())."""

    name = "mariadb"

    def __init__(self, connect_kwargs: dict[str, Any]) -> None:
        self.connect_kwargs = connect_kwargs
        self._loader = DatasetLoader(connect_kwargs)

    def layout(self) -> RowLayout:
        """Row width and rows per leaf page at the server's innodb_page_size."""
        with connect(self.connect_kwargs) as conn:
            check_version(conn)
            return layout_for(page_size(conn))

    def describe(self) -> dict[str, Any]:
        with connect(self.connect_kwargs) as conn, conn.cursor() as cur:
            version = check_version(conn)
            cur.execute(
                "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE"
                " FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME IN %s",
                [tuple(name.upper() for name in DESCRIBED_SETTINGS)],
            )
            settings = {name: str(value) for name, value in cur.fetchall()}
        return {
            "name": self.name,
            "version": version,
            "target": describe_target(self.connect_kwargs),
            "settings": settings,
        }

    def setup(self, config: Config, progress: ProgressCallback | None = None) -> SetupResult:
        """Load what is missing or stale, then (re)create each schema's slob_work."""
        self.layout()  # version first, before anything is changed
        specs = _specs(config)
        result = self._loader.load(specs, config["LOAD_PARALLEL_DEGREE"], progress)
        schemas = sorted({spec.schema for spec in specs}, key=lambda n: (len(n), n))
        with connect(self.connect_kwargs) as conn:
            install_procedures(conn, schemas)
        extra = [s for s in self._loader.existing_schemas() if s not in schemas]
        if extra:
            result.notes.append(
                f"schemas {', '.join(extra)} from an earlier setup are left as they are; "
                "`slob destroy` drops them"
            )
        return result

    def bytes_to_load(self, config: Config) -> int:
        layout = self.layout()
        todo, _ = self._loader.plan(_specs(config))
        pages = sum(math.ceil(spec.rows / layout.rows_per_page) for spec in todo)
        return pages * layout.page_size

    def verify(self, config: Config) -> VerifyResult:
        layout = self.layout()
        specs = _specs(config)
        checks: list[Check] = []
        with connect(self.connect_kwargs) as conn:
            verifier = TableVerifier(conn, layout)
            cf1 = [spec for spec in specs if spec.table == "cf1"]
            for spec in specs:
                reference = None
                if spec.table == "cf1" and len(cf1) > 1:
                    reference = cf1[1] if spec is cf1[0] else cf1[0]
                checks += verifier.check(spec, reference)
        return VerifyResult(checks)

    def destroy(self) -> list[str]:
        return self._loader.drop_all()

    def cancel(self) -> None:
        self._loader.cancel()

    def missing_tables(self, config: Config, schemas: list[str]) -> list[str]:
        return tables.missing_tables(self._loader, config, TableSpec, schemas)

    def data_bytes(self, rows: int) -> int:
        layout = self.layout()
        return math.ceil(rows / layout.rows_per_page) * layout.page_size

    def has_data(self) -> bool:
        return bool(self._loader.existing_schemas())

    def install_procedures(self, schemas: list[str]) -> None:
        with connect(self.connect_kwargs) as conn:
            install_procedures(conn, schemas)

    def identity(self) -> tuple[str, str]:
        """The server (host, port, data directory): the SLOB databases are server-wide."""
        with connect(self.connect_kwargs) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@hostname, @@port, @@datadir")
            host, port, datadir = cur.fetchone()
        return f"{host}:{port}:{datadir}", ""
