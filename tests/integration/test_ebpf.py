"""Latency layers traced in the kernel (host/ebpf.py) on the real private PostgreSQL: every
layer has counts and p50/p99 per interval and for the window, the intervals' histograms add
up to the window's, the counts reconcile with pg_stat_io and /proc/diskstats within the
stated bound, and untraced the layers are null with the reason and the run is otherwise the
same; and one short MariaDB run (its read calls against performance_schema). The programs'
bucket formula runs in the kernel in tests/unit/test_bpf_object.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from hdrh.log import HistogramLogReader

from openslob.engines.postgres.server import EmbeddedServer
from openslob.host import ebpf
from openslob.results.layers import RECONCILE_BOUND_PCT, RECONCILE_MIN_PER_S
from openslob.results.schema import validate_run
from tests.conftest import invoke, private_mariadb
from tests.integration.test_run import dataset  # noqa: F401  (the same data set: loaded once)
from tests.integration.test_run import run as slob_run

TRACED = ebpf.TRACED_LAYERS


def traced_run(server: EmbeddedServer, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    return slob_run(
        server,
        tmp_path,
        RUN_TIME=4,
        WARMUP=1,
        UPDATE_PCT=30,
        THREADS_PER_SCHEMA=2,
        TRACE_LAYERS=True,
    )


@pytest.fixture(scope="module")
def traced(dataset: EmbeddedServer, tmp_path_factory: pytest.TempPathFactory):  # noqa: F811
    return traced_run(dataset, tmp_path_factory.mktemp("ebpf"))


def window_rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "timeseries.csv").open() as fh:
        return [row for row in csv.DictReader(fh) if row["phase"] == "window"]


def test_every_layer_has_counts_and_percentiles_per_interval_and_window(traced) -> None:
    run_dir, run = traced
    validate_run(run)
    layers = run["latency_layers"]
    assert set(layers) == {"op", *TRACED}
    for name in ("op", *TRACED):
        layer = layers[name]
        assert layer["reason"] is None, (name, layer)
        window = layer["window"]
        assert window["count"] > 0, name
        assert 0 < window["p50_us"] <= window["p99_us"] <= window["max_us"], (name, window)
        assert layer["per_s"] == pytest.approx(window["count"] / run["window"]["seconds"], abs=0.1)
    rows = window_rows(run_dir)
    assert len(rows) == 4
    for layer in ("db_read_call", "device_read", "device_write"):  # ~thousands a second
        for row in rows:
            assert float(row[f"{layer}_traced_per_s"]) > 0, (layer, row)
            assert 0 < float(row[f"{layer}_p50_us"]) <= float(row[f"{layer}_p99_us"])
    report = (run_dir / "report.txt").read_text()
    assert "Latency by layer (window)" in report
    assert f"{layers['device_read']['window']['count']:,}" in report


def test_interval_histograms_add_up_to_the_window(traced) -> None:
    run_dir, run = traced
    for layer in TRACED:
        reader = HistogramLogReader(str(run_dir / f"{layer}.hlog"), None)
        total, intervals = 0, 0
        while (hist := reader.get_next_interval_histogram()) is not None:
            total += hist.get_total_count()
            intervals += 1
        assert intervals == len(window_rows(run_dir)), layer
        assert total == run["latency_layers"][layer]["window"]["count"], layer
    # and the time series' rates are those intervals' counts
    rows = window_rows(run_dir)
    reads = sum(float(r["db_read_call_traced_per_s"]) * float(r["seconds"]) for r in rows)
    assert reads == pytest.approx(run["latency_layers"]["db_read_call"]["window"]["count"], abs=4)


def test_counts_reconcile_within_the_stated_bound(traced) -> None:
    _, run = traced
    layers = run["latency_layers"]
    for layer in ("db_read_call", "device_read", "device_write"):
        check = layers[layer]["reconciliation"]
        assert check["bound_pct"] == RECONCILE_BOUND_PCT[layer]
        if check["counted_per_s"] >= RECONCILE_MIN_PER_S:
            assert abs(check["difference_pct"]) <= RECONCILE_BOUND_PCT[layer], (layer, check)
    assert isinstance(layers["device_read"]["reconciliation"]["skipped_probe_runs"], int)
    assert not [w for w in run["warnings"] if "differ by" in w]
    # the completions were timed (from the block layer's issue stamp, or the issue probe's
    # entry for disks without one), and the sizes are whole sectors
    for layer in ("device_read", "device_write"):
        assert layers[layer]["reconciliation"]["timed_pct"] >= 80, layers[layer]
        assert layers[layer]["mean_request_bytes"] >= 512, layers[layer]


def test_the_issue_probe_times_requests_as_the_block_layers_stamp_does(
    dataset: EmbeddedServer,  # noqa: F811
    traced,
    tmp_path: Path,
) -> None:
    """This machine's disk stamps each request's issue (the block layer's statistics), so
    the traced runs time requests from that stamp. The other path, for disks that do not
    (an issue probe and a map keyed by the request), runs here beside it on the same
    requests: the same completions, all of them timed, and the same distribution."""
    _, run = traced
    pid = int((dataset.data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
    devices = run["host"]["devices"]
    names = [d["name"] for d in devices]
    stamps = ebpf.Tracer(pid, names)
    probe = ebpf.Tracer(pid, names, use_stamps=False)
    assert stamps.start() is None and probe.start() is None
    try:
        # counted from a reading of both once both run: loading the second program takes a
        # while, and the requests that complete meanwhile count in the first only (CI saw
        # 19,547 against 19,484 when both counted from their own start)
        a0, b0 = stamps.read(), probe.read()
        slob_run(dataset, tmp_path, RUN_TIME=3, WARMUP=0, UPDATE_PCT=30)
        a1, b1 = stamps.read(), probe.read()
    finally:
        stamps.stop()
        probe.stop()
    a, b = a1.minus(a0), b1.minus(b0)
    for layer in ("device_read", "device_write"):
        assert a.completed[layer] > 1000, (layer, a.completed)
        # both count every completion; the probe times all but the requests ended without
        # being issued (empty pre-flush writes), which the stamps do not time either. The two
        # are read one after the other: a request of the host's that completes in between
        # counts in one only (a full suite saw 23,726 against 23,725)
        assert b.completed[layer] == pytest.approx(a.completed[layer], abs=2), layer
        untimed = a.completed[layer] - a.hists[layer].count
        assert b.hists[layer].count == pytest.approx(a.hists[layer].count, abs=2), layer
        assert untimed <= 0.02 * a.completed[layer], (layer, untimed)
        for pct in (50, 90, 99):  # the probe fires just before the stamp: a few µs apart
            ours, kernels = b.hists[layer].percentile_us(pct), a.hists[layer].percentile_us(pct)
            assert ours == pytest.approx(kernels, rel=0.05, abs=3), (layer, pct)


def test_untraced_the_layers_are_null_with_the_reason_and_the_run_the_same(
    dataset: EmbeddedServer,  # noqa: F811
    traced,
    tmp_path: Path,
) -> None:
    run_dir, run = slob_run(
        dataset, tmp_path, RUN_TIME=4, WARMUP=1, UPDATE_PCT=30, THREADS_PER_SCHEMA=2
    )
    validate_run(run)
    layers = run["latency_layers"]
    assert layers["op"]["window"]["count"] > 0 and layers["op"]["reason"] is None
    for layer in TRACED:
        assert layers[layer]["reason"] == ebpf.NOT_ASKED
        assert layers[layer]["per_s"] is None and "reconciliation" not in layers[layer]
        assert set(layers[layer]["window"].values()) == {None}
        assert not (run_dir / f"{layer}.hlog").exists()
        assert all(row[f"{layer}_p99_us"] == "" for row in window_rows(run_dir))
    # everything else is the same: the same blocks, metrics and time-series columns
    traced_dir, traced_json = traced
    assert set(run) == set(traced_json)
    assert set(run["metrics"]) == set(traced_json["metrics"])
    with (run_dir / "timeseries.csv").open() as a, (traced_dir / "timeseries.csv").open() as b:
        assert a.readline() == b.readline()
    assert run["status"] == "complete" and run["metrics"]["slobops_per_s"] > 0
    # and no program of ours is left attached after the traced run: its note says how many
    # readings it took, and the untraced run has no such note
    assert any("openslob's BPF programs" in n for n in traced_json["notes"])
    assert not any("BPF programs" in n for n in run["notes"])


def test_mariadb_read_calls_reconcile_with_performance_schema(tmp_path: Path) -> None:
    """The same layers on a private mariadbd (one process: its threads are traced)."""
    for server in private_mariadb("openslob-ebpf-mariadb-"):
        data = ["--schemas", "2", "--scale", "4096", "--scan-table-sz", "40", "--seed", "7"]
        common = ["--target", "embedded-mariadb", "--data-dir", str(server.base_dir), *data]
        setup = invoke("setup", *common, cwd=tmp_path)
        assert setup.exit_code == 0, setup.output
        flags = ["--run-time", "3", "--warmup", "1", "--update-pct", "20", "--trace-layers", "on"]
        run = invoke("run", *common, *flags, cwd=tmp_path)
        assert run.exit_code == 0, run.output
        (run_json,) = (tmp_path / "slob-results").glob("*/run.json")
        result = json.loads(run_json.read_text())
        layers = result["latency_layers"]
        for layer in TRACED:
            assert layers[layer]["reason"] is None and layers[layer]["window"]["count"] > 0, layer
        check = layers["db_read_call"]["reconciliation"]
        assert "performance_schema" in check["counted_by"]
        assert abs(check["difference_pct"]) <= RECONCILE_BOUND_PCT["db_read_call"], check
