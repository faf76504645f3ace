"""The run directory and its versioned run.json: the source of truth for every report.

    run.json        everything measured (schema below, SCHEMA_VERSION)
    report.txt      the AWR-like text report, rendered from run.json only
    timeseries.csv  one row per sampling interval

A figure that cannot be measured is null, never 0 and never invented.
"""

from __future__ import annotations

import socket
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from openslob import __version__
from openslob.config.resolve import Config
from openslob.host import snapshot as host_snapshot
from openslob.model import clockoffset, combine, rate
from openslob.model.clock import iso
from openslob.model.engine import EngineView
from openslob.model.histogram import Histogram
from openslob.model.loop import LOOP_RESULT
from openslob.model.metrics import INTENDED, OP_KINDS, core_keys
from openslob.model.plan import CACHE_RATIO, schema_order
from openslob.model.rates import per_s
from openslob.model.states import RunStatus
from openslob.results import health as dataset_health
from openslob.results.ioshape import io_shape
from openslob.results.rate import rate_warnings
from openslob.results.record import RunRecord, SessionOutcome
from openslob.results.rundir import SCHEMA_VERSION

# 2: instances[] (per-instance figures and snapshots); metrics are the totals over them
# The metrics every run.json carries (null when not measured), from the metrics table.
DATABASE_FIGURES = core_keys("database")
HOST_FIGURES = core_keys("host")
READ_MISMATCH_PCT = 10
READ_GAP_FLOOR_PER_S = 20  # reads/s: what other processes and read-ahead do on their own
CPU_SATURATED_PCT = 90
CUT_WARN_PCT = 1.0  # of the window: a stop that cut more out of the op counts warns
CUT_BY_STOP = "the stop cut the last interval"  # analysis/validity.py's phrase


def _window_seconds(record: RunRecord) -> float | None:
    if record.window_start is None or record.window_end is None:
        return None
    return max(record.window_end - record.window_start, 0.0)


def _cut_by_stop(record: RunRecord) -> tuple[str, float] | None:
    """What a stop inside the window took out of the op counts: a sentence and its share of
    the window in % (None when nothing was cut). The interval running at the stop is not
    counted: its CALLs were cancelled, and a result of it that still came holds ops from
    after the stop (runner/phase.py); the window's seconds and the database's and host's
    counters run to the stop. A warning (its figures invalid for verdicts) from CUT_WARN_PCT
    of the window, else a note."""
    seconds, cut = _window_seconds(record), record.cut_s
    if not seconds or cut < 0.001:
        return None
    pct = cut / seconds * 100
    return (
        f"{CUT_BY_STOP} ({cut:.2f} s, {pct:.1f} % of the {seconds:.1f} s window): its "
        "SLOBops are not counted (its CALLs were cancelled), while the window's seconds and "
        "the database's and host's counters run to the stop: per-second op figures are low "
        f"and per-SLOBop figures high by up to {pct:.1f} %",
        pct,
    )


def _windows(record: RunRecord, sessions: list[SessionOutcome]) -> list[dict[str, Any] | None]:
    """The sessions' window results; in a checkpoint, whose sessions hold counts only, also
    the latency histograms of their instances' closed intervals (RunRecord.closed_histograms)."""
    windows = [o.window for o in sessions]
    if record.closed_histograms is not None:
        instances = sorted({o.instance for o in sessions})
        windows += [record.closed_histograms.get(k) for k in instances]
    return windows


def _latency(windows: list[dict[str, Any] | None], suffix: str = "") -> dict[str, Any]:
    """run.json "latency" (the service time); suffix "_intended": "latency_intended"."""
    merged = {kind: Histogram() for kind in OP_KINDS}
    for window in windows:
        if window:
            for kind in OP_KINDS:
                part = window.get(LOOP_RESULT.hist(kind, intended=bool(suffix)).key)
                merged[kind].merge(Histogram.from_json(part))
    return {kind: (hist.summary() if hist.count else None) for kind, hist in merged.items()}


def _latency_intended(
    config: Config, windows: list[dict[str, Any] | None]
) -> dict[str, Any] | None:
    """The latency from each op's intended start (RATE runs; null for a closed loop)."""
    return _latency(windows, INTENDED) if config.p.rate else None


