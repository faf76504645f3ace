"""The harness: plan, naming, validation up front, resume after an interrupted point."""

from __future__ import annotations

import csv
import io
import json
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from openslob.cli import cli
from openslob.engines.postgres.server import EmbeddedServer
from openslob.model.errors import ConfigError
from openslob.results.collect import find_runs
from openslob.runner.sweep import plan_sweep
from tests.conftest import slob_subprocess
from tests.integration.test_run import dataset  # noqa: F401  (the data set DATA: this module's runs need it loaded)

DATA = ["--schemas", "2", "--scale", "3000", "--scan-table-sz", "40", "--seed", "99"]


def test_plan_order_and_names(tmp_path: Path) -> None:
    plan = plan_sweep(
        {"UPDATE_PCT": "20,0", "SESSIONS": "4,1,2", "WORK_UNIT": "16,64"}, None, tmp_path
    )
    assert list(plan.axes) == ["UPDATE_PCT", "WORK_UNIT", "SESSIONS"]
    assert plan.axes["SESSIONS"] == [1, 2, 4]  # ascending whatever the order given
    assert plan.axes["UPDATE_PCT"] == [20, 0]  # as given: the petals in the user's order
    names = [p.name for p in plan.points]
    assert len(names) == 12
    assert names[:4] == [
        "update_pct-20_work_unit-16_sessions-1",
        "update_pct-20_work_unit-16_sessions-2",
        "update_pct-20_work_unit-16_sessions-4",
        "update_pct-20_work_unit-64_sessions-1",
    ]
    point = plan.points[5]
    assert point.config["UPDATE_PCT"] == 20 and point.config["WORK_UNIT"] == 64
    assert point.config["SESSIONS"] == 4


def test_every_point_is_validated_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="UPDATE_PCT=101"):
        plan_sweep({"UPDATE_PCT": "0,101", "SESSIONS": "1,2"}, None, tmp_path)
    with pytest.raises(ConfigError, match="at least one list"):
        plan_sweep({"UPDATE_PCT": "10"}, None, tmp_path)
    with pytest.raises(ConfigError, match="listed twice"):
        plan_sweep({"SESSIONS": "1,1"}, None, tmp_path)
    # a combination error: SCALE must exceed 2 x WORK_UNIT at every point
    with pytest.raises(ConfigError, match="WORK_UNIT"):
        plan_sweep({"WORK_UNIT": "16,1024", "SCALE": "1000"}, None, tmp_path)


def test_bad_list_value_is_exit_2_and_creates_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["sweep", "--sessions", "1,x", "--results-dir", str(tmp_path / "r")]
    )
    assert result.exit_code == 2
    assert "SESSIONS=x" in result.output
    assert not (tmp_path / "r").exists()


def _sweep_args(results: Path, label: str) -> list[str]:
    return [
        "sweep",
        *DATA,
        "--update-pct",
        "0,100",
        "--sessions",
        "1,2",
        "--run-time",
        "1",
        "--warmup",
        "0",
        "--results-dir",
        str(results),
        "--label",
        label,
    ]


