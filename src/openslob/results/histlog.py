"""The window's per-interval latency histograms in other tools' formats, written as the run goes.

    <op>.hlog         HdrHistogram interval log (format 1.2), one line per sampling interval
                      of the window: HistogramLogProcessor, HdrHistogram's plotters and the
                      `hdrhistogram` package read it. Values are microseconds (the interval
                      max column is in milliseconds: max value unit ratio 1000).
    percentiles.csv   per interval and op type, fio's default percentile list (clat
                      percentiles 1 ... 99.99) in microseconds

Both come from the loops' own histograms (model/histogram.py): an HdrHistogram holds each
bucket's count at the bucket's midpoint (3 significant digits), so its percentiles are
ours within the same 0.8 % and its counts are exactly ours. The warm-up is not written: it is
not measured, and the window's histograms are the sum of these intervals.
"""

from __future__ import annotations

import datetime as dt
import functools
import sys
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from openslob.model.histogram import SLOTS, Histogram, bucket_bounds
from openslob.model.metrics import OP_KINDS
from openslob.model.states import Phase
from openslob.results.stream import StreamFile, csv_cell, csv_text

HLOG_SUFFIX = ".hlog"
PERCENTILES_FILE = "percentiles.csv"
# fio's default clat percentile list
FIO_PERCENTILES = (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)
HDR_LOWEST_US, HDR_HIGHEST_US, HDR_DIGITS = 1, 2**37, 3  # the loop's range, 0.1 % resolution
MAX_UNIT_RATIO = 1000.0  # µs values, interval max in ms (HdrHistogram's usual column)


def hdr_of(hist: Histogram) -> HdrHistogram:
    """An HdrHistogram with each of our buckets' counts at its midpoint: what
    HdrHistogram.record_value(midpoint, count) does per bucket, with each bucket's slot in
    the counts array looked up once per run (record_value's own arithmetic was ~1.5 us a
    bucket: 0.5 ms an interval of the select op at 256 sessions, in the sampler's thread)."""
    hdr = HdrHistogram(HDR_LOWEST_US, HDR_HIGHEST_US, HDR_DIGITS)
    _fill(hdr, hist)
    return hdr


def _fill(hdr: HdrHistogram, hist: Histogram) -> list[int]:
    """Our buckets' counts into an empty `hdr` at their midpoints; the slots it filled."""
    if not hist.counts:
        return []
    values, slots = _slots()
    counts, filled = hdr.counts, [slots[idx] for idx in hist.counts]
    for slot, count in zip(filled, hist.counts.values(), strict=True):
        counts[slot] += count
    hdr.total_count = sum(hist.counts.values())
    # record_value keeps the least and largest value recorded; midpoints rise with idx
    hdr.min_value = min(hdr.min_value, values[min(hist.counts)])
    hdr.max_value = max(hdr.max_value, values[max(hist.counts)])
    return filled


class HdrEncoder:
    """One op kind's interval histograms encoded through one HdrHistogram, emptied after
    each: a new one per interval cost ~100 us (its 29,696 counters allocated), 3-5 times
    that in a run, and reset() zeroes them one at a time in Python (~0.9 ms); only the
    slots an interval filled are zeroed. Encodes what hdr_of(hist).encode() would."""

    def __init__(self) -> None:
        self.hdr = HdrHistogram(HDR_LOWEST_US, HDR_HIGHEST_US, HDR_DIGITS)

    def encode(self, hist: Histogram) -> tuple[int, str]:
        """(the largest value recorded, in us; the compressed histogram's text)."""
        if not hist.counts:
            return 0, _empty_encoded()
        hdr = self.hdr
        filled = _fill(hdr, hist)
        try:
            return hdr.get_max_value(), hdr.encode().decode()
        finally:
            for slot in filled:
                hdr.counts[slot] = 0
            hdr.total_count, hdr.min_value, hdr.max_value = 0, sys.maxsize, 0


