"""The scale-out table (analysis/scaling.py) as text, CSV and JSON.

Text: per curve, one row per instance count: runs, throughput, efficiency, the totals
(IOPS, MB/s, DB read µs, op p99 µs) and the same per instance as min/median/max; then the
USL fit with its 95 % intervals and the projection, or the reason there is none. `n/a` is a
figure that was not measured. CSV: the same rows, one column per figure and statistic.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence

from openslob.analysis.scaling import FIGURES, ScalingCurve, Spread
from openslob.analysis.usl import Estimate
from openslob.model.metrics import METRICS

_HEADS = {"iops": "IOPS", "mb_per_s": "MB/S", "db_read_us": "DB_READ_US", "op_p99_us": "OP_P99_US"}
_DIGITS = {"iops": 0, "mb_per_s": 1, "db_read_us": 0, "op_p99_us": 0}


def _num(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _spread(s: Spread, digits: int) -> str:
    return "/".join(_num(v, digits) for v in (s.min, s.median, s.max))


def estimate_text(e: Estimate, fmt: str) -> str:
    """`value (low to high)`, or `value (no interval)`."""
    text = format(e.value, fmt)
    if e.low is None or e.high is None:
        return f"{text} (no interval)"
    return f"{text} ({format(e.low, fmt)} to {format(e.high, fmt)})"


def _metric_name(key: str) -> str:
    metric = METRICS.get(key)
    return metric.unit if metric is not None and metric.unit else key


def render_text(curves: Sequence[ScalingCurve]) -> str:
    lines: list[str] = []
    for curve in curves:
        unit = _metric_name(curve.metric)
        lines.append(f"Scale-out: {curve.title} (throughput: {curve.metric}, {unit})")
        head = ["N", "RUNS", "THROUGHPUT", "EFFICIENCY"] + [_HEADS[k] for k in FIGURES]
        head += [f"{_HEADS[k]}/INST" for k in FIGURES]
        rows = [head]
        for p in curve.points:
            eff = "n/a" if p.efficiency is None else f"{p.efficiency * 100:.1f} %"
            row = [str(p.instances), str(len(p.runs)), _num(p.throughput), eff]
            row += [_num(p.totals[k], _DIGITS[k]) for k in FIGURES]
            row += [_spread(p.per_instance[k], _DIGITS[k]) for k in FIGURES]
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        lines.append("/INST: min/median/max over the instances; EFFICIENCY = X(N) / (N x X(1))")
        lines += _superlinear(curve)
        lines += _warned(curve)
        lines += _fit_lines(curve)
        lines.append("")
    return "\n".join(lines)


def _superlinear(curve: ScalingCurve) -> list[str]:
    """Above 100 %, the instances did less I/O per op: each one's share of the data fits
    its cache better (or the one-instance point was cold). Physical reads per SLOBop say
    which."""
    if not any(p.efficiency is not None and p.efficiency > 1.05 for p in curve.points):
        return []
    per_op = []
    for p in curve.points:
        ops = p.totals.get("slobops_per_s")
        iops = p.totals["iops"]
        per_op.append(f"N={p.instances} {_num(iops / ops, 1) if iops and ops else 'n/a'}")
    return [
        "note: efficiency above 100 %: less physical I/O per op with more instances (each "
        "caches its share of the data) or a cold 1-instance point; DB I/O per SLOBop: "
        + ", ".join(per_op)
    ]


def _warned(curve: ScalingCurve) -> list[str]:
    """The runs' warnings per N: the figures above rest on them (run.json has the text)."""
    parts = [
        f"N={p.instances}: " + ", ".join(f"{k} ({n}/{len(p.runs)})" for k, n in p.warnings.items())
        for p in curve.points
        if p.warnings
    ]
    return ["warnings in the runs (see each run's report): " + "; ".join(parts)] if parts else []


def _fit_lines(curve: ScalingCurve) -> list[str]:
    fit = curve.fit
    if fit is None:
        return [f"USL: no fit: {curve.fit_note}"]
    r2 = "n/a" if fit.r2 is None else f"{fit.r2:.3f}"
    lines = [
        f"USL X(N) = lambda*N / (1 + sigma*(N-1) + kappa*N*(N-1)), 95 % intervals: "
        f"lambda {estimate_text(fit.lam, ',.1f')}, sigma {estimate_text(fit.sigma, '.4f')}, "
        f"kappa {estimate_text(fit.kappa, '.5f')}; {fit.runs} runs, {fit.dof} dof, R2 {r2}"
    ]
    peak = fit.peak_n()
    if peak is not None:
        lines.append(f"  the fitted throughput peaks at N = {peak:,.1f}")
    if fit.note:
        lines.append(f"  note: {fit.note}")
    proj = curve.projection
    if proj is None:
        return lines
    if proj.throughput is None or proj.efficiency is None:
        lines.append(f"Projection at N = {proj.n}: n/a  ** {(proj.note or '').upper()} **")
    else:
        interval = (
            f"{_num(proj.low)} to {_num(proj.high)} (95 %)"
            if proj.low is not None and proj.high is not None
            else "no interval"
        )
        lines.append(
            f"Projection at N = {proj.n}: {_num(proj.throughput)} ({interval}), efficiency "
            f"{proj.efficiency * 100:.1f} %" + (f"  ** {proj.note.upper()} **" if proj.note else "")
        )
    return lines


def csv_rows(curves: Sequence[ScalingCurve]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for curve in curves:
        for p in curve.points:
            row: dict[str, object] = {
                "sweep": curve.label,
                "params": json.dumps(curve.params, sort_keys=True, default=str),
                "metric": curve.metric,
                "instances": p.instances,
                "runs": len(p.runs),
                "throughput": p.throughput,
                "efficiency": p.efficiency,
            }
            for k in FIGURES:
                row[f"total_{k}"] = p.totals[k]
            for k in FIGURES:
                for stat, v in p.per_instance[k].as_dict().items():
                    row[f"instance_{k}_{stat}"] = v
            rows.append(row)
    return rows


def render_csv(curves: Sequence[ScalingCurve]) -> str:
    rows = csv_rows(curves)
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:  # not measured: an empty cell, never 0
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buffer.getvalue()


def _cell(value: object) -> object:
    if value is None:
        return ""
    return round(value, 6) if isinstance(value, float) else value


def render_json(curves: Sequence[ScalingCurve]) -> str:
    return json.dumps([c.as_dict() for c in curves], indent=2, default=str) + "\n"
