"""Progress over a span of intervals (--progress-interval): figures of the span, not of its
last interval. Pure arithmetic on rows and histograms the loop's formula produced."""

from __future__ import annotations

from typing import Any

import pytest

from openslob.model.combine import over_time
from openslob.model.histogram import Histogram
from openslob.runner.progress import ProgressEvery


def row(interval: int, seconds: float, ops: float, reads: float, read_us: float) -> dict:
    return {
        "time": f"t{interval}",
        "elapsed_s": float(interval),
        "phase": "window",
        "interval": interval,
        "seconds": seconds,
        "slobops_per_s": ops,
        "pio_reads_per_s": reads,
        "db_read_latency_us": read_us,
        "lio_per_s": ops * 70,
        "lio_per_op": 70.0,
        "select_count": int(ops * seconds),
        "select_p99_us": 1.0,  # replaced: percentiles come from the merged histograms
    }


def test_over_time_weights_rates_by_seconds_and_latency_by_operations() -> None:
    rows = [row(1, 1.0, 100, 1000, 100.0), row(2, 3.0, 200, 3000, 300.0)]
    span = over_time(rows, ["slobops_per_s", "pio_reads_per_s", "db_read_latency_us"])
    assert span["slobops_per_s"] == pytest.approx((100 + 600) / 4)
    assert span["pio_reads_per_s"] == pytest.approx((1000 + 9000) / 4)
    # 1,000 reads at 100 us and 9,000 at 300 us: 280 us, not the mean of means (200)
    assert span["db_read_latency_us"] == pytest.approx(280.0)
    rows[1]["pio_reads_per_s"] = None  # unmeasured in one interval: unmeasured in the span
    assert over_time(rows, ["pio_reads_per_s"])["pio_reads_per_s"] is None


def test_progress_every_emits_spans_with_merged_percentiles() -> None:
    emitted: list[dict[str, Any]] = []
    sink = ProgressEvery(2.0, emitted.append)
    fast = Histogram.from_values([100] * 99 + [10_000])
    slow = Histogram.from_values([200] * 90 + [50_000] * 10)
    sink(row(1, 1.0, 100, 1000, 100.0), {"select": fast})
    assert emitted == []
    sink(row(2, 1.0, 100, 1000, 100.0), {"select": slow})
    (span,) = emitted
    assert span["seconds"] == 2.0 and span["interval"] == "1-2"
    assert span["select_count"] == 200 and span["lio_per_op"] == pytest.approx(70.0)
    merged = Histogram.from_values([100] * 99 + [10_000] + [200] * 90 + [50_000] * 10)
    assert span["select_p99_us"] == merged.percentile_us(99) != 1.0
    # a phase change or the end of the run lets a shorter span go
    sink({**row(3, 1.0, 50, 500, 90.0), "phase": "window"}, {})
    sink.flush()
    assert len(emitted) == 2 and emitted[1]["seconds"] == 1.0
