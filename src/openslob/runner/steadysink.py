"""The steady-state watch of a run: a time-series sink that evaluates the rules live.

It sits first among the sinks (runner/execute.py), so every later one sees its columns:
each row gets `steady_state` (1/0; null in the warm-up and before the first full window)
and `ss_<figure>_slope_pct`, `ss_<figure>_dev_pct` of each figure a rule names
(model/steady.py COLUMNS): timeseries.csv records them, the live metrics export them as
gauges (openslob_steady_state, ...), the progress line says "steady" or what is not.
With STOP_ON_STEADY it asks the controller, once, to end the window at the boundary of the
interval running when steady state is reached (a clean end: the run is complete).
The run.json `steady_state` block is `block()`, built at the end of the run. The window's
last interval, which lasts until its last op ends (SAMPLE_INTERVAL plus a tail in which no
op starts), is not evaluated: its rates would read low for no change of the system.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from openslob.config.resolve import Config
from openslob.model import steady
from openslob.model.histogram import Histogram
from openslob.model.metrics import OP_KINDS
from openslob.model.states import Phase

EndWindow = Callable[[str], None]  # the controller's end_window_early(note)


def point_of(row: dict[str, Any], hists: dict[str, Histogram]) -> steady.Point:
    """An interval's figures as the rules read them (model/steady.py FIGURES)."""
    hist = Histogram()
    for kind in OP_KINDS:  # service times only, not a RATE run's intended-start ones
        hist.merge(hists.get(kind) or Histogram())

    def total(*keys: str) -> float | None:
        values = [row.get(k) for k in keys]
        present = [float(v) for v in values if v is not None]
        return sum(present) if len(present) == len(values) else None

    return steady.Point(
        seconds=float(row["seconds"]),
        values={
            "slobops": total("slobops_per_s"),
            "iops": total("pio_reads_per_s", "pio_writes_per_s"),
            "mbps": total("pio_read_mb_per_s", "pio_write_mb_per_s"),
            "p99": hist.percentile_us(99) if hist.count else None,
        },
        hist=hist,
    )


class SteadySink:
    """See the module docstring."""

    def __init__(
        self, rules_text: str, ramp_s: float, window_s: float, stop: bool, step_s: float = 0.0
    ) -> None:
        self.rules = steady.parse_rules(rules_text)
        self.step_s = step_s  # SAMPLE_INTERVAL: a longer interval is the window's tail
        self.state = steady.SteadyState(self.rules, ramp_s, window_s)
        self.stop_on_steady = stop
        self.end_window: EndWindow | None = None  # set by execute once the controller exists
        self.asked_to_stop = False

    @classmethod
    def of(cls, config: Config) -> SteadySink | None:
        """The run's watch, or None when it has no STEADY_STATE rule."""
        p = config.p
        if not p.steady_state:
            return None
        return cls(p.steady_state, p.ss_ramp, p.ss_window, p.stop_on_steady, p.sample_interval)

    def columns(self) -> list[str]:
        return steady.columns(self.rules)

    def __call__(self, row: dict[str, Any], hists: dict[str, Histogram]) -> None:
        row.update(dict.fromkeys(self.columns()))
        if row["phase"] != Phase.WINDOW:
            return
        state = self.state
        if not self._tail(row):
            state.add(point_of(row, hists))
        if not state.evaluations:
            return  # ramp, or the first window not yet full
        row[steady.STEADY_COLUMN] = int(state.steady)
        for e in state.evaluations:
            row[steady.column(e.figure, steady.Measure.SLOPE)] = _rounded(e.slope_pct)
            row[steady.column(e.figure, steady.Measure.DEV)] = _rounded(e.dev_pct)
        if state.steady and self.stop_on_steady and not self.asked_to_stop:
            self.asked_to_stop = True
            if self.end_window is not None:
                self.end_window(
                    f"ended at steady state ({steady.rules_text(self.rules)} met "
                    f"{state.reached_at_s:g} s into the window)"
                )

    def _tail(self, row: dict[str, Any]) -> bool:
        """The window's last interval, stretched to its last op's end (no op starts in the
        stretch, so its rates read low): not evaluated, the state stays as it was."""
        return bool(self.step_s) and float(row["seconds"]) > self.step_s * 1.01 + 1e-3

    def block(self) -> dict[str, Any]:
        """run.json's `steady_state` (schema: run.schema.json)."""
        state = self.state
        reached = state.reached
        return {
            "rules": steady.rules_text(self.rules),
            "ramp_s": state.ramp_s,
            "window_s": state.window_s,
            "stop_on_steady": self.stop_on_steady,
            "reached": state.reached_at_s is not None,
            "reached_at_s": state.reached_at_s,
            "steady_at_end": state.steady if state.evaluations else False,
            "evaluated_s": round(state.elapsed_s, 3),
            "figures": [
                {
                    "figure": e.figure,
                    "criteria": [
                        {"measure": c.measure.value, "limit_pct": c.limit_pct}
                        for c in rule.criteria
                    ],
                    "slope_pct": _rounded(e.slope_pct),
                    "dev_pct": _rounded(e.dev_pct),
                    "met": e.met,
                }
                for rule, e in zip(self.rules, self._evaluations(), strict=True)
            ],
            "steady": None
            if reached is None
            else {k: _rounded(v) for k, v in asdict(reached).items()},
        }

    def _evaluations(self) -> tuple[steady.Evaluation, ...]:
        """The first steady window's, else the last full window's, else none measured."""
        state = self.state
        found = state.reached_evaluations or state.evaluations
        return found or tuple(steady.Evaluation(r.figure, None, None, False) for r in self.rules)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
