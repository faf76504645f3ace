"""MariaDB's side of the I/O shape block (what PREFETCH changes): read requests against pages
read, and InnoDB's own read-ahead counters, from SHOW GLOBAL STATUS of the window.

InnoDB reads every page with a request of its own, also the pages of a read-ahead (which its
I/O threads issue asynchronously, many in flight at once), so requests ~ pages: what
read-ahead changes is how many pages are read that no statement asked for yet
(Innodb_buffer_pool_read_ahead, _read_ahead_rnd) and how many of them were evicted unused
(_read_ahead_evicted). MariaDB has no wait sampling: the `db file parallel read` stand-in
is n/a.
"""

from __future__ import annotations

from typing import Any


def engine_io_shape(
    before: dict[str, Any], after: dict[str, Any], settings: dict[str, str]
) -> dict[str, Any]:
    """read_requests, blocks_read, avg_read_bytes, read-ahead pages (null when not read)."""

    def delta(name: str) -> float | None:
        a = (after.get("status") or {}).get(name)
        b = (before.get("status") or {}).get(name)
        return None if a is None or b is None else float(a - b)

    requests, read_bytes = delta("Innodb_data_reads"), delta("Innodb_data_read")
    linear, rnd = delta("Innodb_buffer_pool_read_ahead"), delta("Innodb_buffer_pool_read_ahead_rnd")
    return {
        "read_requests": requests,
        "blocks_read": delta("Innodb_pages_read"),
        "avg_read_bytes": None if not requests or read_bytes is None else read_bytes / requests,
        "read_ahead_pages": None if linear is None or rnd is None else linear + rnd,
        "read_ahead_linear_pages": linear,
        "read_ahead_random_pages": rnd,
        "read_ahead_evicted": delta("Innodb_buffer_pool_read_ahead_evicted"),
        "io_method": None,
        "parallel_read_event": None,
        "notes": [
            f"during the run: innodb_read_ahead_threshold = "
            f"{settings.get('innodb_read_ahead_threshold', 'n/a')}, innodb_random_read_ahead = "
            f"{settings.get('innodb_random_read_ahead', 'n/a')}",
            "InnoDB reads each page with its own request (read-ahead too: asynchronous, by "
            "its I/O threads); no wait sampling, so the `db file parallel read` stand-in is n/a",
        ],
    }
