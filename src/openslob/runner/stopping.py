"""How a run stops early: signals, a dead server, a failed session, cancelling the CALLs.

The first SIGINT or SIGTERM (timeout, systemd, CI runners) marks the run "interrupted"
(run.json stopped_by names the signal) and sets the stop event: no session starts a further
CALL and the timeline cancels the CALLs in flight, keeping what was measured. A second one
sends cancel requests and exits at once. A session error, a dead server or a lost monitoring
connection ends the run as "failed". The first reason to stop is the one run.json keeps.
A clean early end (end_window_early: steady state reached) moves the window's planned end
to the end of the QUEUED-th interval after the running one instead (CALLs are queued):
nothing is cancelled, the run is complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from typing import Any

from openslob.model.states import RunStatus
from openslob.results.record import RunRecord
from openslob.runner.intervals import Schedule
from openslob.runner.pipeline import QUEUED
from openslob.runner.record import RunInstance, first_line
from openslob.runner.sampler import Sampler

CANCEL_ROUNDS, CANCEL_WAIT_S = 5, 2.0  # how a stopped window's CALLs are ended
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Session = Any  # an engine's work session (RunBackend.open_session)


class Stopping:
    """The run's stop event and everything that sets it or acts on it."""

    def __init__(
        self, record: RunRecord, instances: list[RunInstance], sessions: list[Session]
    ) -> None:
        self.record, self.instances, self.sessions = record, instances, sessions
        self.interrupts = 0
        self.event: asyncio.Event | None = None  # created inside the run's event loop
        self.loop: asyncio.AbstractEventLoop | None = None
        self.window: Schedule | None = None  # the window's schedule, once it opens
        self.stopped_at: float | None = None  # when the first reason to stop came

    def is_set(self) -> bool:
        return self.event is not None and self.event.is_set()

    def cut(self, schedule: Schedule, index: int) -> bool:
        """Whether interval `index` of `schedule` was still running when the run stopped:
        its CALLs were cancelled, and a result of it that still came (a cancel that missed)
        holds ops from after the stop (run alone, as the others had ended), which are not the
        window's."""
        return self.stopped_at is not None and schedule.boundary(index) > self.stopped_at

    def cut_s(self, schedule: Schedule) -> float:
        """How much of the phase the cut interval had run when the run stopped (0: not
        stopped, or stopped on a boundary or after the phase's end)."""
        at = self.stopped_at
        if at is None or (schedule.end is not None and at >= schedule.end):
            return 0.0
        return max(at - schedule.begin(schedule.index_at(at)), 0.0)

    def backend(self, session: Session) -> Any:
        return self.instances[self.record.sessions[session.id].instance].backend

    # ---------------------------------------------------------------------- signals

    def arm(self) -> None:
        """The stop event and the signal handlers, in the running event loop."""
        loop = self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self.on_signal, sig)

    def disarm(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)

    def on_signal(self, sig: signal.Signals) -> None:
        self.interrupts += 1
        if self.interrupts >= 2:  # a second one: tell the server, then leave at once
            for session in self.sessions:
                self.backend(session).cancel_now(session)
            os._exit(128 + sig)
        self.record.stopped_by = sig.name
        what = "by the user (Ctrl-C)" if sig == signal.SIGINT else f"by {sig.name}"
        self.fail(RunStatus.INTERRUPTED, f"interrupted {what}")

    def fail(self, status: RunStatus, error: str) -> None:
        if self.record.status == RunStatus.COMPLETE:
            self.record.status, self.record.error = status, error
        if self.stopped_at is None:
            self.stopped_at = time.time()
        if self.event is not None:
            self.event.set()

    # ------------------------------------------------------------- a clean early end

    def end_window_early(self, note: str) -> None:
        """End the window cleanly QUEUED intervals after the running one (the steady-state
        watch, runner/steadysink.py; CALLs may be queued for them): the CALLs return there,
        the last interval closes with the "after" snapshots, the run stays complete, `note`
        says why. Thread-safe."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._shorten_window, note)

    def _shorten_window(self, note: str) -> None:
        # In the event loop: a CALL sent after this sees the new end. Ones sent before may
        # be queued behind the running one (runner/pipeline.py), for the QUEUED intervals
        # after the one running now, never later: the window ends at the last one's end, so
        # no CALL passes the new end.
        schedule = self.window
        if schedule is None or self.is_set():
            return
        end = schedule.boundary(schedule.index_at(time.time()) + QUEUED)
        if schedule.end is None or end < schedule.end:
            schedule.end = end
            self.record.window_end = end
            self.record.notes.append(note)

    # ------------------------------------------------------------------ the CALLs

    async def cancel_all(self) -> None:
        await asyncio.gather(*(self.backend(s).cancel(s) for s in self.sessions))

    async def end_calls(self, window: asyncio.Future[Any]) -> float:
        """Cancel the stopped window's CALLs until they have returned; when it stopped."""
        stopped_at = self.stopped_at or time.time()
        # A CALL whose request left after the first cancel (a session still starting,
        # a CALL sent from a worker thread) is not hit by it: cancel again.
        for _ in range(CANCEL_ROUNDS):
            await self.cancel_all()
            try:
                await asyncio.wait_for(asyncio.shield(window), timeout=CANCEL_WAIT_S)
                break
            except TimeoutError:
                continue
        return stopped_at

    async def sleep_until(self, epoch: float) -> None:
        """Sleep until `epoch`, or until the run is stopped."""
        delay = epoch - time.time()
        if delay > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wait(), timeout=delay)

    async def wait_any(self, awaitable: Any) -> None:
        """Wait for `awaitable` or for the run to be stopped, whichever comes first."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._wait())
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()

    async def _wait(self) -> None:
        assert self.event is not None, "arm() first"
        await self.event.wait()

    # -------------------------------------------------------------------- watchdog

    def watch(self, sampler: Sampler) -> asyncio.Task[None]:
        """The watchdog task, whose crash fails the run rather than pass silently."""
        task = asyncio.create_task(self._watchdog(sampler))
        task.add_done_callback(self._watchdog_done)
        return task

    def _watchdog_done(self, task: asyncio.Task[None]) -> None:
        """A crashed watchdog must not pass silently: the run could no longer end itself."""
        exc = None if task.cancelled() else task.exception()
        if exc is not None:
            self.fail(RunStatus.FAILED, f"watchdog crashed: {first_line(exc)}")

    def _dead_instances(self) -> list[RunInstance]:
        return [i for i in self.instances if i.server_alive is not None and not i.server_alive()]

    async def _watchdog(self, sampler: Sampler) -> None:
        """End the run within seconds when a server dies.

        Backends whose postmaster was killed do not notice while they loop, so a dead
        postmaster is detected here and the orphans are killed (private server); a monitor
        that lost its connection means the same for any server.
        """
        while not self.is_set():
            await asyncio.sleep(0.5)
            dead = self._dead_instances()
            watched = any(i.server_alive is not None for i in self.instances)
            if sampler.connection_lost and not dead and watched:
                await asyncio.sleep(0.2)  # a dying postmaster: say so rather than "lost"
                dead = self._dead_instances()
            if dead or sampler.connection_lost:
                which = f" ({dead[0].record.target})" if len(self.instances) > 1 and dead else ""
                self.fail(
                    RunStatus.FAILED,
                    f"the database server died during the run{which}"
                    if dead
                    else f"lost the monitoring connection: {sampler.errors[-1]}",
                )
                # A lost connection may be a postmaster not yet seen dead: each handler
                # (kill_orphans) does nothing while its postmaster lives.
                for instance in self.instances:
                    if instance.on_server_death is not None:
                        await asyncio.to_thread(instance.on_server_death)
                return