def test_sweep_runs_every_point_and_resumes(
    dataset: EmbeddedServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    server = dataset
    results = tmp_path / "results"
    env = {"SLOB_DATA_DIR": str(server.data_dir)}
    label = "t/../../escaped"  # a label names a directory inside --results-dir, always
    first = CliRunner().invoke(cli, _sweep_args(results, label), env=env, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert [p.name for p in tmp_path.iterdir()] == ["results"]
    path = results / "sweep-t-..-..-escaped"
    sweep = json.loads((path / "sweep.json").read_text())
    assert [p["status"] for p in sweep["points"]] == ["complete"] * 4
    assert [p["name"] for p in sweep["points"]] == [
        "update_pct-0_sessions-1",
        "update_pct-0_sessions-2",
        "update_pct-100_sessions-1",
        "update_pct-100_sessions-2",
    ]
    refs = find_runs([path])
    assert [len(r.run["sessions"]) for r in refs] == [1, 2, 1, 2]
    assert [r.run["config"]["UPDATE_PCT"] for r in refs] == [0, 0, 100, 100]
    assert refs[2].run["metrics"]["selects_per_s"] == 0
    rows = list(csv.DictReader(io.StringIO((path / "sweep.csv").read_text())))
    assert [r["run"] for r in rows] == [p["name"] for p in sweep["points"]]
    for row, ref in zip(rows, refs, strict=True):  # analyze reproduces every run's numbers
        metrics = ref.run["metrics"]
        assert float(row["executes_per_s"]) == pytest.approx(metrics["slobops_per_s"])
        assert float(row["preads_per_s"]) == pytest.approx(metrics["pio_reads_per_s"])
        assert int(row["sessions"]) == len(ref.run["sessions"])
    for suffix in ("png", "svg"):
        assert (path / "plots" / f"petal_iops.{suffix}").stat().st_size > 1000
    # the same command again: nothing to run but the point whose run.json was damaged
    lost = path / sweep["points"][1]["run_dir"] / "run.json"
    lost.write_text(lost.read_text()[:100])
    before = {p.parent.name: p.stat().st_mtime for p in path.glob("*/run.json") if p != lost}
    again = CliRunner().invoke(cli, _sweep_args(results, label), env=env, catch_exceptions=False)
    assert again.exit_code == 0, again.output
    assert "3 point(s) already complete" in again.output
    assert "its run.json is missing or damaged: running it again" in again.output
    assert json.loads(lost.read_text())["status"] == "complete"
    after = {p.parent.name: p.stat().st_mtime for p in path.glob("*/run.json") if p != lost}
    assert after == before
    # a sweep.json edited to point outside the sweep, or not JSON: one line naming it
    victim = tmp_path / "victim"
    victim.mkdir()
    good = (path / "sweep.json").read_text()
    outside = good.replace('"run_dir": "update_pct-0_sessions-1"', '"run_dir": "../../victim"')
    for damaged, why in ((outside, "run_dir"), (good[:200], "not readable")):
        (path / "sweep.json").write_text(damaged)
        refused = CliRunner().invoke(cli, _sweep_args(results, label), env=env)
        assert refused.exit_code == 1 and "Traceback" not in refused.output, refused.output
        assert f"{path / 'sweep.json'}: a damaged sweep.json (" in refused.output
        assert why in refused.output
    assert victim.exists()
    (path / "sweep.json").write_text(good)
    # a sweep.json from before an option existed (its default changes nothing) resumes
    sweep["base"] = {k: v for k, v in sweep["base"].items() if k != "SESSIONS_PER_INSTANCE"}
    (path / "sweep.json").write_text(json.dumps(sweep))
    older = CliRunner().invoke(cli, _sweep_args(results, label), env=env, catch_exceptions=False)
    assert "4 point(s) already complete" in older.output, older.output
    # a different plan under the same label is refused
    other = CliRunner().invoke(cli, [*_sweep_args(results, label), "--work-unit", "16"], env=env)
    assert other.exit_code == 2 and "different plan" in other.output


def test_interrupted_sweep_resumes_where_it_stopped(
    dataset: EmbeddedServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    server = dataset
    results = tmp_path / "results"
    args = [*_sweep_args(results, "ctrlc")]
    # 4 s points, Ctrl-C 1.5 s after the second one started: inside it with 2.5 s to spare
    # (6 s points and a 2 s wait made this test ~33 s: four of its points run whole)
    args[args.index("--run-time") + 1] = "4"
    proc = slob_subprocess(*args, data_dir=server.data_dir)
    path = results / "sweep-ctrlc"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait for the second point to be running
        if (path / "sweep.json").exists():
            points = json.loads((path / "sweep.json").read_text())["points"]
            if points[1]["status"] == "running":
                break
        time.sleep(0.2)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    points = json.loads((path / "sweep.json").read_text())["points"]
    assert [p["status"] for p in points] == ["complete", "interrupted", "pending", "pending"]
    first_run = (path / points[0]["run_dir"] / "run.json").stat().st_mtime
    resumed = CliRunner().invoke(
        cli, args, env={"SLOB_DATA_DIR": str(server.data_dir)}, catch_exceptions=False
    )
    assert resumed.exit_code == 0, resumed.output
    points = json.loads((path / "sweep.json").read_text())["points"]
    assert [p["status"] for p in points] == ["complete"] * 4
    assert (path / points[0]["run_dir"] / "run.json").stat().st_mtime == first_run
    assert "1 point(s) already complete" in resumed.output


def test_repeat_label_stays_in_the_results_directory(
    dataset: EmbeddedServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    args = ["run", *DATA, "--sessions", "1", "--update-pct", "0", "--run-time", "1"]
    args += ["--warmup", "0", "--repeat", "2", "--results-dir", str(results)]
    env = {"SLOB_DATA_DIR": str(dataset.data_dir)}
    result = CliRunner().invoke(
        cli, [*args, "--label", "../../escaped"], env=env, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert [p.name for p in tmp_path.iterdir()] == ["results"]
    assert [p.name for p in results.iterdir()] == ["repeat-escaped"]
