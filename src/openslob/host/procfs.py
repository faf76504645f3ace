"""Reading /proc and /sys: the few helpers and constants every host module uses.

A figure that cannot be measured is None, never 0.
"""

from __future__ import annotations

from pathlib import Path

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
