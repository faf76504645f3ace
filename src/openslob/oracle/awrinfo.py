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
in whole seconds).
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


def _latencies(report: OracleReport, row: dict[str, Any], notes: list[str]) -> None:
    for key, event, background, precise_key in LATENCIES:
        ev = report.wait(event, background=background)
        row[key] = printf_round(ev.latency_us, 0) if ev is not None else None
        row[precise_key] = _round(ev.precise_us, 2) if ev is not None else None
        if ev is None:
            continue
        if ev.waits and ev.time_s == 0:
            notes.append(f"{key}: total printed as 0 s (awr_info prints 0)")
        elif (ev.latency_err_pct or 0) > IMPRECISE_PCT:
            notes.append(f"{key} ±{ev.latency_err_pct:.0f}% (total printed as {ev.time_s:g} s)")


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


def awr_row(report: OracleReport, parent: OracleReport | None = None) -> dict[str, Any]:
    """One report's row: identity, awr_info's columns, extras and NOTES."""
    elapsed_min = report.header.get("elapsed_min")
    row = _identity(report, parent)
    row.update(
        {
            "ELAPSED": trunc(None if elapsed_min is None else elapsed_min * 60),
            "DB CPU": _round(report.load("DB CPU(s)"), 2),
            "DB Tm": _round(report.load("DB Time(s)", "DB time(s)"), 2),
            "EXECUTES": trunc(report.load("Executes", "Executes (SQL)")),
            "LIO": trunc(report.load("Logical reads", "Logical read (blocks)", "Logical Reads")),
            "PREADS": trunc(report.rate("physical read IO requests", "Read IO requests")),
            "READ_MBS": printf_round(_total_mbs(report, "read"), 1),
            "PWRITES": trunc(report.rate("physical write IO requests", "Write IO requests")),
            "WRITE_MBS": printf_round(_total_mbs(report, "write"), 0),
            "REDO_MBS": bc_trunc1(report.load("Redo size", "Redo size (bytes)")),
        }
    )
    notes: list[str] = []
    _latencies(report, row, notes)
    row["TOP WAIT"] = _top_text(report)
    row.update(
        {
            "DB+BG CPU": _cpu_sum(report),
            "PREAD_BLKS": _round(report.load("Physical reads", "Physical read (blocks)"), 1),
            "PWRITE_BLKS": _round(report.load("Physical writes", "Physical write (blocks)"), 1),
            "DB_READ_MBS": _round(div(report.stat("physical read bytes", "per_second"), MB), 3),
            "DB_WRITE_MBS": _round(div(report.stat("physical write bytes", "per_second"), MB), 3),
        }
    )
    for *_, precise_key in LATENCIES:
        row[precise_key] = row.pop(precise_key)  # after the other extras, in LATENCIES order
    problems = [p.split(": ", 1)[-1] for p in report.problems]
    row["NOTES"] = "; ".join([*problems, *report.notes, *notes]) or None
    return row


def _total_mbs(report: OracleReport, way: str) -> float | None:
    """'physical <way> total bytes' per Second in MB; 12c+ Load Profile 'Read/Write IO (MB)'
    (the same statistic) when the activity section is missing."""
    value = div(report.stat(f"physical {way} total bytes", "per_second"), MB)
    return value if value is not None else report.load(f"{way.capitalize()} IO (MB)")


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


def awr_rows(reports: list[OracleReport]) -> list[dict[str, Any]]:
    return expand(reports, awr_row)
