"""Figures drawn from run results: the SLOB petal plot, time series, latency histograms.

Every function takes data already loaded (RunRef lists, timeseries.csv rows, a run.json dict)
and returns a matplotlib Figure built without pyplot, so no global state or GUI backend is
touched and figures can be drawn from threads or tests. `save` writes files, `figure_svg`
returns SVG text to inline in an offline HTML report. Latencies are in µs throughout; a figure
that was not measured (None / empty CSV cell) is skipped or drawn as a gap, never as 0.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib import patheffects
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from matplotlib.transforms import blended_transform_factory

from openslob.model.histogram import Histogram, bucket_bounds, merged_ops, of_summary
from openslob.model.metrics import METRICS
from openslob.model.metrics import label as metric_label
from openslob.results.rundir import write_atomic

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from openslob.results.collect import RunRef

DPI = 120
PCT_COLORS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
)
# One line style + marker family per sweep, so overlaid sweeps stay apart even in greyscale.
SWEEP_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"))
MARK_COLOR = "#d62728"
# a white outline keeps small labels legible where they cross a line or grid
HALO = [patheffects.withStroke(linewidth=2.5, foreground="white")]

X_CHOICES: dict[str, tuple[tuple[str, ...], str]] = {
    "iops": (("pio_reads_per_s", "pio_writes_per_s"), "Physical I/O per second (DB)"),
    "mbps": (("pio_read_mb_per_s", "pio_write_mb_per_s"), "Physical I/O MB/s (DB)"),
}
# --latency choices that are metrics (the table names them); the others are op percentiles.
LATENCY_METRICS = {"db_read": "db_read_latency_us", "device_read": "device_read_latency_us"}
LATENCY_TITLES = {
    **{choice: metric_label(key) for choice, key in LATENCY_METRICS.items()},
    "op_p50": "SLOBop p50",
    "op_p99": "SLOBop p99",
}
LATENCY_LABELS = {
    **{c: f"{metric_label(k)} ({METRICS[k].unit})" for c, k in LATENCY_METRICS.items()},
    "op_p50": "SLOBop latency p50, all op types (µs)",
    "op_p99": "SLOBop latency p99, all op types (µs)",
}
X_TITLES = {"iops": "DB physical I/O per second", "mbps": "DB physical MB/s"}
NINES = (0.0, 50.0, 90.0, 99.0, 99.9, 99.99)


# --- shared helpers -----------------------------------------------------------------------


def _thousands(value: float, _pos: object = None) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.3g}"


def _number_axis(axis: Any) -> None:
    """Plain numbers with separators: 1,000 rather than 10^3 or 1e3 offsets."""
    axis.set_major_formatter(FuncFormatter(_thousands))


def _log_axis(axis: Any) -> None:
    """Log scale labelled at 1-2-5 steps: a range inside one decade still gets numbers."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_minor_formatter(NullFormatter())
    _number_axis(axis)


def _new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _footnote(fig: Figure, text: str) -> None:
    fig.text(0.01, 0.0, text, ha="left", va="top", fontsize=8, color="#555555")


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def save(
    fig: Figure, path_without_suffix: Path | str, formats: Sequence[str] = ("png", "svg")
) -> list[Path]:
    """Write the figure once per format as <path>.<format>; returns the files written."""
    base = Path(path_without_suffix)
    base.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        # append, never with_suffix: "petal.db_read" must not lose its ".db_read"
        target = base.with_name(f"{base.name}.{fmt}")
        # whole or not at all: a full disk must not leave a truncated image behind
        write_atomic(
            target,
            lambda fh, fmt=fmt: fig.savefig(
                fh, format=fmt, dpi=DPI, bbox_inches="tight", metadata=_metadata(fmt)
            ),
        )
        written.append(target)
    return written


