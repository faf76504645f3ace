"""The latency waterfall without a server: imported series (CSV, Prometheus JSON) read,
refused in one line, aligned to intervals; layers built from a run.json; the impossible
order (a layer faster than the one beneath it) warned about, a possible one not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openslob.analysis.waterfall import Layer, order_warnings, waterfall
from openslob.report.layers import layers_section
from openslob.report.waterfall import waterfall_section
from openslob.report.webwaterfall import specs, table_html
from openslob.results.external import (
    ExternalSeriesError,
    IntervalSpan,
    add_layers,
    align,
    attach,
    describe,
    read_series,
)

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def write(tmp_path: Path, text: str, name: str = "ext.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_names_give_unit_statistic_and_side() -> None:
    assert describe("array_read_latency_us") == ("us", "mean", "read", 1.0)
    assert describe("hypervisor_read_p99_us") == ("us", "p99", "read", 1.0)
    assert describe("array_write_p999_ms") == ("us", "p99.9", "write", 1000.0)
    assert describe("array_read_p99_9_ms")[:2] == ("us", "p99.9")  # type: ignore[index]
    assert describe("array_read_iops_per_s") == ("per_s", "rate", "read", 1.0)
    assert describe("array_read_latency") is None


def test_csv_epoch_and_iso_times_ms_converted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "time,name,value\n"
        f"{T0},array_read_p99_ms,0.5\n"
        "2027-01-15T08:00:01+00:00,array_read_p99_ms,0.7\n"
        f"{T0 + 2},array_read_iops_per_s,1000\n",
    )
    found = {s.name: s for s in read_series(path)}
    p99 = found["array_read_p99_ms"]
    assert p99.unit == "us" and p99.stat == "p99" and p99.layer.endswith("array_read_p99_ms")
    assert [(s.epoch_s, s.value) for s in p99.samples] == [(T0, 500.0), (T0 + 1, 700.0)]
    assert found["array_read_iops_per_s"].unit == "per_s"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("when,name,value\n", "line 1: header must be time,name,value"),
        (f"time,name,value\n{T0},x_us\n", "line 2: 2 fields"),
        (f"time,name,value\n{T0},x_us,1\n{T0},x_us,-3\n", "line 3: value '-3'"),
        ("time,name,value\n2027-01-15T08:00:00,x_us,1\n", "line 2: time '2027-01-15T08:00:00' has"),
        (f"time,name,value\n{T0},x_us,1\nsoon,x_us,1\n", "line 3: Invalid isoformat"),
        (f"time,name,value\n{T0},array_latency,1\n", "line 2: name 'array_latency' must"),
        ("time,name,value\n", "file: no samples"),
        ('{"status": "error"}', 'JSON: not a Prometheus query_range'),
        ('{"status": "success", "data": {"resultType": "vector"}}', "resultType 'vector'"),
        ('{"status": "success",\n "data": }', "line 2: invalid JSON"),
    ],
)  # fmt: skip
def test_bad_files_fail_in_one_line_naming_file_and_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ExternalSeriesError) as err:
        read_series(path)
    text_ = str(err.value)
    assert "\n" not in text_ and text_.startswith(f"--external-series {path}: ")
    assert message in text_
    assert err.value.exit_code == 2


def test_prometheus_query_range(tmp_path: Path) -> None:
    doc = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {"__name__": "hypervisor_read_p99_us"}, "values": [[T0, "300"]]},
                {"metric": {"job": "array"}, "values": [[T0, "1"]]},
            ],
        },
    }
    path = write(tmp_path, json.dumps(doc), "dump.json")
    with pytest.raises(ExternalSeriesError, match=r"result 1 \(job=array\): name 'job=array'"):
        read_series(path)
    doc["data"]["result"].pop()  # type: ignore[index, union-attr]
    path.write_text(json.dumps(doc))
    (series,) = read_series(path)
    assert series.name == "hypervisor_read_p99_us" and series.samples[0].value == 300.0


def test_alignment_mean_inside_else_nearest_with_its_age(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "time,name,value\n"
        f"{T0 + 0.2},a_us,100\n{T0 + 0.6},a_us,300\n"  # interval 1: two samples
        f"{T0 + 2.2},a_us,50\n",  # interval 2 none: nearest; interval 9: too far
    )
    (series,) = read_series(path)
    spans = [
        IntervalSpan(1, T0, T0 + 1),
        IntervalSpan(2, T0 + 1, T0 + 2),
        IntervalSpan(9, T0 + 8, T0 + 9),
    ]
    first, second, far = align(series, spans)
    assert (first.value, first.samples, first.age_s) == (200.0, 2, None)
    assert (second.value, second.samples, second.age_s) == (50.0, 0, pytest.approx(0.7))
    assert far.value is None


def run_json(select_p99: float, layers: dict[str, Any] | None = None) -> dict[str, Any]:
    """A run.json's parts the waterfall reads: 3 intervals of 1 s from T0."""
    columns = ["elapsed_s", "interval", "seconds", "select_p50_us", "select_p99_us"]
    rows = [[float(n), n, 1.0, 200.0, select_p99] for n in (1, 2, 3)]
    run: dict[str, Any] = {
        "window": {"barrier": "2027-01-15T08:00:00.000Z"},
        "intervals": {"columns": columns, "rows": rows},
        "latency": {
            "select": {"p50_us": 200.0, "p90_us": 400.0, "p99_us": select_p99, "p999_us": 2e3}
        },
        "warnings": [],
        "notes": [],
    }
    if layers is not None:
        run["latency_layers"] = layers
    return run


