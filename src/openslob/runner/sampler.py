"""The samplers of a run: the time series (one row per closed sampling interval, with the
cleanup horizon of each instance) and the ASH-like wait samples an engine takes inside the
database."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from openslob.engines.api import Monitor, RunBackend
from openslob.host import snapshot as host_snapshot
from openslob.host.ebpf import LayerSeries, interval_figures
from openslob.model.cliff import CliffWatch
from openslob.model.histogram import Histogram
from openslob.model.loop import HISTOGRAM_KEYS
from openslob.model.perinstance import instance_keys
from openslob.model.states import Phase, RunStatus
from openslob.results.record import InstanceRecord, RunRecord
from openslob.runner.intervals import Interval, Schedule, merge_into
from openslob.runner.record import RunInstance, first_line, watch
from openslob.runner.timeseries import InstanceView, build_row, figure_keys

WAIT_SAMPLE_HZ = 10  # the most wait samples a second
# A wait sample reads every backend's state, so its server CPU grows with the sessions (at 64
# sessions 10 Hz took ~2.9 ms/s of the server's CPU, 0.14 % of the 2-vCPU VM). The rate
# gives an instance about this many session samples a second, 1 to WAIT_SAMPLE_HZ samples
# a second (Oracle's ASH samples once a second): 10 Hz up to 16 sessions, 2.5 at 64, 1
# from 160.
WAIT_SESSION_SAMPLES_PER_S = 160.0


def wait_sample_hz(sessions: int) -> float:
    """The wait samples a second of an instance with `sessions` work sessions."""
    return min(float(WAIT_SAMPLE_HZ), max(1.0, WAIT_SESSION_SAMPLES_PER_S / max(sessions, 1)))


# How often the window so far is saved as a provisional run.json (a kill -9 keeps it), unless
# the checkpoint says otherwise (its `every_s`).
CHECKPOINT_EVERY_S = 10.0
# A checkpoint builds the whole run.json (16 ms of client CPU at 64 sessions, 31 ms at 256 on
# the 2-vCPU test VM): unless SLOB_CHECKPOINT_S sets the spacing, the next one waits until
# the last one's CPU is at most this share of one CPU (64 sessions: every ~16 s).
CHECKPOINT_CPU_SHARE = 0.001
SYNC_TIMEOUT_S = 2.0  # the longest a phase's end waits for the rows before its last
# What receives each row: the time series file, the progress line, the exporters. A sink
# may also have `begin(run)` (execute.begin_sinks: the run's name and engine, before the
# run) and `flush()` (after its last row).
Sink = Callable[[dict[str, Any], dict[str, Histogram]], None]
Snapshots = list[dict[str, Any] | None]
Hosts = dict[str, host_snapshot.HostSnapshot]


class Sampler(threading.Thread):
    """The time series: a row per interval the controller closes (runner/intervals.py).

    The controller says when a phase starts (its schedule, and the counters it starts
    from) and when each interval closes. Device and CPU counters are read at each boundary
    as it passes (a device's I/O goes on in real time); the database counters when the
    interval closes, once every session has returned its CALL up to that boundary (a
    database publishes a CALL's counters when it ends). When sessions answer every k-th
    boundary (RunInstance.batch > 1, runner/batches.py) an interval closes up to k
    intervals late, so the database counters are read earlier, once every session due to
    answer at its boundary has (IntervalBook.on_publish): PostgreSQL's then hold what those
    sessions published, each its last k intervals (a row's database figures are spread
    over k intervals; the window's total stays exact); InnoDB's are the interval's. The
    controller hands over the snapshots it takes itself at the ends of the window, so the
    intervals add up to it."""

    def __init__(
        self,
        instances: list[RunInstance],
        record: RunRecord,
        sinks: list[Sink] | None = None,
        checkpoint: Callable[[RunRecord], None] | None = None,
        layers: LayerSeries | None = None,
        cliff: CliffWatch | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(name="slob-sampler", daemon=True)
        self.instances, self.record = instances, record
        self.layers = layers  # the kernel's latency layers, when traced (host/ebpf.py)
        self.cliff, self.notice = cliff, notice
        self.sinks = list(sinks or [])
        self.checkpoint = checkpoint
        self.checkpoint_every_s = float(getattr(checkpoint, "every_s", CHECKPOINT_EVERY_S))
        self._checkpoint_adapts = bool(getattr(checkpoint, "adapts", False))
        self._last_checkpoint, self._checkpoint_gap_s = 0.0, self.checkpoint_every_s
        # what the window's closed intervals hold: per session, and our own commits
        self._closed_sessions: dict[int, dict[str, Any]] = {}
        # the closed intervals' results by session not yet in _closed_sessions: added up
        # when a checkpoint is written (the only reader), not at every row
        self._unsummed: list[dict[int, dict[str, Any]]] = []
        self._closed_instances: dict[int, dict[str, Any]] = {}
        self._closed_commits: dict[int, int] = {}
        self.views = [InstanceView(i.window, i.settings, i.host_key) for i in instances]
        self.keys = figure_keys([k for i in instances for k in i.engine_metrics])
        self.keys += instance_keys(len(instances))
        self.inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.errors: list[str] = []
        self.connection_lost = False
        self._monitors: list[Monitor] = []
        self._readers: dict[str, Callable[[], host_snapshot.HostSnapshot]] = {}
        self._schedule: Schedule | None = None
        self._phase = ""
        self._tick = 1  # the next boundary whose host counters are read
        self._at_boundary: dict[int, Hosts] = {}
        self._db_published: dict[int, Snapshots] = {}  # read at publish (batches), by index
        self._db_prev: Snapshots = []
        self._host_prev: Hosts = {}

    # -------------------------------------------------- called from the run's event loop

    def phase(
        self,
        name: str,
        schedule: Schedule,
        db: Snapshots | None = None,
        hosts: Hosts | None = None,
    ) -> None:
        """A phase starts; its first interval counts from `db`/`hosts` (read now if None)."""
        self.inbox.put(("phase", name, schedule, db, hosts))

    def close(
        self,
        interval: Interval,
        db: Snapshots | None = None,
        hosts: Hosts | None = None,
        end: float | None = None,
    ) -> None:
        """An interval is closed: its row, from `db`/`hosts` when given (the window's
        "after" snapshots), else from counters read now / at its boundary."""
        self.inbox.put(("close", interval, db, hosts, end))

    def publish(self, phase: str, index: int) -> None:
        """Every session due to answer at boundary `index` has (batches, runner/batches.py):
        the database counters are read now for that interval's row."""
        self.inbox.put(("publish", phase, index))

    def caught_up(self, timeout: float = SYNC_TIMEOUT_S) -> bool:
        """Wait until the thread has handled everything sent to it so far (False: it did
        not within `timeout`, or it has stopped). The phase-ending snapshots are taken
        after this: a row read late, after them, would end where the last row begins."""
        if not self.is_alive():
            return False
        done = threading.Event()
        self.inbox.put(("sync", done))
        return done.wait(timeout)

    def finish(self, timeout: float) -> None:
        self.inbox.put(("stop",))
        self.join(timeout)

    # ------------------------------------------------------------------- the thread

    def run(self) -> None:
        try:
            for instance in self.instances:
                self._monitors.append(instance.backend.monitor("sampler"))
                watch(instance, self._monitors[-1])
            self._readers = self._host_readers()
            self._loop()
        except Exception as exc:  # the run goes on without samples; say so in the results
            self.errors.append(f"sampler stopped: {first_line(exc)}")
            self.connection_lost = any(i.backend.connection_lost(exc) for i in self.instances)
        finally:
            for monitor in self._monitors:
                with contextlib.suppress(Exception):
                    monitor.close()
            for reader in self._readers.values():
                if isinstance(reader, host_snapshot.LocalHost):
                    with contextlib.suppress(Exception):
                        reader.close()

    def _host_readers(self) -> dict[str, Callable[[], host_snapshot.HostSnapshot]]:
        """One reader per distinct host (the first instance on it reads it). No server CPU:
        the time series does not show it, and summing it walks /proc. A local host's files
        stay open for the run (host_snapshot.LocalHost)."""
        readers: dict[str, Callable[[], host_snapshot.HostSnapshot]] = {}
        for instance, monitor in zip(self.instances, self._monitors, strict=True):
            if instance.host_key not in readers:
                readers[instance.host_key] = (
                    partial(host_snapshot.read_snapshot, monitor.read_file, instance.devices)
                    if instance.host_via_database
                    else host_snapshot.LocalHost(instance.devices)
                )
        return readers

    def _hosts(self) -> Hosts:
        return {key: read() for key, read in self._readers.items()}

    def _dbs(self) -> Snapshots:
        return [monitor.interval_snapshot() for monitor in self._monitors]

    def _loop(self) -> None:
        while True:
            try:
                message = self.inbox.get(timeout=self._until_tick())
            except queue.Empty:
                self._boundary()
                continue
            kind = message[0]
            if kind == "stop":
                for sink in self.sinks:  # a sink holding rows (a progress span) lets them go
                    flush = getattr(sink, "flush", None)
                    if flush is not None:
                        flush()
                return
            if kind == "phase":
                self._begin(*message[1:])
            elif kind == "close":
                self._row(*message[1:])
            elif kind == "publish" and message[1] == self._phase:
                self._db_published[message[2]] = self._dbs()
            elif kind == "sync":
                message[1].set()

    def _begin(
        self, name: str, schedule: Schedule, db: Snapshots | None, hosts: Hosts | None
    ) -> None:
        """A phase's start: its boundaries, and the counters its first interval counts from."""
        self._phase, self._schedule = name, schedule
        self._tick, self._at_boundary, self._db_published = 1, {}, {}
        self._db_prev = db if db is not None else self._dbs()
        self._host_prev = hosts if hosts is not None else self._hosts()
        if self.layers is not None:
            self.layers.mark()
        if name == Phase.WINDOW:
            # The first checkpoint comes a gap into the window, as each later one after the
            # last: at its first row (16 ms of client CPU at 64 sessions, 31 at 256) it was
            # 1.6-3 ms/s of a 10 s window, more than the rest of the row's measuring.
            self._last_checkpoint = time.monotonic()

    def _until_tick(self) -> float | None:
        """Seconds to the next boundary of the phase (None: no boundary left to wait for)."""
        schedule = self._schedule
        if schedule is None or (schedule.end is not None and self._tick > schedule.last_index()):
            return None
        return max(0.0, schedule.boundary(self._tick) - time.time())

    def _boundary(self) -> None:
        self._at_boundary[self._tick] = self._hosts()
        if self.layers is not None:  # the kernel's counts at the same moment as the host's
            self.layers.boundary(self._tick)
        self._tick += 1

    def _row(
        self, interval: Interval, db: Snapshots | None, hosts: Hosts | None, end: float | None
    ) -> None:
        if interval.phase != self._phase:
            return  # a phase's interval arriving after the next phase began: no row
        published = self._db_published.pop(interval.index, None)
        db_cur = db if db is not None else published or self._dbs()
        host_cur = hosts or self._at_boundary.pop(interval.index, None) or self._hosts()
        for kept in (self._at_boundary, self._db_published):
            for index in [i for i in kept if i < interval.index]:
                del kept[index]  # boundaries of intervals closed without a read
        row, hists = build_row(
            interval,
            keys=self.keys,
            views=self.views,
            db_prev=self._db_prev,
            db_cur=db_cur,
            host_prev=self._host_prev,
            host_cur=host_cur,
            start_at=self.record.start_at or interval.start,
            end=end,
        )
        row.update(self._horizons(db_cur))
        if self.layers is not None:
            delta = self.layers.interval(interval.index, interval.phase == Phase.WINDOW, end)
            row.update(interval_figures(delta, float(row["seconds"])))
            hists = {**hists, **delta.hists}
        if interval.phase == Phase.WINDOW:
            self._judge_cliff(row)
        self._db_prev, self._host_prev = db_cur, host_cur
        for sink in self.sinks:
            sink(row, hists)
        if interval.phase == Phase.WINDOW:
            self._window_progress(interval, db_cur, host_cur, end)

    def _judge_cliff(self, row: dict[str, Any]) -> None:
        """The live cliff judgement of a window row: its columns, a notice when an episode
        opens or ends, and the episodes so far in the record (a checkpoint keeps them)."""
        if self.cliff is None:
            return
        for event in self.cliff.observe(row):
            if self.notice is not None:
                self.notice(event.notice())
        row.update(self.cliff.columns())
        self.record.cliffs = self.cliff.summary()

    def _window_progress(
        self, interval: Interval, db_cur: Snapshots, host_cur: Hosts, end: float | None
    ) -> None:
        """Add a closed window interval to what a checkpoint saves, and save one when due."""
        # in place: the closed sums are this thread's (a checkpoint is built and written
        # here, before the next interval adds to them). The sessions' counts are added up
        # when a checkpoint is due: at 256 sessions their merges were 2.1 ms a row, the most
        # of the sampler's CPU, for a checkpoint every 10-20 s (none at all in a window
        # whose rows all close after its end, no checkpoint being written then); the
        # latency histograms per instance, from the interval's totals (a merge of a
        # session's ~100 buckets per result was 1 ms a row at 64)
        if self.checkpoint is not None:
            self._unsummed.append(interval.by_session)
        for instance, total in interval.results.items():
            self._closed_instances[instance] = merge_into(
                self._closed_instances.get(instance), total
            )
        for instance, commits in interval.own_commits.items():
            self._closed_commits[instance] = self._closed_commits.get(instance, 0) + commits
        now = time.monotonic()
        window_end = self._schedule.end if self._schedule is not None else None
        if self.checkpoint is None or not checkpoint_due(
            now - self._last_checkpoint, self._checkpoint_gap_s, time.time(), window_end
        ):
            return
        self._sum_sessions()
        self._last_checkpoint, cpu_s = now, time.thread_time()
        try:
            self.checkpoint(
                provisional_record(
                    self.record,
                    self.instances,
                    self._closed_sessions,
                    self._closed_instances,
                    self._closed_commits,
                    db_cur,
                    host_cur,
                    end if end is not None else interval.end,
                )
            )
        except Exception as exc:  # the run goes on; its final results are written at the end
            self.checkpoint = None
            self.errors.append(f"no more provisional run.json: {first_line(exc)}")
        if self._checkpoint_adapts:
            cost_s = time.thread_time() - cpu_s
            self._checkpoint_gap_s = checkpoint_gap_s(self.checkpoint_every_s, cost_s)

    def _sum_sessions(self) -> None:
        """The closed intervals' results into the sessions' counts (no histograms): a cost
        per result, paid at the checkpoint that reads them but not counted in its spacing
        (checkpoint_gap_s spaces what a checkpoint costs itself, not how many results came
        since the last one)."""
        sums = self._closed_sessions
        for by_session in self._unsummed:
            for session, result in by_session.items():
                sums[session] = merge_into(sums.get(session), result, histograms=False)
        self._unsummed.clear()

    def _horizons(self, db_cur: Snapshots) -> dict[str, Any]:
        """Who holds each instance's cleanup horizon (its HorizonWatch): as of the row's
        snapshots when the monitor read it with them (stamped when read), else now; the
        time series gets the worst figure over the instances."""
        now = time.time()
        figures: dict[str, Any] = {}
        for k, (instance, monitor) in enumerate(zip(self.instances, self._monitors, strict=True)):
            sample = monitor.horizon(db_cur[k] if k < len(db_cur) else None)
            instance.record.horizon.add(sample.get("read_epoch", now), sample)
            for key, value in sample["figures"].items():
                if value is not None and (figures.get(key) is None or value > figures[key]):
                    figures[key] = value
                figures.setdefault(key, None)
        return figures


def checkpoint_due(
    since_last_s: float, gap_s: float, now_epoch: float, window_end: float | None
) -> bool:
    """Whether a closed window row is followed by a checkpoint: `gap_s` after the last one,
    and not once the window has ended. The rows that close after its end (all of a short
    window's at 256 sessions, whose answers come every 16 intervals) are followed within
    seconds by the run's own run.json: a checkpoint then is CPU for nothing (~11 ms)."""
    ended = window_end is not None and now_epoch >= window_end
    return since_last_s >= gap_s and not ended


def checkpoint_gap_s(every_s: float, cost_s: float) -> float:
    """Seconds until the next checkpoint after one that took `cost_s` of CPU: at least
    `every_s`, and long enough that checkpoints take at most CHECKPOINT_CPU_SHARE of one CPU."""
    return max(every_s, cost_s / CHECKPOINT_CPU_SHARE)


def provisional_record(
    record: RunRecord,
    instances: list[RunInstance],
    sessions: dict[int, dict[str, Any]],
    by_instance: dict[int, dict[str, Any]],
    own_commits: dict[int, int],
    db_cur: Snapshots,
    host_cur: Hosts,
    end: float,
) -> RunRecord:
    """The run as if it had ended with the last closed interval: what a checkpoint saves
    (status "interrupted" until the run's own results replace it). The sessions' windows
    hold counts only; the latency is each instance's, from its closed intervals."""
    stamp = time.strftime("%H:%M:%S", time.localtime(end))
    return replace(
        record,
        status=RunStatus.INTERRUPTED,
        error=f"the client stopped before the end of the run; the window up to {stamp} "
        "is saved (a checkpoint: the run's own results replace it when it ends)",
        sessions=[replace(o, window=sessions.get(o.id)) for o in record.sessions],
        closed_histograms={
            k: {key: v for key, v in total.items() if key in HISTOGRAM_KEYS}
            for k, total in by_instance.items()
        },
        instances=[
            replace(
                i.record,
                db_after=db_cur[k],
                host_after=host_cur.get(i.host_key),
                own_commits=own_commits.get(k, 0),
                waits=Counter(),
                wait_samples=0,
            )
            for k, i in enumerate(instances)
        ],
        window_end=end,
        last_op_end=end,
        planned_end=record.window_end,
        notes=[
            *record.notes,
            "a checkpoint: no wait samples, no statements, no table sizes, no latency per session",
        ],
    )


class WaitSampler(threading.Thread):
    """ASH-like wait samples of the window at `hz` (wait_sample_hz), taken inside the
    database (one call, see ash._ASH_DO), so the client spends no CPU on them."""

    def __init__(
        self,
        backend: RunBackend,
        monitor: Monitor,
        record: InstanceRecord,
        start: float,
        end: float | None,
        enabled: bool,
        hz: float = WAIT_SAMPLE_HZ,
    ) -> None:
        super().__init__(name="slob-waits", daemon=True)
        self.backend, self.monitor, self.record = backend, monitor, record
        self.enabled, self.hz = enabled, hz
        self.start_epoch, self.end_epoch = start, end
        self.error: str | None = None

    def run(self) -> None:
        if not self.enabled:
            self.error = "no wait samples: this engine has no wait sampler"
            return
        try:
            self.record.wait_sample_hz = self.hz
            result = self.monitor.sample_waits(
                self.backend.application_name, self.start_epoch, self.end_epoch, self.hz
            )
            self.record.wait_samples = result.samples
            self.record.waits.update(result.waits)
            self.record.own_commits += result.commits
        except Exception as exc:  # the run's other figures stand; say why waits are missing
            self.error = (
                f"no wait samples: {first_line(exc)}; the window's commits include the "
                f"sampler's own (up to {self.hz:g}/s)"
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
