"""RATE runs on both engines (a private PostgreSQL and a private MariaDB, real servers):
the schedule inside the loop, both latency views, a stall seen from the intended start,
the saturation verdict, Ctrl-C while sessions sleep for their schedule; then the parts that
need no database (bad values, the rule, the interval books)."""

from __future__ import annotations

import csv
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from openslob.engines.mariadb.server import EmbeddedMariaDB
from openslob.engines.postgres.server import EmbeddedServer
from openslob.model import rate
from openslob.results.schema import validate_run
from openslob.runner.intervals import merge_results
from tests.conftest import invoke, slob_subprocess
from tests.integration import test_engines
from tests.integration.test_engines import DATA, TARGETS, slob

# The two private servers and their tiny data set, as test_engines.py makes them (module
# fixtures: this module gets its own pair).
base = test_engines.base
loaded = test_engines.loaded


def _run(loaded, base: Path, results: Path, *args: str) -> tuple[dict[str, Any], Any]:
    engine, cwd = loaded
    result = slob(
        base, cwd, "run", "--target", TARGETS[engine], *DATA, "--warmup", "1",
        "--results-dir", str(results), *args,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (run_dir,) = results.iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    validate_run(run)  # a RATE run's figures (saturated: a boolean) follow the schema too
    return run, result


def test_far_below_capacity_the_rate_is_kept(loaded, base: Path, tmp_path: Path) -> None:
    """20 ops/s over 2 sessions (an eighth of their closed-loop capacity here): achieved =
    offered ± 2 %, and the latency from the intended start is the service time plus the
    sleep's wake-up (the median within 20 % + 2 ms). Whether a stray slow op of a busy host
    made later ops late is measured and counted; the verdict is "kept up"."""
    run, result = _run(
        loaded, base, tmp_path / "r", "--sessions", "2", "--rate", "20", "--rate-dist",
        "uniform", "--run-time", "3",
    )  # fmt: skip
    m = run["metrics"]
    assert m["offered_rate"] == 20 and m["achieved_rate"] == pytest.approx(20, rel=0.02)
    ops = sum(s["ops_select"] + s["ops_update"] for s in run["sessions"])
    assert ops == pytest.approx(60, abs=1)  # uniform: exactly RATE x RUN_TIME arrivals
    assert m["backlog_ops"] < 2 and m["max_lag_us"] is not None
    assert m["saturated"] is False  # nothing due was left, and lags were short
    service, intended = run["latency"]["select"], run["latency_intended"]["select"]
    assert intended["count"] == service["count"] > 25
    assert service["p50_us"] <= intended["p50_us"] <= service["p50_us"] * 1.2 + 2000
    report = result.output
    assert "Target rate (RATE=20.0 SLOBops/s, uniform arrivals)" in report
    assert "verdict: " in report and "SLOBop latency from the intended start" in report
    # the time series has both views per interval
    (run_dir,) = (tmp_path / "r").iterdir()
    with (run_dir / "timeseries.csv").open() as fh:
        window = [r for r in csv.DictReader(fh) if r["phase"] == "window"]
    assert all(r["select_p99_intended_us"] and r["select_p99_us"] for r in window)
    assert sum(int(r["late_ops_10ms"]) for r in window) == m["late_ops_10ms"]


def _block_updates(engine: str, base: Path, hold_s: float) -> tuple[Any, Any]:
    """Another connection that keeps the loops' UPDATEs of user1.cf1 waiting (reads go on):
    (the connection, how to let go)."""
    if engine == "mariadb":
        conn = pymysql.connect(**EmbeddedMariaDB(base, "16k").connect_kwargs())
        with conn.cursor() as cur:
            cur.execute("LOCK TABLES user1.cf1 READ")

        def release() -> None:
            with conn.cursor() as cur:
                cur.execute("UNLOCK TABLES")

        return conn, release
    conn = psycopg.connect(EmbeddedServer(base).conninfo())
    conn.execute("LOCK TABLE user1.cf1 IN EXCLUSIVE MODE")  # ACCESS SHARE (SELECT) still goes
    return conn, conn.commit


def test_a_stall_shows_from_the_intended_start_only(loaded, base: Path, tmp_path: Path) -> None:
    """For 1.5 s inside the window the UPDATEs of user1 wait on another connection's lock.
    The SELECTs were never blocked: their service time stays short, but those that came due
    while their session waited in a blocked UPDATE started up to 1.5 s late, and the latency
    from the intended start shows it (p99). The blocked UPDATEs show it in both views."""
    engine, _ = loaded
    results = tmp_path / "r"
    stalled: dict[str, float] = {}

    def stall() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the window's first interval is closed
            rows = list(results.glob("*/timeseries.csv"))
            if rows and "window" in rows[0].read_text():
                break
            time.sleep(0.05)
        conn, release = _block_updates(engine, base, 1.5)
        stalled["from"] = time.time()
        time.sleep(1.5)
        release()
        stalled["to"] = time.time()
        conn.close()

    thread = threading.Thread(target=stall)
    thread.start()
    try:
        run, _ = _run(
            loaded, base, results, "--sessions", "4", "--rate", "60", "--update-pct", "30",
            "--run-time", "4",
        )  # fmt: skip
    finally:
        thread.join()
    assert stalled["to"] - stalled["from"] >= 1.5
    service, intended = run["latency"], run["latency_intended"]
    assert service["update"]["max_us"] > 1_000_000  # a blocked UPDATE waited for the lock
    assert service["select"]["p99_us"] < 300_000, service["select"]
    assert intended["select"]["p99_us"] > 700_000, intended["select"]
    m = run["metrics"]
    assert m["max_lag_us"] > 700_000 and m["late_ops_10ms"] > 10


def test_above_capacity_the_point_is_saturated(loaded, base: Path, tmp_path: Path) -> None:
    """Far more than 2 sessions can do: Little's law says so before the window, and the
    report, run.json and the warnings say the point is saturated."""
    run, result = _run(
        loaded, base, tmp_path / "r", "--sessions", "2", "--rate", "100000", "--run-time", "2"
    )
    m = run["metrics"]
    assert m["saturated"] is True
    assert m["achieved_rate"] < 0.5 * m["offered_rate"] and m["backlog_ops"] > 0
    early = [w for w in run["warnings"] if "Little's law" in w]
    assert early and "raise SESSIONS or lower RATE" in early[0]
    assert any(w.startswith("saturated: offered 100,000.0 SLOBops/s") for w in run["warnings"])
    assert "verdict: SATURATED" in result.output
    # said before the window, as the run went (stderr), ahead of the window's progress lines
    stderr = result.stderr
    assert "Little's law" in stderr
    assert stderr.index("Little's law") < stderr.index("\nwindow")


def test_ctrl_c_while_sessions_wait_for_their_schedule(loaded, base: Path, tmp_path) -> None:
    """RATE=1 over 2 sessions: each sleeps ~2 s between ops inside the database; Ctrl-C
    still ends the run within seconds, and what was measured is kept."""
    engine, cwd = loaded
    results = tmp_path / "results"
    proc = slob_subprocess(
        "run", "--target", TARGETS[engine], *DATA, "--sessions", "2", "--warmup", "0",
        "--rate", "1", "--run-time", "60", "--results-dir", str(results), data_dir=base, cwd=cwd,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(results.glob("*/timeseries.csv")):
        time.sleep(0.05)
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 10, stderr  # as test_engines' Ctrl-C on a busy host
    assert proc.returncode == 130, stderr
    (run_dir,) = results.iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "interrupted" and run["config"]["RATE"] == 1
    assert not [w for w in run["warnings"] if "still alive" in w]


# --- no database -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-5", "RATE=-5 is out of range (allowed: 0–10000000)"),
        ("fast", "RATE=fast is not a number (allowed: 0–10000000)"),
        ("10%", "RATE=10% is not a number (allowed: 0–10000000)"),
        ("2e8", "RATE=2e8 is out of range (allowed: 0–10000000)"),  # an exponent is a number
    ],
)
def test_bad_rate_is_one_line_before_anything(value: str, message: str, tmp_path: Path) -> None:
    result = invoke("run", "--rate", value, "--results-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_rate_excludes_think_time(tmp_path: Path) -> None:
    (tmp_path / "slob.conf").write_text("RATE=500\nTHINK_TM_FREQUENCY=5\n")
    result = invoke("run", "--results-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert result.exit_code == 2 and "RATE=500 paces the sessions itself" in result.output


def test_the_saturation_rule() -> None:
    assert rate.saturated(started=980, backlog=20, mean_lag_us=0, mean_service_us=500) is False
    assert rate.saturated(started=979, backlog=21, mean_lag_us=0, mean_service_us=500) is True
    # waiting 10x the service time: the queue, not the database, makes the latency
    assert rate.saturated(1000, 0, mean_lag_us=5000, mean_service_us=500) is False
    assert rate.saturated(1000, 0, mean_lag_us=5001, mean_service_us=500) is True
    assert rate.saturated(1000, 0, mean_lag_us=900, mean_service_us=50) is False  # < 1 ms
    # a closed loop has no verdict; nothing due is not saturated
    assert rate.window_figures(0, 1, 0, [{"ops": 5}], 1.0)["saturated"] is None
    assert rate.saturated(0, 0, None, None) is False
    # the mean lag comes from the two histograms of the same ops
    result = {"hist_select": {"100": 4}, "hist_select_intended": {"110": 4}}
    assert rate.mean_lag([result]) == (10.0, 100.0)


def test_uniform_schedules_interleave() -> None:
    offsets = [rate.uniform_offset(400, 4, s) for s in range(4)]
    assert offsets == pytest.approx([0, 0.0025, 0.005, 0.0075])  # 1/RATE apart


def test_interval_results_keep_the_largest_lag_and_the_last_backlog() -> None:
    keys = ("ops", "max_lag_us", "behind_s", "late_1ms", "hist_select_intended")
    first = dict(zip(keys, (3, 900, 0.5, 1, {"7": 1}), strict=True))
    second = dict(zip(keys, (2, 40, 0.0, 0, {"7": 2}), strict=True))
    merged = merge_results(merge_results(None, first), second)
    assert merged["max_lag_us"] == 900 and merged["behind_s"] == 0.0
    assert merged["late_1ms"] == 1 and merged["hist_select_intended"] == {"7": 3}


# The harness is engine-independent: this runs on PostgreSQL only (no skipped MariaDB twin).
@pytest.mark.parametrize("loaded", ["postgresql"], indirect=True)
def test_a_percentage_sweep_measures_its_maximum_first(loaded, base: Path, tmp_path) -> None:
    """`--rate 50%,100%`: a closed-loop point per curve (UPDATE_PCT) first, its SLOBops/s in
    sweep.json, the percentage points at that fraction of it, and the latency-at-load plot."""
    engine, cwd = loaded
    results = tmp_path / "results"
    result = slob(
        base, cwd, "sweep", "--target", TARGETS[engine], *DATA, "--sessions", "2",
        "--update-pct", "0,20", "--rate", "50%,100%", "--warmup", "0.5", "--run-time", "1.5",
        "--results-dir", str(results), "--label", "curve",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    sweep_dir = results / "sweep-curve"
    sweep = json.loads((sweep_dir / "sweep.json").read_text())
    names = [p["name"] for p in sweep["points"]]
    assert names == [f"update_pct-{u}_rate-{r}" for u in (0, 20) for r in ("max", "50%", "100%")]
    maximum = sweep["rate_max"]["update_pct-20"]
    assert maximum["point"] == names[3] and maximum["slobops_per_s"] > 0
    for point, pct in zip(sweep["points"][4:], (0.5, 1.0), strict=True):
        assert point["status"] == "complete"
        assert point["rate"] == pytest.approx(pct * maximum["slobops_per_s"], abs=0.1)
        run = json.loads((sweep_dir / point["run_dir"] / "run.json").read_text())
        assert run["config"]["RATE"] == point["rate"] and run["latency_intended"]["select"]
    plotted = invoke("plot", str(sweep_dir), "--kind", "rate", "-o", str(tmp_path / "p"), cwd=cwd)
    assert plotted.exit_code == 0, plotted.output
    assert (tmp_path / "p" / "latency_at_load.png").stat().st_size > 10_000


def test_percentages_need_a_sweep(tmp_path: Path) -> None:
    bad = invoke("sweep", "--rate", "10%,2000", "--sessions", "1,2", cwd=tmp_path)
    assert bad.exit_code == 2 and "either all percentages" in bad.output
    bad = invoke("sweep", "--rate", "0%,50%", cwd=tmp_path)
    assert bad.exit_code == 2 and "RATE=0% is not a percentage of the maximum" in bad.output
