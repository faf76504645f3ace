"""Figures of a comparison (analysis/compare.Comparison): the two sides' petal plots
overlaid, and the change of every figure at every point as bars with their intervals.

The overlay is the ordinary petal plot (petal.py) over both sides' runs, each side a curve
set of its own ("base: a", "candidate: b"): every point its median with min–max bars. The
bar chart has one panel per figure, one bar per point: the change of the medians in %, a
whisker for its interval when there is one, coloured by the verdict. A figure or point
without a change (not measured on both sides, a base median of 0) has no bar and gives its
verdict instead.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from openslob.analysis.compare import NO_REPEATS, ONE_MEASURED, SAME, Comparison, Side
from openslob.report.figure import empty, new_figure, save
from openslob.report.petal import petal

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from openslob.analysis.compare import Change
    from openslob.results.collect import RunRef

VERDICT_COLORS = {
    "better": "#2ca02c",
    "worse": "#d62728",
    "higher": "#1f77b4",
    "lower": "#1f77b4",
    "within noise": "#9e9e9e",
    NO_REPEATS: "#bdbdbd",
    ONE_MEASURED: "#bdbdbd",
    SAME: "#9e9e9e",
}
PANEL_COLUMNS = 3


def side_refs(side: Side, role: str) -> list[RunRef]:
    """The side's runs, relabelled as one curve set ("base: a"), whatever sweeps they
    came from: the two sides must stay apart even when both are called 'default'."""
    name = f"{role}: {side.label}"
    return [dataclasses.replace(ref, sweep=name) for ref in side.refs]


def overlay_petal(comparison: Comparison, *, x: str = "iops", latency: str = "db_read") -> Figure:
    refs = side_refs(comparison.base, "base") + side_refs(comparison.cand, "candidate")
    return petal(
        refs,
        x=x,
        latency=latency,
        title=f"{comparison.base.label} (base) vs {comparison.cand.label} (candidate)",
    )


def changes_chart(comparison: Comparison) -> Figure:
    """One panel per figure, one bar per point: change %, interval whiskers, verdict colour."""
    figures = list(dict.fromkeys(c.figure for p in comparison.points for c in p.changes))
    rows = max(1, math.ceil(len(figures) / PANEL_COLUMNS))
    height = 0.6 + rows * (0.9 + 0.28 * len(comparison.points))
    fig = new_figure(4.2 * PANEL_COLUMNS, height)
    fig.suptitle(
        f"Change of the median, {comparison.cand.label} vs {comparison.base.label} "
        "(whiskers: interval; green better, red worse, grey within noise)"
    )
    axes = fig.subplots(rows, PANEL_COLUMNS, squeeze=False).ravel()
    labels = [p.shown for p in comparison.points]
    for ax, figure in zip(axes, figures, strict=False):
        changes = [next(c for c in p.changes if c.figure == figure) for p in comparison.points]
        _panel(ax, changes, labels)
    for ax in axes[len(figures) :]:
        ax.set_visible(False)
    return fig


def _panel(ax: Axes, changes: list[Change], labels: list[str]) -> None:
    ax.set_title(f"{changes[0].label} ({changes[0].unit})", fontsize=9)
    positions = list(range(len(changes)))
    if all(c.change_pct is None for c in changes):  # say why: unmeasured, or a base of 0
        empty(ax, "; ".join(dict.fromkeys(c.verdict for c in changes)))
        return
    for pos, change in zip(positions, changes, strict=True):
        if change.change_pct is None:
            ax.text(0, pos, f" {change.verdict}", va="center", fontsize=7, color="#555555")
            continue
        color = VERDICT_COLORS.get(change.verdict, "#9e9e9e")
        ax.barh(pos, change.change_pct, color=color, height=0.6)
        if change.ci_low_pct is not None and change.ci_high_pct is not None:
            ax.errorbar(
                change.change_pct,
                pos,
                xerr=[
                    [max(change.change_pct - change.ci_low_pct, 0)],
                    [max(change.ci_high_pct - change.change_pct, 0)],
                ],
                fmt="none",
                ecolor="#333333",
                elinewidth=1,
                capsize=3,
            )
    ax.axvline(0, color="#333333", linewidth=0.8)
    ax.set_yticks(positions, labels, fontsize=7)
    ax.invert_yaxis()  # the first point on top, as in the text
    ax.set_xlabel("change %", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(True, axis="x", alpha=0.4)


def save_comparison_plots(comparison: Comparison, directory: Path) -> list[Path]:
    """petal_iops, petal_mbps (overlaid) and changes, as PNG and SVG."""
    written = []
    for x in ("iops", "mbps"):
        written += save(overlay_petal(comparison, x=x), directory / f"petal_{x}")
    written += save(changes_chart(comparison), directory / "changes")
    return written
