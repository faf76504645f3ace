"""`slob precondition`: write the data set's pages (or files of our own) over N times before a
sustained-throughput test, as SNIA's Performance Test Specification asks.

Modes:
  engine       the engine rewrites cf1 and cf2 of every schema in place, in committed
               batches of BATCH_BYTES (Engine.rewrite: new random bytes of the same length,
               so one row per page and the incompressibility survive), then its checkpoint
               (Engine.flush_writes) after each pass: the pages reach the device.
  seq, random  workload-independent: files of our own (runner/prewrite.py) of --size bytes
               (default: the data set's size) written whole each pass, sequentially or each
               block once in a random order.
--fill first writes fill files up to FILL % used of the file system; all our files live in
the work directory (`<instance dir>/openslob-fill` of a private server), which the state
file also lives in and `slob destroy` removes.

While it writes, a thread samples /proc/diskstats of the work directory's devices once a
second (what the device wrote, not what we asked: WAL and other processes' writes included).
The state is saved after every batch: Ctrl-C (KeyboardInterrupt) cancels the statement in
flight (Engine.cancel), keeps the state, and a rerun with the same parameters continues.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from openslob.engines.api import Engine, RewriteExtent
from openslob.host.counters import read_diskstats
from openslob.host.devices import devices_for_path
from openslob.host.procfs import SECTOR_BYTES
from openslob.runner.prewrite import (
    FILE_BYTES,
    STATE_FILE,
    WORK_DIR_NAME,
    BlockWriter,
    FileSystemUse,
    PreconditionState,
    data_files,
    fill_bytes,
    missing_bytes,
    random_order,
)

BATCH_BYTES = 4 << 20  # one committed engine batch: short enough to stop within a second
MODES = ("engine", "seq", "random")

Progress = Callable[[int, int], None]  # (bytes done, bytes planned) of this precondition


@dataclass(frozen=True)
class Plan:
    mode: str
    passes: int
    block_bytes: int
    fill_pct: float | None
    work_dir: Path
    dataset_bytes: int | None  # the data set's tables (the ratio's denominator)
    size_bytes: int  # what one pass writes
    extents: tuple[RewriteExtent, ...]  # engine mode

    def key(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "passes": self.passes,
            "block_bytes": self.block_bytes,
            "size_bytes": self.size_bytes,
            "fill_pct": self.fill_pct,
            "extents": [[e.relation, e.units, e.unit_bytes] for e in self.extents],
        }


@dataclass
class Summary:
    mode: str
    passes: int
    passes_done: int
    complete: bool
    resumed: bool
    dataset_bytes: int | None
    bytes_written: int  # what we asked to be written, all runs of this precondition
    written_over_dataset: float | None  # bytes_written (pass bytes only) / dataset_bytes
    fill_bytes: int
    seconds: float  # this run's
    mb_per_s: float | None  # this run's bytes / seconds
    device_written_bytes: int | None  # the devices' own count, this run
    device_written_over_dataset: float | None  # WAL, redo and others' writes included
    device_write_mb_per_s: float | None  # mean of the samples, this run
    device_write_mb_per_s_max: float | None
    devices: list[str]
    o_direct: bool | None
    device_note: str | None


class DeviceRate(threading.Thread):
    """Write MB/s of `devices` once a second (/proc/diskstats), in a thread of its own."""

    def __init__(self, devices: list[str]) -> None:
        super().__init__(daemon=True, name="precondition-diskstats")
        self.devices = devices
        self.samples: list[tuple[float, float]] = []  # (seconds since start, MB/s)
        self.written_bytes = 0
        self._halt = threading.Event()

    def _sectors(self) -> tuple[float, int]:
        sample = read_diskstats()
        return sample.monotonic, sum(
            sample.devices[d].sectors_written for d in self.devices if d in sample.devices
        )

    def run(self) -> None:
        start, last = self._sectors()
        prev_t = start
        while True:
            halted = self._halt.wait(1.0)
            now, sectors = self._sectors()
            if halted and now - prev_t < 0.2:  # a sliver at the end: its rate is noise
                self.written_bytes += max(sectors - last, 0) * SECTOR_BYTES
                return
            delta = max(sectors - last, 0) * SECTOR_BYTES
            self.written_bytes += delta
            self.samples.append((now - start, delta / 1e6 / max(now - prev_t, 1e-6)))
            prev_t, last = now, sectors
            if halted:
                return

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def work_dir_of(instance_dir: Path) -> Path:
    """The work directory of a private server's preconditioning (`slob destroy` removes it)."""
    return instance_dir / WORK_DIR_NAME


