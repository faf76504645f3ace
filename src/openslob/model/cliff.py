"""A cliff seen as it happens: live episodes of a throughput drop or a latency rise.

After each closed sampling interval of the window, CliffWatch.observe judges the interval's
row (runner/timeseries.py) against a trailing baseline: the median of the previous
`window` intervals that were themselves calm. A figure crosses its check when

    drop:  value < baseline x (1 - limit/100)      (ops = SLOBops/s, iops = database
                                                     physical reads + writes per second)
    rise:  value > baseline x (1 + limit/100)      (p99 = the SELECTs' op p99, the
                                                     UPDATEs' when the run has none)

An episode opens once a figure has crossed for CONFIRM consecutive intervals (one noisy
interval is no cliff) and starts at the first of them; it ends once the figure has been back
within its limit for CONFIRM consecutive intervals, at the end of its last crossing interval.
While an episode is open its baseline stays the one from before it, so a lasting new level
stays an open episode (end_s null) rather than becoming the norm. Judging starts once
`window` calm intervals are known (the ramp). Rows without a figure (null) are not judged.

The rule text is `FIGURE:drop>N%` / `FIGURE:rise>N%` joined by commas, or `off`. Times are
timeseries.csv's elapsed_s (seconds since the start barrier, warm-up included), as in
`slob analyze --timeseries` (analysis/sustained.py: the same figures judged after the run
against a fixed steady level, for long episodes); notices say the time into the window.

The cause of an episode is judged from the same rows: the median of each cause figure over
the episode against its median over the baseline intervals (CAUSES); "cause not measured"
when the rows carry none of them.
"""

from __future__ import annotations

import re
import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Direction = Literal["drop", "rise"]
OFF = "off"
DEFAULT_RULE = "ops:drop>30%,iops:drop>30%,p99:rise>100%"
DEFAULT_WINDOW = 5
CONFIRM = 2  # consecutive intervals that open or close an episode

# figure -> (the direction it may be judged in, its label)
FIGURES: Mapping[str, tuple[Direction, str]] = {
    "ops": ("drop", "SLOBops/s"),
    "iops": ("drop", "database physical IOPS"),
    "p99": ("rise", "op p99"),
}
# Row columns of the time series this module writes (runner/timeseries.py declares them).
COLUMNS = ("cliff", "cliff_episodes")

_CHECK = re.compile(r"(\w+):(drop|rise)>(\d+(?:\.\d*)?)%?")


@dataclass(frozen=True)
class Check:
    figure: str
    direction: Direction
    limit_pct: float

    def crossed(self, value: float, baseline: float) -> bool:
        if self.direction == "drop":
            return value < baseline * (1 - self.limit_pct / 100)
        return value > baseline * (1 + self.limit_pct / 100)

    def text(self) -> str:
        return f"{self.figure}:{self.direction}>{self.limit_pct:g}%"


@dataclass(frozen=True)
class CliffRule:
    checks: tuple[Check, ...]
    window: int = DEFAULT_WINDOW  # intervals in the trailing baseline

    def text(self) -> str:
        return ",".join(c.text() for c in self.checks) or OFF


def parse_rule(text: str, window: int = DEFAULT_WINDOW) -> CliffRule:
    """The rule of `--cliff`; ValueError with what is allowed when the text is not one."""
    allowed = (
        "FIGURE:drop>N% or FIGURE:rise>N% joined by commas (ops:drop, iops:drop, p99:rise; "
        "drop 1-99 %, rise 1-10000 %), or off"
    )
    clean = text.strip().lower().replace(" ", "")
    if clean in (OFF, "none", ""):
        return CliffRule((), window)
    checks: dict[str, Check] = {}
    for part in clean.split(","):
        match = _CHECK.fullmatch(part)
        if not match or match[1] not in FIGURES or FIGURES[match[1]][0] != match[2]:
            raise ValueError(f"{part!r} is not a check ({allowed})")
        limit = float(match[3])
        if not (1 <= limit <= (99 if match[2] == "drop" else 10000)):
            raise ValueError(f"{part!r}: limit out of range ({allowed})")
        checks[match[1]] = Check(match[1], match[2], limit)
    return CliffRule(tuple(checks.values()), window)


@dataclass
class Episode:
    """One cliff of one figure. size_pct: worst vs baseline, signed (-45 = 45 % below)."""

    figure: str
    start_s: float  # start of the first crossing interval (timeseries elapsed_s)
    end_s: float | None  # end of the last crossing interval; None while/if still open
    baseline: float
    worst: float
    size_pct: float
    detected_s: float  # end of the interval that confirmed it: when the notice was printed
    cause: str = "cause not measured"

    @property
    def open(self) -> bool:
        return self.end_s is None

    def to_json(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "start_s": round(self.start_s, 3),
            "end_s": None if self.end_s is None else round(self.end_s, 3),
            "open": self.open,
            "baseline": round(self.baseline, 3),
            "worst": round(self.worst, 3),
            "size_pct": round(self.size_pct, 1),
            "detected_s": round(self.detected_s, 3),
            "cause": self.cause,
        }


