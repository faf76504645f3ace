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

TIMESERIES_FILE = "timeseries.csv"


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
