"""Oracle AWR / Statspack text reports -> openslob model. Expected values are worked out by hand
from the fixture text (tests/data/oracle/*.txt, real reports; provenance in each file's header).
RAC, awr_info parity and the constructed SLOB-kit/Statspack layouts: test_oracle_rac.py and
test_oracle_awrinfo.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from openslob.oracle import (
    OracleReportError,
    awr_rows,
    event_rows,
    looks_like_oracle_report,
    parse_files,
    parse_number,
    parse_report,
    to_run,
)
from openslob.oracle.text import parse_duration_ms

DATA = Path(__file__).parents[1] / "data" / "oracle"
AWR11 = DATA / "awr_11.2.0.1_orcl_swingbench.txt"
AWR19 = DATA / "awr_19c_pdb_racdb1.txt"
SP12 = DATA / "statspack_12.1.0.2_testing_excerpt.txt"
# the same 11.2.0.1 report with the first pages of Instance Activity Stats, cut mid-section
AWR11_ACTIVITY = DATA / "awr_11.2.0.1_orcl_swingbench_activity.txt"


def parse(path: Path):
    return parse_report(path.read_text(encoding="utf-8"), str(path))


# --- numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("119,835,425", 119835425.0),
        ("1,234K", 1234000.0),
        ("2.5M", 2.5e6),
        ("35.9K", 35900.0),
        ("1G", 1e9),
        (".7", 0.7),
        ("1.2E+05", 120000.0),
        ("-3.5", -3.5),
        ("####", None),
        ("#########", None),
        ("", None),
        ("N/A", None),
        ("User I/O", None),
    ],
)
def test_parse_number(text, value):
    assert parse_number(text) == value


def test_parse_duration_ms():
    assert parse_duration_ms("184") == 184.0  # 10g-12.1: bare ms
    assert parse_duration_ms("3.23ms") == 3.23
    assert parse_duration_ms("268.69us") == pytest.approx(0.26869)
    assert parse_duration_ms("52.86 s") == pytest.approx(52860.0)


# --- 11.2.0.1 AWR ---------------------------------------------------------------------------


def test_awr11_header():
    r = parse(AWR11)
    assert r.kind == "awr"
    h = r.header
    assert (h["db_name"], h["db_id"], h["instance"], h["inst_num"]) == (
        "ORCL",
        "1344731332",
        "orcl",
        1,
    )
    assert h["release"] == "11.2.0.1.0" and h["rac"] == "NO"
    assert (h["host"], h["platform"]) == ("fabioprado.net", "Linux x86 64-bit")
    assert (h["cpus"], h["cores"], h["sockets"], h["memory_gb"]) == (2, 2, 1, 1.96)
    assert (h["begin_snap"], h["end_snap"]) == (37, 38)
    assert h["begin_time"] == "2017-02-12T12:16:04" and h["end_time"] == "2017-02-12T12:22:06"
    assert (h["elapsed_min"], h["db_time_min"]) == (6.03, 141.41)


def test_awr11_load_profile():
    r = parse(AWR11)
    lp = r.load_profile
    assert lp["DB Time(s)"] == {
        "per_second": 23.5,
        "per_transaction": 0.9,
        "per_exec": 0.09,
        "per_call": 0.68,
    }
    assert lp["Redo size"]["per_second"] == 56890.1
    assert lp["Redo size"]["per_exec"] is None  # blank cell, not 0
    assert lp["Logical reads"]["per_second"] == 2021.9
    assert lp["Physical reads"]["per_second"] == 130.9
    assert lp["Executes"]["per_second"] == 256.5
    assert lp["Transactions"] == {
        "per_second": 24.9,
        "per_transaction": None,
        "per_exec": None,
        "per_call": None,
    }
    assert len(lp) == 15


def test_awr11_waits_and_latency():
    r = parse(AWR11)
    top = r.top_events
    assert [e.event for e in top][:2] == ["db file sequential read", "log file sync"]
    assert (top[0].waits, top[0].time_s, top[0].avg_wait_ms, top[0].pct_time) == (
        35732,
        6575,
        184,
        77.5,
    )
    assert top[0].wait_class == "User I/O"
    assert len(top) == 5  # the "Host CPU (CPUs: 2 ..." line after it is not an event
    fg = r.foreground_waits
    assert len(fg) == 22
    dfsr = r.wait("db file sequential read")
    # line ends with the tutorial's "@jls" mark: it is beyond the last column and ignored
    assert (dfsr.waits, dfsr.time_s, dfsr.pct_time) == (35732, 6575, 77.5)
    # db file sequential read: 6,575 s / 35,732 waits = 0.18400873 s -> 184,008.7 µs
    assert dfsr.latency_us == pytest.approx(184008.7, abs=0.1)
    idle = r.wait("SQL*Net message from client")  # name cut to "SQL*Net message from clien"
    assert idle.event == "SQL*Net message from clien" and idle.pct_time is None
    bg = r.background_waits
    assert len(bg) == 29
    lfpw = r.wait("log file parallel write", background=True)
    # log file parallel write: 258 s / 6,962 waits -> 37,058.3 µs (printed Avg wait: 37 ms)
    assert lfpw.latency_us == pytest.approx(37058.3, abs=0.1)
    assert r.instance_activity is None  # section not in the file -> None, not zeros
    # the excerpt stops after Background Wait Events: named, not silently short
    assert r.problems == [
        f"{AWR11}: section 'Background Wait Events': the file ends here without "
        "'End of Report' (truncated)"
    ]
    assert r.os_stats["NUM_CPUS"] == 2 and r.os_stats["BUSY_TIME"] == 11245
    assert r.os_stats["PHYSICAL_MEMORY_BYTES"] == 2099740672
    assert r.time_model["DB CPU"]["time_s"] == 50.2


def test_awr11_to_run():
    run = to_run(parse(AWR11), "results/awr.25.16.txt")
    assert run["schema_version"] == 1 and run["status"] == "complete"
    assert run["tool"]["name"] == "oracle-awr" and run["label"] == "awr.25.16"
    assert run["config"]["UPDATE_PCT"] == 25
    assert run["sessions"] == [{"id": i} for i in range(16)]
    assert run["engine"] == {
        "name": "oracle",
        "version": "11.2.0.1.0",
        "target": "ORCL/orcl",
        "settings": {},
        "terms": {  # the metrics table's labels in Oracle's words
            "log": "redo",
            "cache": "buffer cache",
            "db_io": "AWR",
            "read_event": "db file sequential read",
            "write_event": "db file parallel write",
            "log_sync_event": "log file sync",
        },
    }
    assert run["host"]["hostname"] == "fabioprado.net" and run["host"]["cpus"] == 2
    w = run["window"]
    assert w["seconds"] == pytest.approx(361.8)  # 6.03 min x 60
    assert w["start"] == "2017-02-12T12:16:04"
    m = run["metrics"]
    assert m["slobops_per_s"] == 256.5 and m["lio_per_s"] == 2021.9
    assert m["pio_reads_per_s"] is None  # 11g Load Profile counts blocks; no activity stats
    assert m["wal_mb_per_s"] == pytest.approx(56890.1 / 2**20)  # 0.05425 MB/s
    assert m["db_time_s"] == pytest.approx(8484.6)  # 141.41 min x 60
    assert m["db_cpu_s"] == 50.2  # Time Model DB CPU
    assert m["db_read_latency_us"] == pytest.approx(184008.7, abs=0.1)
    assert m["dfpr_latency_us"] == pytest.approx(304587.2, abs=0.1)  # 166 s / 545
    assert m["wal_sync_latency_us"] == pytest.approx(37058.3, abs=0.1)
    assert m["dpr_latency_us"] is None and m["dfpw_latency_us"] is None
    assert m["commits_per_s"] is None
    assert run["latency"] == {}
    # non-idle foreground time: 6575+1495+166+92+60+8+3+2 (+0s) = 8,401 s
    # (the report's Foreground Wait Class says 8,402.19 s); 6575 / 8401 = 78.26 %
    assert run["waits"][0] == {
        "event": "db file sequential read",
        "samples": 35732,
        "time_s": 6575,
        "pct": 78.26,
    }
    assert "PL/SQL lock timer" not in [w["event"] for w in run["waits"]]  # idle
    assert run["oracle"]["header"]["db_id"] == "1344731332"


def test_awr11_rows():
    r = parse(AWR11)
    (row,) = awr_rows([r])
    assert row["FILE"] == AWR11.name and row["SESSIONS"] is None
    assert row["DIR"] is None  # the directory is set by model.label(), not by parsing
    assert (row["DB"], row["INST"], row["RELEASE"], row["SNAPS"]) == (
        "ORCL",
        "orcl",
        "11.2.0.1.0",
        "37-38",
    )
    assert row["ELAPSED"] == 361  # awr_info: printf("%d", 6.03 * 60)
    assert (row["DB CPU"], row["DB Tm"], row["EXECUTES"], row["LIO"]) == (0.1, 23.5, 256, 2021)
    assert row["PREADS"] is None and row["REDO_MBS"] == 0.0  # bc: 56,890.1 / 2^20 = .0542 -> .0
    # whole µs as awr_info's %8.0lf: 184,008.7 -> 184009; 304,587.2; 37,058.3
    assert (row["DFSR_LAT"], row["DFPR_LAT"], row["LFPW_LAT"]) == (184009, 304587, 37058)
    assert row["TOP WAIT"] == "db file sequential read 77.5%"
    events = event_rows([r])
    assert [e["Event"] for e in events] == [
        "db file sequential read",
        "db file parallel read",
        "log file parallel write",
        "log file sync",  # the commit wait (issue 28), after the I/O events
    ]
    # 35,732 waits / 361.8 s = 98.76 -> 98.8 IOPS; 6,962 / 361.8 = 19.24
    assert events[0] == {
        "Dir": None,
        "Filename": AWR11.name,
        "Inst": "orcl",
        "Event": "db file sequential read",
        "Waits": 35732,
        "Time(s)": 6575,
        "Latency(us)": 184008.7,
        "IOPS": 98.8,
        "Stands for": None,  # not an Exadata cell event standing in for another
    }
    assert events[2]["IOPS"] == 19.2


# --- 19c PDB report with SQL*Plus OUTPUT page headings --------------------------------------


def test_awr19_parse():
    r = parse(AWR19)
    h = r.header
    assert (h["db_name"], h["release"], h["rac"], h["cdb"]) == ("RACDB", "19.0.0.0.0", "YES", "YES")
    assert (h["instance"], h["inst_num"], h["host"], h["sockets"]) == ("racdb1", 1, "rac1", 2)
    assert (h["elapsed_min"], h["db_time_min"]) == (60.0, 0.89)
    lp = r.load_profile
    assert len(lp) == 25  # rows on both sides of the "OUTPUT" page breaks
    assert lp["Executes (SQL)"] == {
        "per_second": 0.6,
        "per_transaction": 1062.5,
        "per_exec": None,
        "per_call": None,
    }
    assert lp["RAC GC blocks served"]["per_transaction"] == 1.0
    top = r.top_events
    assert len(top) == 10 and top[1].event == "DB CPU" and top[1].waits is None
    assert top[0].avg_wait_ms == pytest.approx(52860.0)  # "52.86 s"
    assert top[4].avg_wait_ms == pytest.approx(0.26869)  # "268.69us"
    fg = r.foreground_waits
    assert len(fg) == 16
    tx = r.wait("enq: TX - row lock contention")  # printed cut: "enq: TX - row lock content"
    # blank %Time-outs cell: positional slicing keeps Total Wait Time = 53 s, not 52.86
    assert (tx.waits, tx.time_s, tx.pct_time) == (1, 53, 98.9)
    assert tx.latency_us == pytest.approx(53e6)  # 53 s / 1 wait
    dfsr = r.wait("db file sequential read")
    assert (dfsr.waits, dfsr.time_s, dfsr.avg_wait_ms) == (13, 0, 3.23)
    assert dfsr.latency_us is None  # total printed as 0 s: unknown, never 0 µs
    assert r.background_waits is None and r.instance_activity is None and r.os_stats is None


def test_awr19_to_run():
    run = to_run(parse(AWR19), AWR19)
    m = run["metrics"]
    assert run["window"]["seconds"] == 3600.0
    assert run["config"]["UPDATE_PCT"] is None and run["sessions"] == []
    assert m["slobops_per_s"] == 0.6 and m["lio_per_s"] == 2.1
    assert m["pio_reads_per_s"] == 0.0  # 19c Load Profile "Read IO requests" fallback
    assert m["wal_mb_per_s"] == pytest.approx(2.4 / 2**20)
    assert m["db_time_s"] == pytest.approx(53.4)
    assert m["db_cpu_s"] == 0.4  # Time Model DB CPU 0.4 s
    assert m["db_read_latency_us"] is None and m["lfpw_latency_us"] is None
    assert run["waits"][0]["event"] == "enq: TX - row lock content"
    assert run["waits"][0]["pct"] == 100.0  # 53 s of 53 s non-idle (others print 0 s)
    (row,) = awr_rows([parse(AWR19)])
    assert row["TOP WAIT"] == "enq: TX - row lock contention 98.9%"


# --- Statspack ------------------------------------------------------------------------------


def test_statspack_excerpt():
    r = parse(SP12)
    assert r.kind == "statspack"
    h = r.header
    assert h["db_name"] is None  # blank in the report
    assert (h["db_id"], h["instance"], h["release"]) == ("402000462", "testing", "12.1.0.2.0")
    assert (h["host"], h["cpus"], h["memory_gb"]) == ("oracle11g", 1, 1.9)
    assert (h["begin_snap"], h["end_snap"]) == (1, 2)
    assert h["end_time"] == "2020-11-24T21:50:36"
    assert (h["elapsed_min"], h["db_time_min"]) == (10.32, 0.03)
    assert r.load_profile == {
        "DB time(s)": {
            "per_second": 0.0,
            "per_transaction": 0.1,
            "per_exec": 0.0,
            "per_call": 0.03,
        }
    }
    assert r.top_events is None and r.foreground_waits is None
    run = to_run(r, SP12)
    assert run["tool"]["name"] == "oracle-statspack"
    assert run["window"]["seconds"] == pytest.approx(619.2)  # 10.32 x 60
    assert run["metrics"]["slobops_per_s"] is None and run["waits"] == []
    assert event_rows([r]) == []


# --- robustness -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", [AWR11, AWR19, SP12])
def test_crlf_parses_identically(path):
    text = path.read_text(encoding="utf-8")
    a = parse_report(text, "x")
    b = parse_report(text.replace("\n", "\r\n"), "x")
    assert a.to_dict() == b.to_dict()


def test_truncated_in_wait_events(tmp_path):
    """A section cut before its closing rule: its rows before the cut are read (as awr_info
    reads them), the sections after it are absent (None), and the file and section are named."""
    text = AWR11.read_text(encoding="utf-8")
    cut = text[: text.index("latch: shared pool                    8")]
    bad = tmp_path / "awr.0.8.txt"
    bad.write_text(cut)
    r = parse_report(cut, str(bad))
    assert r.background_waits is None  # after the cut
    events = [ev.event for ev in r.foreground_waits]
    assert events[0] == "db file sequential read" and "latch: shared pool" not in events
    assert r.load("Executes") == 256.5 and r.top_events[0].waits == 35732  # before the cut
    assert r.problems == [
        f"{bad}: section 'Foreground Wait Events': ends before its closing rule (file truncated)"
    ]
    (row,) = awr_rows([r])
    assert row["DFSR_LAT"] == 184009  # its row was printed before the cut
    assert row["LFPW_LAT"] is None and "Foreground Wait Events" in row["NOTES"]
    reports, errors = parse_files([AWR11, bad, tmp_path / "missing.txt", AWR19])
    assert [Path(r.name).name for r in reports] == [AWR11.name, bad.name, AWR19.name]
    assert "Background Wait Events" in errors[0] and "End of Report" in errors[0]
    assert "Foreground Wait Events" in errors[1] and str(bad) in errors[1]
    assert "missing.txt" in errors[2] and AWR19.name in errors[3]


def test_truncated_header():
    text = AWR11.read_text(encoding="utf-8")
    cut = text[: text.index("   Elapsed:")]
    with pytest.raises(OracleReportError, match=r"awr\.txt.*header"):
        parse_report(cut, "awr.txt")
    with pytest.raises(OracleReportError, match="not an AWR or Statspack"):
        parse_report("hello\nworld\n", "notes.txt")


def test_unreadable_global_and_compare_reports_say_why():
    with pytest.raises(OracleReportError, match=r"Database Summary.*12\.2"):
        parse_report("WORKLOAD REPOSITORY REPORT (RAC)\n\n", "awrgrpt.txt")
    with pytest.raises(OracleReportError, match="compare-period"):
        parse_report("WORKLOAD REPOSITORY COMPARE PERIOD REPORT\n", "awrddrpt.txt")


def test_detection():
    assert looks_like_oracle_report(AWR11.read_text(encoding="utf-8"))
    assert looks_like_oracle_report(AWR19.read_text(encoding="utf-8"))
    assert looks_like_oracle_report(SP12.read_text(encoding="utf-8").replace("\n", "\r\n"))
    assert not looks_like_oracle_report('{"schema_version": 1}')
    assert not looks_like_oracle_report("Load Profile only\n")


# SYNTHETIC (not from a real report): the one real Instance Activity Stats found is cut after
# three pages, so the full table (closing rule, overflow cells) is checked on this hand-written
# block in the AWR 11g layout.
SYNTHETIC_ACTIVITY = """
Instance Activity Stats                      DB/Inst: ORCL/orcl  Snaps: 37-38
-> Ordered by statistic name