@dataclass(frozen=True)
class CliffEvent:
    """An episode opened ("start") or ended ("end") with the interval just judged (a copy
    of the episode as it was then)."""

    kind: Literal["start", "end"]
    episode: Episode
    window_start_s: float  # elapsed_s of the window's start: notices count from it

    def notice(self) -> str:
        e, label = self.episode, FIGURES[self.episode.figure][1]
        into = e.start_s - self.window_start_s
        size = f"{e.size_pct:+.0f} % ({_n(e.baseline)} -> {_n(e.worst)})"
        if self.kind == "start":
            return (
                f"cliff: {label} {size} at {into:,.0f} s into the window, "
                f"{e.detected_s - e.start_s:,.0f} s so far"
            )
        end = (e.end_s or e.start_s) - self.window_start_s
        return (
            f"cliff over: {label} back after {end - into:,.0f} s "
            f"({into:,.0f}-{end:,.0f} s into the window, worst {size}; {e.cause})"
        )


# What may explain an episode, from figures the interval rows carry:
# (label, row keys summed, how much the episode's median must exceed the baseline's, in %)
CAUSES: tuple[tuple[str, tuple[str, ...], float], ...] = (
    ("device write MB/s up", ("device_write_mb_per_s",), 50.0),
    ("checkpoint writes up", ("checkpoint_write_mb_per_s",), 50.0),
    ("InnoDB flushing up", ("innodb_pages_flushed_per_s",), 50.0),
    ("device read latency up", ("device_read_latency_us",), 50.0),
)
CPU_KEYS = ("cpu_user_pct", "cpu_sys_pct")
CPU_SATURATED_PCT = 90.0  # user + sys: a cause when the episode is above and its baseline below


def _n(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:,.2f}"


def _sum(row: Mapping[str, Any], keys: Sequence[str]) -> float | None:
    known = [float(row[k]) for k in keys if row.get(k) is not None]
    return sum(known) if known else None


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def explain(baseline: Sequence[Mapping[str, Any]], episode: Sequence[Mapping[str, Any]]) -> str:
    """The measured cause of an episode, from its rows and its baseline's rows."""
    found, measured = [], False
    for label, keys, rise_pct in CAUSES:
        before = _median([_sum(r, keys) for r in baseline])
        during = _median([_sum(r, keys) for r in episode])
        if before is None or during is None:
            continue
        measured = True
        if during > max(before, 1e-9) * (1 + rise_pct / 100):
            change = f"+{(during / before - 1) * 100:.0f} %" if before > 0 else "from 0"
            found.append(f"{label} ({_n(before)} -> {_n(during)}, {change})")
    cpu = _median([_sum(r, CPU_KEYS) for r in episode])
    cpu_before = _median([_sum(r, CPU_KEYS) for r in baseline])
    if cpu is not None and cpu_before is not None:
        measured = True
        # a change explains a change: a host already saturated before is no new cause
        if cpu >= CPU_SATURATED_PCT and cpu_before < CPU_SATURATED_PCT:
            found.append(f"CPU saturated ({cpu_before:.0f} -> {cpu:.0f} % busy)")
    if found:
        return "cause: " + ", ".join(found)
    if measured:
        return "no measured cause (device writes, checkpoints/flushing, CPU did not change)"
    return "cause not measured"


@dataclass
class _Track:
    """One check's state: its calm history, the crossing streak, the open episode."""

    check: Check
    calm: deque[tuple[float, Mapping[str, Any]]]
    streak: list[tuple[float, Mapping[str, Any]]] = field(default_factory=list)
    back: int = 0  # consecutive calm intervals while an episode is open
    last_end_s: float = 0.0  # end of the open episode's last crossing interval
    episode: Episode | None = None
    baseline_rows: list[Mapping[str, Any]] = field(default_factory=list)
    episode_rows: list[Mapping[str, Any]] = field(default_factory=list)


@dataclass
class CliffSummary:
    """What run.json's `cliffs` holds."""

    rule: str
    window_intervals: int
    confirm_intervals: int
    window_start_s: float | None
    episodes: list[Episode]

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "window_intervals": self.window_intervals,
            "confirm_intervals": self.confirm_intervals,
            "window_start_s": self.window_start_s,
            "episodes": [e.to_json() for e in self.episodes],
        }


