"""SLOB's awr_info table over Oracle reports: awr_info.sh's own columns and definitions, then
openslob's refinements as extra, separately named columns.

Contract: awr_rows(reports) gives one dict per report (a cluster report: its cluster row, then
one row per instance), sorted naturally by directory, UPDATE_PCT, sessions and file. Keys are
the column headers, in this order: identity (DIR, FILE, DB, INST, RELEASE, SNAPS, UPDATE_PCT,
SESSIONS), awr_info's columns (ELAPSED ... TOP WAIT), the extras (DB+BG CPU ... LFPW_US) and
NOTES. None wherever the report does not print the figure ("n/a" in the table, null in JSON).

awr_info.sh (SLOB 2.x, "@(#) awr_info.sh 2014.12.11", Statspack changes 2017) defines each
column as below; openslob reads the same rows and rounds the same way, so the numbers match
what awr_info prints for the same file. Where awr_info prints a number it did not read
(0 for an event the report does not list, or for a total printed as 0 s), openslob prints
n/a and says why in NOTES.
  FILE       the report's name (DIR: the directory it lies in).
  SESSIONS   awr_info: the last '.' field of the file name (awr.txt.16 -> 16); openslob also
             reads flashdba's awr.<pct>.<sessions>.txt and --oracle-names.
  ELAPSED    'Elapsed:' minutes x 60, truncated to whole seconds (printf %d).
  DB CPU     Load Profile 'DB CPU(s)' per second as printed. awr_info's dbcpu() means to add
             'Background CPU(s)' (12c+), but its chomp passes only the first number on, so it
             prints DB CPU(s) alone (19.9, not 19.9 + 2.6, on the 19c RAC sweep); the sum is
             the extra column DB+BG CPU.
  DB Tm      Load Profile 'DB Time(s)' per second (awr_info's egrep is case-sensitive and
             misses Statspack's 'DB time(s)'; openslob reads it).
  EXECUTES   Load Profile 'Executes' / 'Executes (SQL)' per second, truncated to an integer.
  LIO        Load Profile 'Logical reads' / 'Logical read (blocks)' per second, truncated.
  PREADS     Instance Activity 'physical read IO requests' per Second, truncated: requests,
             not blocks (12c+ Load Profile 'Read IO requests' is the same statistic and is
             used when the activity section is missing).
  READ_MBS   'physical read total bytes' per Second / 2^20, one decimal (printf %7.1f):
             every read of the instance (data, redo, control, archive, ...).
  PWRITES    'physical write IO requests' per Second, truncated.
  WRITE_MBS  'physical write total bytes' per Second / 2^20, rounded to whole MB (%6.0lf).
  REDO_MBS   Load Profile 'Redo size' per second / 2^20, truncated to one decimal (bc scale=1).
  DFSR_LAT, DPR_LAT, DFPR_LAT   foreground 'db file sequential read', 'direct path read',
             'db file parallel read': Total Wait Time (s) / Waits x 10^6, whole µs (%8.0lf).
  DFPW_LAT, LFPW_LAT   the same for background 'db file parallel write' and 'log file
             parallel write'.
  TOP WAIT   the first row of 'Top N (Timed) Foreground Events', DB CPU included (awr_info
             prints the whole row; openslob the event and its % DB time). Idle-class events
             are skipped (idle.py); Statspack's 'CPU time' counts like AWR's 'DB CPU'
             (awr_info misses Statspack's 'Top 5 Timed Events' title and takes the first
             Foreground Wait Events row instead, which can never be CPU).
Extras: DB+BG CPU (DB CPU(s) + Background CPU(s)); PREAD_BLKS / PWRITE_BLKS (Load Profile
physical reads/writes in blocks per second); DB_READ_MBS / DB_WRITE_MBS ('physical read/write
bytes': data-file I/O only, where READ_MBS/WRITE_MBS count every file); DFSR_US ... LFPW_US
(the more precise of total ÷ waits and the printed average: 12c+ print '8.64ms' beside totals
in whole seconds); REDO_SYNCH/s, COMMITS/s, COMMITS/SYNC ('user commits' ÷ 'redo synch
writes', from the totals) and LFS_US ('log file sync'), the PL/SQL commit-optimization
figures. On Exadata the cell events stand in for the read events a report does not list
(STAND_INS), and NOTES says which did. A wait printed as 0 s and 0 ms is below half a
unit, not 0: n/a, with the bound in NOTES. awr_rows(exact=True), for JSON and CSV: awr_info's
columns keep the precision the report prints (PREADS 45.8 where awr_info prints 45).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from typing import Any

from openslob.oracle.awr import OracleReport, WaitEvent
from openslob.oracle.idle import is_idle

MB = 2**20  # Oracle's "MB" (Load Profile Read IO (MB), awr_info's / 2^20) is 2**20 bytes
# Latencies of awr_info (key, event, background?, precise column)
LATENCIES = [
    ("DFSR_LAT", "db file sequential read", False, "DFSR_US"),
    ("DPR_LAT", "direct path read", False, "DPR_US"),
    ("DFPR_LAT", "db file parallel read", False, "DFPR_US"),
    ("DFPW_LAT", "db file parallel write", True, "DFPW_US"),
    ("LFPW_LAT", "log file parallel write", True, "LFPW_US"),
]
# Exadata's cell events stand for the read events awr_info names (Oracle's reference: "cell
# single block physical read ... is equivalent to db file sequential read for a cell"; "cell
# list of blocks physical read" to db file parallel read; "cell multiblock physical read" to
# db file scattered read, taken for awr_info's multiblock read, DFPR, only when the report
# has neither of the other two). Used only when the named event is not in the report; NOTES
# says which event stood in.
STAND_INS = {
    "db file sequential read": ("cell single block physical read",),
    "db file parallel read": ("cell list of blocks physical read", "cell multiblock physical read"),
}
CPU_EVENTS = ("DB CPU", "CPU time")  # AWR's and Statspack's CPU row of the Top N table
IMPRECISE_PCT = 5.0  # a latency whose total's rounding can move it by more is flagged


def trunc(value: float | None) -> int | None:
    """printf("%d") / awk's int: toward zero."""
    return None if value is None else int(value)


