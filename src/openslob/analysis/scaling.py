"""Scale-out measured: throughput, per-instance figures and efficiency by number of instances.

A *curve* is the complete runs that differ only in how many instances ran them: a sweep over
INSTANCES (or SQLNET_SERVICE_MAX), one curve per combination of its other parameters
(UPDATE_PCT, say). N of a run is the length of its run.json ``instances`` list (1 without
one): what ran, not what was asked.

For each N (a *point*; its repeats are several runs):
- totals: the median over its runs of the throughput figure (``metric``, SLOBops/s by
  default), DB IOPS (pio reads + writes /s), DB MB/s (read + write), DB read µs, op p99 µs;
- per instance: min / median / max over the instances of all its runs of the same IOPS,
  MB/s, DB read µs and op p99 µs (the SLOBop p99 of that instance's in-loop histograms);
- efficiency = X(N) ÷ (N × X(1)), X(1) the median of the 1-instance runs; None without one.

Then the Universal Scalability Law fitted to every run of the curve (analysis/usl.py), and,
on request, its projection at one N with the interval. A figure not measured is None.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openslob.analysis import usl
from openslob.analysis.figures import point_text, value
from openslob.model.states import RunStatus
from openslob.results.collect import RunRef

INSTANCE_AXES = ("INSTANCES", "SQLNET_SERVICE_MAX")
DEFAULT_METRIC = "slobops_per_s"
# per-instance figures: name -> how to read it from an instance (or a run) dict
FIGURES = ("iops", "mb_per_s", "db_read_us", "op_p99_us")


@dataclass(frozen=True)
class Spread:
    min: float | None
    median: float | None
    max: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"min": self.min, "median": self.median, "max": self.max}


@dataclass
class ScalePoint:
    instances: int
    runs: list[str]  # run directory names
    throughput: float | None  # median over the runs of the metric (all instances)
    totals: dict[str, float | None]  # FIGURES over all instances, median over the runs
    per_instance: dict[str, Spread]  # FIGURES over the instances of every run
    efficiency: float | None = None
    # the runs' warnings by kind (their text up to the first figure) -> how many runs
    warnings: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "runs": self.runs,
            "throughput": self.throughput,
            "efficiency": self.efficiency,
            "totals": self.totals,
            "per_instance": {k: v.as_dict() for k, v in self.per_instance.items()},
            "warnings": self.warnings,
        }


@dataclass
class ScalingCurve:
    label: str | None  # the sweep's
    params: dict[str, Any]  # the parameters the curve's points share (without N)
    metric: str
    points: list[ScalePoint] = field(default_factory=list)
    samples: list[tuple[int, float]] = field(default_factory=list)  # (N, X) of every run
    fit: usl.UslFit | None = None
    fit_note: str | None = None  # why there is no fit
    projection: usl.Projection | None = None

    @property
    def title(self) -> str:
        text = point_text(self.params) if self.params else ""
        return " · ".join(t for t in (self.label, text) if t) or "instances"

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "params": self.params,
            "metric": self.metric,
            "points": [p.as_dict() for p in self.points],
            "usl": self.fit.as_dict() if self.fit else None,
            "usl_note": self.fit_note,
            "projection": self.projection.as_dict() if self.projection else None,
        }


def _number(raw: Any) -> float | None:
    return float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None


def _sum(metrics: Mapping[str, Any], *keys: str) -> float | None:
    values = [_number(metrics.get(k)) for k in keys]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def figures(part: Mapping[str, Any]) -> dict[str, float | None]:
    """IOPS, MB/s, DB read µs and op p99 µs of a run or of one of its instances."""
    found = part.get("metrics")
    metrics: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    return {
        "iops": _sum(metrics, "pio_reads_per_s", "pio_writes_per_s"),
        "mb_per_s": _sum(metrics, "pio_read_mb_per_s", "pio_write_mb_per_s"),
        "db_read_us": _number(metrics.get("db_read_latency_us")),
        "op_p99_us": value(part, "op_p99_us"),
        "slobops_per_s": _number(metrics.get("slobops_per_s")),
    }


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _spread(values: Sequence[float | None]) -> Spread:
    known = [v for v in values if v is not None]
    if not known:
        return Spread(None, None, None)
    return Spread(min(known), statistics.median(known), max(known))


def instance_count(run: Mapping[str, Any]) -> int:
    listed = run.get("instances")
    return len(listed) if isinstance(listed, list) and listed else 1


def _point(n: int, refs: list[RunRef], metric: str) -> ScalePoint:
    parts = [i for ref in refs for i in (ref.run.get("instances") or [ref.run])]
    per_run = [figures(ref.run) for ref in refs]
    per_part = [figures(p) for p in parts]
    return ScalePoint(
        instances=n,
        runs=[ref.name for ref in refs],
        throughput=_median([value(ref.run, metric) for ref in refs]),
        totals={k: _median([f[k] for f in per_run]) for k in (*FIGURES, "slobops_per_s")},
        per_instance={k: _spread([f[k] for f in per_part]) for k in FIGURES},
        warnings=_warning_kinds(refs),
    )


def _warning_kinds(refs: list[RunRef]) -> dict[str, int]:
    """How many of the runs warned of each kind ("CPU saturated", "device reads"): a
    scaling figure resting on a run whose numbers are in doubt says so."""
    kinds: dict[str, int] = {}
    for ref in refs:
        seen = {
            re.split(r"[(\d:]", str(w), maxsplit=1)[0].strip()
            for w in ref.run.get("warnings") or []
        }
        for kind in sorted(seen):
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def curves(refs: Sequence[RunRef], metric: str = DEFAULT_METRIC) -> list[ScalingCurve]:
    """The instance curves among the runs (complete runs only), each with its USL fit; a
    curve needs at least 2 different N."""
    groups: dict[str, tuple[RunRef, list[RunRef]]] = {}
    for ref in refs:
        if ref.run.get("status") != RunStatus.COMPLETE or ref.oracle is not None:
            continue
        shared = {k: v for k, v in ref.point.items() if k not in INSTANCE_AXES}
        key = repr((ref.sweep, sorted(shared.items())))
        groups.setdefault(key, (ref, []))[1].append(ref)
    found = []
    for first, members in groups.values():
        by_n: dict[int, list[RunRef]] = {}
        for ref in members:
            by_n.setdefault(instance_count(ref.run), []).append(ref)
        if len(by_n) < 2:
            continue
        shared = {k: v for k, v in first.point.items() if k not in INSTANCE_AXES}
        curve = ScalingCurve(first.sweep, shared, metric)
        curve.points = [_point(n, by_n[n], metric) for n in sorted(by_n)]
        curve.samples = [
            (n, x) for n in sorted(by_n) for ref in by_n[n] if (x := value(ref.run, metric))
        ]
        _efficiency(curve.points)
        curve.fit = usl.fit(curve.samples)
        if curve.fit is None:
            curve.fit_note = (
                "the USL needs at least 3 different instance counts with a measured "
                f"{metric} (measured: {', '.join(str(p.instances) for p in curve.points)})"
            )
        found.append(curve)
    return found


def _efficiency(points: list[ScalePoint]) -> None:
    one = next((p.throughput for p in points if p.instances == 1), None)
    for p in points:
        if one and p.throughput is not None:
            p.efficiency = p.throughput / (p.instances * one)


def add_projection(curve: ScalingCurve, n: int) -> None:
    """The USL's projection at n (usl.ProjectionError beyond 2 x the largest N measured)."""
    if curve.fit is not None:
        curve.projection = usl.project(curve.fit, n)
