"""Issue 28: AWR / Statspack layouts and rules found on real reports, each on a constructed
excerpt in the real layout (the fixture's header says which layout and version it copies).

Expected figures are computed by hand from the fixture's printed cells (the arithmetic is in
each test's comments).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from openslob.analysis.compare import compare, load_side
from openslob.analysis.figures import value
from openslob.cli import cli
from openslob.oracle import awr_rows, parse_report, to_run
from openslob.oracle.model import name_params
from openslob.report import websummary
from openslob.results.collect import find_runs

DATA = Path(__file__).parents[1] / "data" / "oracle"
AWR11204 = DATA / "awr11204" / "awr.20.8.txt"


def _cli(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _row(path: Path) -> dict:
    report = parse_report(path.read_text(encoding="utf-8"), str(path))
    assert report.problems == []
    return awr_rows([report])[0]


# --- item 1: 11.2.0.4 / 12c split the activity statistics into Key and Other ----------------


def test_key_and_other_instance_activity_stats_are_read() -> None:
    report = parse_report(AWR11204.read_text(encoding="utf-8"), str(AWR11204))
    # Key Instance Activity Stats
    assert report.stat("user commits") == 6400
    assert report.stat("session logical reads", "per_second") == 8591.2
    # Other Instance Activity Stats
    assert report.stat("physical read IO requests", "per_second") == 45.8
    assert report.stat("redo synch writes") == 97
    row = awr_rows([report])[0]
    assert row["PREADS"] == 45  # awr_info truncates 45.8
    # 'physical read total bytes' 499,712.0/s / 2^20 = 0.4766 -> %.1f 0.5
    assert row["READ_MBS"] == 0.5
    # 'physical read bytes' 375,125.3/s / 2^20 = 0.35774 -> 0.358
    assert row["DB_READ_MBS"] == 0.358
    # 'physical write bytes' 259,413.3/s / 2^20 = 0.24740 -> 0.247
    assert row["DB_WRITE_MBS"] == 0.247


# --- item 4: a wait printed as 0 s and 0 ms is < half a unit, not 0 -----------------------


def test_zero_printed_wait_is_below_half_a_unit() -> None:
    row = _row(AWR11204)
    # db file parallel write: 446 waits, total '0' s, Avg '0' ms. Half a unit: 0.5 s / 446 =
    # 1,121 µs of the total, 0.5 ms = 500 µs of the average: the mean is < 500 µs, unknown.
    assert row["DFPW_LAT"] is None and row["DFPW_US"] is None
    assert "DFPW_US: < 500 µs (446 waits" in row["NOTES"]
    report = parse_report(AWR11204.read_text(encoding="utf-8"), str(AWR11204))
    ev = report.wait("db file parallel write", background=True)
    assert ev.precise_us is None and ev.zero_bound_us == pytest.approx(500.0)
    # a 0 average beside a non-zero total is a bound too: the total is taken
    # (latch: cache buffers chains prints 12 waits, 0 s, 0 ms: nothing to take)
    latch = report.wait("latch: cache buffers chains")
    assert latch.precise_us is None and latch.zero_bound_us == pytest.approx(500.0)


# --- item 7: JSON and CSV keep the precision the report prints ----------------------------


def test_json_keeps_printed_precision(tmp_path: Path) -> None:
    report = parse_report(AWR11204.read_text(encoding="utf-8"), str(AWR11204))
    table, exact = awr_rows([report])[0], awr_rows([report], exact=True)[0]
    assert (table["PREADS"], exact["PREADS"]) == (45, 45.8)  # printed 45.8 per Second
    assert (table["EXECUTES"], exact["EXECUTES"]) == (666, 666.9)
    assert (table["PWRITES"], exact["PWRITES"]) == (24, 24.1)
    # 499,712.0 / 2^20 = 0.4765625 (the table: awr_info's %.1f, 0.5)
    assert table["READ_MBS"] == 0.5 and exact["READ_MBS"] == pytest.approx(0.4765625, abs=1e-6)
    # 165,600.0 / 2^20 = 0.157928 (the table: bc scale=1, 0.1)
    assert (table["REDO_MBS"], exact["REDO_MBS"]) == (0.1, 0.157928)
    # 2 s / 2,180 waits = 917.43 µs (awr_info: %.0f, 917)
    assert (table["DFSR_LAT"], exact["DFSR_LAT"]) == (917, 917.43)
    assert exact["ELAPSED"] == 48.0
    out = _cli(["analyze", "--json", str(AWR11204)])
    assert '"PREADS": 45.8' in out and '"EXECUTES": 666.9' in out
    csv = _cli(["analyze", "--csv", str(AWR11204)]).splitlines()
    assert dict(zip(csv[0].split(","), csv[1].split(","), strict=False))["PREADS"] == "45.8"


# --- items 2 and 3: RAC instance reports of one snapshot pair ------------------------------

RAC_PAIR = DATA / "rac19c_pair"


def _rac_rows(exact: bool = False) -> list[dict]:
    refs = find_runs([RAC_PAIR])
    assert len(refs) == 1 and refs[0].oracle.scope == "cluster"
    return awr_rows([refs[0].oracle], exact=exact)


def test_read_mbs_is_never_another_statistic() -> None:
    """READ_MBS names 'physical read total bytes'; the Load Profile's 'Read IO (MB)' is
    'physical read bytes' (in ../rac19c/awr.txt: 524.1 MB/s = 549,599,990.3 / 2^20 of
    physical read bytes, where total bytes give 524.2), so it is never taken for it."""
    cluster, inst1, inst2 = _rac_rows(exact=True)
    # instance 1 prints Other Instance Activity Stats: 53,476.7 / 2^20 = 0.051 MiB/s
    assert inst1["READ_MBS"] == pytest.approx(0.051, abs=5e-4)
    assert inst1["DB_READ_MBS"] == 0.008  # 'physical read bytes' 8,355.8 / 2^20 = 0.00797
    # instance 2 prints no activity statistics: n/a with the reason, not the Load Profile's 0.0
    assert inst2["READ_MBS"] is None and inst2["WRITE_MBS"] is None
    assert "READ_MBS: n/a, the report prints no 'physical read total bytes'" in inst2["NOTES"]
    # DB_READ_MBS may take 'Read IO (MB)' (the same statistic), but it prints 0.0: < 0.05
    assert inst2["DB_READ_MBS"] is None
    assert "DB_READ_MBS: < 0.05 (Load Profile 'Read IO (MB)' prints 0.0)" in inst2["NOTES"]
    # the cluster: one instance's figure is not the cluster's
    assert cluster["READ_MBS"] is None


def test_cluster_share_is_of_time_model_db_time() -> None:
    """Instance shares: DB CPU 1.9 / DB time 3.2 s = 59.4 %, 1.8 / 3.2 = 56.3 %. The cluster:
    (1.9 + 1.8) / (3.2 + 3.2) = 57.8 %, between them. The headers' rounded 'DB Time: 0.05
    (mins)' (2 x 3.0 s) would give 3.7 / 6.0 = 61.7 %, outside both."""
    cluster, inst1, inst2 = _rac_rows()
    assert (inst1["TOP WAIT"], inst2["TOP WAIT"]) == ("DB CPU 59.4%", "DB CPU 56.3%")
    assert cluster["TOP WAIT"] == "DB CPU 57.8%"


