"""How the run reaches and watches one instance, and small things its modules share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openslob.engines.api import Monitor, RunBackend, WindowStats
from openslob.results.record import InstanceRecord

ProgressFn = Callable[[dict[str, Any]], None]


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


@dataclass
class RunInstance:
    """One database instance the run drives: how to reach it and how to watch its host.

    `host_key` names the host and devices behind the instance: instances with the same key
    share one device, whose counters then count once in the run's totals."""

    backend: RunBackend  # the engine's (engines/api.py)
    record: InstanceRecord
    window: WindowStats  # the engine's figures from two snapshots (each interval's too)
    settings: dict[str, str]
    devices: list[str]
    host_key: str
    server_pid: int | None = None
    server_alive: Callable[[], bool] | None = None
    on_server_death: Callable[[], None] | None = None
    host_via_database: bool = False
    guard: dict[str, Any] = field(default_factory=dict)  # what its loops watch (DatasetLock)
    wait_sampling: bool = False  # the engine samples waits inside the database
    streams_intervals: bool = False  # one CALL a phase, a result an interval (Capabilities)
    batches_intervals: bool = False  # its loop answers every k-th boundary (Capabilities)
    batch: int = 1  # intervals per answer in this run (runner/batches.py)
    # the server tasks of the run's monitors (Monitor.server_task): their CPU is measuring's
    monitor_tasks: list[int] = field(default_factory=list)
    engine_metrics: tuple[str, ...] = ()  # the engine's own live figures (time series)
    rows_per_mb: int = (1 << 20) // 8192  # its engine's rows per MB of cf1 (hotspot keys)


def watch(instance: RunInstance, *monitors: Monitor) -> None:
    """Count these monitors' server tasks in what measuring cost (the host snapshots)."""
    for monitor in monitors:
        task = monitor.server_task()
        if task is not None:
            instance.monitor_tasks.append(task)
