"""Steady state: rules on per-interval figures, their evaluation over a trailing window.

A rule text such as ``iops:slope<10%,p99:dev<20%`` (STEADY_STATE, --steady-state) names
figures of the time series and a limit per criterion:

- ``slope<X%``: the least-squares slope of the figure over the window, times the window's
  length, divided by the window's mean: how much the figure drifted across the window, in
  percent of its level. (fio's ``ss=iops_slope:X%`` divides the slope per second by the mean;
  ours is that times the window's seconds, so the limit does not depend on the window's length
  being one second.) The absolute value is compared: a rise is as unsteady as a fall.
- ``dev<X%``: the largest |x - mean| over the window's intervals, divided by the mean.

Figures (FIGURES): ``slobops`` (SLOBops/s), ``iops`` (the database's physical reads + writes
per second, pio_reads_per_s + pio_writes_per_s of each interval), ``mbps`` (the database's
physical read + write MB/s) and ``p99`` (the op latency p99 of each interval, from the
interval's merged histograms). The window is the last ``window_s`` seconds of intervals that
started after ``ramp_s`` seconds into the measured window; steady state is reached when every
rule's criteria are met over such a full window, so never before ramp_s + window_s.

Pure logic, no I/O: the runner feeds one Point per closed interval (runner/steadysink.py).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from openslob.model.histogram import Histogram

EPS_S = 1e-6


class Measure(StrEnum):
    SLOPE = "slope"
    DEV = "dev"


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure a rule may name: its label and unit as reports print them."""

    name: str
    label: str
    unit: str


FIGURES: Mapping[str, Figure] = {
    f.name: f
    for f in (
        Figure("slobops", "SLOBops/s", "ops/s"),
        Figure("iops", "IOPS (database physical reads + writes/s)", "IO/s"),
        Figure("mbps", "MB/s (database physical read + write)", "MB/s"),
        Figure("p99", "op latency p99", "µs"),
    )
}

FORMS = "FIGURE:slope<PCT% or FIGURE:dev<PCT%, comma separated; FIGURE: " + ", ".join(FIGURES)
_ITEM = re.compile(r"\s*([a-z0-9]+)\s*:\s*([a-z]+)\s*<\s*(\d+(?:\.\d*)?|\.\d+)\s*%?\s*")


@dataclass(frozen=True, slots=True)
class Criterion:
    measure: Measure
    limit_pct: float


@dataclass(frozen=True, slots=True)
class Rule:
    """One figure's criteria (all must hold)."""

    figure: str
    criteria: tuple[Criterion, ...]


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules of a STEADY_STATE text; ValueError with the offending item (the caller
    names the parameter and the allowed forms). Criteria on one figure are merged."""
    by_figure: dict[str, list[Criterion]] = {}
    if not text.strip():
        raise ValueError("empty")
    for item in text.lower().split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"{item.strip() or '(empty item)'!r} is not FIGURE:MEASURE<PCT%")
        figure, measure, limit = match.groups()
        if figure not in FIGURES:
            raise ValueError(f"unknown figure {figure!r}")
        if measure not in Measure.__members__.values():
            raise ValueError(f"unknown criterion {measure!r}")
        limit_pct = float(limit)
        if not 0 < limit_pct <= 1000:
            raise ValueError(f"limit {limit}% is not in (0, 1000] %")
        by_figure.setdefault(figure, []).append(Criterion(Measure(measure), limit_pct))
    return tuple(Rule(f, tuple(c)) for f, c in by_figure.items())


def rules_text(rules: Sequence[Rule]) -> str:
    """The canonical text of rules (what run.json records)."""
    return ",".join(
        f"{r.figure}:{c.measure.value}<{c.limit_pct:g}%" for r in rules for c in r.criteria
    )


# Time-series columns of the live evaluation (runner/steadysink.py adds them to each row).
STEADY_COLUMN = "steady_state"


def column(figure: str, measure: Measure) -> str:
    return f"ss_{figure}_{measure.value}_pct"


def columns(rules: Sequence[Rule]) -> list[str]:
    """steady_state, then each ruled figure's slope and deviation."""
    return [STEADY_COLUMN] + [column(r.figure, m) for r in rules for m in Measure]


def all_columns() -> list[str]:
    """Every column a rule can add (the live metrics' names, README)."""
    return [STEADY_COLUMN] + [column(f, m) for f in FIGURES for m in Measure]


def column_help(key: str) -> str | None:
    """The live metrics' help text of a steady-state column; None for any other key."""
    if key == STEADY_COLUMN:
        return "1 when the last steady-state window meets every STEADY_STATE rule, else 0"
    for figure in FIGURES:
        for measure in Measure:
            if key == column(figure, measure):
                what = "slope x window / mean" if measure is Measure.SLOPE else "max deviation"
                return f"Steady state: {figure} {what} over the last window (%)"
    return None


def row_status(rules: Sequence[Rule], row: Mapping[str, object]) -> str | None:
    """The progress line's word from a row's columns: 'steady', 'not steady (iops slope
    14 %)'; None before the first full window (or over a span that was both)."""
    flag = row.get(STEADY_COLUMN)
    if flag is None:
        return None
    if flag:
        return "steady"
    for rule in rules:
        for c in rule.criteria:
            value = row.get(column(rule.figure, c.measure))
            if not isinstance(value, int | float):
                return f"not steady ({rule.figure} {c.measure.value} n/a)"
            if value >= c.limit_pct:
                return f"not steady ({rule.figure} {c.measure.value} {value:.0f} %)"
    return "not steady"


