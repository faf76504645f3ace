"""Per-I/O latency distributions from the kernel, with BPF programs of our own (issue 26).

When the tool runs as root on the database's host (the server's pid is known) and libbpf
(`libbpf1`) is installed, the programs of data/layers.bpf.c (built into data/layers.bpf.o,
host/bpfbuild.py) are loaded through libbpf (host/libbpf.py) and keep four histograms in
the kernel, in the op histograms' buckets (model/histogram.py), per CPU:

    db_read_call   pread64 / preadv / preadv2 of the server's processes, enter → exit
                   (the server itself or its children: MariaDB's threads, PostgreSQL's
                   backends and I/O workers); io_uring completions are not traced
    log_sync       fdatasync / fsync of the same processes
    device_read    block layer, issue → completion of each read request of the data
    device_write   directory's disks (and write requests; flushes and discards apart)

The client reads the maps (cumulative counts; a read of a few per-CPU values, no file I/O
and no process of ours besides) when the host counters are read: at each interval
boundary and phase start (`LayerSeries`); an interval is the difference of two readings,
like counters, so the intervals of the window add up exactly to the window. Without root,
libbpf, the kernel's BTF or a local server pid the layers are null with the reason
(`unavailable_reason`).

What it costs (bench/ebpf_cost.py, README "ebpf_cost"): BTF tracepoints (a direct call into
the program), the call's start in the task's own storage, the request's issue time read
from the request (the block layer stamps it when it keeps statistics; else one more program
at issue with a hash keyed by the request).
"""

from __future__ import annotations

import ctypes
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from openslob.host import libbpf
from openslob.model.histogram import SLOTS, Histogram
from openslob.model.metrics import LATENCY_LAYERS

TRACED_LAYERS = LATENCY_LAYERS  # the programs' layer numbers are indexes into it
_BY = "kernel, BPF tracepoints"
MEASURED_AT = {
    "db_read_call": "the database's read call: pread64/preadv of the server's processes "
    f"({_BY}; io_uring completions not traced)",
    "log_sync": f"the log writer's sync call: fdatasync/fsync of the server's processes ({_BY})",
    "device_read": f"block layer, issue to completion of read requests ({_BY})",
    "device_write": f"block layer, issue to completion of write requests ({_BY})",
}
OBJECT = "data/layers.bpf.o"
# The programs data/layers.bpf.c attaches (bucket_of is the tests' only)
PROGRAMS = ("sys_enter", "sys_exit", "rq_issue", "rq_complete")
# Empty programs at the same tracepoints, attached beside them while the kernel times the
# programs (bpf_stats): what the timing and a program call cost by themselves
CONTROLS = ("control_enter", "control_exit", "control_complete")
DEVS_MAX = 8  # data disks the programs compare a request's with (the C source's DEVS_MAX)
# A layer's per-CPU value: bytes, untimed, then the histogram's SLOTS counts
VALUE_WORDS = SLOTS + 2
_BYTES, _UNTIMED, _HIST = 0, 1, 2
# This architecture's syscall numbers: pread64, preadv, preadv2; fsync, fdatasync
SYSCALLS = {
    "x86_64": ((17, 295, 327), (74, 75)),
    "aarch64": ((67, 69, 286), (82, 83)),  # the generic table (arm64, riscv64 alike)
    "riscv64": ((67, 69, 286), (82, 83)),
}
BTF = Path("/sys/kernel/btf/vmlinux")
BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")
# Tracing is not free (bench/ebpf_cost.py), so a run traces only when asked; run.json says
# so in each traced layer's reason.
NOT_ASKED = "not traced: TRACE_LAYERS is off (--trace-layers on)"
SYS_CLASS_BLOCK = Path("/sys/class/block")
MINORBITS = 20  # the kernel's dev_t: major << 20 | minor
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39  # linux/capability.h


class Config(ctypes.Structure):
    """The programs' read-only config (data/layers.bpf.c `struct config`)."""

    _fields_ = (
        ("server_tgid", ctypes.c_uint32),
        ("ndevs", ctypes.c_uint32),
        ("devs", ctypes.c_uint32 * DEVS_MAX),
        ("read_nr", ctypes.c_uint32 * 3),
        ("sync_nr", ctypes.c_uint32 * 2),
        ("use_stamps", ctypes.c_uint32),
    )


