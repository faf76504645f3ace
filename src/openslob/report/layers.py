"""The text report's latency layers: run.json "latency_layers" as a table, layer by layer
from the op down to the device, with where each was measured, why a layer is missing, and
how its counts reconcile (results/layers.py). Reads only run.json; nothing for a run.json
from before the layers existed."""

from __future__ import annotations

import textwrap
from typing import Any

from openslob.report.blocks import NA, WIDTH, fmt, fmt_us, section, table

_STATS = ("p50_us", "p90_us", "p99_us", "p999_us", "max_us")


def layers_section(run: dict[str, Any]) -> list[str]:
    layers = run.get("latency_layers")
    if not layers:
        return []
    lines = section("Latency by layer (window)")
    rows = []
    for name, layer in layers.items():
        window = layer.get("window") or {}
        rows.append(
            [
                name,
                fmt(window.get("count"), 0),
                fmt(layer.get("per_s")),
                *(fmt_us(window.get(stat)) for stat in _STATS),
            ]
        )
    lines += table(["layer", "count", "per s", "p50", "p90", "p99", "p99.9", "max"], rows)
    for name, layer in layers.items():
        text = layer.get("reason") or layer.get("measured_at") or NA
        lines += textwrap.wrap(f"{name}: {text}", WIDTH, subsequent_indent="    ")
        check = layer.get("reconciliation")
        if check:
            lines += textwrap.wrap(
                f"counts: {fmt(check.get('traced_per_s'))}/s traced, "
                f"{fmt(check.get('counted_per_s'))}/s {check.get('counted_by')}: "
                f"{fmt(check.get('difference_pct'), 2)} % (they agree within "
                f"{fmt(check.get('bound_pct'), 0)} %)"
                + (f"; {fmt(check['timed_pct'], 2)} % timed" if "timed_pct" in check else "")
                + (
                    f"; the kernel skipped {check['skipped_probe_runs']:,} probe runs"
                    if check.get("skipped_probe_runs")
                    else ""
                ),
                WIDTH,
                initial_indent="  ",
                subsequent_indent="    ",
            )
    return lines
