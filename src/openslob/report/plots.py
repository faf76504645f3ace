"""Figures drawn from run results: the SLOB petal plot, time series, latency histograms.

Every function takes data already loaded (RunRef lists, timeseries.csv rows, a run.json dict)
and returns a matplotlib Figure built without pyplot, so no global state or GUI backend is
touched and figures can be drawn from threads or tests; `save` writes files. Latencies are in
µs throughout; a figure that was not measured (None / empty CSV cell) is skipped or drawn as a
gap, never as 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from openslob.model.histogram import Histogram, bucket_bounds, of_summary
from openslob.model.metrics import label as metric_label
from openslob.model.states import Phase
from openslob.report.figure import DPI, HALO, MARK_COLOR, save
from openslob.report.figure import empty as _empty
from openslob.report.figure import log_axis as _log_axis
from openslob.report.figure import new_figure as _new_figure
from openslob.report.figure import number_axis as _number_axis
from openslob.report.petal import (
    LATENCY_LABELS,
    LATENCY_METRICS,
    X_CHOICES,
    PetalPoint,
    curve_label,
    petal,
    petal_points,
    petal_x,
    petal_y,
    session_count,
    update_pct,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# the petal plot and the figure helpers live in petal.py and figure.py; callers keep one name
__all__ = [
    "DPI",
    "LATENCY_LABELS",
    "LATENCY_METRICS",
    "X_CHOICES",
    "PetalPoint",
    "curve_label",
    "latency_histogram",
    "petal",
    "petal_points",
    "petal_x",
    "petal_y",
    "save",
    "session_count",
    "timeseries",
    "update_pct",
]

NINES = (0.0, 50.0, 90.0, 99.0, 99.9, 99.99)


# --- time series --------------------------------------------------------------------------

# (time-series column = metrics table key, colour, line style); legends are the table's labels
IOPS_SERIES = (
    ("device_reads_per_s", "#1f77b4", "-"),
    ("device_writes_per_s", "#d62728", "-"),
    ("pio_reads_per_s", "#2ca02c", "--"),
)
MBPS_SERIES = (
    ("device_read_mb_per_s", "#1f77b4", "-"),
    ("device_write_mb_per_s", "#d62728", "-"),
)
LATENCY_SERIES = (
    ("device_read_latency_us", "#1f77b4", "-"),
    ("db_read_latency_us", "#2ca02c", "--"),
)
# The SLOBops' own latency per interval (the loop's histograms): median and tail per op type.
OP_LATENCY_SERIES = (
    ("select_p50_us", "#1f77b4", "-"),
    ("select_p99_us", "#1f77b4", ":"),
    ("update_p50_us", "#d62728", "-"),
    ("update_p99_us", "#d62728", ":"),
)
HEADROOM = 1.22
LABEL_Y = 0.98  # in axes fraction, inside the headroom band
# With few samples a lone value between gaps would vanish as a line: give it a dot.
MARKER_MAX_ROWS = 200


def _num(value: Any) -> float:
    """A CSV cell as float; empty / None (not measured) becomes NaN, which draws a gap."""
    if value is None or value == "":
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


# Columns of older timeseries.csv files under their earlier names.
_OLDER_NAMES = {"pio_reads_per_s": "db_reads_per_s"}


def _cell(row: Mapping[str, Any], key: str) -> Any:
    value = row.get(key)
    if value is None and key in _OLDER_NAMES:
        value = row.get(_OLDER_NAMES[key])
    return value


def phase_spans(rows: Sequence[Mapping[str, Any]], phase: str) -> list[tuple[float, float]]:
    """Contiguous stretches of one phase, each row covering (elapsed - seconds, elapsed]."""
    spans: list[tuple[float, float]] = []
    current: list[float] | None = None
    for row in rows:
        end = _num(row.get("elapsed_s"))
        if math.isnan(end):
            continue
        if row.get("phase") != phase:
            current = None
            continue
        seconds = _num(row.get("seconds"))
        start = end - (0.0 if math.isnan(seconds) else seconds)
        if current is None:
            current = [start, end]
            spans.append((start, end))
        else:
            current[1] = end
            spans[-1] = (current[0], end)
    return spans


def timeseries(
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str | None = None,
    marks: Sequence[tuple[float, float, str]] | None = None,
    terms: Mapping[str, str] | None = None,
) -> Figure:
    """IOPS, MB/s, I/O latency and SLOBop p50/p99 over elapsed seconds, warm-up shaded,
    episodes marked in red."""
    fig = _new_figure(10, 9.5)
    axes = fig.subplots(4, 1, sharex=True)
    fig.suptitle(title or "Time series")
    elapsed = [_num(row.get("elapsed_s")) for row in rows]
    panels = (
        (axes[0], IOPS_SERIES, "I/O per second"),
        (axes[1], MBPS_SERIES, "MB/s"),
        (axes[2], LATENCY_SERIES, "I/O latency (µs)"),
        (axes[3], OP_LATENCY_SERIES, "SLOBop latency (µs)"),
    )
    marker = "." if len(rows) <= MARKER_MAX_ROWS else None
    for ax, series, ylabel in panels:
        for key, color, linestyle in series:
            values = [_num(_cell(row, key)) for row in rows]
            legend = metric_label(key, terms)
            if all(math.isnan(v) for v in values):
                legend += " (not measured)"
            ax.plot(
                elapsed,
                values,
                color=color,
                linestyle=linestyle,
                marker=marker,
                markersize=3,
                linewidth=1.3,
                label=legend,
            )
        ax.set_ylabel(ylabel)
        # headroom above the data: the phase and episode labels sit there, clear of the lines
        ax.set_ylim(0, ax.get_ylim()[1] * HEADROOM)
        _number_axis(ax.yaxis)
        ax.grid(True, alpha=0.4)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    axes[-1].set_xlabel("Elapsed (s)")
    _shade_phases(axes, rows)
    _draw_marks(axes, marks or [])
    if not rows:
        _empty(axes[0], "no samples")
    return fig


def _shade_phases(axes: Sequence[Axes], rows: Sequence[Mapping[str, Any]]) -> None:
    for phase, text, color in (
        (Phase.WARMUP, "warm-up", "#999999"),
        ("tail", "after window", "#cccccc"),
    ):
        for start, end in phase_spans(rows, phase):
            for ax in axes:
                ax.axvspan(start, end, color=color, alpha=0.18, linewidth=0, zorder=0)
            top = axes[0]
            trans = blended_transform_factory(top.transData, top.transAxes)
            top.text(
                (start + end) / 2,
                LABEL_Y,
                text,
                transform=trans,
                ha="center",
                va="top",
                fontsize=7,
                color="#555555",
                clip_on=True,
            )


def _draw_marks(axes: Sequence[Axes], marks: Sequence[tuple[float, float, str]]) -> None:
    top = axes[0]
    trans = blended_transform_factory(top.transData, top.transAxes)
    for i, (start, end, text) in enumerate(marks):
        for ax in axes:
            ax.axvspan(start, end, color=MARK_COLOR, alpha=0.15, linewidth=0, zorder=0)
        # stagger the labels of neighbouring episodes so they do not print over each other
        top.text(
            start,
            LABEL_Y - 0.07 * (i % 2),
            f" {text}",
            transform=trans,
            ha="left",
            va="top",
            fontsize=7,
            color=MARK_COLOR,
            clip_on=True,
            path_effects=HALO,
        )


# --- latency histogram --------------------------------------------------------------------


def op_blocks(run: Mapping[str, Any], key: str = "latency") -> list[tuple[str, Histogram]]:
    """Op types that recorded ops, in run.json order (select, update, scan): the service
    time's histograms, or `key` = "latency_intended" (RATE runs)."""
    found = []
    for kind, block in (run.get(key) or {}).items():
        hist = of_summary(block)
        if hist is not None and hist.count:
            found.append((kind, hist))
    return found


