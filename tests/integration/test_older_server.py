"""The "older server" path: Debian's PostgreSQL 15 (not the wheel), started privately here.

`.ci/run` installs postgresql-15 with apt when it is missing; the fixture fails rather than
skips without it. The same commands as on the private server must work, with the figures
PostgreSQL 15 cannot give null and a note saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from openslob.cli import cli
from openslob.config.resolve import resolve
from openslob.engines.common import fsperm
from openslob.engines.postgres.runner import PostgresRunBackend
from openslob.engines.postgres.server import SERVICE_USER
from openslob.report.text import render_text
from openslob.runner.execute import run_benchmark
from tests.conftest import make_base_dir

PG15_BIN = Path("/usr/lib/postgresql/15/bin")
DATA = ["--schemas", "2", "--scale", "2000", "--scan-table-sz", "16", "--seed", "5"]


def _as_server_user(args: list[str]) -> list[str]:
    """PostgreSQL refuses root: run its programs as the unprivileged service user."""
    return ["runuser", "-u", SERVICE_USER, "--", *args] if os.geteuid() == 0 else args


@pytest.fixture(scope="module")
def pg15() -> Iterator[str]:
    assert (PG15_BIN / "postgres").exists(), "install postgresql-15 (apt) for this test"
    base = make_base_dir("openslob-pg15-")
    if os.geteuid() == 0:
        fsperm.ensure_service_user(SERVICE_USER)
        shutil.chown(base, SERVICE_USER)  # our own new directory, handed to the server user
    data = base / "data"
    subprocess.run(
        _as_server_user([str(PG15_BIN / "initdb"), "-D", str(data), "-U", "slob", "-A", "trust"]),
        check=True,
        capture_output=True,
    )
    options = " ".join(
        [
            f"-k {base}",
            "-c listen_addresses=''",
            "-c shared_buffers=16MB",
            "-c shared_preload_libraries=pg_stat_statements",
            "-c pg_stat_statements.track=all",
            "-c track_io_timing=on",
            "-c track_wal_io_timing=on",
        ]
    )
    pg_ctl = [str(PG15_BIN / "pg_ctl"), "-D", str(data), "-l", str(base / "log")]
    subprocess.run(
        _as_server_user([*pg_ctl, "-o", options, "-w", "start"]), check=True, capture_output=True
    )
    conninfo = f"host={base} port=5432 user=slob dbname=slob"
    with psycopg.connect(f"host={base} port=5432 user=slob dbname=postgres") as conn:
        conn.autocommit = True
        conn.execute("CREATE DATABASE slob")
    try:
        yield conninfo
    finally:
        subprocess.run(_as_server_user([*pg_ctl, "-m", "fast", "stop"]), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_setup_and_verify_on_15(pg15: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)  # no stray ./slob.conf
    setup = runner.invoke(cli, ["setup", "--target", pg15, *DATA], catch_exceptions=False)
    assert setup.exit_code == 0, setup.output
    verify = runner.invoke(cli, ["verify", "--target", pg15, *DATA], catch_exceptions=False)
    assert verify.exit_code == 0, verify.output


def test_run_on_15_has_its_figures_and_says_what_is_missing(pg15: str, tmp_path: Path) -> None:
    flags = {
        "SCHEMAS": "2",
        "SCALE": "2000",
        "SCAN_TABLE_SZ": "16",
        "SEED": "5",
        "UPDATE_PCT": "50",
        "RUN_TIME": "3",
        "WARMUP": "1",
    }
    config = resolve(flags, None, cwd=tmp_path)
    _, run = run_benchmark(config, target=pg15, data_dir=None, results_parent=tmp_path / "r")
    assert run["status"] == "complete", run["error"]
    assert run["engine"]["version"].startswith("15.")
    m, seconds = run["metrics"], run["window"]["seconds"]
    # what 15 measures: reads from pg_stat_database, WAL syncs and their time from pg_stat_wal
    assert m["slobops_per_s"] > 0 and m["updates_per_s"] > 0
    assert m["lio_per_s"] > 0 and m["pio_reads_per_s"] is not None
    assert m["commits_per_s"] >= m["updates_per_s"] * 0.99
    assert m["wal_syncs_per_s"] > 0 and m["wal_sync_latency_us"] > 0
    assert 2 * seconds <= m["db_time_s"] <= 2 * (seconds + 0.5)  # the flush works on 15
    # what it cannot: pg_stat_io (16+) -> null, with a note naming the reason
    assert m["pio_writes_per_s"] is None and m["db_write_latency_us"] is None
    assert run["io"] is None
    assert any("no pg_stat_io" in note for note in run["notes"])
    text = render_text(run)
    assert "note: PostgreSQL 15 has no pg_stat_io" in text


def test_doctor_on_15_says_what_to_change(pg15: str) -> None:
    result = CliRunner().invoke(cli, ["doctor", "--target", pg15, "--json", *DATA])
    assert result.exit_code == 0, result.output  # warnings only: the run works
    found = {f["check"]: f for f in json.loads(result.stdout)}
    assert found["server version"]["verdict"] == "warn"
    assert found["server version"]["value"].startswith("15.")
    assert found["direct I/O"]["verdict"] == "warn"
    assert "not available before 16" in found["direct I/O"]["value"]
    assert found["track_io_timing"]["verdict"] == "ok"  # the fixture turned it on
    # the 2 x 2000-row data set is smaller than 10 x 16 MB of shared_buffers
    assert found["data set vs shared_buffers"]["verdict"] == "warn"
    assert found["create schemas (setup)"]["verdict"] == "ok"


def test_doctor_names_missing_privileges(pg15: str) -> None:
    with psycopg.connect(pg15, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS weak")
        conn.execute("CREATE ROLE weak LOGIN")
        conn.execute("REVOKE CREATE ON DATABASE slob FROM PUBLIC")
    weak = pg15.replace("user=slob", "user=weak")
    result = CliRunner().invoke(cli, ["doctor", "--target", weak, "--json"])
    assert result.exit_code == 1, result.output  # setup could not create its schemas
    found = {f["check"]: f for f in json.loads(result.stdout)}
    assert found["create schemas (setup)"]["verdict"] == "fail"
    assert "GRANT CREATE ON DATABASE slob TO weak" in found["create schemas (setup)"]["advice"]
    assert found["read all statistics"]["verdict"] == "warn"
    assert "pg_read_all_stats" in found["read all statistics"]["advice"]
    # nor may it read the server host's /proc: the run says why its host figures are null
    reason = PostgresRunBackend(weak, "t").host_files_reason()
    assert reason is not None and "42501" in reason and "/proc" in reason
    assert PostgresRunBackend(pg15, "t").host_files_reason() is None  # a superuser may


def test_doctor_on_the_private_server_is_all_ok(slob) -> None:
    result = slob("doctor", "--json")
    assert result.exit_code == 0, result.output
    verdicts = {f["check"]: f["verdict"] for f in json.loads(result.stdout)}
    assert verdicts["direct I/O"] == verdicts["track_io_timing"] == "ok"
    assert verdicts["io_method"] == verdicts["connections"] == "ok"


def test_doctor_unreachable_server_is_one_line(tmp_path: Path) -> None:
    missing = f"host={tmp_path} port=1 dbname=x user=x"
    result = CliRunner().invoke(cli, ["doctor", "--target", missing])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "cannot connect" in lines[0]
