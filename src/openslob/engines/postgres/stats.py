"""PostgreSQL statistics: AWR-like snapshots, their deltas, live counters, wait samples.

Version notes (a figure the server cannot give is None, never 0):
- pg_stat_io exists from 16; from 18 it counts read *operations* (several blocks when reads
  are combined) with read_bytes/write_bytes, and holds WAL I/O (object 'wal': writes, fsyncs
  and their times) that pg_stat_wal carried up to 17.
- pg_stat_wal's wal_sync/wal_sync_time exist in 14-17; pg_stat_checkpointer from 17.
- pg_stat_statements renamed blk_read_time to shared_blk_read_time in 17.
Backends publish pg_stat_io / pg_stat_database / pg_stat_wal counts only when a statement
ends, so snapshots are taken between the loop's CALLs: one per sampling interval (the loop
CALLs end at each interval's boundary, runner/intervals.py), light ones without the tables
and statements.
"""

from __future__ import annotations

import re
import threading
from decimal import Decimal
from typing import Any

import orjson
import psycopg
from psycopg.rows import dict_row

from openslob.engines.postgres import horizon, layout, prepared
from openslob.model.rates import per_s, ratio

Snapshot = dict[str, Any]

_DB_COLUMNS = (
    "xact_commit",
    "xact_rollback",
    "blks_read",
    "blks_hit",
    "tup_returned",
    "tup_fetched",
    "tup_inserted",
    "tup_updated",
    "tup_deleted",
    "temp_files",
    "temp_bytes",
    "deadlocks",
    "blk_read_time",
    "blk_write_time",
)
_DB_COLUMNS_14 = ("session_time", "active_time", "idle_in_transaction_time")


def _as_float(value: Any) -> Any:
    """Counters arrive as int, float or Decimal (numeric columns): all become float."""
    if isinstance(value, bool):
        return value
    return float(value) if isinstance(value, int | float | Decimal) else value


def _numeric(row: dict[str, Any] | None) -> dict[str, float | None]:
    if row is None:
        return {}
    # Counters only: timestamps such as stats_reset are not deltas.
    return {
        k: (float(v) if v is not None else None)
        for k, v in row.items()
        if v is None or isinstance(v, int | float | Decimal)
    }


def take_snapshot(
    conn: psycopg.Connection,
    *,
    with_statements: bool = True,
    with_tables: bool = True,
    with_horizon: bool = False,
) -> Snapshot:
    """Every cumulative counter a report needs, read in one go (same transaction time).
    Without statements and tables (an interval's snapshot) nothing but shared-memory
    statistics views and shared catalogs is read: no buffer of this database's relations.
    `with_horizon`: also who holds the cleanup horizon now (horizon.OLDEST), as
    snap["horizon"], read by the same statement (13+; the caller checks it can be read)."""
    version = conn.info.server_version
    cur = conn.cursor()
    cur.execute("SELECT pg_stat_clear_snapshot()")
    row = prepared.execute(cur, _shared_sql(version, with_horizon)).fetchone()
    shared = orjson.loads(row[1]) if row else {}
    snap: Snapshot = {"server_version": version}
    if with_horizon:
        snap["horizon"] = shared.get("horizon") or {}
    snap["taken_at"] = row[0].isoformat() if row and shared.get("database") else None
    snap["database"] = _numeric(shared.get("database"))
    rows = shared.get("io") or []
    # JSON numbers are int or float: the ints become floats (as _as_float does) inline,
    # ~60 rows of 14 columns every interval
    snap["io"] = (
        [{k: float(v) if v.__class__ is int else v for k, v in r.items()} for r in rows]
        if version >= 160000
        else None
    )
    snap["wal"] = _numeric(shared.get("wal")) if version >= 140000 else None
    if snap["wal"] is not None:
        snap["wal"].pop("stats_reset", None)
    snap["bgwriter"] = _numeric(_drop_timestamps(shared.get("bgwriter")))
    snap["checkpointer"] = (
        _numeric(_drop_timestamps(shared.get("checkpointer"))) if version >= 170000 else None
    )
    position = shared.get("wal_position")
    snap["wal_position"] = (
        None
        if position is None or position.get("lsn_bytes") is None
        else {k: _as_float(v) for k, v in position.items()}
    )
    snap["statements"] = statements(conn) if with_statements else None
    # The SLOB tables' size and dead row versions: whether the window kept the layout.
    snap["tables"] = (
        {name: f.as_dict() for name, f in layout.table_facts(conn).items()} if with_tables else None
    )
    return snap


