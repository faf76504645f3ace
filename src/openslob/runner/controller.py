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
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from openslob.config.options import Config
from openslob.engines.postgres.runner import Monitor, PostgresRunBackend, WorkSession
from openslob.host import snapshot as host_snapshot
from openslob.model import combine
from openslob.model.horizon import HorizonWatch

MAX_CONCURRENT_CONNECTS = 64
WAIT_SAMPLE_HZ = 10
BARRIER_LEAD_S = 0.2
BARRIER_PER_SESSION_S = 0.004
EXTERNAL_SCRIPT_TIMEOUT_S = 300
CANCEL_ROUNDS, CANCEL_WAIT_S = 5, 2.0  # how a stopped window's CALLs are ended
# A loop's read-only transaction ends once it is this old (seconds), so that no session
# holds back the xmin horizon for longer (PostgreSQL's loop; workload.py says why).
SNAPSHOT_RELEASE_S = 0.010
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

ProgressFn = Callable[[dict[str, Any]], None]


@dataclass
class SessionOutcome:
    id: int
    schema: str
    instance: int = 0  # index into RunRecord.instances
    pid: int | None = None
    warmup: dict[str, Any] | None = None
    window: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class InstanceRecord:
    """What one database instance of the run measured (its own counters and host)."""

    target: str  # printable: no password
    db_before: dict[str, Any] | None = None
    db_after: dict[str, Any] | None = None
    host_before: host_snapshot.HostSnapshot | None = None
    host_after: host_snapshot.HostSnapshot | None = None
    waits: Counter = field(default_factory=Counter)
    wait_samples: int = 0
    leftover_backends: int = 0
    # our own transactions inside the window: the stats flush after each CALL
    # (publish_stats) and the wait sampler's commits
    own_commits: int = 0
    horizon: HorizonWatch = field(default_factory=HorizonWatch)


@dataclass
class RunInstance:
    """One database instance the run drives: how to reach it and how to watch its host.

    `host_key` names the host and devices behind the instance: instances with the same key
    share one device, whose counters then count once in the run's totals."""

    backend: Any  # PostgresRunBackend or MariaDBRunBackend (engines.registry)
    record: InstanceRecord
    devices: list[str]
    host_key: str
    server_pid: int | None = None
    server_alive: Callable[[], bool] | None = None
    on_server_death: Callable[[], None] | None = None
    host_via_database: bool = False
    guard: dict[str, Any] = field(default_factory=dict)  # what its loops watch (DatasetLock)


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
    instances: list[InstanceRecord] = field(default_factory=list)
    timeseries: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stopped_by: str | None = None  # "SIGINT" | "SIGTERM" when a signal ended the run

    def sessions_of(self, instance: int) -> list[SessionOutcome]:
        return [o for o in self.sessions if o.instance == instance]


def session_schemas(config: Config) -> list[str]:
    """Schema of each session: SLOB's round robin over user1..userN."""
    total = config["SESSIONS"] or config["SCHEMAS"] * config["THREADS_PER_SCHEMA"]
    return [f"user{(i % config['SCHEMAS']) + 1}" for i in range(total)]


def session_instances(sessions: int, instances: int) -> list[int]:
    """Instance of each session: SLOB's round robin over SQLNET_SERVICE_BASE1..MAX."""
    return [i % instances for i in range(sessions)]


def instance_schemas(config: Config, instances: int) -> list[list[str]]:
    """The schemas the sessions of each instance use."""
    schemas = session_schemas(config)
    placed = session_instances(len(schemas), instances)
    return [
        sorted({s for s, i in zip(schemas, placed, strict=True) if i == k})
        for k in range(instances)
    ]


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
        "release_s": SNAPSHOT_RELEASE_S,
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
            self.errors.append(f"sampler stopped: {_first_line(exc)}")
            self.connection_lost = isinstance(exc, psycopg.OperationalError)
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
        backend: PostgresRunBackend,
        monitor: Monitor,
        record: InstanceRecord,
        start: float,
        end: float | None,
    ) -> None:
        super().__init__(name="slob-waits", daemon=True)
        self.backend, self.monitor, self.record = backend, monitor, record
        self.start_epoch, self.end_epoch = start, end
        self.error: str | None = None

    def run(self) -> None:
        if not hasattr(self.monitor, "sample_waits"):
            self.error = "no wait samples: this engine has no wait sampler yet"
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
                f"no wait samples: {_first_line(exc)}; the window's commits include the "
                f"sampler's own (up to {WAIT_SAMPLE_HZ}/s)"
            )

    def finish(self, timeout: float) -> None:
        """Wait for the samples; a sampler still running after `timeout` is cancelled.

        The monitor stays open until the run's "after" snapshot is taken: its backend adds
        the call's active time to pg_stat_database only at its next flush (its exit), so
        the sampler never counts in the window's DB time."""
        self.join(timeout)
        if self.is_alive():
            self.monitor.cancel()
            self.join(5)