def _bpf_stats_on() -> bool:
    try:
        return BPF_STATS.read_text().strip() == "1"
    except OSError:
        return False


def kernel_dev(major: int, minor: int) -> int:
    return (major << MINORBITS) | minor


def device_numbers(devices: Sequence[str]) -> list[int]:
    """The kernel dev_t of each device and of the disks beneath it (dm/md slaves: the
    request queues the block tracepoints fire on)."""
    numbers: list[int] = []
    todo = list(devices)
    while todo:
        name = todo.pop().replace("/", "!")
        base = SYS_CLASS_BLOCK / name
        try:
            major, minor = (int(x) for x in (base / "dev").read_text().split(":"))
        except (OSError, ValueError):
            continue
        if (base / "partition").exists():  # requests are issued on the whole disk
            todo.append(base.resolve().parent.name)
            continue
        if kernel_dev(major, minor) not in numbers:
            numbers.append(kernel_dev(major, minor))
        slaves = base / "slaves"
        if slaves.is_dir():
            todo.extend(p.name for p in slaves.iterdir())
    return numbers


def config(
    pid: int, devs: Sequence[int], machine: str | None = None, *, use_stamps: bool = True
) -> Config:
    """The programs' config for one server and its data disks (at most DEVS_MAX).
    `use_stamps` False: every request is timed from the issue probe, as on a disk whose
    requests carry no issue stamp (the tests check that path on this machine's disk)."""
    reads, syncs = SYSCALLS[machine or platform.machine()]
    chosen = list(devs)[:DEVS_MAX]
    return Config(
        int(pid),
        len(chosen),
        (ctypes.c_uint32 * DEVS_MAX)(*chosen),
        (ctypes.c_uint32 * 3)(*reads),
        (ctypes.c_uint32 * 2)(*syncs),
        int(use_stamps),
    )


def may_trace(status: Path = Path("/proc/self/status")) -> bool:
    """Whether this process may load and attach tracing programs: CAP_BPF and
    CAP_PERFMON, or CAP_SYS_ADMIN, among its effective capabilities (root's, unless a
    container or setpriv took them away)."""
    try:
        line = next(ln for ln in status.read_text().splitlines() if ln.startswith("CapEff:"))
    except (OSError, StopIteration):
        return os.geteuid() == 0
    caps = int(line.split()[1], 16)
    bpf_and_perfmon = (1 << CAP_BPF) | (1 << CAP_PERFMON)
    return caps & bpf_and_perfmon == bpf_and_perfmon or bool(caps & (1 << CAP_SYS_ADMIN))


def unavailable_reason(pid: int | None, devices: Sequence[str]) -> str | None:
    """Why the kernel layers cannot be traced for this server (None: they can)."""
    if pid is None:
        return "not traced: the server is not on this host (or its pid is unknown)"
    if not may_trace():
        return (
            "not traced: eBPF tracing needs root on the database's host "
            "(CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)"
        )
    if platform.machine() not in SYSCALLS:
        return f"not traced: the system call numbers of {platform.machine()} are not known"
    missing = libbpf.missing()
    if missing is not None:
        return f"not traced: {missing}"
    if not BTF.exists():
        return f"not traced: the kernel has no BTF ({BTF}; CONFIG_DEBUG_INFO_BTF)"
    if not device_numbers(devices):
        return "not traced: the data directory's block device is unknown"
    return None


@dataclass
class Cumulative:
    """One reading of the kernel's maps: counts per layer and bucket (the timed calls),
    bytes, and the device layers' completions (`completed`: timed or not)."""

    hists: dict[str, Histogram] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    completed: dict[str, int] = field(default_factory=dict)

    def minus(self, before: Cumulative) -> Cumulative:
        """What happened between two readings (counts only grow, so none goes negative)."""
        out = Cumulative()
        for layer in TRACED_LAYERS:
            now, then = self.hists.get(layer, Histogram()), before.hists.get(layer, Histogram())
            out.hists[layer] = Histogram(
                {i: n - then.counts.get(i, 0) for i, n in now.counts.items()}
            )
            out.hists[layer].counts = {i: n for i, n in out.hists[layer].counts.items() if n}
            out.bytes[layer] = self.bytes.get(layer, 0) - before.bytes.get(layer, 0)
            out.completed[layer] = self.completed.get(layer, 0) - before.completed.get(layer, 0)
        return out

    def add(self, other: Cumulative) -> Cumulative:
        for layer in TRACED_LAYERS:
            self.hists.setdefault(layer, Histogram()).merge(other.hists.get(layer, Histogram()))
            self.bytes[layer] = self.bytes.get(layer, 0) + other.bytes.get(layer, 0)
            self.completed[layer] = self.completed.get(layer, 0) + other.completed.get(layer, 0)
        return self


