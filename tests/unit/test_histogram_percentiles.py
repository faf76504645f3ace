"""Many percentiles of a histogram in one pass (model/histogram.Histogram.percentiles_us)."""

from __future__ import annotations

import random

from openslob.model.histogram import Histogram
from openslob.results.histlog import FIO_PERCENTILES


def _walk(hist: Histogram, pct: float) -> float | None:
    """The percentile by the plain walk over the sorted buckets (first whose running count
    reaches the rank), independent of the one-pass code."""
    total = hist.count
    if not total:
        return None
    seen = 0
    for idx in sorted(hist.counts):
        seen += hist.counts[idx]
        if seen >= pct / 100 * total:
            return hist._midpoint(idx)
    return hist._midpoint(max(hist.counts))


def test_percentiles_in_one_pass_are_each_percentile_us() -> None:
    rng = random.Random(7)
    pcts = (*FIO_PERCENTILES, 0, 100, 50, 99.9)  # unsorted, with a repeat
    for _ in range(300):
        hist = Histogram.from_values(
            int(rng.lognormvariate(5, 1.5)) for _ in range(rng.randint(1, 400))
        )
        assert hist.percentiles_us(pcts) == [_walk(hist, p) for p in pcts]
        assert [hist.percentile_us(p) for p in pcts] == [_walk(hist, p) for p in pcts]
    assert Histogram().percentiles_us((50, 99)) == [None, None]
    one = Histogram({300: 1})
    assert one.percentiles_us((0, 50, 100)) == [_walk(one, 0)] * 3


def test_a_rows_summary_is_the_run_json_block_without_its_buckets() -> None:
    hist = Histogram.from_values(range(1, 5000, 7))
    full = hist.summary()
    assert hist.summary(buckets=False) == {k: v for k, v in full.items() if k != "histogram"}