# --- items 5 and 6: file names are not data; missing values are not agreement ---------------


def _mixed_dir(tmp_path: Path) -> Path:
    """SLOB-named 11.2.0.4 report, a 19c report named by its release and a counter, and the
    RAC pair (no UPDATE_PCT or sessions in their names, no host for the added-up cluster)."""
    shutil.copy(AWR11204, tmp_path / "awr.20.8.txt")
    shutil.copy(DATA / "rac19c" / "awr.txt", tmp_path / "awr_11204_1.txt")
    for path in RAC_PAIR.iterdir():
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def test_file_names_give_values_only_in_slob_naming_and_range(tmp_path: Path) -> None:
    assert name_params("awr_11204_1.txt") == (None, None)  # not SLOB's naming
    assert name_params("awr.11204.1.txt") == (None, None)  # UPDATE_PCT out of 0-100
    assert name_params("awr.20.0.txt") == (None, None)  # no run has 0 sessions
    assert name_params("awr.100.64.txt") == (100, 64)
    assert name_params("x/awr.txt.32") == (None, 32)
    folder = _mixed_dir(tmp_path)
    alone = json.loads(_cli(["analyze", "--json", str(folder / "awr_11204_1.txt")]))
    together = json.loads(_cli(["analyze", "--json", str(folder)]))
    mine = [row for row in together if row["FILE"] == "awr_11204_1.txt"]
    for row in (alone[0], mine[0]):  # the same alone and in its directory
        assert (row["UPDATE_PCT"], row["SESSIONS"]) == (None, None)
    slob = next(row for row in together if row["FILE"] == "awr.20.8.txt")
    assert (slob["UPDATE_PCT"], slob["SESSIONS"]) == (20, 8)


