"""Update runs keep the SLOB layout on PostgreSQL, and a held horizon is seen, named and repaired.

A snapshot held across an update window stops HOT pruning: rows leave their pages, cf1 bloats
and every later SLOBop does more work. openslob's own connections must hold none (their
backend_xmin keeps moving), a run must keep cf1 at SCALE pages and ~WORK_UNIT + index blocks
per op, another session's snapshot must be reported with its pid, and verify/setup/run must
refuse or repair what it leaves behind.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from openslob.config.resolve import resolve
from openslob.engines.postgres.datafiles import relation_compressibility
from openslob.engines.postgres.layout import max_pages
from openslob.engines.postgres.server import EmbeddedServer
from openslob.report.text import render_text
from openslob.results.rundir import load_run
from openslob.runner.execute import run_benchmark
from openslob.runner.observers import Observers
from openslob.runner.sweep import plan_sweep, run_sweep

# Its own seed and size: other modules' data sets are reloaded by their own fixtures. Two
# schemas of 62.5 MB, far above shared_buffers (22 MB): pages are read from the device and
# each is updated seconds apart, as in a real SLOB run. (A cached table updated every few
# ms beside slower sessions bloats however short every snapshot is: PostgreSQL cannot prune
# a version that a running statement may still see; the run then warns.)
SCALE = 8000
DATA = ["--schemas", "2", "--scale", str(SCALE), "--scan-table-sz", "16", "--seed", "31"]
PARAMS = {"SCHEMAS": "2", "SCALE": str(SCALE), "SCAN_TABLE_SZ": "16", "SEED": "31"}


@pytest.fixture()
def fresh_dataset(server: EmbeddedServer, slob) -> EmbeddedServer:
    """The data set as setup leaves it: reloaded when an earlier test bloated it."""
    result = slob("setup", *DATA)
    assert result.exit_code == 0, result.output
    return server


def run(server: EmbeddedServer, tmp_path: Path, **params: Any) -> dict[str, Any]:
    flags = {**PARAMS, "WARMUP": "1", **{k: str(v) for k, v in params.items()}}
    config = resolve(flags, None, cwd=tmp_path)
    _, result = run_benchmark(
        config,
        target=None,
        data_dir=server.data_dir,
        results_parent=tmp_path / "results",
        observers=Observers(render=render_text),
    )
    assert result["status"] == "complete", result.get("error")
    return result


def cf1_pages(db: psycopg.Connection) -> dict[str, int]:
    return {
        schema: db.execute(
            "SELECT pg_relation_size(%s::regclass) / 8192", [f"{schema}.cf1"]
        ).fetchone()[0]
        for schema in ("user1", "user2")
    }


def test_no_openslob_connection_holds_back_the_horizon(fresh_dataset, tmp_path, db) -> None:
    """Every openslob backend's xmin keeps moving through an update window (the wait sampler
    used to hold one snapshot for the whole window, a monitor its last statement's)."""
    samples: list[tuple[float, int, dict[int, str]]] = []
    done = threading.Event()

    def watch() -> None:
        with psycopg.connect(fresh_dataset.conninfo(), autocommit=True) as conn:
            while not done.is_set():
                next_xid = int(
                    conn.execute(
                        "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
                    ).fetchone()[0]
                )
                rows = conn.execute(
                    "SELECT pid, backend_xmin::text FROM pg_stat_activity"
                    " WHERE application_name LIKE 'openslob-run%' AND backend_xmin IS NOT NULL"
                ).fetchall()
                samples.append((time.monotonic(), next_xid, dict(rows)))
                time.sleep(0.25)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run(fresh_dataset, tmp_path, UPDATE_PCT=100, RUN_TIME=6)
    finally:
        done.set()
        watcher.join()
    assert result["metrics"]["updates_per_s"] > 20
    assert samples[-1][1] - samples[0][1] > 100  # transactions went on meanwhile
    # The longest time any backend showed one and the same xmin while xids advanced.
    first_seen: dict[tuple[int, str], tuple[float, int]] = {}
    longest = 0.0
    seen_pids = set()
    for at, next_xid, xmins in samples:
        for pid, xmin in xmins.items():
            seen_pids.add(pid)
            since, xid_then = first_seen.setdefault((pid, xmin), (at, next_xid))
            if next_xid > xid_then:
                longest = max(longest, at - since)
    assert len(seen_pids) >= 3  # the work sessions and the wait sampler were seen
    assert longest < 1.0, f"an openslob backend kept its xmin for {longest:.1f} s"


