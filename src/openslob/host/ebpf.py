"""Per-I/O latency distributions from the kernel, with bpftrace (issue 26).

When the tool runs as root on the database's host (the server's pid is known) and bpftrace
is on PATH, one bpftrace process (the script: openslob/data/ebpf.bt) keeps four histograms
in the kernel, in the op histograms' buckets (model/histogram.py: the bucket index is
computed in the script, `bucket_code`):

    db_read_call   pread64 / preadv / preadv2 of the server's processes, enter → exit
                   (the server itself or its children: MariaDB's threads, PostgreSQL's
                   backends and I/O workers); io_uring completions are not traced
    log_sync       fdatasync / fsync of the same processes
    device_read    block layer, issue → completion of each read request of the data
    device_write   directory's device(s) (and write requests; flushes and discards apart)

The kernel prints the cumulative maps through a pipe (no file I/O of ours in the window) when
the client asks (`Tracer.ask`: at each interval boundary and phase start) and every
PRINT_EVERY_MS besides; the client keeps the latest prints and an interval is the difference
of two (`LayerSeries`), like counters, so the intervals of the window add up exactly to the
window. Without root, bpftrace, tracefs or a local server pid the layers are null with the
reason (`unavailable_reason`).

What it costs (bench/ebpf_cost.py): each traced read is four probe runs (its call's enter and
exit, its request's issue and completion), ~3 µs of CPU together on the 2-vCPU test VM
(bpf_stats), most of it the hash maps' cache misses; a print is ~6 ms of bpftrace's CPU,
hence prints at the boundaries rather than every 100 ms.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from openslob.model.histogram import LINEAR_LIMIT, SLOTS, SUB_BUCKETS, Histogram
from openslob.model.metrics import LATENCY_LAYERS

TRACED_LAYERS = LATENCY_LAYERS  # the script's layer numbers are indexes into it
MEASURED_AT = {
    "db_read_call": "the database's read call: pread64/preadv of the server's processes "
    "(kernel, bpftrace; io_uring completions not traced)",
    "log_sync": "the log writer's sync call: fdatasync/fsync of the server's processes "
    "(kernel, bpftrace)",
    "device_read": "block layer, issue to completion of read requests (kernel, bpftrace)",
    "device_write": "block layer, issue to completion of write requests (kernel, bpftrace)",
}
# A reading is the print nearest the moment asked for: the one asked for at that boundary, or
# (an early end of the window) a periodic one, at most half this away. A print walks the maps
# (~1,500 entries: ~6 ms of bpftrace's CPU), so not more often.
PRINT_EVERY_MS = 1000
# The getsid() argument that asks for a print: above any pid (PID_MAX_LIMIT is 2**22), so the
# call does nothing but fail with ESRCH
ASK_PID = (1 << 30) + 26
KEY_STRIDE = 4096  # the histogram map's key: layer * KEY_STRIDE + bucket (SLOTS fit under it)
DEVICES_MAX = 256  # a request's key: sector * DEVICES_MAX + the device's number
# The in-flight requests' map: a multiplicative hash of the key picks one of 2**SLOT_BITS
# slots (a fixed set, so requests whose completion was skipped cannot fill the map; the key's
# low bits alone would not do: they are the device's number and aligned sectors' zeros); the
# value holds the issue time shifted over the key's low CHECK_BITS, which the completion
# checks.
SLOT_BITS, CHECK_BITS = 16, 20
HASH_MUL = 0x5851F42D4C957F2D  # odd, below 2**63 (bpftrace's integer literals are signed)
# Entries per map (bpftrace's default is 4,096): the in-flight requests' slots (SLOT_BITS)
MAP_KEYS_MAX = 1 << SLOT_BITS
KEEP_PRINTS = 50  # the last ~25 s of prints (two a second), to find the one nearest a moment
START_TIMEOUT_S = 30.0  # compiling and attaching takes ~2 s; a loaded machine more
TRACEFS = Path("/sys/kernel/tracing/available_events")
BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")
# Tracing costs SLOBops/s (bench/ebpf_cost.py: 4-8 % at 32 sessions on the 2-vCPU test VM), so a run
# traces only when asked; run.json says so in each traced layer's reason.
NOT_ASKED = "not traced: TRACE_LAYERS is off (--trace-layers on; tracing costs throughput)"
SYS_CLASS_BLOCK = Path("/sys/class/block")
MINORBITS = 20  # the kernel's dev_t in tracepoints: major << 20 | minor
_MARKER = "openslob_end"
_ENTRY = re.compile(r"^@(h|s|u)\[(\d+)\]: (\d+)$")
SECTOR_BYTES = 512


def bucket_code(value: str = "$us", out: str = "$idx") -> str:
    """bpftrace statements setting `out` to model/histogram.bucket_index(value): the
    exponent by a binary search of comparisons (bpftrace has no log2 of a scalar)."""
    steps = "\n".join(
        f"    if ($x >= {1 << bits}) {{ $x = $x >> {bits}; $lg = $lg + {bits}; }}"
        for bits in (32, 16, 8, 4, 2, 1)
    )
    shift = SUB_BUCKETS.bit_length() - 1  # 6: [64, 128) holds the mantissa
    return (
        f"  {out} = {value};\n"
        f"  if ({value} >= {LINEAR_LIMIT}) {{\n"
        f"    $x = {value}; $lg = 0;\n{steps}\n"
        f"    $e = $lg - {shift};\n"
        f"    {out} = {SUB_BUCKETS} * $e + (int64)({value} >> $e);\n"
        f"    if ({out} > {SLOTS - 1}) {{ {out} = {SLOTS - 1}; }}\n"
        "  }"
    )


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


def device_code(devs: Sequence[int]) -> str:
    """bpftrace statements setting $d to the device's number in `devs` (1, 2, ...; 0: not
    one of them): the in-flight key holds it under the sector, so it must stay small."""
    lines = ["  $d = 0;"]
    for number, dev in enumerate(devs[: DEVICES_MAX - 1], start=1):
        branch = "if" if number == 1 else "else if"
        lines.append(f"  {branch} (args->dev == {int(dev)}) {{ $d = {number}; }}")
    return "\n".join(lines)


def script(pid: int, devs: Sequence[int], client_pid: int, every_ms: int = PRINT_EVERY_MS) -> str:
    """The bpftrace program for one server pid and its data devices; `client_pid` asks for
    its prints (`Tracer.ask`)."""
    assert SLOTS <= KEY_STRIDE
    text = resources.files("openslob").joinpath("data/ebpf.bt").read_text()
    return (
        text.replace("@@BUCKET@@", bucket_code())
        .replace("@@PID@@", str(int(pid)))
        .replace("@@DEVICE@@", device_code(devs))
        .replace("@@DEVICES_MAX@@", str(DEVICES_MAX))
        .replace("@@STRIDE@@", str(KEY_STRIDE))
        .replace("@@SLOT_MASK@@", hex((1 << SLOT_BITS) - 1))
        .replace("@@SLOT_SHIFT@@", str(64 - SLOT_BITS))
        .replace("@@HASH_MUL@@", hex(HASH_MUL))
        .replace("@@CHECK_MASK@@", hex((1 << CHECK_BITS) - 1))
        .replace("@@CHECK_BITS@@", str(CHECK_BITS))
        .replace("@@CLIENT@@", str(int(client_pid)))
        .replace("@@ASK@@", str(ASK_PID))
        .replace("@@EVERY_MS@@", str(int(every_ms)))
    )


def unavailable_reason(pid: int | None, devices: Sequence[str]) -> str | None:
    """Why the kernel layers cannot be traced for this server (None: they can)."""
    if pid is None:
        return "not traced: the server is not on this host (or its pid is unknown)"
    if os.geteuid() != 0:
        return "not traced: eBPF tracing needs root on the database's host"
    if shutil.which("bpftrace") is None:
        return "not traced: bpftrace is not installed (apt-get install bpftrace)"
    if not TRACEFS.exists():
        return "not traced: tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)"
    if not device_numbers(devices):
        return "not traced: the data directory's block device is unknown"
    return None


@dataclass
class Cumulative:
    """One complete print of the kernel's maps: counts per layer and bucket (the timed
    calls), bytes, and the device layers' completions (`completed`: timed or not)."""

    hists: dict[str, Histogram] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    completed: dict[str, int] = field(default_factory=dict)

    def minus(self, before: Cumulative) -> Cumulative:
        """What happened between two prints (maps only grow, so no count goes negative)."""
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


