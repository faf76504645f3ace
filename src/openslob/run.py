"""The run lifecycle: connect → barrier → warm-up → window → stop → collect.

Timeline of one run (all sessions share it):

    connect all sessions in parallel
    start_at        every session's first op (a clock barrier inside the procedure)
    window_start    = start_at + WARMUP: warm-up CALLs end; host "before" snapshot here;
                    DB "before" snapshot once every warm-up CALL has returned (their I/O is
                    flushed by then, the window's is not yet)
    window_end      = window_start + RUN_TIME: sessions start no new op; host "after"
                    snapshot here; DB "after" once every window CALL has returned
With WORK_LOOP > 0 the window ends when the last session has done its loops.

Interrupts: the first SIGINT cancels every session's CALL and saves what was measured as
status "interrupted"; a second one sends cancel requests and exits at once. A session error
or a dead server ends the run as "failed". No backend of the run outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from openslob import host
from openslob.engines.postgres.runner import Monitor, PostgresRunBackend, WorkSession
from openslob.options import Config

MAX_CONCURRENT_CONNECTS = 64
WAIT_SAMPLE_HZ = 10
BARRIER_LEAD_S = 0.2
BARRIER_PER_SESSION_S = 0.004
EXTERNAL_SCRIPT_TIMEOUT_S = 300

ProgressFn = Callable[[dict[str, Any]], None]


@dataclass
class SessionOutcome:
    id: int
    schema: str
    pid: int | None = None
    warmup: dict[str, Any] | None = None
    window: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class RunRecord:
    """Everything measured; results.py turns it into run.json."""

    status: str = "complete"
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
    db_before: dict[str, Any] | None = None
    db_after: dict[str, Any] | None = None
    host_before: host.HostSnapshot | None = None
    host_after: host.HostSnapshot | None = None
    waits: Counter = field(default_factory=Counter)
    wait_samples: int = 0
    timeseries: list[dict[str, Any]] = field(default_factory=list)
    leftover_backends: int = 0
    stats_flush_commits: int = 0  # our own transactions inside the window (publish_stats)
    notes: list[str] = field(default_factory=list)


def session_schemas(config: Config) -> list[str]:
    """Schema of each session: SLOB's round robin over user1..userN."""
    total = config["SESSIONS"] or config["SCHEMAS"] * config["THREADS_PER_SCHEMA"]
    return [f"user{(i % config['SCHEMAS']) + 1}" for i in range(total)]


def session_seed(seed: int, session_id: int) -> float:
    """setseed() takes [-1, 1]; spread sessions so their key streams differ but repeat."""
    mixed = (seed * 2_654_435_761 + (session_id + 1) * 40_503) % 1_000_003
    return mixed / 1_000_003 * 2 - 1


def loop_conf(
    config: Config,
    *,
    record: bool,
    start_epoch: float,
    until_epoch: float | None,
    loops: int,
    seed: float | None,
) -> dict[str, Any]:
    scale, work_unit = config["SCALE"], config["WORK_UNIT"]
    rows_per_mb = (1 << 20) // 8192
    first = config["HOTSPOT_OFFSET_MB"] * rows_per_mb + work_unit
    last = min(first + config["HOTSPOT_MB"] * rows_per_mb - 1, scale)
    conf = {
        "update_pct": config["UPDATE_PCT"],
        "scan_pct": config["SCAN_PCT"],
        "work_unit": work_unit,
        "scale": scale,
        "heavy": config["REDO_STRESS"] == "HEAVY",
        "loops": loops,
        "until_epoch": until_epoch,
        "start_epoch": start_epoch,
        "record": record,
        "hot_schema_frequency": config["HOT_SCHEMA_FREQUENCY"],
        "hotspot_frequency": config["HOTSPOT_FREQUENCY"] if config["DO_HOTSPOT"] else 0,
        "hotspot_first_key": first,
        "hotspot_last_key": max(first, last),
        "think_frequency": config["THINK_TM_FREQUENCY"],
        "think_min": config["THINK_TM_MIN"],
        "think_max": config["THINK_TM_MAX"],
    }
    if seed is not None:
        conf["seed"] = seed
    return conf


