"""A real slowdown for tests: a loop-device file system that a cgroup I/O throttle slows down
mid-run (issue 27 item 4). Reusable: `loop_filesystem` gives a mounted ext4 on a loop device,
`IoThrottle` caps the read/write IOPS that a process tree may do on it.

The throttle is the kernel's own block-layer throttling of the processes' cgroup: cgroup v2
`io.max` when /sys/fs/cgroup (or its `unified` mount) has the io controller, else cgroup v1
`blkio.throttle.*_iops_device`. It applies to the I/O the processes submit to the loop device
itself (bios in their context: the direct I/O of the pio profile, page-cache misses), which is
what a slower device looks like to the database. Anything missing (no loop devices, no
cgroup I/O controller) raises ThrottleUnavailable with the reason: the tests fail with it,
they never skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
BLKIO_V1 = Path("/sys/fs/cgroup/blkio")


class ThrottleUnavailable(RuntimeError):
    """This machine cannot give the throttled device; the message says why."""


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ThrottleUnavailable(f"{' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


@dataclass(frozen=True)
class LoopFs:
    image: Path  # the backing file
    device: str  # /dev/loopN
    mount: Path  # where the ext4 is mounted (0755, owned by `owner`)

    @property
    def major_minor(self) -> str:
        st = os.stat(self.device)
        return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


@contextlib.contextmanager
def loop_filesystem(prefix: str, size_mb: int, owner: str = "openslob") -> Iterator[LoopFs]:
    """A fresh ext4 of `size_mb` on a loop device (direct I/O to its backing file, so the
    host's page cache does not stand in for it), mounted under /tmp and owned by `owner`;
    unmounted, detached and removed afterwards, also when the body fails."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    base.chmod(0o755)  # ours: the server user must traverse it
    image, mount = base / "disk.img", base / "mnt"
    device = ""
    mounted = False
    try:
        with image.open("wb") as fh:
            fh.truncate(size_mb * 2**20)
        try:
            device = _run("losetup", "--find", "--show", "--direct-io=on", str(image))
        except ThrottleUnavailable:  # a backing file system without O_DIRECT
            device = _run("losetup", "--find", "--show", str(image))
        _run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", device)
        mount.mkdir(mode=0o755)
        _run("mount", device, str(mount))
        mounted = True
        shutil.chown(mount, owner, owner)
        mount.chmod(0o755)
        yield LoopFs(image, device, mount)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mount)], check=False)
        if device:
            subprocess.run(["losetup", "-d", device], check=False)
        shutil.rmtree(base, ignore_errors=True)


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _io_cgroup_root() -> tuple[Path, int]:
    """The cgroup hierarchy with an I/O controller, and its version."""
    for root in CGROUP_ROOTS:
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "io" in controllers.read_text().split():
            return root, 2
    if (BLKIO_V1 / "blkio.throttle.read_iops_device").exists():
        return BLKIO_V1, 1
    raise ThrottleUnavailable(
        "no cgroup I/O controller: neither cgroup v2 with `io` in cgroup.controllers "
        f"({', '.join(map(str, CGROUP_ROOTS))}) nor cgroup v1 blkio at {BLKIO_V1}"
    )


class IoThrottle:
    """A cgroup of our own for a process tree, whose IOPS on one device can be capped.

    Use as a context manager: entering creates the cgroup (v2: enables `io` in the parent's
    subtree_control when it is not), leaving moves the processes back and removes it."""

    def __init__(self, device: LoopFs, name: str = "openslob-throttle") -> None:
        self.device = device
        self.root, self.version = _io_cgroup_root()
        self.group = self.root / f"{name}-{os.getpid()}"
        self.moved: list[int] = []

    def __enter__(self) -> IoThrottle:
        if self.version == 2:
            control = self.root / "cgroup.subtree_control"
            if "io" not in control.read_text().split():
                control.write_text("+io")
        self.group.mkdir(exist_ok=True)
        return self

    def __exit__(self, *_exc: object) -> None:
        with contextlib.suppress(OSError):
            self.clear()
        for pid in self.moved:
            with contextlib.suppress(OSError):  # a process gone since
                (self.root / "cgroup.procs").write_text(str(pid))
        with contextlib.suppress(OSError):
            self.group.rmdir()

    def adopt(self, pid: int) -> int:
        """Move `pid` and its descendants (a postmaster and its backends) into the cgroup;
        the processes they fork later are born in it. Returns how many were moved."""
        for child in descendants(pid):
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):
                (self.group / "cgroup.procs").write_text(str(child))
                self.moved.append(child)
        return len(self.moved)

    def limit(self, read_iops: int, write_iops: int) -> None:
        """Cap the cgroup's read and write IOPS on the device (the kernel enforces it)."""
        dev = self.device.major_minor
        if self.version == 2:
            (self.group / "io.max").write_text(f"{dev} riops={read_iops} wiops={write_iops}")
        else:
            (self.group / "blkio.throttle.read_iops_device").write_text(f"{dev} {read_iops}")
            (self.group / "blkio.throttle.write_iops_device").write_text(f"{dev} {write_iops}")

    def clear(self) -> None:
        dev = self.device.major_minor
        if self.version == 2:
            (self.group / "io.max").write_text(f"{dev} riops=max wiops=max")
        else:
            (self.group / "blkio.throttle.read_iops_device").write_text(f"{dev} 0")
            (self.group / "blkio.throttle.write_iops_device").write_text(f"{dev} 0")

    def ios(self) -> int | None:
        """I/Os the cgroup did on the device, as the throttle counts them (v1 only)."""
        if self.version != 2:
            stats = (self.group / "blkio.throttle.io_serviced").read_text().splitlines()
            dev = self.device.major_minor
            return sum(int(line.split()[2]) for line in stats if line.startswith(dev + " Total"))
        return None
