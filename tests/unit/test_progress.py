"""Progress over a span of intervals (--progress-interval): figures of the span, not of its
last interval. Pure arithmetic on rows and histograms the loop's formula produced."""

from __future__ import annotations

from typing import Any

import pytest

from openslob.cli.console import RunProgress
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


def test_progress_line_counts_each_phase_from_its_start_and_fits_the_terminal() -> None:
    """The window's seconds from the window's barrier (not the warm-up's), the time left of
    the plan, latencies in us below 10 ms and in ms above, and no line wider than asked."""
    lines = RunProgress({"warmup": 5.0, "window": 60.0})
    warm = {**row(1, 5.0, 100, 1000, 85.0), "phase": "warmup", "select_p99_us": 9_999.0}
    assert lines.line(warm).startswith("warmup    5.0 s of 5, 1:00 left | ")
    first = {**row(1, 1.0, 100, 1000, 85.0), "select_p99_us": 38_144.0}
    text = lines.line(first)
    assert text.startswith("window    1.0 s of 60, 0:59 left | ops/s 100.0")
    assert "sel p99 38.1 ms" in text and "db read 85.0 us" in text and "38,144" not in text
    assert len(lines.line(row(2, 1.0, 100, 1000, 85.0), 80)) == 80  # cut, with an ellipsis
    loops = RunProgress({"warmup": 0.0, "window": None})  # WORK_LOOP: no planned end
    assert loops.line(row(1, 1.0, 1, 1, 1.0)).startswith("window    1.0 s | ")
