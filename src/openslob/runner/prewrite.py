"""What `slob precondition` writes outside the database, and what it remembers between runs.

- PreconditionState: the state file (JSON in the work directory): the parameters it was
  made for (`key`), passes done, and where the current pass stands (extent, unit or byte
  offset), the fill bytes written. A rerun with the same parameters continues from it; one
  with other parameters starts over (the caller says which).
- fill arithmetic: how many bytes bring the file system to FILL % used (as df counts: used
  ÷ (used + available to us)), refused up front beyond the level or beyond HARD_CAP_PCT.
- BlockWriter: random incompressible blocks (PCG64DXSM seeded from os.urandom: every block
  new, so neither compression nor dedupe shrinks them; ~3 GB/s where os.urandom gives ~0.1
  on this VM and would be what is measured) written with O_DIRECT where the file system takes it
  (tmpfs does not: then buffered, and fsync'ed at the end of each file), into files of
  FILE_BYTES in the work directory, which `slob destroy` removes.
- random_order: a permutation of a pass's blocks (each written once per pass, in an order
  that a pass number reproduces, so a resumed pass continues the same order).
"""

from __future__ import annotations

import json
import mmap
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np  # matplotlib's own dependency: no new package

from openslob.model.errors import ConfigError

WORK_DIR_NAME = "openslob-fill"  # under the server's instance directory (slob destroy)
STATE_FILE = "precondition-state.json"
FILE_BYTES = 1 << 30  # one data file of ours holds up to 1 GiB
HARD_CAP_PCT = 95.0  # never fill a file system beyond this, whatever --fill says
MIN_BLOCK_BYTES = 4096
MAX_BLOCK_BYTES = 64 << 20


# ------------------------------------------------------------------------------ the state


@dataclass
class PreconditionState:
    key: dict[str, Any]  # mode, passes, block size, fill, sizes: what this state is for
    passes_done: int = 0
    extent: int = 0  # engine mode: the extent the current pass is in
    offset: int = 0  # units (engine) or blocks (seq/random) done of the current pass/extent
    fill_done_bytes: int = 0
    bytes_written: int = 0  # by all runs of this precondition, pass bytes and fill bytes
    runs: int = 0  # how many times it was started (1: no resume yet)
    extra: dict[str, Any] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, path)  # a kill mid-write leaves the previous state whole

    @classmethod
    def load(cls, path: Path, key: dict[str, Any]) -> tuple[PreconditionState, str | None]:
        """The state for `key` and a line saying whether it resumes (None: a fresh start)."""
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return cls(key), None
        except (OSError, ValueError):
            return cls(key), f"state file {path} unreadable: starting over"
        if doc.get("key") != key:
            return cls(key), "the state file was for other parameters: starting over"
        state = cls(**{k: v for k, v in doc.items() if k in cls.__dataclass_fields__})
        if state.passes_done >= int(key["passes"]):
            return cls(key), "the previous precondition with these parameters ended: again"
        return state, (
            f"resuming: {state.passes_done} of {key['passes']} passes done, "
            f"{state.bytes_written / 2**20:,.0f} MB written before"
        )


# ---------------------------------------------------------------------- fill arithmetic


@dataclass(frozen=True)
class FileSystemUse:
    used_bytes: int
    avail_bytes: int  # what an unprivileged writer may still use

    @property
    def size_bytes(self) -> int:
        return self.used_bytes + self.avail_bytes

    @property
    def used_pct(self) -> float:
        return 100.0 * self.used_bytes / self.size_bytes if self.size_bytes else 100.0

    @classmethod
    def of(cls, path: Path) -> FileSystemUse:
        st = os.statvfs(path)
        return cls((st.f_blocks - st.f_bfree) * st.f_frsize, st.f_bavail * st.f_frsize)


def check_fill_pct(fill_pct: float | None) -> None:
    if fill_pct is not None and not 0 < fill_pct <= HARD_CAP_PCT:
        raise ConfigError(f"--fill {fill_pct:g}: allowed 1..{HARD_CAP_PCT:g} (% used)")


