"""The samplers of a run: the time series (one row per SAMPLE_INTERVAL, with the cleanup
horizon of each instance) and the ASH-like wait samples an engine takes inside the database."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from functools import partial
from typing import Any

from openslob.engines.api import Monitor, RunBackend
from openslob.host import snapshot as host_snapshot
from openslob.model import combine
from openslob.model.metrics import METRICS
from openslob.results.record import InstanceRecord, RunRecord
from openslob.runner.record import ProgressFn, RunInstance, first_line

WAIT_SAMPLE_HZ = 10
# The time series' figures from the engines' live loop counters (the metrics table's live
# figures but the host's, which come from host_snapshot.host_delta).
LOOP_FIGURES = tuple(k for k in METRICS.keys_where(live=True) if not METRICS[k].host)
HOST_FIGURES = METRICS.keys_where(live=True, host=True)


class Sampler(threading.Thread):
    """The time series, one row every SAMPLE_INTERVAL (wait samples: WaitSampler).

    Over several instances a row is the run's total: counters add, latencies are weighted
    by their operations, and a host shared by instances counts once."""

    def __init__(
        self,
        instances: list[RunInstance],
        record: RunRecord,
        interval: float,
        progress: ProgressFn | None,
    ) -> None:
        super().__init__(name="slob-sampler", daemon=True)
        self.instances, self.record = instances, record
        self.interval, self.progress = interval, progress
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.connection_lost = False

    def run(self) -> None:
        monitors: list[Monitor] = []
        try:
            for instance in self.instances:
                monitors.append(instance.backend.monitor("sampler"))
            self._loop(monitors)
        except Exception as exc:  # the run goes on without samples; say so in the results
            self.errors.append(f"sampler stopped: {first_line(exc)}")
            self.connection_lost = any(i.backend.connection_lost(exc) for i in self.instances)
        finally:
            for monitor in monitors:
                with contextlib.suppress(Exception):
                    monitor.close()

    def _loop(self, monitors: list[Monitor]) -> None:
        # One host snapshot per distinct host (the first instance on it reads it).
        # No server CPU here: the time series does not show it, and summing it walks /proc.
        readers = {}
        for instance, monitor in zip(self.instances, monitors, strict=True):
            if instance.host_key not in readers:
                readers[instance.host_key] = (
                    partial(host_snapshot.read_snapshot, monitor.read_file, instance.devices)
                    if instance.host_via_database
                    else partial(host_snapshot.take_snapshot, instance.devices)
                )

        def hosts() -> list[host_snapshot.HostSnapshot]:
            return [read() for read in readers.values()]

        def lives() -> list[dict[str, float] | None]:
            return [monitor.loop_counters() for monitor in monitors]

        prev_hosts, prev_lives = hosts(), lives()
        next_tick = time.monotonic() + self.interval
        while not self.stop.wait(max(0.0, next_tick - time.monotonic())):
            next_tick += self.interval
            cur_hosts, cur_lives = hosts(), lives()
            row = timeseries_row(prev_hosts, cur_hosts, prev_lives, cur_lives, self.record)
            row.update(self._horizons(monitors))
            self.record.timeseries.append(row)
            if self.progress:
                self.progress(row)
            prev_hosts, prev_lives = cur_hosts, cur_lives

    def _horizons(self, monitors: list[Monitor]) -> dict[str, Any]:
        """Who holds each instance's cleanup horizon now (its HorizonWatch); the time
        series gets the worst figure over the instances."""
        now, figures = time.time(), {}
        for instance, monitor in zip(self.instances, monitors, strict=True):
            sample = monitor.horizon()
            instance.record.horizon.add(now, sample)
            for key, value in sample["figures"].items():
                if value is not None and (figures.get(key) is None or value > figures[key]):
                    figures[key] = value
                figures.setdefault(key, None)
        return figures


class WaitSampler(threading.Thread):
    """ASH-like wait samples of the window at WAIT_SAMPLE_HZ, taken inside the database
    (one call, see workload._ASH_DO), so the client spends no CPU on them."""

    def __init__(
        self,
        backend: RunBackend,
        monitor: Monitor,
        record: InstanceRecord,
        start: float,
        end: float | None,
        enabled: bool,
    ) -> None:
        super().__init__(name="slob-waits", daemon=True)
        self.backend, self.monitor, self.record = backend, monitor, record
        self.enabled = enabled
        self.start_epoch, self.end_epoch = start, end
        self.error: str | None = None

    def run(self) -> None:
        if not self.enabled:
            self.error = "no wait samples: this engine has no wait sampler"
            return
        try:
            result = self.monitor.sample_waits(
                self.backend.application_name, self.start_epoch, self.end_epoch, WAIT_SAMPLE_HZ
            )
            self.record.wait_samples = result.samples
            self.record.waits.update(result.waits)
            self.record.own_commits += result.commits
        except Exception as exc:  # the run's other figures stand; say why waits are missing
            self.error = (
                f"no wait samples: {first_line(exc)}; the window's commits include the "
                f"sampler's own (up to {WAIT_SAMPLE_HZ}/s)"
            )

    def finish(self, timeout: float) -> None:
        """Wait for the samples; a sampler still running after `timeout` is cancelled.

        The monitor stays open until the run's "after" snapshot is taken: a database that
        publishes a statement's active time at its next flush (PostgreSQL) then never counts
        the sampler in the window's DB time."""
        self.join(timeout)
        if self.is_alive():
            self.monitor.cancel()
            self.join(5)


