"""analyze: the awr_info table, the event view and the degradation detector, on real run.json
files (tests/data/runs, snapshots stripped) and synthetic time series. No database."""

from __future__ import annotations

import copy
import csv
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from openslob.analysis.awrinfo import (
    COLUMNS,
    analyze_rows,
    event_rows,
    render_csv,
    render_events,
    render_json,
    render_table,
)
from openslob.analysis.sustained import detect_degradation, load_timeseries, render_degradation
from openslob.results.collect import RunRef, find_runs
from openslob.results.rundir import load_run

RUNS = Path(__file__).parents[1] / "data" / "runs"
RO = RUNS / "20261122T053536Z-ro1"  # read-only, complete, select histogram only
MIXED = RUNS / "20261122T050803Z-smoke"  # UPDATE_PCT=20, complete, select + update
FAILED = RUNS / "20261122T052706Z"  # server died: database figures and latency are null


def ref(path: Path) -> RunRef:
    return RunRef(path, load_run(path))


def row_of(path: Path) -> dict[str, Any]:
    return analyze_rows([ref(path)])[0]


def independent_percentile(run: dict[str, Any], pct: float) -> float:
    """Cumulate the raw [lower, upper, count] buckets of every op type; bucket midpoint."""
    counts: dict[tuple[int, int], int] = {}
    for summary in run["latency"].values():
        for lower, upper, count in summary["histogram"]["buckets"] if summary else []:
            counts[(lower, upper)] = counts.get((lower, upper), 0) + count
    rank = pct / 100 * sum(counts.values())
    seen = 0
    for lower, upper in sorted(counts):
        seen += counts[(lower, upper)]
        if seen >= rank:
            return lower if upper - lower == 1 else (lower + upper) / 2
    raise AssertionError("rank beyond the histogram")


# --- the awr_info table -------------------------------------------------------------------


def test_columns_in_awr_info_order() -> None:
    assert [c.header for c in COLUMNS] == [
        "RUN", "SWEEP", "REPEAT", "PAGE_KB", "SESSIONS", "UPDATE_PCT", "ELAPSED", "DB CPU",
        "DB TIME", "EXECUTES/s", "LIO/s", "PREADS/s", "READ_MB/s", "PWRITES/s", "WRITE_MB/s",
        "REDO_MB/s", "DB_READ_US", "DEV_READ_US", "WAL_SYNC_US", "COMMITS/s", "LOG_SYNCS/s",
        "COMMITS/SYNC", "OP_P50_US", "OP_P99_US", "STATUS", "TOP_WAIT",
    ]  # fmt: skip
    assert len({c.key for c in COLUMNS}) == len(COLUMNS)


def test_every_column_from_a_known_run() -> None:
    run = load_run(MIXED)
    m = run["metrics"]
    row = row_of(MIXED)
    assert row == {
        "run": MIXED.name,
        "sweep": None,
        "repeat": None,  # a run of its own, not a repeat of a sweep point
        "page_kib": int(run["engine"]["settings"]["block_size"]) / 1024,  # 8 KiB on PostgreSQL
        "sessions": len(run["sessions"]),
        "update_pct": 20,
        "elapsed_s": run["window"]["seconds"],
        "db_cpu_s": m["db_cpu_s"],
        "db_time_s": m["db_time_s"],
        "executes_per_s": m["slobops_per_s"],
        "lio_per_s": m["lio_per_s"],
        "preads_per_s": m["pio_reads_per_s"],
        "read_mb_per_s": m["pio_read_mb_per_s"],
        "pwrites_per_s": m["pio_writes_per_s"],
        "write_mb_per_s": m["pio_write_mb_per_s"],
        "redo_mb_per_s": m["wal_mb_per_s"],
        "db_read_us": m["db_read_latency_us"],
        "dev_read_us": m["device_read_latency_us"],
        "wal_sync_us": m["wal_sync_latency_us"],
        "commits_per_s": m["commits_per_s"],
        "log_syncs_per_s": m["wal_syncs_per_s"],
        "commits_per_sync": m["commits_per_s"] / m["wal_syncs_per_s"],
        "op_p50_us": independent_percentile(run, 50),
        "op_p99_us": independent_percentile(run, 99),
        "status": "complete",
        "top_wait": "IO:DataFileRead 67.9%",
    }
    # hand-checked against run.json
    assert row["executes_per_s"] == 507.3
    assert row["sessions"] == 4
    # commits per WAL flush (issue 28): 106.8 commits/s / 109.5 WAL syncs/s = 0.975
    assert row["commits_per_sync"] == pytest.approx(0.975, abs=5e-4)
    # merged select + update lies between the two op types' own percentiles
    lat = run["latency"]
    assert lat["select"]["p99_us"] <= row["op_p99_us"] <= lat["update"]["p99_us"]