def _shared_sql(version: int, with_horizon: bool = False) -> str:
    """The shared-memory statistics views of a snapshot as one statement: the time and a
    JSON object of them. The sampler takes one every interval; seven statements took the
    client 2.1 ms and the server 0.9 ms of CPU per interval (prepared), round trips and
    rows as much as the views. The horizon's holder joins them for the same reason: in its
    own savepoint it was four more round trips an interval."""
    columns = _DB_COLUMNS + (_DB_COLUMNS_14 if version >= 140000 else ())
    parts = [
        "'database', (SELECT row_to_json(d) FROM (SELECT "
        + ", ".join(columns)
        + " FROM pg_stat_database WHERE datname = current_database()) d)"
    ]
    if version >= 160000:
        byte_columns = (
            "read_bytes, write_bytes"
            if version >= 180000
            else "reads * op_bytes AS read_bytes, writes * op_bytes AS write_bytes"
        )
        parts.append(
            "'io', (SELECT json_agg(i) FROM (SELECT backend_type, object, context, reads,"
            " read_time, writes, write_time, extends, hits, evictions, fsyncs, fsync_time,"
            f" {byte_columns} FROM pg_stat_io) i)"
        )
    if version >= 140000:
        parts.append("'wal', (SELECT row_to_json(w) FROM pg_stat_wal w)")
    parts.append("'bgwriter', (SELECT row_to_json(b) FROM pg_stat_bgwriter b)")
    if version >= 170000:
        parts.append("'checkpointer', (SELECT row_to_json(c) FROM pg_stat_checkpointer c)")
    # the WAL insert position (bytes) and the segment size: segments filled in between
    # (current_setting, not pg_settings: that view builds all ~350 settings to give one,
    # 0.3 ms of the snapshot's 0.85 with 256 sessions connected)
    parts.append(
        "'wal_position', (SELECT row_to_json(p) FROM (SELECT CASE WHEN pg_is_in_recovery()"
        " THEN NULL ELSE (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::float8 END AS lsn_bytes,"
        " pg_size_bytes(current_setting('wal_segment_size'))::float8 AS segment_bytes) p)"
    )
    if with_horizon:
        parts.append(f"'horizon', (SELECT row_to_json(o) FROM ({horizon.OLDEST}) o)")
    return f"SELECT clock_timestamp(), json_build_object({', '.join(parts)})::text"


def _drop_timestamps(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {k: v for k, v in row.items() if not k.endswith("reset")}


def has_statements(conn: psycopg.Connection) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements')"
        " AND current_setting('shared_preload_libraries') ~ 'pg_stat_statements'"
    ).fetchone()
    return bool(row and row[0])


_STATEMENT_CLASS = (
    (re.compile(r'^\s*UPDATE\s+"?user\d+"?\."?cf1"?\s+SET\s', re.I), "update"),
    (re.compile(r'^\s*SELECT\s+count\(c2\)\s+FROM\s+"?user\d+"?\."?cf2\b', re.I), "scan"),
    (re.compile(r'^\s*SELECT\s+count\(c2\)\s+FROM\s+"?user\d+"?\."?cf1\b', re.I), "select"),
)


def classify(query: str) -> str | None:
    """Which SLOBop a pg_stat_statements entry is (None: not a work-loop statement).

    Matches the loop's own statement shapes (pg_stat_statements strips INTO and keeps the
    start of the text), so a user's query that merely mentions cf1 is not counted.
    """
    for pattern, kind in _STATEMENT_CLASS:
        if pattern.search(query):
            return kind
    return None


def statements(conn: psycopg.Connection, *, loop_only: bool = False) -> list[dict[str, Any]] | None:
    """pg_stat_statements rows of this database, or None without the extension.

    loop_only keeps the work loop's statements (filtered in the server: the live sampler
    reads them every interval and should not ship thousands of rows each time).
    """
    if not has_statements(conn):
        return None
    version = conn.info.server_version
    read_time = "shared_blk_read_time" if version >= 170000 else "blk_read_time"
    exec_time = "total_exec_time" if version >= 130000 else "total_time"
    cur = conn.cursor(row_factory=dict_row)
    cur.execute(
        f"SELECT queryid::text AS queryid, left(query, 200) AS query, calls,"
        f" {exec_time} AS total_exec_time, rows, shared_blks_hit, shared_blks_read,"
        f" shared_blks_dirtied, shared_blks_written, {read_time} AS read_time_ms,"
        " wal_records, wal_fpi, wal_bytes FROM pg_stat_statements"
        " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        + (r" AND query ~* '^\s*(UPDATE\s|SELECT\s+count\(c2\))'" if loop_only else "")
    )
    rows = []
    for r in cur.fetchall():
        r = {k: (v if k == "queryid" else _as_float(v)) for k, v in r.items()}
        r["slobop"] = classify(r["query"])
        rows.append(r)
    return rows


