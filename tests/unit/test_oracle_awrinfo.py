"""awr_info parity, precision, idle events, SLOB-kit names, form feeds and Statspack layouts.

AWR_INFO holds what SLOB's awr_info.sh ("@(#) awr_info.sh 2014.12.11") printed for each fixture
(its '#' provenance lines removed first), run by hand outside this repository: openslob's
awr_info columns must give the same numbers, except where AWR_INFO_DIFFERS says why not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openslob.oracle import awr_rows, parse_report
from openslob.oracle.awrinfo import bc_trunc1, natural, printf_round, trunc
from openslob.oracle.idle import is_idle
from openslob.oracle.model import label, name_params
from openslob.oracle.text import printed_error
from openslob.results.collect import find_runs

DATA = Path(__file__).parents[1] / "data" / "oracle"
KIT11 = DATA / "slob11g" / "awr.txt.32"
SP12 = DATA / "statspack12" / "sp_11_12.lst"
RAC_INST = DATA / "rac19c" / "awr.txt"
AWR11 = DATA / "awr_11.2.0.1_orcl_swingbench.txt"
COLUMNS = [
    "FILE",
    "SESSIONS",
    "ELAPSED",
    "DB_CPU",
    "DB_Tm",
    "EXECUTES",
    "LIO",
    "PREADS",
    "READ_MBS",
    "PWRITES",
    "WRITE_MBS",
    "REDO_MBS",
    "DFSR_LAT",
    "DPR_LAT",
    "DFPR_LAT",
    "DFPW_LAT",
    "LFPW_LAT",
    "TOP_WAIT",
]
AWR_INFO = {
    KIT11: "awr.txt.32|32|300|4.2|31.9|1352|96548|83031|  648.8|535|     5|.2|     326|0|"
    "    4832|    1967|    1087|db file sequential read          24897312       8123      0   "
    "84.8 User I/O|",
    SP12: "sp_11_12.lst|lst|301|6||8544|1102334|1|    0.1|1|     0|0|0|0|0|    2427|       0|"
    "latch: cache buffers chains         1402    0          1      1    155.8     .0|",
    RAC_INST: "awr.txt||324|19.9|94.5|21865|109701|67088|  524.2|20|     0|0|     757|0|"
    "       0|    3805|    9740|db file sequential read         21599064      16.4K  757.40us"
    "   53.3 User I/O|",
    AWR11: "awr_11.2.0.1_orcl_swingbench.txt||361|0.1|23.5|256|2021|0|    0.0|0||0|0|0|"
    "  304587|0|   37058|db file sequential read              35732       6575    184   77.5 "
    "User I/O|",
}
# (fixture, column) -> what openslob prints instead, and why
AWR_INFO_DIFFERS = {
    # an event the report does not list: awr_info prints 0, openslob n/a
    (KIT11, "DPR_LAT"): None,
    (SP12, "DFSR_LAT"): None,
    (SP12, "DPR_LAT"): None,
    (SP12, "DFPR_LAT"): None,
    (RAC_INST, "DPR_LAT"): None,
    (AWR11, "DPR_LAT"): None,
    (AWR11, "DFPW_LAT"): None,
    # listed, but the total prints 0 s: awr_info computes 0 µs; unknown, not 0 (NOTES says so)
    (RAC_INST, "DFPR_LAT"): None,
    (SP12, "LFPW_LAT"): None,
    # no Instance Activity Stats in the file: awr_info prints 0 requests, 0.0 MB/s
    (AWR11, "PREADS"): None,
    (AWR11, "PWRITES"): None,
    (AWR11, "READ_MBS"): None,
    # the tutorial's " @jls" mark after the row gives awr_info 7 fields and it prints 0
    (AWR11, "DFSR_LAT"): 184009,
    # awr_info's egrep 'DB Time.s' is case-sensitive and misses Statspack's 'DB time(s)'
    (SP12, "DB_Tm"): 7.9,
    # awr_info takes the last '.' field of any name as SESSIONS ('lst')
    (SP12, "SESSIONS"): None,
    # awr_info misses Statspack's 'Top 5 Timed Events' and prints the first Foreground Wait
    # Events row, which can never be CPU; openslob reads the Top 5 (idle rows skipped)
    (SP12, "TOP_WAIT"): "CPU time 46.6%",
}


def _awr_info(line: str) -> dict[str, object]:
    cells = [c.strip() for c in line.split("|")[:-1]]
    return dict(zip(COLUMNS, cells, strict=True))


def _ours(path: Path) -> dict[str, object]:
    report = parse_report(path.read_text(encoding="utf-8"), str(path))
    label(report, path)
    (row,) = [r for r in awr_rows([report]) if r["FILE"] == path.name]
    return {key.replace(" ", "_"): value for key, value in row.items()}


def _same(printed: str, ours: object, column: str) -> bool:
    if column == "TOP_WAIT":  # awr_info prints the whole row; openslob event and % DB time
        event, pct = re.match(r"(.*?)\s{2,}.*\s([\d.]+)\s\S[\w/ ]*$", printed).groups()  # type: ignore[union-attr]
        return ours == f"{event} {float(pct):.1f}%"
    if column == "FILE":
        return ours == printed
    if printed == "":
        return ours is None
    return isinstance(ours, int | float) and abs(float(printed) - ours) < 1e-9


@pytest.mark.parametrize("path", list(AWR_INFO), ids=lambda p: p.name)
def test_awr_info_parity(path: Path) -> None:
    printed, ours = _awr_info(AWR_INFO[path]), _ours(path)
    for column in COLUMNS:
        if (path, column) in AWR_INFO_DIFFERS:
            assert ours[column] == AWR_INFO_DIFFERS[(path, column)], column
        else:
            assert _same(str(printed[column]), ours[column], column), (column, printed, ours)


def test_awr_info_rounding() -> None:
    assert trunc(1352.6) == 1352 and trunc(None) is None  # printf %d
    assert printf_round(648.76, 1) == 648.8 and printf_round(5.08, 0) == 5  # %7.1f, %6.0lf
    assert printf_round(2.5, 0) == 2  # C's printf rounds a binary half to even, as awk does
    assert bc_trunc1(312456.3) == 0.2  # bc scale=1: 0.29798... -> .2, never rounded up
    assert bc_trunc1(3407852.3) == 3.2  # 3.25 MB/s


def test_printed_error() -> None:
    assert printed_error("6,575") == 0.5 and printed_error("42,909.09") == 0.005
    assert printed_error("8.64ms", unit_ms=True) == pytest.approx(0.005)
    assert printed_error("757.40us", unit_ms=True) == pytest.approx(0.000005)
    assert printed_error("16.4K") == pytest.approx(50.0) and printed_error("N/A") is None


# --- item 1: SLOB kit 11g output with form feeds ---------------------------------------------


def test_form_feed_titles_are_read() -> None:
    text = KIT11.read_text(encoding="utf-8")
    assert text.count("\f") == 4  # at the start of four section titles, as 11g prints them
    r = parse_report(text, str(KIT11))
    assert r.problems == []
    assert r.stat("physical read IO requests", "per_second") == 83031.1
    assert r.wait("log file parallel write", background=True).waits == 1840
    assert r.time_model["background cpu time"]["time_s"] == 35.9
    plain = parse_report(text.replace("\f", ""), str(KIT11))
    assert plain.to_dict() == r.to_dict()  # the same figures with the form feeds removed


# --- item 2: SLOB's classic file names -------------------------------------------------------


def test_kit_names_give_sessions(tmp_path: Path) -> None:
    assert name_params("results/awr.txt.32") == (None, 32)
    assert name_params("awr.txt.txt") == (None, None)
    assert name_params("awr.0.16.txt") == (0, 16)
    kit = tmp_path / "kit"
    kit.mkdir()
    text = KIT11.read_text(encoding="utf-8")
    for sessions in (1, 16, 4):
        (kit / f"awr.txt.{sessions}").write_text(text)
    refs = find_runs([kit])  # a directory of them is found (the name ends in .txt.<n>)
    assert sorted(ref.point["SESSIONS"] for ref in refs) == [1, 4, 16]
    rows = awr_rows([ref.oracle for ref in refs])
    assert [row["FILE"] for row in rows] == ["awr.txt.1", "awr.txt.4", "awr.txt.16"]


# --- item 3: Statspack with a wrapped host table and idle Top 5 rows ---------------------


def test_statspack_wrapped_header_and_idle_top_event() -> None:
    """The host table wrapped as SQL*Plus wraps a row (issue 28 item 8): each part of the
    headings over its own rule, then the values' parts; read without a problem."""
    r = parse_report(SP12.read_text(encoding="utf-8"), str(SP12))
    assert r.kind == "statspack" and r.problems == []
    h = r.header
    assert (h["host"], h["platform"], h["cpus"], h["cores"], h["sockets"], h["memory_gb"]) == (
        "slobhost12",
        "Linux x86 64-bit",
        8,
        4,
        1,
        31.3,
    )
    assert r.top_events[0].event == "LGWR worker group idle"  # first in the report
    (row,) = awr_rows([r])
    assert row["TOP WAIT"] == "CPU time 46.6%"  # idle skipped, Statspack's CPU row counts
    assert row["LIO"] == 1102334 and row["EXECUTES"] == 8544


