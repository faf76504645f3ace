"""Log-linear latency histogram, the same bucket formula as the in-database work loop.

Values are whole microseconds. Below 128 µs every microsecond has its own bucket. Above,
each power of two [64·2^e, 128·2^e) is split into 64 equal buckets of width 2^e, so a bucket
is at most 1/64 = 1.6 % wide relative to its lower bound; reporting its midpoint errs by at
most 0.8 %. Bucket index, with e = floor(log2(v)) - 6 for v >= 128:

    idx = v                       v < 128
    idx = 64·e + (v >> e)         v >= 128      (v >> e lies in [64, 128))

The loop keeps counts in a 2048-slot array (up to ~2^37 µs, 38 hours) and returns the
non-empty buckets as {"idx": count}, or as [[idx, ...], [count, ...]] (PostgreSQL's loop:
the client sums those in bulk, runner/intervals.py, and parses lists of numbers for less
than half the CPU of an object's keys). Both forms are read everywhere (sparse()).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SUB_BUCKETS = 64
LINEAR_LIMIT = 2 * SUB_BUCKETS  # 128 µs
SLOTS = 2048
RELATIVE_ERROR = 1 / SUB_BUCKETS / 2  # of the midpoint


def bucket_index(us: int) -> int:
    """Python twin of the loop's formula (tests hold the two together)."""
    if us < LINEAR_LIMIT:
        return max(us, 0)
    e = us.bit_length() - 1 - 6
    return min(SUB_BUCKETS * e + (us >> e), SLOTS - 1)


def sparse(value: Mapping[str, int] | Sequence[Sequence[int]] | None) -> dict[str, int] | None:
    """A loop histogram as {"idx": count}: the object as it is, or the [[idx, ...],
    [count, ...]] pair of lists as one (None stays None)."""
    if value is None or isinstance(value, Mapping):
        return value  # type: ignore[return-value]
    idxs, counts = value
    return {str(i): int(n) for i, n in zip(idxs, counts, strict=True)}


def bucket_bounds(idx: int) -> tuple[int, int]:
    """[lower, upper) in µs of one bucket."""
    if idx < LINEAR_LIMIT:
        return idx, idx + 1
    e = idx // SUB_BUCKETS - 1
    mantissa = idx - SUB_BUCKETS * e
    return mantissa << e, (mantissa + 1) << e


def _midpoint(idx: int) -> float:
    """A bucket's reported value: its lower bound where it is 1 µs wide, else its middle."""
    lower, upper = bucket_bounds(idx)
    return lower if upper - lower == 1 else (lower + upper) / 2


_MIDPOINTS = tuple(_midpoint(idx) for idx in range(SLOTS))


def midpoint_us(idx: int) -> float:
    """_midpoint from a table (a row asks every interval for each op type's mean)."""
    return _MIDPOINTS[idx] if 0 <= idx < SLOTS else _midpoint(idx)


@dataclass
class Histogram:
    """Counts per bucket; merge by adding. Percentiles are bucket midpoints."""

    counts: dict[int, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, value: Mapping[str, int] | Sequence[Sequence[int]] | None) -> Histogram:
        """From a loop histogram in either form (sparse())."""
        return cls({int(k): int(v) for k, v in (sparse(value) or {}).items() if int(v)})

    @classmethod
    def from_buckets(cls, buckets: Iterable[Sequence[int]]) -> Histogram | None:
        """run.json's [lower_us, upper_us, count] rows (summary()'s), the bucket recovered
        from its lower bound. None when a row's bounds are not this scheme's: a figure read
        from another tool's buckets would be wrong, so it is unknown instead."""
        hist = cls()
        for lower, upper, count in buckets:
            idx = bucket_index(int(lower))
            if bucket_bounds(idx) != (int(lower), int(upper)):
                return None
            hist.counts[idx] = hist.counts.get(idx, 0) + int(count)
        return hist

    @classmethod
    def from_values(cls, values_us: Iterable[int]) -> Histogram:
        hist = cls()
        for value in values_us:
            idx = bucket_index(int(value))
            hist.counts[idx] = hist.counts.get(idx, 0) + 1
        return hist

    def merge(self, other: Histogram) -> Histogram:
        for idx, count in other.counts.items():
            self.counts[idx] = self.counts.get(idx, 0) + count
        return self

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    def _midpoint(self, idx: int) -> float:
        return midpoint_us(idx)

    def mean_us(self) -> float | None:
        total = self.count
        if not total:
            return None
        return sum(midpoint_us(i) * n for i, n in self.counts.items()) / total

    def percentile_us(self, pct: float) -> float | None:
        """Value at or below which pct % of the ops completed (bucket midpoint)."""
        return self.percentiles_us((pct,))[0]

    def percentiles_us(self, pcts: Sequence[float]) -> list[float | None]:
        """The value at or below which each of `pcts` % of the ops completed (bucket
        midpoints; None without ops), in one pass over the sorted buckets (a row of
        percentiles.csv asks for 17 of each op type every interval)."""
        total = self.count
        if not total:
            return [None] * len(pcts)
        keys, counts = sorted(self.counts), self.counts
        found: dict[float, float] = {}
        at, seen = 0, 0
        for pct in sorted(set(pcts)):
            rank = pct / 100 * total
            while at < len(keys) - 1 and seen + counts[keys[at]] < rank:
                seen += counts[keys[at]]
                at += 1
            found[pct] = midpoint_us(keys[at])
        return [found[pct] for pct in pcts]

    def max_us(self) -> float | None:
        if not self.counts:
            return None
        return float(bucket_bounds(max(self.counts))[1] - 1)

    def summary(self, buckets: bool = True) -> dict[str, object]:
        """The run.json latency block for one op type; None where there were no ops.
        Without `buckets`, no "histogram" (a time series row's figures)."""

        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 1)

        p50, p90, p99, p999 = self.percentiles_us((50, 90, 99, 99.9))
        figures: dict[str, object] = {
            "count": self.count,
            "mean_us": rounded(self.mean_us()),
            "p50_us": rounded(p50),
            "p90_us": rounded(p90),
            "p99_us": rounded(p99),
            "p999_us": rounded(p999),
            "max_us": rounded(self.max_us()),
        }
        if not buckets:
            return figures
        return {
            **figures,
            "histogram": {
                "scheme": "log-linear: 1 us buckets below 128 us, 64 per power of two above",
                "relative_error": RELATIVE_ERROR,
                "buckets": [[*bucket_bounds(idx), self.counts[idx]] for idx in sorted(self.counts)],
            },
        }


def of_summary(block: Mapping[str, Any] | None) -> Histogram | None:
    """The histogram of one run.json latency block (an op type); empty when it has none."""
    histogram = (block or {}).get("histogram") if isinstance(block, Mapping) else None
    buckets = histogram.get("buckets") if isinstance(histogram, Mapping) else None
    return Histogram.from_buckets(buckets or [])


def merged_ops(latency: Mapping[str, Any] | None) -> Histogram | None:
    """All op types of a run.json "latency" added together; None when there were no ops
    or a block's buckets are not this scheme's."""
    total = Histogram()
    for block in (latency or {}).values() if isinstance(latency, Mapping) else ():
        hist = of_summary(block)
        if hist is None:
            return None
        total.merge(hist)
    return total if total.count else None
