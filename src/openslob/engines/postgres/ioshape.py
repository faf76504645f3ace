"""PostgreSQL's side of the I/O shape block (what PREFETCH changes): read requests against
blocks read, from the work sessions' pg_stat_io rows (backend type 'client backend', object
'relation') of the window.

From 18, pg_stat_io counts read *operations* and their bytes (a read stream combines
adjacent blocks into one); before 18 it counts blocks, so requests are n/a there. Reads in
flight: with io_method=worker/io_uring a bitmap heap scan's read stream keeps up to
effective_io_concurrency reads going while the session waits in IO:AioIoCompletion, the
stand-in for Oracle's `db file parallel read`; with io_method=sync every read is the
session's own pread, one at a time, whatever the plan.
"""

from __future__ import annotations

from typing import Any

from openslob.config.option import BLOCK_SIZE

PARALLEL_READ_EVENT = "IO:AioIoCompletion"
ASYNC_METHODS = ("worker", "io_uring")


def engine_io_shape(
    io_rows: list[dict[str, Any]] | None, settings: dict[str, str]
) -> dict[str, Any]:
    """read_requests, blocks_read, avg_read_bytes (null when not measurable) and notes."""
    notes = [
        "read-ahead pages: n/a, PostgreSQL counts none (its prefetch is the read stream's "
        "own reads, counted in the read requests)"
    ]
    rows = [
        r
        for r in io_rows or []
        if r.get("backend_type") == "client backend" and r.get("object") == "relation"
    ]
    reads = _sum(rows, "reads") if io_rows is not None else None
    read_bytes = _sum(rows, "read_bytes") if io_rows is not None else None
    block = int(settings.get("block_size") or BLOCK_SIZE)
    if io_rows is None:
        notes.append("pg_stat_io is not available (PostgreSQL 16+): read requests are n/a")
        requests = blocks = None
    elif read_bytes is None:  # 16, 17: reads are blocks
        notes.append("pg_stat_io before 18 counts blocks, not read requests: requests are n/a")
        requests, blocks = None, reads
    else:
        requests, blocks = reads, read_bytes / block
    method = settings.get("io_method")
    if settings.get("prefetch") == "on" and method not in ASYNC_METHODS:
        direct = settings.get("debug_io_direct") not in (None, "", "off")
        notes.append(
            f"io_method = {method or 'n/a (before PostgreSQL 18)'}: the bitmap heap scan reads "
            "one block at a time in the session"
            + (" (direct I/O: posix_fadvise prefetch does nothing)" if direct else "")
            + "; for reads in flight: ALTER SYSTEM SET io_method = 'worker' (or io_uring) "
            "and restart the server"
        )
    return {
        "read_requests": requests,
        "blocks_read": blocks,
        "avg_read_bytes": None if not requests or read_bytes is None else read_bytes / requests,
        # InnoDB-style read-ahead page counters: PostgreSQL has none (its read-ahead is the
        # read stream's, counted in the requests above)
        "read_ahead_pages": None,
        "read_ahead_evicted": None,
        "io_method": method,
        "parallel_read_event": PARALLEL_READ_EVENT if method in ASYNC_METHODS else None,
        "notes": notes,
    }


def _sum(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r.get(key) for r in rows]
    if any(v is None for v in values):
        return None
    return float(sum(v for v in values if v is not None))
