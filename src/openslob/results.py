"""The run directory and its versioned run.json: the source of truth for every report.

    run.json        everything measured (schema below, SCHEMA_VERSION)
    report.txt      the AWR-like text report, rendered from run.json only
    timeseries.csv  one row per sampling interval

A figure that cannot be measured is null, never 0 and never invented.
"""

from __future__ import annotations

import csv
import json
import re
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openslob import __version__, host
from openslob.engines.postgres import stats
from openslob.histogram import Histogram
from openslob.options import BLOCK_SIZE, Config
from openslob.run import RunRecord

SCHEMA_VERSION = 1
OP_TYPES = ("select", "update", "scan")
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


def _window_seconds(record: RunRecord) -> float | None:
    if record.window_start is None or record.window_end is None:
        return None
    return max(record.window_end - record.window_start, 0.0)


def _latency(record: RunRecord) -> dict[str, Any]:
    merged = {kind: Histogram() for kind in OP_TYPES}
    for outcome in record.sessions:
        if outcome.window:
            for kind in OP_TYPES:
                merged[kind].merge(Histogram.from_json(outcome.window.get(f"hist_{kind}")))
    return {kind: (hist.summary() if hist.count else None) for kind, hist in merged.items()}


def _ops(record: RunRecord) -> dict[str, int] | None:
    """Window op counts from the loops' own results; None when no call returned any."""
    finished = [o.window for o in record.sessions if o.window]
    if not finished:
        return None
    return {kind: sum(int(w[f"ops_{kind}"]) for w in finished) for kind in OP_TYPES}


def _ops_from_statements(record: RunRecord) -> dict[str, int] | None:
    """When CALLs were cancelled their results are lost: pg_stat_statements still counted."""
    if not (record.db_before and record.db_after):
        return None
    before = stats.loop_counters(record.db_before.get("statements"))
    after = stats.loop_counters(record.db_after.get("statements"))
    if before is None or after is None:
        return None
    return {kind: int(after[f"calls_{kind}"] - before[f"calls_{kind}"]) for kind in OP_TYPES}


