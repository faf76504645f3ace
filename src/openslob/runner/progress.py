"""Progress of a run as it goes: a line per sampling interval, or per N seconds (`pgbench -P`).

A time-series sink (runner/sampler.py): it gets every closed interval's row and histograms
and hands a row to `emit` once the rows it holds span `every_s` seconds (0: each interval),
or when the phase changes. A row over several intervals is their span (model/combine.py
over_time): rates are seconds-weighted, latencies weighted by their operations, and the op
latency percentiles come from the intervals' merged histograms, never from averaging
percentiles. It holds at most one span of rows: its memory does not grow with the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openslob.model import combine
from openslob.model.histogram import Histogram
from openslob.model.metrics import INTENDED, OP_KINDS
from openslob.runner.timeseries import HEAD, latency_stats

Emit = Callable[[dict[str, Any]], None]


class ProgressEvery:
    """A sink that emits a row per `every_s` seconds of intervals (see the module doc)."""

    def __init__(self, every_s: float, emit: Emit) -> None:
        self.every_s, self.emit = every_s, emit
        self._rows: list[dict[str, Any]] = []
        self._hists: dict[str, Histogram] = {}

    def __call__(self, row: dict[str, Any], hists: dict[str, Histogram]) -> None:
        if self._rows and self._rows[-1]["phase"] != row["phase"]:
            self.flush()
        self._rows.append(row)
        for kind, hist in hists.items():
            self._hists.setdefault(kind, Histogram()).merge(hist)
        if sum(float(r["seconds"]) for r in self._rows) >= self.every_s - 1e-6:
            self.flush()

    def flush(self) -> None:
        """Emit what is held (the end of a phase or of the run)."""
        rows, self._rows = self._rows, []
        hists, self._hists = self._hists, {}
        if not rows:
            return
        if len(rows) == 1:
            self.emit(rows[0])
            return
        last = rows[-1]
        keys = [k for k in last if k not in HEAD]
        span = combine.over_time(rows, keys)
        for kind in OP_KINDS:
            span.update(latency_stats(kind, hists.get(kind) or Histogram()))
            if kind + INTENDED in hists:  # a RATE run's
                span.update(latency_stats(kind, hists[kind + INTENDED], INTENDED))
        span.update({k: last[k] for k in HEAD})
        span["seconds"] = round(sum(float(r["seconds"]) for r in rows), 3)
        span["interval"] = f"{rows[0]['interval']}-{last['interval']}"
        self.emit({k: span.get(k) for k in last})