@pytest.mark.parametrize("update_pct", [20, 100])
def test_update_runs_keep_one_row_per_page_and_the_work_per_op(
    fresh_dataset, tmp_path, db, update_pct
) -> None:
    result = run(fresh_dataset, tmp_path, UPDATE_PCT=update_pct, RUN_TIME=8)
    for schema, pages in cf1_pages(db).items():
        assert SCALE <= pages <= SCALE * 1.01, (schema, pages)
    work = result["work_per_op"]
    kinds = ["update"] if update_pct == 100 else ["select", "update"]
    for kind in kinds:
        figures = work[kind]
        assert figures["ops"] > 50
        # WORK_UNIT heap pages (x3 visits for an UPDATE) + the index: within 3 % measured
        assert figures["lio"] == pytest.approx(figures["lio_predicted"], rel=0.03), kind
        assert figures["pio"] <= figures["pio_max_predicted"] * 1.03, kind
    for name, change in result["tables"].items():
        if name.endswith(".cf1"):
            assert change["after"]["pages"] <= max_pages(SCALE)
    assert not [w for w in result["warnings"] if "held back" in w or "grew" in w]
    report = (Path(result_dir(tmp_path)) / "report.txt").read_text()
    assert "Data set and work per SLOBop" in report
    assert "What the storage sees" in report
    # Dead row versions left in the free space share almost nothing with the live row.
    db.execute("CHECKPOINT")
    for schema in ("user1", "user2"):
        measured = relation_compressibility(db, f"{schema}.cf1")
        high = max(measured.zlib_4k, measured.lz4_4k, measured.zlib_8k, measured.lz4_8k)
        assert high <= 1.15 and measured.dedupe_4k == 1.0, (schema, measured)


def result_dir(tmp_path: Path) -> Path:
    return sorted((tmp_path / "results").iterdir())[-1]


