"""The text report's latency waterfall: per percentile, the figure of each layer (op → DB
read call → device → layers measured outside this host), for the window and per interval,
each layer saying where it was measured; rates imported from outside listed below.

Reads only run.json (analysis/waterfall.py builds the layers). Shown when the run has
traced layers (latency_layers) or external series; a layer not measured is n/a with its
reason.
"""

from __future__ import annotations

import textwrap
from typing import Any

from openslob.analysis.waterfall import PERCENTILES, Layer, waterfall
from openslob.report.blocks import NA, WIDTH, fmt, fmt_us, section, table

# Intervals printed per layer table; the rest are in run.json (intervals, external_series).
MAX_INTERVALS_SHOWN = 20
ROWS = (*PERCENTILES, "mean")


def _cell(layer: Layer, stat: str) -> str:
    if layer.reason is not None and all(v is None for v in layer.window_us.values()):
        return NA
    return fmt_us(layer.window_us.get(stat)) if stat in layer.window_us else ""


def _fitted(first: str, keys: list[str], headers: list[str], cells: list[list[str]]) -> list[str]:
    """table() of the key column and the value columns, split into as many tables as the
    report's WIDTH needs (each repeating the key column)."""
    lines: list[str] = []
    chunk: list[int] = []

    def render(columns: list[int]) -> list[str]:
        rows = [[key, *(cells[c][r] for c in columns)] for r, key in enumerate(keys)]
        return table([first, *(headers[c] for c in columns)], rows)

    for column in range(len(headers)):
        wider = render([*chunk, column])
        if chunk and max(len(line) for line in wider) > WIDTH:
            lines += [*render(chunk), ""]
            chunk = []
        chunk.append(column)
    return lines + render(chunk) if chunk else lines


def _window_table(layers: list[Layer]) -> list[str]:
    stats = [stat for stat in ROWS if any(stat in x.window_us for x in layers)]
    cells = [[_cell(x, stat) for stat in stats] for x in layers]
    return _fitted("window", stats, [x.name for x in layers], cells)


def _legend(layers: list[Layer]) -> list[str]:
    lines = ["Where each figure was measured:"]
    for x in layers:
        text = f"  {x.name}: {x.measured_at}"
        if x.reason is not None:
            text += f" — {NA} ({x.reason})"
        if x.window_note:
            text += f"; window = {x.window_note}"
        lines += textwrap.wrap(text, WIDTH, subsequent_indent=" " * 4)
    return lines


def _interval_table(layers: list[Layer]) -> list[str]:
    """p50 and p99 of each layer per interval (the percentiles every layer has per
    interval), an imported mean series beside them; a layer with no figure in any interval
    (not measured: the window table says why) is left out."""
    columns = [
        (x, stat)
        for x in layers
        for stat in ("p50", "p99", "mean")
        if any(v is not None for v in (x.intervals_us.get(stat) or {}).values())
    ]
    numbers = sorted({n for x, stat in columns for n in x.intervals_us[stat]})
    if not columns or not numbers:
        return []
    shown = numbers[:MAX_INTERVALS_SHOWN]
    cells = [[fmt_us(x.intervals_us[stat].get(n)) for n in shown] for x, stat in columns]
    lines = ["", "Per interval:"]
    lines += _fitted(
        "interval", [f"#{n}" for n in shown], [f"{x.name} {stat}" for x, stat in columns], cells
    )
    if len(numbers) > MAX_INTERVALS_SHOWN:
        lines.append(f"... {len(numbers) - MAX_INTERVALS_SHOWN} more intervals in run.json")
    return lines


def _rates(run: dict[str, Any]) -> list[str]:
    rates = [e for e in run.get("external_series") or [] if e.get("unit") == "per_s"]
    if not rates:
        return []
    rows = [
        [
            e["name"],
            fmt((e.get("window") or {}).get("mean")),
            fmt((e.get("window") or {}).get("max")),
        ]
        for e in rates
    ]
    lines = ["", "Rates measured outside this host (per second; mean and max of the intervals):"]
    return lines + table(["series", "mean", "max"], rows)


def waterfall_section(run: dict[str, Any]) -> list[str]:
    """The block; empty for a run with neither traced layers nor external series."""
    if not run.get("latency_layers") and not run.get("external_series"):
        return []
    layers = waterfall(run)
    if not run.get("external_series") and not any(x.measured for x in layers if x.key != "op"):
        return []  # only the op layer: the Latency section has it (and the layers' reasons)
    lines = section("Latency waterfall (op -> DB read call -> device -> outside this host)")
    if layers:
        lines += _window_table(layers)
        lines += _legend(layers)
        lines += _interval_table(layers)
    lines += _rates(run)
    lines += textwrap.wrap(
        "A layer cannot be faster than the one beneath it at the same percentile; when one "
        "is, the Warnings say so.",
        WIDTH,
    )
    return lines
