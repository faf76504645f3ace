"""Oracle reports -> openslob's results model (run.json-shaped dicts) and awr_info rows.

None wherever the report does not give a figure; nothing is estimated or zero-filled.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from openslob.config.option import MAX_SESSIONS
from openslob.model.errors import ConfigError
from openslob.model.states import RunStatus
from openslob.oracle.awr import OracleReport, WaitEvent
from openslob.oracle.awrinfo import (
    CPU_EVENTS,
    MB,
    dir_label,
    div,
    expand,
    file_label,
    io_wait,
)
from openslob.oracle.idle import is_idle

# SLOB's own naming only: flashdba's harness keeps awr.<update_pct>.<sessions>.txt, and SLOB's
# runit.sh-era kits leave awr.txt.<sessions> (awr_info.sh reads the last '.' field). Other
# digits in a name are not data (awr_11204_1.txt is a release and a counter).
_NAME = re.compile(r"^awr\.(\d+)\.(\d+)(?:\.txt)?$", re.I)
_KIT_NAME = re.compile(r"^awr\.(?:txt|lst)\.(\d+)$", re.I)

# (metric key, event, background?) -- the I/O events awr_info and flashdba report
IO_EVENTS = [
    ("dfsr_latency_us", "db file sequential read", False),
    ("dpr_latency_us", "direct path read", False),
    ("dfpr_latency_us", "db file parallel read", False),
    ("dfpw_latency_us", "db file parallel write", True),
    ("lfpw_latency_us", "log file parallel write", True),
]


def name_params(
    path: str | Path, pattern: re.Pattern[str] | None = None
) -> tuple[int | None, int | None]:
    """(UPDATE_PCT, sessions) from awr.<pct>.<sessions>.txt / awr_<pct>_<sessions>.txt, or
    from the named groups `pct` and `sessions` of `pattern` searched in the whole path."""
    if pattern is None:
        m = _NAME.search(Path(path).name)
        if m:
            return _in_range(int(m.group(1)), int(m.group(2)))
        kit = _KIT_NAME.search(Path(path).name)
        return _in_range(None, int(kit.group(1))) if kit else (None, None)
    m = pattern.search(str(path))
    if m is None:
        return None, None
    groups = m.groupdict()
    pct, sessions = (int(groups[g]) if groups.get(g) else None for g in ("pct", "sessions"))
    return _in_range(pct, sessions)


def _in_range(pct: int | None, sessions: int | None) -> tuple[int | None, int | None]:
    """A name's values only where they can be what they claim: UPDATE_PCT 0-100, sessions
    1 to openslob's maximum; a name with a value out of range gives neither (it is not SLOB's
    naming, so its other number is no more data than the first)."""
    pct_ok = pct is None or 0 <= pct <= 100
    sessions_ok = sessions is None or 1 <= sessions <= MAX_SESSIONS
    return (pct, sessions) if pct_ok and sessions_ok else (None, None)


def name_pattern(text: str) -> re.Pattern[str]:
    """A user's --oracle-names pattern, checked: it must name a `pct` or `sessions` group."""
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ConfigError(f"--oracle-names={text}: not a regular expression ({exc})") from exc
    if not {"pct", "sessions"} & set(pattern.groupindex):
        raise ConfigError(
            f"--oracle-names={text}: name the values with (?P<pct>...) and/or "
            "(?P<sessions>...), e.g. 'run_(?P<sessions>\\d+)s_(?P<pct>\\d+)u'"
        )
    return pattern


def label(report: OracleReport, path: str | Path, pattern: re.Pattern[str] | None = None) -> None:
    """Set the report's UPDATE_PCT and sessions from its path, and the directory it lies in."""
    report.update_pct, report.sessions = name_params(path, pattern)
    report.directory = str(Path(path).resolve().parent)


def _params(report: OracleReport, path: str | Path | None = None) -> tuple[int | None, int | None]:
    """What label() set; else the default names of `path` (or of the report's own name)."""
    if report.update_pct is None and report.sessions is None:
        return name_params(report.name if path is None else path)
    return report.update_pct, report.sessions


def _elapsed_s(report: OracleReport) -> float | None:
    minutes = report.header.get("elapsed_min")
    return None if minutes is None else round(minutes * 60, 3)


def _latency(report: OracleReport, event: str, background: bool) -> float | None:
    """total ÷ waits of the event, or of the Exadata cell event standing in for it."""
    ev, _ = io_wait(report, event, background)
    return None if ev is None else ev.latency_us