def printf_round(value: float | None, digits: int) -> float | int | None:
    """printf("%.Nf"): the binary value correctly rounded, as awk prints it."""
    if value is None:
        return None
    text = f"{value:.{digits}f}"
    return int(text) if digits == 0 else float(text)


def bc_trunc1(value: float | None) -> float | None:
    """bc with scale=1: the decimal quotient cut after one decimal."""
    if value is None:
        return None
    return float((Decimal(repr(value)) / MB).quantize(Decimal("0.1"), rounding=ROUND_DOWN))


def div(value: float | None, by: float) -> float | None:
    return None if value is None else value / by


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def top_wait(report: OracleReport) -> WaitEvent | None:
    """The first Top N row that is not an Idle-class event (CPU rows count)."""
    for ev in report.top_events or []:
        if ev.event in CPU_EVENTS or not is_idle(ev.event, ev.wait_class):
            return ev
    return None


def _top_text(report: OracleReport) -> str | None:
    ev = top_wait(report)
    if ev is None:
        return None
    return f"{ev.event} {ev.pct_time:.1f}%" if ev.pct_time is not None else ev.event


def io_wait(
    report: OracleReport, event: str, background: bool = False
) -> tuple[WaitEvent | None, str | None]:
    """The wait event, else the Exadata cell event that stands for it: (event, the stand-in's
    name when one was used)."""
    ev = report.wait(event, background=background)
    if ev is not None:
        return ev, None
    for name in STAND_INS.get(event, ()):
        ev = report.wait(name, background=background)
        if ev is not None:
            return ev, name
    return None, None


def stand_in_note(key: str, event: str, stand_in: str) -> str:
    return f"{key}: '{stand_in}' (Exadata) stands in for '{event}'"


def zero_note(key: str, ev: WaitEvent) -> str | None:
    """A wait whose total and average print 0: below half a unit, not 0 (the figure is n/a)."""
    bound = ev.zero_bound_us
    if bound is None:
        return None
    average = ", average as 0" if ev.avg_wait_ms == 0 else ""
    return (
        f"{key}: < {bound:.0f} µs ({ev.waits:.0f} waits, total printed as 0 s{average}: "
        "less than half a unit, not 0)"
    )


