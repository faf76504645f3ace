"""OS counters of the host: block devices, CPU, pressure stall information, server processes.

Every ``parse_*`` function takes the TEXT of a /proc file, so the same code serves a remote
server whose files are read through the database connection; only the ``read_*``,
``take_snapshot``, ``devices_for_path``, ``describe_devices`` and ``host_info`` functions touch
the local /proc and /sys. A figure that cannot be measured is ``None``, never 0.
"""

from __future__ import annotations

import os
import platform
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path

from openslob.rates import ratio

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size
MIB = 2**20
COUNTER_WRAP = 2**32  # the ms fields are printed as unsigned int even on 64-bit kernels
PSI_RESOURCES = ("cpu", "io", "memory")

PROC = Path("/proc")
SYS_CLASS_BLOCK = Path("/sys/class/block")  # holds partitions too, unlike /sys/block
SYS_DEV_BLOCK = Path("/sys/dev/block")


def _read_text(path: str | Path) -> str:
    # /proc text may carry arbitrary bytes (a process's comm); never fail decoding it
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _read_optional(path: Path) -> str | None:
    try:
        return _read_text(path).strip()
    except OSError:
        return None


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# Block devices behind a path


@dataclass(frozen=True)
class DeviceInfo:
    name: str  # as in /proc/diskstats
    disk: str | None  # the whole disk when `name` is a partition
    model: str | None
    rotational: bool | None
    logical_block_size: int | None
    scheduler: str | None
    size_bytes: int | None
    slaves: tuple[str, ...]  # devices under a dm-*/md* device, recursively, depth first


def _sysfs_name(name: str) -> str:
    return name.replace("/", "!")  # sysfs spells cciss/c0d0 as cciss!c0d0


def _diskstats_name(sysfs_name: str) -> str:
    return sysfs_name.replace("!", "/")


def _block_name_of_dev(major: int, minor: int) -> str | None:
    link = SYS_DEV_BLOCK / f"{major}:{minor}"
    if not link.exists():
        return None
    return _diskstats_name(link.resolve().name)


def _is_partition(name: str) -> bool:
    return (SYS_CLASS_BLOCK / _sysfs_name(name) / "partition").exists()


def _parent_disk(name: str) -> str | None:
    if not _is_partition(name):
        return None
    return _diskstats_name((SYS_CLASS_BLOCK / _sysfs_name(name)).resolve().parent.name)