def layer(key: str, pcts: dict[str, float], side: str = "read", **more: Any) -> Layer:
    return Layer(key, key, f"at {key}", side, pcts, **more)


def test_constructed_impossible_order_warns_naming_layers_percentile_values() -> None:
    op = layer("op", {"p50": 200.0, "p99": 900.0})
    call = layer("db_read_call", {"p50": 150.0, "p99": 1500.0})  # p99 above the op's
    device = layer("device_read", {"p50": 140.0, "p99": 800.0})
    (warning,) = order_warnings([op, call, device])
    assert warning.startswith("impossible latency order: op (at op) is faster than")
    assert "db_read_call beneath it (at db_read_call)" in warning
    assert "at p99 in the window (900 us against 1,500 us)" in warning
    assert "p50" not in warning  # 200 us above 150 us: possible


def test_possible_orders_and_small_differences_do_not_warn() -> None:
    op = layer("op", {"p50": 200.0, "p99": 900.0})
    call = layer("db_read_call", {"p50": 201.0, "p99": 880.0})  # 0.5 %: the bucket error
    device = layer("device_read", {"p50": 100.0, "p99": None})  # type: ignore[dict-item]
    write = layer("device_write", {"p50": 5000.0}, side="write")  # another side
    assert order_warnings([op, call, device, write]) == []


def test_a_missing_layer_is_skipped_and_external_compares_per_interval() -> None:
    op = layer("op", {"p99": 900.0}, intervals_us={"p99": {1: 900.0, 2: 950.0}})
    array = layer(
        "external:array_read_p99_us",
        {"p99": 1000.0},
        intervals_us={"p99": {1: 800.0, 2: 1200.0}},
        external=True,
    )
    (warning,) = order_warnings([op, array])  # no device layer: the op is the one above
    assert "at p99 in 1 interval(s), e.g. #2 (950 us against 1,200 us)" in warning


