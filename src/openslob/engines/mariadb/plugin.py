"""MariaDB (and MySQL) as an openslob engine: the one object the rest of openslob reaches it
through.

Targets: `embedded-mariadb` (a private mariadbd per InnoDB page size, PAGE_SIZE), or an
existing server as mysql://user:password@host:port/ or mariadb://…/?unix_socket=PATH.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from openslob.config.resolve import Config
from openslob.engines.api import (
    Capabilities,
    ConfigView,
    EnginePlugin,
    Finding,
    RunBackend,
    Settings,
    Snapshot,
    Target,
    WindowStats,
)
from openslob.engines.common.work import with_predictions
from openslob.engines.mariadb import galera_stats, horizon, stats
from openslob.engines.mariadb.doctor import diagnose_target
from openslob.engines.mariadb.engine import MariaDBEngine
from openslob.engines.mariadb.galera import GaleraCluster, parse_cluster
from openslob.engines.mariadb.ioshape import engine_io_shape
from openslob.engines.mariadb.layout import layout_for, predicted_work
from openslob.engines.mariadb.runner import MariaDBRunBackend
from openslob.engines.mariadb.server import EmbeddedMariaDB, Secret
from openslob.model.errors import ConfigError
from openslob.model.metrics import Metric
from openslob.model.secrets import redact

URI_SCHEMES = ("mysql://", "mariadb://")
# Purge has fallen behind when the history list grew by more than this share of the window's
# update commits (and by this many at least); with purge keeping up it stayed at 130-210
# throughout a 30 s UPDATE_PCT=100 run.
PURGE_BEHIND_SHARE, PURGE_BEHIND_MIN = 0.5, 100
# Error numbers a user can act on -> model.errors hint names
_HINTS = {
    1044: "privilege",
    1045: "privilege",
    1142: "privilege",
    1143: "privilege",
    1227: "privilege",
    1290: "read_only",
    1792: "read_only",
    1205: "concurrent",
    1213: "concurrent",
    1927: "ended",  # connection was killed
}
# InnoDB's own figures (no PostgreSQL twin), in run.json metrics and each interval's.
METRICS = (
    tuple(
        Metric(key, unit, label, live=True, source="engine", **kw)
        for key, unit, label, kw in (
            (
                "innodb_buffer_pool_misses_per_s",
                "reads/s",
                "InnoDB buffer pool misses",
                {"digits": 0},
            ),
            ("innodb_buffer_pool_hit_pct", "%", "InnoDB buffer pool hit %", {"combine": "same"}),
            ("innodb_pages_written_per_s", "pages/s", "InnoDB pages written", {"digits": 0}),
            ("innodb_dblwr_pages_per_s", "pages/s", "InnoDB doublewrite pages", {"digits": 0}),
            ("innodb_data_fsyncs_per_s", "fsyncs/s", "InnoDB data fsyncs", {}),
            ("innodb_log_waits_per_s", "waits/s", "InnoDB log waits", {}),
            # background flushing, and where it stands at the end of the window / interval
            ("innodb_pages_flushed_per_s", "pages/s", "InnoDB pages flushed", {"digits": 0}),
            ("innodb_checkpoint_age_mb", "MB", "InnoDB checkpoint age (at the end)", {}),
            ("innodb_dirty_pages", "pages", "InnoDB dirty pages (at the end)", {"digits": 0}),
        )
    )
    + galera_stats.METRICS
)


def _page_size(settings: dict[str, str]) -> int:
    return int(settings.get("innodb_page_size") or 0)


class MariaDBWindow(WindowStats):
    """The window's figures from two stats.take_snapshot snapshots."""

    def metrics(
        self,
        before: Snapshot,
        after: Snapshot,
        seconds: float,
        settings: Settings,
        own_commits: int,
    ) -> dict[str, Any]:
        return stats.snapshot_delta(before, after, seconds)

    def details(self, before: Snapshot, after: Snapshot, settings: Settings) -> dict[str, Any]:
        key = "Innodb_history_list_length"
        first = ((before or {}).get("status") or {}).get(key)
        last = ((after or {}).get("status") or {}).get(key)
        history = None
        if first is not None or last is not None:
            history = {
                "before": None if first is None else int(first),
                "after": None if last is None else int(last),
            }
        return {
            "io": None,
            "statements": None,
            "notes": stats.notes(after) if after else [],
            "history_length": history,
            "io_shape": engine_io_shape(before, after, settings) if before and after else None,
        }

    def ops_from_statements(
        self, before: Snapshot | None, after: Snapshot | None
    ) -> dict[str, int] | None:
        return None  # InnoDB counts no statements per kind of the loop

    def work_per_op(
        self,
        before: Snapshot,
        after: Snapshot,
        settings: Settings,
        config: ConfigView,
        ops: dict[str, int] | None,
    ) -> dict[str, Any] | None:
        size = _page_size(settings)
        predicted = (
            predicted_work(
                layout_for(size), config.p.scale, config.p.work_unit, config.p.scan_table_sz
            )
            if size
            else {}
        )
        return with_predictions(
            stats.work_per_op(before, after, ops or {}),
            predicted,
            ops,
            "SHOW GLOBAL STATUS Innodb_buffer_pool_read_requests / _reads over all ops",
        )


