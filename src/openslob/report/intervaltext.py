"""The text report's Intervals block: how the window's sampling intervals (run.json
"intervals", one row per interval) spread, figure by figure.

Reads only run.json. The full table is in run.json and timeseries.csv; the report shows, for
each figure, the lowest, median and highest interval and which interval that was, so a stall
or a burst inside the window is visible without opening the CSV.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from openslob.analysis.figures import interval_rows
from openslob.report.blocks import fmt, fmt_us, section, table

# (column of run.json intervals, row label, formatter)
FIGURES = (
    ("slobops_per_s", "SLOBops/s", fmt),
    ("select_p99_us", "select p99", fmt_us),
    ("update_p99_us", "update + commit p99", fmt_us),
    ("scan_p99_us", "scan p99", fmt_us),
)


def interval_section(run: dict[str, Any]) -> list[str]:
    rows = interval_rows(run)
    if not rows:
        return []
    step = (run.get("config") or {}).get("SAMPLE_INTERVAL")
    lines = section(f"Intervals ({len(rows)} in the window, {fmt(step)} s each)")
    body = []
    for key, name, show in FIGURES:
        values = [(r[key], r.get("interval")) for r in rows if r.get(key) is not None]
        if not values:
            continue
        low, high = min(values, key=lambda v: v[0]), max(values, key=lambda v: v[0])
        body.append(
            [
                name,
                f"{show(low[0])} (#{low[1]})",
                show(median(v for v, _ in values)),
                f"{show(high[0])} (#{high[1]})",
            ]
        )
    lines += table(["figure", "lowest (interval)", "median", "highest (interval)"], body)
    lines.append("Every interval: run.json intervals, timeseries.csv.")
    return lines
