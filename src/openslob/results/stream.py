"""Results written as the run goes: a crash or a kill -9 after hours keeps every interval.

    timeseries.csv   a row appended per closed interval (header from the first row)

Each row is handed to the kernel when it is written (flush, no fsync: the page cache writes
it back within seconds, and a sync per row would be our own I/O on the measured device in
the middle of the window). What the client wrote this way is counted (bytes) so that a
report can say how much of the device's write traffic was ours.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import IO, Any

from openslob.model.histogram import Histogram
from openslob.model.metrics import LATENCY_STATS, OP_KINDS

TIMESERIES_FILE = "timeseries.csv"
# run.json "intervals": the window's op figures per interval (the rest is timeseries.csv)
INTERVAL_COLUMNS = (
    "elapsed_s",
    "interval",
    "seconds",
    "slobops_per_s",
    *(f"{kind}_count" for kind in OP_KINDS),
    *(f"{kind}_{stat}_us" for kind in OP_KINDS for stat, _ in LATENCY_STATS),
)


def csv_cell(value: Any) -> Any:
    """Empty for an unmeasured figure; floats to 3 decimals."""
    if value is None:
        return ""
    return round(value, 3) if isinstance(value, float) else value


class TimeseriesWriter:
    """timeseries.csv, one row per call (a Sampler sink)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bytes_written = 0
        self._file: IO[str] | None = None
        self._writer: csv.DictWriter | None = None

    def __call__(self, row: dict[str, Any], _hists: dict[str, Histogram]) -> None:
        if self._writer is None:
            self._file = self.path.open("w", newline="")
            self._writer = csv.DictWriter(self._file, fieldnames=list(row), extrasaction="ignore")
            self._writer.writeheader()
        assert self._file is not None
        start = self._file.tell()
        self._writer.writerow({k: csv_cell(v) for k, v in row.items()})
        self._file.flush()
        self.bytes_written += self._file.tell() - start

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def csv_number(cell: Any) -> int | float | None:
    """A time-series cell back as a number (csv_cell's inverse): None when empty (not
    measured) or not a number; a count written without a decimal point stays an int."""
    if cell is None or cell == "":
        return None
    try:
        value = float(cell)
    except (TypeError, ValueError):
        return None
    return int(value) if value.is_integer() and "." not in str(cell) else value


def interval_table(path: Path) -> dict[str, Any] | None:
    """run.json "intervals" from timeseries.csv: the window's rows, INTERVAL_COLUMNS, as
    {"columns": [...], "rows": [[...], ...]} (compact for runs of hours); None without it."""
    try:
        with path.open(newline="") as file:
            reader = csv.DictReader(file)
            columns = [c for c in INTERVAL_COLUMNS if c in (reader.fieldnames or [])]
            rows = [
                [csv_number(row[c]) for c in columns] for row in reader if row["phase"] == "window"
            ]
    except (OSError, KeyError, ValueError):
        return None
    return {"source": path.name, "columns": columns, "rows": rows}
