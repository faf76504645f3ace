"""hdr_of: our buckets in an HdrHistogram, the same as HdrHistogram's own record_value."""

from __future__ import annotations

import random

from hdrh.histogram import HdrHistogram

from openslob.model.histogram import Histogram, bucket_bounds
from openslob.results.histlog import (
    HDR_DIGITS,
    HDR_HIGHEST_US,
    HDR_LOWEST_US,
    HdrEncoder,
    hdr_of,
)


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


def test_one_encoder_for_a_runs_intervals_is_a_new_histogram_each() -> None:
    """HdrEncoder reuses one HdrHistogram: each interval's text must be what a fresh one
    encodes, whatever came before (wide, narrow, empty, the top bucket)."""
    rng, encoder = random.Random(5), HdrEncoder()
    shapes = [Histogram(), Histogram.from_values([3, 2**40])]
    for _ in range(150):
        shapes.append(
            Histogram.from_values(
                int(rng.lognormvariate(rng.choice((3, 6, 9)), rng.choice((0.3, 2))))
                for _ in range(rng.randint(1, 400))
            )
        )
    rng.shuffle(shapes)
    for hist in shapes:
        slow = _recorded(hist)
        assert encoder.encode(hist) == (slow.get_max_value(), slow.encode().decode())
    assert encoder.hdr.total_count == 0 and not any(encoder.hdr.counts)
