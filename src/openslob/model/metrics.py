"""The metrics table: every figure a run reports, declared once.

One row per run.json "metrics" key (and per time-series column): its unit, its labels, how
the figures of several instances (and hosts) combine into the run's total, whether the time
series carries it, and how many decimals a table shows. results, combine, analyze, the
reports, the plots and the CLI's progress line read this table; none keeps a list of its own.

Labels may name the engine's own terms in braces ({log}: WAL or the redo log, {cache}:
shared_buffers or the InnoDB buffer pool, {db_io}: pg_stat_io or performance_schema): run.json
carries each engine's terms (engine.terms, from its capabilities) and `label()` fills them in,
so a renderer never asks which engine it is drawing.

Combining (combine.py): "sum" adds (rates, seconds, counts); "max" keeps the largest;
"weighted" is a latency-like figure, weighted by the operations it describes (`weight`:
total time / total operations, never the mean of means); "mean" is a share of one host's
capacity (averaged over hosts); "per_host_sum" adds the instances' shares within a host, then
averages over hosts; "ratio" is computed from the totals; "same" is kept only when every part
agrees. `host` figures (devices, CPU, pressure) count once per host however many instances
it serves.

`better` says which way is an improvement when two runs are compared (`slob compare`):
"higher" (throughput), "lower" (latency, CPU per op) or None (a share, a count that the
workload sets); `compared` puts a figure in the default set slob compare reports (the
issue's list: throughput, MB/s, logical reads, DB and device read latency, op p50/p99, WAL,
CPU per op). DERIVED figures are not stored in run.json: readers compute them from it
(analysis/figures.py), the table gives them their unit, label and direction like the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, overload

# Default engine terms, for run.json files written before engines declared their own.
DEFAULT_TERMS = {
    "log": "WAL",
    "cache": "shared_buffers",
    "db_io": "pg_stat_io",
    "read_event": "DataFileRead",
    "write_event": "DataFileWrite",
    "log_sync_event": "WalSync",
}


@dataclass(frozen=True)
class Metric:
    key: str
    unit: str
    label: str  # long label (reports, plots): may hold {log}, {cache}, {db_io}
    short: str = ""  # column header (analyze tables)
    combine: str = "sum"  # sum | weighted | mean | per_host_sum | ratio | same | max
    weight: str | None = None  # for "weighted": the rate of the operations it times
    host: bool = False  # a figure of the host: counted once per host
    live: bool = False  # per sampling interval too: timeseries.csv, the progress line
    digits: int = 1
    source: str = "database"  # loop | database | server | live | host | engine | rate
    brief: str = ""  # its name on the progress line ("": not shown there; needs live)
    better: str | None = None  # "higher" | "lower" | None: the direction of an improvement
    compared: bool = False  # in `slob compare`'s default set (its --metric picks others)

    def label_for(self, terms: Mapping[str, str] | None = None) -> str:
        return self.label.format_map({**DEFAULT_TERMS, **(terms or {})})


def _loop(key: str, label: str, **kw: Any) -> Metric:
    return Metric(key, "ops/s", label, live=True, source="loop", better="higher", **kw)


def _db(key: str, unit: str, label: str, **kw: Any) -> Metric:
    """A database figure: the window's, and each interval's (two interval snapshots)."""
    return Metric(key, unit, label, live=True, **kw)


def _host(key: str, unit: str, label: str, **kw: Any) -> Metric:
    return Metric(key, unit, label, host=True, source="host", **kw)


LOOP = (
    _loop("slobops_per_s", "SLOBops", short="EXECUTES/s", brief="ops/s", compared=True),
    _loop("selects_per_s", "SELECT ops"),
    _loop("updates_per_s", "UPDATE ops (each commits)"),
    _loop("scans_per_s", "SCAN ops"),
    Metric(
        "lio_per_op",
        "blocks",
        "Logical reads per SLOBop",
        combine="ratio",
        digits=2,
        source="loop",
    ),
)

DATABASE = (
    _db(
        "lio_per_s",
        "blocks/s",
        "Logical reads (blocks)",
        short="LIO/s",
        digits=0,
        better="higher",
        compared=True,
    ),
    _db(
        "pio_reads_per_s",
        "reads/s",
        "Physical reads ({db_io})",
        short="PREADS/s",
        digits=0,
        better="higher",
        compared=True,
    ),
    _db(
        "pio_read_mb_per_s",
        "MB/s",
        "Physical read MB/s",
        short="READ_MB/s",
        better="higher",
        compared=True,
    ),
    _db(
        "pio_writes_per_s",
        "writes/s",
        "Physical writes ({db_io})",
        short="PWRITES/s",
        digits=0,
        better="higher",
        compared=True,
    ),
    _db(
        "pio_write_mb_per_s",
        "MB/s",
        "Physical write MB/s",
        short="WRITE_MB/s",
        better="higher",
        compared=True,
    ),
    _db(
        "db_read_latency_us",
        "µs",
        "DB read latency",
        short="DB_READ_US",
        combine="weighted",
        weight="pio_reads_per_s",
        brief="db read us",
        better="lower",
        compared=True,
    ),
    _db(
        "db_write_latency_us",
        "µs",
        "DB write latency",
        combine="weighted",
        weight="pio_writes_per_s",
        better="lower",
    ),
    _db(
        "wal_mb_per_s",
        "MB/s",
        "{log} MB/s",
        short="REDO_MB/s",
        digits=2,
        better="higher",
        compared=True,
    ),
    _db("wal_records_per_s", "records/s", "{log} records"),
    _db("wal_fpi_per_s", "images/s", "{log} full-page images"),
    _db("wal_writes_per_s", "writes/s", "{log} writes"),
    _db("wal_syncs_per_s", "syncs/s", "{log} syncs (fsync/fdatasync)", short="LOG_SYNCS/s"),
    _db(
        "wal_sync_latency_us",
        "µs",
        "{log} sync latency",
        short="WAL_SYNC_US",
        combine="weighted",
        weight="wal_syncs_per_s",
        better="lower",
    ),
    _db("commits_per_s", "commits/s", "Commits", short="COMMITS/s", better="higher"),
    _db("rollbacks_per_s", "rollbacks/s", "Rollbacks"),
    Metric("db_time_s", "s", "DB time (active sessions)", short="DB TIME"),
    _db("temp_mb", "MB", "Temporary files MB"),
    Metric("db_cpu_s", "s", "DB CPU", short="DB CPU", source="server"),
)

HOST = (
    _host(
        "device_reads_per_s",
        "reads/s",
        "Device reads",
        live=True,
        digits=0,
        brief="dev r/s",
        better="higher",
    ),
    _host(
        "device_writes_per_s",
        "writes/s",
        "Device writes",
        live=True,
        digits=0,
        brief="w/s",
        better="higher",
    ),
    _host(
        "device_read_mb_per_s",
        "MB/s",
        "Device read MB/s",
        live=True,
        brief="MB/s r",
        better="higher",
    ),
    _host(
        "device_write_mb_per_s", "MB/s", "Device write MB/s", live=True, brief="w", better="higher"
    ),
    _host(
        "device_read_latency_us",
        "µs",
        "Device read latency",
        short="DEV_READ_US",
        brief="dev read us",
        live=True,
        combine="weighted",
        weight="device_reads_per_s",
        better="lower",
        compared=True,
    ),
    _host(
        "device_write_latency_us",
        "µs",
        "Device write latency",
        live=True,
        combine="weighted",
        weight="device_writes_per_s",
        better="lower",
    ),
    _host(
        "device_avg_read_kb",
        "KiB",
        "Device avg read size",
        combine="weighted",
        weight="device_reads_per_s",
    ),
    _host(
        "device_avg_write_kb",
        "KiB",
        "Device avg write size",
        combine="weighted",
        weight="device_writes_per_s",
    ),
    _host("device_util_pct", "%", "Device utilisation", live=True, combine="mean"),
    _host("device_avg_queue", "requests", "Device avg queue", digits=2),
    _host("device_flushes_per_s", "flushes/s", "Device flushes"),
    _host(
        "device_flush_latency_us",
        "µs",
        "Device flush latency",
        combine="weighted",
        weight="device_flushes_per_s",
        better="lower",
    ),
    _host("cpu_user_pct", "%", "CPU user", live=True, combine="mean", brief="cpu usr %"),
    _host("cpu_sys_pct", "%", "CPU sys", live=True, combine="mean", brief="sys %"),
    _host("cpu_iowait_pct", "%", "CPU iowait", live=True, combine="mean"),
    _host("cpu_idle_pct", "%", "CPU idle", combine="mean"),
    _host("cpu_steal_pct", "%", "CPU steal", combine="mean"),
    _host("cpu_busy_pct", "%", "CPU busy", combine="mean"),
    _host("context_switches_per_s", "switches/s", "Context switches", digits=0),
    _host("server_cpu_pct", "%", "Server processes CPU", combine="per_host_sum"),
    _host("psi_io_some_pct", "%", "PSI io some", combine="mean"),
    _host("psi_io_full_pct", "%", "PSI io full", combine="mean"),
    _host("psi_cpu_some_pct", "%", "PSI cpu some", combine="mean"),
    _host("psi_memory_some_pct", "%", "PSI memory some", combine="mean"),
    _host("psi_memory_full_pct", "%", "PSI memory full", combine="mean"),
)

# Each sampling interval's SLOBop latency per op type, from the loops' own histograms (the
# time series; the window's are run.json "latency"). Counts are ops started in the interval.
OP_KINDS = ("select", "update", "scan")
LATENCY_STATS: tuple[tuple[str, str], ...] = (
    ("mean", "mean"),
    ("p50", "p50"),
    ("p90", "p90"),
    ("p99", "p99"),
    ("p999", "p99.9"),
    ("max", "max"),
)


def _latency(kind: str) -> tuple[Metric, ...]:
    name = "update + commit" if kind == "update" else kind
    figures = [Metric(f"{kind}_count", "ops", f"{name} ops", live=True, digits=0, source="latency")]
    figures += [
        Metric(
            f"{kind}_{stat}_us",
            "µs",
            f"{name} {label} latency",
            combine="same",
            live=True,
            source="latency",
            brief="sel p99 us" if (kind, stat) == ("select", "p99") else "",
        )
        for stat, label in LATENCY_STATS
    ]
    return tuple(figures)


LATENCY = tuple(m for kind in OP_KINDS for m in _latency(kind))

# Latency below the op, traced in the kernel (host/ebpf.py): each sampling interval's rate
# and p50/p99 of the database's read call, its log sync, and the device's requests (the
# window's are run.json "latency_layers"); null when not traced.
LATENCY_LAYERS = ("db_read_call", "log_sync", "device_read", "device_write")
_LAYER_NAMES = {
    "db_read_call": "DB read call",
    "log_sync": "{log} sync call",
    "device_read": "device read request",
    "device_write": "device write request",
}


def _layer(layer: str) -> tuple[Metric, ...]:
    name = _LAYER_NAMES[layer]
    return (
        Metric(f"{layer}_traced_per_s", "calls/s", f"{name}s/s (traced)", live=True, source="ebpf"),
        *(
            Metric(
                f"{layer}_{stat}_us",
                "µs",
                f"{name} {stat} latency (traced)",
                combine="max",
                live=True,
                source="ebpf",
            )
            for stat in ("p50", "p99")
        ),
    )


TRACED = tuple(m for layer in LATENCY_LAYERS for m in _layer(layer))

# Computed by readers from a run.json (analysis/figures.py), never stored in it.
DERIVED = (
    Metric(
        "op_p50_us",
        "µs",
        "SLOBop latency p50 (all op types)",
        short="OP_P50_US",
        digits=0,
        source="derived",
        better="lower",
        compared=True,
    ),
    Metric(
        "op_p99_us",
        "µs",
        "SLOBop latency p99 (all op types)",
        short="OP_P99_US",
        digits=0,
        source="derived",
        better="lower",
        compared=True,
    ),
    # Oracle's PL/SQL commit optimization (user commits ÷ redo synch writes: 6,400 / 97) and
    # group commit (commits per WAL flush): how many commits one log sync carried.
    Metric(
        "commits_per_sync",
        "commits/sync",
        "Commits per {log} sync",
        short="COMMITS/SYNC",
        digits=2,
        source="derived",
        compared=True,
    ),
    Metric(
        "db_cpu_us_per_op",
        "µs",
        "DB CPU per SLOBop",
        short="CPU_US/OP",
        source="derived",
        better="lower",
        compared=True,
    ),
)


# RATE runs (model/rate.py): the same statistics from each op's intended start (the service
# time above is from its actual start), per interval too; null in closed-loop runs.
INTENDED = "_intended"


def _intended(kind: str) -> tuple[Metric, ...]:
    name = "update + commit" if kind == "update" else kind
    return tuple(
        Metric(
            f"{kind}_{stat}{INTENDED}_us",
            "µs",
            f"{name} {label} latency from the intended start",
            combine="same",
            live=True,
            source="latency",
        )
        for stat, label in LATENCY_STATS
    )


LATENCY_INTENDED = tuple(m for kind in OP_KINDS for m in _intended(kind))

# The schedule of a RATE run: run.json figures (null in closed-loop runs). Counts add over
# instances and intervals; the largest lag is the largest; the verdict is made from the
# run's totals (model/rate.py's rule), never from the instances' verdicts.
RATE = (
    Metric("offered_rate", "ops/s", "Offered rate (RATE)", source="rate"),
    Metric("achieved_rate", "ops/s", "Achieved rate", source="rate"),
    Metric("late_ops_1ms", "ops", "Ops started > 1 ms late", live=True, digits=0, source="rate"),
    Metric("late_ops_10ms", "ops", "Ops started > 10 ms late", live=True, digits=0, source="rate"),
    Metric("max_lag_us", "µs", "Largest schedule lag", combine="max", live=True, source="rate"),
    Metric("backlog_ops", "ops", "Ops due but not started at the end", source="rate"),
    Metric("saturated", "", "Saturated (could not keep the rate)", combine="ratio", source="rate"),
)

CORE: tuple[Metric, ...] = (
    *LOOP,
    *DATABASE,
    *HOST,
    *LATENCY,
    *LATENCY_INTENDED,
    *TRACED,
    *RATE,
    *DERIVED,
)


_T = TypeVar("_T")


class MetricTable(Mapping[str, Metric]):
    """The core metrics plus what engines contribute (their own counters, e.g. InnoDB's)."""

    def __init__(self, metrics: Iterable[Metric]) -> None:
        self._by_key: dict[str, Metric] = {}
        for metric in metrics:
            self.add(metric)

    def add(self, metric: Metric) -> None:
        if metric.key in self._by_key and self._by_key[metric.key] != metric:
            raise ValueError(f"metric {metric.key} is declared twice, differently")
        self._by_key[metric.key] = metric

    def __getitem__(self, key: str) -> Metric:
        return self._by_key[key]

    # the dict's own: Mapping's go through __getitem__ and a KeyError (a time-series row
    # looks up ~100 keys, every interval)
    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    @overload
    def get(self, key: str) -> Metric | None: ...

    @overload
    def get(self, key: str, default: Metric | _T) -> Metric | _T: ...

    def get(self, key: str, default: Any = None) -> Any:
        return self._by_key.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def keys_where(self, **match: Any) -> tuple[str, ...]:
        return tuple(
            k for k, m in self._by_key.items() if all(getattr(m, a) == v for a, v in match.items())
        )


METRICS = MetricTable(CORE)


def label(key: str, terms: Mapping[str, str] | None = None) -> str:
    """A metric's long label in the engine's own terms (run.json engine.terms)."""
    metric = METRICS.get(key)
    return key if metric is None else metric.label_for(terms)


def progress_keys() -> tuple[str, ...]:
    """The live figures the progress line shows, in table order."""
    return tuple(k for k, m in METRICS.items() if m.brief and m.live)


def core_keys(source: str) -> tuple[str, ...]:
    """The core figures of one source, in table order (engines' own are not in it)."""
    return tuple(m.key for m in CORE if m.source == source)
