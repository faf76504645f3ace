"""Parse Oracle AWR (awrrpt, 10g-19c, single instance) and Statspack TEXT reports.

Tables are read by column position: the dashed rule under each table header gives the column
spans, and every data line is sliced on them (AWR leaves cells blank, e.g. %Time-outs in 19c,
so splitting on whitespace would shift columns). Figures the report does not print stay None;
nothing is ever filled in with 0. A section that starts but does not end (file cut short), or a
header that cannot be read, raises OracleReportError naming the file and the section.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from openslob.errors import OpenslobError


class OracleReportError(OpenslobError):
    """An Oracle report file that cannot be read (malformed or truncated)."""


@dataclass
class WaitEvent:
    event: str
    waits: float | None
    time_s: float | None  # total wait time, seconds
    avg_wait_ms: float | None  # the printed (rounded) average, converted to ms
    pct_time: float | None = None  # % DB time (or % bg time / % total call time)
    wait_class: str | None = None

    @property
    def latency_us(self) -> float | None:
        """Mean wait in µs from total time / waits: never the rounded Avg wait column."""
        if not self.waits or not self.time_s:
            # no waits, or a total printed as 0 s (rounded away): the mean is unknown, not 0
            return None
        return self.time_s / self.waits * 1e6


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
    # (model.name_params) by whoever read the file.
    update_pct: int | None = None
    sessions: int | None = None

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


# --- numbers --------------------------------------------------------------------------------

_SUFFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_NUM = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
_DURATION = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+))\s*(ns|us|ms|s|m|h)$")
_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def parse_number(text: str | None) -> float | None:
    """'1,234' 1234.0, '.7', '2.5M' 2.5e6, '1,234K', '1.2E+05'; '', '####', 'N/A' -> None.

    Suffixes are decimal, as AWR states ("K is 1000, M is 1000000, G is 1000000000").
    """
    if text is None:
        return None
    s = text.strip().replace(",", "")
    if not s or set(s) == {"#"} or s.upper() in ("N/A", "NA", "-"):
        return None
    mult = 1.0
    if s[-1].upper() in _SUFFIX and len(s) > 1:
        mult = _SUFFIX[s[-1].upper()]
        s = s[:-1]
    if not _NUM.match(s):
        return None
    return float(s) * mult


def parse_duration_ms(text: str | None) -> float | None:
    """An 'Avg wait' cell in ms: a bare number is ms (10g-12.1); 19c prints '3.23ms', '52.86 s'."""
    if text is None:
        return None
    s = text.strip().replace(",", "")
    m = _DURATION.match(s)
    if m:
        return float(m.group(1)) * _UNIT_MS[m.group(2)]
    return parse_number(s)


# --- text helpers ---------------------------------------------------------------------------

_RULE = re.compile(r"^[\s~-]*-{2,}[\s~-]*$")  # a column rule: dash groups (statspack: ~ too)
_END = re.compile(r"^\s+-{20,}\s*$")  # the end-of-section rule, one indented dash run
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
_RAC = re.compile(r"^WORKLOAD REPOSITORY (?:REPORT \(RAC\)|GLOBAL REPORT)|COMPARE PERIOD", re.I)


def _spans(rule: str) -> list[tuple[int, int]]:
    """Column spans from a rule line; each runs to the next column's start (gaps included)."""
    starts = [m.start() for m in re.finditer(r"[-~]+", rule)]
    return [(s, starts[i + 1] if i + 1 < len(starts) else 10_000) for i, s in enumerate(starts)]


def _cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    return [line[a:b].strip() for a, b in spans]


def _is_title(line: str, title: str) -> bool:
    """A section title at column 0, followed by nothing or by 2+ spaces / 'DB/Inst:'."""
    if not line.startswith(title):
        return False
    rest = line[len(title) :]
    return not rest.strip() or rest.startswith("  ") or rest.lstrip().startswith("DB/Inst")


