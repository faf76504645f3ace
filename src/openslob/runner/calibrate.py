"""Raw-device reference with fio: what the storage gives without a database in the way.

Same shape as the SLOB read: random reads of one database page (8 KiB, or the engine's page
size: 16 KiB InnoDB pages are compared with 16 KiB fio reads), synchronous (psync), O_DIRECT,
one job per database session, for the same duration, on the file system that holds the
database's data directory. All jobs share one file (laid out once and kept for the next
calibration), so the working set is the same whatever the job count. fio's JSON output is
parsed, never scraped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from openslob.config.option import parse_size_bytes
from openslob.model.errors import ConfigError, OpenslobError

FIO_FILE = "openslob-fio.dat"
DEFAULT_SIZE = "1G"
DEFAULT_BLOCK_BYTES = 8192


class CalibrationError(OpenslobError):
    """fio is missing or failed."""


@dataclass
class FioResult:
    jobs: int
    block_bytes: int
    seconds: float
    iops: float
    read_mb_per_s: float
    mean_latency_us: float  # completion latency (clat): the I/O as the process waits for it
    p50_latency_us: float | None
    p99_latency_us: float | None
    version: str
    command: list[str]
    file: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def fio_block_bytes(text: str | None) -> int | None:
    """--block-size as bytes (None: not given); a one-line error naming the range."""
    if text is None:
        return None
    try:
        value = parse_size_bytes(text)
    except ValueError:
        value = -1
    if not 512 <= value <= 1 << 20 or value % 512:
        raise ConfigError(
            f"--block-size {text} is not a read size (allowed: 512 to 1M, in steps of 512)"
        )
    return value


def fio_path() -> str | None:
    return shutil.which("fio")


def require_fio() -> str:
    path = fio_path()
    if path is None:
        raise CalibrationError(
            "fio is not installed: install it (e.g. `apt-get install fio`) to compare the "
            "database with the raw device"
        )
    return path


def fio_command(
    fio: str, directory: Path, jobs: int, seconds: float, size: str, block_bytes: int
) -> list[str]:
    return [
        fio,
        "--name=openslob-calibrate",
        f"--filename={directory / FIO_FILE}",
        f"--size={size}",
        "--rw=randread",
        f"--bs={block_bytes}",
        "--ioengine=psync",
        "--direct=1",
        f"--numjobs={jobs}",
        f"--runtime={max(1, round(seconds))}",
        "--time_based",
        "--group_reporting",
        "--randrepeat=0",
        "--norandommap",
        "--output-format=json",
    ]


def parse_fio_json(text: str) -> dict[str, Any]:
    """The group-reported read figures of fio's JSON output."""
    try:
        doc = json.loads(text[text.index("{") :])  # fio may print notes before the JSON
        job = doc["jobs"][0]
        read = job["read"]
        clat = read["clat_ns"]
    except (ValueError, KeyError, IndexError) as exc:
        raise CalibrationError(f"could not read fio's JSON output ({exc})") from exc
    percentiles = clat.get("percentile") or {}

    def pct(key: str) -> float | None:
        value = percentiles.get(key)
        return None if value is None else value / 1000

    return {
        "version": doc.get("fio version", ""),
        "iops": float(read["iops"]),
        "read_mb_per_s": float(read["bw_bytes"]) / 2**20,
        "mean_latency_us": float(clat["mean"]) / 1000,
        "p50_latency_us": pct("50.000000"),
        "p99_latency_us": pct("99.000000"),
        # The group's read runtime is the measured span; job_runtime sums it over the jobs
        # and elapsed includes fio's start-up.
        "seconds": float(read.get("runtime") or 0) / 1000,
    }


def run_fio(
    directory: Path,
    jobs: int,
    seconds: float,
    size: str = DEFAULT_SIZE,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> FioResult:
    fio = require_fio()
    directory.mkdir(parents=True, exist_ok=True)
    command = fio_command(fio, directory, jobs, seconds, size, block_bytes)
    proc = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=seconds + 600
    )
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise CalibrationError(f"fio failed: {detail[-1] if detail else proc.returncode}")
    parsed = parse_fio_json(proc.stdout)
    return FioResult(
        jobs=jobs,
        block_bytes=block_bytes,
        seconds=parsed["seconds"],
        iops=parsed["iops"],
        read_mb_per_s=parsed["read_mb_per_s"],
        mean_latency_us=parsed["mean_latency_us"],
        p50_latency_us=parsed["p50_latency_us"],
        p99_latency_us=parsed["p99_latency_us"],
        version=parsed["version"],
        command=command,
        file=str(directory / FIO_FILE),
    )


def compare(metrics: dict[str, Any], fio: dict[str, Any]) -> dict[str, float | None]:
    """Database vs raw device at the same concurrency: the figures the report prints."""
    db_reads, db_latency = metrics.get("pio_reads_per_s"), metrics.get("db_read_latency_us")
    return {
        "pio_reads_pct_of_fio": None
        if db_reads is None or not fio.get("iops")
        else db_reads / fio["iops"] * 100,
        "db_read_latency_vs_fio": None
        if db_latency is None or not fio.get("mean_latency_us")
        else db_latency / fio["mean_latency_us"],
    }