class Tracer:
    """The run's programs: `start` (load and attach), `read` (the cumulative counts now),
    `stop` (detach; also done by the kernel if this process dies)."""

    def __init__(self, pid: int, devices: Sequence[str], *, use_stamps: bool = True) -> None:
        self.config = config(pid, device_numbers(devices), use_stamps=use_stamps)
        self._object: libbpf.BpfObject | None = None
        self._fd = -1
        self._buffer: ctypes.Array[ctypes.c_char] | None = None
        self._cpus = 0
        self._started = time.monotonic()
        self.readings = 0
        self.issue_probe = True  # False once every data disk stamps its requests' issue
        self._paused: list[str] = []  # the probes pause() detached

    def start(self) -> str | None:
        """Load and attach; None once the probes run, else why they do not."""
        image = resources.files("openslob").joinpath(OBJECT).read_bytes()
        try:
            self._object = libbpf.BpfObject(image, bytes(self.config))
            self._object.attach(PROGRAMS)
            if _bpf_stats_on():
                self._object.attach(CONTROLS)
            self._cpus = libbpf.possible_cpus()
            self._fd = self._object.map_fd("layers")
        except libbpf.BpfError as exc:
            self.stop()
            return f"not traced: {exc}"
        self._buffer = ctypes.create_string_buffer(self._cpus * VALUE_WORDS * 8)
        self._started = time.monotonic()
        return None

    def read(self) -> Cumulative:
        """The kernel's counts since the start, summed over the CPUs."""
        out = Cumulative()
        if self._object is None or self._buffer is None:
            return out
        self._drop_issue_probe()
        for number, layer in enumerate(TRACED_LAYERS):
            self._object.lookup(self._fd, number, self._buffer)
            words = np.frombuffer(memoryview(self._buffer), dtype="<u8").reshape(
                self._cpus, VALUE_WORDS
            )
            total = words.sum(axis=0, dtype=np.uint64)
            hist = total[_HIST:]
            out.hists[layer] = Histogram({int(i): int(hist[i]) for i in np.flatnonzero(hist)})
            out.bytes[layer] = int(total[_BYTES])
            if layer.startswith("device_"):  # every completion, timed or not
                out.completed[layer] = out.hists[layer].count + int(total[_UNTIMED])
        self.readings += 1
        return out

    def pause(self, paused: bool) -> None:
        """Detach the probes (True) or attach them again (False), the maps kept: the
        toggled A/B of bench/ebpf_cost.py, within one run."""
        if self._object is None:
            return
        attached = [p for p in PROGRAMS if p in self._object.attached]
        if paused:
            for name in attached:
                self._object.detach(name)
            self._paused = attached or self._paused
        else:
            self._object.attach([p for p in self._paused if p not in attached])
            self._paused = []

    def _drop_issue_probe(self) -> None:
        """Once a completion on every data disk carried the block layer's issue stamp (the
        programs' `stamped`), the issue probe has nothing left to do: detach it, so that a
        request costs one program run, not two."""
        assert self._object is not None
        disks = int(self.config.ndevs)
        if "rq_issue" not in self._object.attached or disks == 0:
            return
        stamped = np.frombuffer(self._object.section(".bss"), dtype="<u4")[:disks]
        if len(stamped) == disks and bool(stamped.all()):
            self._object.detach("rq_issue")
            self.issue_probe = False

    def skipped(self) -> int | None:
        """Probe runs the kernel skipped so far (its recursion guard: a program firing on
        a CPU where the same program is running, e.g. a completion interrupt in a
        completion), summed over the programs (fdinfo recursion_misses); None when
        unreadable."""
        return self._programs_sum("recursion_misses")

    def probes_cpu_s(self) -> tuple[float, float] | None:
        """CPU seconds the probe programs ran so far and, of them, what the kernel's timing
        and the program calls cost by themselves (the empty programs' time at the same
        tracepoints), when the kernel counts it (kernel.bpf_stats_enabled = 1 before the
        start: bench/ebpf_cost.py --bpf_stats 1); else None."""
        if not _bpf_stats_on() or self._object is None:
            return None
        if not set(CONTROLS) <= set(self._object.attached):
            return None
        probes = self._programs_sum("run_time_ns", PROGRAMS)
        control = self._programs_sum("run_time_ns", CONTROLS)
        return None if probes is None or control is None else (probes / 1e9, control / 1e9)

    def _programs_sum(self, name: str, programs: Sequence[str] = PROGRAMS) -> int | None:
        """A counter of /proc/self/fdinfo summed over these programs (those attached)."""
        if self._object is None:
            return None
        total = 0
        for fd in self._object.program_fds(programs):
            try:
                text = Path(f"/proc/self/fdinfo/{fd}").read_text()
            except OSError:
                return None
            values = [ln.split()[1] for ln in text.splitlines() if ln.startswith(f"{name}:")]
            if not values:
                return None
            total += int(values[0])
        return total

    def note(self) -> str:
        probes = self.probes_cpu_s()
        used = ""
        if probes is not None:
            elapsed = time.monotonic() - self._started
            used = (
                f"; its probes {probes[0]:.3f} s of CPU in {elapsed:.1f} s, of which "
                f"{probes[1]:.3f} s the kernel's timing of them and their calls (empty "
                "programs at the same tracepoints)"
            )
        issue = "its issue probe" if self.issue_probe else "the block layer's issue stamps"
        return (
            "latency layers traced in the kernel by openslob's BPF programs "
            f"({self.readings} readings; device requests timed from {issue}{used})"
        )

    def stop(self) -> None:
        if self._object is not None:
            self._object.close()
            self._object = None


