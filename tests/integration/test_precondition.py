"""`slob precondition` against real private servers (PostgreSQL 18, MariaDB) on small data
sets, and a real loop-device file system for the fill: pages rewritten (the engines' own
counters and the device's), layout and incompressibility kept, resume after Ctrl-C with no
server-side work left, the fill up to a level and its refusal, `slob destroy` cleaning up."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pymysql
import pytest

from openslob.engines.common.engine import SlobEngine
from openslob.engines.mariadb.server import MARIADBD, EmbeddedMariaDB
from openslob.engines.postgres.server import EmbeddedServer
from openslob.runner.prewrite import STATE_FILE, WORK_DIR_NAME, FileSystemUse
from tests.conftest import invoke, make_base_dir, private_mariadb, slob_subprocess

SMALL = ["--schemas", "1", "--scale", "1000", "--scan-table-sz", "100"]
ROWS = 1100  # cf1 + cf2: one page (PostgreSQL) or half a page (InnoDB 16k) each


@pytest.fixture(scope="module")
def pg() -> Iterator[EmbeddedServer]:
    """A server of its own: preconditioning rewrites the data set other tests read."""
    base = make_base_dir("openslob-precond-")
    srv = EmbeddedServer(base / "srv")
    srv.start("pio")
    result = invoke("setup", *SMALL, cwd=base, env={"SLOB_DATA_DIR": str(srv.data_dir)})
    assert result.exit_code == 0, result.output
    yield srv
    srv.destroy()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def maria() -> Iterator[EmbeddedMariaDB]:
    if not MARIADBD.exists():
        pytest.skip("mariadb-server not installed")
    yield from private_mariadb("openslob-precond-maria-")


def _slob(server: EmbeddedServer, cwd: Path, *args: str):
    return invoke(*args, cwd=cwd, env={"SLOB_DATA_DIR": str(server.data_dir)})


def _summary(results: Path) -> dict:
    return json.loads((results / "precondition.json").read_text())


def _pg_updates(server: EmbeddedServer) -> int:
    with psycopg.connect(server.conninfo(), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute(
            "SELECT sum(n_tup_hot_upd) FROM pg_stat_user_tables WHERE schemaname = 'user1'"
        ).fetchone()
    return int(row[0] or 0) if row else 0


def _check_result(doc: dict, passes: int) -> None:
    assert doc["complete"] and doc["passes_done"] == passes
    assert doc["bytes_written"] == passes * doc["dataset_bytes"]
    assert doc["written_over_dataset"] == pytest.approx(passes)
    # What reached the device: every page at least once per pass (the checkpoint after each
    # pass), plus WAL / redo and anything else on the shared disk (measured: 2.3x on PG and
    # 17x on InnoDB for 2 passes): `passes` x the data set is the bound that cannot fail.
    assert doc["device_written_bytes"] >= passes * doc["dataset_bytes"], doc


def test_engine_mode_rewrites_every_postgres_page(pg: EmbeddedServer, tmp_path: Path) -> None:
    before = _pg_updates(pg)
    results = tmp_path / "out"
    result = _slob(pg, tmp_path, "precondition", "--passes", "2", "--results", str(results))
    assert result.exit_code == 0, result.output
    doc = _summary(results)
    assert doc["dataset_bytes"] == ROWS * 8192
    _check_result(doc, 2)
    # every row (one per page) updated once per pass, in place (HOT: no index touched)
    assert _pg_updates(pg) - before == 2 * ROWS
    lines = (results / "precondition.csv").read_text().splitlines()
    assert lines[0] == "t_s,write_mb_per_s"
    verified = _slob(pg, tmp_path, "verify", "--json")
    assert verified.exit_code == 0, verified.output  # SCALE pages, compression <= 1.15, ...


def test_engine_mode_rewrites_every_innodb_row(maria: EmbeddedMariaDB, tmp_path: Path) -> None:
    target = ["--target", "embedded-mariadb", "--data-dir", str(maria.base_dir)]
    assert invoke("setup", *SMALL, *target, cwd=tmp_path).exit_code == 0

    def updated() -> int:
        conn = pymysql.connect(**maria.connect_kwargs())
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Handler_update'")
            row = cur.fetchone()
        conn.close()
        return int(row[1])

    before = updated()
    results = tmp_path / "out"
    args = ["precondition", "--passes", "2", "--results", str(results), *target]
    result = invoke(*args, cwd=tmp_path)
    assert result.exit_code == 0, result.output
    doc = _summary(results)
    assert doc["dataset_bytes"] == ROWS * 8192  # 2 rows per 16 KiB page
    _check_result(doc, 2)
    # every row once per pass (the private server's own bookkeeping may add a few)
    assert 2 * ROWS <= updated() - before < 2 * ROWS + 100
    verified = invoke("verify", "--json", *target, cwd=tmp_path)
    assert verified.exit_code == 0, verified.output  # 2 rows per leaf page, compression


def _interrupt_and_resume(
    state_file: Path,
    target: list[str],
    data_dir: Path,
    tmp_path: Path,
    passes: int,
    sessions_left: Callable[[], int],
) -> tuple[str, dict]:
    """Ctrl-C an engine precondition of `passes` once a batch is done, check what it kept,
    run the same command again; (stderr of the first, the second's summary)."""
    args = ["precondition", "--passes", str(passes), *target]
    first = tmp_path / "first"
    proc = slob_subprocess(*args, "--results", str(first), data_dir=data_dir, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until a batch of this run is done
        doc = json.loads(state_file.read_text()) if state_file.exists() else {}
        if doc.get("key", {}).get("passes") == passes and doc.get("bytes_written", 0) > 0:
            break
        time.sleep(0.01)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 5
    assert proc.returncode == 130, stderr
    assert "the same command continues it" in stderr
    gone = time.monotonic() + 3  # the server notices the closed socket within moments
    while sessions_left() and time.monotonic() < gone:
        time.sleep(0.05)
    assert sessions_left() == 0  # no statement of ours left running
    kept = json.loads(state_file.read_text())
    assert 0 < kept["bytes_written"] < passes * ROWS * 8192
    interrupted = _summary(first)
    assert not interrupted["complete"]
    assert interrupted["bytes_written"] == kept["bytes_written"]
    second = tmp_path / "second"
    result = invoke(
        *args, "--results", str(second), cwd=tmp_path, env={"SLOB_DATA_DIR": str(data_dir)}
    )
    assert result.exit_code == 0, result.output
    assert "resuming" in result.output
    doc = _summary(second)
    assert doc["resumed"] and doc["complete"]
    assert doc["bytes_written"] == passes * ROWS * 8192  # nothing counted twice, nothing lost
    assert sessions_left() == 0  # the last pass closed its connection
    return stderr, doc


def test_ctrl_c_keeps_the_state_and_a_rerun_continues(pg: EmbeddedServer, tmp_path: Path) -> None:
    state_file = pg.data_dir / WORK_DIR_NAME / STATE_FILE
    with psycopg.connect(pg.conninfo(), autocommit=True) as watcher:

        def left() -> int:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                ["openslob-precondition"],
            ).fetchone()
            return int(row[0]) if row else -1

        _interrupt_and_resume(state_file, [], pg.data_dir, tmp_path, 12, left)


def test_ctrl_c_on_mariadb_kills_the_statement(maria: EmbeddedMariaDB, tmp_path: Path) -> None:
    target = ["--target", "embedded-mariadb", "--data-dir", str(maria.base_dir)]
    assert invoke("setup", *SMALL, *target, cwd=tmp_path).exit_code == 0  # as it is: valid
    state_file = maria.dir / WORK_DIR_NAME / STATE_FILE
    conn = pymysql.connect(**maria.connect_kwargs())

    def left() -> int:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM information_schema.PROCESSLIST"
                " WHERE INFO LIKE '%%openslob-precondition%%' AND ID <> CONNECTION_ID()"
            )
            row = cur.fetchone()
        return int(row[0]) if row else -1

    try:
        _interrupt_and_resume(state_file, target, maria.base_dir, tmp_path, 5, left)
    finally:
        conn.close()


