"""The I/O shape block's arithmetic and its n/a rules (the measured side is
tests/integration/test_prefetch.py): pg_stat_io rows in the shape PostgreSQL 17 and 18 return
them, and a run.json block of nulls rendered as n/a."""

from __future__ import annotations

from openslob.engines.postgres.ioshape import engine_io_shape
from openslob.report.ioshape import ioshape_lines
from openslob.results.ioshape import io_shape

SETTINGS_18 = {"block_size": "8192", "io_method": "worker", "prefetch": "on"}


def _row(backend: str, obj: str, reads: float, read_bytes: float | None) -> dict:
    return {"backend_type": backend, "object": obj, "context": "normal", "reads": reads,
            "read_bytes": read_bytes}  # fmt: skip


def test_pg18_requests_are_operations_and_blocks_come_from_bytes() -> None:
    rows = [
        _row("client backend", "relation", 100, 100 * 8192 * 3),  # 3 blocks per read
        _row("checkpointer", "relation", 50, 50 * 8192),  # not the work sessions
        _row("client backend", "wal", 7, 7 * 8192),
    ]
    shape = engine_io_shape(rows, SETTINGS_18)
    assert shape["read_requests"] == 100 and shape["blocks_read"] == 300
    assert shape["avg_read_bytes"] == 3 * 8192
    assert shape["parallel_read_event"] == "IO:AioIoCompletion"


def test_pg17_counts_blocks_so_requests_are_na() -> None:
    shape = engine_io_shape([_row("client backend", "relation", 40, None)], SETTINGS_18)
    assert shape["read_requests"] is None and shape["blocks_read"] == 40
    assert any("before 18" in n for n in shape["notes"])


def test_sync_io_with_prefetch_is_said() -> None:
    settings = {**SETTINGS_18, "io_method": "sync", "debug_io_direct": "data"}
    shape = engine_io_shape([], settings)
    assert shape["parallel_read_event"] is None
    assert any("io_method = sync" in n and "direct I/O" in n for n in shape["notes"])


def test_unmeasured_figures_are_null_and_printed_na() -> None:
    engine = engine_io_shape(None, SETTINGS_18)
    block = io_shape(engine, {}, 2, [], 0, True)
    assert block is not None
    assert block["read_requests"] is None and block["device_in_flight"] is None
    assert block["parallel_read_pct"] is None
    assert any("no wait samples" in n for n in block["notes"])
    lines = "\n".join(ioshape_lines({"io_shape": block}))
    assert "I/O shape (PREFETCH=on)" in lines
    assert "Reads in flight (device avg queue)" in lines and "n/a" in lines


def test_in_flight_per_session_and_event_share() -> None:
    engine = engine_io_shape([_row("client backend", "relation", 10, 10 * 8192)], SETTINGS_18)
    waits = [{"event": "IO:AioIoCompletion", "samples": 30, "pct": 75.0}]
    block = io_shape(engine, {"device_avg_queue": 6.0, "device_avg_read_kb": 8.0}, 4, waits, 40,
                     True)  # fmt: skip
    assert block is not None
    assert block["device_in_flight_per_session"] == 1.5
    assert block["device_avg_read_bytes"] == 8192
    assert block["parallel_read_pct"] == 75.0