def parse_print(lines: Sequence[str]) -> Cumulative:
    """A print's lines (`@h[layer * KEY_STRIDE + bucket]: count` of the timed calls,
    `@s[layer]: sectors` and `@u[layer]: count` of the device layers' completions: all of
    them and those not timed) as a Cumulative; lines of anything else (blank lines,
    bpftrace's notes) are skipped."""
    out = Cumulative()
    untimed: dict[str, int] = {}
    for line in lines:
        match = _ENTRY.match(line.strip())
        if match is None:
            continue
        kind, key_text, value_text = match.groups()
        key, value = int(key_text), int(value_text)
        layer_id, idx = divmod(key, KEY_STRIDE) if kind == "h" else (key, 0)
        if layer_id >= len(TRACED_LAYERS):
            continue
        layer = TRACED_LAYERS[layer_id]
        if kind == "h":
            out.hists.setdefault(layer, Histogram()).counts[idx] = value
        elif kind == "s":
            out.bytes[layer] = value * SECTOR_BYTES
        else:
            untimed[layer] = value
    for layer in TRACED_LAYERS:
        if layer.startswith("device_") and (layer in out.hists or layer in untimed):
            timed = out.hists[layer].count if layer in out.hists else 0
            out.completed[layer] = timed + untimed.get(layer, 0)
    return out


