"""`slob precondition`'s server-free parts: the state file, fill arithmetic, argument checks,
the random order, and the files it writes (a real temporary directory; no server)."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from openslob.model.errors import ConfigError
from openslob.runner.prewrite import (
    FILE_BYTES,
    BlockWriter,
    FileSystemUse,
    PreconditionState,
    check_fill_pct,
    data_files,
    fill_bytes,
    missing_bytes,
    parse_block_bytes,
    random_order,
)

GIB = 1 << 30
KEY = {"mode": "seq", "passes": 3, "block_bytes": 65536}


def test_state_round_trip_resumes_and_starts_over(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    fresh, line = PreconditionState.load(path, KEY)
    assert line is None and fresh.passes_done == 0 and fresh.runs == 0
    fresh.passes_done, fresh.offset, fresh.bytes_written, fresh.runs = 1, 7, 123, 1
    fresh.save(path)
    again, line = PreconditionState.load(path, KEY)
    assert (again.passes_done, again.offset, again.bytes_written) == (1, 7, 123)
    assert line is not None and line.startswith("resuming: 1 of 3 passes")
    other, line = PreconditionState.load(path, {**KEY, "passes": 4})
    assert other.passes_done == 0 and line is not None and "other parameters" in line
    again.passes_done = 3
    again.save(path)
    done, line = PreconditionState.load(path, KEY)
    assert done.passes_done == 0 and line is not None and "ended" in line
    path.write_text("{not json")
    broken, line = PreconditionState.load(path, KEY)
    assert broken.passes_done == 0 and line is not None and "unreadable" in line


def test_fill_bytes_reaches_the_level() -> None:
    use = FileSystemUse(used_bytes=30 * GIB, avail_bytes=70 * GIB)
    assert use.used_pct == pytest.approx(30.0)
    # 50 % of 100 GiB, 30 used, 5 more of our preconditioning files: 15 GiB of fill
    assert fill_bytes(use, 5 * GIB, 50.0) == 15 * GIB
    assert fill_bytes(use, 5 * GIB, None) == 0  # no --fill: no fill, the cap still checked


@pytest.mark.parametrize(
    ("new_gib", "pct", "says"),
    [
        (0, 20.0, "--fill 20: the file system would be 30.0 % used"),
        (25, 50.0, "allowed 55.0..95 %"),
        (70, None, "--size: the file system would be 100.0 % used"),
    ],
)
def test_fill_refused_beyond_the_level(new_gib: int, pct: float | None, says: str) -> None:
    use = FileSystemUse(used_bytes=30 * GIB, avail_bytes=70 * GIB)
    with pytest.raises(ConfigError, match=says.replace(".", r"\.")) as info:
        fill_bytes(use, new_gib * GIB, pct)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("pct", [0.0, -1.0, 95.5, 100.0])
def test_fill_pct_range(pct: float) -> None:
    with pytest.raises(ConfigError, match=r"--fill .*: allowed 1\.\.95"):
        check_fill_pct(pct)


@pytest.mark.parametrize("raw", [0, 512, 4097, 128 << 20])
def test_block_size_range(raw: int) -> None:
    with pytest.raises(ConfigError, match="--block-size"):
        parse_block_bytes(raw)
    assert parse_block_bytes(12288) == 12288


@pytest.mark.parametrize("blocks", [1, 2, 7, 64, 1000, 4096])
def test_random_order_writes_every_block_once(blocks: int) -> None:
    for pass_no in range(3):
        order = [random_order(i, blocks, pass_no) for i in range(blocks)]
        assert sorted(order) == list(range(blocks))
    if blocks >= 64:  # not the sequential order
        assert [random_order(i, blocks, 0) for i in range(8)] != list(range(8))


def test_data_files_split_at_file_bytes(tmp_path: Path) -> None:
    files = data_files(tmp_path, "seq", 2 * FILE_BYTES + 4096)
    assert [size for _, size in files] == [FILE_BYTES, FILE_BYTES, 4096]
    assert files[2][0].name == "seq-0002.dat"
    assert missing_bytes(files) == 2 * FILE_BYTES + 4096


def test_block_writer_writes_incompressible_new_bytes(tmp_path: Path) -> None:
    path = tmp_path / "seq-0000.dat"
    writer = BlockWriter(65536)
    try:
        for offset in range(0, 1 << 20, 65536):
            assert writer.write(path, 1 << 20, offset) == 65536
        writer.sync()
    finally:
        writer.close()
    data = path.read_bytes()
    assert len(data) == 1 << 20
    assert missing_bytes([(path, 1 << 20)]) == 0  # allocated, nothing left to add
    first, second = data[:65536], data[65536:131072]
    assert first != second  # every block new: nothing to dedupe
    assert len(data) / len(zlib.compress(data, 1)) < 1.01
    assert os.stat(path).st_size == 1 << 20
