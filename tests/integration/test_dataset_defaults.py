"""Commands not given SCHEMAS, SCALE, SCAN_TABLE_SZ or SEED work on the data set that is there.

After `slob setup --schemas 2 --scale 16M`, plain `slob verify`, `slob run` and `slob sweep`
use that data set and say so in one line; given values (flags, slob.conf) still win and a
mismatch still stops; several data sets must agree. Real private PostgreSQL 18 (the session
server); the bookkeeping's arithmetic also without a database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from openslob.config.resolve import resolve
from openslob.engines.common.tables import RecordedTable, recorded_parameters, schema_seed
from openslob.engines.postgres.engine import PostgresEngine
from openslob.engines.postgres.server import EmbeddedServer
from openslob.model.errors import ConfigError
from openslob.runner.dataset import Found, agreed, take

LINE = "SCHEMAS=2, SCALE=2048 rows (16 MiB per schema), SCAN_TABLE_SZ=128 rows, SEED=1"
# Read-only: an update run on so small a data set may leave cf1 a few pages over SCALE
# (verify then fails, rightly), and the later tests verify the same data set.
QUICK = ["--update-pct", "0", "--run-time", "2", "--warmup", "0"]


@pytest.fixture(scope="module")
def small_dataset(server: EmbeddedServer, tmp_path_factory) -> Iterator[EmbeddedServer]:
    """Only `slob setup --schemas 2 --scale 16M` on the server: the schemas other modules left
    are dropped first, so the data set is exactly that one. Every module that needs a data
    set sets up its own (their fixtures), so none depends on what this one leaves."""
    from tests.conftest import invoke

    cwd = tmp_path_factory.mktemp("dataset")
    env = {"SLOB_DATA_DIR": str(server.data_dir)}
    assert invoke("destroy", "--yes", cwd=cwd, env=env).exit_code == 0
    setup = invoke("setup", "--schemas", "2", "--scale", "16M", cwd=cwd, env=env)
    assert setup.exit_code == 0, setup.output
    yield server


def test_the_engine_reads_the_data_set_it_recorded(small_dataset: EmbeddedServer) -> None:
    engine = PostgresEngine(small_dataset.conninfo())
    recorded = engine.recorded_dataset()
    assert recorded == {
        "SCHEMAS": 2,
        "SCALE": 2048,
        "SCAN_TABLE_SZ": 128,
        "SEED": 1,
        "COMPRESS_RATIO": 1.0,
    }


def test_plain_verify_and_run_use_the_data_set(small_dataset, slob, tmp_path: Path) -> None:
    verify = slob("verify")
    assert verify.exit_code == 0, verify.output
    lines = [line for line in verify.stderr.splitlines() if line.startswith("data set")]
    assert len(lines) == 1 and LINE in lines[0] and small_dataset.label in lines[0], lines
    assert "all checks passed" in verify.stdout

    run = slob("run", *QUICK, "--results-dir", str(tmp_path / "r"))
    assert run.exit_code == 0, run.output
    assert LINE in run.stderr and "run: 2 sessions" in run.stderr  # SCHEMAS x 1 thread
    (run_dir,) = (tmp_path / "r").iterdir()
    result = json.loads((run_dir / "run.json").read_text())
    config, sources = result["config"], result["config_sources"]
    assert (config["SCHEMAS"], config["SCALE"], config["SCAN_TABLE_SZ"]) == (2, 2048, 128)
    assert {k: sources[k] for k in ("SCHEMAS", "SCALE", "SCAN_TABLE_SZ", "SEED")} == dict.fromkeys(
        ("SCHEMAS", "SCALE", "SCAN_TABLE_SZ", "SEED"), "dataset"
    )
    assert sources["RUN_TIME"] == "flag" and "WORK_UNIT" not in sources  # a default

    # doctor checks capacity and the data size against the data set that is there
    doctor = slob("doctor", "--json")
    assert LINE in doctor.stderr, doctor.output
    findings = {f["check"]: f for f in json.loads(doctor.stdout)}  # one target: one list
    assert findings["data set vs shared_buffers"]["value"].startswith("32 MB vs")  # 2 x 16 MiB


def test_given_values_win_and_a_mismatch_still_stops(small_dataset, slob, tmp_path: Path) -> None:
    one = slob("verify", "--schemas", "1")  # given: one schema; the rest from the data set
    assert one.exit_code == 0, one.output
    assert "data set as set up on" in one.stderr and "SCHEMAS=" not in one.stderr
    assert "user2" not in one.stdout
    results = tmp_path / "r"
    refused = slob("run", "--scale", "4096", *QUICK, "--results-dir", str(results))
    assert refused.exit_code == 1
    assert "the data set does not match this run" in refused.stderr
    # the parameter named, with both values (not "rows, seed or layout version")
    assert "SCALE 4,096 (this run) vs 2,048 (the data set)" in refused.stderr
    assert "run `slob setup`" in refused.stderr and "SCALE=4096" in refused.stderr
    assert not results.exists()  # refused before anything ran
    # slob.conf is given too: its SCALE is checked against the tables, not replaced
    (tmp_path / "slob.conf").write_text("SCALE=4096\n")
    from_file = slob("verify")
    assert from_file.exit_code == 1 and "SCALE=" not in from_file.stderr


def test_a_sweep_uses_the_data_set(small_dataset, slob, tmp_path: Path) -> None:
    results = tmp_path / "r"
    args = ["sweep", "--sessions", "1,2", "--update-pct", "0", "--run-time", "1", "--warmup", "0"]
    swept = slob(*args, "--label", "ds", "--results-dir", str(results))
    assert swept.exit_code == 0, swept.output
    assert swept.stderr.count(LINE) == 1
    plan = json.loads((results / "sweep-ds" / "sweep.json").read_text())
    assert (plan["base"]["SCHEMAS"], plan["base"]["SCALE"], plan["base"]["SEED"]) == (2, 2048, 1)
    again = slob(*args, "--label", "ds", "--results-dir", str(results))  # resumes: same plan
    assert again.exit_code == 0 and "2 point(s) already complete" in again.stderr


# ----------------------------------------------------------------- without a database


def _recorded(schemas: int, rows: int, scan: int, seed: int) -> list[RecordedTable]:
    tables = []
    for index in range(1, schemas + 1):
        tables.append(RecordedTable(f"user{index}", "cf1", rows, schema_seed(seed, index)))
        if scan:
            tables.append(RecordedTable(f"user{index}", "cf2", scan, schema_seed(seed, index)))
    return tables


def test_parameters_are_read_back_from_the_bookkeeping() -> None:
    assert recorded_parameters([]) is None
    big_seed = 2**31 - 1
    assert recorded_parameters(_recorded(3, 5000, 40, big_seed)) == {
        "SCHEMAS": 3, "SCALE": 5000, "SCAN_TABLE_SZ": 40, "SEED": big_seed, "COMPRESS_RATIO": 1.0
    }  # fmt: skip
    # setup --schemas 2 after a setup of 4 with other rows: the last setup's two schemas
    older = _recorded(4, 8192, 128, 1)[4:]
    assert recorded_parameters(_recorded(2, 2048, 16, 7) + older) == {
        "SCHEMAS": 2, "SCALE": 2048, "SCAN_TABLE_SZ": 16, "SEED": 7, "COMPRESS_RATIO": 1.0
    }  # fmt: skip
    # a scan table in only some schemas (a later setup without one): none the run can use
    mixed = [*_recorded(2, 3000, 16, 5), RecordedTable("user3", "cf1", 3000, schema_seed(5, 3))]
    assert recorded_parameters(mixed) == {
        "SCHEMAS": 3, "SCALE": 3000, "SCAN_TABLE_SZ": 0, "SEED": 5, "COMPRESS_RATIO": 1.0
    }  # fmt: skip
    # a seed no SEED explains is no data set of ours
    assert recorded_parameters([RecordedTable("user1", "cf1", 3000, 12345)]) is None


def test_data_sets_must_agree_on_what_is_taken(tmp_path: Path) -> None:
    a = Found(
        "a",
        {"SCHEMAS": 2, "SCALE": 2048, "SCAN_TABLE_SZ": 128, "SEED": 1, "COMPRESS_RATIO": 1.0},
        None,
    )
    b = Found(
        "b",
        {"SCHEMAS": 2, "SCALE": 4096, "SCAN_TABLE_SZ": 128, "SEED": 1, "COMPRESS_RATIO": 1.0},
        None,
    )
    none = Found("c", None, None)
    assert agreed([none], ["SCALE"]) is None
    assert agreed([none, a], ["SCALE"]) == {"SCALE": 2048}  # a target without one: no say
    assert agreed([a, b], ["SCHEMAS", "SEED"]) == {"SCHEMAS": 2, "SEED": 1}
    with pytest.raises(ConfigError, match=r"^SCALE is not given and the data sets differ.*--scale"):
        agreed([a, b], ["SCHEMAS", "SCALE"])
    # a value taken must fit the given ones as a flag would
    config = resolve({"WORK_UNIT": "64"}, None, cwd=tmp_path, scope="run")
    with pytest.raises(ConfigError, match="SCALE=100 must be greater than 2 x WORK_UNIT"):
        take(config, {"SCALE": 100})
    assert take(config, None) is config