def _rate_figures(
    config: Config, record: RunRecord, sessions: list[SessionOutcome]
) -> dict[str, Any]:
    """The schedule's figures of these sessions (model/rate.py; null for a closed loop)."""
    total = len(record.sessions) or 1
    return rate.window_figures(
        config.p.rate,
        len(sessions) / total,
        rate.session_rate(config.p.rate, total),
        _windows(record, sessions),
        _window_seconds(record),
    )


def _ops(sessions: list[SessionOutcome]) -> dict[str, int] | None:
    """Window op counts from the loops' own results; None when no call returned any."""
    finished = [o.window for o in sessions if o.window]
    if not finished:
        return None
    return {kind: sum(int(w[LOOP_RESULT.ops_of(kind).key]) for w in finished) for kind in OP_KINDS}


def build_metrics(
    record: RunRecord,
    index: int,
    info: InstanceInfo,
    warnings: list[str],
    ops_source: list[str],
    config: Config,
) -> dict[str, Any]:
    """The metrics of one instance of the run (all of it when there is one)."""
    inst, settings = record.instances[index], info.settings
    plugin = info.engine_view
    window = plugin.window()
    seconds = _window_seconds(record) or 0.0
    ops = _ops(record.sessions_of(index))
    # a stop alone loses nothing but the interval it cut, which is left out on purpose
    # (_cut_by_stop): statement counts, which hold that interval, stand in only for loop
    # results that were lost (SessionOutcome.results_lost: runner/phase.py says when)
    lost = sum(o.results_lost for o in record.sessions_of(index))
    if ops is None or lost:
        counted = window.ops_from_statements(inst.db_before, inst.db_after)
        if counted is not None and (ops is None or sum(counted.values()) > sum(ops.values())):
            ops = counted
            ops_source.append(plugin.capabilities.terms.get("ops_fallback", "statements"))
        elif lost:
            warnings.append(
                f"the loop results of {lost} session(s) were lost in part (a failed session, "
                "a CALL that never answered its cancel, kept intervals that could not be "
                "fetched): op counts and rates are low"
                + (f" on {inst.target}" if len(record.instances) > 1 else "")
            )
    metrics: dict[str, Any] = {}

    if ops is None:
        metrics.update(
            dict.fromkeys(("slobops_per_s", "selects_per_s", "updates_per_s", "scans_per_s"))
        )
    else:
        metrics["slobops_per_s"] = per_s(sum(ops.values()), seconds)
        for kind in OP_KINDS:
            metrics[f"{kind}s_per_s"] = per_s(ops[kind], seconds)
    if inst.db_before and inst.db_after and seconds > 0:
        metrics.update(
            window.metrics(inst.db_before, inst.db_after, seconds, settings, inst.own_commits)
        )
    else:
        metrics.update(dict.fromkeys(DATABASE_FIGURES))
    of = f" on {inst.target}" if len(record.instances) > 1 else ""
    warnings += [f"{warning}{of}" for warning in plugin.run_notes(settings)]
    if inst.host_before and inst.host_after:
        metrics.update(host_snapshot.host_delta(inst.host_before, inst.host_after))
    for key in (*HOST_FIGURES, "server_cpu_seconds"):
        metrics.setdefault(key, None)
    metrics["db_cpu_s"] = metrics.pop("server_cpu_seconds", None)
    total_ops = sum(ops.values()) if ops is not None else 0
    if total_ops and metrics.get("lio_per_s") is not None:
        metrics["lio_per_op"] = metrics["lio_per_s"] * seconds / total_ops
    metrics.update(_rate_figures(config, record, record.sessions_of(index)))
    return combine.round_figures(metrics)


def read_gap_warning(db_reads: float | None, dev_reads: float | None, direct_io: str) -> str | None:
    """Database and device reads per second that differ by more than READ_MISMATCH_PCT and
    READ_GAP_FLOOR_PER_S: below that floor a gap is a few reads of anything else (3/s
    against 2.6/s is "14 %" of nothing)."""
    if not db_reads or dev_reads is None or abs(db_reads - dev_reads) < READ_GAP_FLOOR_PER_S:
        return None
    gap = abs(db_reads - dev_reads) / db_reads * 100
    if gap <= READ_MISMATCH_PCT:
        return None
    if dev_reads < db_reads:
        return (
            f"database physical reads ({db_reads:,.0f}/s) exceed device reads "
            f"({dev_reads:,.0f}/s) by {gap:.0f} %: the OS page cache is serving reads. "
            f"Use direct I/O ({direct_io}) or a data set far larger than RAM."
        )
    return (
        f"device reads ({dev_reads:,.0f}/s) exceed database physical reads "
        f"({db_reads:,.0f}/s) by {gap:.0f} %: other I/O shares the device "
        "(other processes, read-ahead, checkpoints)."
    )


