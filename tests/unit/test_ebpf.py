"""Server-free parts of the kernel latency layers (host/ebpf.py, results/layers.py): the
generated script, the parsing of bpftrace's prints, interval differences that add up to the
window, and the run.json block with its reconciliation. The bucket code is run by bpftrace
(against model/histogram.py for ~1,000 values) in tests/integration/test_ebpf.py."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from openslob.host import ebpf
from openslob.model.histogram import LINEAR_LIMIT, SLOTS, SUB_BUCKETS, Histogram, bucket_index
from openslob.model.metrics import METRICS
from openslob.results.layers import RECONCILE_BOUND_PCT, latency_layers


def test_the_script_has_every_placeholder_filled() -> None:
    devs = [ebpf.kernel_dev(254, 0), ebpf.kernel_dev(8, 16)]
    text = ebpf.script(4242, devs, client_pid=77, every_ms=100)
    assert "@@" not in text
    assert "pid == 4242 || curtask->real_parent->tgid == 4242" in text
    # each data device gets its own small number in the in-flight key, others 0
    assert f"if (args->dev == {254 << 20}) {{ $d = 1; }}" in text
    assert f"else if (args->dev == {(8 << 20) | 16}) {{ $d = 2; }}" in text
    assert f"args->sector * {ebpf.DEVICES_MAX} + (uint64)$d" in text
    # the client (and only it) asks for a print with a pid no process has
    assert f"pid == 77 && args->pid == {ebpf.ASK_PID}" in text and ebpf.ASK_PID > 1 << 22
    assert "interval:ms:100" in text
    # the bucket code uses the histogram's own constants, under one integer key per layer
    code = ebpf.bucket_code()
    assert f">= {LINEAR_LIMIT}" in code and f"{SUB_BUCKETS} * $e" in code
    assert f"> {SLOTS - 1}" in code and SLOTS <= ebpf.KEY_STRIDE


S = ebpf.KEY_STRIDE
PRINT = f"""Attaching 12 probes...
@h[98]: 10
@h[420]: 2
@h[{2 * S + 65}]: 7
@h[{3 * S + 55}]: 1

@s[2]: 112
@s[3]: 16

@u[2]: 1
"""


def test_a_print_is_parsed_into_the_layers() -> None:
    got = ebpf.parse_print(PRINT.splitlines())
    assert got.hists["db_read_call"].counts == {98: 10, 420: 2}
    assert got.hists["device_read"].counts == {65: 7}
    assert got.hists["device_write"].counts == {55: 1}
    assert "log_sync" not in got.hists
    assert got.bytes == {"device_read": 57344, "device_write": 8192}
    # completions: the timed ones and those whose issue was not seen
    assert got.completed == {"device_read": 8, "device_write": 1}


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
    layers, warnings = latency_layers(_run(100.0, 100.0), None, "not traced: no bpftrace")
    assert layers["op"]["reason"] is None and warnings == []
    for layer in ebpf.TRACED_LAYERS:
        assert layers[layer]["reason"] == "not traced: no bpftrace"
        assert layers[layer]["per_s"] is None
        assert set(layers[layer]["window"].values()) == {None}
