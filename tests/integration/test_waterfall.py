"""The latency waterfall of a real run with an imported series: a constructed array p99
far above the op p99 (which cannot be true) lands in run.json external_series, the
intervals, the text report's waterfall and the HTML page (checked in headless chromium),
and fires the impossible-order warning; a bad file is refused in one line before the run.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By

from openslob.engines.postgres.server import EmbeddedServer
from openslob.results.schema import validate_run
from tests.conftest import invoke
from tests.integration.test_html_report import (
    DATA,
    assert_all_drawn,
    open_page,
    write_page,
)

SHORT = ["--run-time", "2", "--warmup", "0", "--sample-interval", "0.5"]
# 10 s "at the array": above any op p99 of a 2 s run on this machine, so the order is wrong.
ARRAY_P99_US = 10_000_000


def test_external_series_in_the_waterfall_and_the_warning(
    server: EmbeddedServer,
    tmp_path: Path,
    browser: webdriver.Chrome,
) -> None:
    env = {"SLOB_DATA_DIR": str(server.data_dir)}
    # the session's server is shared: another module may have left another data set there
    setup = invoke("setup", *DATA, cwd=tmp_path, env=env)
    assert setup.exit_code == 0, setup.output
    bad = tmp_path / "bad.csv"
    bad.write_text("time,name,value\n1800000000,array_read_latency,3\n")
    refused = invoke("run", *DATA, *SHORT, "--external-series", str(bad), cwd=tmp_path, env=env)
    assert refused.exit_code == 2
    assert f"--external-series {bad}: line 2: name 'array_read_latency'" in refused.output
    assert not list(tmp_path.rglob("run.json"))

    # Samples every 0.25 s from a minute before now to two minutes after: the run's window is
    # somewhere in there; the IOPS series in ISO time, the latency in epoch seconds.
    now = time.time()
    lines = ["time,name,value"]
    for k in range(-240, 480):
        t = now + k / 4
        lines.append(f"{t:.3f},array_read_p99_us,{ARRAY_P99_US}")
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"
        lines.append(f"{iso},array_read_iops_per_s,1234")
        lines.append(f"{t:.3f},clock_probe_us,{t:.3f}")  # its value is its time: alignment
    series = tmp_path / "array.csv"
    series.write_text("\n".join(lines) + "\n")
    result = invoke(
        "run",
        *DATA,
        *SHORT,
        "--sessions",
        "2",
        "--update-pct",
        "0",
        "--external-series",
        str(series),
        "--results-dir",
        str(tmp_path),
        "--label",
        "waterfall",
        cwd=tmp_path,
        env=env,
    )
    assert result.exit_code == 0, result.output
    (run_file,) = tmp_path.rglob("run.json")
    run = json.loads(run_file.read_text())
    validate_run(run)
    # kernel tracing is opt-in (it costs throughput): not asked, the layers say so
    for layer in ("db_read_call", "log_sync", "device_read", "device_write"):
        assert "TRACE_LAYERS is off" in run["latency_layers"][layer]["reason"], layer
    entries = {e["name"]: e for e in run["external_series"]}
    p99 = entries["array_read_p99_us"]
    assert p99["layer"] == "measured outside this host: array_read_p99_us"
    assert p99["unit"] == "us" and p99["stat"] == "p99"
    intervals = [
        row[run["intervals"]["columns"].index("interval")] for row in run["intervals"]["rows"]
    ]
    assert p99["intervals"] == intervals and len(intervals) >= 3
    assert all(v == ARRAY_P99_US for v in p99["values"]) and all(n >= 1 for n in p99["samples"])
    assert entries["array_read_iops_per_s"]["window"]["mean"] == 1234
    # each interval's value is the mean of the samples inside it: its middle, ± a sample step
    barrier = datetime.fromisoformat(run["window"]["barrier"]).timestamp()
    columns = run["intervals"]["columns"]
    for row, value in zip(
        run["intervals"]["rows"], entries["clock_probe_us"]["values"], strict=True
    ):
        end = barrier + row[columns.index("elapsed_s")]
        assert abs(value - (end - row[columns.index("seconds")] / 2)) <= 0.25, (row, value)
    assert "external:array_read_p99_us" in run["intervals"]["columns"]
    op_p99 = run["latency"]["select"]["p99_us"]
    assert op_p99 < ARRAY_P99_US
    (warning,) = [w for w in run["warnings"] if w.startswith("impossible latency order")]
    assert warning.startswith("impossible latency order: op (SLOBop select) (inside the")
    assert "array_read_p99_us beneath it (measured outside this host: array_read_p99_us)" in warning
    assert f"at p99 in {len(intervals)} interval(s)" in warning
    assert "against 10,000,000 us)" in warning

    report = (run_file.parent / "report.txt").read_text()
    assert (
        "Latency waterfall" in report and "measured outside this host: array_read_p99_us" in report
    )
    assert "impossible latency order: op (SLOBop select)" in report

    page = write_page("report", str(run_file.parent), "--html", "-o", str(tmp_path / "wf.html"))
    open_page(browser, page)
    assert_all_drawn(browser, at_least=4)
    titles = browser.execute_script(
        "return window.openslobCharts.map(c => c.options.plugins.title.text)"
    )
    assert "Latency waterfall by percentile (window)" in titles
    assert any(t.startswith("Latency waterfall per interval") for t in titles)
    table = browser.find_element(By.CSS_SELECTOR, "table.waterfall").text
    assert "array_read_p99_us" in table and "measured outside this host" in table
    assert "10,000.0 ms" in table

    # `slob report --external-series`: a plausible array series replaces the impossible one
    # in the run directory (run.json, report.txt); the warning goes with it.
    plausible = tmp_path / "plausible.csv"
    plausible.write_text(series.read_text().replace(f",{ARRAY_P99_US}", ",100"))
    again = invoke(
        "report", str(run_file.parent), "--external-series", str(plausible), cwd=tmp_path
    )
    assert again.exit_code == 0, again.output
    rerun = json.loads(run_file.read_text())
    validate_run(rerun)
    maxima = {e["name"]: e["window"]["max"] for e in rerun["external_series"]}
    assert maxima["array_read_p99_us"] == 100 and maxima["array_read_iops_per_s"] == 1234
    assert not [w for w in rerun["warnings"] if w.startswith("impossible latency order")]
    assert rerun["intervals"]["columns"].count("external:array_read_p99_us") == 1
    assert "100.0 us" in (run_file.parent / "report.txt").read_text()
    assert "impossible latency order" not in again.output