def loop_counters(rows: list[dict[str, Any]] | None) -> dict[str, float] | None:
    """Totals over the work loop's statements: the live source of the time series."""
    if rows is None:
        return None
    totals = {
        "calls_select": 0.0,
        "calls_update": 0.0,
        "calls_scan": 0.0,
        "blks_hit": 0.0,
        "blks_read": 0.0,
        "read_time_ms": 0.0,
        "wal_bytes": 0.0,
        "exec_time_ms": 0.0,
    }
    for r in rows:
        kind = r.get("slobop")
        if kind is None:
            continue
        totals[f"calls_{kind}"] += r["calls"]
        totals["blks_hit"] += r["shared_blks_hit"]
        totals["blks_read"] += r["shared_blks_read"]
        totals["read_time_ms"] += r["read_time_ms"] or 0.0
        totals["wal_bytes"] += r["wal_bytes"] or 0.0
        totals["exec_time_ms"] += r["total_exec_time"]
    return totals


def _blocks_by_kind(rows: list[dict[str, Any]] | None) -> dict[str, list[float]] | None:
    """{kind: [calls, blocks hit, blocks read]} over the loop's statements."""
    if rows is None:
        return None
    totals: dict[str, list[float]] = {}
    for r in rows:
        if r.get("slobop") is not None:
            t = totals.setdefault(r["slobop"], [0.0, 0.0, 0.0])
            t[0] += r["calls"]
            t[1] += r["shared_blks_hit"]
            t[2] += r["shared_blks_read"]
    return totals


def work_per_op(before: Snapshot, after: Snapshot) -> dict[str, dict[str, float]] | None:
    """Blocks each SLOBop kind cost over the window: {kind: {ops, lio, pio}} from the loop
    statements' pg_stat_statements deltas (logical = buffer hits + reads, physical = reads).
    None without pg_stat_statements."""
    first = _blocks_by_kind(before.get("statements"))
    last = _blocks_by_kind(after.get("statements"))
    if first is None or last is None:
        return None
    work = {}
    for kind, (calls, hits, reads) in last.items():
        b_calls, b_hits, b_reads = first.get(kind, (0.0, 0.0, 0.0))
        ops = calls - b_calls
        if ops > 0:
            lio = hits - b_hits + reads - b_reads
            work[kind] = {"ops": int(ops), "lio": lio / ops, "pio": (reads - b_reads) / ops}
    return work


# ------------------------------------------------------------------------------ deltas


def _d(after: dict | None, before: dict | None, key: str) -> float | None:
    if not after or not before or after.get(key) is None or before.get(key) is None:
        return None
    return after[key] - before[key]


# What snapshot_delta reads of pg_stat_io: columns summed over the rows of an object group
_RELATION, _WAL = ("relation", "temp relation"), ("wal",)
_GROUP_COLUMNS = {
    _RELATION: ("reads", "read_bytes", "read_time", "writes", "write_bytes", "write_time"),
    _WAL: ("fsyncs", "fsync_time", "writes"),
}
_GROUP_OF = {obj: group for group in _GROUP_COLUMNS for obj in group}
IoSums = dict[tuple[tuple[str, ...], str], float | None]
_SUMS_KEPT: dict[int, tuple[Snapshot, IoSums]] = {}  # the last snapshots' (a delta's before)
_SUMS_LOCK = threading.Lock()  # the sampler's thread and the run's final deltas


def _io_sums(snap: Snapshot) -> IoSums | None:
    """Each group's columns summed over its rows (None: no row has a value), in one pass,
    and kept for the snapshot's next delta (as the interval before's "after" it was summed
    already): 18 passes over ~60 rows were ~0.4 ms of the sampler's CPU a row."""
    rows = snap.get("io")
    if rows is None:
        return None
    with _SUMS_LOCK:
        kept = _SUMS_KEPT.get(id(snap))
    if kept is not None and kept[0] is snap:
        return kept[1]
    sums: IoSums = {(g, c): None for g, columns in _GROUP_COLUMNS.items() for c in columns}
    for r in rows:
        group = _GROUP_OF.get(r["object"])
        if group is None:
            continue
        for column in _GROUP_COLUMNS[group]:
            value = r.get(column)
            if value is not None:
                old = sums[(group, column)]
                sums[(group, column)] = value if old is None else old + value
    with _SUMS_LOCK:
        while len(_SUMS_KEPT) >= 4:
            del _SUMS_KEPT[next(iter(_SUMS_KEPT))]
        _SUMS_KEPT[id(snap)] = (snap, sums)
    return sums


