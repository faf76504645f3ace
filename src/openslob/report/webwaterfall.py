"""The HTML report's latency waterfall: chart specs (assets/report.js draws them) and a table
saying where each layer was measured.

- by percentile, for the window: a line per layer on the nines axis (p50, p90, p99, p99.9),
  top layer to bottom; the tooltip of each point names the layer it was measured at;
- per interval: each layer's p99 (an imported series: its own statistic) by interval.

Reads only run.json (analysis/waterfall.py); a layer not measured is left out of the charts
and is n/a with its reason in the table.
"""

from __future__ import annotations

from typing import Any

from openslob.analysis.waterfall import PERCENTILES, Layer, waterfall
from openslob.report import escape
from openslob.report.blocks import NA, fmt_us
from openslob.report.figure import PCT_COLORS
from openslob.report.plots import nines

_PCT_VALUE = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9}


def _color(n: int) -> str:
    return PCT_COLORS[n % len(PCT_COLORS)]


def _series(n: int, layer: Layer, points: list[list[Any]]) -> dict[str, Any]:
    return {
        "label": layer.name,
        "color": _color(n),
        "dash": layer.external,
        "points": points,
    }


def _by_percentile(layers: list[Layer]) -> dict[str, Any]:
    series = []
    for n, x in enumerate(layers):
        points = [
            [nines(_PCT_VALUE[p]), x.window_us[p], f"{x.name} {p}: {x.measured_at}"]
            for p in PERCENTILES
            if x.window_us.get(p) is not None
        ]
        if points:
            series.append(_series(n, x, points))
    return {
        "title": "Latency waterfall by percentile (window)",
        "x": {"label": "percentile", "scale": "nines", "max": nines(99.9)},
        "y": {"label": "latency (µs)", "log": True},
        "series": series,
        "line": True,
        "note": "solid: measured on this host; dashed: measured outside it (imported)",
    }


def _by_interval(layers: list[Layer]) -> dict[str, Any]:
    series = []
    for n, x in enumerate(layers):
        stat = "p99" if "p99" in x.intervals_us else next(iter(x.intervals_us), None)
        values = x.intervals_us.get(stat or "") or {}
        points = [
            [k, v, f"{x.name} {stat}: {x.measured_at}"]
            for k, v in sorted(values.items())
            if v is not None
        ]
        if points:
            series.append({**_series(n, x, points), "label": f"{x.name} {stat}"})
    return {
        "title": "Latency waterfall per interval (p99; imported series: their own statistic)",
        "x": {"label": "interval"},
        "y": {"label": "latency (µs)", "log": True},
        "series": series,
        "line": True,
    }


def _table(layers: list[Layer]) -> str:
    columns = [p for p in (*PERCENTILES, "mean") if any(p in x.window_us for x in layers)]
    head = "".join(f"<th>{escape.text(p)}</th>" for p in columns)
    rows = []
    for x in layers:
        shown = [fmt_us(x.window_us.get(p)) if p in x.window_us else "" for p in columns]
        cells = "".join(f'<td class="num">{escape.text(c)}</td>' for c in shown)
        where = x.measured_at + (f" — {NA} ({x.reason})" if x.reason else "")
        name, place = escape.text(x.name), escape.text(where)
        rows.append(f'<tr><td class="text">{name}</td>{cells}<td class="text">{place}</td></tr>')
    return (
        '<div class="table-wrap"><table class="data waterfall">'
        "<caption>Latency waterfall (window)</caption>"
        f"<thead><tr><th>layer</th>{head}<th>measured at</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def specs(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The waterfall's charts (none for a run with neither traced nor imported layers)."""
    if not run.get("latency_layers") and not run.get("external_series"):
        return []
    layers = waterfall(run)
    return [s for s in (_by_percentile(layers), _by_interval(layers)) if s["series"]]


def table_html(run: dict[str, Any]) -> str:
    if not run.get("latency_layers") and not run.get("external_series"):
        return ""
    return _table(waterfall(run))