Statistic                                     Total     per Second     per Trans
-------------------------------- ------------------ -------------- -------------
execute count                               92,799          256.5          10.3
physical read IO requests                1,234,567        3,412.3         137.1
physical read bytes                  10,113,571,840   27,953,354.0   1,123,000.0
physical read total IO requests          1,240,000        3,427.3         137.7
physical write IO requests                  14,720           40.7           1.6
physical write bytes                   120,586,240      333,295.0      13,390.2
redo size                               20,582,833       56,890.1       2,287.8
user commits                                 9,000           24.9           1.0
weird overflow                                ####            1.2K         ####
          -------------------------------------------------------------
"""


def test_instance_activity_synthetic():
    text = AWR11.read_text(encoding="utf-8") + SYNTHETIC_ACTIVITY
    r = parse_report(text, "synthetic")
    assert r.stat("physical read IO requests") == 1234567
    assert r.stat("physical read IO requests", "per_second") == 3412.3
    assert r.instance_activity["weird overflow"] == {
        "total": None,
        "per_second": 1200.0,
        "per_trans": None,
    }
    m = to_run(r, "awr_0_32.txt")["metrics"]
    assert m["pio_reads_per_s"] == 3412.3  # requests, not the Load Profile's 130.9 blocks
    assert m["pio_read_mb_per_s"] == pytest.approx(27953354.0 / 2**20)  # 26.66 MB/s
    # Total / elapsed: 9,000 / 361.8 s = 24.876 (printed per Second: 24.9)
    assert m["commits_per_s"] == pytest.approx(9000 / 361.8)
    truncated = text[: text.index("user commits")]
    cut = parse_report(truncated, "cut")
    assert "user commits" not in cut.instance_activity and "redo size" in cut.instance_activity
    assert "'Instance Activity Stats': ends before its closing rule" in cut.problems[0]


def test_real_activity_pages_and_cut_file():
    """The real excerpt stops mid-section: a problem naming the file and the section; closed by
    the test, its three real pages (title and header repeated per page) read as one table."""
    text = AWR11_ACTIVITY.read_text(encoding="utf-8")
    cut = parse_report(text, str(AWR11_ACTIVITY))
    # the rows before the cut count (awr_info reads PREADS 105 from this file too)
    assert cut.stat("physical read IO requests", "per_second") == 105.1
    assert cut.problems == [
        f"{AWR11_ACTIVITY}: section 'Instance Activity Stats': ends before its closing rule "
        "(file truncated)"
    ]
    closed = text + "          " + "-" * 61 + "\n"
    r = parse_report(closed, "closed")
    # hand-read from the fixture: page 1 "Batched IO ...", page 3 "physical read ..."
    assert r.stat("Batched IO (full) vector count") == 208
    assert r.stat("physical read IO requests", "per_second") == 105.1
    assert r.stat("physical read total bytes") == 396_509_184
    assert "Statistic" not in r.instance_activity  # repeated column headers are not rows
    m = to_run(r, "awr.0.4.txt")["metrics"]
    assert m["pio_reads_per_s"] == 105.1  # requests/s; Load Profile "Physical reads" is blocks
    assert m["pio_read_mb_per_s"] == pytest.approx(1_072_251.4 / 2**20)
    assert m["wal_mb_per_s"] == pytest.approx(56_890.1 / 2**20)
