"""Who hears about a run as it goes: one typed object instead of long callback lists.

`Observers` travels from the CLI (or a test, a bench script) through `run_benchmark`,
`execute`, `run_sweep` and into the RunController. Every field is optional; the default
hears nothing. `execute` adds the run's own files and its checkpoint before the run starts
(`dataclasses.replace`); callers never set `checkpoint` themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openslob.engines.api import ProgressCallback
from openslob.results.record import RunRecord
from openslob.runner.prepare import Notice
from openslob.runner.record import ProgressFn
from openslob.runner.sampler import Sink

Render = Callable[[dict[str, Any]], str]  # run.json → the text report beside it
Checkpoint = Callable[[RunRecord], None]  # the window so far, saved as a provisional run.json


def quiet(_msg: str) -> None:
    """The notice of a caller that wants none."""


@dataclass(frozen=True)
class Observers:
    """The receivers of one run's (or one sweep's runs') news.

    notice          one-line notes (setup steps, warnings said before the window)
    progress        each closed interval's row (after the sinks)
    setup_progress  the data set's loading progress (prepare)
    sinks           more receivers of each closed interval's row and histograms
                    (progress lines, metrics exporters)
    render          the text report written beside run.json (report.txt)
    checkpoint      set by `execute`: saves the window so far as the run goes
    """

    notice: Notice = quiet
    progress: ProgressFn | None = None
    setup_progress: ProgressCallback | None = None
    sinks: tuple[Sink, ...] = ()
    render: Render | None = None
    checkpoint: Checkpoint | None = None

    def interval_sinks(self) -> list[Sink]:
        """Every receiver of a closed interval, in order: the sinks, then `progress`."""
        progress = self.progress
        if progress is None:
            return list(self.sinks)
        return [*self.sinks, lambda row, _hists: progress(row)]