def test_op_percentiles_of_one_op_type_match_the_runs_own_summary() -> None:
    run = load_run(RO)
    row = row_of(RO)
    assert run["latency"]["update"] is None and run["latency"]["scan"] is None
    assert row["op_p50_us"] == run["latency"]["select"]["p50_us"]
    assert row["op_p99_us"] == run["latency"]["select"]["p99_us"]


def test_table_alignment_and_number_formats() -> None:
    rows = analyze_rows([ref(MIXED), ref(RO)])
    lines = render_table(rows).splitlines()
    header, rule, mixed, ro = lines
    assert header.startswith("RUN") and set(rule) <= {"-", " "}
    # right-aligned numbers end where their header ends; text starts where its header starts
    for title, text in (("LIO/s", "47,309"), ("EXECUTES/s", "507.3"), ("REDO_MB/s", "1.73")):
        assert mixed.index(text) + len(text) == header.index(title) + len(title)
    assert mixed.index("complete") == header.index("STATUS")
    assert ro[header.index("SWEEP")] == "-"  # not part of a sweep
    assert "39,624" in ro and "0.00" in ro  # thousands separators; a measured zero stays 0


def test_unmeasured_figures_are_na_empty_null_never_zero() -> None:
    row = row_of(FAILED)
    none = [k for k, v in row.items() if v is None]
    assert set(none) >= {"db_time_s", "executes_per_s", "preads_per_s", "op_p50_us", "op_p99_us"}
    assert row["dev_read_us"] == 66.617  # the device was still measured

    line = render_table([row]).splitlines()[2]
    # the sweep's and repeat's None print as "-"
    assert line.split().count("n/a") == len(none) - 2

    header, values = list(csv.reader(render_csv([row]).splitlines()))
    cells = dict(zip(header, values, strict=True))
    assert all(cells[k] == "" for k in none)
    assert cells["executes_per_s"] == "" and cells["dev_read_us"] == "66.617"

    data = json.loads(render_json([row]))
    assert all(data[0][k] is None for k in none)


def test_a_run_from_an_older_tool_with_keys_missing_still_renders(tmp_path: Path) -> None:
    run = load_run(MIXED)
    for key in ("latency", "waits", "sessions", "status"):
        del run[key]
    del run["metrics"]["db_time_s"]
    del run["metrics"]["wal_sync_latency_us"]
    run["window"] = None
    run["config"] = {"SCALE": 8192}  # UPDATE_PCT unknown then
    old = tmp_path / "old-run"
    old.mkdir()
    (old / "run.json").write_text(json.dumps(run))
    row = analyze_rows(find_runs([old]))[0]
    for key in ("sessions", "update_pct", "elapsed_s", "db_time_s", "wal_sync_us"):
        assert row[key] is None, key
    for key in ("op_p50_us", "op_p99_us", "status", "top_wait"):
        assert row[key] is None, key
    assert row["executes_per_s"] == 507.3
    assert "n/a" in render_table([row])
    render_csv([row])
    render_json([row])


def test_a_malformed_histogram_is_unknown_not_wrong() -> None:
    run = copy.deepcopy(load_run(RO))
    run["latency"]["select"]["histogram"]["buckets"].append([130, 140, 5])  # not our scheme
    row = analyze_rows([RunRef(Path("odd"), run)])[0]
    assert row["op_p50_us"] is None and row["op_p99_us"] is None
    assert row["executes_per_s"] == run["metrics"]["slobops_per_s"]