def stairs(hist: Histogram) -> tuple[list[float], list[int]]:
    """Edges and counts over contiguous bucket bounds, with empty stretches as zero steps."""
    edges: list[float] = []
    counts: list[int] = []
    for idx in sorted(hist.counts):
        lower, upper = bucket_bounds(idx)
        lower_f = max(float(lower), 0.5)  # a log axis has no 0: the [0, 1) µs bucket starts at ½
        if edges and lower_f > edges[-1]:
            counts.append(0)
            edges.append(lower_f)
        elif not edges:
            edges.append(lower_f)
        counts.append(hist.counts[idx])
        edges.append(float(upper))
    return edges, counts


def nines(pct: float) -> float:
    """x position of a percentile on the 'nines' axis: 90 → 1, 99 → 2, 99.9 → 3."""
    return -math.log10(1 - pct / 100)


def percentile_curve(hist: Histogram, points: int = 400) -> tuple[list[float], list[float]]:
    top = nines(NINES[-1])
    xs = [top * i / (points - 1) for i in range(points)]
    ys = [hist.percentile_us(100 * (1 - 10**-x)) or math.nan for x in xs]
    return xs, ys


def latency_histogram(run: Mapping[str, Any], *, title: str | None = None) -> Figure:
    """Per op type: the latency histogram (log x) and the percentile curve on a nines axis."""
    blocks = op_blocks(run)
    fig = _new_figure(11, 1 + 3.2 * max(len(blocks), 1))
    fig.suptitle(title or f"SLOBop latency: {run.get('label') or 'run'}")
    if not blocks:
        _empty(fig.add_subplot(), "no latency histogram recorded")
        return fig
    axes = fig.subplots(len(blocks), 2, squeeze=False)
    for (kind, hist), (left, right) in zip(blocks, axes, strict=True):
        _histogram_panel(left, kind, hist)
        _percentile_panel(right, kind, hist)
    return fig