def _latencies(
    report: OracleReport, row: dict[str, Any], notes: list[str], exact: bool = False
) -> None:
    for key, event, background, precise_key in LATENCIES:
        ev, stand_in = io_wait(report, event, background)
        latency = None if ev is None else ev.latency_us
        row[key] = _round(latency, 2) if exact else printf_round(latency, 0)
        row[precise_key] = _round(ev.precise_us, 2) if ev is not None else None
        if ev is None:
            continue
        if stand_in is not None:
            notes.append(stand_in_note(f"{key}/{precise_key}", event, stand_in))
        if ev.waits and ev.time_s == 0:
            notes.append(f"{key}: total printed as 0 s (awr_info prints 0)")
            notes.append(zero_note(precise_key, ev) or "")
        elif (ev.latency_err_pct or 0) > IMPRECISE_PCT:
            notes.append(f"{key} ±{ev.latency_err_pct:.0f}% (total printed as {ev.time_s:g} s)")
    notes[:] = [n for n in notes if n]


def _cpu_sum(report: OracleReport) -> float | None:
    fg, bg = report.load("DB CPU(s)"), report.load("Background CPU(s)")
    return None if fg is None or bg is None else round(fg + bg, 2)


def dir_label(report: OracleReport, parent: OracleReport | None = None) -> str | None:
    """The name of the directory the report (or the cluster it belongs to) lies in."""
    owner = parent or report
    return Path(owner.directory).name if owner.directory else None


def file_label(report: OracleReport) -> str:
    """The report's file name; an added-up cluster's: its instance files joined by ' + '."""
    return " + ".join(Path(n).name for n in report.name.split(" + "))


def _identity(report: OracleReport, parent: OracleReport | None) -> dict[str, Any]:
    owner = parent or report
    h = report.header
    snaps = (h.get("begin_snap"), h.get("end_snap"))
    return {
        "DIR": dir_label(report, parent),
        "FILE": file_label(report),
        "DB": h.get("db_name"),
        "INST": h.get("instance"),
        "RELEASE": h.get("release"),
        "SNAPS": f"{snaps[0]}-{snaps[1]}" if None not in snaps else None,
        "UPDATE_PCT": owner.update_pct,
        "SESSIONS": owner.sessions,
    }


def _count(value: float | None, exact: bool) -> float | int | None:
    """awr_info's %d (truncated); exact: the figure as the report prints it."""
    return value if exact else trunc(value)


def _mbs(value: float | None, digits: int, exact: bool) -> float | int | None:
    """awr_info's printf rounding; exact: the quotient (6 decimals: float noise cut)."""
    return _round(value, 6) if exact else printf_round(value, digits)


def awr_row(
    report: OracleReport, parent: OracleReport | None = None, exact: bool = False
) -> dict[str, Any]:
    """One report's row: identity, awr_info's columns, extras and NOTES. exact: the machine-
    readable row (JSON, CSV): awr_info's columns keep the precision the report prints instead
    of awr_info's truncation (PREADS 45.8, not 45)."""
    elapsed_min = report.header.get("elapsed_min")
    elapsed_s = None if elapsed_min is None else elapsed_min * 60
    redo = report.load("Redo size", "Redo size (bytes)")
    notes: list[str] = []
    row = _identity(report, parent)
    row.update(
        {
            "ELAPSED": _round(elapsed_s, 3) if exact else trunc(elapsed_s),
            "DB CPU": _round(report.load("DB CPU(s)"), 2),
            "DB Tm": _round(report.load("DB Time(s)", "DB time(s)"), 2),
            "EXECUTES": _count(report.load("Executes", "Executes (SQL)"), exact),
            "LIO": _count(
                report.load("Logical reads", "Logical read (blocks)", "Logical Reads"), exact
            ),
            "PREADS": _count(report.rate("physical read IO requests", "Read IO requests"), exact),
            "READ_MBS": _mbs(_total_mbs(report, "read", notes), 1, exact),
            "PWRITES": _count(
                report.rate("physical write IO requests", "Write IO requests"), exact
            ),
            "WRITE_MBS": _mbs(_total_mbs(report, "write", notes), 0, exact),
            "REDO_MBS": _round(div(redo, MB), 6) if exact else bc_trunc1(redo),
        }
    )
    _latencies(report, row, notes, exact)
    row["TOP WAIT"] = _top_text(report)
    row.update(
        {
            "DB+BG CPU": _cpu_sum(report),
            "PREAD_BLKS": _round(report.load("Physical reads", "Physical read (blocks)"), 1),
            "PWRITE_BLKS": _round(report.load("Physical writes", "Physical write (blocks)"), 1),
            "DB_READ_MBS": _db_mbs(report, "read", notes),
            "DB_WRITE_MBS": _db_mbs(report, "write", notes),
        }
    )
    for *_, precise_key in LATENCIES:
        row[precise_key] = row.pop(precise_key)  # after the other extras, in LATENCIES order
    row.update(commit_columns(report, notes))
    notes[:] = [n for n in notes if n]
    problems = [p.split(": ", 1)[-1] for p in report.problems]
    row["NOTES"] = "; ".join([*problems, *report.notes, *notes]) or None
    return row


