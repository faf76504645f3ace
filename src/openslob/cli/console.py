"""What `slob run`, `slob sweep` and a repeated run print while they go (stderr).

- RunProgress: the progress line of each emitted interval (or span): the phase, the seconds
  into it (counted from the phase's own start: the window's from the window barrier, not
  from the warm-up's), what is left of its planned length, and the live figures of the
  metrics table (latencies in us below 10 ms, in ms from 10 ms). On a terminal it is cut to
  the terminal's width (it is redrawn in place: a wrapped line would leave fragments).
- point_lines: a sweep point's figures once it ends, then each of its warnings: a sweep or
  a repeated run is read on the console as much as a single run is.
"""

from __future__ import annotations

import textwrap
from typing import Any

from openslob.config.resolve import Config
from openslob.model import steady
from openslob.model.metrics import METRICS, progress_keys
from openslob.model.states import Phase
from openslob.report.blocks import fmt_us

WIDTH = 100  # lines that are not redrawn (point lines, warnings) wrap here


def cut(text: str, width: int | None) -> str:
    """`text` within `width` characters (an ellipsis says it was cut); None: as it is."""
    if width is None or len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + "…"


def _figure(key: str, value: float | None) -> str:
    brief = METRICS[key].brief
    if key.endswith("_us"):
        return f"{brief.removesuffix(' us')} {fmt_us(value)}"
    shown = "n/a" if value is None else f"{value:,.{METRICS[key].digits}f}"
    return f"{brief} {shown}"


def _clock(seconds: float) -> str:
    seconds = max(round(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class RunProgress:
    """The progress line of one run (see the module doc); `planned`: seconds per phase
    (None: no planned end, a WORK_LOOP window)."""

    def __init__(
        self, planned: dict[str, float | None], rules: tuple[steady.Rule, ...] = ()
    ) -> None:
        self.planned = planned
        self.rules = rules  # STEADY_STATE's: the line says whether the run is steady
        self.done: dict[str, float] = {}

    @classmethod
    def of(cls, config: Config) -> RunProgress:
        loops = config.p.work_loop
        return cls(
            {
                Phase.WARMUP: config.p.warmup,
                Phase.WINDOW: None if loops else config.p.run_time,
            },
            steady.parse_rules(config.p.steady_state) if config.p.steady_state else (),
        )

    def left_s(self) -> float | None:
        """Seconds left of the run's planned phases (None without a planned end)."""
        left = 0.0
        for phase, planned in self.planned.items():
            if planned is None:
                return None
            left += max(planned - self.done.get(phase, 0.0), 0.0)
        return left

    def line(self, row: dict[str, Any], width: int | None = None) -> str:
        phase = str(row["phase"])
        self.done[phase] = self.done.get(phase, 0.0) + float(row["seconds"] or 0.0)
        into, planned = self.done[phase], self.planned.get(phase)
        head = f"{phase:>6} {into:6.1f} s"
        if planned:
            head += f" of {planned:g}"
        left = self.left_s()
        if left is not None:
            head += f", {_clock(left)} left"
        status = steady.row_status(self.rules, row) if self.rules else None
        if status:
            head += f" | {status}"
        figures = "  ".join(_figure(key, row.get(key)) for key in progress_keys())
        return cut(f"{head} | {figures}", width)

    def brief(self, row: dict[str, Any]) -> str:
        """A short live line for a sweep's bar: the phase's time and SLOBops/s."""
        phase = str(row["phase"])
        self.done[phase] = self.done.get(phase, 0.0) + float(row["seconds"] or 0.0)
        planned = self.planned.get(phase)
        into = f"{self.done[phase]:.0f}" + (f"/{planned:g}" if planned else "")
        return f"{phase} {into} s, {_figure('slobops_per_s', row.get('slobops_per_s'))}"


def point_lines(entry: dict[str, Any], result: dict[str, Any] | None) -> list[str]:
    """A sweep point's line once it ended, then its warnings (wrapped at WIDTH)."""
    metrics = (result or {}).get("metrics") or {}

    def num(key: str) -> str:
        value = metrics.get(key)
        return "n/a" if value is None else f"{value:,.0f}"

    status = entry["status"] + (f" ({entry['error']})" if entry.get("error") else "")
    lines = [
        f"{entry['name']:<24} {status:<9} ops/s {num('slobops_per_s'):>7} "
        f"reads/s {num('pio_reads_per_s'):>7} writes/s {num('pio_writes_per_s'):>7} "
        f"read {fmt_us(metrics.get('db_read_latency_us'))}"
    ]
    for warning in (result or {}).get("warnings") or []:
        lines += textwrap.wrap(f"! {warning}", WIDTH, initial_indent="  ", subsequent_indent="    ")
    return lines
