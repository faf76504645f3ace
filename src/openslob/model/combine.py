"""Totals of a run over several instances (and hosts): what adds, what is weighted.

Rates add. A latency is weighted by the operations it times (the total's mean latency is
total time / total operations, never the mean of the instances' means). Host percentages
are averaged over distinct hosts. A figure missing from any part is missing from the
total (null): a total over part of the run would be wrong, not approximate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

# latency-like figure -> the rate of the operations it describes
WEIGHTED_BY = {
    "db_read_latency_us": "pio_reads_per_s",
    "db_write_latency_us": "pio_writes_per_s",
    "wal_sync_latency_us": "wal_syncs_per_s",
    "device_read_latency_us": "device_reads_per_s",
    "device_avg_read_kb": "device_reads_per_s",
    "device_write_latency_us": "device_writes_per_s",
    "device_avg_write_kb": "device_writes_per_s",
    "device_flush_latency_us": "device_flushes_per_s",
}
ADDITIVE = {"db_time_s", "db_cpu_s", "server_cpu_seconds", "temp_mb", "device_avg_queue"}
# shares of one host's capacity: the mean over hosts
HOST_SHARES_PREFIXES = ("cpu_", "psi_", "device_util_pct", "server_cpu_pct")


def _kind(key: str) -> str:
    if key in WEIGHTED_BY:
        return "weighted"
    if key in ADDITIVE or key.endswith("_per_s"):
        return "sum"
    if key.startswith(HOST_SHARES_PREFIXES):
        return "mean"
    if key == "lio_per_op":
        return "ratio"
    return "same"


def merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The total of several metrics dicts with the same keys (see the module docstring)."""
    if len(parts) == 1:
        return dict(parts[0])
    keys: list[str] = []
    for part in parts:
        keys += [k for k in part if k not in keys]
    total: dict[str, Any] = {}
    for key in keys:
        values = [part.get(key) for part in parts]
        kind = _kind(key)
        if kind == "ratio":
            continue  # from the totals, below
        if any(v is None for v in values):
            total[key] = None
        elif kind == "sum":
            total[key] = sum(values)
        elif kind == "mean":
            total[key] = sum(values) / len(values)
        elif kind == "weighted":
            total[key] = _weighted(values, [part.get(WEIGHTED_BY[key]) for part in parts])
        else:  # a figure of the run itself: kept only when every part agrees
            total[key] = values[0] if all(v == values[0] for v in values) else None
    if "lio_per_op" in keys:
        lio, ops = total.get("lio_per_s"), total.get("slobops_per_s")
        total["lio_per_op"] = lio / ops if lio is not None and ops else None
    return total


def _weighted(values: list[float], weights: list[float | None]) -> float | None:
    if any(w is None for w in weights):
        return None
    weight = sum(weights)  # type: ignore[arg-type]
    if weight <= 0:
        return None
    return sum(v * w for v, w in zip(values, weights, strict=True)) / weight  # type: ignore[operator]


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


HOST_LEVEL_PREFIXES = ("device_", "cpu_", "psi_", "context_switches")


def run_totals(instance_metrics: Sequence[dict[str, Any]], host_keys: Sequence[str]) -> dict:
    """The run's metrics from its instances': database figures add over instances, a host's
    device and CPU figures count once however many instances it serves."""
    groups = by_host(host_keys)

    def host_level(key: str) -> bool:
        return key.startswith(HOST_LEVEL_PREFIXES)

    total = merge([{k: v for k, v in m.items() if not host_level(k)} for m in instance_metrics])
    hosts = [{k: v for k, v in instance_metrics[g[0]].items() if host_level(k)} for g in groups]
    total.update(across_hosts(hosts))
    if "server_cpu_pct" in total:  # the instances' shares of their host add up per host
        shares = [[instance_metrics[i].get("server_cpu_pct") for i in g] for g in groups]
        total["server_cpu_pct"] = (
            None
            if any(v is None for group in shares for v in group)
            else sum(sum(group) for group in shares) / len(shares)  # type: ignore[arg-type]
        )
    return round_figures(total)
