"""What a run measured, as the controller collects it; build.py turns it into run.json."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from openslob.host.snapshot import HostSnapshot
from openslob.model.cliff import CliffSummary
from openslob.model.clockoffset import ClockReading
from openslob.model.horizon import HorizonWatch
from openslob.model.loop import LOOP_RESULT, call_goes_on
from openslob.model.states import RunStatus


@dataclass
class SessionOutcome:
    id: int
    schema: str
    instance: int = 0  # index into RunRecord.instances
    pid: int | None = None
    warmup: dict[str, Any] | None = None
    window: dict[str, Any] | None = None
    error: str | None = None
    # the window's interval results (one per interval: a CALL's, or one a streaming CALL
    # returned as it went on) and the time between one's end and the next's start, as the
    # database's clock saw them: the cost of cutting the window into intervals
    calls: int = 0
    streamed: int = 0  # of them, returned by a CALL that then went on (call_ended false)
    call_gap_sum_s: float = 0.0
    call_gap_max_s: float = 0.0
    answers: int = 0  # the answers that brought them (fewer when batched: runner/batches.py)
    # the loop counted window ops it could not send (runner/phase.py Phase._drained): its
    # results then fall short of the window, and the database's statement counts stand in
    results_lost: bool = False

    def add_call(self, result: dict[str, Any], previous_end: float | None) -> None:
        self.calls += 1
        self.streamed += call_goes_on(result)
        began = result.get(LOOP_RESULT.began_epoch.key)
        if previous_end is not None and began is not None:
            gap = max(float(began) - previous_end, 0.0)
            self.call_gap_sum_s += gap
            self.call_gap_max_s = max(self.call_gap_max_s, gap)


@dataclass
class InstanceRecord:
    """What one database instance of the run measured (its own counters and host)."""

    target: str  # printable: no password
    db_before: dict[str, Any] | None = None
    db_after: dict[str, Any] | None = None
    host_before: HostSnapshot | None = None
    host_after: HostSnapshot | None = None
    waits: Counter = field(default_factory=Counter)
    wait_samples: int = 0
    wait_sample_hz: float | None = None  # None: no wait sampler ran
    leftover_backends: int = 0
    # our own transactions inside the window: the stats flush after each CALL
    # (publish_stats) and the wait sampler's commits
    own_commits: int = 0
    batch: int = 1  # intervals per answer of its sessions (runner/batches.py)
    horizon: HorizonWatch = field(default_factory=HorizonWatch)
    # the server's clock against the client's before the window's barrier (and the warm-up's)
    clock: ClockReading | None = None
    clock_warmup: ClockReading | None = None


@dataclass
class RunRecord:
    """Everything measured; results.py turns it into run.json."""

    status: RunStatus = RunStatus.COMPLETE
    error: str | None = None
    sessions: list[SessionOutcome] = field(default_factory=list)
    connect_seconds: float | None = None
    start_at: float | None = None
    window_start: float | None = None
    window_end: float | None = None
    planned_end: float | None = None
    requested_seconds: float | None = None
    warmup_seconds: float = 0.0
    last_op_end: float | None = None
    instances: list[InstanceRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stopped_by: str | None = None  # "SIGINT" | "SIGTERM" when a signal ended the run
    # seconds of the window between its last boundary before a stop and the stop: the
    # interval the stop cut, whose ops are not counted (runner/stopping.py Stopping.cut_s)
    cut_s: float = 0.0
    # RATE runs: the warm-up's mean service time, and what it said before the window
    warmup_service_us: float | None = None
    early_warnings: list[str] = field(default_factory=list)
    # the live cliff judgement's episodes (model/cliff.py); None when CLIFF is off
    cliffs: CliffSummary | None = None
    # a checkpoint's (runner/sampler.py): per instance, the latency histograms of its
    # closed intervals; its sessions' windows then hold counts only (one merge per
    # interval instead of one per session result, inside the window)
    closed_histograms: dict[int, dict[str, Any]] | None = None

    def sessions_of(self, instance: int) -> list[SessionOutcome]:
        return [o for o in self.sessions if o.instance == instance]