def test_another_sessions_snapshot_is_reported_then_refused_and_repaired(
    fresh_dataset, tmp_path, db, slob
) -> None:
    """A REPEATABLE READ snapshot held across an update run: the run names its pid, cf1
    grows, verify fails, the next run refuses in one line, setup reloads, verify passes."""
    # Setup keeps a table within the one-row-per-page bound: an earlier update test may have
    # left a few pages more than SCALE, and that data set is valid.
    assert all(SCALE <= pages <= max_pages(SCALE) for pages in cf1_pages(db).values())
    with psycopg.connect(fresh_dataset.conninfo(), application_name="someone-else") as other:
        other.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        other.execute("SELECT count(*) FROM user1.cf2").fetchone()
        pid = other.info.backend_pid
        # ~17 versions of a row fit its page: every op in a 1 MB hot spot (128 rows) updates
        # each row there far more often than that while the snapshot is held.
        hot = {"DO_HOTSPOT": "TRUE", "HOTSPOT_MB": 1, "HOTSPOT_FREQUENCY": 1}
        result = run(fresh_dataset, tmp_path, UPDATE_PCT=100, RUN_TIME=5, **hot)
        other.rollback()
    held = [w for w in result["warnings"] if "held back" in w]
    assert held and f"session {pid}" in held[0] and f"pg_terminate_backend({pid})" in held[0]
    hold = result["horizon"]["holds"][0]
    assert hold["holder"] == str(pid) and hold["application"] == "someone-else"
    assert hold["held_s"] >= 3
    assert any("tables grew during the window" in w for w in result["warnings"]), (
        result["tables"],
        result["work_per_op"],
    )
    assert any("UPDATE ops did" in w and "more than" in w for w in result["warnings"]), (
        result["warnings"],
        result["tables"],
        result["work_per_op"],
    )
    grown = result["tables"]["user1.cf1"]  # before: after the warm-up, already growing
    assert grown["after"]["pages"] > max(max_pages(SCALE), grown["before"]["pages"])
    assert (
        result["work_per_op"]["update"]["lio"]
        > 1.15 * result["work_per_op"]["update"]["lio_predicted"]
    )

    verify = slob("verify", *DATA)
    assert verify.exit_code == 1
    assert "cf1 pages" in verify.output and "FAIL" in verify.output

    refused = slob("run", *DATA, "--run-time", "1")
    assert refused.exit_code != 0
    error = [line for line in refused.stderr.splitlines() if line.startswith("slob: error:")]
    assert len(error) == 1 and "bloated" in error[0] and "slob setup" in error[0]
    assert "user1.cf1" in error[0] and "Traceback" not in refused.output

    repaired = slob("setup", *DATA)
    assert repaired.exit_code == 0
    assert "user1.cf1 reloaded: bloated" in repaired.output
    # reloaded: back within the one-row-per-page bound. Not exactly SCALE: the load's
    # streams insert into one table at once, and PostgreSQL 16+ extends a contended
    # relation by several pages, one of which may stay empty (8,001 for 8,000 rows once)
    pages_after = cf1_pages(db)
    assert all(SCALE <= pages <= max_pages(SCALE) for pages in pages_after.values())
    assert slob("verify", *DATA).exit_code == 0


def test_tables_changed_by_hand_are_not_valid(fresh_dataset, db, slob) -> None:
    """Setup and run trust the tables, not the bookkeeping: deleted rows or a changed
    fillfactor are refused by the run (naming `slob setup`), reloaded by setup, and verify
    checks the storage options."""
    db.execute("ALTER TABLE user2.cf1 SET (fillfactor = 100)")
    verify = slob("verify", *DATA)
    assert verify.exit_code == 1 and "storage options" in verify.output
    db.execute("DELETE FROM user1.cf1 WHERE custid <= 10")
    db.execute("SELECT pg_stat_force_next_flush()")
    refused = slob("run", *DATA, "--run-time", "1", "--warmup", "0")
    assert refused.exit_code == 1
    assert "user1.cf1: 7,990 rows, not 8,000" in refused.output
    assert "user2.cf1: fillfactor 100, not 10" in refused.output
    assert "run `slob setup`" in refused.output
    result = slob("setup", *DATA)
    assert result.exit_code == 0, result.output
    assert "user1.cf1 reloaded: 7,990 rows, not 8,000" in result.output
    assert "user2.cf1 reloaded: fillfactor 100, not 10" in result.output
    assert db.execute("SELECT count(*) FROM user1.cf1").fetchone()[0] == SCALE
    assert slob("verify", *DATA).exit_code == 0