def _warnings(
    record: RunRecord,
    config: Config,
    metrics: dict[str, Any],
    instances: list[InstanceInfo],
    warnings: list[str],
) -> None:
    """Warnings about the run's totals."""
    plugins = [i.engine_view for i in instances]
    direct_io = plugins[0].capabilities.terms.get("direct_io", "the engine's direct I/O")
    db_reads, dev_reads = metrics.get("pio_reads_per_s"), metrics.get("device_reads_per_s")
    if warning := read_gap_warning(db_reads, dev_reads, direct_io):
        warnings.append(warning)
    busy = None
    if metrics.get("cpu_user_pct") is not None:
        busy = (metrics["cpu_user_pct"] or 0) + (metrics["cpu_sys_pct"] or 0)
    if busy is not None and busy >= CPU_SATURATED_PCT:
        warnings.append(
            f"CPU saturated ({busy:.0f} % user+sys): the host, not the storage, "
            "limits this run; fewer sessions or more CPUs measure the storage"
        )
    # Each instance caches its own schemas: the totals over instances compare.
    cache = sum(p.cache_bytes(i.settings) for p, i in zip(plugins, instances, strict=True))
    read = sum(len({o.schema for o in record.sessions_of(k)}) for k in range(len(instances)))
    data_bytes = sum(
        len({o.schema for o in record.sessions_of(k)})
        * plugins[k].table_bytes(i.settings, config.p.scale)
        for k, i in enumerate(instances)
    )
    pio = all(i.profile in (None, "pio") for i in instances)
    if pio and cache and data_bytes < CACHE_RATIO * cache:
        share = min(cache / data_bytes * 100, 100) if data_bytes else 100
        name = plugins[0].capabilities.terms.get("cache", "the database cache")
        # the schemas the sessions read, not the whole data set: 1 session reads 1 schema
        size = f"{data_bytes / 2**20:,.0f} MB"
        what = (
            f"the data set ({size})"
            if read >= config.p.schemas
            else f"the data the sessions read ({read} of {config.p.schemas} schemas, {size})"
        )
        warnings.append(
            f"{what} is less than {CACHE_RATIO}x {name} "
            f"({cache / 2**20:,.0f} MB): up to {share:.0f} % of it can be cached, "
            "so physical reads are understated. Raise SCALE, or run at least as many "
            "sessions as schemas."
        )
    seconds = _window_seconds(record)
    if seconds is not None and seconds < 5 * config.p.sample_interval:
        warnings.append(
            f"the window ({seconds:.1f} s) is shorter than 5 sampling intervals "
            f"({config.p.sample_interval} s): the time series says little"
        )
    cut = _cut_by_stop(record)
    if cut and cut[1] >= CUT_WARN_PCT:
        warnings.append(cut[0])
    dead = [o for o in record.sessions if o.error and record.status == RunStatus.COMPLETE]
    if dead:
        warnings.append(f"{len(dead)} session(s) died: {dead[0].error}")
    if record.planned_end and record.window_end and record.requested_seconds:
        tail = record.window_end - record.planned_end
        if tail > 0.01 * record.requested_seconds:
            warnings.append(
                f"the window ran {tail:.2f} s ({tail / record.requested_seconds * 100:.1f} %) "
                "past RUN_TIME while the SLOBops in flight finished (slow ops at this "
                "concurrency, long scans or think time); every figure covers the whole "
                "measured window"
            )
    warnings += rate_warnings(config, record.warmup_service_us, metrics)
    leftover = sum(i.leftover_backends for i in record.instances)
    if leftover:
        warnings.append(
            f"{leftover} backend(s) of the run were still alive at the end and were terminated"
        )


