"""Interactive charts of the HTML report: data specs that assets/report.js draws.

A spec is plain JSON: axes (label, log scale, "nines" percentile scale), series of [x, y,
note] points (note: what the tooltip adds, e.g. "4 sessions · 3 runs"), and a zoom group
(charts of one run's time series zoom together on one time axis). Python decides what is
drawn from results only (run.json, timeseries.csv, comparisons), the same points as the
matplotlib figures (petal.py, plots.py); the browser only draws. A figure that was not
measured is left out (a gap: null), never drawn as 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from openslob.model.histogram import merged_ops
from openslob.model.metrics import OP_KINDS
from openslob.model.metrics import label as metric_label
from openslob.model.perinstance import INSTANCE_KEYS, instance_column
from openslob.model.states import Phase
from openslob.report.compareplots import side_refs
from openslob.report.figure import PCT_COLORS
from openslob.report.petal import (
    LATENCY_LABELS,
    X_CHOICES,
    PetalPoint,
    petal_points,
)
from openslob.report.plots import NINES, nines, op_blocks, percentile_curve, stairs
from openslob.report.rateplot import load_points
from openslob.results.stream import csv_number

if TYPE_CHECKING:
    from openslob.analysis.compare import Comparison
    from openslob.results.collect import RunRef

Spec = dict[str, Any]


def _series(
    label: str, points: list[list[Any]], color: str, *, dash: bool = False, **more: Any
) -> dict[str, Any]:
    return {"label": label, "color": color, "dash": dash, "points": points, **more}


def _spec(
    title: str, x: Mapping[str, Any], y: Mapping[str, Any], series: list, **more: Any
) -> Spec:
    return {"title": title, "x": dict(x), "y": dict(y), "series": series, **more}


def _float(value: Any) -> float | None:
    """A CSV cell or JSON value as a finite number; None for not measured (JSON has no NaN)."""
    number = csv_number(value)
    return number if number is not None and math.isfinite(number) else None


# --- petal plots ----------------------------------------------------------------------------


def _point_note(point: PetalPoint) -> str:
    note = f"{point.sessions} session{'s' if point.sessions != 1 else ''} · {point.name}"
    if point.runs > 1 and point.x_range and point.y_range:
        note += (
            f" · median of {point.runs} runs (x {point.x_range[0]:,.0f}–{point.x_range[1]:,.0f},"
            f" y {point.y_range[0]:,.0f}–{point.y_range[1]:,.0f})"
        )
    return note


def petal_curves(points: Sequence[PetalPoint]) -> dict[tuple[str, float], list[PetalPoint]]:
    """Curves keyed (curve label, update %), points in session order (SLOB's petal)."""
    curves: dict[tuple[str, float], list[PetalPoint]] = {}
    for point in points:
        curves.setdefault((point.label, point.update_pct), []).append(point)
    return {key: sorted(curve, key=lambda p: p.sessions) for key, curve in curves.items()}


def _ranges(point: PetalPoint) -> list[float] | None:
    """[x low, x high, y low, y high] of a repeated point (its min–max bars), else None."""
    if point.runs < 2 or not point.x_range or not point.y_range:
        return None
    return [*point.x_range, *point.y_range]


def petal_series(
    refs: Sequence[RunRef],
    x: str,
    latency: str,
    *,
    prefix: str = "",
    dash: bool = False,
    first_color: int = 0,
) -> tuple[list[dict[str, Any]], list[str]]:
    """One series per curve; each point [x, y, note, session count (drawn beside it),
    min–max ranges of its repeats or None]; colours from PCT_COLORS[first_color]."""
    points, skipped = petal_points(refs, x, latency)
    series = []
    for number, ((label, pct), curve) in enumerate(petal_curves(points).items()):
        name = f"{prefix}{label} · {pct:g} % update"
        coords = [[p.x, p.y, _point_note(p), str(p.sessions), _ranges(p)] for p in curve]
        color = PCT_COLORS[(first_color + number) % len(PCT_COLORS)]
        series.append(_series(name, coords, color, dash=dash))
    return series, skipped


def petal(refs: Sequence[RunRef], *, x: str = "iops", latency: str = "db_read") -> Spec:
    series, skipped = petal_series(refs, x, latency)
    note = f"{len(skipped)} runs not drawn: a coordinate was not measured" if skipped else ""
    return _spec(
        f"Petal: {LATENCY_LABELS[latency]} vs {X_CHOICES[x][1]}",
        {"label": X_CHOICES[x][1]},
        {"label": LATENCY_LABELS[latency]},
        series,
        line=True,
        note=note,
    )


def overlay_petal(comparison: Comparison, *, x: str = "iops", latency: str = "db_read") -> Spec:
    """Both sides' petals on one plot: the base solid, the candidate dashed and in colours
    of its own; side_refs names each curve set "base: LABEL" / "candidate: LABEL" once."""
    base, _ = petal_series(side_refs(comparison.base, "base"), x, latency)
    cand, _ = petal_series(
        side_refs(comparison.cand, "candidate"), x, latency, dash=True, first_color=len(base)
    )
    return _spec(
        f"Base vs candidate: {LATENCY_LABELS[latency]} vs {X_CHOICES[x][1]}",
        {"label": X_CHOICES[x][1]},
        {"label": LATENCY_LABELS[latency]},
        base + cand,
        line=True,
    )


def changes(comparison: Comparison) -> Spec:
    """The change of the median per point and figure, a horizontal bar each, coloured by
    verdict; the tooltip names base, candidate and the interval."""
    bars = []
    for point in comparison.points:
        for c in point.changes:
            if c.change_pct is None:
                continue
            interval = (
                f"interval {c.ci_low_pct:+.1f} % to {c.ci_high_pct:+.1f} %"
                if c.ci_low_pct is not None and c.ci_high_pct is not None
                else "one run per side: no interval"
            )
            bars.append(
                {
                    "label": f"{point.shown} · {c.label}",
                    "value": round(c.change_pct, 3),
                    "verdict": c.verdict,
                    "note": f"{c.verdict}; base {c.base.median:,.{c.digits}f}, candidate "
                    f"{c.cand.median:,.{c.digits}f} {c.unit}; {interval}",
                }
            )
    return {"title": "Change of the median, candidate vs base (%)", "kind": "bars", "bars": bars}


# --- a run's time series ----------------------------------------------------------------------

IO_PANELS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "I/O per second",
        "I/O per second",
        ("device_reads_per_s", "device_writes_per_s", "pio_reads_per_s", "pio_writes_per_s"),
    ),
    (
        "MB per second",
        "MB/s",
        (
            "device_read_mb_per_s",
            "device_write_mb_per_s",
            "pio_read_mb_per_s",
            "pio_write_mb_per_s",
            "wal_mb_per_s",
        ),
    ),
    (
        "I/O latency",
        "µs",
        (
            "device_read_latency_us",
            "db_read_latency_us",
            "device_write_latency_us",
            "wal_sync_latency_us",
        ),
    ),
    ("SLOBops and commits per second", "per second", ("slobops_per_s", "commits_per_s")),
)
OP_PERCENTILES = (("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"))


