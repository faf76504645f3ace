"""OS counters: /proc/diskstats, /proc/stat, /proc/pressure and the server processes' CPU.

Every ``parse_*`` function takes the TEXT of a /proc file, so the same code serves a remote
server whose files are read through the database connection; only the ``read_*`` functions
touch the local /proc.
"""

from __future__ import annotations

import os
import time
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, fields

from openslob.host.procfs import COUNTER_WRAP, MIB, PROC, PSI_RESOURCES, SECTOR_BYTES, _read_text
from openslob.model.rates import ratio

# --------------------------------------------------------------------------------------------
# /proc/diskstats


@dataclass(frozen=True)
class DiskCounters:
    """One /proc/diskstats line (Documentation/admin-guide/iostats.rst); times in ms."""

    reads: int
    reads_merged: int
    sectors_read: int
    read_ms: int
    writes: int
    writes_merged: int
    sectors_written: int
    write_ms: int
    in_flight: int  # a gauge, not a counter
    io_ms: int  # io_ticks: time with at least one I/O in flight
    weighted_ms: int  # time_in_queue: sum of every I/O's time
    discards: int | None = None  # kernel >= 4.18
    discards_merged: int | None = None
    sectors_discarded: int | None = None
    discard_ms: int | None = None
    flushes: int | None = None  # kernel >= 5.5
    flush_ms: int | None = None


_DISK_FIELDS = [f.name for f in fields(DiskCounters)]


@dataclass(frozen=True)
class DiskstatsSample:
    monotonic: float
    devices: dict[str, DiskCounters]


def parse_diskstats(text: str, wanted: Container[str] | None = None) -> dict[str, DiskCounters]:
    """Device name -> counters (only those in `wanted` when given: a host with hundreds of
    devices parses the run's few). Lines of the pre-2.6.25 partition format are skipped."""
    devices = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14 or (wanted is not None and parts[2] not in wanted):
            continue
        values = [int(v) for v in parts[3 : 3 + len(_DISK_FIELDS)]]
        devices[parts[2]] = DiskCounters(*values)
    return devices


def read_diskstats() -> DiskstatsSample:
    now = time.monotonic()
    return DiskstatsSample(now, parse_diskstats(_read_text(PROC / "diskstats")))


def counter_delta(before: int, after: int) -> int:
    """after - before for a counter that may have wrapped at 2**32 (the ms fields on every
    kernel, the counts on 32-bit ones); a counter that went back further was reset."""
    delta = after - before
    if delta < 0:
        delta += COUNTER_WRAP
    return delta if delta >= 0 else after


def _disk_counters_delta(before: DiskCounters, after: DiskCounters) -> DiskCounters:
    values = {}
    for name in _DISK_FIELDS:
        b, a = getattr(before, name), getattr(after, name)
        if name == "in_flight":
            values[name] = a
        elif a is None or b is None:
            values[name] = None
        else:
            values[name] = counter_delta(b, a)
    return DiskCounters(**values)


@dataclass(frozen=True)
class DiskRates:
    reads_per_s: float
    writes_per_s: float
    read_mb_per_s: float  # MiB
    write_mb_per_s: float
    read_latency_us: float | None  # None: no reads completed, nothing to time
    write_latency_us: float | None
    avg_read_kb: float | None  # KiB per read request
    avg_write_kb: float | None
    util_pct: float  # busiest device when several; ~meaningless for parallel (flash) devices
    avg_queue: float  # average I/Os in flight, summed over devices
    flushes_per_s: float | None  # None: kernel without flush counters
    flush_latency_us: float | None


