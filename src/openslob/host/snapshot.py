"""A host's counters at one moment (local /proc, or another host's through a file reader), the
figures between two such moments, and the host's description for run.json."""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import resource
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from openslob.host.counters import (
    DiskCounters,
    PressureLine,
    ProcStat,
    cpu_delta,
    parse_diskstats,
    parse_pressure,
    parse_proc_stat,
    pressure_delta,
    read_diskstats,
    read_pressure,
    read_proc_stat,
    server_cpu_seconds,
    sum_disk_delta,
    tasks_cpu_seconds,
)
from openslob.host.devices import describe_devices, devices_for_path
from openslob.host.procfs import PROC, _read_optional, _read_text
from openslob.model.rates import ratio

# --------------------------------------------------------------------------------------------
# Snapshots

PREAD_BYTES = 1 << 16  # a /proc file read in pieces of this size
# a /proc file that is not there or not supported (PSI off: EOPNOTSUPP at open or read)
_NOT_THERE = frozenset({errno.ENOENT, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL})


@dataclass(frozen=True)
class HostSnapshot:
    monotonic: float
    wall_time: str  # ISO-8601 UTC
    disks: dict[str, DiskCounters]  # only the devices asked for
    proc_stat: ProcStat
    pressure: dict[str, dict[str, PressureLine]] | None
    server_cpu_seconds: float | None
    # this client's own CPU (all its threads) at the same moment: what measuring cost it
    client_cpu_seconds: float | None = None
    # the run's monitor connections' server tasks (Monitor.server_task), each one's CPU
    # seconds: what measuring cost the server (a local server only)
    monitors_cpu_seconds: dict[int, float] | None = None


def client_cpu_seconds() -> float:
    """CPU seconds of this process, all threads (the client: the run executes in-process)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def tasks_cpu_delta(
    before: dict[int, float] | None, after: dict[int, float] | None
) -> tuple[float | None, int]:
    """CPU seconds the tasks read at both ends spent in between, and how many they were
    (None when none was: not measured, not 0)."""
    both = sorted(set(before or {}) & set(after or {}))
    if not before or not after or not both:
        return None, 0
    spent = sum(max(after[t] - before[t], 0.0) for t in both)
    return round(spent, 6), len(both)


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
    disks = parse_diskstats(diskstats_text, frozenset(device_names))
    pressure = {r: parse_pressure(t) for r, t in pressure_texts.items()} if pressure_texts else None
    return HostSnapshot(
        monotonic=monotonic,
        wall_time=wall_time,
        disks=disks,
        proc_stat=parse_proc_stat(proc_stat_text),
        pressure=pressure,
        server_cpu_seconds=server_cpu_seconds,
        client_cpu_seconds=client_cpu_seconds(),
    )


# ------------------------------------------------------------------ another host's /proc
# A server on another host (or in a container): its /proc read through some `read(path)`
# (the engine's file-reading function through the database connection), parsed by the same
# functions.

FileReader = Callable[[str], str | None]


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


def read_host_info(read: FileReader, devices: list[str], read_through: str) -> dict:
    """run.json's "host" for the server's host, from its /proc (None where unreadable);
    `read_through` names how (the engine's term host_files, e.g. pg_read_file)."""
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
        "read_through": f"database ({read_through})",
    }


def take_snapshot(
    device_names: Iterable[str], server_pid: int | None = None, monitor_tasks: Iterable[int] = ()
) -> HostSnapshot:
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
        client_cpu_seconds=client_cpu_seconds(),
        monitors_cpu_seconds=tasks_cpu_seconds(monitor_tasks) if server_pid is not None else None,
    )


class LocalHost:
    """take_snapshot for a run's time series, which reads the same files every interval:
    they stay open and are read again from their start (a /proc file's text is made at
    each read), and only the run's devices are parsed. A snapshot took 144 us offline
    (open, a text wrapper, close for five files; every device's line), 3-5 times that in a
    64-session run, each interval; this ~60 us. The snapshot is read_snapshot's, as for a
    host read through a database. close() when the run is over."""

    def __init__(self, device_names: Iterable[str]) -> None:
        self.wanted = frozenset(device_names)
        self._fds: dict[str, int | None] = {}

    def _text(self, name: str) -> str | None:
        """The text of /proc/`name`, None when it cannot be read (no PSI, or PSI off)."""
        fd = self._fds.get(name, -1)
        try:
            if fd == -1:
                fd = self._fds[name] = os.open(PROC / name, os.O_RDONLY | os.O_CLOEXEC)
            if fd is None:
                return None
            chunks, at = [], 0
            while chunk := os.pread(fd, PREAD_BYTES, at):  # until its end, however long
                chunks.append(chunk)
                at += len(chunk)
        except OSError as exc:
            if fd not in (-1, None):
                with contextlib.suppress(OSError):
                    os.close(fd)
            # absent, or PSI built in but off: not tried again; anything else (no free
            # descriptor, no memory) is tried again at the next read
            self._fds[name] = None if exc.errno in _NOT_THERE else -1
            return None
        # /proc text may carry arbitrary bytes; never fail decoding it
        return b"".join(chunks).decode("utf-8", "replace")

    def read(self, path: str) -> str | None:
        """read_snapshot's FileReader of /proc's files, through the kept descriptors."""
        return self._text(path.removeprefix(f"{PROC}/"))

    def __call__(self) -> HostSnapshot:
        return read_snapshot(self.read, self.wanted)

    def close(self) -> None:
        for fd in self._fds.values():
            if fd not in (-1, None):
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fds.clear()


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
