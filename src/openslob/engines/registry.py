"""The engine behind a target, and what the run and its results need from each engine.

Everything engine-specific the engine-independent modules (benchmark, run, results) use goes
through here: the Engine itself, the run backend, and the statistics of a window.
"""

from __future__ import annotations

from typing import Any

from openslob.engines.base import Engine, Finding
from openslob.options import BLOCK_SIZE, Config
from openslob.targets import Target

POSTGRESQL, MARIADB = "postgresql", "mariadb"
OP_TYPES = ("select", "update", "scan")  # the loop's op kinds, as run.json names them


def engine_for(target: Target) -> Engine:
    if target.engine == MARIADB:
        from openslob.engines.mariadb.engine import MariaDBEngine

        return MariaDBEngine(target.connect_kwargs or {})
    from openslob.engines.postgres.engine import PostgresEngine

    return PostgresEngine(target.conninfo)


def diagnose(target: Target, config: Config, sessions: int) -> list[Finding]:
    """`slob doctor`'s findings for one target, checked for `sessions` sessions."""
    if target.engine == MARIADB:
        from openslob.engines.mariadb.doctor import diagnose_target as diagnose_mariadb

        return diagnose_mariadb(target.connect_kwargs or {}, config, sessions)
    from openslob.engines.postgres.doctor import diagnose_target

    return diagnose_target(target.conninfo, config, sessions)


def run_backend_for(target: Target, application_name: str, sessions: int) -> Any:
    """PostgresRunBackend or MariaDBRunBackend (the same methods; see run.RunInstance)."""
    if target.engine == MARIADB:
        from openslob.engines.mariadb.runner import MariaDBRunBackend

        return MariaDBRunBackend(target.connect_kwargs or {}, application_name, sessions)
    from openslob.engines.postgres.runner import PostgresRunBackend

    return PostgresRunBackend(target.conninfo, application_name)


def window_metrics(
    engine: str,
    before: dict[str, Any],
    after: dict[str, Any],
    seconds: float,
    settings: dict[str, str],
    own_commits: int,
) -> dict[str, Any]:
    """The database's figures over the window from its two snapshots (run.json keys)."""
    if engine == MARIADB:
        from openslob.engines.mariadb import stats as mariadb_stats

        return mariadb_stats.snapshot_delta(before, after, seconds)
    from openslob.engines.postgres import stats

    return stats.snapshot_delta(
        before,
        after,
        seconds,
        io_timing=settings.get("track_io_timing") == "on",
        wal_io_timing=settings.get("track_wal_io_timing") == "on",
        own_commits=own_commits,
    )


def window_details(
    engine: str, before: dict[str, Any], after: dict[str, Any], settings: dict[str, str]
) -> dict[str, Any]:
    """{io, statements, notes}: the breakdowns an engine has (null where it has none) and
    the notes on figures it cannot give or names differently."""
    if engine == MARIADB:
        from openslob.engines.mariadb import stats as mariadb_stats

        return {
            "io": None,
            "statements": None,
            "notes": mariadb_stats.notes(after) if after else [],
        }
    from openslob.engines.postgres import stats

    both = bool(before and after)
    return {
        "io": stats.io_breakdown(before, after) if both else None,
        "statements": stats.statement_deltas(before, after) if both else None,
        "notes": stats.version_notes(
            after, wal_io_timing=settings.get("track_wal_io_timing") == "on"
        ),
    }


def ops_from_statements(
    engine: str, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> dict[str, int] | None:
    """Window op counts from statement statistics, when the loops' own results were lost
    (cancelled CALLs); None where the engine has no per-statement counts."""
    if engine == MARIADB or not (before and after):
        return None
    from openslob.engines.postgres import stats

    first = stats.loop_counters(before.get("statements"))
    last = stats.loop_counters(after.get("statements"))
    if first is None or last is None:
        return None
    return {kind: int(last[f"calls_{kind}"] - first[f"calls_{kind}"]) for kind in OP_TYPES}


def cache_bytes(engine: str, settings: dict[str, str]) -> int:
    """The database's own block cache (shared_buffers, the InnoDB buffer pool)."""
    key = "innodb_buffer_pool_size" if engine == MARIADB else "shared_buffers_bytes"
    return int(settings.get(key) or 0)


def cache_name(engine: str) -> str:
    return "the InnoDB buffer pool" if engine == MARIADB else "shared_buffers"


def table_bytes(engine: str, settings: dict[str, str], rows: int) -> int:
    """Bytes of one schema's CF1 of `rows` rows: one row per 8 KiB page on PostgreSQL, as
    few rows per page as InnoDB allows at its page size on MariaDB."""
    if engine == MARIADB and settings.get("innodb_page_size"):
        from openslob.engines.mariadb.layout import layout_for

        return layout_for(int(settings["innodb_page_size"])).table_bytes(rows)
    return rows * BLOCK_SIZE
