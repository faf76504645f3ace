"""The scale-out figure: throughput against the number of instances, measured and fitted.

Left: every run (small dots), each point's median (large markers), linear scaling from the
1-instance median (dotted), the USL fit (solid) with its 95 % band, and the projection, if
one was asked for, with its interval. Right: the efficiency X(N) ÷ (N·X(1)) of each point.
One colour per curve (the sweep's other parameters). A curve without a fit says why in the
footnote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from openslob.analysis.scaling import ScalingCurve
from openslob.report.figure import PCT_COLORS, empty, footnote, new_figure, number_axis

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def scaling(curves: Sequence[ScalingCurve], *, title: str | None = None) -> Figure:
    fig = new_figure(13, 5.5)
    left, right = fig.subplots(1, 2)
    fig.suptitle(title or "Scale-out: throughput by number of instances (USL fit, 95 % band)")
    left.set_xlabel("instances (N)")
    right.set_xlabel("instances (N)")
    right.set_ylabel("efficiency X(N) / (N × X(1)) (%)")
    for ax in (left, right):
        ax.grid(True, alpha=0.4)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if not curves:
        empty(left, "no runs over several instance counts")
        return fig
    left.set_ylabel(f"throughput ({curves[0].metric})")
    number_axis(left.yaxis)
    notes = []
    for i, curve in enumerate(curves):
        color = PCT_COLORS[i % len(PCT_COLORS)]
        _draw_curve(left, right, curve, color)
        if curve.fit is None and curve.fit_note:
            notes.append(f"{curve.title}: {curve.fit_note}")
        elif curve.fit is not None and curve.fit.note:
            notes.append(f"{curve.title}: {curve.fit.note}")
    left.set_xlim(left=0)
    left.set_ylim(bottom=0)
    right.set_xlim(left=0)
    right.set_ylim(bottom=0)
    left.legend(fontsize=8, loc="upper left")
    if notes:
        footnote(fig, "; ".join(notes))
    return fig


def _draw_curve(left: Axes, right: Axes, curve: ScalingCurve, color: str) -> None:
    name = curve.title
    xs, ys = zip(*curve.samples, strict=True) if curve.samples else ((), ())
    left.scatter(xs, ys, s=12, color=color, alpha=0.5)
    medians = [(p.instances, p.throughput) for p in curve.points if p.throughput is not None]
    left.plot(*zip(*medians, strict=True), "o", color=color, markersize=7, label=f"{name}")
    one = next((x for n, x in medians if n == 1), None)
    top = max(n for n, _ in medians)
    fit = curve.fit
    if fit is not None:
        reach: float = max(top, curve.projection.n if curve.projection else top)
        pole = fit.pole_before(reach)
        reach = reach if pole is None else min(top, pole - 0.05)
        grid = np.linspace(1, reach, 200)
        left.plot(grid, [fit.throughput(n) for n in grid], "-", color=color,
                  label=f"{name}: USL σ={fit.sigma.value:.3g} κ={fit.kappa.value:.3g}")  # fmt: skip
        bands = [fit.interval(n) for n in grid]
        if all(b is not None for b in bands):
            low = [b[0] for b in bands if b is not None]
            high = [b[1] for b in bands if b is not None]
            left.fill_between(grid, low, high, color=color, alpha=0.15, linewidth=0)
        proj = curve.projection
        if proj is not None and proj.throughput is not None:
            err = None
            if proj.low is not None and proj.high is not None:
                err = [[proj.throughput - proj.low], [proj.high - proj.throughput]]
            left.errorbar([proj.n], [proj.throughput], yerr=err, fmt="D", color=color,
                          capsize=5, label=f"{name}: projection at N={proj.n}")  # fmt: skip
    if one is not None:
        left.plot([0, top], [0, top * one], ":", color=color, alpha=0.7,
                  label=f"{name}: linear, N × X(1)")  # fmt: skip
    effs = [(p.instances, p.efficiency * 100) for p in curve.points if p.efficiency is not None]
    if effs:
        right.plot(*zip(*effs, strict=True), "o-", color=color, label=name)
        right.axhline(100, color="#555555", linestyle=":", linewidth=1)
