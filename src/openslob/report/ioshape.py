"""The report's "I/O shape (PREFETCH)" block: run.json `io_shape` (results/ioshape.py) as the
reader of the Exadata seed compares prefetch off and on: reads in flight, read requests
against blocks read, bytes per read, read-ahead pages, and the `db file parallel read`
stand-in's share of the wait samples. n/a where run.json holds null; its notes say why."""

from __future__ import annotations

import textwrap
from typing import Any

from openslob.report.blocks import NA, WIDTH, fmt, section, table


def ioshape_lines(run: dict[str, Any]) -> list[str]:
    shape = run.get("io_shape")
    if not isinstance(shape, dict):
        return []
    lines = section(f"I/O shape (PREFETCH={'on' if shape.get('prefetch') else 'off'})")
    event = shape.get("parallel_read_event")
    rows = [
        ["Reads in flight (device avg queue)", fmt(shape.get("device_in_flight"), 2)],
        ["  per session", fmt(shape.get("device_in_flight_per_session"), 2)],
        ["Read requests (database)", _count(shape.get("read_requests"))],
        ["Blocks read (database)", _count(shape.get("blocks_read"))],
        ["Blocks per read request", fmt(shape.get("blocks_per_request"), 3)],
        ["Bytes per read request (database)", _count(shape.get("avg_read_bytes"))],
        ["Bytes per read request (device)", _count(shape.get("device_avg_read_bytes"))],
        ["Read-ahead pages", _count(shape.get("read_ahead_pages"))],
        ["Read-ahead pages evicted unused", _count(shape.get("read_ahead_evicted"))],
        [
            f"db file parallel read ~ {event or NA}",
            fmt(shape.get("parallel_read_pct"), 1, " % of samples"),
        ],
    ]
    lines += table(["", "value"], rows)
    if shape.get("io_method"):
        lines.append(f"io_method = {shape['io_method']}")
    for note in shape.get("notes") or []:
        lines += _wrapped(f"note: {note}")
    return lines


def _count(value: float | None) -> str:
    return NA if value is None else f"{value:,.0f}"


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent="      ") or [text]
