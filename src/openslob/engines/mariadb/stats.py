"""MariaDB/InnoDB statistics: snapshots of cumulative counters and their window deltas.

Sources:
- SHOW GLOBAL STATUS: Innodb_buffer_pool_read_requests (logical reads) and _reads (misses,
  one page read each), Innodb_data_reads/_writes/_read/_written/_fsyncs (all InnoDB data file
  I/O), Innodb_os_log_written / Innodb_log_writes (redo), Innodb_dblwr_pages_written,
  Com_commit / Com_rollback (COMMIT statements: the loop's one per update), ...
- performance_schema.file_summary_by_event_name, when performance_schema is ON: per file type
  counts, bytes and time (picoseconds) of reads and writes; wait/io/file/innodb/
  innodb_data_file gives physical read/write latency. MariaDB 10.8+ no longer instruments the
  redo log file, so redo sync counts and latency are null there (MySQL 8 has
  innodb_log_file: its misc operations, mostly fsyncs, are used when present).
InnoDB counters move as the work happens (not at statement end as PostgreSQL's), so a
snapshot can be taken at any time; the loop's own CALL boundaries do not matter.
"""

from __future__ import annotations

import datetime as dt
import weakref
from decimal import Decimal
from typing import Any

import pymysql

from openslob.engines.common.rows import one
from openslob.engines.mariadb import galera_stats
from openslob.model.rates import per_s, ratio

Snapshot = dict[str, Any]
Files = dict[str, dict[str, float]]  # event name -> column -> value

DATA_FILE = "wait/io/file/innodb/innodb_data_file"
LOG_FILE = "wait/io/file/innodb/innodb_log_file"  # MySQL 8; absent in MariaDB 10.8+
_FILE_COLUMNS = (
    "COUNT_READ",
    "SUM_TIMER_READ",
    "SUM_NUMBER_OF_BYTES_READ",
    "COUNT_WRITE",
    "SUM_TIMER_WRITE",
    "SUM_NUMBER_OF_BYTES_WRITE",
    "COUNT_MISC",
    "SUM_TIMER_MISC",
)
PS_PER_US = 1_000_000  # performance_schema timers are picoseconds

# Figures PostgreSQL gives that InnoDB has no counter for: always null here, with the reason.
NOTES = (
    "redo is InnoDB's WAL: wal_mb_per_s is Innodb_os_log_written, wal_writes_per_s "
    "Innodb_log_writes",
    "physical reads/writes and their latency are performance_schema "
    "file_summary_by_event_name for innodb_data_file (all InnoDB data files, including "
    "the doublewrite buffer and undo: each flushed page is written twice with "
    "innodb_doublewrite=ON); without performance_schema they are Innodb_data_reads/_writes "
    "and latencies are null",
    "commits_per_s counts COMMIT statements (Com_commit), one per update",
    "wal_records_per_s, wal_fpi_per_s, temp_mb and db_time_s have no InnoDB counter: null",
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float | Decimal):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# What an interval's snapshot reads of the global status: the counters of its row
# (snapshot_delta, the InnoDB and Galera figures of the time series, a checkpoint's
# details): InnoDB's, wsrep's, COMMITs and ROLLBACKs. The whole SHOW GLOBAL STATUS (562
# variables) took the sampler 1.2 ms of CPU and the server 0.75-1.45 ms every interval;
# these (~130 without Galera) 0.3 and 0.4 ms.
INTERVAL_STATUS = (
    " WHERE Variable_name LIKE 'Innodb%' OR Variable_name LIKE 'wsrep%'"
    " OR Variable_name IN ('Com_commit', 'Com_rollback')"
)


