"""Results written as the run goes: a crash or a kill -9 after hours keeps every interval.

    timeseries.csv   a row appended per closed interval (header from the first row)

Each row is handed to the kernel when it is written (flush, no fsync: the page cache writes
it back within seconds, and a sync per row would be our own I/O on the measured device in
the middle of the window). What the client wrote this way is counted (bytes) so that a
report can say how much of the device's write traffic was ours.

A full (or failing) disk stops a file, never the run: the file is cut back to its last whole
row and written no more, and `lost` names it and why (the run's warnings and its final
error say which files are incomplete; the report is still printed).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
from pathlib import Path
from typing import Any

from openslob.model.histogram import Histogram
from openslob.model.metrics import LATENCY_STATS, OP_KINDS
from openslob.model.states import Phase

TIMESERIES_FILE = "timeseries.csv"
# The kernel-traced latency layers' per-interval columns (run.json latency_layers), when a
# run has them: the latency waterfall draws them per interval.
TRACED_LAYERS = ("op", "db_read_call", "log_sync", "device_read", "device_write")
# run.json "intervals": the window's op figures per interval (the rest is timeseries.csv);
# a column missing from timeseries.csv is left out
INTERVAL_COLUMNS = (
    "elapsed_s",
    "interval",
    "seconds",
    "slobops_per_s",
    *(f"{kind}_count" for kind in OP_KINDS),
    *(f"{kind}_{stat}_us" for kind in OP_KINDS for stat, _ in LATENCY_STATS),
    *(f"{layer}_{stat}_us" for layer in TRACED_LAYERS for stat in ("p50", "p99")),
)


def csv_cell(value: Any) -> Any:
    """Empty for an unmeasured figure; floats to 3 decimals."""
    if value is None:
        return ""
    return round(value, 3) if isinstance(value, float) else value


class StreamFile:
    """A file appended to as the run goes, whole records at a time: a record the disk cannot
    take is cut off again (the file ends with the last whole one) and nothing more is
    written; `lost` then says which file and why."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bytes_written = 0
        self.records = 0
        self.lost: str | None = None
        self._fd: int | None = None

    def append(self, text: str) -> bool:
        """Write one record (flushed to the kernel); False once the file is given up."""
        if self.lost is not None:
            return False
        data = text.encode()
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self._give_up(exc)
            return False
        self.bytes_written += len(data)
        self.records += 1
        return True

    def _give_up(self, exc: OSError) -> None:
        kept = f"{self.records} record(s) kept" if self.records else "nothing kept"
        self.lost = f"{self.path.name} ({exc.strerror or exc}; {kept})"
        if self._fd is not None:
            with contextlib.suppress(OSError):  # cutting frees space: it hardly fails
                os.ftruncate(self._fd, self.bytes_written)
            self.close()
            if not self.bytes_written:
                self.path.unlink(missing_ok=True)  # no empty file posing as a result

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def csv_text(values: list[Any]) -> str:
    """One CSV line."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue()


class TimeseriesWriter:
    """timeseries.csv, one row per call (a Sampler sink)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = StreamFile(path)
        self._columns: list[str] | None = None

    @property
    def bytes_written(self) -> int:
        return self._file.bytes_written

    @property
    def lost(self) -> list[str]:
        return [self._file.lost] if self._file.lost else []

    def __call__(self, row: dict[str, Any], _hists: dict[str, Histogram]) -> None:
        if self._columns is None:
            self._columns = list(row)
            self._file.append(csv_text(self._columns))
        self._file.append(csv_text([csv_cell(row.get(c)) for c in self._columns]))

    def close(self) -> None:
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
                [csv_number(row[c]) for c in columns]
                for row in reader
                if row["phase"] == Phase.WINDOW
            ]
    except (OSError, KeyError, ValueError):
        return None
    return {"source": path.name, "columns": columns, "rows": rows}
