"""Series measured outside this host (`--external-series FILE`), read and aligned to a run.

The layers openslob cannot see from here (the array's, the hypervisor's latency or IOPS) come
in as a file the user exported from that side:

- CSV with a header `time,name,value`: time as epoch seconds or ISO 8601 with a zone
  (`2026-11-24T21:00:00Z`, `...+01:00`); one sample per line;
- a Prometheus `query_range` response (JSON, resultType "matrix"): each result is a series,
  named by its `__name__` label, else by its labels joined (`instance=a,job=b`).

The unit is the name's suffix: `_us` (microseconds), `_ms` (milliseconds, stored as
microseconds so that it compares with the host's layers), `_per_s` (a rate). A name with
none of them is an error. A latency name holding `p50`, `p90`, `p99` or `p999` (also
`p99_9`) is that percentile; any other latency is taken as a mean (what arrays mostly report).
A name with `write` in it is a write-side layer; any other a read-side one.

Alignment to the run's sampling intervals (run.json intervals, absolute time from
window.barrier + elapsed_s): an interval's value is the mean of the samples inside it; an
interval with none gets the nearest sample, and its age (seconds from the interval's middle)
is stored beside it; nearer than MAX_AGE_INTERVALS intervals or it stays null.

Errors are one line naming the file, the line (CSV) or the series (JSON) and what is wrong
(ExternalSeriesError, a ConfigError: exit 2 before anything in a database changes).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from openslob.analysis.waterfall import ORDER_WARNING, order_warnings, waterfall
from openslob.model.errors import ConfigError

UNITS = (("_per_s", "per_s"), ("_us", "us"), ("_ms", "ms"))
PERCENTILES = (
    ("p999", "p99.9"),
    ("p99_9", "p99.9"),
    ("p99", "p99"),
    ("p90", "p90"),
    ("p50", "p50"),
)
MEAN = "mean"
# An interval with no sample of its own takes the nearest one up to this far (in intervals).
MAX_AGE_INTERVALS = 2.0
LAYER_PREFIX = "measured outside this host: "


class ExternalSeriesError(ConfigError):
    """The external series file cannot be read (one line: file, line, what is wrong)."""


@dataclass(frozen=True)
class Sample:
    epoch_s: float
    value: float


@dataclass(frozen=True)
class ExternalSeries:
    """One imported series: its samples in time order, its unit from its name."""

    name: str
    unit: str  # "us" (latencies, _ms converted) or "per_s"
    stat: str  # "mean", "p50", "p90", "p99", "p99.9"; "rate" for a _per_s series
    side: str  # "read" or "write"
    samples: tuple[Sample, ...]

    @property
    def layer(self) -> str:
        return LAYER_PREFIX + self.name

    @property
    def is_latency(self) -> bool:
        return self.unit == "us"


@dataclass(frozen=True)
class IntervalSpan:
    """A sampling interval of the run: its number and its absolute start and end."""

    number: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class AlignedValue:
    value: float | None
    samples: int  # samples inside the interval (0: the nearest one, or none)
    age_s: float | None  # the nearest sample's distance from the interval's middle


def _fail(path: Path, where: str, what: str) -> ExternalSeriesError:
    return ExternalSeriesError(f"--external-series {path}: {where}: {what}")


def describe(name: str) -> tuple[str, str, str, float] | None:
    """(unit, stat, side, factor to the stored unit) from a series name; None when its
    suffix is none of UNITS."""
    lower = name.lower()
    unit = next((u for suffix, u in UNITS if lower.endswith(suffix)), None)
    if unit is None:
        return None
    side = "write" if "write" in lower else "read"
    if unit == "per_s":
        return "per_s", "rate", side, 1.0
    words = re.split(r"[^a-z0-9]+", lower)
    joined = "_".join(words)
    stat = next((s for key, s in PERCENTILES if re.search(rf"(^|_){key}(_|$)", joined)), MEAN)
    return "us", stat, side, 1000.0 if unit == "ms" else 1.0


def parse_time(text: str) -> float:
    """Epoch seconds, or ISO 8601 with a zone; ValueError otherwise."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if stamp.tzinfo is None:
            raise ValueError(f"time {text!r} has no zone (add Z or +hh:mm)") from None
        return stamp.timestamp()
    if not math.isfinite(value):
        raise ValueError(f"time {text!r} is not a number of seconds")
    return value