def _one_rate(rates: list[float | None]) -> float | None:
    """The instances' common wait sample rate (None: none, or they differ)."""
    known = {rate for rate in rates if rate is not None}
    return known.pop() if len(known) == 1 and None not in rates else None


def _sessions(record: RunRecord, seconds: float | None) -> list[dict[str, Any]]:
    out = []
    for o in record.sessions:
        w = o.window or {}
        hist = Histogram()
        for kind in OP_KINDS:
            hist.merge(Histogram.from_json(w.get(LOOP_RESULT.hist(kind).key)))
        ops = w.get(LOOP_RESULT.ops.key)
        out.append(
            {
                "id": o.id,
                "schema": o.schema,
                "instance": o.instance,
                "pid": o.pid,
                LOOP_RESULT.ops_select.key: w.get(LOOP_RESULT.ops_select.key),
                LOOP_RESULT.ops_update.key: w.get(LOOP_RESULT.ops_update.key),
                LOOP_RESULT.ops_scan.key: w.get(LOOP_RESULT.ops_scan.key),
                "ops_per_s": None if ops is None or not seconds else round(ops / seconds, 2),
                LOOP_RESULT.rows_selected.key: w.get(LOOP_RESULT.rows_selected.key),
                LOOP_RESULT.rows_updated.key: w.get(LOOP_RESULT.rows_updated.key),
                LOOP_RESULT.ops_hot_schema.key: w.get(LOOP_RESULT.ops_hot_schema.key),
                LOOP_RESULT.ops_hotspot.key: w.get(LOOP_RESULT.ops_hotspot.key),
                LOOP_RESULT.think_seconds.key: w.get(LOOP_RESULT.think_seconds.key),
                "mean_us": None if not hist.count else round(hist.mean_us() or 0, 1),
                "p99_us": None if not hist.count else hist.percentile_us(99),
                "warmup_ops": (o.warmup or {}).get(LOOP_RESULT.ops.key),
                "start_lag_ms": _ms(_start_lag_s(record, o)),
                "calls": o.calls,
                "call_gap_mean_ms": round(o.call_gap_sum_s / (o.calls - 1) * 1000, 3)
                if o.calls > 1
                else None,
                "call_gap_max_ms": round(o.call_gap_max_s * 1000, 3) if o.calls > 1 else None,
                "error": o.error,
            }
        )
    return out


def _start_lag_s(record: RunRecord, outcome: SessionOutcome) -> float | None:
    """When the session's first window op started after the window's barrier (the loop's
    began epoch, in the client's clock: runner/clocks.py)."""
    began = (outcome.window or {}).get(LOOP_RESULT.began_epoch.key)
    if began is None or record.window_start is None:
        return None
    return float(began) - record.window_start


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _call_gaps(record: RunRecord, seconds: float | None) -> dict[str, Any]:
    """The window's interval results (`streamed`: returned by a CALL that went on) and the
    gaps between a session's consecutive ones (the database's clock), as a share of the
    sessions' time: what cutting the window into intervals costs."""
    calls = sum(o.calls for o in record.sessions)
    streamed = sum(o.streamed for o in record.sessions)
    answers = sum(o.answers for o in record.sessions)
    gaps = sum(max(o.calls - 1, 0) for o in record.sessions)
    total = sum(o.call_gap_sum_s for o in record.sessions)
    busy = seconds * len(record.sessions) if seconds else None
    return {
        "calls": calls,
        "streamed": streamed,
        # the answers that brought them, and the most intervals one answer covered
        # (RESULTS_PER_S: sessions answer every k-th boundary, runner/batches.py)
        "answers": answers,
        "batch": max((i.batch for i in record.instances), default=1),
        "call_gap_mean_ms": round(total / gaps * 1000, 3) if gaps else None,
        "call_gap_max_ms": round(max(o.call_gap_max_s for o in record.sessions) * 1000, 3)
        if gaps
        else None,
        "call_gap_pct": round(total / busy * 100, 4) if gaps and busy else None,
    }


def _waits(waits: Counter) -> list[dict[str, Any]]:
    total = sum(waits.values())
    return (
        [
            {"event": event, "samples": count, "pct": round(count / total * 100, 2)}
            for event, count in waits.most_common()
        ]
        if total
        else []
    )


