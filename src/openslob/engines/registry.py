"""The engine behind a target, and what the run and its results need from each engine.

Everything engine-specific the engine-independent modules (benchmark, run, results) use goes
through here: the Engine itself, the run backend, and the statistics of a window.
"""

from __future__ import annotations

from typing import Any

from openslob.config.options import BLOCK_SIZE, Config
from openslob.engines.api import Engine, Finding
from openslob.runner.targets import Target

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


def work_per_op(
    engine: str,
    before: dict[str, Any],
    after: dict[str, Any],
    settings: dict[str, str],
    config: Config,
    ops: dict[str, int] | None,
) -> dict[str, Any] | None:
    """Blocks per SLOBop measured over the window next to what the layout predicts:
    {kind: {ops, lio, pio, lio_predicted, pio_max_predicted}, "model", "source"}."""
    work_unit, scan_rows = config["WORK_UNIT"], config["SCAN_TABLE_SZ"]
    if engine == MARIADB:
        from openslob.engines.mariadb import stats as mariadb_stats
        from openslob.engines.mariadb.layout import layout_for, predicted_work

        measured = mariadb_stats.work_per_op(before, after, ops or {})
        size = int(settings.get("innodb_page_size") or 0)
        predicted = (
            predicted_work(layout_for(size), config["SCALE"], work_unit, scan_rows) if size else {}
        )
        source = "SHOW GLOBAL STATUS Innodb_buffer_pool_read_requests / _reads over all ops"
    else:
        from openslob.engines.postgres import layout, stats

        measured = stats.work_per_op(before, after)
        predicted = layout.predicted_work(work_unit, scan_rows, before.get("tables") or {})
        source = "pg_stat_statements: shared blocks hit + read of the loop's statements"
    if not measured:
        return None
    return with_predictions(measured, predicted, ops or {}) | {
        "model": predicted.get("model"),
        "source": source,
    }


def with_predictions(
    measured: dict[str, dict[str, float]], predicted: dict[str, Any], ops: dict[str, int]
) -> dict[str, Any]:
    """Each measured kind with its predicted figures ("all": the mix the run did)."""
    out: dict[str, Any] = {}
    for kind, figures in measured.items():
        if kind == "all":
            total = sum(ops.values())
            lio = sum(n * predicted[k]["lio"] for k, n in ops.items() if k in predicted)
            pio = sum(n * predicted[k]["pio_max"] for k, n in ops.items() if k in predicted)
            guess = {"lio": lio / total, "pio_max": pio / total} if total and predicted else None
        else:
            guess = predicted.get(kind)
        out[kind] = {
            **{k: round(v, 2) if isinstance(v, float) else v for k, v in figures.items()},
            "lio_predicted": None if guess is None else round(guess["lio"], 2),
            "pio_max_predicted": None if guess is None else round(guess["pio_max"], 2),
        }
    return out


# InnoDB purge lag (engines/mariadb/horizon.py): read by the engine-independent warnings.
PURGE_BEHIND_SHARE, PURGE_BEHIND_MIN = 0.5, 100


def horizon_effect(engine: str) -> str:
    """What a held cleanup horizon does to the SLOB data set on this engine."""
    if engine == MARIADB:
        return "purge could not free old row versions, so the history list and undo grew"
    return (
        "HOT pruning could not remove old row versions, so updated rows left their pages: "
        "cf1 and the work per SLOBop grow"
    )


def fast_update_cause(engine: str, horizon: dict[str, Any]) -> str:
    """Why tables grew when nothing held the horizon for long (PostgreSQL)."""
    if engine == MARIADB:
        return ""
    return (
        " although nothing held the horizon for 2 s: pages were updated again before the "
        "other sessions' statements (snapshots up to "
        f"{horizon.get('max_age_xids') or 0:,} transactions old) let PostgreSQL prune their "
        "old versions. That happens when a small, cached data set takes many updates beside "
        "slower sessions; a larger SCALE keeps the layout"
    )


def horizon_advice(engine: str, hold: dict[str, Any]) -> str:
    if engine == MARIADB:
        from openslob.engines.mariadb import horizon
    else:
        from openslob.engines.postgres import horizon
    return horizon.advice(hold)


def is_bloated(engine: str, facts: dict[str, Any] | None) -> bool:
    """A table's facts (pages, live_rows: dataset_health.table_changes) beyond the layout's
    bound, so that runs refuse it."""
    if engine == MARIADB or not facts:
        return False  # InnoDB updates in place: no bloat of the table itself
    from openslob.engines.postgres.layout import max_pages

    rows, pages = facts.get("live_rows"), facts.get("pages")
    return bool(rows and pages and pages > max_pages(rows))
