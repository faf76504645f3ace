"""fio as the raw-device reference: parsing its JSON, running it, the comparison in reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from openslob.cli import cli
from openslob.config.resolve import resolve
from openslob.engines.postgres.server import EmbeddedServer
from openslob.report.text import render_text
from openslob.runner.calibrate import CalibrationError, parse_fio_json, require_fio
from openslob.runner.execute import run_benchmark
from openslob.runner.observers import Observers

FIO_JSON = Path(__file__).parents[1] / "data" / "fio" / "fio-3.33-randread-8k-4jobs.json"


def test_parse_recorded_fio_json() -> None:
    # Recorded on the reference VM: fio 3.33, 8 KiB randread, psync, direct, 4 jobs, 30 s.
    raw = json.loads(FIO_JSON.read_text())
    read = raw["jobs"][0]["read"]
    parsed = parse_fio_json("note: fio prints this line first\n" + FIO_JSON.read_text())
    assert parsed["version"] == "fio-3.33"
    assert parsed["iops"] == pytest.approx(read["iops"])
    assert parsed["read_mb_per_s"] == pytest.approx(read["bw_bytes"] / 2**20)
    assert parsed["mean_latency_us"] == pytest.approx(read["clat_ns"]["mean"] / 1000)
    assert parsed["seconds"] == pytest.approx(30, abs=0.01)  # not the 4 jobs' 120 s summed
    assert parsed["p99_latency_us"] == pytest.approx(
        read["clat_ns"]["percentile"]["99.000000"] / 1000
    )
    # 8 KiB per read: MB/s and IOPS describe the same traffic
    assert parsed["read_mb_per_s"] == pytest.approx(parsed["iops"] * 8192 / 2**20, rel=0.01)


def test_garbage_is_a_clear_error() -> None:
    with pytest.raises(CalibrationError, match="fio's JSON"):
        parse_fio_json("fio: some failure")


def test_missing_fio_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CalibrationError, match="fio is not installed"):
        require_fio()
    result = CliRunner().invoke(cli, ["calibrate", "--calibrate-dir", str(tmp_path)])
    assert result.exit_code == 1 and "fio is not installed" in result.output


def test_run_with_calibration(server: EmbeddedServer, tmp_path: Path) -> None:
    flags = {
        "SCHEMAS": "2",
        "SCALE": "3000",
        "SCAN_TABLE_SZ": "40",
        "SEED": "99",
        "RUN_TIME": "3",
        "WARMUP": "0",
        "UPDATE_PCT": "0",
        "SESSIONS": "2",
    }
    config = resolve(flags, None, cwd=tmp_path)
    run_dir, run = run_benchmark(
        config,
        target=None,
        data_dir=server.data_dir,
        results_parent=tmp_path / "r",
        calibrate=True,
        observers=Observers(render=render_text),
    )
    cal = run["calibration"]
    fio = cal["fio"]
    assert fio["jobs"] == 2 and fio["iops"] > 0 and fio["mean_latency_us"] > 0
    assert fio["seconds"] == pytest.approx(3, abs=1)
    assert cal["pio_reads_pct_of_fio"] == pytest.approx(
        run["metrics"]["pio_reads_per_s"] / fio["iops"] * 100
    )
    report = (run_dir / "report.txt").read_text()
    assert "Raw device reference" in report and "% of raw device IOPS" in report
    assert json.loads((run_dir / "run.json").read_text())["calibration"]["fio"]["jobs"] == 2


def test_calibrate_command(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--sessions",
            "2",
            "--run-time",
            "2",
            "--size",
            "64M",
            "--calibrate-dir",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert figures["jobs"] == 2 and figures["iops"] > 0