@functools.cache
def _slots() -> tuple[list[int], list[int]]:
    """Each loop bucket's midpoint (us) and its index in the counts array of an HdrHistogram
    of hdr_of's range and precision (the lookup record_value does per value)."""
    geometry = HdrHistogram(HDR_LOWEST_US, HDR_HIGHEST_US, HDR_DIGITS)
    values = [max(sum(bucket_bounds(idx)) // 2, HDR_LOWEST_US) for idx in range(SLOTS)]
    slots = [geometry._counts_index_for(v) for v in values]  # record_value's own lookup
    if not all(0 <= slot < geometry.counts_len for slot in slots):
        raise ValueError("the loop's buckets reach beyond the HdrHistogram's range")
    return values, slots


@functools.cache
def _empty_encoded() -> str:
    """An empty interval's compressed histogram: the same every time (an op type the run
    does not do has one every interval; building an HdrHistogram takes ~0.13 ms)."""
    return hdr_of(Histogram()).encode().decode()


def _window_times(row: dict[str, Any]) -> tuple[float, float]:
    """(start, end) epoch seconds of a row's interval (its `time` is the end)."""
    end = dt.datetime.fromisoformat(row["time"]).timestamp()
    return end - float(row["seconds"]), end


class HlogWriter:
    """<op>.hlog per op type of the window (a Sampler sink)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._files: dict[str, StreamFile] = {}
        self._encoders: dict[str, HdrEncoder] = {}
        self._base: float | None = None

    @property
    def bytes_written(self) -> int:
        return sum(f.bytes_written for f in self._files.values())

    @property
    def lost(self) -> list[str]:
        return [f.lost for f in self._files.values() if f.lost]

    def _open(self, start: float, kinds: list[str]) -> None:
        """A file per op type, and per traced latency layer (host/ebpf.py) when traced."""
        self._base = start
        stamp = dt.datetime.fromtimestamp(start, dt.UTC).isoformat(" ")
        for kind in kinds:
            what = f"{kind} op" if kind in OP_KINDS else f"{kind} (traced in the kernel)"
            log = StreamFile(self.run_dir / f"{kind}{HLOG_SUFFIX}")
            log.append(
                f"#openslob {what} latency per sampling interval, values in microseconds\n"
                "#[Histogram log format version 1.2]\n"
                f"#[StartTime: {start:.3f} (seconds since epoch), {stamp}]\n"
                f"#[BaseTime: {start:.3f} (seconds since epoch)]\n"
                f"#[MaxValueUnitRatio: {MAX_UNIT_RATIO:g}]\n"
                '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n'
            )
            self._files[kind] = log
            self._encoders[kind] = HdrEncoder()

    def __call__(self, row: dict[str, Any], hists: dict[str, Histogram]) -> None:
        if row["phase"] != Phase.WINDOW:
            return
        start, end = _window_times(row)
        if self._base is None:
            self._open(start, [*OP_KINDS, *(k for k in hists if k not in OP_KINDS)])
        assert self._base is not None
        for kind, log in self._files.items():
            max_us, encoded = self._encoders[kind].encode(hists.get(kind) or Histogram())
            # a line per interval, handed to the kernel at once: a killed client keeps them
            log.append(
                f"{start - self._base:.3f},{end - start:.3f},"
                f"{max_us / MAX_UNIT_RATIO:.3f},{encoded}\n"
            )

    def close(self) -> None:
        for log in self._files.values():
            log.close()


class PercentileCsv:
    """percentiles.csv: a row per window interval and op type (a Sampler sink)."""

    COLUMNS = ("time", "elapsed_s", "interval", "seconds", "op", "count", "mean_us")

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / PERCENTILES_FILE
        self._file = StreamFile(self.path)

    @property
    def bytes_written(self) -> int:
        return self._file.bytes_written

    @property
    def lost(self) -> list[str]:
        return [self._file.lost] if self._file.lost else []

    def __call__(self, row: dict[str, Any], hists: dict[str, Histogram]) -> None:
        if row["phase"] != Phase.WINDOW:
            return
        if not self._file.records:
            self._file.append(csv_text([*self.COLUMNS, *(f"p{p:g}_us" for p in FIO_PERCENTILES)]))
        lines = []
        for kind in OP_KINDS:
            hist = hists.get(kind) or Histogram()
            head = [row["time"], row["elapsed_s"], row["interval"], row["seconds"], kind]
            mean = hist.mean_us()
            values = hist.percentiles_us(FIO_PERCENTILES)
            lines.append(
                csv_text([*head, hist.count, csv_cell(mean), *(csv_cell(v) for v in values)])
            )
        self._file.append("".join(lines))  # an interval's rows whole or not at all

    def close(self) -> None:
        self._file.close()
