"""Server-free parts of the kernel latency layers (host/ebpf.py, host/libbpf.py,
results/layers.py): the programs' config, the reasons when they cannot run, interval
differences that add up to the window, and the run.json block with its reconciliation. The
programs themselves run in the kernel in tests/unit/test_bpf_object.py (the bucket formula,
against model/histogram.py) and tests/integration/test_ebpf.py (real runs)."""

from __future__ import annotations

import ctypes
import itertools
import os
import subprocess
import sys
from typing import Any

import pytest

from openslob.host import ebpf, libbpf
from openslob.model.histogram import SLOTS, Histogram, bucket_index
from openslob.model.metrics import METRICS
from openslob.results.layers import RECONCILE_BOUND_PCT, latency_layers


def test_the_config_names_the_server_its_disks_and_the_syscalls() -> None:
    devs = [ebpf.kernel_dev(254, 0), ebpf.kernel_dev(8, 16)]
    got = ebpf.config(4242, devs, machine="x86_64")
    assert got.server_tgid == 4242 and got.ndevs == 2
    assert list(got.devs)[:2] == [254 << 20, (8 << 20) | 16] and set(list(got.devs)[2:]) == {0}
    assert (list(got.read_nr), list(got.sync_nr)) == ([17, 295, 327], [74, 75])
    # the generic syscall table (arm64): other numbers for the same calls
    assert list(ebpf.config(1, devs, machine="aarch64").read_nr) == [67, 69, 286]
    # more disks than the programs compare with: the first DEVS_MAX
    many = ebpf.config(1, list(range(1, 20)), machine="x86_64")
    assert many.ndevs == ebpf.DEVS_MAX and list(many.devs) == list(range(1, ebpf.DEVS_MAX + 1))
    assert got.use_stamps == 1 and ebpf.config(1, devs, "x86_64", use_stamps=False).use_stamps == 0
    # the layout the C source declares: 2 + DEVS_MAX + 3 + 2 + 1 u32 words
    assert ctypes.sizeof(ebpf.Config) == 4 * (2 + ebpf.DEVS_MAX + 6)
    assert ebpf.VALUE_WORDS == SLOTS + 2


def test_a_missing_libbpf_is_a_reason_not_an_error() -> None:
    lib, reason = libbpf.load_library("libbpf-openslob-absent.so.9")
    assert lib is None and reason is not None
    assert "libbpf-openslob-absent.so.9 cannot be used" in reason and "libbpf1" in reason


def test_without_the_capabilities_the_layers_say_so() -> None:
    """A real process without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (setpriv takes them
    from its bounding set, as a container does), not a faked check."""
    code = "from openslob.host import ebpf; print(ebpf.unavailable_reason(1, ['x']))"
    drop = "-bpf,-perfmon,-sys_admin"
    command = [sys.executable, "-"]
    if os.geteuid() == 0:  # else this process has none of them already
        command = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", *command]
    # the code on stdin: the tier refuses "openslob" in a child's arguments
    out = subprocess.run(command, input=code, capture_output=True, text=True, check=True).stdout
    assert out.strip() == (
        "not traced: eBPF tracing needs root on the database's host "
        "(CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)"
    )
    assert ebpf.unavailable_reason(None, ["x"]).startswith("not traced: the server is not on")


def _cumulative(counts: dict[int, int], completed: int = 0) -> ebpf.Cumulative:
    return ebpf.Cumulative(
        hists={"device_read": Histogram(dict(counts))}, completed={"device_read": completed}
    )


def test_intervals_are_differences_that_add_up_to_the_window() -> None:
    prints = [
        _cumulative({}),
        _cumulative({65: 3}, 3),
        _cumulative({65: 5, 900: 1}, 7),
        _cumulative({65: 9, 900: 4}, 14),
    ]
    window = ebpf.Cumulative()
    deltas = [b.minus(a) for a, b in itertools.pairwise(prints)]
    for delta in deltas:
        window.add(delta)
    assert deltas[1].hists["device_read"].counts == {65: 2, 900: 1}  # no zero buckets
    assert window.hists["device_read"].counts == prints[-1].hists["device_read"].counts
    assert window.completed["device_read"] == 14
    row = ebpf.interval_figures(deltas[2], 0.5)
    assert row["device_read_traced_per_s"] == 14.0
    assert row["device_read_p50_us"] == bucket_index(65) == 65
    assert row["db_read_call_traced_per_s"] == 0.0 and row["db_read_call_p99_us"] is None
    assert set(row) <= set(METRICS) and all(METRICS[k].live for k in row)


def _run(pio_reads: float, device_reads: float) -> dict[str, Any]:
    select = Histogram.from_values([1000] * 90 + [5000] * 10)
    return {
        "window": {"seconds": 2.0},
        "metrics": {
            "pio_reads_per_s": pio_reads,
            "device_reads_per_s": device_reads,
            "device_writes_per_s": None,
        },
        "engine": {"terms": {"db_io": "pg_stat_io"}},
        "latency": {"select": select.summary(), "update": None, "scan": None},
    }


def test_the_block_has_every_layer_and_reconciles() -> None:
    traced = ebpf.Cumulative(
        hists={
            "db_read_call": Histogram.from_values([100] * 200),
            "device_read": Histogram.from_values([60] * 190),
        },
        completed={"device_read": 200},
    )
    layers, warnings = latency_layers(_run(100.0, 100.0), traced, None, 3)
    assert list(layers) == ["op", *ebpf.TRACED_LAYERS]
    assert layers["op"]["window"]["count"] == 100 and layers["op"]["per_s"] == 50.0
    assert layers["op"]["window"]["p50_us"] == pytest.approx(1000, rel=0.01)
    read = layers["db_read_call"]
    assert read["window"]["count"] == 200 and read["per_s"] == 100.0 and read["reason"] is None
    assert (
        read["reconciliation"]["difference_pct"] == 0.0
        and "timed_pct" not in read["reconciliation"]
    )
    device = layers["device_read"]["reconciliation"]
    assert device["traced_per_s"] == 100.0 and device["timed_pct"] == 95.0
    assert device["skipped_probe_runs"] == 3
    assert layers["log_sync"]["window"]["count"] == 0 and "reconciliation" not in layers["log_sync"]
    assert warnings == []
    # beyond the bound: a warning naming both counts
    _, warnings = latency_layers(_run(150.0, 100.0), traced, None)
    bound = RECONCILE_BOUND_PCT["db_read_call"]
    assert warnings == [
        "traced db_read_call calls (100.0/s) and the database's physical reads (pg_stat_io) "
        f"(150.0/s) differ by -33.3 %, beyond the {bound:g} % they agree within"
    ]


def test_untraced_layers_are_null_with_the_reason() -> None:
    layers, warnings = latency_layers(_run(100.0, 100.0), None, "not traced: no libbpf")
    assert layers["op"]["reason"] is None and warnings == []
    for layer in ebpf.TRACED_LAYERS:
        assert layers[layer]["reason"] == "not traced: no libbpf"
        assert layers[layer]["per_s"] is None
        assert set(layers[layer]["window"].values()) == {None}