def figure_svg(fig: Figure) -> str:
    """The figure as an <svg> element, without XML prolog or DOCTYPE, ready to inline in HTML."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", dpi=DPI, bbox_inches="tight", metadata=_metadata("svg"))
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _metadata(fmt: str) -> dict[str, Any] | None:
    # no timestamps in the files: the same results give byte-identical reports
    if fmt == "svg":
        return {"Date": None}
    if fmt == "pdf":
        return {"CreationDate": None}
    return None


# --- petal plot ---------------------------------------------------------------------------


@dataclass
class PetalPoint:
    label: str
    update_pct: float
    sessions: int
    x: float
    y: float
    name: str


def update_pct(ref: RunRef) -> float | None:
    value = (ref.run.get("config") or {}).get("UPDATE_PCT", ref.point.get("UPDATE_PCT"))
    return None if value is None else float(value)


def session_count(ref: RunRef) -> int | None:
    sessions = ref.run.get("sessions")
    if sessions:
        return len(sessions)
    value = ref.point.get("SESSIONS")
    return int(value) if value else None


def petal_x(run: Mapping[str, Any], x: str) -> float | None:
    keys, _ = X_CHOICES[x]
    metrics = run.get("metrics") or {}
    values = [metrics.get(key) for key in keys]
    if values[0] is None:
        return None
    # a read-only run may report writes as null on some versions: reads alone still count
    return float(sum(v for v in values if v is not None))


def petal_y(run: Mapping[str, Any], latency: str) -> float | None:
    metrics = run.get("metrics") or {}
    if latency in LATENCY_METRICS:
        value = metrics.get(LATENCY_METRICS[latency])
    else:
        hist = merged_ops(run.get("latency"))
        value = None if hist is None else hist.percentile_us(50 if latency == "op_p50" else 99)
    return None if value is None else float(value)


def petal_points(
    refs: Sequence[RunRef], x: str, latency: str
) -> tuple[list[PetalPoint], list[str]]:
    """Plottable points, and the names of runs skipped because a coordinate was not measured."""
    points, skipped = [], []
    for ref in refs:
        pct, sessions = update_pct(ref), session_count(ref)
        px, py = petal_x(ref.run, x), petal_y(ref.run, latency)
        if None in (pct, sessions, px, py):
            skipped.append(ref.name)
            continue
        points.append(PetalPoint(curve_label(ref), pct, sessions, px, py, ref.name))
    return points, skipped


def curve_label(ref: RunRef) -> str:
    """Whose curves a run belongs to: its sweep or directory, and the engine's variant when
    it has one (engine.variant: a page size chosen per server, one petal set per page size
    in the block-size study)."""
    variant = (ref.run.get("engine") or {}).get("variant")
    return f"{ref.label} · {variant}" if variant else ref.label


def _pct_text(pct: float) -> str:
    return f"{pct:g} % update"


def petal(
    refs: Sequence[RunRef],
    *,
    x: str = "iops",
    latency: str = "db_read",
    log_x: bool = False,
    log_y: bool = False,
    title: str | None = None,
) -> Figure:
    """SLOB petal plot: one curve per sweep and UPDATE_PCT, points in session-count order."""
    if x not in X_CHOICES:
        raise ValueError(f"x must be one of {', '.join(X_CHOICES)}, not {x!r}")
    if latency not in LATENCY_LABELS:
        raise ValueError(f"latency must be one of {', '.join(LATENCY_LABELS)}, not {latency!r}")
    points, skipped = petal_points(refs, x, latency)
    fig = _new_figure(9, 6)
    ax = fig.add_subplot()
    ax.set_title(title or f"SLOB petal plot: {LATENCY_TITLES[latency]} vs {X_TITLES[x]}")
    ax.set_xlabel(X_CHOICES[x][1])
    ax.set_ylabel(LATENCY_LABELS[latency])
    ax.grid(True, which="major", alpha=0.4)
    if not points:
        _empty(ax, "no run has both coordinates measured")
    else:
        _draw_curves(ax, points)
        _petal_axes(ax, log_x, log_y)
    if skipped:
        names = ", ".join(skipped[:6]) + (", …" if len(skipped) > 6 else "")
        _footnote(fig, f"{len(skipped)} skipped: not measured ({names})")
    return fig


def _draw_curves(ax: Axes, points: list[PetalPoint]) -> None:
    labels = list(dict.fromkeys(p.label for p in points))  # first-seen order = sweep order
    pcts = sorted({p.update_pct for p in points})
    overlay = len(labels) > 1
    drawn = 0
    for li, label in enumerate(labels):
        linestyle, marker = SWEEP_STYLES[li % len(SWEEP_STYLES)]
        for pct in pcts:
            curve = sorted(
                (p for p in points if p.label == label and p.update_pct == pct),
                key=lambda p: (p.sessions, p.name),
            )
            if not curve:
                continue
            color = PCT_COLORS[pcts.index(pct) % len(PCT_COLORS)]
            legend = f"{label} · {_pct_text(pct)}" if overlay else _pct_text(pct)
            ax.plot(
                [p.x for p in curve],
                [p.y for p in curve],
                linestyle=linestyle,
                marker=marker,
                color=color,
                markersize=5,
                linewidth=1.6,
                label=legend,
            )
            _annotate_sessions(ax, curve, color, above=drawn % 2 == 0)
            drawn += 1
    ax.legend(
        title="sessions annotated at each point",
        title_fontsize=8,
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0,
    )


def _annotate_sessions(ax: Axes, curve: list[PetalPoint], color: str, *, above: bool) -> None:
    """Session count beside each point; neighbouring curves alternate sides so the numbers of
    close curves (low session counts bunch together) do not print over each other."""
    dx, dy = (-4, 4) if above else (4, -4)
    for p in curve:
        ax.annotate(
            str(p.sessions),
            (p.x, p.y),
            xytext=(dx, dy),
            textcoords="offset points",
            ha="right" if above else "left",
            va="bottom" if above else "top",
            fontsize=8,
            color=color,
            path_effects=HALO,
        )


def _petal_axes(ax: Axes, log_x: bool, log_y: bool) -> None:
    ax.margins(x=0.08, y=0.08)
    for log, set_scale, set_lim, axis in (
        (log_x, ax.set_xscale, ax.set_xlim, ax.xaxis),
        (log_y, ax.set_yscale, ax.set_ylim, ax.yaxis),
    ):
        if log:
            set_scale("log")
            _log_axis(axis)
        else:
            set_lim(0, None)  # from zero: the eye reads a petal's width and height as ratios
            _number_axis(axis)


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
        ("warmup", "warm-up", "#999999"),
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


def op_blocks(run: Mapping[str, Any]) -> list[tuple[str, Histogram]]:
    """Op types that recorded ops, in run.json order (select, update, scan)."""
    found = []
    for kind, block in (run.get("latency") or {}).items():
        hist = of_summary(block)
        if hist is not None and hist.count:
            found.append((kind, hist))
    return found


def _stairs(hist: Histogram) -> tuple[list[float], list[int]]:
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
    edges, counts = _stairs(hist)
    ax.stairs(counts, edges, fill=True, color="#1f77b4", alpha=0.75)
    ax.set_xscale("log")
    _log_axis(ax.xaxis)
    _number_axis(ax.yaxis)
    for pct, style in ((50, "--"), (99, ":")):
        value = hist.percentile_us(pct)
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
