"""Live metrics (`slob run --metrics-port/--metrics-textfile`): scraped during a real run on
the real private server, checked against the run's own timeseries.csv; bad options refused
in one line before anything starts. Only 127.0.0.1 is ever bound or connected to."""

from __future__ import annotations

import csv
import re
import socket
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from openslob.cli import cli
from openslob.engines.postgres.server import EmbeddedServer
from openslob.model import steady
from openslob.model.histogram import Histogram
from openslob.model.metrics import METRICS
from openslob.model.perinstance import instance_keys
from openslob.results.openmetrics import BUCKETS_US, exported_names, histogram_buckets, metric_name
from tests.conftest import invoke
from tests.integration.test_run import dataset  # noqa: F401  (the same data set as test_run: loaded once)

README = Path(__file__).resolve().parents[2] / "README.md"
DATA = ["--schemas", "2", "--scale", "3000", "--scan-table-sz", "40", "--seed", "99"]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def parse(text: str) -> Samples:
    """{(sample name, sorted labels): value} of a scrape or textfile."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The one sample of `name` whose labels include `labels` (None: absent)."""
    found = [
        v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()
    ]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


class Scraper(threading.Thread):
    """GET /metrics and read the textfile every 0.2 s until stopped, keeping every parsed
    answer (a torn textfile would fail to parse: it is renamed into place whole)."""

    def __init__(self, port: int, textfile: Path) -> None:
        super().__init__(daemon=True)
        self.url, self.textfile = f"http://127.0.0.1:{port}/metrics", textfile
        self.scrapes: list[Samples] = []
        self.textfiles: list[Samples] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            if self.textfile.exists():
                self.textfiles.append(parse(self.textfile.read_text()))
            try:
                with urllib.request.urlopen(self.url, timeout=2) as answer:
                    self.scrapes.append(parse(answer.read().decode()))
            except OSError:
                continue  # not listening yet, or already closed


def port_is_free(port: int) -> bool:
    """Another server could listen there now (SO_REUSEADDR, as every server sets it: the
    scrapes' closed connections may still sit in TIME_WAIT)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
    return True


def window_rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "timeseries.csv").open() as fh:
        return [r for r in csv.DictReader(fh) if r["phase"] == "window"]


def test_scraped_during_a_real_run_and_textfile_matches_timeseries(
    dataset: EmbeddedServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    port, textfile = free_port(), tmp_path / "prom" / "openslob.prom"
    textfile.parent.mkdir()
    scraper = Scraper(port, textfile)
    scraper.start()
    try:
        result = invoke(
            "run",
            *DATA,
            "--update-pct",
            "20",
            "--warmup",
            "1",
            "--run-time",
            "4",
            "--sample-interval",
            "1",
            "--results-dir",
            str(tmp_path / "results"),
            "--metrics-port",
            str(port),
            "--metrics-textfile",
            str(textfile),
            cwd=tmp_path,
            env={"SLOB_DATA_DIR": str(dataset.data_dir)},
        )
    finally:
        scraper.stop.set()
        scraper.join(5)
    assert result.exit_code == 0, result.output
    assert f"live metrics: http://127.0.0.1:{port}/metrics" in result.output
    (run_dir,) = (tmp_path / "results").iterdir()

    # The server is gone with the run: no thread serving, the port free for anyone.
    assert not [t for t in threading.enumerate() if "serve_forever" in t.name]
    assert port_is_free(port)

    # Scraped during the window: real figures, counters that grow, ordered percentiles.
    window = [s for s in scraper.scrapes if value(s, "openslob_ops_total", op="select")]
    assert len(window) >= 2, len(scraper.scrapes)
    first, last = window[0], window[-1]
    assert value(last, "openslob_run_info", engine="postgresql", run=run_dir.name) == 1
    assert value(last, "openslob_slobops_per_second", phase="window", run=run_dir.name) > 0
    assert value(last, "openslob_pio_reads_per_second", phase="window") > 0
    counts = [value(s, "openslob_ops_total", op="select", phase="window") for s in window]
    assert counts == sorted(counts) and counts[-1] > counts[0]
    for scrape in window:
        quantiles = [
            value(scrape, "openslob_op_latency_microseconds", op="select", quantile=q)
            for q in ("0.5", "0.9", "0.99", "0.999")
        ]
        assert None not in quantiles and quantiles == sorted(quantiles), quantiles
        top = value(scrape, "openslob_op_latency_max_microseconds", op="select")
        assert quantiles[0] > 0 and quantiles[-1] <= top
    buckets = [
        value(last, "openslob_op_latency_histogram_microseconds_bucket", op="select", le=le)
        for le in [*map(floatToGoString, BUCKETS_US), "+Inf"]  # as Go writes them: 1e+06
    ]
    assert buckets == sorted(buckets)
    assert buckets[-1] == value(last, "openslob_ops_total", op="select")
    assert value(first, "openslob_ops_total", op="select", phase="warmup") is None  # not counted

    # The textfile after the run: the last window row of timeseries.csv, None left out.
    samples = parse(textfile.read_text())
    rows = window_rows(run_dir)
    final = rows[-1]
    labels = {"run": run_dir.name, "phase": "window"}
    checked = 0
    for key, cell in final.items():
        if (key in METRICS and METRICS[key].source == "latency") or key in ("time", "phase"):
            continue
        if key == "cliff":  # the figures in an open cliff episode: 1 while any is
            assert value(samples, "openslob_cliff_active", figure="", **labels) == float(bool(cell))
            continue
        name = {
            "interval": None,
            "seconds": "openslob_interval_seconds",
            "cliff_episodes": "openslob_cliff_episodes_total",
        }.get(key, metric_name(key))
        name = "openslob_elapsed_seconds" if key == "elapsed_s" else name
        if name is None:
            continue
        got = value(samples, name, **labels)
        if cell == "":
            assert got is None, key  # not measured: absent, never 0
        else:
            assert got == pytest.approx(float(cell), rel=1e-6, abs=6e-4), key
            checked += 1
    assert checked >= 20
    for kind in ("select", "update"):
        total = sum(int(r[f"{kind}_count"]) for r in rows)
        assert value(samples, "openslob_ops_total", op=kind, **labels) == total > 0
        for stat, q in (("p50", "0.5"), ("p99", "0.99")):
            got = value(samples, "openslob_op_latency_microseconds", op=kind, quantile=q)
            assert got == float(final[f"{kind}_{stat}_us"])
    # a closed-loop run has no intended start: those families are absent, never 0
    assert not [n for n in samples if "intended" in n[0]]
    assert not list(textfile.parent.glob("*.prom.*"))  # no temporary file left beside it
    during = [value(t, "openslob_ops_total", op="select") for t in scraper.textfiles]
    first_seen = min(c for c in during if c)  # rewritten as the window went
    assert 0 < first_seen < value(samples, "openslob_ops_total", op="select")


def test_rate_run_exports_latency_from_the_intended_start(
    dataset: EmbeddedServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A RATE run's textfile carries the intended-start percentiles of the last interval,
    equal to timeseries.csv's, each at least the service time's (the lag is added)."""
    textfile = tmp_path / "openslob.prom"
    result = invoke(
        "run", *DATA, "--update-pct", "0", "--rate", "60", "--sessions", "2", "--warmup", "0",
        "--run-time", "3", "--sample-interval", "1", "--results-dir", str(tmp_path / "results"),
        "--metrics-textfile", str(textfile),
        cwd=tmp_path, env={"SLOB_DATA_DIR": str(dataset.data_dir)},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "results").iterdir()
    final = window_rows(run_dir)[-1]
    samples = parse(textfile.read_text())
    for stat, q in (("p50", "0.5"), ("p90", "0.9"), ("p99", "0.99"), ("p999", "0.999")):
        intended = value(samples, "openslob_op_latency_intended_microseconds", op="select",
                         quantile=q)  # fmt: skip
        service = value(samples, "openslob_op_latency_microseconds", op="select", quantile=q)
        assert intended == float(final[f"select_{stat}_intended_us"])
        assert service is not None and intended >= service
    top = value(samples, "openslob_op_latency_intended_max_microseconds", op="select")
    assert top == float(final["select_max_intended_us"])