def fill_bytes(use: FileSystemUse, new_bytes: int, fill_pct: float | None) -> int:
    """Bytes of fill that bring the file system to `fill_pct` % used once `new_bytes` more
    (the preconditioning files not yet written) are on it; ConfigError, before anything is
    written, when that is beyond the level or beyond HARD_CAP_PCT."""
    check_fill_pct(fill_pct)
    level = HARD_CAP_PCT if fill_pct is None else fill_pct
    after_pct = 100.0 * (use.used_bytes + new_bytes) / use.size_bytes
    if after_pct > level:
        what = f"--fill {fill_pct:g}" if fill_pct is not None else "--size"
        lowest = min(after_pct, HARD_CAP_PCT)
        raise ConfigError(
            f"{what}: the file system would be {after_pct:.1f} % used "
            f"(now {use.used_pct:.1f} %, + {new_bytes / 2**20:,.1f} MB); "
            + (
                f"allowed {lowest:.1f}..{HARD_CAP_PCT:g} %"
                if fill_pct is not None and after_pct <= HARD_CAP_PCT
                else f"at most {HARD_CAP_PCT:g} % (write less with --size)"
            )
        )
    if fill_pct is None:
        return 0
    fill = max(int(use.size_bytes * fill_pct / 100.0) - use.used_bytes - new_bytes, 0)
    return fill // MIN_BLOCK_BYTES * MIN_BLOCK_BYTES  # whole 4K blocks: O_DIRECT writes them


def parse_block_bytes(raw: int) -> int:
    if not MIN_BLOCK_BYTES <= raw <= MAX_BLOCK_BYTES or raw % MIN_BLOCK_BYTES:
        raise ConfigError(
            f"--block-size {raw}: allowed 4K..64M in multiples of 4K (O_DIRECT alignment)"
        )
    return raw


# ------------------------------------------------------------------------ our own files


def data_files(work_dir: Path, prefix: str, total_bytes: int) -> list[tuple[Path, int]]:
    """(path, bytes) of the files holding `total_bytes` (FILE_BYTES each, the last less)."""
    files = []
    for i, start in enumerate(range(0, total_bytes, FILE_BYTES)):
        files.append((work_dir / f"{prefix}-{i:04d}.dat", min(FILE_BYTES, total_bytes - start)))
    return files


def missing_bytes(files: list[tuple[Path, int]]) -> int:
    """Bytes of `files` not yet allocated on the file system (what writing them adds)."""
    missing = 0
    for path, size in files:
        try:
            have = path.stat().st_blocks * 512
        except FileNotFoundError:
            have = 0
        missing += max(size - have, 0)
    return missing


def random_order(index: int, blocks: int, pass_no: int) -> int:
    """The block written `index`-th in pass `pass_no` of a random pass over `blocks` blocks:
    an affine permutation (a stride coprime with `blocks`), every block once per pass."""
    if blocks <= 1:
        return 0
    stride = _coprime_stride(blocks, pass_no)
    return (index * stride + pass_no * 7919) % blocks


def _coprime_stride(blocks: int, pass_no: int) -> int:
    from math import gcd

    # about 0.618 × blocks (golden ratio): neighbours in time land far apart on the device
    stride = max(int(blocks * 0.6180339887) + pass_no, 1)
    while gcd(stride, blocks) != 1:
        stride += 1
    return stride


class BlockWriter:
    """Writes `block_bytes` blocks of fresh random bytes into files (O_DIRECT if possible)."""

    def __init__(self, block_bytes: int) -> None:
        self.block_bytes = block_bytes
        self._buf = mmap.mmap(-1, block_bytes)  # page aligned, as O_DIRECT needs
        self._words = np.frombuffer(self._buf, dtype=np.uint64)  # the same memory
        self._bits = np.random.PCG64DXSM()  # seeded from the OS's entropy
        self._fds: dict[Path, int] = {}
        self.direct: bool | None = None  # whether the files were opened with O_DIRECT

    def _fd(self, path: Path, size: int) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            return fd
        flags = os.O_WRONLY | os.O_CREAT
        try:
            fd = os.open(path, flags | getattr(os, "O_DIRECT", 0), 0o600)
            self.direct = self.direct is not False and hasattr(os, "O_DIRECT")
        except OSError:  # tmpfs and others refuse O_DIRECT: the page cache then, fsync'ed
            fd = os.open(path, flags, 0o600)
            self.direct = False
        if os.fstat(fd).st_size < size:
            os.ftruncate(fd, size)
        self._fds[path] = fd
        return fd

    def write(self, path: Path, size: int, offset: int) -> int:
        """One block at `offset` of `path` (cut at the file's `size`); bytes written."""
        length = min(self.block_bytes, size - offset)
        self._words[:] = self._bits.random_raw(len(self._words))
        fd = self._fd(path, size)
        try:
            if length == self.block_bytes:
                return os.pwrite(fd, self._buf, offset)
            return os.pwrite(fd, memoryview(self._buf)[:length], offset)  # a file's tail
        except OSError as exc:  # the file in the one-line error (ENOSPC, EIO, ...)
            raise OSError(exc.errno, f"writing {length} bytes at {offset}", str(path)) from exc

    def sync(self) -> None:
        for fd in self._fds.values():
            os.fsync(fd)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        del self._words  # the view first: an mmap with a live export refuses to close
        self._buf.close()
