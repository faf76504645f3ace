"""One row of the time series: a closed sampling interval in the metrics table's figures.

A row joins, over one interval (runner/intervals.py):
- the loops' own results: ops per kind, and each op type's latency (count, mean, p50, p90,
  p99, p99.9, max) from the loop histograms of the ops that started in the interval;
- each instance's database figures, computed by its engine's WindowStats.metrics from two
  interval snapshots exactly as the window's are from the before/after snapshots, with the
  interval's own transactions taken out of the commits;
- each distinct host's device and CPU figures.
Over several instances a row is the run's total (model/combine.py), followed by each
instance's own figures that tell one from another (INSTANCE_KEYS) as columns `key@n`, n the
instance's number in the report's Instances table (run.json instances[n-1]). Rates are per second of
the interval (its planned length; the last one of the window lasts to its last op's end), so
the intervals' counts add up to the window's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openslob.engines.api import WindowStats
from openslob.host import snapshot as host_snapshot
from openslob.model import combine
from openslob.model.cliff import COLUMNS as CLIFF_COLUMNS
from openslob.model.clock import iso
from openslob.model.histogram import Histogram
from openslob.model.loop import LOOP_RESULT
from openslob.model.metrics import INTENDED, LATENCY_STATS, METRICS, OP_KINDS
from openslob.model.perinstance import INSTANCE_KEYS, instance_column
from openslob.model.rates import per_s
from openslob.runner.intervals import Interval

# Columns every row starts with: when (end of the interval), which, how long.
HEAD = ("time", "elapsed_s", "phase", "interval", "seconds")
# Columns every row ends with: the live cliff judgement of the window's rows (model/cliff.py:
# the figures in an open episode, the episodes so far), set by the sampler once the row is
# built; null in the warm-up and when CLIFF is off.
TAIL = CLIFF_COLUMNS


def figure_keys(engine_metrics: Sequence[str]) -> list[str]:
    """The time series' figure columns: the metrics table's live figures (the engines' of
    this run included), in table order."""
    core = [k for k, m in METRICS.items() if m.live and m.source != "engine"]
    return core + [k for k in engine_metrics if k not in core]


@dataclass
class InstanceView:
    """What a row needs of one instance: its engine's window figures and settings."""

    window: WindowStats
    settings: dict[str, str]
    host_key: str


def interval_seconds(interval: Interval, end: float | None = None) -> float:
    return max((end if end is not None else interval.end) - interval.start, 1e-9)


def latency_figures(interval: Interval) -> tuple[dict[str, Any], dict[str, Histogram]]:
    """Per op type: the interval's count and latency figures, and its histogram (keyed
    `select`, ...; a RATE run's intended-start ones `select_intended`, ...), and a RATE
    run's schedule lag (null columns in closed-loop runs)."""
    total = interval.total() or {}  # {}: no op started in the interval (counts are 0)
    row: dict[str, Any] = {}
    hists = {}
    for kind in OP_KINDS:
        hist = Histogram.from_json(total.get(LOOP_RESULT.hist(kind).key))
        hists[kind] = hist
        row[f"{kind}_count"] = int(total.get(LOOP_RESULT.ops_of(kind).key) or 0)
        row.update(latency_stats(kind, hist))
        intended_json = total.get(LOOP_RESULT.hist(kind, intended=True).key)
        if intended_json is not None:  # a paced loop's
            hists[kind + INTENDED] = intended = Histogram.from_json(intended_json)
            row.update(latency_stats(kind, intended, INTENDED))
    row.update(
        late_ops_1ms=total.get(LOOP_RESULT.late_1ms.key),
        late_ops_10ms=total.get(LOOP_RESULT.late_10ms.key),
        max_lag_us=total.get(LOOP_RESULT.max_lag_us.key),
    )
    return row, hists


def latency_stats(kind: str, hist: Histogram, suffix: str = "") -> dict[str, Any]:
    """One op type's latency columns from its histogram (null: no op timed); suffix
    "_intended": the columns of the latency from the intended start."""
    summary = hist.summary(buckets=False) if hist.count else {}
    return {f"{kind}_{stat}{suffix}_us": summary.get(f"{stat}_us") for stat, _ in LATENCY_STATS}


