"""hdr_of: our buckets in an HdrHistogram, the same as HdrHistogram's own record_value."""

from __future__ import annotations

import random

from hdrh.histogram import HdrHistogram

from openslob.model.histogram import Histogram, bucket_bounds
from openslob.results.histlog import HDR_DIGITS, HDR_HIGHEST_US, HDR_LOWEST_US, hdr_of


def _recorded(hist: Histogram) -> HdrHistogram:
    """Each bucket's count at its midpoint through record_value (the library's own path)."""
    hdr = HdrHistogram(HDR_LOWEST_US, HDR_HIGHEST_US, HDR_DIGITS)
    for idx, count in hist.counts.items():
        lower, upper = bucket_bounds(idx)
        hdr.record_value(max((lower + upper) // 2, HDR_LOWEST_US), count)
    return hdr


def test_hdr_of_is_record_value_per_bucket() -> None:
    rng = random.Random(11)
    for _ in range(200):
        hist = Histogram.from_values(
            int(rng.lognormvariate(6, 2)) for _ in range(rng.randint(1, 500))
        )
        fast, slow = hdr_of(hist), _recorded(hist)
        assert fast.encode() == slow.encode()
        assert (fast.get_total_count(), fast.get_max_value(), fast.get_min_value()) == (
            slow.get_total_count(),
            slow.get_max_value(),
            slow.get_min_value(),
        )
        assert fast.get_value_at_percentile(99) == slow.get_value_at_percentile(99)


def test_an_empty_histogram_and_the_loops_top_bucket() -> None:
    assert hdr_of(Histogram()).encode() == _recorded(Histogram()).encode()
    top = Histogram.from_values([3, 2**40])  # the loop's last bucket holds all above 2^37
    assert hdr_of(top).encode() == _recorded(top).encode()
    assert hdr_of(top).get_total_count() == 2