def test_every_sweep_point_starts_on_a_valid_layout(fresh_dataset, tmp_path, db) -> None:
    """A point whose updates ran beside another session's snapshot leaves cf1 bloated: the
    next point reloads it first, says so in sweep.json, and its run starts at SCALE pages."""
    other = psycopg.connect(fresh_dataset.conninfo(), application_name="someone-else")
    other.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    other.execute("SELECT count(*) FROM user1.cf2").fetchone()
    # A 1 MB hot spot takes each of its rows past the 17 versions its page holds.
    hot = {"DO_HOTSPOT": "TRUE", "HOTSPOT_MB": "1", "HOTSPOT_FREQUENCY": "1"}
    plan = plan_sweep(
        {**PARAMS, **hot, "UPDATE_PCT": "100,0", "SESSIONS": "2", "RUN_TIME": "4", "WARMUP": "0"},
        None,
        tmp_path,
    )
    try:
        outcome = run_sweep(
            plan,
            path=tmp_path / "sweep",
            label="layout",
            target=None,
            data_dir=fresh_dataset.data_dir,
            point_done=lambda _entry, _result: other.rollback(),  # after the first point
        )
    finally:
        other.close()
    first, second = outcome.sweep["points"]
    assert first["status"] == second["status"] == "complete"
    assert first["reloaded"] == []
    assert second["reloaded"] and all("bloated" in why for why in second["reloaded"])
    run = load_run(tmp_path / "sweep" / second["run_dir"])
    cf1 = {name: c["before"]["pages"] for name, c in run["tables"].items() if name.endswith(".cf1")}
    # the bloated tables were reloaded (exactly SCALE pages); a table the held snapshot did
    # not push over the one-row-per-page bound is valid as it is (an earlier module's update
    # runs may have left it a few pages over SCALE)
    reloaded = [name for name in cf1 if any(name in why for why in second["reloaded"])]
    assert reloaded and all(cf1[name] == SCALE for name in reloaded), (cf1, second["reloaded"])
    assert all(SCALE <= pages <= max_pages(SCALE) for pages in cf1.values()), cf1
    saved = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert saved["points"][1]["reloaded"] == second["reloaded"]


def _no_other_holder(server: EmbeddedServer) -> None:
    """Wait until no backend (an autovacuum worker after an earlier test's updates) holds
    an xmin: the server is shared, and such a one would be the oldest holder."""
    with psycopg.connect(server.conninfo(), autocommit=True) as quiet:
        for _ in range(150):
            others = quiet.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                " AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)"
            ).fetchone()
            if others is not None and others[0] == 0:
                return
            time.sleep(0.1)