def _summary(kind: str, hist: Histogram) -> str:
    p50, p99 = hist.percentile_us(50), hist.percentile_us(99)
    return f"{kind}: {hist.count:,} ops, p50 {p50:,.0f} µs, p99 {p99:,.0f} µs"


def _histogram_panel(ax: Axes, kind: str, hist: Histogram) -> None:
    edges, counts = stairs(hist)
    ax.stairs(counts, edges, fill=True, color="#1f77b4", alpha=0.75)
    ax.set_xscale("log")
    _log_axis(ax.xaxis)
    _number_axis(ax.yaxis)
    for pct, style in ((50, "--"), (99, ":")):
        value = hist.percentile_us(pct)
        if value is None:  # never: op_blocks keeps only histograms with ops
            continue
        ax.axvline(
            value, color="#d62728", linestyle=style, linewidth=1, label=f"p{pct} {value:,.0f} µs"
        )
    ax.set_title(_summary(kind, hist), fontsize=10)
    ax.set_xlabel("Latency (µs, log scale)")
    ax.set_ylabel("Ops per bucket")
    ax.grid(True, alpha=0.4)
    ax.legend(fontsize=8, loc="upper left")


def _percentile_panel(ax: Axes, kind: str, hist: Histogram) -> None:
    xs, ys = percentile_curve(hist)
    ax.plot(xs, ys, color="#1f77b4", linewidth=1.6)
    ax.set_xticks([nines(p) for p in NINES], [f"{p:g}" for p in NINES])
    ax.set_xlim(0, nines(NINES[-1]))
    # linear from zero: the tail's growth over p50 is the point, a log axis would flatten it
    ax.set_ylim(0, None)
    _number_axis(ax.yaxis)
    ax.set_title(f"{kind}: latency by percentile", fontsize=10)
    ax.set_xlabel("Percentile (%, nines scale)")
    ax.set_ylabel("Latency (µs)")
    ax.grid(True, which="major", alpha=0.4)