def test_what_was_tested_counts_runs_that_record_nothing(tmp_path: Path) -> None:
    refs = find_runs([_mixed_dir(tmp_path)])
    assert len(refs) == 3  # awr.20.8.txt, awr_11204_1.txt, the RAC pair as one cluster run
    page = websummary.tested(refs)
    cells = dict(re.findall(r"<tr><th>([^<]+)</th><td>(.*?)</td></tr>", page))
    # UPDATE_PCT and SESSIONS only from awr.20.8.txt: not the three runs' value
    varies = "not recorded (2 of 3 runs) <em>(varies)</em>"
    assert cells["Updates, % of ops (UPDATE_PCT)"] == f"20, {varies}"
    assert cells["Sessions (as run) (SESSIONS)"] == f"8, {varies}"
    # two hosts recorded, the cluster run none: three different things, not one host
    assert cells["hostname"].startswith("flashhost, mcracpoc2.exampl, not recorded (1 of 3")
    assert "UPDATE_PCT, SESSIONS" in page.split("</p>")[0]  # in the "varies" line


# --- deliver 2: the seeds' redo-sync and Exadata figures -----------------------------------

EXADATA = DATA / "exadata" / "awr.0.32.txt"


def test_commit_figures_of_the_plsql_commit_seed() -> None:
    row = _row(AWR11204)
    assert (row["REDO_SYNCH/s"], row["COMMITS/s"]) == (2.0, 133.3)  # as printed per Second
    assert row["COMMITS/SYNC"] == 65.98  # 6,400 user commits / 97 redo synch writes
    assert row["LFS_US"] == 10000.0  # log file sync: Avg 10 ms (1 s / 97 = 10.3 ms ± 5.2)
    run = to_run(parse_report(AWR11204.read_text(encoding="utf-8")), AWR11204)
    # the same in the results model: 6,400 / 48 s and 97 / 48 s; their ratio is the totals'
    assert run["metrics"]["commits_per_s"] == pytest.approx(133.333, abs=1e-3)
    assert run["metrics"]["wal_syncs_per_s"] == pytest.approx(2.0208, abs=1e-4)
    assert value(run, "commits_per_sync") == pytest.approx(6400 / 97)


def test_commits_per_sync_in_compare(tmp_path: Path) -> None:
    """The seed's second measurement (a loopback database link defeats the optimization):
    12,811 user commits and 6,564 redo synch writes, 1.95 commits per sync."""
    text = AWR11204.read_text(encoding="utf-8")
    text = text.replace(
        "redo synch writes                                97            2.0           0.0",
        "redo synch writes                             6,564          136.8           0.5",
    ).replace(
        "user commits                                  6,400          133.3           1.0",
        "user commits                                 12,811          266.9           1.0",
    )
    (tmp_path / "dblink").mkdir()
    (tmp_path / "dblink" / "awr.20.8.txt").write_text(text, encoding="utf-8")
    found = compare(load_side(AWR11204.parent), load_side(tmp_path / "dblink"))
    change = {c.figure: c for c in found.points[0].changes}["commits_per_sync"]
    assert change.base.median == pytest.approx(6400 / 97)  # 65.98
    assert change.cand.median == pytest.approx(12811 / 6564)  # 1.95
    assert change.change_pct == pytest.approx((12811 / 6564) / (6400 / 97) * 100 - 100)
    assert change.label == "Commits per redo sync"  # Oracle's words, not "per WAL sync"