class Tracer:
    """The bpftrace process of a run: `start` (waits for its first print), `snapshot`
    (the latest complete cumulative print), `stop`."""

    def __init__(self, pid: int, devices: Sequence[str]) -> None:
        self.text = script(pid, device_numbers(devices), os.getpid())
        self._proc: subprocess.Popen[str] | None = None
        self._prints: deque[tuple[float, Cumulative]] = deque(maxlen=KEEP_PRINTS)
        self._first = threading.Event()
        self._errors: list[str] = []
        self._started = time.monotonic()
        self.prints = 0

    def start(self) -> str | None:
        """Start tracing; None once the first print arrived, else why it did not."""
        bpftrace = shutil.which("bpftrace") or "bpftrace"
        try:
            # its own session: a Ctrl-C of the run is ours to pass on. A client killed
            # outright closes the pipe, and bpftrace dies of SIGPIPE at its next print.
            self._proc = subprocess.Popen(
                [bpftrace, "-e", self.text],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
                env={**os.environ, "BPFTRACE_MAP_KEYS_MAX": str(MAP_KEYS_MAX)},
            )
        except OSError as exc:
            return f"not traced: bpftrace did not start ({exc})"
        threading.Thread(target=self._read, name="slob-ebpf", daemon=True).start()
        threading.Thread(target=self._read_errors, name="slob-ebpf-err", daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._first.wait(0.1):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                detail = next((e for e in self._errors if "ERROR" in e), None)
                return "not traced: bpftrace did not start" + (f" ({detail})" if detail else "")
        return None

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        lines: list[str] = []
        for line in self._proc.stdout:
            if line.startswith(_MARKER):
                # (arrival, print): bpftrace reads the maps as it prints them, so a print's
                # moment is its arrival (within the pipe's latency)
                self._prints.append((time.time(), parse_print(lines)))
                self.prints += 1
                if not self._first.is_set():  # attached: the probes run from here
                    self._started = time.monotonic()
                self._first.set()
                lines = []
            else:
                lines.append(line)

    def _read_errors(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            self._errors.append(line.strip())
            del self._errors[:-20]

    def ask(self) -> None:
        """Ask the kernel for a print now (the script's getsid probe: a call that fails)."""
        with contextlib.suppress(OSError):
            os.getsid(ASK_PID)

    def snapshot(self) -> Cumulative:
        """The latest print."""
        return self._prints[-1][1] if self._prints else Cumulative()

    def at(self, moment: float) -> Cumulative:
        """The print nearest `moment` (epoch s): when the latest is older than the moment,
        asks for one and waits for it (at most two print periods)."""
        deadline = time.monotonic() + 2 * PRINT_EVERY_MS / 1000
        if not self._prints or self._prints[-1][0] < moment:
            self.ask()  # a moment no boundary asked at (the window's early end): now
        while (
            self._proc is not None
            and self._proc.poll() is None
            and (not self._prints or self._prints[-1][0] < moment)
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        prints = list(self._prints)
        if not prints:
            return Cumulative()
        return min(prints, key=lambda p: abs(p[0] - moment))[1]

    def skipped(self) -> int | None:
        """Probe runs the kernel skipped so far (its recursion guard: a probe firing, e.g.
        a completion interrupt, on a CPU already running one of these programs), summed
        over the programs (/proc/PID/fdinfo's recursion_misses); None when unreadable."""
        return self._programs_sum("recursion_misses")

    def probes_cpu_s(self) -> float | None:
        """CPU seconds the probe programs ran so far, when the kernel counts it
        (kernel.bpf_stats_enabled = 1: bench/ebpf_cost.py --bpf_stats 1); else None."""
        try:
            if BPF_STATS.read_text().strip() != "1":
                return None
        except OSError:
            return None
        total_ns = self._programs_sum("run_time_ns")
        return None if total_ns is None else total_ns / 1e9

    def _programs_sum(self, name: str) -> int | None:
        """A counter of /proc/PID/fdinfo summed over bpftrace's programs (None: unreadable)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return None
        total, seen = 0, False
        fdinfo = Path(f"/proc/{proc.pid}/fdinfo")
        try:
            for entry in fdinfo.iterdir():
                try:
                    text = entry.read_text()
                except OSError:
                    continue
                for line in text.splitlines():
                    if line.startswith(f"{name}:"):
                        total, seen = total + int(line.split()[1]), True
        except OSError:
            return None
        return total if seen else None

    def cpu_s(self) -> float | None:
        """CPU seconds the bpftrace process used so far (user + system; the probes
        themselves run in the traced processes' time)."""
        proc = self._proc
        if proc is None:
            return None
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def died(self) -> str | None:
        """Why the layers are not measured when bpftrace ended before `stop` (None: it
        ran throughout): what it printed stops there, so no figure of it stands."""
        proc = self._proc
        if proc is None or proc.poll() is None:
            return None
        detail = next((e for e in reversed(self._errors) if "RLIMIT" not in e), None)
        return f"not measured: bpftrace ended during the run (exit status {proc.returncode}" + (
            f": {detail})" if detail else ")"
        )

    def note(self) -> str:
        cpu, probes = self.cpu_s(), self.probes_cpu_s()
        used = "" if cpu is None else f", {cpu:.2f} s of CPU"
        if probes is not None:
            elapsed = time.monotonic() - self._started
            used += f"; its probes {probes:.3f} s of CPU in {elapsed:.1f} s"
        return f"latency layers traced in the kernel by bpftrace ({self.prints} prints{used})"

    def stop(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGINT)  # detaches its probes; END clears the maps
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


class LayerSeries:
    """Intervals of the traced layers, read at the moments the host counters are (the
    sampler's): `mark` at a phase's start, `boundary` as each interval's end passes,
    `interval` when it closes (the difference since the previous one, added to the
    window's when in it). Each reading is the kernel's print nearest that moment."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self._prev: Cumulative | None = None
        self._prev_at = 0.0
        self._boundaries: dict[int, float] = {}
        self.window = Cumulative()
        self.window_intervals = 0

    def mark(self) -> None:
        self.tracer.ask()
        self._prev, self._prev_at, self._boundaries = None, time.time(), {}

    def boundary(self, index: int) -> None:
        self.tracer.ask()
        self._boundaries[index] = time.time()

    def interval(self, index: int, in_window: bool, at: float | None = None) -> Cumulative:
        """Interval `index` closes; `at`: its end when the caller knows it (the window's
        end), else the moment its boundary passed (else now)."""
        moment = at if at is not None else self._boundaries.get(index, time.time())
        for old in [i for i in self._boundaries if i <= index]:
            del self._boundaries[old]
        before = self._prev if self._prev is not None else self.tracer.at(self._prev_at)
        now = self.tracer.at(moment)
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