def remove_work_dir(instance_dir: Path) -> bool:
    """Remove our files and state under a private server; whether there were any."""
    path = work_dir_of(instance_dir)
    if not path.exists():
        return False
    shutil.rmtree(path)
    return True


def _allocated(paths: list[Path]) -> int:
    return sum(p.stat().st_blocks * 512 for p in paths if p.exists())


def start(plan: Plan) -> tuple[PreconditionState, str | None]:
    """The state to continue from (and the line saying so), the fill planned; ConfigError
    before anything is written when the file system would end beyond the fill level (or
    HARD_CAP_PCT). A fresh start with a fill reuses the space of an earlier fill's files."""
    state, line = PreconditionState.load(plan.work_dir / STATE_FILE, plan.key())
    new = 0
    if plan.mode != "engine":
        new = missing_bytes(data_files(plan.work_dir, plan.mode, plan.size_bytes))
    existing = next(p for p in (plan.work_dir, *plan.work_dir.parents) if p.exists())
    use = FileSystemUse.of(existing)
    old_fill = sorted(plan.work_dir.glob("fill-*.dat"))
    if state.runs:  # resumed: the fill it planned, less what is written
        left = int(state.extra.get("fill_bytes", 0)) - state.fill_done_bytes
        fill_bytes(use, new + max(left, 0), None)
        return state, line
    mine = _allocated(old_fill)
    fill = fill_bytes(
        FileSystemUse(use.used_bytes - mine, use.avail_bytes + mine), new, plan.fill_pct
    )
    for path in old_fill:  # an earlier fill's files: this plan writes its own
        path.unlink()
    state.extra["fill_bytes"] = fill
    plan.work_dir.mkdir(parents=True, exist_ok=True)
    return state, line


def run(
    plan: Plan,
    state: PreconditionState,
    engine: Engine | None,
    results_dir: Path,
    progress: Progress,
) -> Summary:
    """Write what `plan` asks, continuing `state` (from start())."""
    state_path = plan.work_dir / STATE_FILE
    fill_total = int(state.extra.get("fill_bytes", 0))
    resumed = state.runs > 0
    state.runs += 1
    state.save(state_path)
    devices = devices_for_path(plan.work_dir)
    sampler = DeviceRate(devices)
    sampler.start()
    total = fill_total + plan.passes * plan.size_bytes
    before = state.bytes_written
    started = time.monotonic()
    writer: BlockWriter | None = None

    def tick() -> None:
        progress(state.bytes_written, total)

    try:
        if state.fill_done_bytes < fill_total:
            writer = BlockWriter(plan.block_bytes)
            _fill(plan, state, state_path, writer, fill_total, tick)
        for _ in range(state.passes_done, plan.passes):
            if plan.mode == "engine":
                assert engine is not None
                _engine_pass(plan, engine, state, state_path, tick)
            else:
                writer = writer or BlockWriter(plan.block_bytes)
                _file_pass(plan, state, state_path, writer, tick)
            with _batch_then_interrupt():  # the pass done and saved: one step for Ctrl-C
                state.passes_done += 1
                state.extent = state.offset = 0
                state.save(state_path)
    except BaseException:
        if engine is not None:
            engine.cancel()  # nothing of ours left running on the server
        state.save(state_path)
        raise
    finally:
        sampler.stop()
        if writer is not None:
            writer.close()
        seconds = time.monotonic() - started
        summary = _summary(plan, state, resumed, fill_total, seconds, before, sampler, writer)
        _write_results(results_dir, summary, sampler)
    return summary


def _fill(
    plan: Plan,
    state: PreconditionState,
    state_path: Path,
    writer: BlockWriter,
    fill_total: int,
    tick: Callable[[], None],
) -> None:
    for number, (path, size) in enumerate(data_files(plan.work_dir, "fill", fill_total)):
        first = max(state.fill_done_bytes - number * FILE_BYTES, 0)
        for offset in range(first, size, plan.block_bytes):
            done = writer.write(path, size, offset)
            state.fill_done_bytes += done
            state.bytes_written += done
            state.save(state_path)
            tick()
    writer.sync()


