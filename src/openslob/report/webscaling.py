"""The scale-out charts of the HTML report (report/assets/report.js specs, as webcharts.py).

For a sweep over the number of instances (analysis/scaling.py): throughput by N (each
point's median, linear scaling from X(1) dotted, the USL fit and its 95 % band as dashed
bounds; the fit's σ, κ with their intervals in the caption) and the efficiency by N. Nothing
for runs that do not cover several instance counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from openslob.analysis.scaling import ScalingCurve, curves
from openslob.report.figure import PCT_COLORS
from openslob.report.scalingtable import estimate_text

if TYPE_CHECKING:
    from openslob.results.collect import RunRef

Spec = dict[str, Any]
_GRID = 61  # points of the drawn fit from N = 1 to the largest N (> 60: report.js draws no dots)


def _caption(curve: ScalingCurve) -> str:
    fit = curve.fit
    if fit is None:
        return f"{curve.title}: no USL fit: {curve.fit_note}"
    text = (
        f"{curve.title}: USL 95 % intervals: σ {estimate_text(fit.sigma, '.4f')}, "
        f"κ {estimate_text(fit.kappa, '.5f')}; {fit.runs} runs"
    )
    return text + (f"; {fit.note}" if fit.note else "")


def _fit_series(curve: ScalingCurve, color: str) -> list[dict[str, Any]]:
    fit = curve.fit
    if fit is None:
        return []
    top = max(p.instances for p in curve.points)
    pole = fit.pole_before(top)
    end = top if pole is None else pole - 0.05
    grid = [1 + (end - 1) * i / (_GRID - 1) for i in range(_GRID)]
    series = [
        {
            "label": f"{curve.title}: USL fit",
            "color": color,
            "dash": False,
            "width": 1,
            "points": [[round(n, 3), fit.throughput(n)] for n in grid],
        }
    ]
    bands = [(n, fit.interval(n)) for n in grid]
    for k, name in ((0, "low"), (1, "high")):
        points = [[round(n, 3), b[k]] for n, b in bands if b is not None]
        if points:
            series.append(
                {
                    "label": f"{curve.title}: fit 95 % {name}",
                    "color": color,
                    "dash": True,
                    "width": 1,
                    "points": points,
                }
            )
    return series


def _line(
    label: str, color: str, points: list[list[Any]], dash: bool = False, width: int = 2
) -> dict[str, Any]:
    return {"label": label, "color": color, "dash": dash, "width": width, "points": points}


def scaling(refs: Sequence[RunRef]) -> list[Spec]:
    found = curves(refs)
    if not found:
        return []
    through: list[dict[str, Any]] = []
    efficiency: list[dict[str, Any]] = []
    for i, curve in enumerate(found):
        color = PCT_COLORS[i % len(PCT_COLORS)]
        points = [p for p in curve.points if p.throughput is not None]
        measured = [[p.instances, p.throughput, f"{len(p.runs)} run(s), median"] for p in points]
        through.append(_line(f"{curve.title}: measured", color, measured))
        one = next((p.throughput for p in points if p.instances == 1), None)
        if one is not None:
            top = max(p.instances for p in points)
            linear = [[1, one], [top, top * one]]
            through.append(_line(f"{curve.title}: linear N × X(1)", "#7f7f7f", linear, True, 1))
        through += _fit_series(curve, color)
        efficiency.append(
            {
                "label": curve.title,
                "color": color,
                "dash": False,
                "points": [
                    [p.instances, p.efficiency * 100]
                    for p in curve.points
                    if p.efficiency is not None
                ],
            }
        )
    metric = found[0].metric
    note = " | ".join(_caption(c) for c in found)
    return [
        {
            "title": "Scale-out: throughput by number of instances",
            "x": {"label": "instances (N)"},
            "y": {"label": f"throughput ({metric})"},
            "series": through,
            "line": True,
            "note": note,
        },
        {
            "title": "Scale-out: efficiency X(N) / (N × X(1)) (%)",
            "x": {"label": "instances (N)"},
            "y": {"label": "efficiency (%)"},
            "series": efficiency,
            "line": True,
        },
    ]