def build_metrics(
    record: RunRecord, settings: dict[str, str], warnings: list[str], ops_source: list[str]
) -> dict[str, Any]:
    seconds = _window_seconds(record) or 0.0
    ops = _ops(record)
    if ops is None or record.status != "complete":
        counted = _ops_from_statements(record)
        if counted is not None and (ops is None or sum(counted.values()) > sum(ops.values())):
            ops = counted
            ops_source.append("pg_stat_statements (loop results were lost with the cancel)")
    metrics: dict[str, Any] = {}

    def per_s(value: float | None) -> float | None:
        return None if value is None or seconds <= 0 else value / seconds

    if ops is None:
        metrics.update(
            dict.fromkeys(("slobops_per_s", "selects_per_s", "updates_per_s", "scans_per_s"))
        )
    else:
        metrics["slobops_per_s"] = per_s(sum(ops.values()))
        for kind in OP_TYPES:
            metrics[f"{kind}s_per_s"] = per_s(ops[kind])
    io_timing = settings.get("track_io_timing") == "on"
    wal_timing = settings.get("track_wal_io_timing") == "on"
    if record.db_before and record.db_after and seconds > 0:
        metrics.update(
            stats.snapshot_delta(
                record.db_before,
                record.db_after,
                seconds,
                io_timing=io_timing,
                wal_io_timing=wal_timing,
                own_commits=record.stats_flush_commits,
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
    if not io_timing:
        warnings.append("track_io_timing is off: database read latency is not measured (null)")
    if record.host_before and record.host_after:
        metrics.update(host.host_delta(record.host_before, record.host_after))
    for key in (*host.DEVICE_CPU_METRICS, "server_cpu_seconds"):
        metrics.setdefault(key, None)
    metrics["db_cpu_s"] = metrics.pop("server_cpu_seconds", None)
    if ops is not None and metrics.get("lio_per_s") is not None and sum(ops.values()):
        metrics["lio_per_op"] = metrics["lio_per_s"] * seconds / sum(ops.values())
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in metrics.items()}


def _warnings(
    record: RunRecord,
    config: Config,
    metrics: dict[str, Any],
    settings: dict[str, str],
    profile: str | None,
    warnings: list[str],
) -> None:
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
    shared_buffers = int(settings.get("shared_buffers_bytes") or 0)
    used_schemas = len(set(session_schemas_of(record)))
    data_bytes = used_schemas * config["SCALE"] * BLOCK_SIZE
    if profile in (None, "pio") and shared_buffers and data_bytes < 10 * shared_buffers:
        share = min(shared_buffers / data_bytes * 100, 100) if data_bytes else 100
        warnings.append(
            f"the data set ({data_bytes / 2**20:,.0f} MB) is less than 10x shared_buffers "
            f"({shared_buffers / 2**20:,.0f} MB): up to {share:.0f} % of it can be cached, "
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
    if record.leftover_backends:
        warnings.append(
            f"{record.leftover_backends} backend(s) of the run were still alive "
            "at the end and were terminated"
        )


def session_schemas_of(record: RunRecord) -> list[str]:
    return [o.schema for o in record.sessions]


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


def _waits(record: RunRecord) -> list[dict[str, Any]]:
    total = sum(record.waits.values())
    return (
        [
            {"event": event, "samples": count, "pct": round(count / total * 100, 2)}
            for event, count in record.waits.most_common()
        ]
        if total
        else []
    )


def build_run_json(
    *,
    record: RunRecord,
    config: Config,
    engine: dict[str, Any],
    settings: dict[str, str],
    host_info: dict[str, Any],
    profile: str | None,
    label: str | None,
    devices_local: bool,
) -> dict[str, Any]:
    warnings: list[str] = list(config.warnings)
    ops_source: list[str] = []
    metrics = build_metrics(record, settings, warnings, ops_source)
    if not devices_local:
        warnings.append("the server's host is not this one: device and CPU figures are null")
    _warnings(record, config, metrics, settings, profile, warnings)
    seconds = _window_seconds(record)
    before, after = record.db_before or {}, record.db_after or {}
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "openslob", "version": __version__},
        "label": label,
        "status": record.status,
        "error": record.error,
        "config": config.as_dict(),
        "engine": {**engine, "profile": profile},
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
            "db_snapshots": [before.get("taken_at"), after.get("taken_at")],
            "connect_seconds": None
            if record.connect_seconds is None
            else round(record.connect_seconds, 3),
        },
        "sessions": _sessions(record, seconds),
        "metrics": metrics,
        "latency": _latency(record),
        "waits": _waits(record),
        "wait_samples": record.wait_samples,
        "io": stats.io_breakdown(before, after) if before and after else None,
        "statements": stats.statement_deltas(before, after) if before and after else None,
        "warnings": warnings,
        "notes": record.notes
        + [f"op counts from {s}" for s in ops_source]
        + stats.version_notes(after, wal_io_timing=settings.get("track_wal_io_timing") == "on"),
        "snapshots": {"before": record.db_before, "after": record.db_after},
        "generated_at": iso(datetime.now(UTC).timestamp()),
        "hostname": socket.gethostname(),
    }


def write_run(path: Path, run: dict[str, Any], timeseries: list[dict[str, Any]]) -> None:
    (path / "run.json").write_text(json.dumps(run, indent=2, default=str) + "\n")
    if timeseries:
        columns = list(timeseries[0])
        with (path / "timeseries.csv").open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns)
            writer.writeheader()
            for row in timeseries:
                writer.writerow(
                    {
                        k: ("" if v is None else round(v, 3) if isinstance(v, float) else v)
                        for k, v in row.items()
                    }
                )


def load_run(path: Path) -> dict[str, Any]:
    """run.json of a run directory (or the file itself), checked for a known schema."""
    file = path / "run.json" if path.is_dir() else path
    try:
        run = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        from openslob.errors import OpenslobError

        raise OpenslobError(f"{file}: not a readable run.json ({exc})") from exc
    version = run.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        from openslob.errors import OpenslobError

        raise OpenslobError(
            f"{file}: schema_version {version!r} is newer than this tool "
            f"understands ({SCHEMA_VERSION}); upgrade openslob"
        )
    return run
