"""The run's I/O shape block (run.json `io_shape`): what PREFETCH changes, measured.

The engine gives its own counters (engines/<name>/ioshape.py, through WindowStats.details):
read requests, blocks read, bytes per request, read-ahead pages, and which sampled wait
event stands for Oracle's `db file parallel read`. Added here from the run's host and wait
figures: reads in flight at the device (the average queue depth of /proc/diskstats, in all
and per session), the device's bytes per read request, and the stand-in event's share of
the wait samples. Every figure is measured or null (with a note saying why).
"""

from __future__ import annotations

from typing import Any


def io_shape(
    engine: dict[str, Any] | None,
    metrics: dict[str, Any],
    sessions: int,
    waits: list[dict[str, Any]],
    wait_samples: int,
    prefetch: bool,
) -> dict[str, Any] | None:
    """The block for one instance (None when the engine measured nothing)."""
    if engine is None:
        return None
    requests, blocks = engine.get("read_requests"), engine.get("blocks_read")
    queue = metrics.get("device_avg_queue")
    read_kb = metrics.get("device_avg_read_kb")
    notes = list(engine.get("notes") or [])
    if queue is None:
        notes.append("device counters not read: reads in flight are n/a")
    else:
        notes.append("reads in flight count every process's I/O on the data devices")
    event = engine.get("parallel_read_event")
    pct = None
    if event is not None and wait_samples:
        pct = sum(w["pct"] for w in waits if w.get("event") == event)
    elif event is not None:
        notes.append("no wait samples: the parallel read event's share is n/a")
    return {
        "prefetch": prefetch,
        "read_requests": _int(requests),
        "blocks_read": _int(blocks),
        "blocks_per_request": None if not requests or blocks is None else blocks / requests,
        "avg_read_bytes": engine.get("avg_read_bytes"),
        "read_ahead_pages": _int(engine.get("read_ahead_pages")),
        "read_ahead_evicted": _int(engine.get("read_ahead_evicted")),
        "device_in_flight": queue,
        "device_in_flight_per_session": None if queue is None or not sessions else queue / sessions,
        "device_avg_read_bytes": None if read_kb is None else read_kb * 1024,
        "io_method": engine.get("io_method"),
        "parallel_read_event": event,
        "parallel_read_pct": pct,
        "notes": notes,
    }


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)
