"""analyze / plot / report --html from the command line, on real recorded runs (no server)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from openslob.cli import cli

RUNS = Path(__file__).parents[1] / "data" / "runs"
READ_ONLY = RUNS / "20261122T053536Z-ro1"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout  # a note on stderr (an unreadable report) is not part of the table


@pytest.fixture()
def sweep_dir(tmp_path: Path) -> Path:
    """A two-point sweep directory made of recorded runs, per the collect.py contract."""
    path = tmp_path / "sweep-x"
    points = []
    for name, source in (
        ("update_pct-0_sessions-4", READ_ONLY),
        ("update_pct-20_sessions-4", RUNS / "20261122T050803Z-smoke"),
    ):
        shutil.copytree(source, path / name)
        run = json.loads((path / name / "run.json").read_text())
        points.append(
            {
                "name": name,
                "run_dir": name,
                "status": "complete",
                "error": None,
                "started": None,
                "finished": None,
                "params": {"UPDATE_PCT": run["config"]["UPDATE_PCT"], "SESSIONS": 4},
            }
        )
    sweep = {
        "schema_version": 1,
        "kind": "sweep",
        "label": "x",
        "created": "2026-11-22",
        "axes": {"UPDATE_PCT": [0, 20], "SESSIONS": [4]},
        "base": {},
        "points": points,
    }
    (path / "sweep.json").write_text(json.dumps(sweep))
    return path


def test_analyze_table_csv_json(sweep_dir: Path) -> None:
    table = invoke("analyze", str(sweep_dir))
    assert "EXECUTES/s" in table and "update_pct-20_sessions-4" in table
    run = json.loads((READ_ONLY / "run.json").read_text())
    assert f"{run['metrics']['pio_reads_per_s']:,.0f}" in table  # reproduces run.json
    rows = list(csv.DictReader(io.StringIO(invoke("analyze", "--csv", str(sweep_dir)))))
    assert [r["run"] for r in rows] == ["update_pct-0_sessions-4", "update_pct-20_sessions-4"]
    assert float(rows[0]["preads_per_s"]) == pytest.approx(run["metrics"]["pio_reads_per_s"])
    parsed = json.loads(invoke("analyze", "--json", str(sweep_dir)))
    assert parsed[1]["update_pct"] == 20 and parsed[0]["sweep"] == "x"


def test_analyze_events_and_timeseries() -> None:
    events = invoke("analyze", "--events", str(READ_ONLY))
    assert "DataFileRead" in events and "device read" in events
    verdict = invoke(
        "analyze",
        "--timeseries",
        "--skip-seconds",
        "2",
        "--baseline-seconds",
        "10",
        "--min-seconds",
        "3",
        str(READ_ONLY),
    )
    assert "steady" in verdict and "no degradation" in verdict


def test_plot_writes_png_and_svg(sweep_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "plots"
    listed = invoke("plot", str(sweep_dir), "-o", str(out)).split()
    names = {Path(p).name for p in listed}
    assert {"petal_iops_db_read.png", "petal_iops_db_read.svg", "petal_mbps_db_read.png"} <= names
    assert any(n.startswith("timeseries_") for n in names)
    assert any(n.startswith("latency_") for n in names)
    for path in map(Path, listed):
        assert path.stat().st_size > 1000
    assert (out / "petal_iops_db_read.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_rejects_unknown_format(sweep_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["plot", str(sweep_dir), "--format", "gif"])
    assert result.exit_code == 1 and "--format=gif" in result.output


def _offline(page: str) -> None:
    """Everything inline: no script, style sheet or image fetched from anywhere (the page is
    opened in a real browser, with its network traffic checked, in test_html_report.py)."""
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", page)
    assert "<script>" in page  # the charting library and report.js, inline
    assert not re.search(r'(src|href)="https?://', page)


def charts(page: str) -> int:
    return page.count('<div class="chart">')


def test_html_report_for_a_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(READ_ONLY, run_dir)
    out = invoke("report", str(run_dir), "--html").strip()
    page = Path(out).read_text()
    assert Path(out) == run_dir / "report.html"
    assert charts(page) >= 2  # time series + latency histogram
    assert "Load Profile" in page and "EXECUTES/s" in page
    _offline(page)


def test_html_report_for_a_sweep(sweep_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "sweep.html"
    invoke("report", str(sweep_dir), "--html", "-o", str(target))
    page = target.read_text()
    assert charts(page) >= 2  # petal vs IOPS and vs MB/s
    assert page.count("<details><summary>update_pct-") == 2  # one section per run
    _offline(page)


ORACLE = Path(__file__).parents[1] / "data" / "oracle"


def test_analyze_oracle_reports(tmp_path: Path) -> None:
    table = invoke("analyze", "--awr", str(ORACLE))
    assert "DFSR_LAT" in table and "awr_11.2.0.1_orcl_swingbench.txt" in table
    # 35,732 waits of db file sequential read in 6,575 s: 184,008.7 us (not the rounded ms);
    # DFSR_LAT in whole µs as awr_info prints it, DFSR_US to the hundredth
    assert "184,009" in table and "184,008.7" in table
    rows = list(
        csv.DictReader(io.StringIO(invoke("analyze", "--awr", "--events", "--csv", str(ORACLE))))
    )
    assert {"Filename", "Event", "Waits", "Latency(us)"} <= set(rows[0])
    broken = tmp_path / "awr.20.8.txt"
    broken.write_text("WORKLOAD REPOSITORY report for\n")
    result = CliRunner().invoke(
        cli, ["analyze", str(broken), *sorted(map(str, ORACLE.glob("*.txt")))]
    )
    assert result.exit_code == 0, result.output
    assert str(broken) in result.output or "awr.20.8.txt" in result.output  # named, not fatal
    assert "awr_19c_pdb_racdb1.txt" in result.output


def _oracle_dir(tmp_path: Path) -> Path:
    """A flashdba-style directory: two readable reports, a broken one, a note, a real cut one."""
    from tests.unit.test_oracle import SYNTHETIC_ACTIVITY

    awr = tmp_path / "oracle-x"
    awr.mkdir()
    awr11 = (ORACLE / "awr_11.2.0.1_orcl_swingbench.txt").read_text()
    (awr / "awr.0.4.txt").write_text(awr11 + SYNTHETIC_ACTIVITY)
    shutil.copy(ORACLE / "awr_19c_pdb_racdb1.txt", awr / "awr.20.8.txt")
    shutil.copy(ORACLE / "awr_11.2.0.1_orcl_swingbench_activity.txt", awr / "awr.0.2.txt")
    (awr / "awr.30.1.txt").write_text("WORKLOAD REPOSITORY report for\n")
    (awr / "notes.txt").write_text("sessions 4 and 8 on the new array\n")
    return awr


def test_oracle_directory_is_runs(tmp_path: Path) -> None:
    from openslob.model.errors import OpenslobError
    from openslob.report.plots import petal_points
    from openslob.results.collect import find_runs

    awr = _oracle_dir(tmp_path)
    errors: list[str] = []
    refs = find_runs([awr], errors)
    # notes.txt is no report; the cut awr.0.2.txt is still a run, for the figures it holds
    assert [r.name for r in refs] == ["awr.0.2.txt", "awr.0.4.txt", "awr.20.8.txt"]
    assert {r.label for r in refs} == {"oracle-x"}  # one directory = one sweep in the legend
    assert refs[1].point == {"UPDATE_PCT": 0, "SESSIONS": 4}
    assert len(errors) == 4  # every file not read fully is named, with the section at fault
    assert "awr.0.2.txt" in errors[0] and "'Instance Activity Stats': ends before" in errors[0]
    assert "awr.0.4.txt" in errors[1] and "End of Report" in errors[1]  # excerpt: no end
    assert "awr.20.8.txt" in errors[2] and "awr.30.1.txt" in errors[3] and "header" in errors[3]
    with pytest.raises(OpenslobError, match=r"awr\.0\.2\.txt"):
        find_runs([awr])  # without a list to report into, a bad file is an error
    points, skipped = petal_points(refs, "iops", "db_read")
    # reads 3,412.3 + writes 40.7 requests/s; 35,732 waits in 6,575 s of db file sequential read
    # (the cut awr.0.2.txt: its pages before the cut give 105.1 + 26.x requests/s)
    assert [(p.sessions, round(p.x, 1), round(p.y, 1)) for p in points][1] == (4, 3453.0, 184008.7)
    assert [p.sessions for p in points] == [2, 4]
    assert skipped == ["awr.20.8.txt"]  # 19c lab report: no single-block read time measured


def test_oracle_directory_from_the_cli(tmp_path: Path) -> None:
    awr = _oracle_dir(tmp_path)
    result = CliRunner().invoke(cli, ["analyze", str(awr)])
    assert result.exit_code == 0, result.output
    assert "DFSR_LAT" in result.output and "3,412" in result.output
    assert "awr.30.1.txt" in result.output  # named on stderr, the others still analysed
    rows = json.loads(invoke("analyze", "--json", str(awr / "awr.0.4.txt")))
    # JSON keeps the printed 3,412.3 (the table prints awr_info's %d, 3,412)
    assert rows[0]["PREADS"] == 3412.3 and rows[0]["SESSIONS"] == 4
    plots = tmp_path / "plots"
    out = invoke("plot", str(awr), "--kind", "petal", "-o", str(plots))
    assert "petal_iops_db_read.png" in out
    assert (plots / "petal_iops_db_read.png").stat().st_size > 10_000
    page_file = tmp_path / "awr.html"
    invoke("report", str(awr), "--html", "-o", str(page_file))
    page = page_file.read_text()
    assert "DFSR_LAT" in page and charts(page) >= 2 and "Load Profile" in page  # AWR text
    _offline(page)
    mixed = CliRunner().invoke(cli, ["analyze", "--awr", str(awr), str(READ_ONLY)])
    assert mixed.exit_code == 1 and "not an Oracle report" in mixed.output


def test_oracle_names_given_by_pattern(tmp_path: Path) -> None:
    """SLOB's runit.sh leaves awr.txt; a user's directories carry the values instead."""
    from openslob.oracle.model import name_pattern
    from openslob.results.collect import find_runs
    from tests.unit.test_oracle import SYNTHETIC_ACTIVITY

    awr11 = (ORACLE / "awr_11.2.0.1_orcl_swingbench.txt").read_text() + SYNTHETIC_ACTIVITY
    awr11 += "\nEnd of Report\n"  # a whole report: find_runs without an error list raises
    for sessions in (4, 8):
        run = tmp_path / "ssd" / f"run_{sessions}s_20u"
        run.mkdir(parents=True)
        (run / "awr.txt").write_text(awr11)
    plain = find_runs([tmp_path / "ssd"])
    assert [r.point for r in plain] == [{}, {}]  # awr.txt says nothing by itself
    regex = r"run_(?P<sessions>\d+)s_(?P<pct>\d+)u/awr\.txt$"
    refs = find_runs([tmp_path / "ssd"], oracle_names=name_pattern(regex))
    assert [r.point for r in refs] == [
        {"UPDATE_PCT": 20, "SESSIONS": 4},
        {"UPDATE_PCT": 20, "SESSIONS": 8},
    ]
    rows = json.loads(invoke("analyze", "--json", "--oracle-names", regex, str(tmp_path / "ssd")))
    assert [r["SESSIONS"] for r in rows] == [4, 8]
    out = invoke("plot", str(tmp_path / "ssd"), "--oracle-names", regex, "-o", str(tmp_path / "p"))
    assert "petal_iops_db_read.png" in out
    bad = CliRunner().invoke(cli, ["analyze", "--oracle-names", "run_(\\d+)", str(tmp_path)])
    assert bad.exit_code == 2 and "--oracle-names" in bad.output and "(?P<pct>" in bad.output


def test_not_a_run_is_one_line(tmp_path: Path) -> None:
    bogus = tmp_path / "x"
    bogus.mkdir()
    (bogus / "run.json").write_text("not json")
    result = CliRunner().invoke(cli, ["analyze", str(bogus)])
    assert result.exit_code == 1 and "not a readable run.json" in result.output