# ------------------------------------------------------------------------ the measures


def slope_pct(values: Sequence[float], seconds: Sequence[float]) -> float | None:
    """|least-squares slope| x window length / mean, in %; None with < 2 points or mean 0.
    x is each interval's midpoint in seconds (intervals may differ in length)."""
    n = len(values)
    if n < 2 or n != len(seconds):
        return None
    mean = sum(values) / n
    if mean <= 0:
        return None
    xs, t = [], 0.0
    for s in seconds:
        xs.append(t + s / 2)
        t += s
    x_mean = sum(xs) / n
    sxx = sum((x - x_mean) ** 2 for x in xs)
    if sxx <= 0:
        return None
    slope = sum((x - x_mean) * (y - mean) for x, y in zip(xs, values, strict=True)) / sxx
    return abs(slope) * t / mean * 100


def dev_pct(values: Sequence[float]) -> float | None:
    """max |x - mean| / mean, in %; None without values or with mean 0."""
    if not values:
        return None
    mean = sum(values) / len(values)
    if mean <= 0:
        return None
    return max(abs(v - mean) for v in values) / mean * 100


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One figure over one window: its measures (None: not measurable, e.g. an interval
    without the figure) and whether its rule's criteria are all met."""

    figure: str
    slope_pct: float | None
    dev_pct: float | None
    met: bool


def evaluate_rule(
    rule: Rule, values: Sequence[float | None], seconds: Sequence[float]
) -> Evaluation:
    """A rule over the window's values of its figure (None: the interval lacks it)."""
    if any(v is None for v in values) or not values:
        return Evaluation(rule.figure, None, None, False)
    present = [float(v) for v in values if v is not None]
    slope, dev = slope_pct(present, seconds), dev_pct(present)
    met = True
    for c in rule.criteria:
        value = slope if c.measure is Measure.SLOPE else dev
        met = met and value is not None and value < c.limit_pct
    return Evaluation(rule.figure, slope, dev, met)


# ------------------------------------------------------------------------ the tracker


@dataclass(frozen=True, slots=True)
class Point:
    """One closed interval: its length, its figures (FIGURES' names; None: not measured)
    and its ops' merged latency histogram."""

    seconds: float
    values: Mapping[str, float | None]
    hist: Histogram = field(default_factory=Histogram)


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """The figures over a steady window: seconds-weighted rates, percentiles of the
    intervals' merged histograms (never averaged percentiles)."""

    seconds: float
    slobops_per_s: float | None
    iops: float | None
    mb_per_s: float | None
    op_p50_us: float | None
    op_p99_us: float | None


def window_figures(points: Sequence[Point]) -> WindowFigures:
    seconds = sum(p.seconds for p in points)

    def mean(name: str) -> float | None:
        values = [p.values.get(name) for p in points]
        if not points or seconds <= 0 or any(v is None for v in values):
            return None
        return sum(float(v or 0) * p.seconds for v, p in zip(values, points, strict=True)) / seconds

    hist = Histogram()
    for p in points:
        hist.merge(p.hist)
    return WindowFigures(
        seconds=seconds,
        slobops_per_s=mean("slobops"),
        iops=mean("iops"),
        mb_per_s=mean("mbps"),
        op_p50_us=hist.percentile_us(50) if hist.count else None,
        op_p99_us=hist.percentile_us(99) if hist.count else None,
    )


class SteadyState:
    """Feeds on the window's closed intervals in order; says whether the run is steady now
    and remembers when it first was, with the figures of that first steady window."""

    def __init__(self, rules: Sequence[Rule], ramp_s: float, window_s: float) -> None:
        self.rules, self.ramp_s, self.window_s = tuple(rules), ramp_s, window_s
        self.elapsed_s = 0.0  # seconds of the measured window fed so far
        self.points: deque[Point] = deque()
        self.evaluations: tuple[Evaluation, ...] = ()  # the last full window's
        self.steady = False
        self.reached_at_s: float | None = None
        self.reached: WindowFigures | None = None
        self.reached_evaluations: tuple[Evaluation, ...] = ()  # of the first steady window

    def add(self, point: Point) -> bool:
        """One more interval; True when the last window_s seconds meet every rule."""
        started_s = self.elapsed_s
        self.elapsed_s += point.seconds
        if started_s < self.ramp_s - EPS_S:
            return False  # still in the ramp
        self.points.append(point)
        while (
            len(self.points) > 1 and self._span() - self.points[0].seconds >= self.window_s - EPS_S
        ):
            self.points.popleft()
        if self._span() < self.window_s - EPS_S:
            return False  # the first window is not full yet
        seconds = [p.seconds for p in self.points]
        self.evaluations = tuple(
            evaluate_rule(r, [p.values.get(r.figure) for p in self.points], seconds)
            for r in self.rules
        )
        self.steady = all(e.met for e in self.evaluations)
        if self.steady and self.reached_at_s is None:
            self.reached_at_s = self.elapsed_s
            self.reached = window_figures(list(self.points))
            self.reached_evaluations = self.evaluations
        return self.steady

    def _span(self) -> float:
        return sum(p.seconds for p in self.points)
