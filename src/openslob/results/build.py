"""The run directory and its versioned run.json: the source of truth for every report.

    run.json        everything measured (schema below, SCHEMA_VERSION)
    report.txt      the AWR-like text report, rendered from run.json only
    timeseries.csv  one row per sampling interval

A figure that cannot be measured is null, never 0 and never invented.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import secrets
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from openslob import __version__
from openslob.config.options import Config
from openslob.engines import registry
from openslob.engines.common.tables import CACHE_RATIO, schema_order
from openslob.engines.registry import OP_TYPES
from openslob.host import snapshot as host_snapshot
from openslob.model import combine
from openslob.model.errors import ConfigError, OpenslobError
from openslob.model.histogram import Histogram
from openslob.model.rates import per_s
from openslob.results import health as dataset_health
from openslob.runner.controller import RunRecord, SessionOutcome

# 2: instances[] (per-instance figures and snapshots); metrics are the totals over them
SCHEMA_VERSION = 2
READ_MISMATCH_PCT = 10
CPU_SATURATED_PCT = 90


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def run_directory(parent: Path, label: str | None) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") if label else ""
    path = parent / (f"{stamp}-{safe}" if safe else stamp)
    suffix = 1
    while path.exists():
        suffix += 1
        path = parent / f"{stamp}-{safe or 'run'}-{suffix}"
    path.mkdir(parents=True)
    return path


# A directory name is at most 255 bytes (NAME_MAX); the time stamp and suffixes need room.
MAX_LABEL_BYTES = 200


def check_results_place(parent: Path, label: str | None, option: str = "--results-dir") -> None:
    """Refuse (exit 2), before anything runs, a label too long to name a directory and a
    results directory that cannot be created or written: not after the run."""
    if label and len(label.encode()) > MAX_LABEL_BYTES:
        raise ConfigError(
            f"--label is {len(label.encode())} bytes long; at most {MAX_LABEL_BYTES} "
            "(it names the results directory)"
        )
    existing = parent.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{option} {parent}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {parent}: {existing} is not writable")


def _window_seconds(record: RunRecord) -> float | None:
    if record.window_start is None or record.window_end is None:
        return None
    return max(record.window_end - record.window_start, 0.0)


def _latency(sessions: list[SessionOutcome]) -> dict[str, Any]:
    merged = {kind: Histogram() for kind in OP_TYPES}
    for outcome in sessions:
        if outcome.window:
            for kind in OP_TYPES:
                merged[kind].merge(Histogram.from_json(outcome.window.get(f"hist_{kind}")))
    return {kind: (hist.summary() if hist.count else None) for kind, hist in merged.items()}


def _ops(sessions: list[SessionOutcome]) -> dict[str, int] | None:
    """Window op counts from the loops' own results; None when no call returned any."""
    finished = [o.window for o in sessions if o.window]
    if not finished:
        return None
    return {kind: sum(int(w[f"ops_{kind}"]) for w in finished) for kind in OP_TYPES}