def _number(text: Any) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"value {text!r} is not a finite number >= 0")
    return value


def _series(path: Path, where: str, name: str, samples: list[Sample]) -> ExternalSeries:
    described = describe(name)
    if described is None:
        raise _fail(path, where, f"name {name!r} must end in _us, _ms or _per_s (its unit)")
    unit, stat, side, factor = described
    ordered = sorted(
        (Sample(s.epoch_s, s.value * factor) for s in samples), key=lambda s: s.epoch_s
    )
    return ExternalSeries(name, unit, stat, side, tuple(ordered))


def _from_csv(path: Path, text: str) -> list[ExternalSeries]:
    rows = csv.reader(text.splitlines())
    header = [c.strip().lower() for c in next(rows, [])]
    if header != ["time", "name", "value"]:
        raise _fail(path, "line 1", f"header must be time,name,value (found {','.join(header)})")
    by_name: dict[str, list[Sample]] = {}
    first_line: dict[str, int] = {}
    for number, row in enumerate(rows, start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 3:
            raise _fail(path, f"line {number}", f"{len(row)} fields, expected time,name,value")
        name = row[1].strip()
        if not name:
            raise _fail(path, f"line {number}", "empty name")
        try:
            sample = Sample(parse_time(row[0]), _number(row[2]))
        except ValueError as exc:
            raise _fail(path, f"line {number}", str(exc)) from None
        by_name.setdefault(name, []).append(sample)
        first_line.setdefault(name, number)
    return [_series(path, f"line {first_line[n]}", n, s) for n, s in by_name.items()]


def _metric_name(metric: dict[str, Any]) -> str:
    if metric.get("__name__"):
        return str(metric["__name__"])
    return ",".join(f"{k}={v}" for k, v in sorted(metric.items()))


def _from_prometheus(path: Path, doc: Any) -> list[ExternalSeries]:
    data = doc.get("data") if isinstance(doc, dict) else None
    if doc.get("status") != "success" or not isinstance(data, dict):
        raise _fail(path, "JSON", 'not a Prometheus query_range response ("status": "success")')
    if data.get("resultType") != "matrix":
        raise _fail(path, "JSON", f"resultType {data.get('resultType')!r}, expected 'matrix'")
    found = []
    for n, result in enumerate(data.get("result") or []):
        name = _metric_name(result.get("metric") or {})
        where = f"result {n} ({name})"
        try:
            samples = [Sample(float(t), _number(v)) for t, v in result.get("values") or []]
        except (TypeError, ValueError) as exc:
            raise _fail(path, where, f'values must be [time, "number"] pairs: {exc}') from None
        found.append(_series(path, where, name, samples))
    return found


def read_series(path: Path) -> list[ExternalSeries]:
    """Every series of the file (CSV or Prometheus JSON, told apart by its first character)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(path, "file", getattr(exc, "strerror", None) or str(exc)) from None
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _fail(path, f"line {exc.lineno}", f"invalid JSON: {exc.msg}") from None
        found = _from_prometheus(path, doc)
    else:
        found = _from_csv(path, text)
    if not any(s.samples for s in found):
        raise _fail(path, "file", "no samples")
    return found


def align(series: ExternalSeries, spans: Sequence[IntervalSpan]) -> list[AlignedValue]:
    """One value per interval: the mean of the samples inside it, else the nearest sample
    within MAX_AGE_INTERVALS of the interval's length (its age stated), else null."""
    out = []
    for span in spans:
        inside = [s.value for s in series.samples if span.start_s <= s.epoch_s < span.end_s]
        if inside:
            out.append(AlignedValue(sum(inside) / len(inside), len(inside), None))
            continue
        middle = (span.start_s + span.end_s) / 2
        nearest = min(series.samples, key=lambda s: abs(s.epoch_s - middle), default=None)
        limit = MAX_AGE_INTERVALS * (span.end_s - span.start_s)
        if nearest is None or abs(nearest.epoch_s - middle) > limit:
            out.append(AlignedValue(None, 0, None))
        else:
            out.append(AlignedValue(nearest.value, 0, round(abs(nearest.epoch_s - middle), 3)))
    return out


def interval_spans(run: dict[str, Any]) -> list[IntervalSpan]:
    """The run's window intervals in absolute time (run.json window.barrier + each
    interval's elapsed_s at its end and its seconds); none when run.json lacks them."""
    barrier = (run.get("window") or {}).get("barrier")
    table = run.get("intervals")
    if not barrier or not isinstance(table, dict):
        return []
    start_at = datetime.fromisoformat(str(barrier).replace("Z", "+00:00")).timestamp()
    columns = table.get("columns") or []
    spans = []
    for row in table.get("rows") or []:
        cells = dict(zip(columns, row, strict=False))
        if None in (cells.get("elapsed_s"), cells.get("seconds"), cells.get("interval")):
            continue
        end = start_at + float(cells["elapsed_s"])
        spans.append(IntervalSpan(int(cells["interval"]), end - float(cells["seconds"]), end))
    return spans


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def series_entry(series: ExternalSeries, spans: Sequence[IntervalSpan], source: str) -> dict:
    """run.json external_series[]: one imported series aligned to the run's intervals."""
    aligned = align(series, spans)
    values = [a.value for a in aligned if a.value is not None]
    return {
        "name": series.name,
        "layer": series.layer,
        "source": source,
        "unit": series.unit,
        "stat": series.stat,
        "side": series.side,
        "intervals": [s.number for s in spans],
        "values": [_rounded(a.value) for a in aligned],
        "samples": [a.samples for a in aligned],
        "nearest_age_s": [a.age_s for a in aligned],
        "window": {
            "mean": _rounded(sum(values) / len(values)) if values else None,
            "max": _rounded(max(values)) if values else None,
            "intervals_with_value": len(values),
        },
    }


def attach(run: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """Read `path`, align its series to `run`'s intervals and store them in the run:
    run.json external_series, and a column per series in run.json intervals
    (`external:<name>`). Returns the entries; a note says where they came from and a warning
    names a series with no value in any interval (its clock or time zone is off?)."""
    spans = interval_spans(run)
    entries = [series_entry(s, spans, path.name) for s in read_series(path)]
    run["external_series"] = entries
    table = run.get("intervals")
    if isinstance(table, dict) and spans:
        by_number = {s.number: k for k, s in enumerate(spans)}
        columns = table["columns"]
        k_interval = columns.index("interval")
        for entry in entries:
            columns.append(f"external:{entry['name']}")
            for row in table["rows"]:
                k = by_number.get(row[k_interval])
                row.append(None if k is None else entry["values"][k])
    run.setdefault("notes", []).append(
        f"{len(entries)} series measured outside this host, from {path.name}: each interval's "
        "value is the mean of its samples, else the nearest sample (its age in run.json "
        "external_series)"
    )
    for entry in entries:
        if entry["window"]["intervals_with_value"] == 0:
            run.setdefault("warnings", []).append(
                f"external series {entry['name']} has no sample near the run's window "
                "(its times, or their zone, do not overlap the run): it is null"
            )
    return entries


def add_layers(run: dict[str, Any], external_series: str) -> None:
    """The final run.json's imported series (EXTERNAL_SERIES, when given) and the warnings
    of latency layers in an order that cannot be true (analysis/waterfall.py). The file was
    read before the run (config/resolve.py); should it have gone bad since, the run keeps
    its measurements and a warning says so."""
    if external_series:
        try:
            attach(run, Path(external_series))
        except ExternalSeriesError as exc:
            run.setdefault("warnings", []).append(f"{exc}: not imported")
    run.setdefault("warnings", []).extend(order_warnings(waterfall(run)))


def _imported(text: str) -> bool:
    """A warning or note that add_layers wrote (replaced when series are attached again)."""
    return text.startswith((ORDER_WARNING, "external series ", "--external-series ")) or (
        "series measured outside this host, from " in text
    )


def reattach(run: dict[str, Any], path: Path) -> None:
    """`slob report RUN --external-series FILE`: the series of FILE replace any imported
    before (their columns, notes and warnings), and the order warnings are made again."""
    table = run.get("intervals")
    if isinstance(table, dict):
        keep = [k for k, c in enumerate(table["columns"]) if not c.startswith("external:")]
        table["columns"] = [table["columns"][k] for k in keep]
        table["rows"] = [[row[k] for k in keep] for row in table["rows"]]
    run.pop("external_series", None)
    run["warnings"] = [w for w in run.get("warnings") or [] if not _imported(w)]
    run["notes"] = [n for n in run.get("notes") or [] if not _imported(n)]
    attach(run, path)  # ExternalSeriesError: nothing is written
    run["warnings"] += order_warnings(waterfall(run))
