"""The run's timeline, top to bottom: connect → barrier → warm-up → window → stop → collect.

Timeline of one run (all sessions share it):

    connect all sessions in parallel                                    (runner/sessions.py)
    start_at        every session's first op (a clock barrier inside the procedure)
    warm-up         until start_at + WARMUP, one CALL per session per SAMPLE_INTERVAL
                                                                         (runner/phase.py)
    db_before       once every warm-up CALL has returned (their I/O is flushed by then)
                                                                     (runner/snapshots.py)
    window_start    a new barrier; host "before" snapshot here
    window          until window_start + RUN_TIME, one CALL per session per interval
                    (runner/intervals.py); each closed interval is a row of the time series
    window_end      once every window CALL has returned: host "after", then DB "after"
With WORK_LOOP > 0 the window ends when the last session has done its loops. CALLs are
queued behind each running one (runner/pipeline.py: the loops never wait for this client).

Interrupts, a dead server or a failed session stop the run early (runner/stopping.py): the
CALLs in flight are cancelled and what was measured is kept. No backend of the run outlives
it, not even a client killed outright: its loops end themselves (engines' guard modules).
Who hears about the run (progress, sinks, notices, checkpoints): runner/observers.py.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

from openslob.config.resolve import Config
from openslob.host.ebpf import LayerSeries
from openslob.model.cliff import CliffWatch, parse_rule
from openslob.model.loop import LOOP_RESULT
from openslob.model.states import Phase, RunStatus
from openslob.results.record import RunRecord
from openslob.runner import batches
from openslob.runner.intervals import Schedule
from openslob.runner.loopconf import external_script
from openslob.runner.observers import Observers
from openslob.runner.phase import Calls, check_rate
from openslob.runner.record import RunInstance, first_line
from openslob.runner.sampler import Sampler
from openslob.runner.sessions import barrier, connect_all
from openslob.runner.snapshots import Snapshots
from openslob.runner.stopping import STOP_SIGNALS, Stopping

Session = Any  # an engine's work session (RunBackend.open_session)


class RunController:
    """Drives one run against one or more database instances with one common window."""

    def __init__(
        self,
        config: Config,
        instances: list[RunInstance],
        observers: Observers | None = None,
        *,
        script_env: dict[str, str] | None = None,
        layers: LayerSeries | None = None,
    ) -> None:
        self.config, self.instances = config, instances
        self.observers = observers or Observers()
        self.script_env = script_env or {}
        self.layers = layers  # traced latency layers (host/ebpf.py), into each interval's row
        self.record = RunRecord(instances=[instance.record for instance in instances])
        self.sessions: list[Session] = []
        self.stopping = Stopping(self.record, instances, self.sessions)
        self.snapshots = Snapshots(instances, self.record)

    def run(self) -> RunRecord:
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        try:
            asyncio.run(self._main())
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for instance in self.instances:
                instance.record.leftover_backends = instance.backend.terminate_leftovers()
                instance.backend.shutdown()  # e.g. a driver's worker threads
        return self.record

    async def _main(self) -> None:
        """Connect, the external script's "pre", the phases (_drive), then clean up."""
        stopping, snapshots, observers = self.stopping, self.snapshots, self.observers
        stopping.arm()
        sampler = Sampler(
            self.instances,
            self.record,
            observers.interval_sinks(),
            observers.checkpoint,
            self.layers,
            cliff=CliffWatch.of(parse_rule(self.config.p.cliff, self.config.p.cliff_window)),
            notice=observers.notice,
        )
        try:
            snapshots.open()
            await connect_all(
                self.config, self.instances, self.record, self.sessions, stopping.fail
            )
            if stopping.is_set():
                return
            self._script("pre")
            sessions = [o.instance for o in self.record.sessions]
            batches.assign(self.config, self.instances, sessions)  # before the sampler reads
            sampler.start()
            watchdog = stopping.watch(sampler)
            calls: Calls | None = None
            try:
                calls = Calls(
                    self.config,
                    self.instances,
                    self.record,
                    self.sessions,
                    sampler,
                    stopping,
                    snapshots.offsets_s,
                )
                await self._drive(calls)
            except Exception as exc:  # keep what was measured; say what broke
                stopping.fail(RunStatus.FAILED, f"run aborted: {first_line(exc)}")
                await stopping.cancel_all()
            finally:
                watchdog.cancel()
                if calls is not None:  # what a failed window measured (_drive's own call)
                    calls.window_totals()
        finally:
            await asyncio.gather(*(stopping.backend(s).close(s) for s in self.sessions))
            if sampler.ident is not None:  # started
                await asyncio.to_thread(sampler.finish, 30)
            self.record.notes.extend(sampler.errors)
            snapshots.close()
            stopping.disarm()

    async def _drive(self, calls: Calls) -> None:
        """Warm-up phase, then the window phase, each started by a common barrier and cut
        into sampling intervals (one CALL per session per interval).

        Snapshots are taken only while no SLOBop is in flight, so the database counters
        (published when a CALL ends) and the device counters cover the same work: "before"
        once every warm-up CALL has returned (sessions then wait for the window barrier),
        "after" once every window CALL has returned. The window is measured from its barrier
        to that moment: RUN_TIME plus the tail of the ops in flight when it expired. With
        several instances the barriers, the window and the snapshots are common to all.
        """
        config, record, snapshots = self.config, self.record, self.snapshots
        stopping, sampler = self.stopping, calls.sampler
        warmup, loops = config.p.warmup, config.p.work_loop
        step = config.p.sample_interval
        record.warmup_seconds = warmup
        await snapshots.clocks("clock_warmup" if warmup else "clock")
        record.start_at = barrier(len(self.sessions))
        record.requested_seconds = None if loops else config.p.run_time
        if warmup:
            schedule = Schedule(record.start_at, record.start_at + warmup, step)
            sampler.phase(Phase.WARMUP, schedule)
            book = await calls.phase(Phase.WARMUP, schedule, 0)
            if stopping.is_set():
                return
            check_rate(config, record, self.observers.notice)
            await asyncio.to_thread(sampler.caught_up)
            await snapshots.db("db_before")
            book.close_ready(through=book.started, attach=snapshots.before())
            await snapshots.clocks("clock")
            window_start = barrier(len(self.sessions))
        else:
            await snapshots.db("db_before")
            window_start = record.start_at
        record.window_start = window_start
        planned_end = None if loops else window_start + config.p.run_time
        record.window_end = planned_end  # the samplers' notion of "inside the window"
        waits = snapshots.start_waits(window_start, planned_end)
        schedule = stopping.window = Schedule(window_start, planned_end, step)
        window = asyncio.ensure_future(calls.phase(Phase.WINDOW, schedule, loops))
        await stopping.sleep_until(window_start)
        # in a thread: walking /proc for every server process takes seconds on a saturated
        # host, while the event loop must keep reading results (the CALLs queued run out)
        await asyncio.to_thread(snapshots.host, "host_before")
        sampler.phase(Phase.WINDOW, schedule, *snapshots.before().values())
        await stopping.wait_any(asyncio.shield(window))
        if stopping.is_set():
            stopped_at = await stopping.end_calls(window)
            record.window_end = min(stopped_at, schedule.end or stopped_at)
            record.cut_s = stopping.cut_s(schedule)
        else:
            record.window_end = time.time()
        await asyncio.to_thread(sampler.caught_up)  # earlier rows read before "after"
        await asyncio.to_thread(snapshots.host, "host_after")
        calls.window_totals()  # after "after": adding up the results is not measuring
        await snapshots.finish_waits(waits)
        ends = [o.window[LOOP_RESULT.ended_epoch.key] for o in record.sessions if o.window]
        record.last_op_end = max(ends) if ends else None
        record.planned_end = schedule.end  # earlier when Stopping.end_window_early moved it
        await snapshots.db("db_after")
        if window.done() and not window.cancelled() and not window.exception():
            book = window.result()  # its last interval ends with it: the "after" snapshots
            if not stopping.is_set():
                book.close_ready(through=book.started, attach=snapshots.after())
            elif record.status is RunStatus.INTERRUPTED:  # Ctrl-C, SIGTERM: rows to the stop
                book.close_kept(snapshots.after())
        self._script("post")

    def _script(self, when: str) -> None:
        """The EXTERNAL_SCRIPT's call before or after the phases; its failure is a note."""
        error = external_script(self.config.p.external_script, when, self.script_env)
        if error:
            self.record.notes.append(error)