def snapshot_delta(
    before: Snapshot,
    after: Snapshot,
    seconds: float,
    *,
    io_timing: bool,
    wal_io_timing: bool,
    own_commits: int = 0,
) -> dict[str, float | None]:
    """Window metrics from two snapshots. Latencies need their timing setting on, else None.

    own_commits: transactions the tool itself ran in the window (the stats flush after each
    CALL), taken out of commits. DB time is pg_stat_database active_time, which a backend
    publishes one statement late unless that flush ran: None before PostgreSQL 15.
    """
    db_b, db_a = before.get("database"), after.get("database")
    sums_b, sums_a = _io_sums(before), _io_sums(after)

    def io(objects: tuple[str, ...], key: str) -> float | None:
        if sums_a is None or sums_b is None:
            return None
        a, b = sums_a[(objects, key)], sums_b[(objects, key)]
        return None if a is None or b is None else a - b

    reads = io(_RELATION, "reads")
    read_bytes = io(_RELATION, "read_bytes")
    read_time = io(_RELATION, "read_time")
    if reads is None:  # before 16: buffer misses of this database, one 8 KiB read each
        reads = _d(db_a, db_b, "blks_read")
        read_bytes = None if reads is None else reads * 8192
        read_time = _d(db_a, db_b, "blk_read_time")
    writes = io(_RELATION, "writes")
    write_bytes = io(_RELATION, "write_bytes")
    write_time = io(_RELATION, "write_time")
    lio = None
    hits, misses = _d(db_a, db_b, "blks_hit"), _d(db_a, db_b, "blks_read")
    if hits is not None and misses is not None:
        lio = hits + misses
    wal_bytes = _d(after.get("wal"), before.get("wal"), "wal_bytes")
    if after.get("io") is not None and after["server_version"] >= 180000:
        wal_syncs = io(_WAL, "fsyncs")
        wal_sync_time = io(_WAL, "fsync_time")
        wal_writes = io(_WAL, "writes")
    else:
        wal_syncs = _d(after.get("wal"), before.get("wal"), "wal_sync")
        wal_sync_time = _d(after.get("wal"), before.get("wal"), "wal_sync_time")
        wal_writes = _d(after.get("wal"), before.get("wal"), "wal_write")
    active_ms = _d(db_a, db_b, "active_time") if after["server_version"] >= 150000 else None
    checkpoints, checkpoint_buffers = _checkpoints(before, after)
    commits = _d(db_a, db_b, "xact_commit")
    temp_bytes = _d(db_a, db_b, "temp_bytes")
    mb = 1 << 20
    return {
        "lio_per_s": per_s(lio, seconds),
        "pio_reads_per_s": per_s(reads, seconds),
        "pio_read_mb_per_s": per_s(None if read_bytes is None else read_bytes / mb, seconds),
        "pio_writes_per_s": per_s(writes, seconds),
        "pio_write_mb_per_s": per_s(None if write_bytes is None else write_bytes / mb, seconds),
        "db_read_latency_us": ratio(read_time, reads, 1000) if io_timing else None,
        "db_write_latency_us": ratio(write_time, writes, 1000) if io_timing else None,
        "wal_mb_per_s": per_s(None if wal_bytes is None else wal_bytes / mb, seconds),
        "wal_records_per_s": per_s(_d(after.get("wal"), before.get("wal"), "wal_records"), seconds),
        "wal_fpi_per_s": per_s(_d(after.get("wal"), before.get("wal"), "wal_fpi"), seconds),
        "wal_writes_per_s": per_s(wal_writes, seconds),
        "wal_syncs_per_s": per_s(wal_syncs, seconds),
        "wal_sync_latency_us": ratio(wal_sync_time, wal_syncs, 1000) if wal_io_timing else None,
        "commits_per_s": per_s(None if commits is None else commits - own_commits, seconds),
        "rollbacks_per_s": per_s(_d(db_a, db_b, "xact_rollback"), seconds),
        "db_time_s": None if active_ms is None else active_ms / 1000,
        "temp_mb": None if temp_bytes is None else temp_bytes / mb,
        # Background work that shares the device: checkpoints and the background writer.
        "checkpoints": checkpoints,
        "checkpoint_write_mb_per_s": per_s(_blocks_mb(checkpoint_buffers), seconds),
        "bgwriter_write_mb_per_s": per_s(
            _blocks_mb(_d(after.get("bgwriter"), before.get("bgwriter"), "buffers_clean")),
            seconds,
        ),
        "wal_segments": _segments(before, after),
    }