def build_metrics(
    record: RunRecord,
    index: int,
    info: InstanceInfo,
    warnings: list[str],
    ops_source: list[str],
) -> dict[str, Any]:
    """The metrics of one instance of the run (all of it when there is one)."""
    inst, settings, engine = record.instances[index], info.settings, info.engine["name"]
    seconds = _window_seconds(record) or 0.0
    ops = _ops(record.sessions_of(index))
    if ops is None or record.status != "complete":
        counted = registry.ops_from_statements(engine, inst.db_before, inst.db_after)
        if counted is not None and (ops is None or sum(counted.values()) > sum(ops.values())):
            ops = counted
            ops_source.append("pg_stat_statements (loop results were lost with the cancel)")
    metrics: dict[str, Any] = {}

    if ops is None:
        metrics.update(
            dict.fromkeys(("slobops_per_s", "selects_per_s", "updates_per_s", "scans_per_s"))
        )
    else:
        metrics["slobops_per_s"] = per_s(sum(ops.values()), seconds)
        for kind in OP_TYPES:
            metrics[f"{kind}s_per_s"] = per_s(ops[kind], seconds)
    if inst.db_before and inst.db_after and seconds > 0:
        metrics.update(
            registry.window_metrics(
                engine, inst.db_before, inst.db_after, seconds, settings, inst.own_commits
            )
        )
    else:
        metrics.update(
            dict.fromkeys(
                (
                    "lio_per_s",
                    "pio_reads_per_s",
                    "pio_read_mb_per_s",
                    "pio_writes_per_s",
                    "pio_write_mb_per_s",
                    "db_read_latency_us",
                    "db_write_latency_us",
                    "wal_mb_per_s",
                    "wal_records_per_s",
                    "wal_fpi_per_s",
                    "wal_writes_per_s",
                    "wal_syncs_per_s",
                    "wal_sync_latency_us",
                    "commits_per_s",
                    "rollbacks_per_s",
                    "db_time_s",
                    "temp_mb",
                )
            )
        )
    if engine == registry.POSTGRESQL and settings.get("track_io_timing") != "on":
        of = f" on {inst.target}" if len(record.instances) > 1 else ""
        warnings.append(f"track_io_timing is off{of}: database read latency is not measured (null)")
    if inst.host_before and inst.host_after:
        metrics.update(host_snapshot.host_delta(inst.host_before, inst.host_after))
    for key in (*host_snapshot.DEVICE_CPU_METRICS, "server_cpu_seconds"):
        metrics.setdefault(key, None)
    metrics["db_cpu_s"] = metrics.pop("server_cpu_seconds", None)
    if ops is not None and metrics.get("lio_per_s") is not None and sum(ops.values()):
        metrics["lio_per_op"] = metrics["lio_per_s"] * seconds / sum(ops.values())
    return combine.round_figures(metrics)


def _warnings(
    record: RunRecord,
    config: Config,
    metrics: dict[str, Any],
    instances: list[InstanceInfo],
    warnings: list[str],
) -> None:
    """Warnings about the run's totals."""
    db_reads, dev_reads = metrics.get("pio_reads_per_s"), metrics.get("device_reads_per_s")
    if db_reads and dev_reads is not None:
        gap = abs(db_reads - dev_reads) / db_reads * 100
        if gap > READ_MISMATCH_PCT and dev_reads < db_reads:
            warnings.append(
                f"database physical reads ({db_reads:,.0f}/s) exceed device reads "
                f"({dev_reads:,.0f}/s) by {gap:.0f} %: the OS page cache is serving reads. "
                "Use direct I/O (debug_io_direct = data, PostgreSQL 16+; the private server's "
                "pio profile) or a data set far larger than RAM."
            )
        elif gap > READ_MISMATCH_PCT:
            warnings.append(
                f"device reads ({dev_reads:,.0f}/s) exceed database physical reads "
                f"({db_reads:,.0f}/s) by {gap:.0f} %: other I/O shares the device "
                "(other processes, read-ahead, checkpoints)."
            )
    busy = None
    if metrics.get("cpu_user_pct") is not None:
        busy = (metrics["cpu_user_pct"] or 0) + (metrics["cpu_sys_pct"] or 0)
    if busy is not None and busy >= CPU_SATURATED_PCT:
        warnings.append(
            f"CPU saturated ({busy:.0f} % user+sys): the host, not the storage, "
            "limits this run; fewer sessions or more CPUs measure the storage"
        )
    # Each instance caches its own schemas: the totals over instances compare.
    cache = sum(registry.cache_bytes(i.engine["name"], i.settings) for i in instances)
    data_bytes = sum(
        len({o.schema for o in record.sessions_of(k)})
        * registry.table_bytes(i.engine["name"], i.settings, config["SCALE"])
        for k, i in enumerate(instances)
    )
    pio = all(i.profile in (None, "pio") for i in instances)
    if pio and cache and data_bytes < CACHE_RATIO * cache:
        share = min(cache / data_bytes * 100, 100) if data_bytes else 100
        name = registry.cache_name(instances[0].engine["name"])
        warnings.append(
            f"the data set ({data_bytes / 2**20:,.0f} MB) is less than {CACHE_RATIO}x {name} "
            f"({cache / 2**20:,.0f} MB): up to {share:.0f} % of it can be cached, "
            "so physical reads are understated. Raise SCALE or SCHEMAS."
        )
    seconds = _window_seconds(record)
    if seconds is not None and seconds < 5 * config["SAMPLE_INTERVAL"]:
        warnings.append(
            f"the window ({seconds:.1f} s) is shorter than 5 sampling intervals "
            f"({config['SAMPLE_INTERVAL']} s): the time series says little"
        )
    dead = [o for o in record.sessions if o.error and record.status == "complete"]
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
    leftover = sum(i.leftover_backends for i in record.instances)
    if leftover:
        warnings.append(
            f"{leftover} backend(s) of the run were still alive at the end and were terminated"
        )


