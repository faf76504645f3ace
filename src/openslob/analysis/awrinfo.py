"""Analyses over many runs: the awr_info table, flashdba's event view, sustained throughput.

Reads only what collect.find_runs returns (run.json dicts) and timeseries.csv; no database.

- analyze_rows / render_table / render_csv / render_json: one line per run, the columns SLOB
  users know from awr_info (COLUMNS). A figure that was not measured is None: "n/a" in the
  table, empty in CSV, null in JSON, never 0.
- event_rows / render_events: flashdba's per-event view (waits, time, latency, IOPS).
- load_timeseries / detect_degradation / render_degradation: does the throughput hold over a
  long run (flash garbage-collection cliffs)?

Every run.json key is read with .get: a run written by an older tool that lacks a figure shows
n/a for it; a newer schema_version is already refused by results.load_run.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openslob.analysis.figures import value
from openslob.model.errors import OpenslobError
from openslob.model.metrics import DEFAULT_TERMS, METRICS
from openslob.results.collect import RunRef

NA = "n/a"
TIMESERIES_FILE = "timeseries.csv"


def dig(data: Any, *path: str) -> Any:
    """data[path[0]][path[1]]..., None as soon as a level is missing or not a mapping."""
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


# --- the awr_info table -------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column: its row key, table header, unit, how to compute it, and its format."""

    key: str
    header: str
    unit: str
    compute: Callable[[RunRef], Any] | None = None
    digits: int | None = None  # decimals of a number column; None = text (left-aligned)
    missing: str = NA  # table text for None
    metric: str | None = None  # the figure's address (analysis/figures.py), for summaries

    def cell(self, value: Any) -> str:
        if value is None:
            return self.missing
        if self.digits is None or isinstance(value, bool) or not isinstance(value, int | float):
            return str(value)
        return f"{value:,.{self.digits}f}"


def _metric(key: str) -> Callable[[RunRef], Any]:
    return lambda ref: dig(ref.run, "metrics", key)


def _from_table(column_key: str, metric_key: str) -> Column:
    """A column of one run.json metric: header, unit and decimals from the metrics table
    (the column keys stay awr_info's, for CSV and JSON readers)."""
    metric = METRICS[metric_key]
    return Column(
        column_key, metric.short, metric.unit, _metric(metric_key), metric.digits, metric=metric_key
    )


def _derived(key: str) -> Column:
    """A column of a figure computed from the run (the metrics table's DERIVED rows)."""
    metric = METRICS[key]
    return Column(
        key, metric.short, metric.unit, lambda ref: value(ref.run, key), metric.digits, metric=key
    )


def _sessions(ref: RunRef) -> int | None:
    sessions = ref.run.get("sessions")
    return len(sessions) if isinstance(sessions, list) else None


def _top_wait(ref: RunRef) -> str | None:
    waits = ref.run.get("waits")
    if not isinstance(waits, list) or not waits or not isinstance(waits[0], Mapping):
        return None
    event, pct = waits[0].get("event"), waits[0].get("pct")
    if event is None:
        return None
    return f"{event} {pct:.1f}%" if isinstance(pct, int | float) else str(event)


def _page_kib(ref: RunRef) -> float | None:
    """The database page size the run's engine reported (run.json engine.page_size_bytes)."""
    size = dig(ref.run, "engine", "page_size_bytes")
    return None if not size else int(size) / 1024


