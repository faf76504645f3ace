"""Totals of a run over several instances (and hosts): what adds, what is weighted.

How each figure combines is its row of the metrics table (model/metrics.py). Rates add. A
latency is weighted by the operations it times (the total's mean latency is total time /
total operations, never the mean of the instances' means). Host percentages are averaged
over distinct hosts. A figure missing from any part is missing from the total (null): a
total over part of the run would be wrong, not approximate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from openslob.model.metrics import METRICS, Metric


def _metric(key: str) -> Metric:
    """The key's row of the metrics table; a key it lacks (a newer engine's figure in an
    older openslob) adds when it is a rate and is otherwise kept only when parts agree."""
    metric: Metric | None = METRICS.get(key)
    if metric is not None:
        return metric
    return Metric(key, "", key, combine="sum" if key.endswith("_per_s") else "same")


def _kind(key: str) -> str:
    kind = _metric(key).combine
    return "mean" if kind == "per_host_sum" else kind  # within merge(): see run_totals


def _present(values: Sequence[Any]) -> list[Any] | None:
    """The values when none is missing; None when any is (the total is then missing too)."""
    present = [v for v in values if v is not None]
    return present if len(present) == len(values) else None


def merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The total of several metrics dicts with the same keys (see the module docstring)."""
    if len(parts) == 1:
        return dict(parts[0])
    keys: list[str] = []
    for part in parts:
        keys += [k for k in part if k not in keys]
    total: dict[str, Any] = {}
    for key in keys:
        kind = _kind(key)
        if kind == "ratio":
            continue  # from the totals, below
        values = _present([part.get(key) for part in parts])
        if values is None:
            total[key] = None
        elif kind == "sum":
            total[key] = sum(values)
        elif kind == "mean":
            total[key] = sum(values) / len(values)
        elif kind == "max":
            total[key] = max(values)
        elif kind == "weighted":
            weight = _metric(key).weight
            total[key] = _weighted(values, [part.get(weight) if weight else None for part in parts])
        else:  # a figure of the run itself: kept only when every part agrees
            total[key] = values[0] if all(v == values[0] for v in values) else None
    if "lio_per_op" in keys:  # the only "ratio" figure: blocks over operations
        lio, ops = total.get("lio_per_s"), total.get("slobops_per_s")
        total["lio_per_op"] = lio / ops if lio is not None and ops else None
    return total


def _weighted(values: Sequence[float], weights: Sequence[float | None]) -> float | None:
    present = _present(weights)
    if present is None:
        return None
    weight = sum(present)
    if weight <= 0:
        return None
    return float(sum(v * w for v, w in zip(values, present, strict=True)) / weight)


def across_hosts(per_host: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Host figures (device, CPU) of distinct hosts: one dict per host."""
    return merge(per_host) if per_host else {}


def by_host(keys: Iterable[str]) -> list[list[int]]:
    """Indexes grouped by host key, in first-seen order."""
    groups: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def round_figures(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in metrics.items()}


def run_totals(
    instance_metrics: Sequence[dict[str, Any]], host_keys: Sequence[str]
) -> dict[str, Any]:
    """The run's metrics from its instances': database figures add over instances, a host's
    device and CPU figures count once however many instances it serves."""
    groups = by_host(host_keys)
    host_level = {
        k: (metric := _metric(k)).host and metric.combine != "per_host_sum"
        for m in instance_metrics
        for k in m
    }
    total = merge([{k: v for k, v in m.items() if not host_level[k]} for m in instance_metrics])
    hosts = [{k: v for k, v in instance_metrics[g[0]].items() if host_level[k]} for g in groups]
    total.update(across_hosts(hosts))
    for key in [k for k in total if _metric(k).combine == "per_host_sum"]:
        # the instances' shares of their host add up per host, then average over hosts
        shares = [_present([instance_metrics[i].get(key) for i in g]) for g in groups]
        complete = [group for group in shares if group is not None]
        total[key] = (
            None
            if len(complete) < len(shares)
            else sum(sum(group) for group in complete) / len(shares)
        )
    return round_figures(total)


def over_time(rows: Sequence[dict[str, Any]], keys: Iterable[str]) -> dict[str, Any]:
    """Consecutive time-series rows as one span (their `seconds` add): a rate or a share is
    the seconds-weighted mean, a latency is weighted by its operations over the span (rate x
    seconds), counts add. Percentiles do not average: the caller takes them from the merged
    histograms. A figure missing from any row is missing from the span."""
    seconds = [float(row.get("seconds") or 0.0) for row in rows]
    span: dict[str, Any] = {}
    for key in keys:
        values = _present([row.get(key) for row in rows])
        metric = _metric(key)
        if values is None or not rows:
            span[key] = None
        elif metric.unit == "ops" and metric.source in ("latency", "rate"):  # op counts
            span[key] = sum(values)
        elif metric.combine == "max":
            span[key] = max(values)
        elif metric.combine == "weighted" and metric.weight:
            weights = [row.get(metric.weight) for row in rows]
            span[key] = _weighted(
                values,
                [None if w is None else w * s for w, s in zip(weights, seconds, strict=True)],
            )
        elif metric.combine == "same":
            span[key] = values[0] if all(v == values[0] for v in values) else None
        else:  # rates and shares of the host's capacity
            span[key] = _weighted(values, seconds)
    if "lio_per_op" in span:
        lio, ops = span.get("lio_per_s"), span.get("slobops_per_s")
        span["lio_per_op"] = lio / ops if lio is not None and ops else None
    return round_figures(span)
