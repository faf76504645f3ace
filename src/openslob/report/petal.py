"""The SLOB petal plot: latency vs physical I/O, one curve per sweep and update %.

Points are labelled with their session count. The runs of one point (its repeats: the same
workload in the same sweep or side) are drawn as their median with min–max bars on both
axes, so a point's noise is seen where it is. A run missing a coordinate is skipped and
counted in a footnote, never drawn at 0.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

from openslob.analysis.figures import point_identity
from openslob.model.histogram import merged_ops
from openslob.model.metrics import METRICS
from openslob.model.metrics import label as metric_label
from openslob.report.figure import (
    HALO,
    PCT_COLORS,
    SWEEP_STYLES,
    empty,
    footnote,
    log_axis,
    new_figure,
    number_axis,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from openslob.results.collect import RunRef

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


# --- petal plot ---------------------------------------------------------------------------


@dataclass
class PetalPoint:
    """One point of a curve: the median of its runs, and their range on both axes."""

    label: str
    update_pct: float
    sessions: int
    x: float
    y: float
    name: str
    runs: int = 1
    x_range: tuple[float, float] | None = None  # (min, max) over the runs when runs > 1
    y_range: tuple[float, float] | None = None


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
    """Plottable points (the runs of one point of one curve set merged: median and range),
    and the names of runs skipped because a coordinate was not measured."""
    groups: dict[tuple[str, str], list[PetalPoint]] = {}
    skipped = []
    for ref in refs:
        pct, sessions = update_pct(ref), session_count(ref)
        px, py = petal_x(ref.run, x), petal_y(ref.run, latency)
        if pct is None or sessions is None or px is None or py is None:
            skipped.append(ref.name)
            continue
        key = (curve_label(ref), json.dumps(point_identity(ref.run, ref.point), sort_keys=True))
        groups.setdefault(key, []).append(
            PetalPoint(curve_label(ref), pct, sessions, px, py, ref.name)
        )
    return [_merged(runs) for runs in groups.values()], skipped


def _merged(runs: list[PetalPoint]) -> PetalPoint:
    if len(runs) == 1:
        return runs[0]
    xs, ys = [p.x for p in runs], [p.y for p in runs]
    first = runs[0]
    return PetalPoint(
        first.label,
        first.update_pct,
        first.sessions,
        statistics.median(xs),
        statistics.median(ys),
        first.name,
        len(runs),
        (min(xs), max(xs)),
        (min(ys), max(ys)),
    )


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
    fig = new_figure(9, 6)
    ax = fig.add_subplot()
    ax.set_title(title or f"SLOB petal plot: {LATENCY_TITLES[latency]} vs {X_TITLES[x]}")
    ax.set_xlabel(X_CHOICES[x][1])
    ax.set_ylabel(LATENCY_LABELS[latency])
    ax.grid(True, which="major", alpha=0.4)
    if not points:
        empty(ax, "no run has both coordinates measured")
    else:
        _draw_curves(ax, points)
        _petal_axes(ax, log_x, log_y)
    notes = []
    if skipped:
        names = ", ".join(skipped[:6]) + (", …" if len(skipped) > 6 else "")
        notes.append(f"{len(skipped)} skipped: not measured ({names})")
    repeated = [p.runs for p in points if p.runs > 1]
    if repeated:
        notes.append(
            f"points of {min(repeated)}–{max(repeated)} runs: the median, bars from min to max"
            if min(repeated) != max(repeated)
            else f"points of {repeated[0]} runs: the median, bars from min to max"
        )
    if notes:
        footnote(fig, "; ".join(notes))
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
            _range_bars(ax, curve, color)
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


def _range_bars(ax: Axes, curve: list[PetalPoint], color: str) -> None:
    """min–max of the repeats on both axes, around the median each curve passes through."""
    bars = [(p, xr, yr) for p in curve if (xr := p.x_range) and (yr := p.y_range)]
    if not bars:
        return
    ax.errorbar(
        [p.x for p, _, _ in bars],
        [p.y for p, _, _ in bars],
        xerr=[[p.x - xr[0] for p, xr, _ in bars], [xr[1] - p.x for p, xr, _ in bars]],
        yerr=[[p.y - yr[0] for p, _, yr in bars], [yr[1] - p.y for p, _, yr in bars]],
        fmt="none",
        ecolor=color,
        elinewidth=1,
        alpha=0.55,
        capsize=0,
        label="_nolegend_",
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
            log_axis(axis)
        else:
            set_lim(0, None)  # from zero: the eye reads a petal's width and height as ratios
            number_axis(axis)