@dataclass
class InstanceInfo:
    """What the run knows of one instance besides its measurements."""

    engine: dict[str, Any]  # Engine.describe()
    settings: dict[str, str]
    host_info: dict[str, Any]
    profile: str | None
    devices_local: bool  # its host's device counters were read (here or through the DB)
    host_key: str
    engine_view: EngineView  # its engine's plug-in: figures, words and advice


def _instance_entry(
    record: RunRecord, index: int, info: InstanceInfo, metrics: dict[str, Any], config: Config
) -> dict[str, Any]:
    inst = record.instances[index]
    before, after = inst.db_before or {}, inst.db_after or {}
    sessions = record.sessions_of(index)
    window = info.engine_view.window()
    details = window.details(before, after, info.settings)
    waits = _waits(inst.waits)
    details["io_shape"] = io_shape(
        details.get("io_shape"),
        metrics,
        len(sessions),
        waits,
        inst.wait_samples,
        config.p.prefetch,
    )
    schemas = sorted({o.schema for o in sessions}, key=schema_order)
    used = [*schemas, "user1"] if config.p.hot_schema_frequency else schemas
    both = bool(before and after)
    return {
        "target": inst.target,
        "engine": {**info.engine, "profile": info.profile},
        "host": info.host_info,
        "sessions": [o.id for o in sessions],
        "schemas": schemas,
        "metrics": metrics,
        "latency": _latency(_windows(record, sessions)),
        "latency_intended": _latency_intended(config, _windows(record, sessions)),
        "waits": waits,
        "wait_samples": inst.wait_samples,
        "wait_sample_hz": inst.wait_sample_hz,
        "work_per_op": window.work_per_op(before, after, info.settings, config, _ops(sessions))
        if both
        else None,
        "tables": dataset_health.table_changes(before, after, used),
        "horizon": inst.horizon.as_dict(),
        "clock": clockoffset.as_json(
            inst.clock,
            inst.clock_warmup,
            [lag for o in sessions if (lag := _start_lag_s(record, o)) is not None],
        ),
        **details,
        "snapshots": {"before": inst.db_before, "after": inst.db_after},
    }


def _run_engine_and_host(instances: list[InstanceInfo]) -> tuple[dict, dict]:
    """The top-level engine and host: the instance's own, or a summary of several."""
    first = instances[0]
    plugin = first.engine_view
    engine = {
        **first.engine,
        "profile": first.profile,
        "title": plugin.title,
        "terms": dict(plugin.capabilities.terms),
    }
    if len(instances) == 1:
        return engine, first.host_info
    versions = {i.engine.get("version") for i in instances}
    engine.update(
        version=versions.pop() if len(versions) == 1 else "mixed",
        target=f"{len(instances)} instances: " + "; ".join(i.engine["target"] for i in instances),
        profile=first.profile if all(i.profile == first.profile for i in instances) else "mixed",
    )
    groups = combine.by_host(i.host_key for i in instances)
    if len(groups) == 1:
        return engine, first.host_info
    hosts = [instances[g[0]].host_info for g in groups]

    def total(key: str) -> Any:
        values = [h.get(key) for h in hosts]
        return None if any(v is None for v in values) else sum(values)

    def same(key: str) -> Any:
        values = {h.get(key) for h in hosts}
        return values.pop() if len(values) == 1 else None

    return engine, {
        "hostname": ", ".join(str(h.get("hostname")) for h in hosts),
        "cpus": total("cpus"),
        "memory_bytes": total("memory_bytes"),
        "cpu_model": same("cpu_model"),
        "kernel": same("kernel"),
        "os": same("os"),
        "devices": [d for h in hosts for d in h.get("devices") or []],
        "hosts": len(hosts),
    }


