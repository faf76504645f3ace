"""Block devices behind a path: mountinfo, sysfs names, partitions and their disks, device
mapper slaves, schedulers; also for a host seen only through its /proc texts."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from openslob.host.counters import parse_diskstats
from openslob.host.procfs import (
    PROC,
    SECTOR_BYTES,
    SYS_CLASS_BLOCK,
    SYS_DEV_BLOCK,
    _int_or_none,
    _read_optional,
    _read_text,
)

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