def test_idle_class() -> None:
    assert is_idle("SQL*Net message from client") and is_idle("LGWR worker group idle")
    assert is_idle("SQL*Net message from clien")  # cut to the column
    assert is_idle("anything", "Idle") and not is_idle("watchdog main loop", "Other")
    assert not is_idle("db file sequential read") and not is_idle("log file sync")
    assert not is_idle("PX Deq")  # too short a cut to tell


# --- item 7: precision ------------------------------------------------------------------------


def test_precise_averages_and_flags() -> None:
    row = _ours(RAC_INST)
    # log file parallel write: 3 s / 308 waits = 9,740 µs (awr_info), printed 8.64ms: ±5 µs
    assert (row["LFPW_LAT"], row["LFPW_US"]) == (9740, 8640.0)
    # db file parallel read: 5 waits, total printed 0 s, average printed 1.23ms
    assert (row["DFPR_LAT"], row["DFPR_US"]) == (None, 1230.0)
    # 16,359 s / 21,599,064 waits = 757.39 µs ± 0.02; the printed 757.40us is as precise
    assert row["DFSR_US"] == 757.4
    notes = row["NOTES"]
    assert "DFPR_LAT: total printed as 0 s (awr_info prints 0)" in notes
    assert "LFPW_LAT ±17% (total printed as 3 s)" in notes  # 0.5 s of 3 s
    assert "DFSR_LAT" not in notes  # ±0.003 %


