"""Which of a run's warnings invalidate which of its figures, for verdicts (`slob compare`,
`--fail-if`): a verdict never rests on a run that warned its figures are not what they
claim to be.

run.json keeps warnings as sentences (results/build.py, results/health.py, results/rate.py,
the engines' window_warnings); INVALIDATING names each sentence that invalidates figures by a
phrase it always contains, with the reason shown beside a refused verdict and the figures it
touches ("*": every figure: the run did not measure the storage under SLOB's work alone).
Warnings not listed leave every verdict standing; the comparison lists them all first:
a short window (the time series), a tail past RUN_TIME, a setting that leaves a figure null,
and a data set under 10x the cache, whose figure is a bound on what *can* be cached (equal on
two sides of equal data set and cache; a difference in either is listed under Differences).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ALL = "*"
# RATE runs beyond capacity: their latencies describe a queue, not the storage
LATENCIES = ("op_p50_us", "op_p99_us", "db_read_latency_us", "device_read_latency_us")


@dataclass(frozen=True)
class Invalidating:
    phrase: str  # a phrase the warning's sentence always holds
    reason: str  # shown beside the refused verdict
    figures: tuple[str, ...] = (ALL,)  # addresses it invalidates (or ALL); OP.FIELD latencies
    latencies: bool = False  # also every OP.*_us address


INVALIDATING = (
    Invalidating("other I/O shares the device", "other I/O shared the device"),
    Invalidating("page cache is serving reads", "the OS page cache served reads"),
    Invalidating("CPU saturated", "CPU saturated: the host, not the storage, limited it"),
    Invalidating("tables grew during the window", "the tables grew: not SLOB's data set"),
    Invalidating("cleanup horizon was held back", "the cleanup horizon was held"),
    Invalidating("the layout predicts", "more blocks per op than the layout predicts"),
    Invalidating("session(s) died", "sessions died"),
    # results/build.py CUT_BY_STOP, from 1 % of the window
    Invalidating("the stop cut the last interval", "the stop cut an interval out of the ops"),
    Invalidating("saturated: offered", "RATE beyond capacity", LATENCIES, latencies=True),
)


def _touches(rule: Invalidating, address: str) -> bool:
    if ALL in rule.figures or address in rule.figures:
        return True
    return rule.latencies and "." in address and address.endswith("_us")


def reasons(warnings: Iterable[str], address: str) -> list[str]:
    """The reasons, among these warnings, that invalidate figure `address` (in table order)."""
    texts = list(warnings)
    return [
        rule.reason
        for rule in INVALIDATING
        if _touches(rule, address) and any(rule.phrase in text for text in texts)
    ]


def reason_of(warning: str) -> str | None:
    """The reason of the invalidating kind this warning is, or None."""
    return next((rule.reason for rule in INVALIDATING if rule.phrase in warning), None)


def invalid_by(address: str, base: Sequence[list[str]], cand: Sequence[list[str]]) -> str | None:
    """Why a verdict on `address` cannot be given: the runs of each side (their warnings)
    that warned it invalid, as "base 3/3 runs: other I/O shared the device"; None if none."""
    parts = []
    for name, runs in (("base", base), ("candidate", cand)):
        hit = [reasons(w, address) for w in runs]
        warned = [r for r in hit if r]
        if warned:
            why = list(dict.fromkeys(r for found in warned for r in found))
            parts.append(f"{name} {len(warned)}/{len(runs)} runs: {', '.join(why)}")
    return "; ".join(parts) or None