def _sessions(record: RunRecord, seconds: float | None) -> list[dict[str, Any]]:
    out = []
    for o in record.sessions:
        w = o.window or {}
        hist = Histogram()
        for kind in OP_TYPES:
            hist.merge(Histogram.from_json(w.get(f"hist_{kind}")))
        ops = w.get("ops")
        out.append(
            {
                "id": o.id,
                "schema": o.schema,
                "instance": o.instance,
                "pid": o.pid,
                "ops_select": w.get("ops_select"),
                "ops_update": w.get("ops_update"),
                "ops_scan": w.get("ops_scan"),
                "ops_per_s": None if ops is None or not seconds else round(ops / seconds, 2),
                "rows_selected": w.get("rows_selected"),
                "rows_updated": w.get("rows_updated"),
                "ops_hot_schema": w.get("ops_hot_schema"),
                "ops_hotspot": w.get("ops_hotspot"),
                "think_seconds": w.get("think_seconds"),
                "mean_us": None if not hist.count else round(hist.mean_us() or 0, 1),
                "p99_us": None if not hist.count else hist.percentile_us(99),
                "warmup_ops": (o.warmup or {}).get("ops"),
                "error": o.error,
            }
        )
    return out


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


def _instance_entry(
    record: RunRecord, index: int, info: InstanceInfo, metrics: dict[str, Any], config: Config
) -> dict[str, Any]:
    inst = record.instances[index]
    before, after = inst.db_before or {}, inst.db_after or {}
    sessions = record.sessions_of(index)
    engine = info.engine["name"]
    details = registry.window_details(engine, before, after, info.settings)
    schemas = sorted({o.schema for o in sessions}, key=schema_order)
    used = [*schemas, "user1"] if config["HOT_SCHEMA_FREQUENCY"] else schemas
    both = bool(before and after)
    return {
        "target": inst.target,
        "engine": {**info.engine, "profile": info.profile},
        "host": info.host_info,
        "sessions": [o.id for o in sessions],
        "schemas": schemas,
        "metrics": metrics,
        "latency": _latency(sessions),
        "waits": _waits(inst.waits),
        "wait_samples": inst.wait_samples,
        "work_per_op": registry.work_per_op(
            engine, before, after, info.settings, config, _ops(sessions)
        )
        if both
        else None,
        "tables": dataset_health.table_changes(before, after, used),
        "horizon": inst.horizon.as_dict(),
        "history_length": dataset_health.history_lengths(before, after),
        **details,
        "snapshots": {"before": inst.db_before, "after": inst.db_after},
    }


def _run_engine_and_host(instances: list[InstanceInfo]) -> tuple[dict, dict]:
    """The top-level engine and host: the instance's own, or a summary of several."""
    first = instances[0]
    engine = {**first.engine, "profile": first.profile}
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
        build_metrics(record, k, info, warnings, ops_source) for k, info in enumerate(instances)
    ]
    metrics = combine.run_totals(per_instance, [i.host_key for i in instances])
    if not all(i.devices_local for i in instances):
        warnings.append("the server's host is not this one: device and CPU figures are null")
    _warnings(record, config, metrics, instances, warnings)
    seconds = _window_seconds(record)
    entries = [
        _instance_entry(record, k, info, m, config)
        for k, (info, m) in enumerate(zip(instances, per_instance, strict=True))
    ]
    for entry in entries:
        of = f" ({entry['target']})" if len(entries) > 1 else ""
        health = dataset_health.warnings(entry["engine"]["name"], entry, seconds or 0.0)
        warnings += [w + of for w in health]
    engine, host_info = _run_engine_and_host(instances)
    waits: Counter = Counter()
    for inst in record.instances:
        waits.update(inst.waits)
    notes = list(record.notes) + [f"op counts from {s}" for s in dict.fromkeys(ops_source)]
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
        },
        "sessions": _sessions(record, seconds),
        "metrics": metrics,
        "latency": _latency(record.sessions),
        "waits": _waits(waits),
        "wait_samples": sum(i.wait_samples for i in record.instances),
        "io": single["io"] if single else None,
        "statements": single["statements"] if single else None,
        "work_per_op": single["work_per_op"] if single else None,
        "tables": single["tables"] if single else None,
        "horizon": single["horizon"] if single else None,
        "history_length": single["history_length"] if single else None,
        "warnings": warnings,
        "notes": notes,
        "instances": entries,
        "generated_at": iso(datetime.now(UTC).timestamp()),
        "hostname": socket.gethostname(),
    }