@pytest.fixture()
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB ext4 file system on a loop device (the fill's level is its own, not the
    shared disk's, which other processes fill and empty as we go)."""
    if shutil.which("losetup") is None or shutil.which("mkfs.ext4") is None:
        pytest.skip("no losetup / mkfs.ext4 on this machine")
    image, mount = tmp_path / "fs.img", tmp_path / "mnt"
    with image.open("wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    device = subprocess.run(
        ["losetup", "-f", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    mount.mkdir()
    try:
        subprocess.run(["mount", device, str(mount)], check=True)
        try:
            yield mount
        finally:
            subprocess.run(["umount", str(mount)], check=True)
    finally:
        subprocess.run(["losetup", "-d", device], check=True)


def test_seq_mode_fills_to_the_level_and_refuses_beyond(
    pg: EmbeddedServer, small_fs: Path, tmp_path: Path
) -> None:
    work = small_fs / "work"
    results = tmp_path / "out"
    args = ["precondition", "--mode", "seq", "--size", "4M", "--block-size", "256K"]
    result = _slob(
        pg, tmp_path, *args, "--fill", "60", "--dir", str(work), "--results", str(results)
    )
    assert result.exit_code == 0, result.output
    doc = _summary(results)
    assert doc["complete"] and doc["bytes_written"] == 2 * (4 << 20) + doc["fill_bytes"]
    assert doc["fill_bytes"] > 10 << 20
    assert doc["devices"] and doc["devices"][0].startswith("loop")
    assert doc["o_direct"] is True  # ext4 takes O_DIRECT
    assert FileSystemUse.of(small_fs).used_pct == pytest.approx(60, abs=1.0)
    assert sorted(p.name for p in work.glob("*.dat"))[0] == "fill-0000.dat"

    listing = sorted((p.name, p.stat().st_mtime_ns) for p in work.iterdir())
    # 36 MB more of seq files alone would take the 64 MB file system beyond 50 %
    bigger = [*args[:4], "40M", *args[5:]]
    refused = _slob(pg, tmp_path, *bigger, "--fill", "50", "--dir", str(work))
    assert refused.exit_code == 2
    (line,) = [x for x in refused.output.splitlines() if x.startswith("slob: error")]
    assert "--fill 50: the file system would be" in line and "allowed" in line
    assert sorted((p.name, p.stat().st_mtime_ns) for p in work.iterdir()) == listing


def test_destroy_removes_our_files(pg: EmbeddedServer, tmp_path: Path) -> None:
    args = ["precondition", "--mode", "random", "--size", "1M", "--passes", "1"]
    result = _slob(pg, tmp_path, *args, "--results", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    work = pg.data_dir / WORK_DIR_NAME
    assert (work / "random-0000.dat").stat().st_size == 1 << 20
    destroyed = _slob(pg, tmp_path, "destroy", "--yes")
    assert destroyed.exit_code == 0, destroyed.output
    assert "removed the files of `slob precondition`" in destroyed.output
    assert not work.exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--passes", "0"], "--passes 0: allowed 1..100"),
        (["--block-size", "3K"], "--block-size"),
        (["--fill", "99"], "--fill 99: allowed 1..95"),
        (["--size", "1G"], "--size: only with --mode seq or random"),
        (["--mode", "seq", "--size", "lots"], "--size lots"),
    ],
)
def test_bad_input_is_one_line_before_anything(
    pg: EmbeddedServer, tmp_path: Path, args: list[str], says: str
) -> None:
    result = _slob(pg, tmp_path, "precondition", *args)
    assert result.exit_code == 2
    errors = [x for x in result.output.splitlines() if x.startswith("slob: error")]
    assert len(errors) == 1 and says in errors[0], result.output


def test_ctrl_c_as_a_pass_ends_counts_no_extent_twice(
    pg: EmbeddedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C during the checkpoint that ends a pass (flush_writes) saved (its last extent,
    offset 0): the rerun wrote and counted that whole extent again (a full suite saw 100
    rows too many). The KeyboardInterrupt is raised there, as Ctrl-C's handler would."""
    real = SlobEngine.flush_writes
    calls: list[int] = []

    def interrupted(self: SlobEngine, extents: list) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real(self, extents)

    # its own data set: an earlier test of this module may have left the server without one
    assert _slob(pg, tmp_path, "setup", *SMALL).exit_code == 0
    monkeypatch.setattr(SlobEngine, "flush_writes", interrupted)
    args = ["precondition", "--passes", "2"]
    first = _slob(pg, tmp_path, *args, "--results", str(tmp_path / "first"))
    assert first.exit_code == 130, first.output
    assert "the same command continues it" in first.output
    second = _slob(pg, tmp_path, *args, "--results", str(tmp_path / "second"))
    assert second.exit_code == 0, second.output
    doc = _summary(tmp_path / "second")
    assert doc["resumed"] and doc["complete"]
    assert doc["bytes_written"] == 2 * ROWS * 8192  # nothing counted twice, nothing lost
