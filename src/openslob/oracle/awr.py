"""Parse Oracle AWR (awrrpt, 10g-19c) and Statspack TEXT reports into OracleReport.

Contract: parse_report(text, name) reads a single-instance AWR or Statspack report, or a RAC
global report (awrgrpt, "WORKLOAD REPOSITORY REPORT (RAC)": read by rac.py). Figures the
report does not print stay None; nothing is ever filled in with 0. Only a text that is no
report, or whose header cannot be read, raises OracleReportError (naming the file). Any other
section that cannot be read fully — cut before its closing rule, or a file without
'End of Report' — leaves its figures None and is named in report.problems, so the caller can
say which file and which section on stderr while every figure the text holds is still used.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from openslob.oracle.text import (
    RULE,
    Doc,
    OracleReportError,
    cells,
    is_title,
    parse_duration_ms,
    parse_number,
    printed_error,
    spans,
)

__all__ = [
    "OracleReport",
    "OracleReportError",
    "WaitEvent",
    "looks_like_oracle_report",
]


@dataclass
class WaitEvent:
    event: str
    waits: float | None
    time_s: float | None  # total wait time, seconds
    avg_wait_ms: float | None  # the printed average, converted to ms
    pct_time: float | None = None  # % DB time (or % bg time / % total call time)
    wait_class: str | None = None
    time_err_s: float | None = None  # half a unit of the printed total's last digit
    avg_err_ms: float | None = None  # half a unit of the printed average's last digit

    @property
    def latency_us(self) -> float | None:
        """Mean wait in µs as awr_info computes it: total time / waits (never the Avg column).
        None when there were no waits or the total prints 0 s (rounded away: unknown, not 0)."""
        if not self.waits or not self.time_s:
            return None
        return self.time_s / self.waits * 1e6

    @property
    def latency_err_pct(self) -> float | None:
        """How far latency_us can be off from the rounding of the printed total, in %."""
        if not self.time_s or self.time_err_s is None:
            return None
        return self.time_err_s / self.time_s * 100

    @property
    def precise_us(self) -> float | None:
        """The more precise of total/waits and the printed average (smaller rounding error):
        12c+ print '8.64ms' or '709.52us' beside totals in whole seconds.
        A printed 0 (total '0' s, Avg '0' ms) is a bound, < half a unit, not a value: it is
        never taken; when both print 0 the figure is unknown (zero_bound_us says how small)."""
        candidates: list[tuple[float, float]] = []
        if self.waits and self.time_s and self.time_err_s is not None:
            candidates.append((self.time_err_s / self.waits * 1e6, self.time_s / self.waits * 1e6))
        if self.avg_wait_ms and self.avg_err_ms is not None and self.waits:
            candidates.append((self.avg_err_ms * 1e3, self.avg_wait_ms * 1e3))
        return min(candidates)[1] if candidates else None

    @property
    def zero_bound_us(self) -> float | None:
        """When waits were counted but the total and the average print 0: the mean is below
        half a unit of the finer of the two, in µs (446 waits, '0' s, '0' ms: < 500 µs)."""
        if not self.waits or self.time_s or self.avg_wait_ms:
            return None
        bounds = []
        if self.time_s == 0 and self.time_err_s is not None:
            bounds.append(self.time_err_s / self.waits * 1e6)
        if self.avg_wait_ms == 0 and self.avg_err_ms is not None:
            bounds.append(self.avg_err_ms * 1e3)
        return min(bounds) if bounds else None


@dataclass
class OracleReport:
    name: str
    kind: str  # "awr" | "statspack"
    header: dict[str, Any] = field(default_factory=dict)
    load_profile: dict[str, dict[str, float | None]] | None = None
    instance_activity: dict[str, dict[str, float | None]] | None = None
    foreground_waits: list[WaitEvent] | None = None
    background_waits: list[WaitEvent] | None = None
    top_events: list[WaitEvent] | None = None
    os_stats: dict[str, float | None] | None = None
    time_model: dict[str, dict[str, float | None]] | None = None
    # The run's UPDATE_PCT and session count: not in the report; taken from its path
    # (model.name_params) by whoever read the file, with the directory it lies in.
    update_pct: int | None = None
    sessions: int | None = None
    directory: str | None = None
    # "instance": one instance's figures; "cluster": a RAC global report, or instance reports
    # of one snapshot pair added up (rac.py); then `instances` holds one report per instance.
    scope: str = "instance"
    instances: list[OracleReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # sections not read fully, named
    notes: list[str] = field(default_factory=list)  # why a figure is n/a, by column

    def load(self, *names: str, column: str = "per_second") -> float | None:
        """First Load Profile figure found under any of the names (versions rename rows)."""
        for name in names:
            row = (self.load_profile or {}).get(name)
            if row is not None and row.get(column) is not None:
                return row[column]
        return None

    def stat(self, name: str, column: str = "total") -> float | None:
        row = (self.instance_activity or {}).get(name)
        return None if row is None else row.get(column)

    def rate(self, stat: str, *load_names: str) -> float | None:
        """Per-second figure of an Instance Activity statistic; else the Load Profile row
        (12c+ Load Profile rows such as 'Read IO requests' are the same statistic)."""
        value = self.stat(stat, "per_second")
        return value if value is not None else self.load(*load_names)

    def wait(self, event: str, background: bool = False) -> WaitEvent | None:
        """A wait event by name; AWR truncates names to the column width, so match prefixes."""
        events = self.background_waits if background else self.foreground_waits
        if events is None and not background:
            events = self.top_events
        for ev in events or []:
            if ev.event == event or (len(ev.event) >= 20 and event.startswith(ev.event)):
                return ev
        return None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- header ---------------------------------------------------------------------------------

_SNAP = re.compile(
    r"^\s*(Begin|End) Snap:\s+(\d+)\s+(\d{1,2}-[A-Za-z]{3}-\d{2,4} \d{1,2}:\d{2}:\d{2})"
    r"(?:\s+([\d,]+))?"
)
_MINS = re.compile(r"^\s*(Elapsed|DB [Tt]ime):\s+([\d,.]+)\s*\(mins\)")
_LP_ROW = re.compile(r"^\s*([A-Za-z%/][^:]*?):\s+(\S.*)$")
_TITLES = {
    "awr": re.compile(r"^WORKLOAD REPOSITORY (?:PDB )?report", re.I),
    "statspack": re.compile(r"^STATSPACK (?:Statistics )?report for", re.I),
}
_GLOBAL = re.compile(r"^WORKLOAD REPOSITORY (?:REPORT \(RAC\)|GLOBAL REPORT)", re.I)
_COMPARE = re.compile(r"COMPARE PERIOD", re.I)
_COMPARE_TITLE = re.compile(r"^WORKLOAD REPOSITORY COMPARE PERIOD REPORT", re.I)


def _kv_table(doc: Doc, title_idx: int) -> dict[str, str] | None:
    """A one-row table (DB Name / Host Name): normalised header text -> cell; None when no
    rule follows (another layout). SQL*Plus wraps a row longer than its line size: each part
    of the headings is printed with its own rule under it, then the values' parts, one line
    each (Statspack 12.1's host table: 'Host Name Platform CPUs' over its rule, 'Cores Sockets
    Memory (G)' over its rule, then two value lines); line j of each goes together."""
    lines = doc.lines
    pairs: list[tuple[str, str]] = []  # (heading line, its rule)
    i = title_idx
    while len(pairs) < 3 and i + 1 < len(lines) and RULE.match(lines[i + 1]):
        if RULE.match(lines[i]):
            break
        pairs.append((lines[i], lines[i + 1]))
        i += 2
    values = lines[i : i + len(pairs)]
    if not pairs or len(pairs) == 3 or len(values) < len(pairs):
        return None
    out: dict[str, str] = {}
    for (heading, rule), value in zip(pairs, values, strict=True):
        spans_ = spans(rule)
        heads = [" ".join(h.split()).lower() for h in cells(heading, spans_)]
        out.update({h: v for h, v in zip(heads, cells(value, spans_), strict=False) if h})
    return out


def _snap_time(text: str) -> str | None:
    for fmt in ("%d-%b-%y %H:%M:%S", "%d-%b-%Y %H:%M:%S"):
        try:
            return datetime.strptime(text, fmt).isoformat()
        except ValueError:
            pass
    return None


def _int(text: str | None) -> int | None:
    num = parse_number(text or "")
    return None if num is None else int(num)


def _db_table(h: dict[str, Any], t: dict[str, str]) -> None:
    h["db_name"] = t.get("db name") or t.get("database") or None
    h["db_id"] = t.get("db id") or None
    h["release"] = t.get("release") or None
    h["rac"] = t.get("rac") or None
    h["cdb"] = t.get("cdb") or None
    if t.get("instance"):
        h["instance"] = t["instance"]
    h["inst_num"] = _int(t.get("inst num")) or h["inst_num"]
    h["startup_time"] = t.get("startup time") or h["startup_time"]


def _host_table(h: dict[str, Any], t: dict[str, str]) -> None:
    """Host Name / Platform / CPUs / Cores / Sockets / Memory."""
    host = [v for k, v in t.items() if ("host" in k or k == "name") and v]
    if host:
        h["host"] = host[0]
    h["platform"] = t.get("platform") or h["platform"]
    for key in ("cpus", "cores", "sockets"):
        if key in t:
            h[key] = _int(t[key])
    mem = [v for k, v in t.items() if k.startswith("memory")]
    if mem:
        h["memory_gb"] = parse_number(mem[0])


def _header(doc: Doc) -> dict[str, Any]:
    keys = (
        "db_name db_id instance inst_num startup_time release rac cdb host platform cpus "
        "cores sockets memory_gb begin_snap end_snap begin_time end_time begin_sessions "
        "end_sessions elapsed_min db_time_min"
    )
    h: dict[str, Any] = dict.fromkeys(keys.split())
    for i, line in enumerate(doc.lines[:80]):
        low = line.lower()
        table = None
        if low.startswith(("db name", "database ")) and "db id" in low:
            table = _kv_table(doc, i)
            if table is not None:
                _db_table(h, table)
        elif low.startswith("instance ") and "inst num" in low:  # 12.2+ separate table
            table = _kv_table(doc, i)
            if table is not None:
                h["instance"] = table.get("instance") or None
                h["inst_num"] = _int(table.get("inst num"))
                h["startup_time"] = table.get("startup time") or None
        elif low.startswith("host") and "platform" in low:
            table = _kv_table(doc, i)
            if table is None:
                doc.note("header", f"host table '{line.strip()}' not in a known layout")
            else:
                _host_table(h, table)
        _snap_line(h, line)
    if h["release"] is None and h["db_name"] is None and h["db_id"] is None:
        raise doc.error("header", "no 'DB Name' / 'Database' table")
    if h["begin_snap"] is None or h["end_snap"] is None or h["elapsed_min"] is None:
        raise doc.error("header", "no Begin Snap / End Snap / Elapsed lines")
    return h


def _snap_line(h: dict[str, Any], line: str) -> None:
    m = _SNAP.match(line)
    if m:
        which = m.group(1).lower()
        h[f"{which}_snap"] = int(m.group(2))
        h[f"{which}_time"] = _snap_time(m.group(3)) or m.group(3)
        h[f"{which}_sessions"] = int(m.group(4).replace(",", "")) if m.group(4) else None
    m = _MINS.match(line)
    if m:
        key = "elapsed_min" if m.group(1) == "Elapsed" else "db_time_min"
        h[key] = parse_number(m.group(2))


# --- sections -------------------------------------------------------------------------------


def _load_profile(doc: Doc) -> dict[str, dict[str, float | None]] | None:
    idx = doc.find("Load Profile")
    if idx is None:
        return None
    cols = ("per_second", "per_transaction", "per_exec", "per_call")
    out: dict[str, dict[str, float | None]] = {}
    for line in doc.lines[idx + 1 : idx + 80]:
        if line.startswith("~") or RULE.match(line) or not line.strip():
            continue
        m = _LP_ROW.match(line)
        if m is None or (line[0] != " " and not line.startswith(m.group(1))):
            break
        values = [parse_number(v) for v in m.group(2).split()]
        if not values or all(v is None for v in values):
            if out:
                break
            continue
        if not line[0].isspace() and out and ":" not in line:
            break
        out[m.group(1).strip()] = dict(zip(cols, values + [None] * 4, strict=False))
    if not out:
        doc.note("Load Profile", "no rows")
        return None
    return out


def wait_event(
    name: str, waits: str, time_s: str, avg: str, pct: str, klass: str = ""
) -> WaitEvent | None:
    """One wait row from its printed cells; None when it has neither waits nor time."""
    ev = WaitEvent(
        event=name,
        waits=parse_number(waits),
        time_s=parse_number(time_s),
        avg_wait_ms=parse_duration_ms(avg),
        pct_time=parse_number(pct.split()[0]) if pct.split() else None,
        wait_class=klass or None,
        time_err_s=printed_error(time_s),
        avg_err_ms=printed_error(avg, unit_ms=True),
    )
    return None if ev.waits is None and ev.time_s is None else ev


def _waits(rows: list[list[str]], layout: str) -> list[WaitEvent]:
    """layout 'events': Event, Waits, %Time-outs, Total Wait Time (s), Avg wait, Waits/txn, %time
    layout 'top': Event, Waits, Time (s), Avg wait, % DB time, Wait Class."""
    out = []
    for row in rows:
        row = row + [""] * 7
        if not row[0]:
            continue
        if layout == "top":
            ev = wait_event(row[0], row[1], row[2], row[3], row[4], row[5])
        else:
            ev = wait_event(row[0], row[1], row[3], row[4], row[6])
        if ev is not None:
            out.append(ev)
    return out


def _wait_section(doc: Doc, titles: tuple[str, ...]) -> list[WaitEvent] | None:
    idx = doc.find(*titles)
    if idx is None:
        return None
    title = next(t for t in titles if is_title(doc.lines[idx], t))
    rows = doc.table(idx, title, ended=True)
    return None if rows is None else _waits(rows, "events")


_TOP = re.compile(r"^Top (?:\d+ )?(?:Timed (?:Foreground )?Events|Foreground Events)")


def _top_events(doc: Doc) -> list[WaitEvent] | None:
    for i, line in enumerate(doc.lines):
        if _TOP.match(line):
            rows = doc.table(i, line.strip(), ended=False)
            return None if rows is None else _waits(rows, "top")
    return None


def _stat_table(doc: Doc, titles: tuple[str, ...], cols: tuple[str, ...]) -> dict | None:
    idx = doc.find(*titles)
    if idx is None:
        return None
    title = next(t for t in titles if is_title(doc.lines[idx], t))
    rows = doc.table(idx, title, ended=True)
    if rows is None:
        return None
    out: dict[str, dict[str, float | None]] = {}
    for row in rows:
        if row and row[0]:
            values = [parse_number(c) for c in row[1 : 1 + len(cols)]]
            if any(v is not None for v in values):
                out[row[0]] = dict(zip(cols, values, strict=False))
    return out


# 10g-11.2.0.3 and Statspack print one "Instance Activity Stats" table; 11.2.0.4 and 12c+
# split it into "Key Instance Activity Stats" (the dozen the Load Profile is made of) and
# "Other Instance Activity Stats" (the rest, physical read bytes among them).
ACTIVITY_TITLES = (
    "Instance Activity Stats",
    "Key Instance Activity Stats",
    "Other Instance Activity Stats",
)


def _activity(doc: Doc) -> dict[str, dict[str, float | None]] | None:
    """Every statistic of the activity tables the report prints; None when it prints none."""
    found: dict[str, dict[str, float | None]] | None = None
    for title in ACTIVITY_TITLES:
        rows = _stat_table(doc, (title,), ("total", "per_second", "per_trans"))
        if rows is not None:
            found = {**(found or {}), **rows}
    return found


def looks_like_oracle_report(text: str) -> bool:
    """True when the text is an AWR, RAC global or Statspack text report (title near the top)."""
    head = text[:20_000].replace("\r", "").replace("\f", "")
    titles = [*_TITLES.values(), _GLOBAL, _COMPARE_TITLE]  # compare: read to say it is refused
    return any(rx.match(line.strip()) for line in head.split("\n")[:200] for rx in titles)


def _kind(doc: Doc) -> str:
    for line in doc.lines[:200]:
        text = line.strip()
        if _COMPARE.search(text) and text.startswith("WORKLOAD REPOSITORY"):
            raise doc.error("header", "compare-period AWR reports (awrddrpt) are not supported")
        if _GLOBAL.match(text):
            return "global"
        for kind, rx in _TITLES.items():
            if rx.match(text):
                return kind
    raise doc.error("header", "not an AWR or Statspack text report")


def report_kind(doc: Doc) -> str:
    """ "awr", "statspack" or "global" (a RAC global report, read by rac.py)."""
    return _kind(doc)


def parse_instance(doc: Doc, kind: str, name: str = "") -> OracleReport:
    """One instance's AWR or Statspack report (read.parse_report chooses)."""
    report = OracleReport(name=name, kind=kind, header=_header(doc))
    report.load_profile = _load_profile(doc)
    report.top_events = _top_events(doc)
    report.foreground_waits = _wait_section(doc, ("Foreground Wait Events", "Wait Events"))
    report.background_waits = _wait_section(doc, ("Background Wait Events",))
    report.instance_activity = _activity(doc)
    report.time_model = _stat_table(
        doc, ("Time Model Statistics", "Time Model System Stats"), ("time_s", "pct_db_time")
    )
    os_rows = _stat_table(doc, ("Operating System Statistics", "OS Statistics"), ("value",))
    report.os_stats = None if os_rows is None else {k: v["value"] for k, v in os_rows.items()}
    check_end(doc)
    report.problems = doc.problems
    return report


def check_end(doc: Doc) -> None:
    """A file without 'End of Report' was cut: name the last section it holds."""
    if not doc.ended() and not any("truncated" in p for p in doc.problems):
        doc.note(doc.last_section(), "the file ends here without 'End of Report' (truncated)")