COLUMNS: list[Column] = [
    Column("run", "RUN", "", lambda ref: ref.name),
    Column("sweep", "SWEEP", "", lambda ref: ref.sweep, missing="-"),
    Column("repeat", "REPEAT", "", lambda ref: ref.repeat, 0, missing="-"),
    Column("page_kib", "PAGE_KB", "KiB", _page_kib, 0, missing="-"),
    Column("sessions", "SESSIONS", "sessions", _sessions, 0),
    Column("update_pct", "UPDATE_PCT", "%", lambda ref: dig(ref.run, "config", "UPDATE_PCT"), 0),
    Column("elapsed_s", "ELAPSED", "s", lambda ref: dig(ref.run, "window", "seconds"), 1),
    _from_table("db_cpu_s", "db_cpu_s"),
    _from_table("db_time_s", "db_time_s"),
    _from_table("executes_per_s", "slobops_per_s"),
    _from_table("lio_per_s", "lio_per_s"),
    _from_table("preads_per_s", "pio_reads_per_s"),
    _from_table("read_mb_per_s", "pio_read_mb_per_s"),
    _from_table("pwrites_per_s", "pio_writes_per_s"),
    _from_table("write_mb_per_s", "pio_write_mb_per_s"),
    _from_table("redo_mb_per_s", "wal_mb_per_s"),
    _from_table("db_read_us", "db_read_latency_us"),
    _from_table("dev_read_us", "device_read_latency_us"),
    _from_table("wal_sync_us", "wal_sync_latency_us"),
    _derived("op_p50_us"),
    _derived("op_p99_us"),
    Column("status", "STATUS", "", lambda ref: ref.run.get("status")),
    Column("top_wait", "TOP_WAIT", "% of samples", _top_wait),
]


def analyze_row(ref: RunRef) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for column in COLUMNS:
        try:
            row[column.key] = column.compute(ref) if column.compute else None
        except (TypeError, ValueError, KeyError, IndexError):
            row[column.key] = None  # a malformed figure (older or hand-edited file) is unknown
    return row


def analyze_rows(refs: list[RunRef]) -> list[dict[str, Any]]:
    """One dict per run keyed by column key, raw values (None = not measured)."""
    return [analyze_row(ref) for ref in refs]


def shown_columns(rows: list[dict[str, Any]]) -> list[Column]:
    """The analyze table's columns, without REPEAT when no run is a second repeat (a
    table of single runs keeps its width)."""
    repeated = any((row.get("repeat") or 1) > 1 for row in rows)
    return [c for c in COLUMNS if c.key != "repeat" or repeated]