def test_a_holder_newer_than_the_monitors_snapshot_is_zero_transactions_old(
    server: EmbeddedServer,
) -> None:
    """An xid assigned after the monitor's snapshot (a busy update run assigns them all the
    time) was -3 transactions old, read as 4,294,967,293: the age is a signed, wrapping
    difference, never below 0."""
    from openslob.engines.postgres.horizon import oldest_holder

    _no_other_holder(server)  # or that one is the oldest holder named below
    with (
        psycopg.connect(server.conninfo()) as monitor,
        psycopg.connect(server.conninfo()) as newer,
    ):
        monitor.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        first = oldest_holder(monitor)  # the monitor's snapshot is taken here
        for _ in range(3):  # xids assigned since
            newer.execute("SELECT pg_current_xact_id()")
            newer.commit()
        newer.execute("SELECT pg_current_xact_id()")  # 3 after the snapshot, kept open
        held = oldest_holder(monitor)
        assert held["holder"] == str(newer.info.backend_pid), (first, held)
        assert held["age_xids"] == 0
        newer.rollback()
        monitor.rollback()
    with psycopg.connect(server.conninfo(), autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("SELECT pg_current_xact_id()")
        with psycopg.connect(server.conninfo(), autocommit=True) as other:
            for _ in range(3):
                other.execute("SELECT pg_current_xact_id()")  # three later transactions
            older = oldest_holder(other)
        assert older["holder"] == str(conn.info.backend_pid)
        assert older["age_xids"] == 4  # its own xid, then three others
        conn.execute("ROLLBACK")


def test_the_interval_snapshot_reads_the_horizons_holder_as_a_read_of_its_own_does(
    server: EmbeddedServer,
) -> None:
    """The monitor reads who holds the horizon in its interval snapshot's statement (four
    round trips fewer an interval): the same holder and figures as the savepoint's read,
    handed to horizon(snapshot) once (as of that snapshot, several waiting for their rows),
    and kept out of the snapshot itself (run.json's db_after)."""
    from openslob.engines.postgres.runner import Monitor

    _no_other_holder(server)
    monitor = Monitor(server.conninfo(), "openslob-test-monitor")
    try:
        with psycopg.connect(server.conninfo(), autocommit=True) as holder:
            holder.execute("BEGIN")
            holder.execute("SELECT pg_current_xact_id()")
            pid = str(holder.info.backend_pid)
            alone = monitor.horizon()  # no snapshot: read in its savepoint
            snap = monitor.interval_snapshot()
            later = monitor.interval_snapshot()  # rows come after their snapshots
            holder.execute("ROLLBACK")
            together = monitor.horizon(snap)  # the snapshot's, from before the ROLLBACK
            again = monitor.horizon(later)  # the later snapshot's: kept too
            now = monitor.horizon(snap)  # handed over once: read again, the holder gone
        assert "horizon" not in snap and snap["database"]
        assert together["kind"] == alone["kind"] == "session"
        assert together["holder"] == alone["holder"] == again["holder"] == pid
        assert now["holder"] != pid
        for key in ("xmin", "since", "role", "application", "state"):
            assert together[key] == alone[key], key
        assert set(together) == set(alone) == set(now)
        kinds = {type(v) for k, v in together.items() if k not in ("figures", "read_epoch")}
        assert kinds <= {int, str, type(None)}
        # stamped when read: with its snapshot, not when the row asked
        stamps = [alone["read_epoch"], together["read_epoch"], again["read_epoch"]]
        assert stamps == sorted(stamps) and stamps[-1] < now["read_epoch"]
        assert together["figures"] == {"horizon_age_xids": together["age_xids"]}
        assert isinstance(together["age_xids"], int) and together["age_xids"] >= 0
    finally:
        monitor.close()


def test_read_gap_warnings_stay_quiet_below_the_noise_floor() -> None:
    from openslob.results.build import read_gap_warning

    assert read_gap_warning(3.4, 2.9, "debug_io_direct") is None  # "14 %" of 3 reads/s
    assert read_gap_warning(3.0, 40.0, "debug_io_direct") is not None  # 37 reads/s more
    cached = read_gap_warning(1000.0, 500.0, "debug_io_direct")
    assert cached is not None and "page cache is serving reads" in cached
    assert read_gap_warning(1000.0, 950.0, "debug_io_direct") is None  # within 10 %


def test_a_kept_interval_answered_at_its_calls_end_leaves_nothing_pending(
    fresh_dataset: EmbeddedServer,
) -> None:
    """batch 2: the first interval is kept (its result committed into the session for a
    stop to fetch), then an op's think pause outlasts the CALL's end, so that kept interval
    becomes the answer's last. Nothing may stay pending after the CALL: a stop during the
    session's next CALL would fetch it (RunBackend.pending) and count it twice."""
    from openslob.engines.postgres.workload import PENDING_SETTING, install_procedures

    with psycopg.connect(fresh_dataset.conninfo(), autocommit=True) as conn:
        install_procedures(conn, ["user1"])
        (now,) = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        conf = {
            "update_pct": 0, "scan_pct": 0, "work_unit": 8, "scale": SCALE, "heavy": False,
            "start_epoch": now + 0.05, "until_epoch": now + 10, "interval_s": 0.2,
            "batch": 2, "batch_offset": 0, "record": True, "op_base": 0, "carry": False,
            "hot_schema_frequency": 0, "hotspot_frequency": 0, "hotspot_first_key": 1,
            "hotspot_last_key": 8, "think_frequency": 1, "think_min": 0.5, "think_max": 0.5,
            "release_s": 0.01, "rate": 0, "nap_s": 0.05,
        }  # fmt: skip
        (answer,) = conn.execute(
            'CALL "user1".slob_work(%s::jsonb, NULL)', [json.dumps(conf)]
        ).fetchone()
        (pending,) = conn.execute(f"SELECT current_setting('{PENDING_SETTING}', true)").fetchone()
    assert isinstance(answer, list) and len(answer) == 1, answer
    assert answer[0]["interval"] == 1 and answer[0]["call_ended"] is True
    assert answer[0]["ops"] == 1  # the op whose pause crossed both boundaries
    assert pending in ("0", None), pending
