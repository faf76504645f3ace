"""MariaDB (and, later, MySQL 8) behind the Engine interface."""

from __future__ import annotations

from typing import Any

from openslob.config.options import Config
from openslob.engines.api import Check, Engine, ProgressCallback, SetupResult, VerifyResult
from openslob.engines.common import tables
from openslob.engines.common.tables import schema_order
from openslob.engines.mariadb import guard
from openslob.engines.mariadb.connection import (
    SHAPING_SETTINGS,
    check_version,
    connect,
    describe_target,
    global_variables,
    page_size,
)
from openslob.engines.mariadb.dataset import DatasetLoader, TableSpec
from openslob.engines.mariadb.layout import RowLayout, layout_for
from openslob.engines.mariadb.verify import TableVerifier
from openslob.engines.mariadb.workload import install_procedures

DESCRIBED_SETTINGS = (*SHAPING_SETTINGS, "sync_binlog", "log_bin")


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
        with connect(self.connect_kwargs) as conn:
            version = check_version(conn)
            settings = global_variables(conn, DESCRIBED_SETTINGS)
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
        schemas = sorted({spec.schema for spec in specs}, key=schema_order)
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
        todo = self._loader.plan(_specs(config)).todo
        return sum(layout.table_bytes(spec.rows) for spec in todo)

    def verify(self, config: Config) -> VerifyResult:
        layout = self.layout()
        specs = _specs(config)
        checks: list[Check] = []
        with connect(self.connect_kwargs) as conn:
            verifier = TableVerifier(conn, layout)
            for spec, reference in tables.with_references(specs):
                checks += verifier.check(spec, reference)
        return VerifyResult(checks)

    def destroy(self) -> list[str]:
        return self._loader.drop_all()

    def cancel(self) -> None:
        self._loader.cancel()

    def missing_tables(self, config: Config, schemas: list[str]) -> dict[str, str]:
        return tables.missing_tables(self._loader, config, TableSpec, schemas)

    def data_bytes(self, rows: int) -> int:
        return self.layout().table_bytes(rows)

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

    def lock_dataset(self, purpose: str) -> guard.DatasetLock:
        return guard.DatasetLock(self.connect_kwargs, purpose)

    def lock_holder(self) -> str | None:
        return guard.lock_holder(self.connect_kwargs)

    def leftover_loops(self) -> list[tuple[int, str]]:
        return guard.leftover_loops(self.connect_kwargs)

    def end_loops(self, ids: list[int]) -> str:
        guard.end_loops(self.connect_kwargs, ids)
        return "KILL"

    def end_loops_advice(self, ids: list[int]) -> str:
        return "; ".join(f"KILL {i}" for i in sorted(ids))