class NotSaved(OpenslobError):
    """A finished run whose files could not all be written (a full or read-only disk): the
    message names each file and why; `report` is the text report, for the terminal."""

    def __init__(self, message: str, report: str) -> None:
        super().__init__(message)
        self.report = report


def write_atomic(path: Path, content: str | bytes | Callable[[BinaryIO], None]) -> Path:
    """Write `path` whole or not at all: into a hidden file beside it, flushed to the disk,
    then renamed over it. A full disk leaves the old file (or none), never a truncated one.
    `content` is text, bytes, or a function writing to the open binary file."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        # O_EXCL: never follow or reuse someone's file; 0o666 less the umask, like open()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as fh:
                if callable(content):
                    content(fh)
                else:
                    fh.write(content.encode() if isinstance(content, str) else content)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as exc:
        # name the file the user asked for, not our temporary one (a full disk names none)
        exc.filename, exc.filename2 = str(path), None
        raise
    return path


def timeseries_csv(timeseries: list[dict[str, Any]]) -> str:
    """timeseries.csv's text: one row per sample, empty cells for unmeasured figures."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(timeseries[0]))
    writer.writeheader()
    for row in timeseries:
        writer.writerow(
            {
                k: ("" if v is None else round(v, 3) if isinstance(v, float) else v)
                for k, v in row.items()
            }
        )
    return buffer.getvalue()


def write_run(
    path: Path, run: dict[str, Any], timeseries: list[dict[str, Any]], report: str = ""
) -> None:
    """run.json, report.txt (when given) and timeseries.csv (when sampled), each written
    whole or not at all. Every file is tried; then NotSaved names those that failed."""
    files = {"run.json": json.dumps(run, indent=2, default=str) + "\n"}
    if report:
        files["report.txt"] = report
    if timeseries:
        files["timeseries.csv"] = timeseries_csv(timeseries)
    failed = []
    for name, text in files.items():
        try:
            write_atomic(path / name, text)
        except OSError as exc:
            failed.append(f"{name} ({exc.strerror or exc})")
    if failed:
        raise NotSaved(
            f"the run finished, but not all of its results were saved in {path}: "
            f"{', '.join(failed)} not written; the report is printed above",
            report,
        )


# What the text report reads without a fallback (analyses and plots take any key missing).
REPORT_KEYS = ("config", "engine", "host", "latency", "metrics", "sessions", "status", "window")


def load_run(path: Path, require: tuple[str, ...] = ()) -> dict[str, Any]:
    """run.json of a run directory (or the file itself), checked for a known schema; a
    damaged file (truncated, not an object, `require`d keys missing) is one error naming it."""
    file = path / "run.json" if path.is_dir() else path
    try:
        run = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise OpenslobError(f"{file}: not a readable run.json ({exc})") from exc
    if not isinstance(run, dict):
        raise OpenslobError(f"{file}: not a run.json (a JSON {type(run).__name__}, not an object)")
    version = run.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise OpenslobError(
            f"{file}: schema_version {version!r} is newer than this tool "
            f"understands ({SCHEMA_VERSION}); upgrade openslob"
        )
    require_keys(run, require, file)
    return run


def require_keys(run: dict[str, Any], keys: tuple[str, ...], file: Path) -> None:
    """A run.json that parses but lacks what a renderer reads is named, not a KeyError."""
    missing = [key for key in keys if key not in run]
    if missing:
        raise OpenslobError(f"{file}: a damaged run.json (no {', '.join(missing)})")