class _Doc:
    def __init__(self, text: str, name: str) -> None:
        text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
        lines = [ln.rstrip() for ln in text.split("\n")]
        while lines and lines[0].startswith("#"):  # our fixtures' provenance header
            lines.pop(0)
        # SQL*Plus prints the column heading OUTPUT on every page when the report is spooled
        # from SELECT * FROM TABLE(dbms_workload_repository.awr_report_text(...)).
        self.lines = [ln for ln in lines if ln.strip() != "OUTPUT"]
        self.name = name

    def error(self, section: str, what: str) -> OracleReportError:
        return OracleReportError(f"{self.name}: section '{section}': {what}")

    def find(self, *titles: str, start: int = 0) -> int | None:
        for i in range(start, len(self.lines)):
            if any(_is_title(self.lines[i], t) for t in titles):
                return i
        return None

    def table(self, title_idx: int, section: str, *, ended: bool) -> list[list[str]]:
        """Rows of the table under a title, sliced on its column rule.

        ended=True: the table must close with the indented end rule (AWR/Statspack print one
        under every section); reaching the end of the file first means the file was cut.
        ended=False (Top N events): the table ends at the first blank or non-row line.
        """
        lines = self.lines
        i, spans = title_idx + 1, None
        while i < len(lines) and i < title_idx + 40:
            if _RULE.match(lines[i]) and not _END.match(lines[i]) and len(_spans(lines[i])) > 1:
                spans = _spans(lines[i])
                break
            if _END.match(lines[i]):
                return []  # "No data exists for this section of the report."
            i += 1
        if spans is None:
            raise self.error(section, "no column header (file cut short or not a report)")
        rows: list[list[str]] = []
        for line in lines[i + 1 :]:
            if _END.match(line):
                return rows
            if not ended:
                if not line.strip():
                    if rows:
                        return rows
                    continue
                cells = _cells(line, spans)
                if not any(parse_duration_ms(c) is not None for c in cells[1:]):
                    return rows
                rows.append(cells)
                continue
            if not line.strip() or line.startswith("->") or _RULE.match(line):
                continue
            if _is_title(line, section):  # page break repeats the title and header
                continue
            rows.append(_cells(line, spans))
        if ended:
            raise self.error(section, "ends before its closing rule (file truncated)")
        return rows


# --- sections -------------------------------------------------------------------------------


def _kv_table(doc: _Doc, title_idx: int) -> dict[str, str]:
    """A one-row table (DB Name / Host Name): normalised header text -> cell."""
    lines = doc.lines
    rule = title_idx + 1
    if rule >= len(lines) or not _RULE.match(lines[rule]) or rule + 1 >= len(lines):
        raise doc.error("header", f"cannot read the table under '{lines[title_idx].strip()}'")
    spans = _spans(lines[rule])
    heads = [" ".join(h.split()).lower() for h in _cells(lines[title_idx], spans)]
    vals = _cells(lines[rule + 1], spans)
    return {h: v for h, v in zip(heads, vals, strict=False) if h}


def _snap_time(text: str) -> str | None:
    for fmt in ("%d-%b-%y %H:%M:%S", "%d-%b-%Y %H:%M:%S"):
        try:
            return datetime.strptime(text, fmt).isoformat()
        except ValueError:
            pass
    return None


def _header(doc: _Doc, kind: str) -> dict[str, Any]:
    keys = (
        "db_name db_id instance inst_num startup_time release rac cdb host platform cpus "
        "cores sockets memory_gb begin_snap end_snap begin_time end_time begin_sessions "
        "end_sessions elapsed_min db_time_min"
    )
    h: dict[str, Any] = dict.fromkeys(keys.split())
    lines = doc.lines
    for i, line in enumerate(lines[:80]):
        low = line.lower()
        if low.startswith(("db name", "database ")) and "db id" in low:
            t = _kv_table(doc, i)
            h["db_name"] = t.get("db name") or t.get("database") or None
            h["db_id"] = t.get("db id") or None
            h["release"] = t.get("release") or None
            h["rac"] = t.get("rac") or None
            h["cdb"] = t.get("cdb") or None
            if t.get("instance"):
                h["instance"] = t["instance"]
            num = parse_number(t.get("inst num", ""))
            h["inst_num"] = int(num) if num is not None else h["inst_num"]
            h["startup_time"] = t.get("startup time") or h["startup_time"]
        elif low.startswith("instance ") and "inst num" in low:  # 12.2+ separate table
            t = _kv_table(doc, i)
            h["instance"] = t.get("instance") or None
            num = parse_number(t.get("inst num", ""))
            h["inst_num"] = int(num) if num is not None else None
            h["startup_time"] = t.get("startup time") or None
        elif low.startswith("host") and "platform" in low:
            t = _kv_table(doc, i)
            host = [v for k, v in t.items() if ("host" in k or k == "name") and v]
            h["host"] = host[0] if host else None
            h["platform"] = t.get("platform") or None
            for key in ("cpus", "cores", "sockets"):
                num = parse_number(t.get(key, ""))
                h[key] = int(num) if num is not None else None
            mem = [v for k, v in t.items() if k.startswith("memory")]
            h["memory_gb"] = parse_number(mem[0]) if mem else None
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
    if h["release"] is None and h["db_name"] is None and h["db_id"] is None:
        raise doc.error("header", "no 'DB Name' / 'Database' table")
    if h["begin_snap"] is None or h["end_snap"] is None or h["elapsed_min"] is None:
        raise doc.error("header", "no Begin Snap / End Snap / Elapsed lines")
    return h


