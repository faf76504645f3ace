"""The run lifecycle: connect → barrier → warm-up → window → stop → collect.

Timeline of one run (all sessions share it):

    connect all sessions in parallel
    start_at        every session's first op (a clock barrier inside the procedure)
    warm-up         until start_at + WARMUP, one CALL per session per SAMPLE_INTERVAL
    db_before       once every warm-up CALL has returned (their I/O is flushed by then)
    window_start    a new barrier; host "before" snapshot here
    window          until window_start + RUN_TIME, one CALL per session per interval
                    (runner/intervals.py); each closed interval is a row of the time series
    window_end      once every window CALL has returned: host "after", then DB "after"
With WORK_LOOP > 0 the window ends when the last session has done its loops.

Interrupts: the first SIGINT or SIGTERM (timeout, systemd, CI runners) cancels every session's
CALL and saves what was measured as status "interrupted" (run.json stopped_by names the
signal); a second one sends cancel requests and exits at once. A session error or a dead
server ends the run as "failed". No backend of the run outlives it, not even a client killed
outright: its loops end themselves (engines' guard modules).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from openslob.config.resolve import Config
from openslob.engines.api import Monitor
from openslob.host import snapshot as host_snapshot
from openslob.model.loop import LOOP_PARAMS, LOOP_RESULT
from openslob.model.plan import session_instances, session_schemas, session_seed
from openslob.model.rate import littles_law_warning
from openslob.results.record import RunRecord, SessionOutcome
from openslob.runner import clocks
from openslob.runner.intervals import IntervalBook, Schedule, merge_results
from openslob.runner.loopconf import external_script, loop_conf
from openslob.runner.record import ProgressFn, RunInstance, first_line
from openslob.runner.sampler import Sampler, Sink, WaitSampler

MAX_CONCURRENT_CONNECTS = 64
BARRIER_LEAD_S = 0.2
BARRIER_PER_SESSION_S = 0.004
CANCEL_ROUNDS, CANCEL_WAIT_S = 5, 2.0  # how a stopped window's CALLs are ended
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Session = Any  # an engine's work session (RunBackend.open_session)


class RunController:
    """Drives one run against one or more database instances with one common window."""

    def __init__(
        self,
        config: Config,
        instances: list[RunInstance],
        *,
        progress: ProgressFn | None = None,
        script_env: dict[str, str] | None = None,
        sinks: list[Sink] | None = None,
        checkpoint: Callable[[RunRecord], None] | None = None,
        notice: Callable[[str], None] = lambda _msg: None,
    ) -> None:
        self.config = config
        self.notice = notice
        self.checkpoint = checkpoint
        self.instances = instances
        self._snapshots: list[Monitor] = []
        self._waits_monitors: list[Monitor] = []
        self.sinks = list(sinks or [])
        if progress is not None:
            self.sinks.append(lambda row, _hists: progress(row))
        self.script_env = script_env or {}
        self.record = RunRecord(instances=[instance.record for instance in instances])
        self.sessions: list[Session] = []
        self._interrupts = 0
        self._stopping: asyncio.Event | None = None
        self._offsets_s = [0.0] * len(instances)  # each server's clock minus the client's

    # ----------------------------------------------------------------------- public

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

    def _backend(self, session: Session) -> Any:
        return self.instances[self.record.sessions[session.id].instance].backend

    # ---------------------------------------------------------------------- signals

    def _on_signal(self, sig: signal.Signals) -> None:
        self._interrupts += 1
        if self._interrupts >= 2:  # a second one: tell the server, then leave at once
            for session in self.sessions:
                self._backend(session).cancel_now(session)
            os._exit(128 + sig)
        self.record.stopped_by = sig.name
        what = "by the user (Ctrl-C)" if sig == signal.SIGINT else f"by {sig.name}"
        self._fail("interrupted", f"interrupted {what}")

    def _fail(self, status: str, error: str) -> None:
        if self.record.status == "complete":
            self.record.status, self.record.error = status, error
        if self._stopping is not None:
            self._stopping.set()

    async def _cancel_all(self) -> None:
        await asyncio.gather(*(self._backend(s).cancel(s) for s in self.sessions))

    # ------------------------------------------------------------------------ phases

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)
        sampler = Sampler(self.instances, self.record, self.sinks, self.checkpoint)
        self._sampler = sampler
        try:
            for instance in self.instances:
                self._snapshots.append(instance.backend.monitor("snapshots"))
                self._waits_monitors.append(instance.backend.monitor("waits"))
            await self._connect_all()
            if self._stopping.is_set():
                return
            error = external_script(self.config["EXTERNAL_SCRIPT"], "pre", self.script_env)
            if error:
                self.record.notes.append(error)
            sampler.start()
            watchdog = asyncio.create_task(self._watchdog(sampler))
            watchdog.add_done_callback(self._watchdog_done)
            try:
                await self._drive()
            except Exception as exc:  # keep what was measured; say what broke
                self._fail("failed", f"run aborted: {first_line(exc)}")
                await self._cancel_all()
            finally:
                watchdog.cancel()
        finally:
            await asyncio.gather(*(self._backend(s).close(s) for s in self.sessions))
            if sampler.ident is not None:  # started
                await asyncio.to_thread(sampler.finish, 30)
            self.record.notes.extend(sampler.errors)
            for monitor in (*self._snapshots, *self._waits_monitors):
                with contextlib.suppress(Exception):
                    monitor.close()
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)

    def _watchdog_done(self, task: asyncio.Task) -> None:
        """A crashed watchdog must not pass silently: the run could no longer end itself."""
        if not task.cancelled() and task.exception() is not None:
            self._fail("failed", f"watchdog crashed: {first_line(task.exception())}")

    def _dead_instances(self) -> list[RunInstance]:
        return [i for i in self.instances if i.server_alive is not None and not i.server_alive()]

    async def _watchdog(self, sampler: Sampler) -> None:
        """End the run within seconds when a server dies.

        Backends whose postmaster was killed do not notice while they loop, so a dead
        postmaster is detected here and the orphans are killed (private server); a monitor
        that lost its connection means the same for any server.
        """
        while not self._stopping.is_set():
            await asyncio.sleep(0.5)
            dead = self._dead_instances()
            watched = any(i.server_alive is not None for i in self.instances)
            if sampler.connection_lost and not dead and watched:
                await asyncio.sleep(0.2)  # a dying postmaster: say so rather than "lost"
                dead = self._dead_instances()
            if dead or sampler.connection_lost:
                which = f" ({dead[0].record.target})" if len(self.instances) > 1 and dead else ""
                self._fail(
                    "failed",
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

    async def _connect_all(self) -> None:
        started = time.monotonic()
        gate = asyncio.Semaphore(MAX_CONCURRENT_CONNECTS)
        schemas = session_schemas(self.config)
        placed = session_instances(len(schemas), len(self.instances))
        self.record.sessions = [
            SessionOutcome(i, s, k) for i, (s, k) in enumerate(zip(schemas, placed, strict=True))
        ]

        async def connect(outcome: SessionOutcome) -> Session:
            async with gate:
                backend = self.instances[outcome.instance].backend
                return await backend.open_session(outcome.id, outcome.schema)

        results = await asyncio.gather(
            *(connect(o) for o in self.record.sessions), return_exceptions=True
        )
        for outcome, result in zip(self.record.sessions, results, strict=True):
            if isinstance(result, BaseException):
                outcome.error = f"connect: {first_line(result)}"
            else:
                outcome.pid = result.pid
                self.sessions.append(result)
        self.record.connect_seconds = time.monotonic() - started
        failed = [o for o in self.record.sessions if o.error]
        if failed:
            self._fail(
                "failed",
                f"{len(failed)} of {len(results)} sessions could not connect: {failed[0].error}",
            )

    async def _db_snapshots(self, key: str) -> None:
        """Every instance's counters at once (db_before / db_after of its record)."""
        results = await asyncio.gather(
            *(asyncio.to_thread(m.snapshot) for m in self._snapshots), return_exceptions=True
        )
        for instance, result in zip(self.instances, results, strict=True):
            if isinstance(result, BaseException):
                if key == "db_before":
                    raise result
                # the server may be gone; keep what was measured
                self.record.notes.append(
                    f"no 'after' database snapshot{self._of(instance)}: {first_line(result)}"
                )
            else:
                setattr(instance.record, key, result)

    def _of(self, instance: RunInstance) -> str:
        return f" of {instance.record.target}" if len(self.instances) > 1 else ""

    async def _drive(self) -> None:
        """Warm-up phase, then the window phase, each started by a common barrier and cut
        into sampling intervals (one CALL per session per interval).

        Snapshots are taken only while no SLOBop is in flight, so the database counters
        (published when a CALL ends) and the device counters cover the same work: "before"
        once every warm-up CALL has returned (sessions then wait for the window barrier),
        "after" once every window CALL has returned. The window is measured from its barrier
        to that moment: RUN_TIME plus the tail of the ops in flight when it expired. With
        several instances the barriers, the window and the snapshots are common to all.
        """
        config, record = self.config, self.record
        warmup, loops = float(config["WARMUP"]), int(config["WORK_LOOP"])
        step = float(config["SAMPLE_INTERVAL"])
        record.warmup_seconds = warmup
        await self._read_clocks("clock_warmup" if warmup else "clock")
        record.start_at = self._barrier()
        record.requested_seconds = None if loops else float(config["RUN_TIME"])
        seeds = {s.id: session_seed(config["SEED"], s.id) for s in self.sessions}
        carry: dict[int, dict[str, Any]] = {}  # what each session's next CALL continues from
        if warmup:
            schedule = Schedule(record.start_at, record.start_at + warmup, step)
            self._sampler.phase("warmup", schedule)
            book = await self._phase("warmup", schedule, 0, seeds, carry)
            if self._stopping.is_set():
                return
            self._check_rate()
            await self._db_snapshots("db_before")
            book.close_ready(through=book.started, attach=self._before_snapshots())
            await self._read_clocks("clock")
            window_start = self._barrier()
        else:
            await self._db_snapshots("db_before")
            window_start = record.start_at
        record.window_start = window_start
        planned_end = None if loops else window_start + float(config["RUN_TIME"])
        record.window_end = planned_end  # the samplers' notion of "inside the window"
        waits = [
            WaitSampler(
                i.backend,
                m,
                i.record,
                window_start + offset,
                None if planned_end is None else planned_end + offset,
                i.wait_sampling,
            )
            for i, m, offset in zip(
                self.instances, self._waits_monitors, self._offsets_s, strict=True
            )
        ]
        for sampler in waits:
            sampler.start()
        schedule = Schedule(window_start, planned_end, step)
        window = asyncio.ensure_future(self._phase("window", schedule, loops, seeds, carry))
        await self._sleep_until(window_start)
        self._host_snapshots("host_before")
        self._sampler.phase("window", schedule, *self._before_snapshots().values())
        await self._wait_any(asyncio.shield(window))
        if self._stopping.is_set():
            stopped_at = time.time()
            # A CALL whose request left after the first cancel (a session still starting,
            # a CALL sent from a worker thread) is not hit by it: cancel again.
            for _ in range(CANCEL_ROUNDS):
                await self._cancel_all()
                try:
                    await asyncio.wait_for(asyncio.shield(window), timeout=CANCEL_WAIT_S)
                    break
                except TimeoutError:
                    continue
            record.window_end = min(stopped_at, planned_end or stopped_at)
        else:
            record.window_end = time.time()
        self._host_snapshots("host_after")
        # They stop by themselves once the window's CALLs have returned (within 1/hz).
        for sampler in waits:
            await asyncio.to_thread(sampler.finish, 2.0)
            if sampler.error:
                record.notes.append(sampler.error + self._of(self.instances[waits.index(sampler)]))
        ends = [o.window[LOOP_RESULT.ended_epoch.key] for o in record.sessions if o.window]
        record.last_op_end = max(ends) if ends else None
        record.planned_end = planned_end
        await self._db_snapshots("db_after")
        if not self._stopping.is_set() and window.done() and not window.exception():
            book = window.result()  # its last interval ends with it: the "after" snapshots
            book.close_ready(through=book.started, attach=self._after_snapshots())
        error = external_script(config["EXTERNAL_SCRIPT"], "post", self.script_env)
        if error:
            record.notes.append(error)

    def _check_rate(self) -> None:
        """Too few sessions for RATE at the warm-up's measured service time: said before
        the window opens (model/rate.py, Little's law)."""
        warmups = [o.warmup or {} for o in self.record.sessions]
        warning, service_us = littles_law_warning(
            float(self.config["RATE"]),
            len(self.record.sessions),
            sum(float(w.get(LOOP_RESULT.busy_us.key) or 0) for w in warmups),
            sum(int(w.get(LOOP_RESULT.ops.key) or 0) for w in warmups),
        )
        self.record.warmup_service_us = service_us
        if warning:
            self.record.early_warnings.append(warning)
            self.notice(f"warning: {warning}")

    def _before_snapshots(self) -> dict[str, Any]:
        """The counters the window starts from, for the sampler (db per instance, hosts)."""
        return {
            "db": [i.record.db_before for i in self.instances],
            "hosts": self._by_host("host_before"),
        }

    def _after_snapshots(self) -> dict[str, Any]:
        return {
            "db": [i.record.db_after for i in self.instances],
            "hosts": self._by_host("host_after"),
            "end": self.record.window_end,
        }

    def _by_host(self, key: str) -> dict[str, Any] | None:
        """Each distinct host's snapshot (its first instance's); None if one is missing."""
        hosts = {}
        for instance in self.instances:
            snap = getattr(instance.record, key)
            hosts.setdefault(instance.host_key, snap)
        return None if any(v is None for v in hosts.values()) else hosts

    def _host_snapshots(self, key: str) -> None:
        for instance, monitor in zip(self.instances, self._snapshots, strict=True):
            setattr(instance.record, key, self._host_snapshot(instance, monitor))

    def _host_snapshot(
        self, instance: RunInstance, monitor: Monitor
    ) -> host_snapshot.HostSnapshot | None:
        """This host's /proc, or the server host's through the snapshot monitor (whose queries
        run only between the phases, never at the same time as this)."""
        if not instance.host_via_database:
            return host_snapshot.take_snapshot(instance.devices, instance.server_pid)
        try:
            return host_snapshot.read_snapshot(monitor.read_file, instance.devices)
        except Exception as exc:  # the server may be gone; the figures are then null
            self.record.notes.append(
                f"no host snapshot through the database{self._of(instance)}: {first_line(exc)}"
            )
            return None

    async def _read_clocks(self, key: str) -> None:
        """Each server's clock offset, measured just before a barrier (runner/clocks.py):
        the snapshot monitors are idle then; a few short statements, no I/O, no commit."""
        readings = await asyncio.to_thread(
            lambda: [clocks.measure(m.clock_epoch) for m in self._snapshots]
        )
        for k, (instance, reading) in enumerate(zip(self.instances, readings, strict=True)):
            setattr(instance.record, key, reading)
            self._offsets_s[k] = reading.offset_s

    def _barrier(self) -> float:
        """An instant far enough ahead for every session's CALL to arrive before it."""
        return time.time() + BARRIER_LEAD_S + BARRIER_PER_SESSION_S * len(self.sessions)

    async def _phase(
        self,
        name: str,
        schedule: Schedule,
        loops: int,
        seeds: dict[int, float],
        carry: dict[int, dict[str, Any]],
    ) -> IntervalBook:
        """Each session runs CALL after CALL, one per interval, until the phase's end (or
        its WORK_LOOP ops); the first failure stops the run. Intervals every session has
        covered go to the sampler as they close; the phase's last one is closed by the
        caller, with the snapshots that end the phase."""
        sampler = self._sampler
        book = IntervalBook(
            name,
            schedule,
            [s.id for s in self.sessions],
            lambda interval, attach: sampler.close(interval, **attach),
        )
        last = None if schedule.end is None else schedule.last_index()
        for state in carry.values():  # a RATE schedule starts again at each phase's barrier
            state.pop(LOOP_PARAMS.next_start.key, None)

        async def one(session: Session) -> None:
            outcome = self.record.sessions[session.id]
            instance = self.instances[outcome.instance]
            backend = instance.backend
            left = loops
            previous_end = None  # the end of this session's last CALL of the phase
            try:
                while not self._stopping.is_set():  # stopped: start no further CALL
                    index, until = book.starting(session.id, time.time())
                    # The intervals before it may close now: with one session nobody else
                    # starts a later one, and waiting for this CALL's return would read the
                    # counters one interval late (its work in the previous row).
                    book.close_ready()
                    conf = loop_conf(
                        self.config,
                        record=name == "window",
                        start_epoch=schedule.start,
                        until_epoch=until,
                        loops=left,
                        seed=seeds.pop(session.id, None),
                        session_id=session.id,
                        rows_per_mb=instance.rows_per_mb,
                    )
                    conf.update(carry.get(session.id, {}))
                    conf.update(instance.guard)
                    offset = self._offsets_s[outcome.instance]
                    conf = clocks.to_server(conf, offset)
                    result = clocks.to_client(await backend.call(session, conf), offset)
                    carry[session.id] = result.get(LOOP_RESULT.next.key) or {}
                    book.returned(session.id, outcome.instance, index, result)
                    setattr(outcome, name, merge_results(getattr(outcome, name), result))
                    if name == "window":  # the loop's own transactions (released snapshots)
                        instance.record.own_commits += int(
                            result.get(LOOP_RESULT.own_commits.key) or 0
                        )
                        outcome.add_call(result, previous_end)
                        previous_end = result.get(LOOP_RESULT.ended_epoch.key)
                    book.close_ready()
                    if loops:
                        left -= int(result.get(LOOP_RESULT.ops.key) or 0)
                        if left <= 0:
                            break
                    elif index >= (last or 0):
                        break
            except Exception as exc:
                outcome.error = first_line(exc)
                if not self._stopping.is_set():
                    self._fail(
                        "failed", f"session {session.id} ({session.schema}): {outcome.error}"
                    )
            finally:  # also after a cancel: the interrupted window's counts are published
                book.finished(session.id)
                if not self._stopping.is_set():
                    book.close_ready()  # what waited for this session alone
                if await backend.publish_stats(session) and name == "window":
                    instance.record.own_commits += 1
                    book.own_commit(outcome.instance)

        await asyncio.gather(*(one(s) for s in self.sessions))
        return book

    async def _sleep_until(self, epoch: float) -> None:
        delay = epoch - time.time()
        if delay > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)

    async def _wait_any(self, awaitable: Any) -> None:
        """Wait for `awaitable` or for the run to be stopped, whichever comes first."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