LIVE_FIGURES = (
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
    row.update({k: dev.get(k) for k in host_snapshot.DEVICE_CPU_METRICS})
    if any(v is None for v in (*prev_lives, *cur_lives)) or seconds <= 0:
        row.update(dict.fromkeys(LIVE_FIGURES))
        return row
    # The counters add across instances: rates and read latency of the sum are the totals.
    d: Counter = Counter()
    for prev, cur in zip(prev_lives, cur_lives, strict=True):
        d.update({k: cur[k] - prev[k] for k in cur})
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
    """Drives one run against one or more PostgreSQL instances with one common window."""

    def __init__(
        self,
        config: Config,
        instances: list[RunInstance],
        *,
        progress: ProgressFn | None = None,
        script_env: dict[str, str] | None = None,
    ) -> None:
        self.config = config
        self.instances = instances
        self._snapshots: list[Monitor] = []
        self._waits_monitors: list[Monitor] = []
        self.progress = progress
        self.script_env = script_env or {}
        self.record = RunRecord(instances=[instance.record for instance in instances])
        self.sessions: list[WorkSession] = []
        self._interrupts = 0
        self._stopping: asyncio.Event | None = None

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
                instance.backend.shutdown()  # MariaDB's worker threads
        return self.record

    def _backend(self, session: WorkSession) -> Any:
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
        sampler = Sampler(
            self.instances, self.record, self.config["SAMPLE_INTERVAL"], self.progress
        )
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
                self._fail("failed", f"run aborted: {_first_line(exc)}")
                await self._cancel_all()
            finally:
                watchdog.cancel()
        finally:
            sampler.stop.set()
            await asyncio.gather(*(self._backend(s).close(s) for s in self.sessions))
            if sampler.ident is not None:  # started
                await asyncio.to_thread(sampler.join, 10)
            self.record.notes.extend(sampler.errors)
            for monitor in (*self._snapshots, *self._waits_monitors):
                with contextlib.suppress(Exception):
                    monitor.close()
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)

    def _watchdog_done(self, task: asyncio.Task) -> None:
        """A crashed watchdog must not pass silently: the run could no longer end itself."""
        if not task.cancelled() and task.exception() is not None:
            self._fail("failed", f"watchdog crashed: {_first_line(task.exception())}")

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

        async def connect(outcome: SessionOutcome) -> WorkSession:
            async with gate:
                backend = self.instances[outcome.instance].backend
                return await backend.open_session(outcome.id, outcome.schema)

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
                    f"no 'after' database snapshot{self._of(instance)}: {_first_line(result)}"
                )
            else:
                setattr(instance.record, key, result)

    def _of(self, instance: RunInstance) -> str:
        return f" of {instance.record.target}" if len(self.instances) > 1 else ""

    async def _drive(self) -> None:
        """Warm-up phase, then the window phase, each started by a common barrier.

        Snapshots are taken only while no SLOBop is in flight, so the database counters
        (published when a CALL ends) and the device counters cover the same work: "before"
        once every warm-up CALL has returned (sessions then wait for the window barrier),
        "after" once every window CALL has returned. The window is measured from its barrier
        to that moment: RUN_TIME plus the tail of the ops in flight when it expired. With
        several instances the barriers, the window and the snapshots are common to all.
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
        await self._db_snapshots("db_before")
        record.window_start = window_start
        planned_end = None if loops else window_start + float(config["RUN_TIME"])
        record.window_end = planned_end  # the samplers' notion of "inside the window"
        waits = [
            WaitSampler(i.backend, m, i.record, window_start, planned_end)
            for i, m in zip(self.instances, self._waits_monitors, strict=True)
        ]
        for sampler in waits:
            sampler.start()
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
        self._host_snapshots("host_before")
        await self._wait_any(asyncio.shield(window))
        if self._stopping.is_set():
            stopped_at = time.time()
            # A CALL whose request left after the first cancel (a session still starting,
            # MariaDB's CALLs leave from worker threads) is not hit by it: cancel again.
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
        ends = [o.window["ended_epoch"] for o in record.sessions if o.window]
        record.last_op_end = max(ends) if ends else None
        record.planned_end = planned_end
        await self._db_snapshots("db_after")
        error = external_script(config["EXTERNAL_SCRIPT"], "post", self.script_env)
        if error:
            record.notes.append(error)

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
                f"no host snapshot through the database{self._of(instance)}: {_first_line(exc)}"
            )
            return None

    def _barrier(self) -> float:
        """An instant far enough ahead for every session's CALL to arrive before it."""
        return time.time() + BARRIER_LEAD_S + BARRIER_PER_SESSION_S * len(self.sessions)

    async def _phase(self, name: str, conf_for: Callable[[WorkSession], dict[str, Any]]) -> None:
        """One CALL per session; the first failure stops the run."""

        async def one(session: WorkSession) -> None:
            outcome = self.record.sessions[session.id]
            backend = self.instances[outcome.instance].backend
            if self._stopping.is_set():  # stopped before this CALL left: do not start it
                return
            try:
                conf = {**conf_for(session), **self.instances[outcome.instance].guard}
                result = await backend.call(session, conf)
            except Exception as exc:
                outcome.error = _first_line(exc)
                if not self._stopping.is_set():
                    self._fail(
                        "failed", f"session {session.id} ({session.schema}): {outcome.error}"
                    )
                return
            finally:  # also after a cancel: the interrupted window's counts are published
                if await backend.publish_stats(session) and name == "window":
                    self.instances[outcome.instance].record.own_commits += 1
            setattr(outcome, name, result)
            if name == "window":  # the loop's own commits that release its snapshot
                record = self.instances[outcome.instance].record
                record.own_commits += int(result.get("released") or 0)

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