def test_run_with_external_csv_lands_in_run_json_text_and_html(tmp_path: Path) -> None:
    run = run_json(select_p99=900.0)
    path = write(
        tmp_path,
        "time,name,value\n"
        + "".join(f"{T0 + n + 0.5},array_read_p99_us,{v}\n" for n, v in enumerate((700, 1400, 600)))
        + f"{T0 + 0.5},array_read_iops_per_s,5000\n",
    )
    attach(run, path)
    p99 = next(e for e in run["external_series"] if e["name"] == "array_read_p99_us")
    assert p99["values"] == [700.0, 1400.0, 600.0] and p99["window"]["max"] == 1400.0
    assert "external:array_read_p99_us" in run["intervals"]["columns"]
    layers = waterfall(run)
    assert [x.key for x in layers] == ["op", "external:array_read_p99_us"]
    warnings = order_warnings(layers)
    assert len(warnings) == 1 and "e.g. #2 (900 us against 1,400 us)" in warnings[0]
    text = "\n".join(waterfall_section(run))
    assert "measured outside this host: array_read_p99_us" in text
    assert "array_read_iops_per_s" in text and "5,000.0" in text
    charts = specs(run)
    assert [s["title"].split(" (")[0] for s in charts] == [
        "Latency waterfall by percentile",
        "Latency waterfall per interval",
    ]
    assert "measured outside this host" in table_html(run)


def test_traced_layer_null_shows_its_reason() -> None:
    reason = "libbpf.so.1 cannot be used"
    nulls = dict.fromkeys(("count", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"))
    call = {"measured_at": "pread64", "window": nulls, "per_s": None, "reason": reason}
    traced = {"db_read_call": call}
    run = run_json(select_p99=900.0, layers=traced)
    # nothing measured beyond the op: no waterfall; the "Latency by layer" block says why
    assert waterfall_section(run) == []
    assert f"db_read_call: {reason}" in "\n".join(layers_section(run))
    assert order_warnings(waterfall(run)) == []
    assert waterfall_section(run_json(select_p99=900.0)) == []  # nothing beyond the op
    # one traced layer measured: the waterfall shows the null one as n/a with its reason
    measured = {"count": 5, "p50_us": 100.0, "p90_us": 150.0, "p99_us": 200.0, "p999_us": 250.0}
    device = {"measured_at": "block layer", "window": {**measured, "max_us": 260.0}}
    run["latency_layers"]["device_read"] = {**device, "per_s": 5.0, "reason": None}
    assert f"n/a ({reason})" in "\n".join(waterfall_section(run))


def test_traced_layers_render_per_interval_and_warn_through_add_layers() -> None:
    def traced(where: str, p50: float, p99: float) -> dict[str, Any]:
        window = {"count": 10, "p50_us": p50, "p90_us": 2 * p50, "p99_us": p99, "p999_us": p99}
        return {
            "measured_at": where,
            "window": {**window, "max_us": p99},
            "per_s": 5.0,
            "reason": None,
        }

    run = run_json(select_p99=900.0)
    run["latency_layers"] = {
        "db_read_call": traced("pread64 of the server's processes", 150.0, 600.0),
        "device_read": traced("block layer, issue to completion", 120.0, 850.0),  # > call
    }
    run["intervals"]["columns"] += ["device_read_p50_us", "device_read_p99_us"]
    for row in run["intervals"]["rows"]:
        row += [120.0, 850.0]
    add_layers(run, "")
    (warning,) = run["warnings"]
    assert "DB read call (pread64 of the server's processes) is faster than device read " in warning
    assert "beneath it (block layer, issue to completion)" in warning
    assert "at p99 in the window (600 us against 850 us); p99.9 in the window" in warning
    assert "p90" not in warning and warning.endswith("measured elsewhere or wrong")
    text = "\n".join(waterfall_section(run))
    assert "block layer, issue to completion" in text and "device read p99" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_an_unmeasured_layer_between_is_skipped() -> None:
    op = layer("op", {"p99": 900.0})
    call = layer("db_read_call", {"p99": None}, reason="no libbpf")
    device = layer("device_read", {"p99": 1000.0})
    (warning,) = order_warnings([op, call, device])
    assert "op (at op) is faster than device_read beneath it" in warning