def external_script(script: str, phase: str, env: dict[str, str]) -> str | None:
    """SLOB's EXTERNAL_SCRIPT hook: `script pre|post|end`. Returns an error text or None."""
    if not script:
        return None
    try:
        proc = subprocess.run(
            [script, phase],
            env={**os.environ, **env},
            check=False,
            timeout=EXTERNAL_SCRIPT_TIMEOUT_S,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"EXTERNAL_SCRIPT {phase}: {exc}"
    if proc.returncode != 0:
        return f"EXTERNAL_SCRIPT {phase} exited {proc.returncode}: {proc.stderr.strip()[-200:]}"
    return None


class Sampler(threading.Thread):
    """The time series, one row every SAMPLE_INTERVAL (wait samples: WaitSampler)."""

    def __init__(
        self,
        backend: PostgresRunBackend,
        record: RunRecord,
        devices: list[str],
        interval: float,
        progress: ProgressFn | None,
        host_via_database: bool = False,
    ) -> None:
        super().__init__(name="slob-sampler", daemon=True)
        self.backend, self.record = backend, record
        self.devices = devices
        self.host_via_database = host_via_database
        self.interval, self.progress = interval, progress
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.connection_lost = False

    def run(self) -> None:
        live: Monitor | None = None
        try:
            live = self.backend.monitor("sampler")
            self._loop(live)
        except Exception as exc:  # the run goes on without samples; say so in the results
            self.errors.append(f"sampler stopped: {_first_line(exc)}")
            self.connection_lost = isinstance(exc, psycopg.OperationalError)
        finally:
            if live is not None:
                with contextlib.suppress(Exception):
                    live.close()

    def _loop(self, live: Monitor) -> None:
        # No server CPU here: the time series does not show it, and summing it walks /proc.
        def host_snapshot() -> host.HostSnapshot:
            if self.host_via_database:
                return host.read_snapshot(live.read_file, self.devices)
            return host.take_snapshot(self.devices)

        prev_host = host_snapshot()
        prev_live = live.loop_counters()
        next_tick = time.monotonic() + self.interval
        while not self.stop.wait(max(0.0, next_tick - time.monotonic())):
            next_tick += self.interval
            cur_host = host_snapshot()
            cur_live = live.loop_counters()
            row = timeseries_row(prev_host, cur_host, prev_live, cur_live, self.record)
            self.record.timeseries.append(row)
            if self.progress:
                self.progress(row)
            prev_host, prev_live = cur_host, cur_live


class WaitSampler(threading.Thread):
    """ASH-like wait samples of the window at WAIT_SAMPLE_HZ, taken inside the database
    (one call, see workload._ASH_DDL), so the client spends no CPU on them."""

    def __init__(
        self,
        backend: PostgresRunBackend,
        monitor: Monitor,
        record: RunRecord,
        start: float,
        end: float | None,
    ) -> None:
        super().__init__(name="slob-waits", daemon=True)
        self.backend, self.monitor, self.record = backend, monitor, record
        self.start_epoch, self.end_epoch = start, end
        self.error: str | None = None

    def run(self) -> None:
        try:
            samples, waits = self.monitor.sample_waits(
                self.backend.application_name, self.start_epoch, self.end_epoch, WAIT_SAMPLE_HZ
            )
            self.record.wait_samples = samples
            self.record.waits.update(waits)
        except Exception as exc:  # the run's other figures stand; say why waits are missing
            self.error = f"no wait samples: {_first_line(exc)}"

    def finish(self, timeout: float) -> None:
        """Wait for the samples; a sampler still running after `timeout` is cancelled.

        The monitor stays open until the run's "after" snapshot is taken: its backend adds
        the call's active time to pg_stat_database only at its next flush (its exit), so
        the sampler never counts in the window's DB time."""
        self.join(timeout)
        if self.is_alive():
            self.monitor.cancel()
            self.join(5)
        if self.error:
            self.record.notes.append(self.error)


def timeseries_row(
    prev_host: host.HostSnapshot,
    cur_host: host.HostSnapshot,
    prev_live: dict | None,
    cur_live: dict | None,
    record: RunRecord,
) -> dict[str, Any]:
    seconds = cur_host.monotonic - prev_host.monotonic
    dev = host.host_delta(prev_host, cur_host)
    now = time.time()
    phase = "warmup"
    if record.window_start is not None and now >= record.window_start:
        phase = "window" if record.window_end is None or now <= record.window_end else "tail"
    row: dict[str, Any] = {
        "time": cur_host.wall_time,
        "elapsed_s": round(now - (record.start_at or now), 3),
        "phase": phase,
        "seconds": round(seconds, 3),
    }
    row.update({k: dev.get(k) for k in host.DEVICE_CPU_METRICS})
    if prev_live is None or cur_live is None or seconds <= 0:
        row.update(
            dict.fromkeys(
                (
                    "slobops_per_s",
                    "selects_per_s",
                    "updates_per_s",
                    "scans_per_s",
                    "db_reads_per_s",
                    "db_read_latency_us",
                    "lio_per_s",
                    "wal_mb_per_s",
                    "commits_per_s",
                )
            )
        )
        return row
    d = {k: cur_live[k] - prev_live[k] for k in cur_live}
    ops = d["calls_select"] + d["calls_update"] + d["calls_scan"]
    row.update(
        {
            "slobops_per_s": ops / seconds,
            "selects_per_s": d["calls_select"] / seconds,
            "updates_per_s": d["calls_update"] / seconds,
            "scans_per_s": d["calls_scan"] / seconds,
            "db_reads_per_s": d["blks_read"] / seconds,
            "db_read_latency_us": d["read_time_ms"] * 1000 / d["blks_read"]
            if d["blks_read"] and record_io_timing(record)
            else None,
            "lio_per_s": (d["blks_hit"] + d["blks_read"]) / seconds,
            "wal_mb_per_s": d["wal_bytes"] / (1 << 20) / seconds,
            # one COMMIT per update op, done inside the loop
            "commits_per_s": d["calls_update"] / seconds,
        }
    )
    return row


def record_io_timing(record: RunRecord) -> bool:
    return "track_io_timing=off" not in record.notes


class RunController:
    """Drives one run against one PostgreSQL target."""

    def __init__(
        self,
        config: Config,
        backend: PostgresRunBackend,
        *,
        devices: list[str],
        server_pid: int | None,
        progress: ProgressFn | None = None,
        script_env: dict[str, str] | None = None,
        server_alive: Callable[[], bool] | None = None,
        on_server_death: Callable[[], None] | None = None,
        host_via_database: bool = False,
    ) -> None:
        self.config = config
        self.host_via_database = host_via_database
        self._snapshots: Monitor | None = None
        self._waits_monitor: Monitor
        self.server_alive = server_alive
        self.on_server_death = on_server_death
        self.backend = backend
        self.devices = devices
        self.server_pid = server_pid
        self.progress = progress
        self.script_env = script_env or {}
        self.record = RunRecord()
        self.sessions: list[WorkSession] = []
        self._interrupts = 0
        self._stopping: asyncio.Event | None = None

    # ----------------------------------------------------------------------- public

    def run(self) -> RunRecord:
        previous = signal.getsignal(signal.SIGINT)
        try:
            asyncio.run(self._main())
        finally:
            signal.signal(signal.SIGINT, previous)
            self.record.leftover_backends = self.backend.terminate_leftovers()
        return self.record

    # ---------------------------------------------------------------------- signals

    def _on_sigint(self) -> None:
        self._interrupts += 1
        if self._interrupts >= 2:  # second Ctrl-C: tell the server, then leave at once
            for session in self.sessions:
                self.backend.cancel_now(session)
            os._exit(130)
        self._fail("interrupted", "interrupted by the user (Ctrl-C)")

    def _fail(self, status: str, error: str) -> None:
        if self.record.status == "complete":
            self.record.status, self.record.error = status, error
        if self._stopping is not None:
            self._stopping.set()

    # ------------------------------------------------------------------------ phases

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        loop.add_signal_handler(signal.SIGINT, self._on_sigint)
        snapshots = self._snapshots = self.backend.monitor("snapshots")
        self._waits_monitor = self.backend.monitor("waits")
        sampler = Sampler(
            self.backend,
            self.record,
            self.devices,
            self.config["SAMPLE_INTERVAL"],
            self.progress,
            self.host_via_database,
        )
        try:
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
                await self._drive(snapshots)
            except Exception as exc:  # keep what was measured; say what broke
                self._fail("failed", f"run aborted: {_first_line(exc)}")
                await asyncio.gather(*(self.backend.cancel(s) for s in self.sessions))
            finally:
                watchdog.cancel()
        finally:
            sampler.stop.set()
            await asyncio.gather(*(self.backend.close(s) for s in self.sessions))
            await asyncio.to_thread(sampler.join, 10)
            self.record.notes.extend(sampler.errors)
            for monitor in (snapshots, self._waits_monitor):
                with contextlib.suppress(Exception):
                    monitor.close()
            loop.remove_signal_handler(signal.SIGINT)

    def _watchdog_done(self, task: asyncio.Task) -> None:
        """A crashed watchdog must not pass silently: the run could no longer end itself."""
        if not task.cancelled() and task.exception() is not None:
            self._fail("failed", f"watchdog crashed: {_first_line(task.exception())}")

    async def _watchdog(self, sampler: Sampler) -> None:
        """End the run within seconds when the server dies.

        Backends whose postmaster was killed do not notice while they loop, so a dead
        postmaster is detected here and the orphans are killed (private server); a monitor
        that lost its connection means the same for any server.
        """
        while not self._stopping.is_set():
            await asyncio.sleep(0.5)
            dead = self.server_alive is not None and not self.server_alive()
            if sampler.connection_lost and not dead and self.server_alive is not None:
                await asyncio.sleep(0.2)  # a dying postmaster: say so rather than "lost"
                dead = not self.server_alive()
            if dead or sampler.connection_lost:
                self._fail(
                    "failed",
                    "the database server died during the run"
                    if dead
                    else f"lost the monitoring connection: {sampler.errors[-1]}",
                )
                if self.on_server_death is not None:
                    await asyncio.to_thread(self.on_server_death)
                return

    async def _connect_all(self) -> None:
        started = time.monotonic()
        gate = asyncio.Semaphore(MAX_CONCURRENT_CONNECTS)
        schemas = session_schemas(self.config)
        self.record.sessions = [SessionOutcome(i, s) for i, s in enumerate(schemas)]

        async def connect(outcome: SessionOutcome) -> WorkSession:
            async with gate:
                return await self.backend.open_session(outcome.id, outcome.schema)

        results = await asyncio.gather(
            *(connect(o) for o in self.record.sessions), return_exceptions=True
        )
        for outcome, result in zip(self.record.sessions, results, strict=True):
            if isinstance(result, BaseException):
                outcome.error = f"connect: {_first_line(result)}"
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

    async def _drive(self, snapshots: Monitor) -> None:
        """Warm-up phase, then the window phase, each started by a common barrier.

        Snapshots are taken only while no SLOBop is in flight, so the database counters
        (published when a CALL ends) and the device counters cover the same work: "before"
        once every warm-up CALL has returned (sessions then wait for the window barrier),
        "after" once every window CALL has returned. The window is measured from its barrier
        to that moment: RUN_TIME plus the tail of the ops in flight when it expired.
        """
        config, record = self.config, self.record
        warmup, loops = float(config["WARMUP"]), int(config["WORK_LOOP"])
        record.warmup_seconds = warmup
        record.start_at = self._barrier()
        record.requested_seconds = None if loops else float(config["RUN_TIME"])
        seeds = {s.id: session_seed(config["SEED"], s.id) for s in self.sessions}
        if warmup:
            warm_end = record.start_at + warmup
            await self._phase(
                "warmup",
                lambda s: loop_conf(
                    config,
                    record=False,
                    start_epoch=record.start_at,
                    until_epoch=warm_end,
                    loops=0,
                    seed=seeds.pop(s.id),
                ),
            )
            if self._stopping.is_set():
                return
            window_start = self._barrier()
        else:
            window_start = record.start_at
        record.db_before = await asyncio.to_thread(snapshots.snapshot)
        record.window_start = window_start
        planned_end = None if loops else window_start + float(config["RUN_TIME"])
        record.window_end = planned_end  # the samplers' notion of "inside the window"
        waits = WaitSampler(self.backend, self._waits_monitor, record, window_start, planned_end)
        waits.start()
        window = asyncio.ensure_future(
            self._phase(
                "window",
                lambda s: loop_conf(
                    config,
                    record=True,
                    start_epoch=window_start,
                    until_epoch=planned_end,
                    loops=loops,
                    seed=seeds.pop(s.id, None),
                ),
            )
        )
        await self._sleep_until(window_start)
        record.host_before = self._host_snapshot()
        await self._wait_any(asyncio.shield(window))
        if self._stopping.is_set():
            stopped_at = time.time()
            await asyncio.gather(*(self.backend.cancel(s) for s in self.sessions))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(window), timeout=10)
            record.window_end = min(stopped_at, planned_end or stopped_at)
        else:
            record.window_end = time.time()
        record.host_after = self._host_snapshot()
        # It stops by itself once the window's CALLs have returned (within 1/WAIT_SAMPLE_HZ).
        await asyncio.to_thread(waits.finish, 2.0)
        ends = [o.window["ended_epoch"] for o in record.sessions if o.window]
        record.last_op_end = max(ends) if ends else None
        record.planned_end = planned_end
        try:
            record.db_after = await asyncio.to_thread(snapshots.snapshot)
        except Exception as exc:  # the server may be gone; keep what was measured
            record.notes.append(f"no 'after' database snapshot: {_first_line(exc)}")
        error = external_script(config["EXTERNAL_SCRIPT"], "post", self.script_env)
        if error:
            record.notes.append(error)

    def _host_snapshot(self) -> host.HostSnapshot | None:
        """This host's /proc, or the server host's through the snapshot monitor (whose queries
        run only between the phases, never at the same time as this)."""
        if not self.host_via_database:
            return host.take_snapshot(self.devices, self.server_pid)
        try:
            assert self._snapshots is not None
            return host.read_snapshot(self._snapshots.read_file, self.devices)
        except Exception as exc:  # the server may be gone; the figures are then null
            self.record.notes.append(f"no host snapshot through the database: {_first_line(exc)}")
            return None

    def _barrier(self) -> float:
        """An instant far enough ahead for every session's CALL to arrive before it."""
        return time.time() + BARRIER_LEAD_S + BARRIER_PER_SESSION_S * len(self.sessions)

    async def _phase(self, name: str, conf_for: Callable[[WorkSession], dict[str, Any]]) -> None:
        """One CALL per session; the first failure stops the run."""

        async def one(session: WorkSession) -> None:
            outcome = self.record.sessions[session.id]
            try:
                result = await self.backend.call(session, conf_for(session))
            except Exception as exc:
                outcome.error = _first_line(exc)
                if not self._stopping.is_set():
                    self._fail(
                        "failed", f"session {session.id} ({session.schema}): {outcome.error}"
                    )
                return
            finally:  # also after a cancel: the interrupted window's counts are published
                if await self.backend.publish_stats(session) and name == "window":
                    self.record.stats_flush_commits += 1
            setattr(outcome, name, result)

        await asyncio.gather(*(one(s) for s in self.sessions))

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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def data_directory_is_local(path: str | None) -> bool:
    return bool(path) and Path(path).exists()