class MariaDBPlugin(EnginePlugin):
    api_version = 3  # the engines/api.py ENGINE_API_VERSION this plug-in is written for
    name = "mariadb"
    title = "MariaDB"
    private_target = "embedded-mariadb"
    capabilities = Capabilities(
        terms={
            "read_event": "innodb_data_file read",
            "write_event": "innodb_data_file write",
            "log_sync_event": "redo log sync",
            "log_long": "Redo log",
            "log": "Redo log",
            "cache": "the InnoDB buffer pool",
            "db_io": "performance_schema",
            "horizon": "purge (InnoDB history list)",
            "direct_io": "innodb_flush_method = O_DIRECT (the private server's profiles)",
            "history": "InnoDB history list length",
        },
        wait_sampling=False,
        streams_intervals=True,
        batches_intervals=True,
        host_files=False,
        statement_stats=False,
    )
    metrics = METRICS
    target_help = (
        "'embedded-mariadb' (a private MariaDB per --page-size), or mysql://user@host:port/ "
        "/ mariadb://…/?unix_socket=PATH"
    )

    def claims(self, target: str) -> bool:
        return target == self.private_target or target.startswith(URI_SCHEMES)

    def check_target(self, target: str) -> None:
        if target != self.private_target:
            mysql_kwargs(target)

    def private_server(self, data_dir: Path | None, config: Any) -> EmbeddedMariaDB:
        return EmbeddedMariaDB(data_dir, _configured_page_size(config))

    def private_cluster(self, data_dir: Path | None, config: Any, nodes: int) -> GaleraCluster:
        return GaleraCluster(data_dir, _configured_page_size(config), parse_cluster(nodes))

    def resolve(self, target: str, data_dir: Path | None, config: Any, *, start: bool) -> Target:
        if target == self.private_target:
            server = self.private_server(data_dir, config)
            if start:
                server.start()
            return Target(self.name, server.conninfo(), server.connect_kwargs(), server)
        return Target(self.name, redact(target), mysql_kwargs(target))

    def engine(self, target: Target) -> MariaDBEngine:
        return MariaDBEngine(target.connect)

    def run_backend(
        self, target: Target, application_name: str, sessions: int, *, prefetch: bool = False
    ) -> RunBackend:
        backend = MariaDBRunBackend(target.connect, application_name, sessions, prefetch=prefetch)
        if prefetch:
            backend.enable_read_ahead()
        return backend

    def window(self) -> MariaDBWindow:
        return MariaDBWindow()

    def diagnose(self, target: Target, config: Config, sessions: int) -> list[Finding]:
        return diagnose_target(target.connect, config, sessions)

    def cache_bytes(self, settings: dict[str, str]) -> int:
        return int(settings.get("innodb_buffer_pool_size") or 0)

    def table_bytes(self, settings: dict[str, str], rows: int) -> int:
        size = _page_size(settings)
        return layout_for(size).table_bytes(rows) if size else 0

    def rows_per_mb(self, settings: dict[str, str]) -> int:
        size = _page_size(settings)
        if not size:  # a server that did not say: SLOB's one row per 8 KiB block
            return (1 << 20) // 8192
        return layout_for(size).rows_per_page * (1 << 20) // size

    def data_directory(self, settings: dict[str, str]) -> str | None:
        return settings.get("datadir")

    def pid_file(self, settings: dict[str, str]) -> str | None:
        return settings.get("pid_file")  # absolute, or relative to the data directory

    def run_description(self, settings: dict[str, str]) -> dict[str, Any]:
        size = _page_size(settings)
        return {
            "page_size_bytes": size or None,
            "variant": f"{size // 1024} KiB pages" if size else None,
        }

    def server_key(self, config: Any) -> str:
        """A private server per page size: the points of one size run on it."""
        return _configured_page_size(config)

    def horizon_effect(self) -> str:
        return "purge could not free old row versions, so the history list and undo grew"

    def horizon_advice(self, hold: dict[str, Any]) -> str:
        return horizon.advice(hold)

    def window_warnings(self, entry: dict[str, Any], update_commits: float | None) -> list[str]:
        """Purge fell behind: the history list grew by more than PURGE_BEHIND_SHARE of the
        window's update commits (and by PURGE_BEHIND_MIN at least)."""
        history = entry.get("history_length") or {}
        first, last = history.get("before"), history.get("after")
        if first is None or last is None or not update_commits:
            return []
        if last - first <= max(PURGE_BEHIND_MIN, PURGE_BEHIND_SHARE * update_commits):
            return []
        return [
            f"purge fell behind: the InnoDB history list grew from {first:,} to {last:,} "
            f"during the window ({update_commits:,.0f} update commits): old row versions piled "
            "up in undo and purge will compete with the next runs for I/O. An open "
            "transaction keeps purge from catching up (see the Data set section), or purge "
            "threads are too few"
        ]

    def error_hint(self, exc: BaseException) -> tuple[str, str | None] | None:
        if not type(exc).__module__.startswith("pymysql"):
            return None
        args: tuple[Any, ...] = exc.args
        code = args[0] if args and isinstance(args[0], int) else 0
        return (str(args[1]) if len(args) > 1 else str(exc)), _HINTS.get(code)


def _configured_page_size(config: Config | None) -> str:
    return (config.p.page_size if config is not None else "16K").lower()


def mysql_kwargs(uri: str) -> dict[str, Any]:
    """pymysql.connect arguments of mysql://user:password@host:port/?unix_socket=PATH."""
    try:
        parts = urlsplit(uri)
    except ValueError as exc:  # "Invalid IPv6 URL": names no part of the URI
        raise ConfigError(f"--target {redact(uri)}: not a valid URI ({exc})") from None
    query = parse_qs(parts.query)
    kwargs: dict[str, Any] = {"user": unquote(parts.username or "") or getpass.getuser()}
    if parts.password:
        kwargs["password"] = Secret(unquote(parts.password))
    if "unix_socket" in query:
        kwargs["unix_socket"] = query["unix_socket"][0]
    else:
        kwargs["host"] = parts.hostname or "localhost"
        try:
            kwargs["port"] = parts.port or 3306
        except ValueError:  # its message would quote the "port": maybe a piece of a password
            raise ConfigError(f"--target {redact(uri)}: the port is not a number") from None
    return kwargs


PLUGIN = MariaDBPlugin()
