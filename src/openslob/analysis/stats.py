"""The statistics of repeats and comparisons, dependency-free and exact for small samples.

- `spread`: median, min, max and the coefficient of variation (sample standard deviation ÷
  mean, in %) of one figure over a point's repeats.
- `ratio_interval`: a distribution-free confidence interval for the ratio candidate ÷ base,
  from the Mann–Whitney (Wilcoxon rank-sum) distribution: the Hodges–Lehmann interval. All
  m·n pairwise ratios y_j / x_i are sorted; the interval is [r_(k), r_(mn+1-k)], whose
  confidence is exactly 1 - 2·P(U <= k-1) for U the Mann–Whitney statistic under "no
  change" (computed exactly by counting for m + n <= EXACT_LIMIT, else by the normal
  approximation with continuity correction). k is the largest whose confidence reaches the
  level asked for. Few runs cannot reach every level: 3 + 3 runs give at most 90 % (the
  interval from the smallest to the largest pairwise ratio, i.e. "the two sides' ranges do
  not overlap"), 2 + 2 give 66.7 %. The widest interval is then used and its real
  confidence is reported, never the level that was asked for.

Working on ratios makes the interval a relative change, and is the same as shifting
log(values) (the method's assumption: the candidate's distribution is the base's scaled by
one factor). Base values must be > 0; the candidate's may be 0 (a ratio of 0 = -100 %).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

EXACT_LIMIT = 40  # m + n above which the normal approximation is used
METHOD = (
    "Mann–Whitney / Hodges–Lehmann: distribution-free interval of the ratio candidate ÷ base "
    "from the sorted pairwise ratios of the runs, with its exact confidence"
)


@dataclass(frozen=True)
class Spread:
    """One figure over the repeats of a point (None: no run measured it)."""

    n: int
    median: float | None
    min: float | None
    max: float | None
    cv_pct: float | None  # sample standard deviation ÷ mean × 100; None below 2 runs

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "n": self.n,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "cv_pct": self.cv_pct,
        }


def range_text(stats: Spread, number: Callable[[float], str], missing: str = "n/a") -> str:
    """The cell "median (min–max)" as analyze and compare print it; the median alone for one
    run, or when the runs agree to the digits `number` shows."""
    if stats.median is None or stats.min is None or stats.max is None:
        return missing
    median, low, high = number(stats.median), number(stats.min), number(stats.max)
    if stats.n < 2 or low == high:
        return median
    return f"{median} ({low}–{high})"


def spread(values: Sequence[float | None]) -> Spread:
    """Median, min, max and CV of the measured values (None is left out and not counted)."""
    known = [float(v) for v in values if v is not None]
    if not known:
        return Spread(0, None, None, None, None)
    cv = None
    mean = statistics.fmean(known)
    if len(known) >= 2 and mean != 0:
        cv = statistics.stdev(known) / abs(mean) * 100
    return Spread(len(known), statistics.median(known), min(known), max(known), cv)


@cache
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) orderings give U = 0, 1, …, m·n (no ties)."""
    if m == 0 or n == 0:
        return (1,)
    # U(m, n) = U(m-1, n) + n when the largest value is an x, else U(m, n-1)
    with_x, with_y = _u_counts(m - 1, n), _u_counts(m, n - 1)
    counts = [0] * (m * n + 1)
    for u, c in enumerate(with_x):
        counts[u + n] += c
    for u, c in enumerate(with_y):
        counts[u] += c
    return tuple(counts)


def _tail(m: int, n: int, u: int) -> float:
    """P(U <= u) under "no change"."""
    if u < 0:
        return 0.0
    if m + n <= EXACT_LIMIT:
        counts = _u_counts(m, n)
        return sum(counts[: u + 1]) / math.comb(m + n, m)
    mean, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
    return 0.5 * math.erfc(-((u + 0.5 - mean) / sd) / math.sqrt(2))


@dataclass(frozen=True)
class Interval:
    low: float  # ratio candidate ÷ base
    high: float
    confidence: float  # the interval's real confidence, 0..1


def ratio_interval(base: Sequence[float], cand: Sequence[float], level: float) -> Interval | None:
    """Interval for candidate ÷ base (see the module text); None with fewer than 2 runs on a
    side or a base value <= 0 (no ratio)."""
    m, n = len(base), len(cand)
    if m < 2 or n < 2 or min(base) <= 0:
        return None
    ratios = sorted(y / x for x in base for y in cand)
    k = 1
    while k + 1 <= (m * n + 1) // 2 and 1 - 2 * _tail(m, n, k) >= level:
        k += 1  # _tail(m, n, k) is P(U <= (k+1) - 1): the next k still reaches the level
    return Interval(ratios[k - 1], ratios[m * n - k], 1 - 2 * _tail(m, n, k - 1))


def ratio_of_medians(base: Sequence[float], cand: Sequence[float]) -> float | None:
    """candidate median ÷ base median; None when the base median is 0 (no ratio)."""
    if not base or not cand:
        return None
    base_median = statistics.median(base)
    return None if base_median == 0 else statistics.median(cand) / base_median