def _total_per_s(report: OracleReport, stat: str) -> float | None:
    """A statistic's Total ÷ the window (finer than its printed per Second: a ratio of two
    of them is the ratio of the totals); the printed per Second when there is no Total."""
    total, elapsed = report.stat(stat), _elapsed_s(report)
    if total is None or not elapsed:
        return report.stat(stat, "per_second")
    return total / elapsed


def _db_cpu_s(report: OracleReport) -> float | None:
    """Time Model 'DB CPU' seconds; else the Top events' DB CPU row; else the Load Profile's
    (rounded) DB CPU(s) per second x elapsed."""
    row = (report.time_model or {}).get("DB CPU")
    if row is not None and row.get("time_s") is not None:
        return row["time_s"]
    for ev in report.top_events or []:
        if ev.event == "DB CPU" and ev.time_s is not None:
            return ev.time_s
    per_s, elapsed = report.load("DB CPU(s)"), _elapsed_s(report)
    return None if per_s is None or elapsed is None else per_s * elapsed


def wait_list(report: OracleReport) -> list[dict[str, Any]]:
    """Foreground waits, top first, pct = share of total non-idle foreground wait time.

    Idle-class events (SQL*Net message from client ...) are left out: by the class the report
    prints, by AWR 11g+ leaving their % DB time blank, else by Oracle's idle list (idle.py).
    """
    events = report.foreground_waits
    if events and any(ev.pct_time is not None for ev in events) and report.scope != "cluster":
        events = [ev for ev in events if ev.pct_time is not None]
    if not events:
        events = [ev for ev in report.top_events or [] if ev.event not in CPU_EVENTS]
    timed = [
        (ev, time_s)
        for ev in events
        if (time_s := ev.time_s) is not None and not is_idle(ev.event, ev.wait_class)
    ]
    total = sum(time_s for _, time_s in timed)
    timed.sort(key=lambda pair: pair[1], reverse=True)
    return [
        {
            "event": ev.event,
            "samples": ev.waits,
            "time_s": time_s,
            "pct": round(time_s / total * 100, 2) if total else None,
        }
        for ev, time_s in timed
    ]


def metrics(report: OracleReport) -> dict[str, float | None]:
    db_time_min = report.header.get("db_time_min")
    m: dict[str, float | None] = {
        # a SLOBop is one execution of SLOB's PL/SQL block statement: Executes per second
        "slobops_per_s": report.load("Executes", "Executes (SQL)"),
        "lio_per_s": report.load("Logical reads", "Logical read (blocks)", "Logical Reads"),
        # Read/write REQUESTS, not blocks: a multiblock read (db file parallel/scattered read)
        # is one I/O of several blocks; storage IOPS are requests. The Load Profile's
        # "Physical reads" counts blocks. 12c+ Load Profile "Read IO requests" is the fallback.
        "pio_reads_per_s": report.rate("physical read IO requests", "Read IO requests"),
        "pio_read_mb_per_s": div(report.stat("physical read bytes", "per_second"), MB),
        "pio_writes_per_s": report.rate("physical write IO requests", "Write IO requests"),
        "pio_write_mb_per_s": div(report.stat("physical write bytes", "per_second"), MB),
        "wal_mb_per_s": div(report.rate("redo size", "Redo size", "Redo size (bytes)"), MB),
        "commits_per_s": _total_per_s(report, "user commits"),
        # a committing session asking LGWR for its redo on disk: the log sync a commit waits
        # for, as a WAL flush is ours (commits_per_sync = user commits ÷ redo synch writes)
        "wal_syncs_per_s": _total_per_s(report, "redo synch writes"),
        "db_cpu_s": _db_cpu_s(report),
        "db_time_s": None if db_time_min is None else db_time_min * 60,
    }
    if m["pio_read_mb_per_s"] is None:
        m["pio_read_mb_per_s"] = report.load("Read IO (MB)")
    if m["pio_write_mb_per_s"] is None:
        m["pio_write_mb_per_s"] = report.load("Write IO (MB)")
    for key, event, background in IO_EVENTS:
        m[key] = _latency(report, event, background)
    m["db_read_latency_us"] = m["dfsr_latency_us"]
    # WAL sync = LGWR's "log file parallel write" (the redo write incl. its sync), not the
    # foreground "log file sync", which also contains LGWR scheduling and posting delays.
    m["wal_sync_latency_us"] = m["lfpw_latency_us"]
    return m