def _load_profile(doc: _Doc) -> dict[str, dict[str, float | None]] | None:
    idx = doc.find("Load Profile")
    if idx is None:
        return None
    cols = ("per_second", "per_transaction", "per_exec", "per_call")
    out: dict[str, dict[str, float | None]] = {}
    for line in doc.lines[idx + 1 : idx + 80]:
        if line.startswith("~") or _RULE.match(line) or not line.strip():
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
        raise doc.error("Load Profile", "no rows")
    return out


def _waits(rows: list[list[str]], layout: str) -> list[WaitEvent]:
    """layout 'events': Event, Waits, %Time-outs, Total Wait Time (s), Avg wait, Waits/txn, %time
    layout 'top': Event, Waits, Time (s), Avg wait, % DB time, Wait Class."""
    out = []
    for cells in rows:
        cells = cells + [""] * 7
        if not cells[0]:
            continue
        if layout == "top":
            waits, time_s, avg, pct, klass = cells[1], cells[2], cells[3], cells[4], cells[5]
        else:
            waits, time_s, avg, pct, klass = cells[1], cells[3], cells[4], cells[6], ""
        ev = WaitEvent(
            event=cells[0],
            waits=parse_number(waits),
            time_s=parse_number(time_s),
            avg_wait_ms=parse_duration_ms(avg),
            pct_time=parse_number(pct.split()[0]) if pct.split() else None,
            wait_class=klass or None,
        )
        if ev.waits is None and ev.time_s is None:
            continue
        out.append(ev)
    return out


def _wait_section(doc: _Doc, titles: tuple[str, ...]) -> list[WaitEvent] | None:
    idx = doc.find(*titles)
    if idx is None:
        return None
    title = next(t for t in titles if _is_title(doc.lines[idx], t))
    return _waits(doc.table(idx, title, ended=True), "events")


_TOP = re.compile(r"^Top (?:\d+ )?(?:Timed (?:Foreground )?Events|Foreground Events)")


def _top_events(doc: _Doc) -> list[WaitEvent] | None:
    for i, line in enumerate(doc.lines):
        if _TOP.match(line):
            return _waits(doc.table(i, line.strip(), ended=False), "top")
    return None


def _stat_table(doc: _Doc, titles: tuple[str, ...], cols: tuple[str, ...]) -> dict | None:
    idx = doc.find(*titles)
    if idx is None:
        return None
    title = next(t for t in titles if _is_title(doc.lines[idx], t))
    out: dict[str, dict[str, float | None]] = {}
    for cells in doc.table(idx, title, ended=True):
        if cells and cells[0]:
            values = [parse_number(c) for c in cells[1 : 1 + len(cols)]]
            if any(v is not None for v in values):
                out[cells[0]] = dict(zip(cols, values, strict=False))
    return out


def looks_like_oracle_report(text: str) -> bool:
    """True when the text is an AWR or Statspack text report (title near the top)."""
    head = text[:20_000].replace("\r", "")
    return any(
        rx.match(line.strip()) or _RAC.match(line.strip())
        for line in head.split("\n")[:200]
        for rx in _TITLES.values()
    )


def parse_report(text: str, name: str = "") -> OracleReport:
    doc = _Doc(text, name or "<report>")
    kind = None
    for line in doc.lines[:200]:
        if _RAC.match(line.strip()):
            raise doc.error("header", "RAC/global or compare-period AWR reports are not supported")
        for k, rx in _TITLES.items():
            if rx.match(line.strip()):
                kind = k
                break
        if kind:
            break
    if kind is None:
        raise doc.error("header", "not an AWR or Statspack text report")
    report = OracleReport(name=name, kind=kind, header=_header(doc, kind))
    report.load_profile = _load_profile(doc)
    report.top_events = _top_events(doc)
    report.foreground_waits = _wait_section(doc, ("Foreground Wait Events", "Wait Events"))
    report.background_waits = _wait_section(doc, ("Background Wait Events",))
    stats = _stat_table(doc, ("Instance Activity Stats",), ("total", "per_second", "per_trans"))
    report.instance_activity = stats
    report.time_model = _stat_table(
        doc, ("Time Model Statistics", "Time Model System Stats"), ("time_s", "pct_db_time")
    )
    os_rows = _stat_table(doc, ("Operating System Statistics", "OS Statistics"), ("value",))
    report.os_stats = None if os_rows is None else {k: v["value"] for k, v in os_rows.items()}
    return report


def parse_files(paths: list[Path] | list[str]) -> tuple[list[OracleReport], list[str]]:
    """Parse every file; a bad one yields an error line and the others are still read."""
    reports, errors = [], []
    for path in map(Path, paths):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            reports.append(parse_report(text, str(path)))
        except OracleReportError as exc:
            errors.append(str(exc))
        except OSError as exc:
            errors.append(f"{path}: cannot read ({exc.strerror or exc})")
    return reports, errors