def build_run_json(
    *,
    record: RunRecord,
    config: Config,
    instances: list[InstanceInfo],
    label: str | None,
) -> dict[str, Any]:
    """run.json; its metrics are the run's totals over its instances (combine.run_totals),
    and `instances` holds each instance's own figures."""
    warnings: list[str] = list(config.warnings)
    ops_source: list[str] = []
    per_instance = [
        build_metrics(record, k, info, warnings, ops_source, config)
        for k, info in enumerate(instances)
    ]
    metrics = combine.run_totals(per_instance, [i.host_key for i in instances])
    # The verdict and the largest lag of the run as a whole, not of its instances'.
    metrics.update(combine.round_figures(_rate_figures(config, record, record.sessions)))
    warnings += record.early_warnings
    if not all(i.devices_local for i in instances):
        warnings.append("the server's host is not this one: device and CPU figures are null")
    _warnings(record, config, metrics, instances, warnings)
    seconds = _window_seconds(record)
    entries = [
        _instance_entry(record, k, info, m, config)
        for k, (info, m) in enumerate(zip(instances, per_instance, strict=True))
    ]
    for inst in record.instances:
        if inst.clock is not None:
            warnings += clockoffset.warnings(inst.target, inst.clock, inst.clock_warmup)
    for info, entry in zip(instances, entries, strict=True):
        of = f" ({entry['target']})" if len(entries) > 1 else ""
        health = dataset_health.warnings(info.engine_view, entry, seconds or 0.0)
        warnings += [w + of for w in health]
    engine, host_info = _run_engine_and_host(instances)
    waits: Counter = Counter()
    for inst in record.instances:
        waits.update(inst.waits)
    cut = _cut_by_stop(record)
    held = " (they hold the interval the stop cut, too)" if cut else ""
    notes = list(record.notes) + [f"op counts from {s}{held}" for s in dict.fromkeys(ops_source)]
    if cut and cut[1] < CUT_WARN_PCT:
        notes.append(cut[0])
    for entry in entries:
        of = f" ({entry['target']})" if len(entries) > 1 else ""
        notes += [note + of for note in entry["notes"]]
    if len(entries) > 1:
        notes.append(
            f"{len(entries)} instances: metrics are totals (rates add, latencies weighted by "
            "their operations, a shared host's devices count once); each instance's own "
            "figures, I/O breakdown and statements are in instances[]"
        )
    single = entries[0] if len(entries) == 1 else None
    taken = [
        [(i.db_before or {}).get("taken_at"), (i.db_after or {}).get("taken_at")]
        for i in record.instances
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "openslob", "version": __version__},
        "label": label,
        "status": record.status,
        "error": record.error,
        "stopped_by": record.stopped_by,
        "config": config.as_dict(),
        # where each value not a built-in default came from: flag, file (slob.conf), or
        # dataset (taken from the data set in the database: runner/dataset.py)
        "config_sources": config.sources_given(),
        "engine": engine,
        "host": host_info,
        "window": {
            "start": iso(record.window_start),
            "end": iso(record.window_end),
            "seconds": None if seconds is None else round(seconds, 3),
            "requested_seconds": record.requested_seconds,
            "warmup_seconds": record.warmup_seconds,
            "barrier": iso(record.start_at),
            "last_op_end": iso(record.last_op_end),
            "planned_end": iso(record.planned_end),
            # [before, after] times; one pair per instance when there are several
            "db_snapshots": taken[0] if len(taken) == 1 else taken,
            "connect_seconds": None
            if record.connect_seconds is None
            else round(record.connect_seconds, 3),
            **_call_gaps(record, seconds),
        },
        "sessions": _sessions(record, seconds),
        "metrics": metrics,
        "latency": _latency(_windows(record, record.sessions)),
        "latency_intended": _latency_intended(config, _windows(record, record.sessions)),
        "waits": _waits(waits),
        "wait_samples": sum(i.wait_samples for i in record.instances),
        "wait_sample_hz": _one_rate([i.wait_sample_hz for i in record.instances]),
        "io": single["io"] if single else None,
        "io_shape": single["io_shape"] if single else None,
        "statements": single["statements"] if single else None,
        "work_per_op": single["work_per_op"] if single else None,
        "tables": single["tables"] if single else None,
        "horizon": single["horizon"] if single else None,
        "history_length": single["history_length"] if single else None,
        # the live cliff judgement (model/cliff.py): rule and episodes; null when CLIFF=off
        "cliffs": record.cliffs.to_json() if record.cliffs is not None else None,
        "warnings": warnings,
        "notes": notes,
        "instances": entries,
        "generated_at": iso(datetime.now(UTC).timestamp()),
        "hostname": socket.gethostname(),
    }