def loop_figures(interval: Interval, seconds: float) -> dict[str, Any]:
    """SLOBops/s, and per kind where the loop counted kinds (the window; the warm-up counts
    its ops only)."""
    total = interval.total() or {}  # {}: no op started in the interval (a stall)
    ops = float(total.get(LOOP_RESULT.ops.key) or 0)
    kinds = {kind: total.get(LOOP_RESULT.ops_of(kind).key) for kind in OP_KINDS}
    present = [v for v in kinds.values() if v is not None]
    counted = len(present) == len(kinds) and sum(present) == ops
    return {
        "slobops_per_s": per_s(ops, seconds),
        **{
            f"{k}s_per_s": per_s(float(v), seconds) if counted and v is not None else None
            for k, v in kinds.items()
        },
    }


def instance_figures(
    interval: Interval, parts: Sequence[Mapping[str, Any]], seconds: float
) -> dict[str, Any]:
    """Each instance's INSTANCE_KEYS over the interval: its loops' ops and op p99 (null where
    its loops timed nothing: the warm-up), its database figures (null where a snapshot is
    missing)."""
    out: dict[str, Any] = {}
    for k, part in enumerate(parts):
        result = interval.results.get(k) or {}
        hist = Histogram()
        for kind in OP_KINDS:
            hist.merge(Histogram.from_json(result.get(LOOP_RESULT.hist(kind).key)))
        figures = {
            **part,
            "slobops_per_s": per_s(float(result.get(LOOP_RESULT.ops.key) or 0), seconds),
            "op_p99_us": hist.percentile_us(99) if hist.count else None,
        }
        out.update({instance_column(key, k + 1): figures.get(key) for key in INSTANCE_KEYS})
    return out


def database_figures(
    views: Sequence[InstanceView],
    prev: Sequence[dict[str, Any] | None],
    cur: Sequence[dict[str, Any] | None],
    seconds: float,
    own_commits: Mapping[int, int],
) -> list[dict[str, Any]]:
    """Each instance's figures over the interval (empty where a snapshot is missing)."""
    parts: list[dict[str, Any]] = []
    for k, view in enumerate(views):
        before, after = prev[k], cur[k]
        if not before or not after:
            parts.append({})
            continue
        parts.append(
            view.window.metrics(before, after, seconds, view.settings, own_commits.get(k, 0))
        )
    return parts


def build_row(
    interval: Interval,
    *,
    keys: Sequence[str],
    views: Sequence[InstanceView],
    db_prev: Sequence[dict[str, Any] | None],
    db_cur: Sequence[dict[str, Any] | None],
    host_prev: Mapping[str, host_snapshot.HostSnapshot],
    host_cur: Mapping[str, host_snapshot.HostSnapshot],
    start_at: float,
    end: float | None = None,
) -> tuple[dict[str, Any], dict[str, Histogram]]:
    """The row of one closed interval, and its per-op-type histograms (for the .hlog)."""
    seconds = interval_seconds(interval, end)
    finish = interval.start + seconds
    row: dict[str, Any] = {
        "time": iso(finish),
        "elapsed_s": round(finish - start_at, 3),
        "phase": interval.phase,
        "interval": interval.index,
        "seconds": round(seconds, 3),
    }
    row.update(dict.fromkeys(keys))
    parts = database_figures(views, db_prev, db_cur, seconds, interval.own_commits)
    host_keys = [view.host_key for view in views]
    if all(parts):
        row.update(combine.run_totals(parts, host_keys))
    hosts = [
        host_snapshot.host_delta(host_prev[key], host_cur[key])
        for key in dict.fromkeys(host_keys)
        if key in host_prev and key in host_cur
    ]
    if hosts and len(hosts) == len(set(host_keys)):
        row.update({k: v for k, v in combine.across_hosts(hosts).items() if k in row})
    row.update(loop_figures(interval, seconds))
    if row.get("lio_per_s") is not None and row["slobops_per_s"]:
        row["lio_per_op"] = row["lio_per_s"] / row["slobops_per_s"]
    latency, hists = latency_figures(interval)
    row.update(latency)
    if len(views) > 1:
        row.update(instance_figures(interval, parts, seconds))
    return combine.round_figures({k: row.get(k) for k in (*HEAD, *keys, *TAIL)}), hists