def commit_columns(report: OracleReport, notes: list[str]) -> dict[str, Any]:
    """The commit figures the PL/SQL commit-optimization report reads: 'redo synch writes'
    (a committing session asking LGWR for its redo on disk) and 'user commits' per second,
    commits per redo synch write (from the totals: 6,400 / 97 = 66.0; SLOB's PL/SQL loop does
    not wait for most commits), and the foreground 'log file sync' wait in µs."""
    syncs, commits = report.stat("redo synch writes"), report.stat("user commits")
    ratio = None
    if syncs and commits is not None:
        ratio = round(commits / syncs, 2)
    elif syncs == 0 and commits:
        notes.append("COMMITS/SYNC: n/a, no redo synch write in the window")
    ev = report.wait("log file sync")
    if ev is not None and ev.precise_us is None:
        notes.append(zero_note("LFS_US", ev) or "")
    return {
        "REDO_SYNCH/s": report.stat("redo synch writes", "per_second"),
        "COMMITS/s": report.stat("user commits", "per_second"),
        "COMMITS/SYNC": ratio,
        "LFS_US": None if ev is None else _round(ev.precise_us, 2),
    }


def _total_mbs(report: OracleReport, way: str, notes: list[str]) -> float | None:
    """'physical <way> total bytes' per Second in MB, or None with a note: the Load Profile's
    'Read/Write IO (MB)' is 'physical <way> bytes' (data files only; its per-transaction
    column shows it), another statistic, never taken for this one."""
    value = div(report.stat(f"physical {way} total bytes", "per_second"), MB)
    if value is None:
        key = f"{way.upper()}_MBS"
        notes.append(f"{key}: n/a, the report prints no 'physical {way} total bytes'")
    return value


def _db_mbs(report: OracleReport, way: str, notes: list[str]) -> float | None:
    """'physical <way> bytes' per Second in MB; else the 12c+ Load Profile's '<Way> IO (MB)',
    the same statistic, as printed (one decimal: a printed 0.0 is < 0.05, not 0)."""
    value = div(report.stat(f"physical {way} bytes", "per_second"), MB)
    if value is not None:
        return _round(value, 3)
    printed = report.load(f"{way.capitalize()} IO (MB)")
    if printed == 0:
        notes.append(
            f"DB_{way.upper()}_MBS: < 0.05 (Load Profile '{way.capitalize()} IO (MB)' prints 0.0)"
        )
        return None
    return printed


def natural(text: str | None) -> list[Any]:
    """Sort key: digit runs as numbers, so awr.3 comes before awr.10."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text or "")]


def _missing_last(value: int | None) -> tuple[int, int]:
    return (1, 0) if value is None else (0, value)


def sort_key(report: OracleReport) -> tuple[Any, ...]:
    return (
        natural(report.directory),
        _missing_last(report.update_pct),
        _missing_last(report.sessions),
        natural(Path(report.name).name),
    )


def expand(
    reports: list[OracleReport], make: Callable[[OracleReport, OracleReport | None], Any]
) -> list[Any]:
    """make(report, parent) over the reports in natural order, a cluster followed by its
    instances (by instance number)."""
    out = []
    for report in sorted(reports, key=sort_key):
        out.append(make(report, None))
        for part in sorted(report.instances, key=lambda r: r.header.get("inst_num") or 0):
            out.append(make(part, report))
    return out


def awr_rows(reports: list[OracleReport], exact: bool = False) -> list[dict[str, Any]]:
    return expand(reports, lambda report, parent: awr_row(report, parent, exact))
