"""Sustained runs: does the storage hold its steady level over hours (flash garbage
collection, a checkpoint, a cache tier filling)? Reads timeseries.csv only.

- load_timeseries: a run's rows, as strings.
- detect_degradation: the steady level after the ramp, and episodes where IOPS drop, the
  I/O latency rises, or the SLOBop p99 rises beyond set limits for long enough.
- render_degradation: the human lines of `slob analyze --timeseries`.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openslob.model.errors import OpenslobError
from openslob.model.states import Phase
from openslob.results.stream import TIMESERIES_FILE, csv_number

NA = "n/a"


@dataclass
class Episode:
    """One degraded stretch. Times are timeseries.csv elapsed_s (seconds since the barrier)."""

    start_s: float  # start of the first degraded interval
    end_s: float  # end of the last one
    duration_s: float  # sum of the intervals' seconds
    kind: str  # what crossed its limit: "iops_drop", "latency_rise", "p99_rise", joined by +
    worst_iops: float | None
    iops_change_pct: float | None  # worst IOPS vs steady, signed (-46 = 46 % below)
    worst_latency_us: float | None
    latency_change_pct: float | None  # worst latency vs steady, signed (+310 = 310 % above)
    worst_p99_us: float | None = None
    p99_change_pct: float | None = None


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
    p99_rise_pct: float = 100.0
    baseline_p99_us: float | None = None
    p99_source: str | None = None  # the op type whose p99 is watched: "select" or "update"

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
    p99: float | None = None

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


def _has(rows: list[Mapping[str, Any]], *keys: str) -> bool:
    return any(csv_number(row.get(k)) is not None for row in rows for k in keys)


def _samples(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[list[_Sample], str | None, str | None, str | None]:
    """Window samples with IOPS, latency and SLOBop p99, each from one source for the whole
    series (and the sources).

    The source is chosen once: switching per row between device and database counts would
    itself look like a cliff. The p99 is the SELECTs' (the UPDATEs' when there are none).
    """
    window = [r for r in rows if r.get("phase") == Phase.WINDOW]
    device_iops = _has(window, "device_reads_per_s", "device_writes_per_s")
    iops_source = "device" if device_iops else None
    db_key = "pio_reads_per_s" if _has(window, "pio_reads_per_s") else "db_reads_per_s"
    if not device_iops and _has(window, db_key):
        iops_source = "database"
    lat_key, latency_source = None, None
    for key, source in (("device_read_latency_us", "device"), ("db_read_latency_us", "database")):
        if _has(window, key):
            lat_key, latency_source = key, source
            break
    p99_source = next((k for k in ("select", "update") if _has(window, f"{k}_p99_us")), None)
    samples = []
    for row in window:
        end, seconds = csv_number(row.get("elapsed_s")), csv_number(row.get("seconds"))
        if end is None or seconds is None:
            continue
        if device_iops:
            parts = [csv_number(row.get(k)) for k in ("device_reads_per_s", "device_writes_per_s")]
            known = [p for p in parts if p is not None]
            iops = sum(known) if known else None
        else:
            iops = csv_number(row.get(db_key))
        latency = csv_number(row.get(lat_key)) if lat_key else None
        p99 = csv_number(row.get(f"{p99_source}_p99_us")) if p99_source else None
        samples.append(_Sample(end - seconds, end, seconds, iops, latency, p99))
    return samples, iops_source, latency_source, p99_source


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _change_pct(value: float | None, base: float | None) -> float | None:
    if value is None or not base:
        return None
    return (value / base - 1) * 100


KINDS = ("iops_drop", "latency_rise", "p99_rise")


def _episode(
    stretch: list[tuple[_Sample, tuple[bool, bool, bool]]], report: DegradationReport
) -> Episode:
    samples = [s for s, _ in stretch]
    crossed = [any(flags[k] for _, flags in stretch) for k in range(len(KINDS))]
    worst_iops = min((s.iops for s in samples if s.iops is not None), default=None)
    worst_lat = max((s.latency for s in samples if s.latency is not None), default=None)
    worst_p99 = max((s.p99 for s in samples if s.p99 is not None), default=None)
    return Episode(
        start_s=round(samples[0].start, 3),
        end_s=round(samples[-1].end, 3),
        duration_s=round(sum(s.seconds for s in samples), 3),
        kind="+".join(k for k, hit in zip(KINDS, crossed, strict=True) if hit),
        worst_iops=worst_iops,
        iops_change_pct=_change_pct(worst_iops, report.baseline_iops),
        worst_latency_us=worst_lat,
        latency_change_pct=_change_pct(worst_lat, report.baseline_latency_us),
        worst_p99_us=worst_p99,
        p99_change_pct=_change_pct(worst_p99, report.baseline_p99_us),
    )


def detect_degradation(
    series: Sequence[Mapping[str, Any]],
    *,
    iops_drop_pct: float = 20.0,
    latency_rise_pct: float = 50.0,
    min_seconds: float = 30.0,
    baseline_seconds: float = 60.0,
    skip_seconds: float = 30.0,
    p99_rise_pct: float = 100.0,
) -> DegradationReport:
    """Find stretches where the storage stops delivering its steady throughput.

    Rule, with X = iops_drop_pct, Y = latency_rise_pct, P = p99_rise_pct, Z = min_seconds:

    1. Only rows with phase == "window" count. IOPS = device_reads_per_s + device_writes_per_s
       (database pio_reads_per_s when the series has no device figures); latency =
       device_read_latency_us (db_read_latency_us when there is no device figure). Each source
       is chosen once per series; p99 = select_p99_us (update_p99_us when the series has no
       SELECTs: UPDATE_PCT=100). Empty cells are "not measured".
    2. The window starts at the first window row's start (elapsed_s - seconds). Rows whose
       midpoint lies in the first skip_seconds are ramp and ignored. The steady level is the
       median IOPS, latency and p99 of the rows whose midpoint lies in the next
       baseline_seconds.
    3. A row is degraded when its IOPS < steady × (1 - X/100), its latency > steady ×
       (1 + Y/100) or its p99 > steady × (1 + P/100); a row with none measured is not. An
       episode is a maximal run of consecutive degraded rows whose seconds add up to >= Z.
       Shorter dips are noise.

    Times reported are elapsed_s of timeseries.csv (seconds since the start barrier, warm-up
    included), so they can be found in the file.
    """
    samples, iops_source, latency_source, p99_source = _samples(series)
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
        p99_rise_pct=p99_rise_pct,
        p99_source=p99_source,
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
    report.baseline_p99_us = _median(s.p99 for s in steady)
    if steady:
        report.baseline_start_s = round(steady[0].start, 3)
        report.baseline_end_s = round(steady[-1].end, 3)
    floor = report.baseline_iops * (1 - iops_drop_pct / 100) if report.baseline_iops else None
    ceilings = [
        report.baseline_latency_us * (1 + latency_rise_pct / 100)
        if report.baseline_latency_us
        else None,
        report.baseline_p99_us * (1 + p99_rise_pct / 100) if report.baseline_p99_us else None,
    ]
    if floor is None and ceilings == [None, None]:
        window = samples[-1].end - samples[0].start
        report.verdict = (
            f"not judged: no steady level (the window lasts {window:,.0f} s; the steady level "
            f"is taken after {skip_seconds:g} s of ramp over the next {baseline_seconds:g} s)"
        )
        return report

    def above(value: float | None, ceiling: float | None) -> bool:
        return ceiling is not None and value is not None and value > ceiling

    stretch: list[tuple[_Sample, tuple[bool, bool, bool]]] = []
    for sample in [*examined, None]:  # None flushes the last stretch
        if sample is not None:
            flags = (
                floor is not None and sample.iops is not None and sample.iops < floor,
                above(sample.latency, ceilings[0]),
                above(sample.p99, ceilings[1]),
            )
            if any(flags):
                stretch.append((sample, flags))
                continue
        if stretch and sum(s.seconds for s, _ in stretch) >= min_seconds:
            report.episodes.append(_episode(stretch, report))
        stretch = []
    report.verdict = _verdict(report)
    return report


def _verdict(report: DegradationReport) -> str:
    limits = (
        f"IOPS {report.iops_drop_pct:g} % below, latency {report.latency_rise_pct:g} % or "
        f"p99 {report.p99_rise_pct:g} % above steady for >= {report.min_seconds:g} s"
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
            + (
                f", {report.p99_source} p99 {_num(report.baseline_p99_us)} us"
                if report.p99_source
                else ""
            )
        )
    for e in report.episodes:
        lines.append(
            f"degradation at {e.start_s:,.0f} s for {e.duration_s:,.0f} s ({e.kind}): "
            f"IOPS {_pct(e.iops_change_pct)} ({_num(e.worst_iops)}), "
            f"latency {_pct(e.latency_change_pct)} ({_num(e.worst_latency_us, unit=' us')})"
            + (
                f", {report.p99_source} p99 {_pct(e.p99_change_pct)} "
                f"({_num(e.worst_p99_us, unit=' us')})"
                if report.p99_source
                else ""
            )
        )
    lines.append(report.verdict)
    return "\n".join(lines) + "\n"