# --- item 9: identity, order and numbers without float noise -------------------------------


def test_rows_sorted_naturally_with_identity(tmp_path: Path) -> None:
    text = KIT11.read_text(encoding="utf-8")
    for directory in ("b", "a"):
        (tmp_path / directory).mkdir()
        for name in ("awr.10.8.txt", "awr.3.8.txt", "awr.3.16.txt", "awr.3.2.txt"):
            (tmp_path / directory / name).write_text(text)
    refs = find_runs([tmp_path])
    rows = awr_rows([ref.oracle for ref in refs])
    assert [(r["DIR"], r["UPDATE_PCT"], r["SESSIONS"]) for r in rows[:4]] == [
        ("a", 3, 2),
        ("a", 3, 8),
        ("a", 3, 16),
        ("a", 10, 8),
    ]
    assert rows[4]["DIR"] == "b"
    assert (rows[0]["DB"], rows[0]["INST"], rows[0]["RELEASE"], rows[0]["SNAPS"]) == (
        "SLOB",
        "SLOB",
        "11.2.0.3.0",
        "101-102",
    )
    assert natural("awr.3.txt") < natural("awr.10.txt")


def test_no_float_noise() -> None:
    row = _ours(KIT11)
    for key, value in row.items():
        if isinstance(value, float):
            assert len(repr(value).split(".")[-1]) <= 3, (key, value)