def _blocks_mb(blocks: float | None) -> float | None:
    return None if blocks is None else blocks * 8192 / (1 << 20)


def _checkpoints(before: Snapshot, after: Snapshot) -> tuple[float | None, float | None]:
    """(checkpoints begun, buffers the checkpointer wrote): pg_stat_checkpointer from 17,
    pg_stat_bgwriter before."""
    if after.get("checkpointer") is not None and before.get("checkpointer") is not None:
        a, b = after["checkpointer"], before["checkpointer"]
        timed, requested = _d(a, b, "num_timed"), _d(a, b, "num_requested")
        written = _d(a, b, "buffers_written")
    else:
        a, b = after.get("bgwriter"), before.get("bgwriter")
        timed, requested = _d(a, b, "checkpoints_timed"), _d(a, b, "checkpoints_req")
        written = _d(a, b, "buffers_checkpoint")
    begun = None if timed is None or requested is None else timed + requested
    return begun, written


def _segments(before: Snapshot, after: Snapshot) -> float | None:
    """WAL segment files the server moved into (each one a new file to fill and sync)."""
    b, a = before.get("wal_position"), after.get("wal_position")
    if not a or not b or not a.get("segment_bytes"):
        return None
    size = a["segment_bytes"]
    return float(int(a["lsn_bytes"] // size) - int(b["lsn_bytes"] // size))


def io_breakdown(before: Snapshot, after: Snapshot) -> list[dict[str, Any]] | None:
    """pg_stat_io deltas per backend type / object / context, non-zero rows only."""
    if before.get("io") is None or after.get("io") is None:
        return None
    index = {(r["backend_type"], r["object"], r["context"]): r for r in before["io"]}
    rows = []
    for r in after["io"]:
        b = index.get((r["backend_type"], r["object"], r["context"]))
        if b is None:
            continue
        delta = {}
        for key in (
            "reads",
            "read_time",
            "writes",
            "write_time",
            "extends",
            "hits",
            "evictions",
            "fsyncs",
            "fsync_time",
            "read_bytes",
            "write_bytes",
        ):
            a_v, b_v = r.get(key), b.get(key)
            delta[key] = None if a_v is None or b_v is None else a_v - b_v
        if any(delta[k] for k in ("reads", "writes", "extends", "fsyncs", "hits")):
            rows.append(
                {
                    "backend_type": r["backend_type"],
                    "object": r["object"],
                    "context": r["context"],
                    **delta,
                }
            )
    return rows


def statement_deltas(before: Snapshot, after: Snapshot, top: int = 10) -> list[dict] | None:
    """Top statements of the window by execution time (pg_stat_statements deltas), and every
    statement of the work loop however little time it took (a run's fast scans of a small
    cf2 would otherwise drop behind the monitors' own statements)."""
    if before.get("statements") is None or after.get("statements") is None:
        return None
    index = {r["queryid"]: r for r in before["statements"]}
    rows = []
    for r in after["statements"]:
        b = index.get(r["queryid"], {})
        delta = {
            k: r[k] - b.get(k, 0.0)
            for k in (
                "calls",
                "total_exec_time",
                "rows",
                "shared_blks_hit",
                "shared_blks_read",
                "read_time_ms",
                "wal_bytes",
            )
            if r.get(k) is not None
        }
        if delta.get("calls"):
            rows.append(
                {"queryid": r["queryid"], "query": r["query"], "slobop": r["slobop"], **delta}
            )
    rows.sort(key=lambda r: r.get("total_exec_time", 0), reverse=True)
    return rows[:top] + [r for r in rows[top:] if r["slobop"]]


def version_notes(after: Snapshot, *, wal_io_timing: bool) -> list[str]:
    """Why a figure is null on this server version (run.json notes, printed by the report)."""
    version = after.get("server_version")
    if not version:
        return []
    notes = []
    if version < 160000:
        notes.append(
            f"PostgreSQL {version // 10000} has no pg_stat_io (16+): physical reads are "
            "pg_stat_database blks_read (8 KiB each) and their time blk_read_time; physical "
            "writes and write latency are not measured (null)"
        )
    if version < 150000:
        notes.append(
            f"PostgreSQL {version // 10000} cannot flush a session's statistics on demand "
            "(pg_stat_force_next_flush, 15+): DB time is not measured (null)"
        )
    if version < 140000:
        notes.append("PostgreSQL 13 has no pg_stat_wal syncs: WAL syncs and their latency are null")
    elif not wal_io_timing:
        notes.append("track_wal_io_timing is off: WAL sync latency is not measured (null)")
    return notes
