"""One figure of a run.json by its address, and the workload (the point) a run measured.

Addresses, as `slob compare --metric` and `--fail-if` name them:

- a key of the metrics table (model/metrics.py): run.json ``metrics[key]``
  (``pio_reads_per_s``), or one of its DERIVED figures, computed here from the run:
  ``op_p50_us`` / ``op_p99_us`` (percentiles of the in-loop histograms of all op types
  merged), ``db_cpu_us_per_op`` (DB CPU seconds ÷ SLOBops of the window, in µs),
  ``commits_per_sync`` (commits ÷ WAL syncs; an Oracle report's user commits ÷ redo synch
  writes);
- ``OP.FIELD``: run.json ``latency[OP][FIELD]`` (``select.p99_us``), OP one of the loop's
  op types, FIELD one of the latency block's figures.

A figure that was not measured is None, never 0.

The workload of a run (`workload`) is the values of the options the option table marks
`workload` (config/options.py), with the effective session count in place of SESSIONS and
THREADS_PER_SCHEMA, and without options switched off by the option they need (HOTSPOT_MB
while DO_HOTSPOT is FALSE). Keys a run does not record (an Oracle report knows only
UPDATE_PCT and sessions) are absent, not guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openslob.config.options import OPTIONS, OPTIONS_BY_NAME
from openslob.model.errors import ConfigError
from openslob.model.histogram import merged_ops
from openslob.model.metrics import METRICS, OP_KINDS, Metric, core_keys

# The figures of one op type's latency block (model/histogram.Histogram.summary).
LATENCY_FIELDS = ("count", "mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us")
SESSIONS_KEY = "SESSIONS"
# Replaced by the effective session count: SESSIONS=0 with 4 schemas is 4 sessions.
_SESSION_OPTIONS = ("SESSIONS", "THREADS_PER_SCHEMA")
WORKLOAD_OPTIONS = tuple(o.name for o in OPTIONS if o.workload)


def metric_for(address: str) -> Metric:
    """The metrics-table row of an address (a synthesised one for OP.FIELD); ConfigError
    naming what is allowed when the address names nothing."""
    if address in METRICS:
        return METRICS[address]
    op, _, field = address.partition(".")
    if op in OP_KINDS and field in LATENCY_FIELDS:
        unit = "ops" if field == "count" else "µs"
        return Metric(
            address,
            unit,
            f"{op.upper()} {field.removesuffix('_us')}",
            digits=0,
            source="loop",
            better=None if field == "count" else "lower",
        )
    raise ConfigError(
        f"unknown figure {address!r}: a run.json metrics key (e.g. pio_reads_per_s), "
        f"{', '.join(core_keys('derived'))}, or OP.FIELD with OP one of "
        f"{', '.join(OP_KINDS)} and FIELD one of {', '.join(LATENCY_FIELDS)}"
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _section(run: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = run.get(name)
    return value if isinstance(value, Mapping) else {}


def _cpu_us_per_op(run: Mapping[str, Any]) -> float | None:
    metrics = _section(run, "metrics")
    cpu_s, ops_per_s = _number(metrics.get("db_cpu_s")), _number(metrics.get("slobops_per_s"))
    seconds = _number(_section(run, "window").get("seconds"))
    if cpu_s is None or not ops_per_s or not seconds:
        return None
    return cpu_s / (ops_per_s * seconds) * 1e6


def _commits_per_sync(run: Mapping[str, Any]) -> float | None:
    """Commits per log sync: commits ÷ WAL syncs (fsyncs) of our engines, user commits ÷
    redo synch writes of an Oracle report (its rates come from the same window's totals)."""
    metrics = _section(run, "metrics")
    commits, syncs = _number(metrics.get("commits_per_s")), _number(metrics.get("wal_syncs_per_s"))
    return None if commits is None or not syncs else commits / syncs


def _op_percentile(run: Mapping[str, Any], pct: float) -> float | None:
    hist = merged_ops(run.get("latency"))
    return None if hist is None else hist.percentile_us(pct)


def value(run: Mapping[str, Any], address: str) -> float | None:
    """The figure at `address` of one run; None when it was not measured."""
    if address == "op_p50_us":
        return _op_percentile(run, 50)
    if address == "op_p99_us":
        return _op_percentile(run, 99)
    if address == "db_cpu_us_per_op":
        return _cpu_us_per_op(run)
    if address == "commits_per_sync":
        return _commits_per_sync(run)
    if address in METRICS:
        return _number(_section(run, "metrics").get(address))
    op, _, field = address.partition(".")
    block = _section(run, "latency").get(op)
    return _number(block.get(field)) if isinstance(block, Mapping) else None


def session_count(run: Mapping[str, Any]) -> int | None:
    """The sessions a run connected, from its configuration (the session list of a run that
    failed early may be short)."""
    config = _section(run, "config")
    sessions = config.get("SESSIONS")
    if sessions:
        return int(sessions)
    schemas, threads = config.get("SCHEMAS"), config.get("THREADS_PER_SCHEMA")
    if schemas and threads:
        return int(schemas) * int(threads)
    listed = run.get("sessions")
    return len(listed) if isinstance(listed, list) and listed else None


def workload(run: Mapping[str, Any]) -> dict[str, Any]:
    """The workload keys a run records, by slob.conf name (SESSIONS = effective count)."""
    config = _section(run, "config")
    found: dict[str, Any] = {}
    for name in WORKLOAD_OPTIONS:
        if name in _SESSION_OPTIONS or config.get(name) is None:
            continue
        needs = OPTIONS_BY_NAME[name].needs
        if needs and not config.get(needs):
            continue  # switched off: its value changes nothing the database does
        found[name] = config[name]
    sessions = session_count(run)
    if sessions is not None:
        found[SESSIONS_KEY] = sessions
    return found


def point_text(params: Mapping[str, Any]) -> str:
    """UPDATE_PCT=20 SESSIONS=4: a point's varied parameters, as a user types them."""
    return " ".join(f"{name}={_plain(value)}" for name, value in params.items()) or "(one point)"


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def point_identity(run: Mapping[str, Any], point: Mapping[str, Any]) -> dict[str, Any]:
    """What tells a run's point from others: its workload plus the parameters of the sweep
    point it belongs to (a page size is not workload, and still another point)."""
    return {**workload(run), **point}


def interval_rows(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """run.json's intervals as one dict per interval (none for a run.json without them)."""
    table = run.get("intervals")
    if not isinstance(table, dict):
        return []
    columns = table.get("columns") or []
    return [dict(zip(columns, row, strict=False)) for row in table.get("rows") or []]