def timeseries_row(
    prev_hosts: list[host_snapshot.HostSnapshot],
    cur_hosts: list[host_snapshot.HostSnapshot],
    prev_lives: list[dict | None],
    cur_lives: list[dict | None],
    record: RunRecord,
) -> dict[str, Any]:
    """One interval of the time series; the lists hold one entry per host / per instance."""
    seconds = cur_hosts[0].monotonic - prev_hosts[0].monotonic
    per_host = [host_snapshot.host_delta(p, c) for p, c in zip(prev_hosts, cur_hosts, strict=True)]
    dev = combine.across_hosts(per_host)
    now = time.time()
    phase = "warmup"
    if record.window_start is not None and now >= record.window_start:
        phase = "window" if record.window_end is None or now <= record.window_end else "tail"
    row: dict[str, Any] = {
        "time": cur_hosts[0].wall_time,
        "elapsed_s": round(now - (record.start_at or now), 3),
        "phase": phase,
        "seconds": round(seconds, 3),
    }
    row.update({k: dev.get(k) for k in HOST_FIGURES})
    if any(v is None for v in (*prev_lives, *cur_lives)) or seconds <= 0:
        row.update(dict.fromkeys(LOOP_FIGURES))
        return row
    # The counters add across instances: rates and read latency of the sum are the totals.
    d: Counter = Counter()
    timed = True  # read time is measured on every instance
    for prev, cur in zip(prev_lives, cur_lives, strict=True):
        timed = timed and cur.get("read_time_ms") is not None
        d.update({k: cur[k] - prev[k] for k in cur if cur[k] is not None})
    ops = d["calls_select"] + d["calls_update"] + d["calls_scan"]
    row.update(
        {
            "slobops_per_s": ops / seconds,
            "selects_per_s": d["calls_select"] / seconds,
            "updates_per_s": d["calls_update"] / seconds,
            "scans_per_s": d["calls_scan"] / seconds,
            "db_reads_per_s": d["blks_read"] / seconds,
            "db_read_latency_us": d["read_time_ms"] * 1000 / d["blks_read"]
            if d["blks_read"] and timed
            else None,
            "lio_per_s": (d["blks_hit"] + d["blks_read"]) / seconds,
            "wal_mb_per_s": d["wal_bytes"] / (1 << 20) / seconds,
            # one COMMIT per update op, done inside the loop
            "commits_per_s": d["calls_update"] / seconds,
        }
    )
    return row