def test_exadata_cell_events_stand_in_with_a_note() -> None:
    row = _row(EXADATA)
    # 'cell single block physical read': 3,778 s / 9,257,339 waits = 408.11 µs (Avg prints 0)
    assert (row["DFSR_LAT"], row["DFSR_US"]) == (408, 408.11)
    # 'cell list of blocks physical read': 2,730 s / 1,950,000 = 1,400 µs
    assert (row["DFPR_LAT"], row["DFPR_US"]) == (1400, 1400.0)
    assert (
        "DFSR_LAT/DFSR_US: 'cell single block physical read' (Exadata) stands in for "
        "'db file sequential read'" in row["NOTES"]
    )
    assert "'cell list of blocks physical read' (Exadata) stands in for" in row["NOTES"]
    # the seed's Physical reads 197,068.2 blocks/s are in 37,213.0 read requests/s
    # (11,208,549 / 301.2 s = 37,212.98, printed 37,213.0): 5.3 blocks per request (prefetch)
    assert row["PREADS"] == 37213 and row["PREAD_BLKS"] == 197068.2
    metrics = to_run(parse_report(EXADATA.read_text(encoding="utf-8")), EXADATA)["metrics"]
    assert metrics["db_read_latency_us"] == pytest.approx(3778 / 9_257_339 * 1e6)
    assert metrics["dfpr_latency_us"] == pytest.approx(2730 / 1_950_000 * 1e6)
    terms = to_run(parse_report(EXADATA.read_text(encoding="utf-8")), EXADATA)["engine"]["terms"]
    assert terms["read_event"] == "cell single block physical read"  # which event stood in
    # the event view: each cell event under its own name, with the event it stands for
    events = json.loads(_cli(["analyze", "--events", "--json", str(EXADATA)]))
    cells = {e["Event"]: e["Stands for"] for e in events if e["Event"].startswith("cell")}
    assert cells == {
        "cell single block physical read": "db file sequential read",
        "cell list of blocks physical read": "db file parallel read",
        "cell multiblock physical read": "db file scattered read",
    }
    single = next(e for e in events if e["Event"] == "cell single block physical read")
    assert single["IOPS"] == 30734.9  # 9,257,339 / 301.2 s


def test_a_named_read_event_is_never_replaced() -> None:
    """A report listing 'db file sequential read' keeps it, whatever cell events it lists."""
    text = EXADATA.read_text(encoding="utf-8").replace(
        "cell multiblock physical r        1,210",  # the 26-character event column
        "db file parallel read             1,210",
    )
    row = awr_rows([parse_report(text, "x")])[0]
    # 3 s / 1,210 = 2,479.34 µs: the named event, not the 1,400 µs cell list of blocks
    assert row["DFPR_US"] == 2479.34
    assert "stands in for 'db file parallel read'" not in row["NOTES"]


def test_cluster_latency_from_the_instances_printed_averages() -> None:
    """19c prints totals in whole seconds (0 s here) beside precise averages: the cluster's
    latency is their waits-weighted mean, not n/a. db file sequential read: (540 x 740.74 µs
    + 498 x 1,000 µs) / 1,038 = 865.12 µs; db file parallel write: (182 x 604.40 + 160 x
    625.00) / 342 = 614.04 µs."""
    cluster, inst1, inst2 = _rac_rows()
    assert (inst1["DFSR_US"], inst2["DFSR_US"], cluster["DFSR_US"]) == (740.74, 1000.0, 865.12)
    assert cluster["DFPW_US"] == 614.04
    assert cluster["DFSR_LAT"] is None  # awr_info's total ÷ waits: 0 s printed, unknown


def test_a_cluster_takes_names_only_where_its_instances_agree(tmp_path: Path) -> None:
    """Instance reports named awr.20.1.txt and awr.20.2.txt: each alone says 1 and 2
    sessions; added up, the cluster run says neither (the first instance's would make a
    file's SESSIONS change with the files beside it); UPDATE_PCT 20 is agreed."""
    shutil.copy(RAC_PAIR / "awr_racx1.txt", tmp_path / "awr.20.1.txt")
    shutil.copy(RAC_PAIR / "awr_racx2.txt", tmp_path / "awr.20.2.txt")
    alone = find_runs([tmp_path / "awr.20.2.txt"])
    assert alone[0].run["config"]["SESSIONS"] == 2
    (cluster,) = find_runs([tmp_path])
    assert cluster.run["config"]["UPDATE_PCT"] == 20
    assert cluster.run["config"]["SESSIONS"] is None
    row = awr_rows([cluster.oracle])[0]
    assert "SESSIONS: n/a, the instance reports' names disagree [1, 2]" in row["NOTES"]


def test_html_table_of_reports_has_the_commit_and_exadata_columns() -> None:
    from openslob.report.html import _table

    page = _table(find_runs([AWR11204.parent, EXADATA.parent]))
    for header in ("REDO_SYNCH/s", "COMMITS/s", "COMMITS/SYNC", "LFS_US", "NOTES"):
        assert f">{header}<" in page
    assert 'data-v="65.98"' in page  # 6,400 / 97, the cell's raw value
    assert "(Exadata) stands in for &#x27;db file sequential read&#x27;" in page