def _sum_optional(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _rates(deltas: list[DiskCounters], seconds: float) -> DiskRates:
    if seconds <= 0:
        raise ValueError(f"elapsed time must be positive, got {seconds}")
    reads = sum(d.reads for d in deltas)
    writes = sum(d.writes for d in deltas)
    read_bytes = sum(d.sectors_read for d in deltas) * SECTOR_BYTES
    write_bytes = sum(d.sectors_written for d in deltas) * SECTOR_BYTES
    # ops-weighted: total time over total count, not a mean of per-device means
    read_ms = sum(d.read_ms for d in deltas)
    write_ms = sum(d.write_ms for d in deltas)
    flushes = _sum_optional(d.flushes for d in deltas)
    flush_ms = _sum_optional(d.flush_ms for d in deltas)
    elapsed_ms = seconds * 1000
    return DiskRates(
        reads_per_s=reads / seconds,
        writes_per_s=writes / seconds,
        read_mb_per_s=read_bytes / MIB / seconds,
        write_mb_per_s=write_bytes / MIB / seconds,
        read_latency_us=ratio(read_ms * 1000, reads),
        write_latency_us=ratio(write_ms * 1000, writes),
        avg_read_kb=ratio(read_bytes / 1024, reads),
        avg_write_kb=ratio(write_bytes / 1024, writes),
        util_pct=min(100.0, max(d.io_ms for d in deltas) / elapsed_ms * 100),
        avg_queue=sum(d.weighted_ms for d in deltas) / elapsed_ms,
        flushes_per_s=None if flushes is None else flushes / seconds,
        flush_latency_us=None if flush_ms is None else ratio(flush_ms * 1000, flushes or 0),
    )


def disk_delta(before: DiskCounters, after: DiskCounters, seconds: float) -> DiskRates:
    return _rates([_disk_counters_delta(before, after)], seconds)


def sum_disk_delta(
    before: Mapping[str, DiskCounters],
    after: Mapping[str, DiskCounters],
    seconds: float,
    names: Iterable[str],
) -> DiskRates | None:
    """Rates over several devices (pass devices that do not stack, e.g. not dm-0 and its
    slave both); None when none of them is in both samples."""
    deltas = [
        _disk_counters_delta(before[n], after[n]) for n in names if n in before and n in after
    ]
    return _rates(deltas, seconds) if deltas else None


# --------------------------------------------------------------------------------------------
# /proc/stat


@dataclass(frozen=True)
class CpuTimes:
    """Aggregate jiffies (USER_HZ) of the `cpu` line; guest time is already inside user/nice."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int | None  # absent before 2.6.11
    guest: int | None
    guest_nice: int | None


@dataclass(frozen=True)
class ProcStat:
    cpu: CpuTimes
    cpus: int  # online CPUs (cpuN lines)
    ctxt: int | None
    procs_running: int | None


def parse_proc_stat(text: str) -> ProcStat:
    cpu: CpuTimes | None = None
    cpus = 0
    ctxt = procs_running = None
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        key = parts[0]
        if key == "cpu":
            numbers = [int(v) for v in parts[1:11]]
            values: list[int | None] = [*numbers, *[None] * (10 - len(numbers))]
            cpu = CpuTimes(*[v or 0 for v in values[:7]], *values[7:])
        elif key.startswith("cpu") and key[3:].isdigit():
            cpus += 1
        elif key == "ctxt":
            ctxt = int(parts[1])
        elif key == "procs_running":
            procs_running = int(parts[1])
    if cpu is None:
        raise ValueError("no aggregate 'cpu' line in /proc/stat text")
    return ProcStat(cpu=cpu, cpus=cpus, ctxt=ctxt, procs_running=procs_running)


def read_proc_stat() -> ProcStat:
    return parse_proc_stat(_read_text(PROC / "stat"))


@dataclass(frozen=True)
class CpuRates:
    """Percentages of all CPU time of all CPUs: 100 % means every CPU busy."""

    user_pct: float | None  # user + nice
    sys_pct: float | None  # system + irq + softirq
    iowait_pct: float | None
    idle_pct: float | None
    steal_pct: float | None
    busy_pct: float | None  # everything but idle and iowait (steal included: CPU we lacked)
    cpus: int
    context_switches_per_s: float | None


def cpu_delta(before: ProcStat, after: ProcStat, seconds: float | None = None) -> CpuRates:
    def d(name: str) -> int:
        b, a = getattr(before.cpu, name), getattr(after.cpu, name)
        # idle/iowait may step back on NO_HZ kernels: clamp rather than report a negative time
        return max(0, a - b) if a is not None and b is not None else 0

    user, system = d("user") + d("nice"), d("system") + d("irq") + d("softirq")
    idle, iowait, steal = d("idle"), d("iowait"), d("steal")
    total = user + system + idle + iowait + steal  # guest is inside user/nice already
    has_steal = before.cpu.steal is not None and after.cpu.steal is not None
    ctxt = (
        counter_delta(before.ctxt, after.ctxt)
        if before.ctxt is not None and after.ctxt is not None
        else None
    )
    return CpuRates(
        user_pct=ratio(user, total, 100),
        sys_pct=ratio(system, total, 100),
        iowait_pct=ratio(iowait, total, 100),
        idle_pct=ratio(idle, total, 100),
        steal_pct=ratio(steal, total, 100) if has_steal else None,
        busy_pct=ratio(total - idle - iowait, total, 100),
        cpus=after.cpus,
        context_switches_per_s=ratio(ctxt, seconds) if ctxt is not None and seconds else None,
    )


# --------------------------------------------------------------------------------------------
# Pressure stall information (/proc/pressure, kernel >= 4.20 with CONFIG_PSI)


@dataclass(frozen=True)
class PressureLine:
    avg10: float
    avg60: float
    avg300: float
    total_us: int


def parse_pressure(text: str) -> dict[str, PressureLine]:
    """{"some": ..., "full": ...} from one /proc/pressure/<resource> file."""
    lines = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] not in ("some", "full"):
            continue
        kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        lines[parts[0]] = PressureLine(
            float(kv["avg10"]), float(kv["avg60"]), float(kv["avg300"]), int(kv["total"])
        )
    return lines


def read_pressure() -> dict[str, dict[str, PressureLine]] | None:
    """Resource -> lines; None when the kernel has no PSI (or it is disabled: psi=0)."""
    result = {}
    for resource in PSI_RESOURCES:
        try:
            result[resource] = parse_pressure(_read_text(PROC / "pressure" / resource))
        except OSError:  # absent, or EOPNOTSUPP when built in but switched off
            continue
    return result or None


def pressure_delta(
    before: Mapping[str, Mapping[str, PressureLine]] | None,
    after: Mapping[str, Mapping[str, PressureLine]] | None,
    seconds: float,
) -> dict[str, dict[str, float | None]] | None:
    """Share of the window (%) during which some / all tasks stalled on each resource."""
    if before is None or after is None or seconds <= 0:
        return None
    out: dict[str, dict[str, float | None]] = {}
    for resource in PSI_RESOURCES:
        b, a = before.get(resource, {}), after.get(resource, {})
        out[resource] = {
            kind: (
                min(100.0, max(0, a[kind].total_us - b[kind].total_us) / (seconds * 1e6) * 100)
                if kind in a and kind in b
                else None
            )
            for kind in ("some", "full")
        }
    return out


# --------------------------------------------------------------------------------------------
# Processes


@dataclass(frozen=True)
class PidStat:
    """The fields of /proc/PID/stat we use; times in clock ticks (SC_CLK_TCK)."""

    pid: int
    comm: str
    state: str
    ppid: int
    utime: int
    stime: int
    cutime: int  # children that exited and were waited for
    cstime: int


def parse_pid_stat(text: str) -> PidStat:
    # comm may hold spaces and ')' itself: it ends at the LAST ')'
    open_paren, close_paren = text.index("("), text.rindex(")")
    rest = text[close_paren + 1 :].split()  # rest[0] is field 3 (state)
    return PidStat(
        pid=int(text[:open_paren]),
        comm=text[open_paren + 1 : close_paren],
        state=rest[0],
        ppid=int(rest[1]),
        utime=int(rest[11]),  # field 14
        stime=int(rest[12]),  # field 15
        cutime=int(rest[13]),
        cstime=int(rest[14]),
    )


def read_pid_stat(pid: int, thread: bool = False) -> PidStat | None:
    """None when the process is gone (it may exit between listing and reading). thread:
    the task's own figures (a thread's, or a single-threaded process's)."""
    path = PROC / str(pid) / "task" / str(pid) / "stat" if thread else PROC / str(pid) / "stat"
    try:
        return parse_pid_stat(_read_text(path))
    except (OSError, ValueError, IndexError):
        return None


def _all_pid_stats() -> list[PidStat]:
    stats = []
    for entry in os.scandir(PROC):
        if entry.name.isdigit():
            st = read_pid_stat(int(entry.name))
            if st is not None:
                stats.append(st)
    return stats


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` (PostgreSQL backends are children of the postmaster)."""
    return sorted(st.pid for st in _all_pid_stats() if st.ppid == pid)


def process_tree(pid: int) -> list[int]:
    """`pid` and all its living descendants, from one scan of /proc; [] when pid is gone."""
    stats = _all_pid_stats()
    if not any(st.pid == pid for st in stats):
        return []
    kids: dict[int, list[int]] = {}
    for st in stats:
        kids.setdefault(st.ppid, []).append(st.pid)
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(kids.get(current, []))
    return tree


def pid_alive(pid: int) -> bool:
    """True while the process exists (EPERM: it exists but belongs to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_cpu_seconds(pids: Iterable[int], include_reaped: bool = False) -> float:
    """utime + stime of the processes (vanished ones skipped), in seconds.

    include_reaped adds the time of their children that already exited and were waited for,
    so a process tree's total survives backends that come and go within the window.
    """
    ticks = 0
    for pid in pids:
        st = read_pid_stat(pid)
        if st is None:
            continue
        ticks += st.utime + st.stime
        if include_reaped:
            ticks += st.cutime + st.cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def tasks_cpu_seconds(tasks: Iterable[int]) -> dict[int, float]:
    """CPU seconds of each task (a single-threaded process, or a thread of a server
    process); the ones gone are left out. The task's own (/proc/TID/task/TID/...; a
    thread's /proc/TID/stat sums its whole process). Its time on a CPU in ns (schedstat)
    where the kernel keeps it, else utime + stime: clock ticks, 10 ms steps, which over a
    10 s window made the monitors' CPU 0, 1 or 2 ms a second of the same work (0.05 % of a
    2-vCPU host each step, in a share whose goal is 1 %). A task running as it is read is
    counted up to its last tick (the kernel updates the figure then, and when it sleeps):
    the monitors are read between their queries."""
    tasks = list(tasks)
    if _schedstat_kept():  # one source for every task and both ends
        found_ns = {task: _schedstat_ns(task) for task in tasks}
        return {task: ns / 1e9 for task, ns in found_ns.items() if ns is not None}
    tick = os.sysconf("SC_CLK_TCK")
    found = {task: read_pid_stat(task, thread=True) for task in tasks}
    return {task: (st.utime + st.stime) / tick for task, st in found.items() if st is not None}


def _schedstat_kept() -> bool:
    """The kernel keeps tasks' time on a CPU in schedstat: this running process has some
    (a kernel without schedstats nor delay accounting writes "0 0 0" there)."""
    try:
        return int(_read_text(PROC / "self/schedstat").split()[0]) > 0
    except (OSError, ValueError, IndexError):
        return False


def _schedstat_ns(task: int) -> int | None:
    """The task's time on a CPU so far, in ns (the first field of its schedstat)."""
    try:
        return int(_read_text(PROC / f"{task}/task/{task}/schedstat").split()[0])
    except (OSError, ValueError, IndexError):  # gone, or not the kernel's format
        return None


def server_cpu_seconds(server_pid: int) -> float | None:
    """CPU consumed so far by a server process tree (e.g. postmaster and backends)."""
    tree = process_tree(server_pid)
    return process_cpu_seconds(tree, include_reaped=True) if tree else None
