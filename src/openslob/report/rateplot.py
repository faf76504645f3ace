"""The latency-at-load curve of RATE runs: latency from the intended start against load.

Two panels share the latency axis: x = the offered rate (what was asked) and x = the achieved
rate (what was done); a point that kept up sits at the same x in both, a saturated one falls
back on the right (and is marked). One curve per sweep, UPDATE_PCT and session count, p99
solid and p50 dashed, all op types together (intended-start percentiles of the merged
histograms). A closed-loop run of the same curve (a percentage sweep's maximum) is a dotted
vertical line: the capacity the curve approaches. Runs without RATE, or with nothing
measured, are left out and named in a footnote. Reads only RunRefs (run.json).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from openslob.model.histogram import merged_ops
from openslob.report.figure import (
    PCT_COLORS,
    SWEEP_STYLES,
    empty,
    footnote,
    log_axis,
    new_figure,
    number_axis,
)
from openslob.report.petal import curve_label, session_count, update_pct

if TYPE_CHECKING:
    from openslob.results.collect import RunRef

CURVE = tuple[str, float, int]  # sweep label, UPDATE_PCT, sessions


@dataclass
class LoadPoint:
    curve: CURVE
    offered: float
    achieved: float
    p50: float
    p99: float
    saturated: bool


def load_points(
    refs: Sequence[RunRef],
) -> tuple[list[LoadPoint], dict[CURVE, float], list[str]]:
    """(points of RATE runs, closed-loop SLOBops/s per curve, names of runs left out)."""
    points, maxima, skipped = [], {}, []
    for ref in refs:
        pct, sessions = update_pct(ref), session_count(ref)
        metrics = ref.run.get("metrics") or {}
        if pct is None or sessions is None:
            skipped.append(ref.name)
            continue
        curve = (curve_label(ref), pct, sessions)
        if not (ref.run.get("config") or {}).get("RATE"):
            if metrics.get("slobops_per_s"):
                maxima[curve] = float(metrics["slobops_per_s"])
            continue
        hist = merged_ops(ref.run.get("latency_intended"))
        offered, achieved = metrics.get("offered_rate"), metrics.get("achieved_rate")
        if hist is None or offered is None or achieved is None:
            skipped.append(ref.name)
            continue
        p50, p99 = hist.percentile_us(50), hist.percentile_us(99)
        assert p50 is not None and p99 is not None  # a non-empty histogram has both
        points.append(LoadPoint(curve, offered, achieved, p50, p99, bool(metrics.get("saturated"))))
    return points, maxima, skipped


def latency_at_load(refs: Sequence[RunRef], *, title: str | None = None) -> Figure:
    points, maxima, skipped = load_points(refs)
    fig = new_figure(13, 5.5)
    axes = fig.subplots(1, 2, sharey=True)
    fig.suptitle(title or "Latency at load: SLOBop latency from the intended start")
    for ax, x in zip(axes, ("offered", "achieved"), strict=True):
        ax.set_xlabel(f"{x.capitalize()} SLOBops/s")
        ax.grid(True, which="major", alpha=0.4)
        number_axis(ax.xaxis)
    axes[0].set_ylabel("latency from the intended start, all op types (µs)")
    if not points:
        empty(axes[0], "no RATE run with its latency measured")
    else:
        _draw(axes, points, maxima)
        for ax in axes:
            ax.set_yscale("log")
            log_axis(ax.yaxis)
    notes = []
    if any(p.saturated for p in points):
        notes.append("x: saturated point (model/rate.py's rule)")
    if skipped:
        names = ", ".join(skipped[:6]) + (", …" if len(skipped) > 6 else "")
        notes.append(f"{len(skipped)} skipped: not measured ({names})")
    if notes:
        footnote(fig, "; ".join(notes))
    return fig


def _draw(axes: Sequence, points: list[LoadPoint], maxima: dict[CURVE, float]) -> None:
    curves = list(dict.fromkeys(p.curve for p in points))
    labels = list(dict.fromkeys(c[0] for c in curves))
    pcts = sorted({c[1] for c in curves})
    many_sessions = len({c[2] for c in curves}) > 1
    for curve in curves:
        label, pct, sessions = curve
        color = PCT_COLORS[pcts.index(pct) % len(PCT_COLORS)]
        _, marker = SWEEP_STYLES[labels.index(label) % len(SWEEP_STYLES)]
        mine = sorted((p for p in points if p.curve == curve), key=lambda p: p.offered)
        name = f"{pct:g} % update" + (f", {sessions} sessions" if many_sessions else "")
        name = f"{label} · {name}" if len(labels) > 1 else name
        for ax, attr in zip(axes, ("offered", "achieved"), strict=True):
            xs = [getattr(p, attr) for p in mine]
            ax.plot(xs, [p.p99 for p in mine], "-", marker=marker, color=color, label=f"{name} p99")
            ax.plot(xs, [p.p50 for p in mine], "--", marker=marker, color=color, alpha=0.7,
                    label=f"{name} p50")  # fmt: skip
            late = [p for p in mine if p.saturated]
            ax.scatter([getattr(p, attr) for p in late], [p.p99 for p in late], marker="x",
                       s=80, color="black", zorder=5)  # fmt: skip
            if curve in maxima:
                ax.axvline(maxima[curve], color=color, linestyle=":", alpha=0.8)
    axes[0].legend(fontsize=8, loc="upper left")