def _file_pass(
    plan: Plan,
    state: PreconditionState,
    state_path: Path,
    writer: BlockWriter,
    tick: Callable[[], None],
) -> None:
    files = data_files(plan.work_dir, plan.mode, plan.size_bytes)
    blocks = -(-plan.size_bytes // plan.block_bytes)
    for index in range(state.offset, blocks):
        block = index if plan.mode == "seq" else random_order(index, blocks, state.passes_done)
        at = block * plan.block_bytes
        path, size = files[at // FILE_BYTES]
        done = writer.write(path, size, at % FILE_BYTES)
        state.offset = index + 1
        state.bytes_written += done
        if index % 16 == 15 or index == blocks - 1:
            state.save(state_path)  # every 16 blocks: the state file stays a small share
        tick()
    writer.sync()


def _engine_pass(
    plan: Plan,
    engine: Engine,
    state: PreconditionState,
    state_path: Path,
    tick: Callable[[], None],
) -> None:
    for ext_no in range(state.extent, len(plan.extents)):
        extent = plan.extents[ext_no]
        batch = max(BATCH_BYTES // extent.unit_bytes, 1)
        first = state.offset if ext_no == state.extent else 0
        state.extent = ext_no
        for at in range(first, extent.units, batch):
            count = min(batch, extent.units - at)
            # A batch commits on the server: a Ctrl-C between its commit and the state's
            # save would make a rerun write (and count) it again. The first Ctrl-C waits for
            # the batch (one is short: BATCH_BYTES), a second one cancels it at once.
            with _batch_then_interrupt():
                engine.rewrite(extent, at, count)
                state.offset = at + count
                state.bytes_written += count * extent.unit_bytes
                state.save(state_path)
            tick()
        # The state names the next unit to write: here the next extent's first. Resetting the
        # offset alone left (this extent, 0) in memory through flush_writes, and a Ctrl-C
        # there saved it: the rerun wrote and counted the whole extent again.
        with _batch_then_interrupt():
            state.extent, state.offset = ext_no + 1, 0
    engine.flush_writes(list(plan.extents))


@contextlib.contextmanager
def _batch_then_interrupt() -> Iterator[None]:
    """Run the block whole: a first SIGINT during it is raised as KeyboardInterrupt after
    it; a second one at once (the statement in flight is then cancelled, nothing saved)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hit: list[bool] = []

    def handler(signum: int, frame: object) -> None:
        if hit:
            raise KeyboardInterrupt
        hit.append(True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if hit:
        raise KeyboardInterrupt


def _summary(
    plan: Plan,
    state: PreconditionState,
    resumed: bool,
    fill_total: int,
    seconds: float,
    before: int,
    sampler: DeviceRate,
    writer: BlockWriter | None,
) -> Summary:
    pass_bytes = state.bytes_written - state.fill_done_bytes
    rates = [mbps for _, mbps in sampler.samples]
    note = None
    if not sampler.devices:
        note = f"no block device under {plan.work_dir} (tmpfs, overlay?): device MB/s n/a"
    elif not rates:
        note = "ran under a second: no device sample"
    return Summary(
        mode=plan.mode,
        passes=plan.passes,
        passes_done=state.passes_done,
        complete=state.passes_done >= plan.passes,
        resumed=resumed,
        dataset_bytes=plan.dataset_bytes,
        bytes_written=state.bytes_written,
        written_over_dataset=pass_bytes / plan.dataset_bytes if plan.dataset_bytes else None,
        fill_bytes=state.fill_done_bytes,
        seconds=round(seconds, 3),
        mb_per_s=(state.bytes_written - before) / 1e6 / seconds if seconds > 0 else None,
        device_written_bytes=sampler.written_bytes if sampler.devices else None,
        device_written_over_dataset=(
            sampler.written_bytes / plan.dataset_bytes
            if sampler.devices and plan.dataset_bytes
            else None
        ),
        device_write_mb_per_s=sum(rates) / len(rates) if rates and sampler.devices else None,
        device_write_mb_per_s_max=max(rates) if rates and sampler.devices else None,
        devices=sampler.devices,
        o_direct=writer.direct if writer is not None else None,
        device_note=note,
    )


def _write_results(results_dir: Path, summary: Summary, sampler: DeviceRate) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    lines = ["t_s,write_mb_per_s"] + [f"{t:.3f},{mbps:.3f}" for t, mbps in sampler.samples]
    (results_dir / "precondition.csv").write_text("\n".join(lines) + "\n")
    (results_dir / "precondition.json").write_text(json.dumps(asdict(summary), indent=2) + "\n")
