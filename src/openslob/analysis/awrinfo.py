"""Analyses over many runs: the awr_info table and flashdba's event view.

Reads only what collect.find_runs returns (run.json dicts); no database. Sustained
throughput over a run's time series is analysis/sustained.py.

- analyze_rows / render_table / render_csv / render_json: one line per run, the columns SLOB
  users know from awr_info (COLUMNS). A figure that was not measured is None: "n/a" in the
  table, empty in CSV, null in JSON, never 0.
- event_rows / render_events: flashdba's per-event view (waits, time, latency, IOPS).

Every run.json key is read with .get: a run written by an older tool that lacks a figure shows
n/a for it; a newer schema_version is already refused by results.load_run.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from openslob.analysis.figures import value
from openslob.model.metrics import DEFAULT_TERMS, METRICS
from openslob.results.collect import RunRef

NA = "n/a"


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
    _from_table("commits_per_s", "commits_per_s"),
    _from_table("log_syncs_per_s", "wal_syncs_per_s"),
    _derived("commits_per_sync"),
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


# The table fits TABLE_WIDTH columns unless asked --wide: columns are kept in this order of
# priority while the table still fits (then shown in COLUMNS order); a column not named here
# (a new one) comes after them. CSV and JSON always have every column.
TABLE_WIDTH = 100
PRIORITY = (
    "run",
    "sweep",
    "repeat",
    "n",
    "sessions",
    "update_pct",
    "executes_per_s",
    "preads_per_s",
    "op_p99_us",
    "db_read_us",
    "pwrites_per_s",
    "read_mb_per_s",
    "redo_mb_per_s",
    "spread",
    "status",
    "top_wait",
)
GAP = 2  # spaces between columns


def _widths(rows: list[dict[str, Any]], columns: list[Column]) -> list[int]:
    return [max([len(c.header), *(len(c.cell(r.get(c.key))) for r in rows)]) for c in columns]


def fit_columns(
    rows: list[dict[str, Any]],
    columns: list[Column],
    width: int = TABLE_WIDTH,
    keep: tuple[str, ...] = (),
) -> list[Column]:
    """The columns that fit `width` (see PRIORITY), in their own order; the first and those
    in `keep` always."""
    rank = {key: k for k, key in enumerate(PRIORITY)}
    if len({str(r.get("sweep")) for r in rows}) == 1:  # one sweep (or none): no column
        columns = [c for c in columns if c.key != "sweep"]
    widths = dict(zip((c.key for c in columns), _widths(rows, columns), strict=True))
    ordered = sorted(columns, key=lambda c: rank.get(c.key, len(rank)))
    kept = {c.key for c in columns if c.key in keep}
    used = sum(GAP + widths[key] for key in kept) - GAP
    for column in ordered:
        if column.key in keep:
            continue
        if kept and used + GAP + widths[column.key] > width:
            continue
        kept.add(column.key)
        used += GAP + widths[column.key]
    return [c for c in columns if c.key in kept]


def left_out_note(shown: list[Column], columns: list[Column]) -> str:
    """The line under a narrowed table naming what it left out ("" when nothing; SWEEP when
    every row is of one sweep is not news)."""
    hidden = [c.header for c in columns if c not in shown and c.key != "sweep"]
    if not hidden:
        return ""
    text = f"({len(hidden)} more columns with --wide, --csv or --json: {', '.join(hidden)})"
    return "\n".join(textwrap.wrap(text, TABLE_WIDTH, subsequent_indent=" ")) + "\n"


def render_table(
    rows: list[dict[str, Any]],
    columns: list[Column] = COLUMNS,
    *,
    wide: bool = True,
    keep: tuple[str, ...] = (),
) -> str:
    """Aligned plain text: text left, numbers right with thousands separators; not `wide`:
    the columns that fit TABLE_WIDTH (and `keep`), and a line naming the others."""
    shown = columns if wide else fit_columns(rows, columns, keep=keep)
    note = "" if wide else left_out_note(shown, columns)
    columns = shown
    cells = [[c.cell(row.get(c.key)) for c in columns] for row in rows]
    widths = _widths(rows, columns)

    def line(texts: list[str]) -> str:
        return "  ".join(
            t.ljust(w) if c.digits is None else t.rjust(w)
            for t, w, c in zip(texts, widths, columns, strict=True)
        ).rstrip()

    out = [line([c.header for c in columns]), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out) + "\n" + note


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