class CliffWatch:
    """Judges each closed window interval's row; see the module docstring."""

    @classmethod
    def of(cls, rule: CliffRule) -> CliffWatch | None:
        """The run's live judge of `rule`; None when the rule checks nothing (CLIFF off)."""
        return cls(rule) if rule.checks else None

    def __init__(self, rule: CliffRule) -> None:
        self.rule = rule
        self.tracks = [_Track(c, deque(maxlen=rule.window)) for c in rule.checks]
        self.episodes: list[Episode] = []
        self.window_start_s: float | None = None
        self._p99_key: str | None = None

    def value(self, figure: str, row: Mapping[str, Any]) -> float | None:
        if figure == "ops":
            return _sum(row, ("slobops_per_s",))
        if figure == "iops":
            return _sum(row, ("pio_reads_per_s", "pio_writes_per_s"))
        if self._p99_key is None:  # chosen once: switching sources would look like a cliff
            self._p99_key = next(
                (f"{k}_p99_us" for k in ("select", "update") if row.get(f"{k}_p99_us")), None
            )
        return _sum(row, (self._p99_key,)) if self._p99_key else None

    def observe(self, row: Mapping[str, Any]) -> list[CliffEvent]:
        """Judge one closed window interval's row; the episodes it opened or ended."""
        end, seconds = float(row["elapsed_s"]), float(row["seconds"])
        if self.window_start_s is None:
            self.window_start_s = round(end - seconds, 3)
        events: list[CliffEvent] = []
        for track in self.tracks:
            value = self.value(track.check.figure, row)
            if value is not None:
                self._judge(track, value, row, end, seconds, events)
        return events

    def _judge(
        self,
        track: _Track,
        value: float,
        row: Mapping[str, Any],
        end: float,
        seconds: float,
        events: list[CliffEvent],
    ) -> None:
        check, episode = track.check, track.episode
        baseline = (
            episode.baseline
            if episode is not None
            else _median([v for v, _ in track.calm])
            if len(track.calm) >= self.rule.window
            else None
        )
        if baseline is None or baseline <= 0:
            track.calm.append((value, row))
            return
        crossed = check.crossed(value, baseline)
        if episode is not None:
            if crossed:
                track.back = 0
                track.episode_rows.append(row)
                self._worse(episode, value)
                track.last_end_s = end
                return
            track.back += 1
            if track.back >= CONFIRM:
                episode.end_s = track.last_end_s
                episode.cause = explain(track.baseline_rows, track.episode_rows)
                events.append(CliffEvent("end", replace(episode), self.window_start_s or 0.0))
                track.episode, track.back = None, 0
                track.calm.clear()  # the new calm level builds its own baseline
            return
        if not crossed:
            for v, r in track.streak:  # an unconfirmed dip was noise: it is calm history
                track.calm.append((v, r))
            track.streak = []
            track.calm.append((value, row))
            return
        track.streak.append((value, {**row, "_start_s": end - seconds}))
        if len(track.streak) < CONFIRM:
            return
        first = track.streak[0][1]
        new = Episode(
            figure=check.figure,
            start_s=float(first["_start_s"]),
            end_s=None,
            baseline=baseline,
            worst=track.streak[0][0],
            size_pct=0.0,
            detected_s=end,
        )
        for v, _ in track.streak:
            self._worse(new, v)
        track.baseline_rows = [r for _, r in track.calm]
        track.episode_rows = [r for _, r in track.streak]
        new.cause = explain(track.baseline_rows, track.episode_rows)
        track.episode, track.back, track.streak, track.last_end_s = new, 0, [], end
        self.episodes.append(new)
        events.append(CliffEvent("start", replace(new), self.window_start_s or 0.0))

    @staticmethod
    def _worse(episode: Episode, value: float) -> None:
        drop = FIGURES[episode.figure][0] == "drop"
        if (value < episode.worst) if drop else (value > episode.worst):
            episode.worst = value
        episode.size_pct = (episode.worst / episode.baseline - 1) * 100

    def columns(self) -> dict[str, Any]:
        """The time series' cliff columns after the last observed row: the figures in an
        open episode ("ops+p99", null: none) and the episodes so far."""
        active = [t.check.figure for t in self.tracks if t.episode is not None]
        return {"cliff": "+".join(active) or None, "cliff_episodes": len(self.episodes)}

    def active(self) -> bool:
        return any(t.episode is not None for t in self.tracks)

    def summary(self) -> CliffSummary:
        """The episodes so far (open ones stay open, with their cause so far)."""
        for track in self.tracks:
            if track.episode is not None:
                track.episode.cause = explain(track.baseline_rows, track.episode_rows)
        return CliffSummary(
            self.rule.text(), self.rule.window, CONFIRM, self.window_start_s, list(self.episodes)
        )