def terms(report: OracleReport) -> dict[str, str]:
    """Oracle's words for the labels of the metrics table (model/metrics.py DEFAULT_TERMS):
    'Commits per redo sync', not per WAL sync; the read event is the one the figures come
    from (an Exadata report's cell event standing in for db file sequential read)."""
    _, stand_in = io_wait(report, "db file sequential read")
    return {
        "log": "redo",
        "cache": "buffer cache",
        "db_io": "AWR",
        "read_event": stand_in or "db file sequential read",
        "write_event": "db file parallel write",
        "log_sync_event": "log file sync",
    }


def to_run(report: OracleReport, path: str | Path) -> dict[str, Any]:
    """A run.json-shaped dict (schema_version 1) that analyze and plots can read."""
    path = Path(path)
    update_pct, sessions = _params(report, path)
    h = report.header
    target = "/".join(str(x) for x in (h.get("db_name"), h.get("instance")) if x) or None
    return {
        "schema_version": 1,
        "tool": {"name": f"oracle-{report.kind}", "version": None},
        "label": path.stem,
        "status": RunStatus.COMPLETE,
        "error": None,
        "config": {"UPDATE_PCT": update_pct, "SESSIONS": sessions, "SOURCE_FILE": str(path)},
        "engine": {
            "name": "oracle",
            "version": h.get("release"),
            "target": target,
            "settings": {},
            "terms": terms(report),
        },
        "host": {"hostname": h.get("host"), "cpus": h.get("cpus"), "platform": h.get("platform")},
        "window": {
            "seconds": _elapsed_s(report),
            "start": h.get("begin_time"),
            "end": h.get("end_time"),
            "begin_snap": h.get("begin_snap"),
            "end_snap": h.get("end_snap"),
        },
        "sessions": [{"id": i} for i in range(sessions)] if sessions else [],
        "metrics": metrics(report),
        "latency": {},  # AWR has no per-SLOBop histograms
        "waits": wait_list(report),
        "warnings": [],
        "oracle": report.to_dict(),
    }


def _count(value: float | None) -> float | int | None:
    """Wait counts are whole numbers: print them so (the parser reads every number as float)."""
    return int(value) if value is not None and float(value).is_integer() else value


# The events of the event view after the I/O events: the commit wait the PL/SQL
# commit-optimization report reads, and Exadata's cell reads (each under its own name,
# with the event it stands for).
CELL_EVENTS = {  # Oracle's reference: "This wait event is equivalent to ..."
    "cell single block physical read": "db file sequential read",
    "cell list of blocks physical read": "db file parallel read",
    "cell multiblock physical read": "db file scattered read",
}
MORE_EVENTS = [("log file sync", False), *((cell, False) for cell in CELL_EVENTS)]


def _event_row(
    report: OracleReport, parent: OracleReport | None, ev: WaitEvent, event: str
) -> dict[str, Any]:
    elapsed = _elapsed_s(report)
    iops = ev.waits / elapsed if ev.waits is not None and elapsed else None
    return {
        "Dir": dir_label(report, parent),
        "Filename": file_label(report),
        "Inst": report.header.get("instance"),
        "Event": event,
        "Waits": _count(ev.waits),
        "Time(s)": ev.time_s,
        "Latency(us)": None if ev.latency_us is None else round(ev.latency_us, 1),
        "IOPS": None if iops is None else round(iops, 1),
        "Stands for": CELL_EVENTS.get(event),
    }


def _event_rows(report: OracleReport, parent: OracleReport | None) -> list[dict[str, Any]]:
    rows, shown = [], set()
    for _key, event, background in IO_EVENTS:
        ev = report.wait(event, background=background)
        if ev is not None:
            rows.append(_event_row(report, parent, ev, event))
    for event, background in MORE_EVENTS:
        ev = report.wait(event, background=background)
        if ev is not None and id(ev) not in shown:
            shown.add(id(ev))
            rows.append(_event_row(report, parent, ev, event))
    return rows


def event_rows(reports: list[OracleReport]) -> list[dict[str, Any]]:
    """flashdba's table: Filename, Event, Waits, Time(s), Latency(us), IOPS (waits / elapsed)
    for each I/O event the report lists (events it does not list are left out), then 'log
    file sync' and Exadata's cell read events with the event each stands for; a cluster's
    rows are followed by its instances'."""
    return [row for rows in expand(reports, _event_rows) for row in rows]
