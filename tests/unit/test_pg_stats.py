"""PostgreSQL snapshot deltas without a server: pg_stat_io's rows summed per object group,
one pass per snapshot (engines/postgres/stats.py)."""

from __future__ import annotations

from openslob.engines.postgres.stats import snapshot_delta

# pg_stat_io rows: (backend_type, object, reads, read_bytes, read_time, writes,
# write_bytes, write_time, fsyncs, fsync_time) at scale 1; None: the server gives no value
_IO_ROWS = (
    ("client backend", "relation", 4, 32768, 2.0, 1, 8192, None, None, None),
    ("checkpointer", "relation", None, None, None, 3, 24576, None, None, None),
    ("client backend", "temp relation", 1, 8192, 0.5, 0, 0, None, None, None),
    # other objects are not the data set's reads
    ("client backend", "wal", 7, None, None, 2, None, None, 2, 1.0),
    ("walwriter", "wal", None, None, None, 5, None, None, None, None),
)
_IO_COLUMNS = ("reads", "read_bytes", "read_time", "writes", "write_bytes", "write_time",
               "fsyncs", "fsync_time")  # fmt: skip


def _snap(scale: float, version: int = 180000) -> dict:
    io = [
        {
            "backend_type": backend,
            "object": obj,
            "context": "normal",
            **{
                c: None if v is None else v * scale
                for c, v in zip(_IO_COLUMNS, values, strict=True)
            },
        }
        for backend, obj, *values in _IO_ROWS
    ]
    return {
        "server_version": version,
        "database": {"xact_commit": 10 * scale, "blks_hit": 100 * scale, "blks_read": 5 * scale},
        "io": io,
        "wal": {"wal_bytes": 1000 * scale, "wal_records": 10 * scale, "wal_fpi": 0},
        "bgwriter": {"buffers_clean": 0},
        "checkpointer": {"num_timed": 0, "num_requested": 0, "buffers_written": 0},
        "wal_position": None,
    }


def test_io_deltas_sum_each_object_groups_rows_and_skip_missing_values() -> None:
    delta = snapshot_delta(_snap(1), _snap(3), 2.0, io_timing=True, wal_io_timing=True)
    # relation + temp relation over 2 s: reads (4 + 1) x 2, writes (1 + 3 + 0) x 2
    assert delta["pio_reads_per_s"] == 5.0
    assert delta["pio_writes_per_s"] == 4.0
    assert delta["pio_read_mb_per_s"] == (40960 * 2 / (1 << 20)) / 2
    assert delta["db_read_latency_us"] == 2.5 * 2 / 10 * 1000
    assert delta["db_write_latency_us"] is None  # no row has a write time
    assert delta["wal_writes_per_s"] == 7.0 and delta["wal_syncs_per_s"] == 2.0
    assert delta["wal_sync_latency_us"] == 500.0  # 2 ms over 4 syncs
    assert delta["lio_per_s"] == 105.0


def test_without_pg_stat_io_the_database_counts_stand_in() -> None:
    before, after = _snap(1, 150000), _snap(2, 150000)
    before["io"] = after["io"] = None
    delta = snapshot_delta(before, after, 1.0, io_timing=False, wal_io_timing=False)
    assert delta["pio_reads_per_s"] == 5.0 and delta["pio_writes_per_s"] is None