# An interval snapshot's status as one text in the same statement as its time: ~130 rows of
# SHOW GLOBAL STATUS cost PyMySQL ~1.9 us each (take_snapshot 445 us offline, ~1 ms in a
# 64-session run, every interval), one GROUP_CONCAT ~80 us. information_schema spells the
# names in capitals: SHOW's spelling is learned (_SPELLING) and kept. The separator is the
# record separator character in the literal itself (no escape: NO_BACKSLASH_ESCAPES reads
# the same; no status value holds it). MySQL 8 has no information_schema.GLOBAL_STATUS:
# a connection whose statement fails reads SHOW and the summaries apart from then on
# (_SHOW_ONLY).
# The file summaries of the files snapshot_delta reads come in the same statement (a
# second text: each event's columns joined by commas, as GROUP_CONCAT's own arguments, so
# that a NULL leaves its event out rather than shifting the columns): their own statement
# cost the client ~75 us and the server ~25 us more every interval.
_SEPARATOR = "\x1e"
_COMMA_JOINED = ", ',', ".join(_FILE_COLUMNS)  # the columns, a comma between each two
_INTERVAL_SQL = (
    "SELECT UTC_TIMESTAMP(6), @@performance_schema, VERSION(), @@group_concat_max_len,"
    f" (SELECT GROUP_CONCAT(VARIABLE_NAME, '=', VARIABLE_VALUE SEPARATOR '{_SEPARATOR}')"
    " FROM information_schema.GLOBAL_STATUS"
    + INTERVAL_STATUS.replace("Variable_name", "VARIABLE_NAME")
    + "),"
    f" (SELECT GROUP_CONCAT(EVENT_NAME, '=', {_COMMA_JOINED}"
    f" SEPARATOR '{_SEPARATOR}') FROM performance_schema.file_summary_by_event_name"
    f" WHERE EVENT_NAME IN ('{DATA_FILE}', '{LOG_FILE}'))"
)
_CONCAT_ROOM = 1 << 16  # a group_concat_max_len below this: SHOW GLOBAL STATUS (not cut)
_SPELLING: dict[str, str] = {}  # status name in capitals -> as SHOW GLOBAL STATUS spells it
_SHOW_ONLY: weakref.WeakSet[Any] = weakref.WeakSet()  # connections without GLOBAL_STATUS


def _interval_status(cur: Any) -> tuple[Any, Any, Any, dict[str, Any], Files | None]:
    """(taken_at, performance_schema on, version, {name: value}, the file summaries or
    None: not read) of an interval snapshot: one round trip, unless the server's
    group_concat_max_len could cut the text or it has no information_schema.GLOBAL_STATUS."""
    text, room = None, 0
    if cur.connection not in _SHOW_ONLY:
        try:
            cur.execute(_INTERVAL_SQL)
            taken_at, ps_on, version, room, text, files = one(cur.fetchone())
        except pymysql.err.MySQLError:
            _SHOW_ONLY.add(cur.connection)
    if text is None or int(room) < _CONCAT_ROOM:
        if cur.connection in _SHOW_ONLY:
            taken_at, ps_on, version = _clock(cur)
        return taken_at, ps_on, version, _shown(cur, INTERVAL_STATUS), None
    raw = _pairs(text)
    if any(name not in _SPELLING for name in raw):  # a name not seen yet: SHOW's spelling
        _SPELLING.update((name.upper(), name) for name in _shown(cur, INTERVAL_STATUS))
    # (a name SHOW did not know a moment later keeps its capitals, this time only)
    status = {_SPELLING.get(k) or k: v for k, v in raw.items()}
    try:
        summaries = summaries_of(files)
    except ValueError:  # not the columns asked for: read them apart (no guess)
        summaries = None
    return taken_at, ps_on, version, status, summaries


def summaries_of(text: str | bytes | None) -> Files:
    """The file summaries of an interval statement's text ({} for none): per event, its
    _FILE_COLUMNS; ValueError when an item does not hold them all as numbers."""
    return {
        event: dict(zip(_FILE_COLUMNS, map(float, values.split(",")), strict=True))
        for event, values in _pairs(text).items()
    }


def _pairs(text: str | bytes | None) -> dict[str, str]:
    """{name: value} of a GROUP_CONCAT text of name=value items ({} for none)."""
    if isinstance(text, bytes):
        text = text.decode()
    if not text:
        return {}
    return dict(item.partition("=")[::2] for item in text.split(_SEPARATOR) if "=" in item)