def render_table(rows: list[dict[str, Any]], columns: list[Column] = COLUMNS) -> str:
    """Aligned plain text: text left, numbers right with thousands separators."""
    cells = [[c.cell(row.get(c.key)) for c in columns] for row in rows]
    widths = [max([len(c.header), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]

    def line(texts: list[str]) -> str:
        return "  ".join(
            t.ljust(w) if c.digits is None else t.rjust(w)
            for t, w, c in zip(texts, widths, columns, strict=True)
        ).rstrip()

    out = [line([c.header for c in columns]), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out) + "\n"


def render_csv(rows: list[dict[str, Any]], columns: list[Column] = COLUMNS) -> str:
    """Header of column keys (stable, spreadsheet-friendly); None is an empty cell."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([c.key for c in columns])
    for row in rows:
        writer.writerow(["" if row.get(c.key) is None else row[c.key] for c in columns])
    return buf.getvalue()


def render_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, indent=2) + "\n"


# --- flashdba's event view ----------------------------------------------------------------

# (event, rate metric, latency metric, where the count comes from), the events named in the
# run's engine's own words (engine.terms). Databases other than Oracle count no waits per
# event, so "waits" are the I/Os counted over the window and time = waits × mean latency.
EVENTS: list[tuple[str, str, str, str]] = [
    ("{read_event}", "pio_reads_per_s", "db_read_latency_us", "{db_io} reads"),
    ("{write_event}", "pio_writes_per_s", "db_write_latency_us", "{db_io} writes"),
    ("{log_sync_event}", "wal_syncs_per_s", "wal_sync_latency_us", "{log} syncs"),
    ("device read", "device_reads_per_s", "device_read_latency_us", "/proc/diskstats"),
    ("device write", "device_writes_per_s", "device_write_latency_us", "/proc/diskstats"),
]

EVENT_COLUMNS: list[Column] = [
    Column("run", "Run", ""),
    Column("sweep", "Sweep", "", missing="-"),
    Column("event", "Event", ""),
    Column("waits", "Waits", "I/Os", digits=0),
    Column("time_s", "Time(s)", "s", digits=1),
    Column("latency_us", "Latency(us)", "us", digits=1),
    Column("iops", "IOPS", "1/s", digits=1),
    Column("source", "Counted by", ""),
]


def event_rows(refs: list[RunRef]) -> list[dict[str, Any]]:
    """Per run, one row per I/O event with waits, time_s, latency_us, iops (None = unknown)."""
    rows = []
    for ref in refs:
        seconds = dig(ref.run, "window", "seconds")
        terms = {**DEFAULT_TERMS, **(dig(ref.run, "engine", "terms") or {})}
        for event_text, rate_key, latency_key, source_text in EVENTS:
            event, source = event_text.format_map(terms), source_text.format_map(terms)
            iops = dig(ref.run, "metrics", rate_key)
            latency = dig(ref.run, "metrics", latency_key)
            waits = None
            if isinstance(iops, int | float) and isinstance(seconds, int | float):
                waits = round(iops * seconds)
            time_s = None
            if waits is not None and isinstance(latency, int | float):
                time_s = round(waits * latency / 1e6, 3)
            rows.append(
                {
                    "run": ref.name,
                    "sweep": ref.sweep,
                    "event": event,
                    "waits": waits,
                    "time_s": time_s,
                    "latency_us": latency,
                    "iops": iops,
                    "source": source,
                }
            )
    return rows


def render_events(rows: list[dict[str, Any]]) -> str:
    note = (
        "Waits = I/Os counted over the window (the database keeps no per-event wait counts); "
        "Time = Waits x mean latency.\n"
    )
    return render_table(rows, EVENT_COLUMNS) + note


# --- sustained throughput -----------------------------------------------------------------


@dataclass
class Episode:
    """One degraded stretch. Times are timeseries.csv elapsed_s (seconds since the barrier)."""

    start_s: float  # start of the first degraded interval
    end_s: float  # end of the last one
    duration_s: float  # sum of the intervals' seconds
    kind: str  # "iops_drop", "latency_rise" or "both"
    worst_iops: float | None
    iops_change_pct: float | None  # worst IOPS vs steady, signed (-46 = 46 % below)
    worst_latency_us: float | None
    latency_change_pct: float | None  # worst latency vs steady, signed (+310 = 310 % above)


@dataclass
class DegradationReport:
    baseline_iops: float | None
    baseline_latency_us: float | None
    baseline_start_s: float | None
    baseline_end_s: float | None
    iops_source: str | None  # "device" (reads+writes) or "database" (reads)
    latency_source: str | None  # "device" or "database" (read latency)
    measured_s: float  # seconds of window examined after the ramp
    episodes: list[Episode] = field(default_factory=list)
    verdict: str = ""
    iops_drop_pct: float = 20.0
    latency_rise_pct: float = 50.0
    min_seconds: float = 30.0

    @property
    def degraded(self) -> bool:
        return bool(self.episodes)


@dataclass
class _Sample:
    start: float
    end: float
    seconds: float
    iops: float | None
    latency: float | None

    @property
    def middle(self) -> float:
        return (self.start + self.end) / 2


def load_timeseries(run_dir: Path) -> list[dict[str, str]]:
    """The rows of a run's timeseries.csv (run directory or the file itself), as strings.

    [] when the run has none: results.write_run writes the file only when there were samples
    (and an Oracle report, the other kind of file a run can be, has none).
    """
    file = run_dir / TIMESERIES_FILE if run_dir.is_dir() else run_dir
    if not file.exists() or file.suffix != ".csv":
        return []
    try:
        with file.open(newline="") as fh:
            return list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise OpenslobError(f"{file}: no readable time series ({exc})") from exc


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _has(rows: list[Mapping[str, Any]], *keys: str) -> bool:
    return any(_number(row.get(k)) is not None for row in rows for k in keys)


def _samples(rows: list[Mapping[str, Any]]) -> tuple[list[_Sample], str | None, str | None]:
    """Window samples with IOPS and latency, each from one source for the whole series.

    The source is chosen once: switching per row between device and database counts would
    itself look like a cliff.
    """
    window = [r for r in rows if r.get("phase") == "window"]
    device_iops = _has(window, "device_reads_per_s", "device_writes_per_s")
    iops_source = "device" if device_iops else None
    if not device_iops and _has(window, "db_reads_per_s"):
        iops_source = "database"
    lat_key, latency_source = None, None
    for key, source in (("device_read_latency_us", "device"), ("db_read_latency_us", "database")):
        if _has(window, key):
            lat_key, latency_source = key, source
            break
    samples = []
    for row in window:
        end, seconds = _number(row.get("elapsed_s")), _number(row.get("seconds"))
        if end is None or seconds is None:
            continue
        if device_iops:
            parts = [_number(row.get(k)) for k in ("device_reads_per_s", "device_writes_per_s")]
            known = [p for p in parts if p is not None]
            iops = sum(known) if known else None
        else:
            iops = _number(row.get("db_reads_per_s"))
        latency = _number(row.get(lat_key)) if lat_key else None
        samples.append(_Sample(end - seconds, end, seconds, iops, latency))
    return samples, iops_source, latency_source


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _change_pct(value: float | None, base: float | None) -> float | None:
    if value is None or not base:
        return None
    return (value / base - 1) * 100


def _episode(
    stretch: list[tuple[_Sample, bool, bool]], iops: float | None, lat: float | None
) -> Episode:
    drop = any(d for _, d, _ in stretch)
    rise = any(r for _, _, r in stretch)
    worst_iops = min((s.iops for s, _, _ in stretch if s.iops is not None), default=None)
    worst_lat = max((s.latency for s, _, _ in stretch if s.latency is not None), default=None)
    return Episode(
        start_s=round(stretch[0][0].start, 3),
        end_s=round(stretch[-1][0].end, 3),
        duration_s=round(sum(s.seconds for s, _, _ in stretch), 3),
        kind="both" if drop and rise else "iops_drop" if drop else "latency_rise",
        worst_iops=worst_iops,
        iops_change_pct=_change_pct(worst_iops, iops),
        worst_latency_us=worst_lat,
        latency_change_pct=_change_pct(worst_lat, lat),
    )


def detect_degradation(
    series: list[Mapping[str, Any]],
    *,
    iops_drop_pct: float = 20.0,
    latency_rise_pct: float = 50.0,
    min_seconds: float = 30.0,
    baseline_seconds: float = 60.0,
    skip_seconds: float = 30.0,
) -> DegradationReport:
    """Find stretches where the storage stops delivering its steady throughput.

    Rule, with X = iops_drop_pct, Y = latency_rise_pct, Z = min_seconds:

    1. Only rows with phase == "window" count. IOPS = device_reads_per_s + device_writes_per_s
       (database db_reads_per_s when the series has no device figures); latency =
       device_read_latency_us (db_read_latency_us when there is no device figure). Each source
       is chosen once per series. Empty cells are "not measured".
    2. The window starts at the first window row's start (elapsed_s - seconds). Rows whose
       midpoint lies in the first skip_seconds are ramp and ignored. The steady level is the
       median IOPS and the median latency of the rows whose midpoint lies in the next
       baseline_seconds.
    3. A row is degraded when its IOPS < steady × (1 - X/100) or its latency > steady ×
       (1 + Y/100); a row with neither figure measured is not. An episode is a maximal run of
       consecutive degraded rows whose seconds add up to >= Z. Shorter dips are noise.

    Times reported are elapsed_s of timeseries.csv (seconds since the start barrier, warm-up
    included), so they can be found in the file.
    """
    samples, iops_source, latency_source = _samples(series)
    report = DegradationReport(
        baseline_iops=None,
        baseline_latency_us=None,
        baseline_start_s=None,
        baseline_end_s=None,
        iops_source=iops_source,
        latency_source=latency_source,
        measured_s=0.0,
        iops_drop_pct=iops_drop_pct,
        latency_rise_pct=latency_rise_pct,
        min_seconds=min_seconds,
    )
    if not samples:
        report.verdict = "not judged: the time series has no window samples"
        return report
    origin = samples[0].start + skip_seconds
    steady = [s for s in samples if origin <= s.middle < origin + baseline_seconds]
    examined = [s for s in samples if s.middle >= origin]
    report.measured_s = round(sum(s.seconds for s in examined), 3)
    report.baseline_iops = _median(s.iops for s in steady)
    report.baseline_latency_us = _median(s.latency for s in steady)
    if steady:
        report.baseline_start_s = round(steady[0].start, 3)
        report.baseline_end_s = round(steady[-1].end, 3)
    iops_floor = report.baseline_iops * (1 - iops_drop_pct / 100) if report.baseline_iops else None
    base_lat = report.baseline_latency_us
    lat_ceiling = base_lat * (1 + latency_rise_pct / 100) if base_lat else None
    if iops_floor is None and lat_ceiling is None:
        window = samples[-1].end - samples[0].start
        report.verdict = (
            f"not judged: no steady level (the window lasts {window:,.0f} s; the steady level "
            f"is taken after {skip_seconds:g} s of ramp over the next {baseline_seconds:g} s)"
        )
        return report

    stretch: list[tuple[_Sample, bool, bool]] = []
    for sample in [*examined, None]:  # None flushes the last stretch
        drop = rise = False
        if sample is not None:
            drop = iops_floor is not None and sample.iops is not None and sample.iops < iops_floor
            rise = (
                lat_ceiling is not None
                and sample.latency is not None
                and sample.latency > lat_ceiling
            )
        if sample is not None and (drop or rise):
            stretch.append((sample, drop, rise))
            continue
        if stretch and sum(s.seconds for s, _, _ in stretch) >= min_seconds:
            report.episodes.append(_episode(stretch, report.baseline_iops, base_lat))
        stretch = []
    report.verdict = _verdict(report)
    return report


def _verdict(report: DegradationReport) -> str:
    limits = (
        f"IOPS {report.iops_drop_pct:g} % below or latency {report.latency_rise_pct:g} % "
        f"above steady for >= {report.min_seconds:g} s"
    )
    if not report.episodes:
        return f"no degradation: no stretch with {limits} in {report.measured_s:,.0f} s"
    total = sum(e.duration_s for e in report.episodes)
    share = total / report.measured_s * 100 if report.measured_s else 0.0
    count = len(report.episodes)
    return (
        f"degraded: {count} episode{'s' if count > 1 else ''} with {limits}, "
        f"{total:,.0f} s of {report.measured_s:,.0f} s ({share:.0f} %)"
    )


def _num(value: float | None, digits: int = 0, unit: str = "") -> str:
    return NA if value is None else f"{value:,.{digits}f}{unit}"


def _pct(value: float | None) -> str:
    return NA if value is None else f"{value:+.0f} %"


def render_degradation(report: DegradationReport) -> str:
    """Human lines: the steady level, one line per episode, the verdict."""
    lines = []
    if report.baseline_start_s is not None:
        lines.append(
            f"steady {_num(report.baseline_iops)} IOPS @ {_num(report.baseline_latency_us)} us "
            f"(median from {report.baseline_start_s:,.0f} s to {report.baseline_end_s:,.0f} s; "
            f"IOPS: {report.iops_source or NA}, latency: {report.latency_source or NA})"
        )
    for e in report.episodes:
        lines.append(
            f"degradation at {e.start_s:,.0f} s for {e.duration_s:,.0f} s ({e.kind}): "
            f"IOPS {_pct(e.iops_change_pct)} ({_num(e.worst_iops)}), "
            f"latency {_pct(e.latency_change_pct)} ({_num(e.worst_latency_us, unit=' us')})"
        )
    lines.append(report.verdict)
    return "\n".join(lines) + "\n"


def plain_columns(rows: list[dict[str, Any]]) -> list[Column]:
    """Columns for plain dict rows (the Oracle awr_info tables): the keys are the headers; a
    number column shows one decimal when it holds a float, none for counts."""
    columns = []
    for key in rows[0] if rows else []:
        values = [r.get(key) for r in rows if r.get(key) is not None]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        digits = (1 if any(isinstance(v, float) for v in values) else 0) if numeric else None
        columns.append(Column(key, key, "", digits=digits))
    return columns