def _window_rows(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The measured window's intervals (the warm-up is not part of any figure)."""
    return [r for r in rows if r.get("phase") in (None, "", Phase.WINDOW)]


def _column_series(
    rows: Sequence[Mapping[str, Any]], key: str, label: str, color: str, **more: Any
) -> dict[str, Any] | None:
    points = [[_float(r.get("elapsed_s")), _float(r.get(key))] for r in rows]
    if all(p[1] is None for p in points):
        return None  # not measured in this run: no empty legend entry
    return _series(label, [p for p in points if p[0] is not None], color, **more)


def timeseries(
    rows: Sequence[Mapping[str, Any]],
    run: Mapping[str, Any],
    group: str,
    marks: Sequence[tuple[float, float, str]] = (),
) -> list[Spec]:
    """One chart per panel, all on the run's elapsed seconds, zooming together; `marks`
    (start s, end s, kind: the degradation episodes) are shaded on every panel."""
    rows = _window_rows(rows)
    bands = [[start, end, kind] for start, end, kind in marks]
    terms = (run.get("engine") or {}).get("terms")
    specs = []
    x_axis = {"label": "Elapsed (s)"}
    for title, unit, keys in IO_PANELS:
        series = [
            s
            for n, key in enumerate(keys)
            if (s := _column_series(rows, key, metric_label(key, terms), PCT_COLORS[n])) is not None
        ]
        if series:
            specs.append(
                _spec(title, x_axis, {"label": unit}, series, line=True, group=group, bands=bands)
            )
    specs += _instance_panels(rows, run, x_axis, group, bands)
    op_series = []
    for n, kind in enumerate(OP_KINDS):
        for style, (column, shown) in enumerate(OP_PERCENTILES):
            for suffix, what in (("", ""), ("_intended", " from intended start")):
                found = _column_series(
                    rows,
                    f"{kind}_{column}{suffix}_us",
                    f"{kind} {shown}{what}",
                    PCT_COLORS[n],
                    dash=bool(suffix),
                    width=1 + style * 0.5,
                )
                if found is not None:
                    op_series.append(found)
    if op_series:
        specs.append(
            _spec(
                "SLOBop latency per interval (the loop's histograms)",
                x_axis,
                {"label": "µs", "log": True},
                op_series,
                line=True,
                group=group,
                bands=bands,
            )
        )
    return specs


def _instance_panels(
    rows: Sequence[Mapping[str, Any]],
    run: Mapping[str, Any],
    x_axis: Mapping[str, Any],
    group: str,
    bands: list[list[Any]],
) -> list[Spec]:
    """A run over several instances: one chart per figure of INSTANCE_KEYS, a line per
    instance (timeseries.csv `key@n`), labelled by its number and target."""
    instances = run.get("instances") or []
    if len(instances) < 2:
        return []
    terms = (run.get("engine") or {}).get("terms")
    specs = []
    for key in INSTANCE_KEYS:
        series = [
            s
            for n, inst in enumerate(instances, start=1)
            if (
                s := _column_series(
                    rows,
                    instance_column(key, n),
                    f"{n} {inst.get('target')}",
                    PCT_COLORS[(n - 1) % len(PCT_COLORS)],
                )
            )
            is not None
        ]
        if series:
            title = f"{metric_label(key, terms)} per instance"
            unit = {"label": "µs" if key.endswith("_us") else "per second"}
            specs.append(_spec(title, x_axis, unit, series, line=True, group=group, bands=bands))
    return specs


# --- latency histograms ------------------------------------------------------------------------


def latency(run: Mapping[str, Any]) -> list[Spec]:
    """Per op type: the histogram (log latency axis) and all op types' percentile curves on a
    nines axis (90 → 1, 99 → 2 …), service time solid, intended start dashed."""
    blocks = op_blocks(run)
    if not blocks:
        return []
    bars = []
    curves = []
    for n, (kind, hist) in enumerate(blocks):
        edges, counts = stairs(hist)
        points = [
            [edges[i + 1], counts[i], f"{edges[i]:,.0f}–{edges[i + 1]:,.0f} µs"]
            for i in range(len(counts))
        ]
        bars.append(_series(f"{kind} ({hist.count:,} ops)", points, PCT_COLORS[n], step=True))
        xs, ys = percentile_curve(hist, points=200)
        curves.append(_series(kind, _nines_points(xs, ys), PCT_COLORS[n]))
    for n, (kind, hist) in enumerate(op_blocks(run, "latency_intended")):
        xs, ys = percentile_curve(hist, points=200)
        curves.append(
            _series(f"{kind} from intended start", _nines_points(xs, ys), PCT_COLORS[n], dash=True)
        )
    merged = merged_ops(run.get("latency"))
    note = (
        f"all ops: p50 {merged.percentile_us(50):,.0f} µs, p99 {merged.percentile_us(99):,.0f} µs"
        if merged
        else ""
    )
    return [
        _spec(
            "SLOBop latency histogram (ops per bucket)",
            {"label": "latency (µs)", "log": True},
            {"label": "ops per bucket"},
            bars,
            line=True,
            note=note,
        ),
        _spec(
            "SLOBop latency by percentile",
            {"label": "percentile", "scale": "nines", "max": nines(NINES[-1])},
            {"label": "latency (µs)", "log": True},
            curves,
            line=True,
        ),
    ]


def _nines_points(xs: Sequence[float], ys: Sequence[float]) -> list[list[Any]]:
    return [
        [round(x, 4), None if math.isnan(y) else y, f"p{100 * (1 - 10**-x):.4g}"]
        for x, y in zip(xs, ys, strict=True)
    ]


# --- latency at load (RATE runs) ---------------------------------------------------------------


def latency_at_load(refs: Sequence[RunRef]) -> list[Spec]:
    """p99 (solid) and p50 (dashed) from the intended start against the offered and the
    achieved rate, one curve per sweep, UPDATE_PCT and session count (rateplot.py's points);
    a saturated point says so in its tooltip."""
    points, _, _ = load_points(refs)
    if not points:
        return []
    curves = list(dict.fromkeys(p.curve for p in points))
    specs = []
    for attr in ("offered", "achieved"):
        series = []
        for n, curve in enumerate(curves):
            label, pct, sessions = curve
            mine = sorted((p for p in points if p.curve == curve), key=lambda p: p.offered)
            name = f"{label} · {pct:g} % update, {sessions} sessions"
            color = PCT_COLORS[n % len(PCT_COLORS)]
            for pct_name, dash in (("p99", False), ("p50", True)):
                coords = [
                    [
                        getattr(p, attr),
                        getattr(p, pct_name),
                        f"offered {p.offered:,.0f}/s, achieved {p.achieved:,.0f}/s"
                        + (" · SATURATED" if p.saturated else ""),
                    ]
                    for p in mine
                ]
                series.append(_series(f"{name} {pct_name}", coords, color, dash=dash))
        specs.append(
            _spec(
                f"Latency at load: from the intended start vs {attr} SLOBops/s",
                {"label": f"{attr} SLOBops/s"},
                {"label": "latency from the intended start (µs)", "log": True},
                series,
                line=True,
            )
        )
    return specs