def _unescape_mountinfo(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[tuple[str, str, str]]:
    """(mount point, file system type, source) per line of /proc/PID/mountinfo."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lfields, rfields = left.split(), right.split()
        if len(lfields) < 5 or len(rfields) < 2:
            continue
        mounts.append(
            (_unescape_mountinfo(lfields[4]), rfields[0], _unescape_mountinfo(rfields[1]))
        )
    return mounts


def _mount_source_device(path: str) -> str | None:
    """The block device named as the source of the mount holding `path` (btrfs and others
    whose st_dev is an anonymous 0:N number)."""
    real = os.path.realpath(path)
    best: tuple[str, str] | None = None
    for mount_point, _fstype, source in parse_mountinfo(_read_text(PROC / "self/mountinfo")):
        inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
        # `>=`: of equal mount points the later one is on top
        if inside and (best is None or len(mount_point) >= len(best[0])):
            best = (mount_point, source)
    if best is None or not best[1].startswith("/dev/"):
        return None
    try:
        rdev = os.stat(best[1]).st_rdev
    except OSError:
        return None
    return _block_name_of_dev(os.major(rdev), os.minor(rdev)) if rdev else None


def devices_for_path(path: str | os.PathLike[str]) -> list[str]:
    """The /proc/diskstats names of the block devices holding `path`'s file system.

    A partition is reported itself (its counters are exactly that file system's I/O); a dm/md
    device is reported itself too, its slaves being listed by `describe_devices`. Empty for
    file systems with no block device (tmpfs, overlay, NFS, ZFS).
    """
    st = os.stat(path)
    name = _block_name_of_dev(os.major(st.st_dev), os.minor(st.st_dev))
    if name is None:
        name = _mount_source_device(os.fspath(path))
    if name is None:
        return []
    known = parse_diskstats(_read_text(PROC / "diskstats"))
    if name in known:
        return [name]
    parent = _parent_disk(name)
    return [parent] if parent is not None and parent in known else []


def _selected_scheduler(text: str | None) -> str | None:
    """'none [mq-deadline] kyber' -> 'mq-deadline'."""
    if not text:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    words = text.split()
    return words[0] if len(words) == 1 else None


def _slaves(name: str, seen: set[str] | None = None) -> list[str]:
    seen = set() if seen is None else seen
    slave_dir = SYS_CLASS_BLOCK / _sysfs_name(name) / "slaves"
    try:
        entries = sorted(p.name for p in slave_dir.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        slave = _diskstats_name(entry)
        if slave in seen:
            continue
        seen.add(slave)
        found.append(slave)
        found.extend(_slaves(slave, seen))
    return found


def device_info(name: str) -> DeviceInfo:
    """What sysfs says about one block device; queue attributes come from the whole disk."""
    disk = _parent_disk(name)
    queue_owner = SYS_CLASS_BLOCK / _sysfs_name(disk or name)
    rotational = _int_or_none(_read_optional(queue_owner / "queue/rotational"))
    sectors = _int_or_none(_read_optional(SYS_CLASS_BLOCK / _sysfs_name(name) / "size"))
    return DeviceInfo(
        name=name,
        disk=disk,
        model=_read_optional(queue_owner / "device/model") or None,
        rotational=None if rotational is None else bool(rotational),
        logical_block_size=_int_or_none(_read_optional(queue_owner / "queue/logical_block_size")),
        scheduler=_selected_scheduler(_read_optional(queue_owner / "queue/scheduler")),
        size_bytes=None if sectors is None else sectors * SECTOR_BYTES,  # sysfs size: 512 units
        slaves=tuple(_slaves(name)),
    )


def describe_devices(names: Iterable[str]) -> list[dict]:
    """JSON-ready descriptions for run.json's host.devices."""
    out = []
    for name in names:
        info = asdict(device_info(name))
        info["slaves"] = list(info["slaves"])
        out.append(info)
    return out


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


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    """Device name -> counters. Lines of the pre-2.6.25 partition format are skipped."""
    devices = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14:
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
            values: list[int | None] = [int(v) for v in parts[1:11]]
            values += [None] * (10 - len(values))
            values[:7] = [v or 0 for v in values[:7]]
            cpu = CpuTimes(*values)
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


def read_pid_stat(pid: int) -> PidStat | None:
    """None when the process is gone (it may exit between listing and reading)."""
    try:
        return parse_pid_stat(_read_text(PROC / str(pid) / "stat"))
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


# The device and CPU figures of host_delta that run.json always carries (null if unmeasured).
DEVICE_CPU_METRICS = (
    "device_reads_per_s",
    "device_writes_per_s",
    "device_read_mb_per_s",
    "device_write_mb_per_s",
    "device_read_latency_us",
    "device_write_latency_us",
    "device_util_pct",
    "cpu_user_pct",
    "cpu_sys_pct",
    "cpu_iowait_pct",
)


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


def server_cpu_seconds(server_pid: int) -> float | None:
    """CPU consumed so far by a server process tree (e.g. postmaster and backends)."""
    tree = process_tree(server_pid)
    return process_cpu_seconds(tree, include_reaped=True) if tree else None


# --------------------------------------------------------------------------------------------
# Snapshots


@dataclass(frozen=True)
class HostSnapshot:
    monotonic: float
    wall_time: str  # ISO-8601 UTC
    disks: dict[str, DiskCounters]  # only the devices asked for
    proc_stat: ProcStat
    pressure: dict[str, dict[str, PressureLine]] | None
    server_cpu_seconds: float | None


def snapshot_from_text(
    monotonic: float,
    wall_time: str,
    device_names: Iterable[str],
    diskstats_text: str,
    proc_stat_text: str,
    pressure_texts: Mapping[str, str] | None,
    server_cpu_seconds: float | None = None,
) -> HostSnapshot:
    """A snapshot from file texts read anywhere (locally or through a database)."""
    wanted = set(device_names)
    disks = {n: c for n, c in parse_diskstats(diskstats_text).items() if n in wanted}
    pressure = {r: parse_pressure(t) for r, t in pressure_texts.items()} if pressure_texts else None
    return HostSnapshot(
        monotonic=monotonic,
        wall_time=wall_time,
        disks=disks,
        proc_stat=parse_proc_stat(proc_stat_text),
        pressure=pressure,
        server_cpu_seconds=server_cpu_seconds,
    )


# ------------------------------------------------------------------ another host's /proc
# A server on another host (or in a container): its /proc read through some `read(path)`
# (pg_read_file through the database connection), parsed by the same functions.

FileReader = Callable[[str], str | None]


def devices_from_texts(path: str, mountinfo: str, diskstats: str) -> list[str]:
    """devices_for_path for a file system seen only through its host's /proc texts: the
    mount holding `path` (longest mount point), its major:minor matched in diskstats."""
    best: tuple[str, str, str] | None = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        lfields, rfields = left.split(), right.split()
        if not sep or len(lfields) < 5 or len(rfields) < 2:
            continue
        mount_point = _unescape_mountinfo(lfields[4])
        inside = path == mount_point or path.startswith(mount_point.rstrip("/") + "/")
        if inside and (best is None or len(mount_point) >= len(best[0])):
            best = (mount_point, lfields[2], _unescape_mountinfo(rfields[1]))
    if best is None:
        return []
    by_number = {}
    for line in diskstats.splitlines():
        parts = line.split()
        if len(parts) >= 14:
            by_number[f"{parts[0]}:{parts[1]}"] = parts[2]
    name = by_number.get(best[1])
    source = best[2].rsplit("/", 1)[-1]
    if name is None and best[2].startswith("/dev/") and source in by_number.values():
        name = source  # btrfs & co: an anonymous st_dev, the source names the device
    return [name] if name else []


def read_snapshot(read: FileReader, device_names: Iterable[str]) -> HostSnapshot:
    """take_snapshot through a reader; no server CPU (its process tree is not reachable)."""
    monotonic, wall_time = time.monotonic(), datetime.now(UTC).isoformat()
    diskstats, proc_stat = read("/proc/diskstats"), read("/proc/stat")
    if diskstats is None or proc_stat is None:
        raise OSError("/proc/diskstats or /proc/stat is not readable on the server's host")
    pressure = {r: t for r in ("cpu", "io", "memory") if (t := read(f"/proc/pressure/{r}"))}
    return snapshot_from_text(
        monotonic, wall_time, device_names, diskstats, proc_stat, pressure or None
    )


def read_host_info(read: FileReader, devices: list[str]) -> dict:
    """run.json's "host" for the server's host, from its /proc (None where unreadable)."""
    stat, meminfo, cpuinfo = read("/proc/stat"), read("/proc/meminfo"), read("/proc/cpuinfo")
    hostname, kernel = read("/proc/sys/kernel/hostname"), read("/proc/sys/kernel/osrelease")
    return {
        "hostname": hostname.strip() if hostname else None,
        "cpus": parse_proc_stat(stat).cpus if stat else None,
        "cpu_model": parse_cpu_model(cpuinfo) if cpuinfo else None,
        "memory_bytes": parse_meminfo(meminfo).get("MemTotal") if meminfo else None,
        "kernel": kernel.strip() if kernel else None,
        "os": None,
        # sysfs details (size, scheduler) are this host's view: only the names travel
        "devices": [{"name": name} for name in devices],
        "read_through": "database (pg_read_file)",
    }


def take_snapshot(device_names: Iterable[str], server_pid: int | None = None) -> HostSnapshot:
    wanted = set(device_names)
    wall_time = datetime.now(UTC).isoformat()
    disk_sample = read_diskstats()
    return HostSnapshot(
        monotonic=disk_sample.monotonic,
        wall_time=wall_time,
        disks={n: c for n, c in disk_sample.devices.items() if n in wanted},
        proc_stat=read_proc_stat(),
        pressure=read_pressure(),
        server_cpu_seconds=server_cpu_seconds(server_pid) if server_pid is not None else None,
    )


def host_delta(before: HostSnapshot, after: HostSnapshot) -> dict[str, float | None]:
    """The run.json "metrics" figures the host provides, over the window between snapshots."""
    seconds = after.monotonic - before.monotonic
    if seconds <= 0:
        raise ValueError("the 'after' snapshot must be later than the 'before' one")
    disk = sum_disk_delta(before.disks, after.disks, seconds, sorted(before.disks))
    cpu = cpu_delta(before.proc_stat, after.proc_stat, seconds)
    psi = pressure_delta(before.pressure, after.pressure, seconds)
    server = None
    if before.server_cpu_seconds is not None and after.server_cpu_seconds is not None:
        # rounded: both are whole clock ticks, the float difference is not
        spent = round(after.server_cpu_seconds - before.server_cpu_seconds, 6)
        # Backwards means the process tree died or was replaced: not measurable, not 0.
        server = spent if spent >= 0 else None
    cpus = after.proc_stat.cpus

    def dev(attr: str) -> float | None:
        return None if disk is None else getattr(disk, attr)

    def pressure(resource: str, kind: str) -> float | None:
        return None if psi is None else psi[resource][kind]

    return {
        "device_reads_per_s": dev("reads_per_s"),
        "device_writes_per_s": dev("writes_per_s"),
        "device_read_mb_per_s": dev("read_mb_per_s"),
        "device_write_mb_per_s": dev("write_mb_per_s"),
        "device_read_latency_us": dev("read_latency_us"),
        "device_write_latency_us": dev("write_latency_us"),
        "device_avg_read_kb": dev("avg_read_kb"),
        "device_avg_write_kb": dev("avg_write_kb"),
        "device_util_pct": dev("util_pct"),
        "device_avg_queue": dev("avg_queue"),
        "device_flushes_per_s": dev("flushes_per_s"),
        "device_flush_latency_us": dev("flush_latency_us"),
        "cpu_user_pct": cpu.user_pct,
        "cpu_sys_pct": cpu.sys_pct,
        "cpu_iowait_pct": cpu.iowait_pct,
        "cpu_idle_pct": cpu.idle_pct,
        "cpu_steal_pct": cpu.steal_pct,
        "cpu_busy_pct": cpu.busy_pct,
        "context_switches_per_s": cpu.context_switches_per_s,
        "server_cpu_seconds": server,
        # share of all CPUs the server used, comparable with cpu_busy_pct
        "server_cpu_pct": ratio(server, seconds * cpus, 100) if server is not None else None,
        "psi_io_some_pct": pressure("io", "some"),
        "psi_io_full_pct": pressure("io", "full"),
        "psi_cpu_some_pct": pressure("cpu", "some"),
        "psi_memory_some_pct": pressure("memory", "some"),
        "psi_memory_full_pct": pressure("memory", "full"),
    }


# --------------------------------------------------------------------------------------------
# Host description for run.json


def parse_meminfo(text: str) -> dict[str, int]:
    """Field -> bytes (the kB values of /proc/meminfo are KiB)."""
    info = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        parts = value.split()
        if sep and parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1] == "kB" else 1
            info[key.strip()] = int(parts[0]) * scale
    return info


def parse_os_release(text: str) -> dict[str, str]:
    info = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            info[key] = value.strip().strip("\"'")
    return info


def parse_cpu_model(cpuinfo_text: str) -> str | None:
    for line in cpuinfo_text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "model name":
            return value.strip() or None
    return None


def host_info(path: str | os.PathLike[str]) -> dict:
    """run.json's "host": this machine and the devices holding `path` (the data directory)."""
    os_release = _read_optional(Path("/etc/os-release")) or _read_optional(
        Path("/usr/lib/os-release")
    )
    cpuinfo = _read_optional(PROC / "cpuinfo")
    return {
        "hostname": socket.gethostname(),
        "cpus": read_proc_stat().cpus,
        "cpu_model": parse_cpu_model(cpuinfo) if cpuinfo else None,
        "memory_bytes": parse_meminfo(_read_text(PROC / "meminfo")).get("MemTotal"),
        "kernel": platform.release(),
        "os": parse_os_release(os_release).get("PRETTY_NAME") if os_release else None,
        "devices": describe_devices(devices_for_path(path)),
    }
