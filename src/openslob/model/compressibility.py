"""What the storage below the database sees: the compression and dedupe ratio of data files.

Inline compression and dedupe in arrays, hyper-converged systems and cloud volumes work on
fixed chunks (4 KiB or 8 KiB typically). `measure` compresses a sample of a table's bytes
chunk by chunk with zlib level 1 and LZ4 block mode (the fast codecs such systems use) and
counts equal 4 KiB chunks. A chunk that does not shrink is stored as it is (counted at its
raw size), as storage does. Ratios are raw bytes / stored bytes: 1.00 is incompressible.

`sample_offsets` spreads the sample over the whole file (evenly spaced runs of pages), so a
large table is judged by its whole extent, not its first megabytes, at a bounded cost.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import lz4.block

CHUNK_SMALL_BYTES = 4096
CHUNK_LARGE_BYTES = 8192
# Sample at most this many bytes per table (evenly spaced runs of RUN_BYTES), and this many
# for a whole data set (shared by its tables): a few tenths of a second of CPU.
SAMPLE_BYTES = 8 << 20
DATASET_SAMPLE_BYTES = 16 << 20
RUN_BYTES = 64 << 10
# What "incompressible" means in the checks: the ratio real, random data reaches (headers,
# line pointers and a page's own copies of its row cost a few per cent).
INCOMPRESSIBLE_RATIO = 1.15
# Equal 4 KiB chunks a data set may hold: none on PostgreSQL; on InnoDB the all-zero free
# space of B-tree node pages (the custid index's inner pages, a table's last leaf page) that
# the engine keeps as it is (0.3 % of cf1's chunks at 16k pages, 2,048 rows; more in a
# 128-row cf2).
DEDUPE_LIMIT = 1.05


@dataclass
class Compressibility:
    """Measured ratios of one table's (or a data set's) bytes; None: not measured (reason)."""

    zlib_4k: float | None = None
    lz4_4k: float | None = None
    zlib_8k: float | None = None
    lz4_8k: float | None = None
    dedupe_4k: float | None = None  # 4 KiB chunks / distinct 4 KiB chunks
    zero_bytes_pct: float | None = None
    sampled_bytes: int = 0
    file_bytes: int = 0
    # All-zero database pages in the sample, left out of the ratios: space the file holds
    # (preallocated, fallocate'd) that the database never wrote; the storage stores none.
    unwritten_pages: int = 0
    source: str = ""  # "local file", "pg_read_binary_file", ...
    reason: str | None = None  # why not measured

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def unmeasured(cls, reason: str) -> Compressibility:
        return cls(reason=reason)


def _stored(chunk: bytes) -> tuple[int, int]:
    """Bytes zlib-1 and LZ4 would store for one chunk (never more than the chunk)."""
    size = len(chunk)
    z = len(zlib.compress(chunk, 1))
    lz = len(lz4.block.compress(chunk, store_size=False))
    return min(z, size), min(lz, size)


PageFilter = Callable[[bytes], bool]


def written_pages(run: bytes, page_bytes: int, keep: PageFilter | None = None) -> tuple[bytes, int]:
    """The run without its all-zero pages (never written by the database), and how many;
    `keep` further selects pages (e.g. only a table's rows, not its index nodes)."""
    kept, skipped = [], 0
    for start in range(0, len(run) - page_bytes + 1, page_bytes):
        page = run[start : start + page_bytes]
        if page.count(0) == page_bytes:
            skipped += 1
        elif keep is None or keep(page):
            kept.append(page)
    return b"".join(kept), skipped


def measure(
    runs: Iterable[bytes],
    file_bytes: int,
    source: str,
    page_bytes: int = CHUNK_LARGE_BYTES,
    keep: PageFilter | None = None,
) -> Compressibility:
    """Ratios over runs of a file's bytes (read in place), all-zero database pages of
    `page_bytes` left out (counted in unwritten_pages)."""
    small: list[float] = [0.0, 0.0]
    large: list[float] = [0.0, 0.0]
    digests: set[bytes] = set()
    chunks = zeros = sampled = unwritten = 0
    raw_small = raw_large = 0
    for run in runs:
        data, skipped = written_pages(run, max(page_bytes, CHUNK_LARGE_BYTES), keep)
        unwritten += skipped
        usable = len(data)
        if not data:
            continue
        sampled += usable
        zeros += data.count(0)
        for start in range(0, usable, CHUNK_SMALL_BYTES):
            chunk = data[start : start + CHUNK_SMALL_BYTES]
            digests.add(hashlib.blake2b(chunk, digest_size=16).digest())
            chunks += 1
            z, lz = _stored(chunk)
            small[0] += z
            small[1] += lz
            raw_small += CHUNK_SMALL_BYTES
        for start in range(0, usable, CHUNK_LARGE_BYTES):
            z, lz = _stored(data[start : start + CHUNK_LARGE_BYTES])
            large[0] += z
            large[1] += lz
            raw_large += CHUNK_LARGE_BYTES
    if not sampled:
        return Compressibility(
            file_bytes=file_bytes,
            source=source,
            unwritten_pages=unwritten,
            reason="no written pages in the sample",
        )
    return Compressibility(
        zlib_4k=round(raw_small / small[0], 2),
        lz4_4k=round(raw_small / small[1], 2),
        zlib_8k=round(raw_large / large[0], 2),
        lz4_8k=round(raw_large / large[1], 2),
        dedupe_4k=round(chunks / len(digests), 2),
        zero_bytes_pct=round(100 * zeros / sampled, 1),
        sampled_bytes=sampled,
        file_bytes=file_bytes,
        source=source,
        unwritten_pages=unwritten,
    )


def sample_offsets(
    file_bytes: int, sample_bytes: int = SAMPLE_BYTES, run_bytes: int = RUN_BYTES
) -> list[tuple[int, int]]:
    """(offset, length) runs covering the file evenly, at most `sample_bytes` in all."""
    if file_bytes <= sample_bytes:
        return [(0, file_bytes)] if file_bytes else []
    run_bytes = min(run_bytes, sample_bytes)
    count = sample_bytes // run_bytes
    stride = (file_bytes - run_bytes) // max(count - 1, 1)
    stride -= stride % CHUNK_LARGE_BYTES
    return [(i * stride, run_bytes) for i in range(count)]


def combine(parts: list[Compressibility]) -> Compressibility:
    """One figure for several tables: ratios weighted by the bytes sampled from each."""
    measured = [p for p in parts if p.reason is None and p.sampled_bytes]
    if not measured:
        reasons = sorted({p.reason for p in parts if p.reason}) or ["no tables"]
        return Compressibility.unmeasured("; ".join(reasons))
    total = sum(p.sampled_bytes for p in measured)

    def harmonic(name: str) -> float:
        # Ratios of bytes combine through stored bytes: sum(raw) / sum(raw / ratio).
        stored_bytes: float = sum(p.sampled_bytes / getattr(p, name) for p in measured)
        return round(total / stored_bytes, 3)

    zeros = sum(p.sampled_bytes * (p.zero_bytes_pct or 0.0) for p in measured) / total
    return Compressibility(
        zlib_4k=harmonic("zlib_4k"),
        lz4_4k=harmonic("lz4_4k"),
        zlib_8k=harmonic("zlib_8k"),
        lz4_8k=harmonic("lz4_8k"),
        dedupe_4k=max(p.dedupe_4k or 1.0 for p in measured),
        zero_bytes_pct=round(zeros, 1),
        sampled_bytes=total,
        file_bytes=sum(p.file_bytes for p in measured),
        unwritten_pages=sum(p.unwritten_pages for p in measured),
        source=", ".join(sorted({p.source for p in measured})),
    )


def reader_from_file(
    path: str, file_bytes: int, sample_bytes: int = SAMPLE_BYTES
) -> Iterable[bytes]:
    """Runs of a local data file, read where sample_offsets says."""
    with open(path, "rb") as handle:
        for offset, length in sample_offsets(file_bytes, sample_bytes):
            handle.seek(offset)
            yield handle.read(length)


def per_table_sample(tables: int, total_bytes: int = DATASET_SAMPLE_BYTES) -> int:
    """Bytes to sample from each of `tables` so that the data set costs `total_bytes`."""
    share = total_bytes // max(tables, 1)
    return max(CHUNK_LARGE_BYTES * 2, min(SAMPLE_BYTES, share - share % CHUNK_LARGE_BYTES))


def summary(c: Compressibility) -> str:
    """One line: 'zlib-1 1.01:1, lz4 1.00:1 per 4 KiB; ...' or 'n/a (reason)'."""
    if c.reason is not None or c.zlib_4k is None:
        return f"n/a ({c.reason})"
    return (
        f"zlib-1 {c.zlib_4k:.2f}:1, lz4 {c.lz4_4k:.2f}:1 per 4 KiB; "
        f"zlib-1 {c.zlib_8k:.2f}:1, lz4 {c.lz4_8k:.2f}:1 per 8 KiB; "
        f"dedupe {c.dedupe_4k:.2f}:1 (4 KiB); {c.zero_bytes_pct:.1f} % zero bytes"
    )


def worst(c: Compressibility) -> float | None:
    """The highest of the four compression ratios (None: not measured)."""
    ratios = [c.zlib_4k, c.lz4_4k, c.zlib_8k, c.lz4_8k]
    return None if any(r is None for r in ratios) else max(r for r in ratios if r is not None)


def compare_key(found: Any) -> str | None:
    """What `slob compare` lists when two runs' data sets differ in what the storage sees:
    the 4 KiB ratios to the nearest 0.5 (a run's own updates move them by a few hundredths:
    not a difference between data sets; 1:1 against 2:1 is)."""
    if not isinstance(found, dict):
        return None
    if found.get("reason") or found.get("zlib_4k") is None:
        return f"n/a ({found.get('reason')})"

    def half(value: Any) -> str:
        return f"{round(float(value) * 2) / 2:.1f}:1"

    return f"zlib-1 {half(found['zlib_4k'])}, lz4 {half(found.get('lz4_4k') or 0)} (4 KiB)"