def _file_summaries(cur: Any) -> Files:
    """performance_schema's I/O summaries of InnoDB's file kinds, by event name."""
    cur.execute(
        f"SELECT EVENT_NAME, {', '.join(_FILE_COLUMNS)}"
        " FROM performance_schema.file_summary_by_event_name"
        " WHERE EVENT_NAME LIKE 'wait/io/file/innodb/%'"
    )
    return {
        row[0]: {col: float(v) for col, v in zip(_FILE_COLUMNS, row[1:], strict=True)}
        for row in cur.fetchall()
    }


def _clock(cur: Any) -> tuple[Any, Any, Any]:
    """(the server's time, performance_schema on, its version)."""
    cur.execute("SELECT UTC_TIMESTAMP(6), @@performance_schema, VERSION()")
    return one(cur.fetchone())


def _shown(cur: Any, where: str = "") -> dict[str, Any]:
    """SHOW GLOBAL STATUS (`where`: a WHERE clause of it) as {name: value}."""
    cur.execute("SHOW GLOBAL STATUS" + where)
    return dict(cur.fetchall())


def take_snapshot(conn: pymysql.connections.Connection, *, interval: bool = False) -> Snapshot:
    """Every cumulative counter a report needs (global status and file I/O summaries);
    an `interval` snapshot: the status variables of INTERVAL_STATUS and the summaries of
    the files snapshot_delta reads (all InnoDB's where its statement could not hold them)."""
    with conn.cursor() as cur:
        summaries = None
        if interval:
            taken_at, ps_on, version, raw, summaries = _interval_status(cur)
        else:
            taken_at, ps_on, version = _clock(cur)
            raw = _shown(cur)
        status = {name: n for name, value in raw.items() if (n := _number(value)) is not None}
        status.update(galera_stats.latency_fields(raw))
        files = None
        if int(ps_on):
            files = summaries if summaries is not None else _file_summaries(cur)
    if isinstance(taken_at, dt.datetime):
        taken_at = taken_at.replace(tzinfo=dt.UTC).isoformat()
    return {"taken_at": taken_at, "server_version": version, "status": status, "files": files}


def _d(before: Snapshot, after: Snapshot, name: str) -> float | None:
    a, b = after["status"].get(name), before["status"].get(name)
    return None if a is None or b is None else a - b


def _f(before: Snapshot, after: Snapshot, event: str, column: str) -> float | None:
    if before.get("files") is None or after.get("files") is None:
        return None
    a, b = after["files"].get(event), before["files"].get(event)
    if a is None or b is None:
        return None
    return a[column] - b[column]


def _mb(value: float | None) -> float | None:
    return None if value is None else value / (1 << 20)


