"""RAC global and instance reports -> cluster and per-instance rows; refused and cut reports named
on stderr, in the HTML report and in the exit code. Fixtures: tests/data/oracle/rac19c (real
excerpts of a public 19c RAC SLOB run; provenance in each file's header)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from openslob.cli import cli
from openslob.oracle import awr_rows, combine, parse_report, to_run
from openslob.oracle.model import label
from openslob.results.collect import find_runs

DATA = Path(__file__).parents[1] / "data" / "oracle"
GLOBAL = DATA / "rac19c" / "awr_rac.txt"
INST2 = DATA / "rac19c" / "awr.txt"


def parse(path: Path):
    report = parse_report(path.read_text(encoding="utf-8"), str(path))
    label(report, path)
    return report


def test_global_report_cluster_and_instance_rows() -> None:
    g = parse(GLOBAL)
    assert g.scope == "cluster" and g.problems == []
    assert (g.header["db_name"], g.header["begin_snap"], g.header["end_snap"]) == ("P30SDB", 41, 42)
    cluster, inst1, inst2 = awr_rows([g])
    assert (cluster["INST"], inst1["INST"], inst2["INST"]) == (
        "p30sdb1+p30sdb2",
        "p30sdb1",
        "p30sdb2",
    )
    # System Statistics (Global), per Second column
    assert (cluster["PREADS"], cluster["PWRITES"], cluster["EXECUTES"]) == (133003, 42, 42813)
    assert cluster["READ_MBS"] == 1040.1  # 1.09061742E+09 / 2^20 = 1,040.09
    assert cluster["LIO"] == 214934 and cluster["REDO_MBS"] == 0.0  # 36,276.6 B/s
    # Time Model Sum / 5.41 min: DB CPU 12,810.9 s -> 39.47/s; + bg CPU 1,785.9 s -> 44.97/s
    assert (cluster["DB CPU"], cluster["DB+BG CPU"], cluster["DB Tm"]) == (39.47, 44.97, 210.12)
    # Foreground/Background Wait Events (Global): 42,909.09 s / 42,785,842; 6.89 s / 777
    assert (cluster["DFSR_LAT"], cluster["LFPW_LAT"]) == (1003, 8867)
    assert cluster["TOP WAIT"] == "db file sequential read 62.9%"
    # the author's IOPS table (IOStress/M/M.md, UPDATE_PCT 0): 133,013.57 reads, 54.49 writes
    # per second: System Statistics physical reads / writes (blocks)
    assert cluster["PREAD_BLKS"] == pytest.approx(133013.57, abs=0.05)
    assert cluster["PWRITE_BLKS"] == pytest.approx(54.49, abs=0.05)
    # per instance: Time Model and System Statistics - Per Second rows, own top events
    assert (inst1["ELAPSED"], inst1["EXECUTES"], inst1["PREAD_BLKS"]) == (325, 20948, 65923.7)
    assert inst1["DB CPU"] == pytest.approx(6346.1 / (5.42 * 60), abs=0.005)
    assert inst1["REDO_MBS"] == 0.0 and inst2["PWRITE_BLKS"] == 23.6
    assert inst1["LFPW_LAT"] == 9019  # 4.23 s / 469 waits, from the instance's top 10
    assert inst1["PREADS"] is None and "cluster only" in inst1["NOTES"]
    assert inst1["PREAD_BLKS"] + inst2["PREAD_BLKS"] == pytest.approx(cluster["PREAD_BLKS"])


def test_global_report_is_one_run_for_analyze_and_plots() -> None:
    run = to_run(parse(GLOBAL), GLOBAL)
    assert run["metrics"]["pio_reads_per_s"] == 133003.1
    assert run["metrics"]["db_read_latency_us"] == pytest.approx(42909.09 / 42785842 * 1e6)
    assert run["engine"]["target"] == "P30SDB/p30sdb1+p30sdb2"


def test_instance_report_beside_its_global_report(tmp_path: Path) -> None:
    """PoC-FlashGrid keeps awr.txt (one instance) and awr_rac.txt (global) per run."""
    run_dir = tmp_path / "update0"
    shutil.copytree(GLOBAL.parent, run_dir)
    refs = find_runs([run_dir])
    assert len(refs) == 1 and refs[0].name == "awr_rac.txt"  # one run: the cluster
    cluster, inst1, inst2 = awr_rows([refs[0].oracle])
    assert (inst1["FILE"], inst2["FILE"]) == ("awr_rac.txt", "awr.txt")  # instance 2's own file
    assert inst2["PREADS"] == 67088 and inst2["READ_MBS"] == 524.2  # its Instance Activity
    assert cluster["DIR"] == inst2["DIR"] == "update0"


def _instance_1() -> str:
    """SYNTHETIC: instance 2's real report relabelled as instance 1 of the same snapshot pair
    (same figures), so that adding two instance reports up can be checked by hand."""
    text = INST2.read_text(encoding="utf-8")
    return text.replace("p30sdb2             2", "p30sdb1             1").replace(
        "p30sdb2", "p30sdb1"
    )


def test_instance_reports_add_up(tmp_path: Path) -> None:
    one = tmp_path / "awr_inst1.txt"
    one.write_text(_instance_1())
    reports = [parse(one), parse(INST2)]
    (cluster,) = combine(reports)
    assert cluster.scope == "cluster" and [r.header["inst_num"] for r in cluster.instances] == [
        1,
        2,
    ]
    row, r1, r2 = awr_rows([cluster])
    assert row["INST"] == "p30sdb1+p30sdb2" and row["FILE"] == "awr_inst1.txt + awr.txt"
    # rates add: 67,088.2 x 2 requests/s; 21,865.2 x 2 executes/s; 19.9 x 2 DB CPU
    assert (row["PREADS"], row["EXECUTES"], row["DB CPU"]) == (134176, 43730, 39.8)
    assert row["READ_MBS"] == 1048.5  # 549,696,685.0 x 2 / 2^20 = 1,048.45
    # latency: summed time / summed waits: 6 s / 616 waits
    assert row["LFPW_LAT"] == 9740 and row["DFSR_LAT"] == 757
    assert row["TOP WAIT"] == "db file sequential read 53.3%"  # 32,718 s of 61,369.2 s
    assert (r1["PREADS"], r2["PREADS"]) == (67088, 67088)
    assert combine([parse(INST2), parse(INST2)])[0].scope == "instance"  # same instance twice


def test_truncated_global_report_names_the_section() -> None:
    text = GLOBAL.read_text(encoding="utf-8")
    cut = parse_report(text[: text.index("physical write IO requests")], "g.txt")
    assert (
        "g.txt: section 'System Statistics (Global)': ends before its closing rule"
        in (cut.problems[0])
    )
    (row, *_) = awr_rows([cut])
    assert row["PREADS"] == 133003 and row["PWRITES"] is None  # read before / after the cut


# --- the CLI: named on stderr, in the HTML, and exit 1 when nothing could be read -----------


def test_everything_refused_says_why(tmp_path: Path) -> None:
    compare = tmp_path / "awrdiff.txt"
    compare.write_text("WORKLOAD REPOSITORY COMPARE PERIOD REPORT\n")
    for args in (["analyze", str(tmp_path)], ["analyze", "--awr", str(compare)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, result.output
        assert "nothing could be read" in result.output and "compare-period" in result.output
        assert "no run.json" not in result.output


def test_cut_report_named_on_stderr_and_in_html(tmp_path: Path) -> None:
    text = INST2.read_text(encoding="utf-8")
    cut = tmp_path / "awr.0.4.txt"
    cut.write_text(text[: text.index("\nInstance Activity Stats ")])  # cut between sections
    result = CliRunner().invoke(cli, ["analyze", str(cut)])
    assert result.exit_code == 0
    assert "section 'Background Wait Events': the file ends here without 'End of Report'" in (
        result.output
    )
    page = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["report", str(tmp_path), "--html", "-o", str(page)])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "Not read (fully)" in html and "without &#x27;End of Report&#x27;" in html