def one_line_error(result: Any, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.output.strip().count("\n") == 0, result.output
    for word in words:
        assert word in result.output, (word, result.output)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--metrics-port", "0"], ["--metrics-port", "1<=x<=65535"]),
        (["--metrics-port", "65536"], ["--metrics-port", "1<=x<=65535"]),
        (["--metrics-port", "9464", "--metrics-address", "localhost"], ["--metrics-address"]),
        (["--metrics-port", "9464", "--metrics-address", "10.0.0.300"], ["not an IP address"]),
        (["--metrics-address", "127.0.0.1"], ["--metrics-address needs --metrics-port"]),
        (["--metrics-textfile", "metrics.txt"], ["--metrics-textfile", ".prom"]),
        (["--metrics-textfile", "/nonexistent/openslob.prom"], ["does not exist"]),
    ],
)
def test_bad_option_is_one_line_exit_2(tmp_path: Path, args: list[str], words: list[str]) -> None:
    never = tmp_path / "never"
    result = CliRunner().invoke(cli, ["run", *args], env={"SLOB_DATA_DIR": str(never)})
    one_line_error(result, *words)
    assert not never.exists()


def test_port_in_use_is_refused_before_the_data_set_is_touched(tmp_path: Path) -> None:
    never = tmp_path / "never"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke(
            "run",
            "--metrics-port",
            str(port),
            "--results-dir",
            str(tmp_path / "results"),
            cwd=tmp_path,
            env={"SLOB_DATA_DIR": str(never)},
        )
    one_line_error(result, "--metrics-port", f"127.0.0.1:{port}", "in use")
    assert not never.exists() and not (tmp_path / "results").exists()


def test_histogram_counts_whole_buckets_below_le() -> None:
    # 99 and 100 µs: 1 µs buckets, exact. 1000-1007 µs share one bucket of ours (8 µs wide
    # above 512): below le=1000 none of it, below le=2000 all of it. 4995 µs: our bucket
    # [4992, 5056) straddles le=5000, so it counts under the next le (10000).
    hist = Histogram.from_values([99, 100, 1000, 1007, 4995])
    counts = dict(histogram_buckets(hist))
    assert counts["100.0"] == 1 and counts["200.0"] == 2
    assert counts["1000.0"] == 2 and counts["2000.0"] == 4
    assert counts["5000.0"] == 4 and counts["10000.0"] == 5 and counts["+Inf"] == 5


def test_readme_lists_every_exported_name() -> None:
    section = README.read_text().split("## Live metrics", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(openslob_[a-z0-9_]+)`", section))
    live = [k for k, m in METRICS.items() if m.live]
    horizon = ["horizon_age_xids", "history_length"]  # the engines' horizon figures
    keys = [*live, *horizon, *instance_keys(2)]  # a run over two instances
    keys += steady.all_columns()  # a run with STEADY_STATE rules on every figure
    assert set(exported_names(keys)) == listed
    assert len(set(exported_names(keys))) == len(exported_names(keys))