class LayerSeries:
    """Intervals of the traced layers, read at the moments the host counters are (the
    sampler's): `mark` at a phase's start, `boundary` as each interval's end passes,
    `interval` when it closes (the difference since the previous one, added to the
    window's when in it)."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self._prev: Cumulative | None = None
        self._boundaries: dict[int, Cumulative] = {}
        self.window = Cumulative()
        self.window_intervals = 0

    def mark(self) -> None:
        self._prev, self._boundaries = self.tracer.read(), {}

    def boundary(self, index: int) -> None:
        self._boundaries[index] = self.tracer.read()

    def interval(self, index: int, in_window: bool, at: float | None = None) -> Cumulative:
        """Interval `index` closes: the reading at its boundary, else (`at`: an end that
        is not a boundary, the window's early end) a reading now."""
        now = self._boundaries.pop(index, None)
        if now is None or at is not None:
            now = self.tracer.read()
        for old in [i for i in self._boundaries if i < index]:
            del self._boundaries[old]
        before = self._prev if self._prev is not None else Cumulative()
        delta = now.minus(before)
        self._prev = now
        if in_window:
            self.window.add(delta)
            self.window_intervals += 1
        return delta


def interval_figures(delta: Cumulative, seconds: float) -> dict[str, float | None]:
    """An interval's time-series figures of the traced layers (model/metrics.py TRACED)."""
    row: dict[str, float | None] = {}
    for layer in TRACED_LAYERS:
        hist = delta.hists.get(layer, Histogram())
        row[f"{layer}_traced_per_s"] = hist.count / seconds if seconds > 0 else None
        row[f"{layer}_p50_us"] = hist.percentile_us(50)
        row[f"{layer}_p99_us"] = hist.percentile_us(99)
    return row


def start_tracing(
    servers: Sequence[tuple[int | None, Sequence[str]]],
    *,
    asked: bool,
) -> tuple[Tracer | None, str | None]:
    """The run's tracer for its servers ((pid, devices) each; pid None: not on this
    host), started, or None and why not. One server only: the layers are one server's.
    Only when asked (TRACE_LAYERS): tracing is not free (bench/ebpf_cost.py)."""
    if not asked:
        return None, NOT_ASKED
    if len(servers) != 1:
        return None, "not traced: a run of several instances (the layers are one server's)"
    pid, devices = servers[0]
    reason = unavailable_reason(pid, devices)
    if reason is not None or pid is None:
        return None, reason
    tracer = Tracer(pid, devices)
    reason = tracer.start()
    return (None, reason) if reason is not None else (tracer, None)
