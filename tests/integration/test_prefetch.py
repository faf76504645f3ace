"""PREFETCH=on changes the I/O shape on both real engines (issue 28, the Exadata seed's
prefetch study): the plan (PostgreSQL), the engine's own read-ahead and async-read figures,
and the run.json `io_shape` block with its report. No timing is asserted."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from openslob.engines.mariadb.runner import READ_AHEAD_SETTINGS
from openslob.engines.mariadb.server import MARIADBD, EmbeddedMariaDB
from openslob.engines.postgres.server import EmbeddedServer
from openslob.engines.postgres.workload import session_settings
from openslob.report.text import render_text
from openslob.results.schema import validate_run
from tests.conftest import invoke, make_base_dir

# Larger than either cache (PostgreSQL pio: ~16 MiB; MariaDB pio: ~29 MiB), small to load.
PG_DATA = ["--schemas", "2", "--scale", "4000", "--scan-table-sz", "0"]
MARIA_DATA = ["--schemas", "2", "--scale", "4096", "--scan-table-sz", "0"]
RUN = ["--sessions", "2", "--update-pct", "0", "--work-unit", "16", "--warmup", "0"]
RUN += ["--run-time", "2"]


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    path = make_base_dir("openslob-prefetch-")
    yield path / "data"
    for args in (["--engine", "postgresql"], ["--engine", "mariadb", "--page-size", "16k"]):
        invoke("server", "destroy", "--yes", *args, "--data-dir", str(path / "data"), cwd=path)
    shutil.rmtree(path, ignore_errors=True)


def slob(base: Path, cwd: Path, *args: str):
    return invoke(*args, "--data-dir", str(base), cwd=cwd)


def run(base: Path, cwd: Path, target: str, data: list[str], prefetch: str) -> dict[str, Any]:
    results = cwd / f"results-{prefetch}"
    shutil.rmtree(results, ignore_errors=True)
    args = ["run", "--target", target, *data, *RUN, "--prefetch", prefetch]
    result = slob(base, cwd, *args, "--results-dir", str(results))
    assert result.exit_code == 0, result.output
    (run_dir,) = results.iterdir()
    found = json.loads((run_dir / "run.json").read_text())
    validate_run(found)  # io_shape is declared in the shipped schema
    shape = found["io_shape"]
    assert shape["prefetch"] is (prefetch == "on")
    report = render_text(found)
    assert f"I/O shape (PREFETCH={prefetch})" in report
    return found


@pytest.fixture(scope="module")
def pg(base: Path, tmp_path_factory) -> tuple[Path, EmbeddedServer]:
    cwd = tmp_path_factory.mktemp("prefetch-pg")
    result = slob(base, cwd, "setup", "--target", "embedded", *PG_DATA)
    assert result.exit_code == 0, result.output
    return cwd, EmbeddedServer(base)


def _plan(server: EmbeddedServer, prefetch: bool) -> str:
    with psycopg.connect(server.conninfo(), autocommit=True) as conn:
        conn.execute(session_settings(conn.info.server_version, prefetch))
        rows = conn.execute(
            "EXPLAIN SELECT count(c2) FROM user1.cf1 WHERE custid BETWEEN 100 AND 115"
        ).fetchall()
    return "\n".join(r[0] for r in rows)


def test_postgres_prefetch_takes_the_bitmap_heap_scan(pg) -> None:
    _, server = pg
    assert "Bitmap Heap Scan" in _plan(server, True)
    off = _plan(server, False)
    assert "Index Scan" in off and "Bitmap" not in off


def test_postgres_sync_io_says_prefetch_reads_one_block_at_a_time(pg) -> None:
    """The private pio server's io_method=sync: the plan changes, the reads do not run
    ahead, and the run's notes say so and what to change."""
    cwd, server = pg
    found = run(server.data_dir, cwd, "embedded", PG_DATA, "on")
    shape = found["io_shape"]
    assert shape["io_method"] == "sync" and shape["parallel_read_event"] is None
    assert any("io_method = sync" in n for n in shape["notes"])
    assert shape["read_requests"] > 0 and shape["blocks_read"] >= shape["read_requests"]


@pytest.fixture(scope="module")
def pg_worker(pg) -> Iterator[tuple[Path, EmbeddedServer]]:
    """The same server with io_method=worker (a restart): reads can be in flight together."""
    cwd, server = pg
    with psycopg.connect(server.conninfo(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET io_method = 'worker'")
    server.stop()
    server.start()
    yield cwd, server
    with psycopg.connect(server.conninfo(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM RESET io_method")
    server.stop()


def test_postgres_prefetch_waits_on_async_reads(pg_worker) -> None:
    """io_method=worker: with PREFETCH=off the session mostly reads its own blocks
    (DataFileRead); on, the bitmap heap scan's read stream hands its reads
    to the I/O workers and the session waits for their completion (IO:AioIoCompletion, the
    db file parallel read stand-in)."""
    cwd, server = pg_worker
    off = run(server.data_dir, cwd, "embedded", PG_DATA, "off")["io_shape"]
    on = run(server.data_dir, cwd, "embedded", PG_DATA, "on")["io_shape"]
    for shape in (off, on):
        assert shape["io_method"] == "worker"
        assert shape["parallel_read_event"] == "IO:AioIoCompletion"
        assert shape["read_requests"] > 0 and shape["blocks_read"] >= shape["read_requests"]
        assert shape["device_in_flight"] is not None
    # off: an index scan's single-block reads are mostly the session's own (a few go
    # through a worker too); on: the session mostly waits for reads it issued ahead
    assert on["parallel_read_pct"] > 50 and on["parallel_read_pct"] > 2 * off["parallel_read_pct"]


@pytest.mark.skipif(not MARIADBD.exists(), reason="mariadb-server not installed")
def test_mariadb_prefetch_reads_ahead_for_the_run_only(base: Path, tmp_path: Path) -> None:
    """InnoDB read-ahead: none with PREFETCH=off (SLOB's single-page reads), pages read ahead
    with PREFETCH=on, and the server's variables as they were after the run."""
    target = "embedded-mariadb"
    result = slob(base, tmp_path, "setup", "--target", target, *MARIA_DATA)
    assert result.exit_code == 0, result.output
    kwargs = EmbeddedMariaDB(base, "16k").connect_kwargs()
    before = _read_ahead_settings(kwargs)
    off = run(base, tmp_path, target, MARIA_DATA, "off")
    on = run(base, tmp_path, target, MARIA_DATA, "on")
    assert off["io_shape"]["read_ahead_pages"] == 0
    assert on["io_shape"]["read_ahead_pages"] > 0
    assert on["io_shape"]["blocks_read"] > 0 and on["io_shape"]["avg_read_bytes"] > 0
    # the run put the server's own values back
    assert _read_ahead_settings(kwargs) == before
    assert before["innodb_random_read_ahead"] == "OFF"


def _read_ahead_settings(kwargs: dict[str, Any]) -> dict[str, str]:
    with pymysql.connect(**kwargs) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES"
            " WHERE VARIABLE_NAME IN %s",
            [tuple(n.upper() for n in READ_AHEAD_SETTINGS)],
        )
        return dict(cur.fetchall())