def make_sweep(tmp_path: Path) -> Path:
    """A sweep directory per the collect.py contract, points copied from real runs."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    points = []
    for name, source, pct, ops in (
        ("update_pct-0_sessions-4", RO, 0, 700.0),
        ("update_pct-20_sessions-4", MIXED, 20, 500.0),
        ("update_pct-40_sessions-4", None, 40, None),  # not run yet
    ):
        status = "pending"
        if source is not None:
            status = "complete"
            shutil.copytree(source, sweep / name)
            run = json.loads((sweep / name / "run.json").read_text())
            run["config"]["UPDATE_PCT"] = pct
            run["metrics"]["slobops_per_s"] = ops
            (sweep / name / "run.json").write_text(json.dumps(run))
        points.append(
            {
                "name": name,
                "params": {"UPDATE_PCT": pct, "SESSIONS": 4},
                "status": status,
                "run_dir": name,
                "started": None,
                "finished": None,
                "error": None,
            }
        )
    (sweep / "sweep.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "kind": "sweep",
                "label": "petal",
                "created": "2026-11-22T05:00:00+00:00",
                "axes": {"UPDATE_PCT": [0, 20, 40], "SESSIONS": [4]},
                "base": {"SCALE": 8192},
                "points": points,
            }
        )
    )
    return sweep


def test_sweep_and_plain_runs(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    rows = analyze_rows(find_runs([sweep, FAILED]))
    assert [(r["run"], r["sweep"], r["update_pct"], r["executes_per_s"]) for r in rows] == [
        ("update_pct-0_sessions-4", "petal", 0, 700.0),
        ("update_pct-20_sessions-4", "petal", 20, 500.0),
        (FAILED.name, None, 20, None),
    ]
    header, _, *lines = render_table(rows).splitlines()
    at = header.index("SWEEP")
    assert [line[at : at + 5] for line in lines] == ["petal", "petal", "-    "]
    assert [r["sweep"] for r in csv.DictReader(render_csv(rows).splitlines())] == [
        "petal",
        "petal",
        "",
    ]


def test_plain_run_directories() -> None:
    rows = analyze_rows(find_runs([RUNS]))
    assert [r["run"] for r in rows] == sorted(p.name for p in RUNS.iterdir())
    assert {r["status"] for r in rows} == {"complete", "failed"}


# --- flashdba's event view ----------------------------------------------------------------


def test_event_rows_math() -> None:
    run = load_run(MIXED)
    m, seconds = run["metrics"], run["window"]["seconds"]
    rows = {r["event"]: r for r in event_rows([ref(MIXED)])}
    assert list(rows) == [
        "DataFileRead",
        "DataFileWrite",
        "WalSync",
        "device read",
        "device write",
    ]
    read = rows["DataFileRead"]
    assert read["waits"] == round(m["pio_reads_per_s"] * seconds) == 301_396
    assert read["time_s"] == pytest.approx(301_396 * m["db_read_latency_us"] / 1e6, abs=1e-3)
    assert read["latency_us"] == m["db_read_latency_us"] and read["iops"] == m["pio_reads_per_s"]
    assert rows["DataFileWrite"]["waits"] == round(m["pio_writes_per_s"] * seconds)
    assert rows["DataFileWrite"]["latency_us"] == m["db_write_latency_us"]
    assert rows["WalSync"]["waits"] == round(m["wal_syncs_per_s"] * seconds) == 1_095
    assert rows["WalSync"]["latency_us"] == m["wal_sync_latency_us"]
    assert rows["device read"]["iops"] == m["device_reads_per_s"]
    assert rows["device write"]["time_s"] == pytest.approx(
        round(m["device_writes_per_s"] * seconds) * m["device_write_latency_us"] / 1e6, abs=1e-3
    )


def test_event_rows_unknown_figures() -> None:
    rows = {r["event"]: r for r in event_rows([ref(FAILED)])}
    read = rows["DataFileRead"]
    assert read["waits"] is None and read["time_s"] is None and read["latency_us"] is None
    assert rows["device read"]["waits"] == round(29311.577 * 2.502)
    # a measured count with no latency: waits known, time unknown
    ro = {r["event"]: r for r in event_rows([ref(RO)])}["DataFileWrite"]
    assert ro["waits"] == 0 and ro["latency_us"] is None and ro["time_s"] is None
    text = render_events(event_rows([ref(FAILED), ref(MIXED)]))
    assert "Latency(us)" in text and "301,396" in text and "n/a" in text
    assert "no per-event wait counts" in text


# --- sustained throughput -----------------------------------------------------------------


def series(
    segments: list[tuple[int, float, float]],
    *,
    warmup: int = 5,
    noise: float = 0.0,
    device: bool = True,
) -> list[dict[str, str]]:
    """timeseries.csv rows as DictReader gives them: (seconds, IOPS, read latency µs) segments
    of 1-second window rows after `warmup` warm-up rows."""
    rng = random.Random(7)
    rows: list[dict[str, str]] = []
    plan = [("warmup", 1000.0, 500.0)] * warmup
    for count, iops, latency in segments:
        plan += [("window", iops, latency)] * count
    for i, (phase, iops, latency) in enumerate(plan, start=1):
        iops *= 1 + rng.uniform(-noise, noise)
        latency *= 1 + rng.uniform(-noise, noise)
        dev = [f"{iops * 0.8:.3f}", f"{iops * 0.2:.3f}", f"{latency:.3f}"] if device else [""] * 3
        rows.append(
            {
                "time": f"2026-11-22T05:00:{i % 60:02d}+00:00",
                "elapsed_s": f"{i:.3f}",
                "phase": phase,
                "seconds": "1.0",
                "device_reads_per_s": dev[0],
                "device_writes_per_s": dev[1],
                "device_read_latency_us": dev[2],
                "slobops_per_s": f"{iops / 60:.3f}",
                "db_reads_per_s": f"{iops * 0.8:.3f}",
                "db_read_latency_us": f"{latency * 1.4:.3f}",
            }
        )
    return rows


def test_a_cliff_is_found_at_the_right_time_and_duration() -> None:
    rows = series([(600, 40_000, 70), (300, 20_000, 70), (300, 40_000, 70)])
    report = detect_degradation(rows)
    assert report.baseline_iops == pytest.approx(40_000)
    assert report.baseline_latency_us == pytest.approx(70)
    assert (report.baseline_start_s, report.baseline_end_s) == (35, 95)  # window starts at 5
    assert report.measured_s == 1200 - 30
    (episode,) = report.episodes
    assert (episode.start_s, episode.end_s, episode.duration_s) == (605, 905, 300)
    assert episode.kind == "iops_drop"
    assert episode.worst_iops == pytest.approx(20_000)
    assert episode.iops_change_pct == pytest.approx(-50)
    assert episode.latency_change_pct == pytest.approx(0)
    assert report.degraded and report.verdict.startswith("degraded: 1 episode")
    text = render_degradation(report)
    assert "steady 40,000 IOPS @ 70 us (median from 35 s to 95 s" in text
    assert "degradation at 605 s for 300 s (iops_drop): IOPS -50 % (20,000)" in text


def test_a_cliff_with_latency_is_both_and_survives_noise() -> None:
    rows = series([(600, 40_000, 70), (410, 21_600, 279), (200, 40_000, 70)], noise=0.05)
    (episode,) = detect_degradation(rows).episodes
    assert episode.kind == "iops_drop+latency_rise"
    assert (episode.start_s, episode.duration_s) == (605, 410)
    assert episode.latency_change_pct == pytest.approx(300, rel=0.1)


def test_noise_alone_is_no_degradation() -> None:
    report = detect_degradation(series([(1800, 40_000, 70)], noise=0.05))
    assert report.episodes == []
    assert report.verdict.startswith("no degradation")
    assert render_degradation(report).splitlines()[-1] == report.verdict


def test_a_dip_shorter_than_z_is_ignored_and_one_of_z_is_not() -> None:
    short = series([(300, 40_000, 70), (29, 10_000, 70), (300, 40_000, 70)])
    assert detect_degradation(short).episodes == []
    exact = series([(300, 40_000, 70), (30, 10_000, 70), (300, 40_000, 70)])
    assert [e.duration_s for e in detect_degradation(exact).episodes] == [30]
    assert detect_degradation(exact, min_seconds=31).episodes == []


def test_a_latency_rise_alone_is_detected() -> None:
    rows = series([(300, 40_000, 70), (120, 40_000, 140), (300, 40_000, 70)])
    (episode,) = detect_degradation(rows).episodes
    assert episode.kind == "latency_rise"
    assert (episode.start_s, episode.duration_s) == (305, 120)
    assert episode.latency_change_pct == pytest.approx(100)
    assert episode.iops_change_pct == pytest.approx(0)
    # a rise of 100 % is below a Y of 150 %
    assert detect_degradation(rows, latency_rise_pct=150).episodes == []


def test_a_tail_rise_alone_is_an_episode_on_p99() -> None:
    """Garbage collection stalls a few reads: the mean barely moves, the p99 triples."""
    rows = series([(300, 40_000, 70), (60, 40_000, 72), (300, 40_000, 70)])
    for i, row in enumerate(r for r in rows if r["phase"] == "window"):
        row["select_p99_us"] = "6000.0" if 300 <= i < 360 else "2000.0"
        row["update_p99_us"] = "9000.0"
    report = detect_degradation(rows)
    assert report.p99_source == "select" and report.baseline_p99_us == 2000
    (episode,) = report.episodes
    assert episode.kind == "p99_rise" and (episode.start_s, episode.duration_s) == (305, 60)
    assert episode.p99_change_pct == pytest.approx(200)
    assert "select p99 +200 % (6,000 us)" in render_degradation(report)
    assert detect_degradation(rows, p99_rise_pct=250).episodes == []


def test_the_ramp_and_warmup_are_not_episodes() -> None:
    rows = series([(30, 5_000, 900), (600, 40_000, 70)], warmup=10)
    report = detect_degradation(rows)
    assert report.episodes == [] and report.baseline_iops == pytest.approx(40_000)
    # without the skip, the ramp sets the baseline span's start and is itself a drop
    (episode,) = detect_degradation(rows, skip_seconds=0).episodes
    assert (episode.start_s, episode.duration_s) == (10, 30)


def test_database_figures_when_the_device_is_not_measured() -> None:
    rows = series([(600, 40_000, 70), (300, 20_000, 70), (100, 40_000, 70)], device=False)
    report = detect_degradation(rows)
    assert (report.iops_source, report.latency_source) == ("database", "database")
    assert report.baseline_iops == pytest.approx(32_000)  # db_reads = 0.8 x IOPS
    assert report.baseline_latency_us == pytest.approx(98)
    assert [(e.start_s, e.duration_s) for e in report.episodes] == [(605, 300)]


def test_too_little_data_is_not_judged() -> None:
    assert detect_degradation([]).verdict.startswith("not judged")
    short = detect_degradation(series([(20, 40_000, 70)]))
    assert short.baseline_iops is None and short.episodes == []
    assert short.verdict.startswith("not judged")
    assert render_degradation(short).strip() == short.verdict


def test_load_timeseries_round_trip(tmp_path: Path) -> None:
    rows = series([(600, 40_000, 70), (300, 20_000, 70), (300, 40_000, 70)])
    with (tmp_path / "timeseries.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert load_timeseries(tmp_path) == rows
    assert load_timeseries(tmp_path / "timeseries.csv") == rows
    assert load_timeseries(FAILED) == []  # a run without samples has no file
    assert detect_degradation(load_timeseries(tmp_path)) == detect_degradation(rows)


def test_a_real_time_series() -> None:
    rows = load_timeseries(RO)
    report = detect_degradation(rows, skip_seconds=3, baseline_seconds=10, min_seconds=2)
    assert (report.iops_source, report.latency_source) == ("device", "device")
    assert 39_000 < report.baseline_iops < 41_000
    assert 60 < report.baseline_latency_us < 80
    assert report.episodes == []
    assert detect_degradation(rows).verdict.startswith("not judged")  # 30 s < 30 s skip + 60 s
