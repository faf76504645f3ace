"""The counters a run's window starts from and ends at: database, host, clocks, waits.

Each instance gets two monitors of its own for the run: "snapshots" (db counters, clock
readings, a remote host's /proc) and "waits" (the wait sampler of the window). The timeline
calls these only while no SLOBop is in flight (runner/controller.py), so the database
counters and the device counters cover the same work; none holds a snapshot across the
window, commits, or does I/O of its own in it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from openslob.engines.api import Monitor
from openslob.host import snapshot as host_snapshot
from openslob.results.record import RunRecord
from openslob.runner import clocks
from openslob.runner.record import RunInstance, first_line, watch
from openslob.runner.sampler import WaitSampler, wait_sample_hz


class Snapshots:
    """Every instance's snapshots and clock offsets, taken at once."""

    def __init__(self, instances: list[RunInstance], record: RunRecord) -> None:
        self.instances, self.record = instances, record
        self.monitors: list[Monitor] = []
        self.waits_monitors: list[Monitor] = []
        self.offsets_s = [0.0] * len(instances)  # each server's clock minus the client's

    def open(self) -> None:
        for instance in self.instances:
            self.monitors.append(instance.backend.monitor("snapshots"))
            self.waits_monitors.append(instance.backend.monitor("waits"))
            watch(instance, self.monitors[-1], self.waits_monitors[-1])

    def close(self) -> None:
        for monitor in (*self.monitors, *self.waits_monitors):
            with contextlib.suppress(Exception):
                monitor.close()

    def of(self, instance: RunInstance) -> str:
        """ " of TARGET" when the run has several instances (for notes)."""
        return f" of {instance.record.target}" if len(self.instances) > 1 else ""

    # ------------------------------------------------------------------- database

    async def db(self, key: str) -> None:
        """Every instance's counters at once (db_before / db_after of its record)."""
        results = await asyncio.gather(
            *(asyncio.to_thread(m.snapshot) for m in self.monitors), return_exceptions=True
        )
        for instance, result in zip(self.instances, results, strict=True):
            if isinstance(result, BaseException):
                if key == "db_before":
                    raise result
                # the server may be gone; keep what was measured
                self.record.notes.append(
                    f"no 'after' database snapshot{self.of(instance)}: {first_line(result)}"
                )
            else:
                setattr(instance.record, key, result)

    # ----------------------------------------------------------------------- host

    def host(self, key: str) -> None:
        for instance, monitor in zip(self.instances, self.monitors, strict=True):
            setattr(instance.record, key, self._host_snapshot(instance, monitor))

    def _host_snapshot(
        self, instance: RunInstance, monitor: Monitor
    ) -> host_snapshot.HostSnapshot | None:
        """This host's /proc, or the server host's through the snapshot monitor (whose queries
        run only between the phases, never at the same time as this)."""
        if not instance.host_via_database:
            return host_snapshot.take_snapshot(
                instance.devices, instance.server_pid, list(instance.monitor_tasks)
            )
        try:
            return host_snapshot.read_snapshot(monitor.read_file, instance.devices)
        except Exception as exc:  # the server may be gone; the figures are then null
            self.record.notes.append(
                f"no host snapshot through the database{self.of(instance)}: {first_line(exc)}"
            )
            return None

    def before(self) -> dict[str, Any]:
        """The counters the window starts from, for the sampler (db per instance, hosts)."""
        return {
            "db": [i.record.db_before for i in self.instances],
            "hosts": self._by_host("host_before"),
        }

    def after(self) -> dict[str, Any]:
        return {
            "db": [i.record.db_after for i in self.instances],
            "hosts": self._by_host("host_after"),
            "end": self.record.window_end,
        }

    def _by_host(self, key: str) -> dict[str, Any] | None:
        """Each distinct host's snapshot (its first instance's); None if one is missing."""
        hosts: dict[str, Any] = {}
        for instance in self.instances:
            snap = getattr(instance.record, key)
            hosts.setdefault(instance.host_key, snap)
        return None if any(v is None for v in hosts.values()) else hosts

    # --------------------------------------------------------------------- clocks

    async def clocks(self, key: str) -> None:
        """Each server's clock offset, measured just before a barrier (runner/clocks.py):
        the snapshot monitors are idle then; a few short statements, no I/O, no commit."""
        readings = await asyncio.to_thread(
            lambda: [clocks.measure(m.clock_epoch) for m in self.monitors]
        )
        for k, (instance, reading) in enumerate(zip(self.instances, readings, strict=True)):
            setattr(instance.record, key, reading)
            self.offsets_s[k] = reading.offset_s

    # ---------------------------------------------------------------------- waits

    def start_waits(self, start: float, planned_end: float | None) -> list[WaitSampler]:
        """One wait sampler per instance for the window, in each server's clock."""
        waits = [
            WaitSampler(
                i.backend,
                m,
                i.record,
                start + offset,
                None if planned_end is None else planned_end + offset,
                i.wait_sampling,
                wait_sample_hz(len(self.record.sessions_of(k))),
            )
            for k, (i, m, offset) in enumerate(
                zip(self.instances, self.waits_monitors, self.offsets_s, strict=True)
            )
        ]
        for sampler in waits:
            sampler.start()
        return waits

    async def finish_waits(self, waits: list[WaitSampler]) -> None:
        # They stop by themselves once the window's CALLs have returned (within 1/hz).
        for sampler in waits:
            await asyncio.to_thread(sampler.finish, 2.0)
            if sampler.error:
                self.record.notes.append(
                    sampler.error + self.of(self.instances[waits.index(sampler)])
                )
