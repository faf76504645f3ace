"""Live metrics of a run for Prometheus / Grafana: `slob run --metrics-port`, `--metrics-textfile`.

Contract (README "Live metrics" lists every name):
- A time-series sink (runner/sampler.py): it gets each closed sampling interval's row and
  histograms, and publishes them as one consistent set of metric families. A scrape or the
  textfile sees the previous interval's set or the new one, never half of each.
- Names: `openslob_` + the metrics table key (model/metrics.py, the engines' included), its
  unit words spelled out: `_us` -> `_microseconds`, `_per_s` -> `_per_second`, `_mb` ->
  `_mebibytes` (the table's MB are 2^20 bytes), `_kb` -> `_kibibytes`, `_pct` -> `_percent`,
  a final `_s` -> `_seconds` (`pio_reads_per_s` -> `openslob_pio_reads_per_second`). Values
  are in the table's units, as in timeseries.csv: a panel and the report show one number.
- Gauges hold the latest interval (labels `run`: the run directory's name, `phase`:
  warmup | window); a figure not measured (None) is left out, never exported as 0.
- Per op type (`op`: select | update | scan), from the loops' own histograms:
  `openslob_op_latency_microseconds{quantile=0.5|0.9|0.99|0.999}`, `..._mean_...`, `..._max_...`
  gauges of the latest interval (RATE runs also `openslob_op_latency_intended_...`: from each
  op's scheduled start); `openslob_ops_total` counts the ops of the phase so far, and
  `openslob_op_latency_histogram_microseconds` is a real histogram of the phase so far on
  BUCKETS_US. Its counts are exact sums of our buckets: under `le` go the ops of every bucket
  of ours that ends at or below `le`, i.e. ops timed below `le` whole µs (exact up to 2 ms,
  where every `le` is a multiple of our bucket width); a bucket of ours that straddles `le`
  goes to the next one (so `le` is rounded down by under 1.6 %). `_sum` adds bucket midpoints.
  Op counters and histograms appear only for the phases whose loop counts op types (the
  window; the warm-up counts its ops only).
- A run over several instances: each instance's own figures (timeseries.csv `key@n`,
  runner/timeseries.py INSTANCE_KEYS) as `openslob_instance_` + the figure's name, with an
  `instance` label ("1", "2", ...: the report's Instances table numbers) and a `target` label
  (its printable target, no password). Families of their own, so that a sum over the labels
  of a total's family stays the total. Prometheus renames a scraped `instance` label to
  `exported_instance` unless the scrape job sets `honor_labels: true`.
- The live cliff judgement (model/cliff.py, the rows' CLIFF_COLUMNS) in the window when
  CLIFF is on: `openslob_cliff_active` (label `figure=""`: 1 while any episode is open, else
  0; and a sample of 1 per figure in an open episode, `figure`: ops | iops | p99) and
  `openslob_cliff_episodes_total` (episodes opened in the window so far).
- `openslob_run_info` (openslob version, engine, engine version, run) once the run has begun.
- HTTP: prometheus_client's own server on a registry of ours (not the global one), bound
  when the exporter starts (before the data set is touched), shut down when it is closed.
- Textfile: node_exporter's textfile collector format (text format 0.0.4), written to a
  temporary file beside it and renamed over it each interval, with no fsync: the file may
  sit on the measured device, and a sync per interval would be our own I/O in the window.
  A failed write is said once and the run goes on.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from openslob import __version__
from openslob.model import steady
from openslob.model.cliff import COLUMNS as CLIFF_COLUMNS
from openslob.model.errors import ConfigError
from openslob.model.histogram import Histogram, bucket_bounds
from openslob.model.metrics import LATENCY_STATS, METRICS, OP_KINDS
from openslob.model.perinstance import INSTANCE_KEYS, split_instance_column

PREFIX = "openslob_"
INSTANCE_PREFIX = PREFIX + "instance_"
DEFAULT_ADDRESS = "127.0.0.1"
_UNIT_WORDS = {"us": "microseconds", "mb": "mebibytes", "kb": "kibibytes", "pct": "percent"}
# The families not named after a table key: exported name after PREFIX -> help.
FIXED = {
    "run_info": "The run: openslob version, engine and its version, run directory",
    "cliff_active": '1 while a cliff episode is open (label figure; figure="": any)',
    "cliff_episodes_total": "Cliff episodes opened in the window so far",
    "interval_seconds": "Length of the latest sampling interval (s)",
    "elapsed_seconds": "Seconds from the run's start to the latest interval's end",
    "ops_total": "SLOBops per op type, over the phase so far",
    "op_latency_microseconds": "SLOBop latency percentiles of the latest interval (µs)",
    "op_latency_mean_microseconds": "SLOBop mean latency of the latest interval (µs)",
    "op_latency_max_microseconds": "SLOBop max latency of the latest interval (µs)",
    "op_latency_histogram_microseconds": "SLOBop latency over the phase so far (µs)",
    "op_latency_intended_microseconds": (
        "RATE runs: SLOBop latency from the intended start, percentiles of the latest interval (µs)"
    ),
    "op_latency_intended_mean_microseconds": (
        "RATE runs: SLOBop mean latency from the intended start, latest interval (µs)"
    ),
    "op_latency_intended_max_microseconds": (
        "RATE runs: SLOBop max latency from the intended start, latest interval (µs)"
    ),
}
# The columns every row starts with (runner/timeseries.py HEAD): two are exported by name.
HEAD_GAUGES = {"seconds": "interval_seconds", "elapsed_s": "elapsed_seconds"}
_HEAD = ("time", "phase", "interval", *HEAD_GAUGES)
QUANTILES = {"p50": "0.5", "p90": "0.9", "p99": "0.99", "p999": "0.999"}
# 100 µs to 10 s, 1-2-5 per decade: readable `le` values, exact up to 2 ms (module doc).
BUCKETS_US: tuple[int, ...] = (
    *(100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000),
    *(500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000),
)

Notice = Callable[[str], None]


def metric_name(key: str) -> str:
    """The exported name of a time-series column (module doc: the unit words)."""
    words = key.split("_")
    named = []
    for i, word in enumerate(words):
        if word == "s" and i and words[i - 1] == "per":
            named.append("second")
        elif word == "s" and i == len(words) - 1:
            named.append("seconds")
        else:
            named.append(_UNIT_WORDS.get(word, word))
    return PREFIX + "_".join(named)


def gauge_keys(keys: Any) -> list[str]:
    """The columns exported as gauges under their derived names: every figure but the op
    latency columns (exported per op type, with an `op` label)."""
    return [
        k
        for k in keys
        if k not in _HEAD
        and k not in CLIFF_COLUMNS
        and split_instance_column(k) is None
        and (k not in METRICS or METRICS[k].source != "latency")
    ]


def instance_metric_name(key: str) -> str:
    """The exported name of a per-instance figure (module doc)."""
    return INSTANCE_PREFIX + metric_name(key).removeprefix(PREFIX)


def exported_names(keys: Any) -> list[str]:
    """Every family name a run with these time-series columns can export (README table)."""
    names = [metric_name(k) for k in gauge_keys(keys)] + [PREFIX + n for n in FIXED]
    split = {s[0] for k in keys if (s := split_instance_column(k))}
    return names + [instance_metric_name(k) for k in INSTANCE_KEYS if k in split]


def histogram_buckets(hist: Histogram) -> list[tuple[str, float]]:
    """Cumulative counts per `le` of BUCKETS_US, +Inf last (rounding: module doc)."""
    per_le = [0] * (len(BUCKETS_US) + 1)
    for idx, count in hist.counts.items():
        upper = bucket_bounds(idx)[1]  # ops timed at < upper whole µs
        per_le[bisect.bisect_left(BUCKETS_US, upper)] += count
    buckets, seen = [], 0
    for le, count in zip((*BUCKETS_US, float("inf")), per_le, strict=True):
        seen += count
        buckets.append((floatToGoString(le), float(seen)))
    return buckets


def textfile_problem(path: Path) -> str | None:
    """Why a --metrics-textfile cannot be used (None: it can), said before the run."""
    if path.suffix != ".prom":
        return (
            f"{path}: the name must end in .prom (node_exporter's textfile collector reads those)"
        )
    parent = path.absolute().parent
    if not parent.is_dir():
        return f"{path}: directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{path}: directory {parent} is not writable (the file is renamed into it)"
    return None


def _where(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


class OpenMetricsExporter(Collector):
    """The sink, collector and (optional) HTTP server of the live metrics (module doc).

    Use as a context manager: entering binds the port (a port in use is a ConfigError then,
    before the run), leaving shuts the server down and frees the port."""

    def __init__(
        self,
        *,
        port: int | None = None,
        address: str = DEFAULT_ADDRESS,
        textfile: Path | None = None,
        notice: Notice = lambda _msg: None,
    ) -> None:
        self.port, self.address, self.textfile, self.notice = port, address, textfile, notice
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._published: tuple[Metric, ...] = ()  # replaced whole: scrapes read one set
        self._labels = {"run": "", "phase": ""}
        self._info: dict[str, str] | None = None
        self._terms: Mapping[str, str] = {}
        self._targets: list[str] = []  # the instances' printable targets, by number - 1
        self._ops: dict[tuple[str, str], int] = {}  # (phase, op): ops so far
        self._hists: dict[tuple[str, str], Histogram] = {}
        self._textfile_failed = False
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------- lifecycle

    def __enter__(self) -> OpenMetricsExporter:
        if self.port is not None:
            try:
                self._server, self._thread = start_http_server(
                    self.port, self.address, registry=self.registry
                )
            except OSError as exc:  # in use, not an address of this host, a privileged port
                raise ConfigError(
                    f"--metrics-port: cannot listen on {_where(self.address, self.port)} "
                    f"({exc.strerror or exc})"
                ) from exc
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and free the port (shutdown alone keeps the socket open)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            if self._thread is not None:
                self._thread.join(5)

    @property
    def url(self) -> str | None:
        if self._server is None:
            return None
        return f"http://{_where(self.address, self._server.server_port)}/metrics"

    # ---------------------------------------------------------------- sink interface

    def begin(self, run: Mapping[str, Any]) -> None:
        """The run is about to start (runner/execute.py): its name, engine and terms."""
        self._labels["run"] = str(run.get("run") or "")
        self._terms = run.get("terms") or {}
        self._targets = [str(t) for t in run.get("targets") or []]
        self._info = {
            "version": __version__,
            "engine": str(run.get("engine") or ""),
            "engine_version": str(run.get("engine_version") or ""),
            "run": self._labels["run"],
        }
        self._publish({})

    def __call__(self, row: dict[str, Any], hists: dict[str, Histogram]) -> None:
        phase = str(row["phase"])
        self._labels["phase"] = phase
        for kind in OP_KINDS:
            if row.get(f"{kind}s_per_s") is None:
                continue  # the loop did not count this op type here (the warm-up)
            key = (phase, kind)
            self._ops[key] = self._ops.get(key, 0) + int(row.get(f"{kind}_count") or 0)
            self._hists.setdefault(key, Histogram()).merge(hists.get(kind) or Histogram())
        self._publish(row)

    def collect(self) -> Iterator[Metric]:
        return iter(self._published)

    # ------------------------------------------------------------------- the families

    def _publish(self, row: dict[str, Any]) -> None:
        families = self._families(row)
        self._published = tuple(families)
        if self.textfile is not None:
            self._write_textfile()

    def _write_textfile(self) -> None:
        assert self.textfile is not None
        try:
            write_to_textfile(str(self.textfile), self.registry)
        except OSError as exc:
            if not self._textfile_failed:  # once: the disk may stay full for the whole run
                self._textfile_failed = True
                self.notice(
                    f"--metrics-textfile {self.textfile}: not written ({exc.strerror or exc}); "
                    "the run goes on"
                )

    def _families(self, row: dict[str, Any]) -> list[Metric]:
        families: list[Metric] = []
        if self._info is not None:  # the family is "openslob_run", its sample "..._run_info"
            families.append(InfoMetricFamily(PREFIX + "run", FIXED["run_info"], self._info))
        if not row:
            return families
        names, values = list(self._labels), list(self._labels.values())
        gauges = [(PREFIX + name, FIXED[name], row.get(k)) for k, name in HEAD_GAUGES.items()]
        gauges += [(metric_name(k), self._help(k), row[k]) for k in gauge_keys(row)]
        for name, doc, value in gauges:
            if value is not None:  # not measured: left out, never 0
                gauge = GaugeMetricFamily(name, doc, labels=names)
                gauge.add_metric(values, float(value))
                families.append(gauge)
        families += self._instance_families(row, names, values)
        families += self._cliff_families(row, names, values)
        return families + self._op_families(row, [*names, "op"], values)

    def _instance_families(
        self, row: dict[str, Any], names: list[str], values: list[str]
    ) -> list[Metric]:
        """Each instance's own figures (`key@n` columns), one family per figure."""
        by_key: dict[str, Any] = {}
        for column, value in row.items():
            split = split_instance_column(column)
            if split is None or value is None:  # not measured: left out, never 0
                continue
            key, number = split
            if key not in by_key:
                by_key[key] = GaugeMetricFamily(
                    instance_metric_name(key),
                    f"{self._help(key)}, of one instance",
                    labels=[*names, "instance", "target"],
                )
            target = self._targets[number - 1] if number <= len(self._targets) else ""
            by_key[key].add_metric([*values, str(number), target], float(value))
        return list(by_key.values())

    @staticmethod
    def _cliff_families(row: dict[str, Any], names: list[str], values: list[str]) -> list[Metric]:
        """The live cliff judgement: absent where not judged (the warm-up, CLIFF=off)."""
        count = row.get(CLIFF_COLUMNS[1])
        if count is None:
            return []
        active = GaugeMetricFamily(
            PREFIX + "cliff_active", FIXED["cliff_active"], labels=[*names, "figure"]
        )
        figures = [f for f in str(row.get(CLIFF_COLUMNS[0]) or "").split("+") if f]
        active.add_metric([*values, ""], 1.0 if figures else 0.0)
        for figure in figures:
            active.add_metric([*values, figure], 1.0)
        episodes = CounterMetricFamily(
            PREFIX + "cliff_episodes", FIXED["cliff_episodes_total"], labels=names
        )
        episodes.add_metric(values, float(count))
        return [active, episodes]

    def _help(self, key: str) -> str:
        metric = METRICS.get(key)
        steady_help = steady.column_help(key)
        if steady_help is not None:  # STEADY_STATE's columns (runner/steadysink.py)
            return steady_help
        if metric is None:  # an engine's horizon figure: not in the table
            return f"{key} (cleanup horizon, at the interval's end)"
        label = metric.label_for(self._terms)
        return label if label.endswith(metric.unit) else f"{label} ({metric.unit})"

    def _op_families(
        self, row: dict[str, Any], names: list[str], values: list[str]
    ) -> list[Metric]:
        """Per op type (`names` ends with "op"): the latest interval's latency, the phases'
        counters and histograms."""

        def family(
            cls: type[GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily],
            name: str,
            *more: str,
        ) -> Any:
            return cls(PREFIX + name, FIXED[name], labels=[*names, *more])

        gauges = []
        # the service time, and for RATE runs the latency from the intended start (the
        # timeseries.csv columns `select_p99_us`, `select_p99_intended_us`)
        for suffix, infix in (("", ""), ("_intended", "intended_")):
            latency = family(GaugeMetricFamily, f"op_latency_{infix}microseconds", "quantile")
            mean = family(GaugeMetricFamily, f"op_latency_{infix}mean_microseconds")
            top = family(GaugeMetricFamily, f"op_latency_{infix}max_microseconds")
            for kind in OP_KINDS:
                for stat, _ in LATENCY_STATS:
                    value = row.get(f"{kind}_{stat}{suffix}_us")
                    if value is None:
                        continue
                    if stat in QUANTILES:
                        latency.add_metric([*values, kind, QUANTILES[stat]], float(value))
                    else:
                        target = mean if stat == "mean" else top
                        target.add_metric([*values, kind], float(value))
            gauges += [latency, mean, top]
        ops = family(CounterMetricFamily, "ops_total")
        hist = family(HistogramMetricFamily, "op_latency_histogram_microseconds")
        for (phase, kind), count in self._ops.items():
            labels = [self._labels["run"], phase, kind]
            ops.add_metric(labels, float(count))
            total = self._hists[(phase, kind)]
            total_us = (total.mean_us() or 0.0) * total.count  # bucket midpoints
            hist.add_metric(labels, histogram_buckets(total), total_us)
        return [f for f in (*gauges, ops, hist) if f.samples]