def snapshot_delta(before: Snapshot, after: Snapshot, seconds: float) -> dict[str, float | None]:
    """Window metrics with the PostgreSQL path's keys (null where InnoDB cannot say), plus
    InnoDB-only figures prefixed innodb_."""
    with_ps = before.get("files") is not None and after.get("files") is not None
    if with_ps:
        reads = _f(before, after, DATA_FILE, "COUNT_READ")
        read_bytes = _f(before, after, DATA_FILE, "SUM_NUMBER_OF_BYTES_READ")
        read_ps = _f(before, after, DATA_FILE, "SUM_TIMER_READ")
        writes = _f(before, after, DATA_FILE, "COUNT_WRITE")
        write_bytes = _f(before, after, DATA_FILE, "SUM_NUMBER_OF_BYTES_WRITE")
        write_ps = _f(before, after, DATA_FILE, "SUM_TIMER_WRITE")
    else:
        reads, read_bytes = (
            _d(before, after, "Innodb_data_reads"),
            _d(before, after, "Innodb_data_read"),
        )
        writes = _d(before, after, "Innodb_data_writes")
        write_bytes = _d(before, after, "Innodb_data_written")
        read_ps = write_ps = None
    log_syncs = _f(before, after, LOG_FILE, "COUNT_MISC")
    log_sync_ps = _f(before, after, LOG_FILE, "SUM_TIMER_MISC")
    misses = _d(before, after, "Innodb_buffer_pool_reads")
    requests = _d(before, after, "Innodb_buffer_pool_read_requests")
    return {
        "lio_per_s": per_s(requests, seconds),
        "pio_reads_per_s": per_s(reads, seconds),
        "pio_read_mb_per_s": per_s(_mb(read_bytes), seconds),
        "pio_writes_per_s": per_s(writes, seconds),
        "pio_write_mb_per_s": per_s(_mb(write_bytes), seconds),
        "db_read_latency_us": ratio(read_ps, reads, 1 / PS_PER_US),
        "db_write_latency_us": ratio(write_ps, writes, 1 / PS_PER_US),
        "wal_mb_per_s": per_s(_mb(_d(before, after, "Innodb_os_log_written")), seconds),
        "wal_records_per_s": None,
        "wal_fpi_per_s": None,
        "wal_writes_per_s": per_s(_d(before, after, "Innodb_log_writes"), seconds),
        "wal_syncs_per_s": per_s(log_syncs, seconds),
        "wal_sync_latency_us": ratio(log_sync_ps, log_syncs, 1 / PS_PER_US),
        "commits_per_s": per_s(_d(before, after, "Com_commit"), seconds),
        "rollbacks_per_s": per_s(_d(before, after, "Com_rollback"), seconds),
        "db_time_s": None,
        "temp_mb": None,
        # InnoDB's own figures (no PostgreSQL twin).
        "innodb_buffer_pool_misses_per_s": per_s(misses, seconds),
        "innodb_buffer_pool_hit_pct": ratio(
            None if requests is None or misses is None else requests - misses, requests, 100
        ),
        "innodb_pages_written_per_s": per_s(_d(before, after, "Innodb_pages_written"), seconds),
        "innodb_dblwr_pages_per_s": per_s(_d(before, after, "Innodb_dblwr_pages_written"), seconds),
        "innodb_data_fsyncs_per_s": per_s(_d(before, after, "Innodb_data_fsyncs"), seconds),
        "innodb_log_waits_per_s": per_s(_d(before, after, "Innodb_log_waits"), seconds),
        # Background work: page flushing, and the redo not yet checkpointed at the end.
        "innodb_pages_flushed_per_s": per_s(
            _d(before, after, "Innodb_buffer_pool_pages_flushed"), seconds
        ),
        "innodb_checkpoint_age_mb": _mb(after["status"].get("Innodb_checkpoint_age")),
        "innodb_dirty_pages": after["status"].get("Innodb_buffer_pool_pages_dirty"),
        # A Galera node's replication figures (null on a single server).
        **galera_stats.cluster_delta(before["status"], after["status"], seconds),
    }


def work_per_op(
    before: Snapshot, after: Snapshot, ops: dict[str, int]
) -> dict[str, dict[str, float]] | None:
    """Page gets (logical) and buffer pool misses (physical) per SLOBop over the window.

    InnoDB counts them for the whole server, not per statement: the figures are per op of
    all kinds ("all"), and per kind only when the run did one kind of op."""
    requests = _d(before, after, "Innodb_buffer_pool_read_requests")
    misses = _d(before, after, "Innodb_buffer_pool_reads")
    total = sum(ops.values())
    if requests is None or misses is None or not total:
        return None
    figures = {"ops": total, "lio": requests / total, "pio": misses / total}
    kinds = [kind for kind, n in ops.items() if n]
    return {kinds[0] if len(kinds) == 1 else "all": figures}


def notes(after: Snapshot) -> list[str]:
    """Why some names differ from PostgreSQL's and which figures are null (run.json notes)."""
    result = list(NOTES)
    if galera_stats.is_node(after.get("status") or {}):
        result += galera_stats.NOTES
    if after.get("files") is None:
        result.append("performance_schema is OFF: read/write latencies are null")
    elif LOG_FILE not in after["files"]:
        result.append(
            f"{after.get('server_version')}: the redo log is not instrumented in "
            "performance_schema: wal_syncs_per_s and wal_sync_latency_us are null "
            "(innodb_data_fsyncs_per_s counts fsyncs of all InnoDB files)"
        )
    return result
