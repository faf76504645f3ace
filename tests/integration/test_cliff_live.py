"""A cliff seen as it happens (issue 27 items 3-4), against a real slowdown: a private
PostgreSQL (pio profile: direct I/O, a cache smaller than the data set) whose data directory
is on a loop-device ext4, throttled mid-run by a cgroup I/O limit (tests/integration/throttle.py).
The run must print the cliff while it runs and keep it in run.json, timeseries.csv and the
report, within one rule window of the throttle. No speed is asserted: the sizes asserted are
the run's own baseline against what the kernel's limit lets through."""

from __future__ import annotations

import csv
import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from openslob.engines.postgres.server import EmbeddedServer
from openslob.results.schema import validate_run
from tests.conftest import invoke, slob_subprocess
from tests.integration.test_html_report import (
    chart_box,
    open_all_details,
    open_page,
)
from tests.integration.throttle import IoThrottle, LoopFs, loop_filesystem

# 2 x 32 MiB of CF1 against ~16 MiB of pio shared_buffers: most reads reach the device.
DATA = ["--schemas", "2", "--scale", "4096", "--scan-table-sz", "0"]
CLIFF_WINDOW = 4  # intervals of the rule's baseline (1 s each)
RUN = ["--sessions", "2", "--update-pct", "0", "--work-unit", "8", "--warmup", "2"]
RUN += ["--run-time", "20", "--cliff-window", str(CLIFF_WINDOW)]
# Steady state on the same run (item 4): never called steady until the new level has held a
# whole window after the throttle.
SS_WINDOW_S = 4
RUN += ["--steady-state", "iops:dev<20%", "--ss-window", str(SS_WINDOW_S)]
THROTTLE_AFTER_ROWS = CLIFF_WINDOW + 4  # window rows before the throttle: a known baseline
READ_IOPS_LIMIT = 150


@pytest.fixture(scope="module")
def throttled_pg() -> Iterator[tuple[LoopFs, EmbeddedServer]]:
    """A private PostgreSQL with its data set, all on a loop-device file system: the fixture
    other tests of a real slowdown reuse (throttle it with IoThrottle(fs).adopt(pid))."""
    with loop_filesystem("openslob-cliff-", 600) as fs:
        data_dir = fs.mount / "data"
        try:
            result = invoke(
                "setup", "--target", "embedded", *DATA, "--data-dir", str(data_dir), cwd=fs.mount
            )
            assert result.exit_code == 0, result.output
            yield fs, EmbeddedServer(data_dir)
        finally:
            invoke("server", "destroy", "--yes", "--data-dir", str(data_dir), cwd=fs.mount)


def postmaster_pid(server: EmbeddedServer) -> int:
    return int((server.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])


def window_rows(results: Path) -> list[dict[str, str]]:
    files = list(results.glob("*/timeseries.csv"))
    if not files:
        return []
    with files[0].open(newline="") as fh:
        return [r for r in csv.DictReader(fh) if r.get("phase") == "window"]


def throttle_when_known(
    results: Path, throttle: IoThrottle, pid: int, done: threading.Event
) -> dict[str, Any]:
    """Throttle once the window has THROTTLE_AFTER_ROWS rows; when, in elapsed_s terms."""
    at: dict[str, Any] = {}
    deadline = time.time() + 60
    while not done.is_set() and time.time() < deadline:
        rows = window_rows(results)
        if len(rows) >= THROTTLE_AFTER_ROWS:
            last = rows[-1]
            throttle.adopt(pid)
            throttle.limit(READ_IOPS_LIMIT, READ_IOPS_LIMIT)
            now = time.time()
            ended = datetime.fromisoformat(last["time"]).timestamp()
            at["elapsed_s"] = float(last["elapsed_s"]) + (now - ended)
            break
        time.sleep(0.1)
    return at


def test_throttled_device_cliff_is_seen_live_and_recorded(
    throttled_pg: tuple[LoopFs, EmbeddedServer],
    tmp_path: Path,
    browser: Any,
) -> None:
    fs, server = throttled_pg
    results = tmp_path / "results"
    args = ["run", "--target", "embedded", *DATA, *RUN, "--results-dir", str(results)]
    with IoThrottle(fs) as throttle:
        proc = slob_subprocess(*args, data_dir=server.data_dir)
        done = threading.Event()
        at: dict[str, Any] = {}
        watcher = threading.Thread(
            target=lambda: at.update(
                throttle_when_known(results, throttle, postmaster_pid(server), done)
            )
        )
        watcher.start()
        try:
            _out, err = proc.communicate(timeout=120)
        finally:
            done.set()
            watcher.join()
            if proc.poll() is None:
                proc.kill()
        throttled_ios = throttle.ios()
    assert proc.returncode == 0, err
    assert at, f"the window never had {THROTTLE_AFTER_ROWS} rows to throttle after: {err}"
    (run_dir,) = results.iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    validate_run(run)
    cliffs = run["cliffs"]
    assert cliffs["rule"] == "ops:drop>30%,iops:drop>30%,p99:rise>100%"
    # the throttle reached the database's reads: the kernel counted them in our cgroup
    assert throttled_ios is None or throttled_ios > 0

    episodes = {e["figure"]: e for e in cliffs["episodes"]}  # each figure's last
    print(f"throttled at {at}; episodes {json.dumps(cliffs['episodes'])}")  # the measurement
    print("\n".join(line for line in err.splitlines() if "cliff" in line))
    assert {"ops", "iops"} <= set(episodes), cliffs
    window_s = CLIFF_WINDOW * run["config"]["SAMPLE_INTERVAL"]
    for figure in ("ops", "iops"):
        e = episodes[figure]
        # it covers the throttle from its interval on (it may continue a dip of the shared
        # host just before) and is said within one rule window of it
        step = run["config"]["SAMPLE_INTERVAL"]
        assert e["start_s"] <= at["elapsed_s"] + step, (e, at)
        assert e["detected_s"] - at["elapsed_s"] <= window_s, (e, at)
        assert e["open"] and e["end_s"] is None  # the throttle held to the end
    # the level before was well above what the limit lets through, and the episode's worst
    # interval is at most about the limit (a partial interval may let a little more through)
    iops = episodes["iops"]
    assert iops["baseline"] > 3 * READ_IOPS_LIMIT, iops
    assert iops["worst"] <= 1.5 * READ_IOPS_LIMIT and iops["size_pct"] < -30

    # said when it happened: the notice, before the report
    notices = [line for line in err.splitlines() if "cliff: " in line]
    assert any("SLOBops/s" in n and "into the window" in n for n in notices), err
    # marked in the time series
    rows = window_rows(results)
    marked = [r for r in rows if r["cliff"]]
    first = min(e["detected_s"] for e in cliffs["episodes"])
    assert marked and float(marked[0]["elapsed_s"]) == pytest.approx(first, abs=0.001)
    assert {"ops", "iops"} <= set(rows[-1]["cliff"].split("+"))
    assert int(rows[-1]["cliff_episodes"]) == len(cliffs["episodes"])
    # not steady while the rule's window still holds intervals from before the throttle
    mixed = [
        r for r in rows if at["elapsed_s"] <= float(r["elapsed_s"]) < at["elapsed_s"] + SS_WINDOW_S
    ]
    assert mixed and all(r["steady_state"] != "1" for r in mixed), mixed
    steady_block = run["steady_state"]
    assert steady_block["rules"] == "iops:dev<20%" and steady_block["window_s"] == SS_WINDOW_S
    if steady_block["reached_at_s"] is not None and steady_block["reached_at_s"] > at["elapsed_s"]:
        assert steady_block["reached_at_s"] >= at["elapsed_s"] + SS_WINDOW_S - 1, steady_block
    # and in the report, with what the same intervals say about the cause
    report = (run_dir / "report.txt").read_text()
    assert "Cliffs (live)" in report and "open" in report
    assert "cause" in report

    # and shaded in the HTML report's time series, as drawn by real headless chromium
    page = tmp_path / "run.html"
    result = invoke("report", str(run_dir), "--html", "-o", str(page), cwd=tmp_path)
    assert result.exit_code == 0, result.output
    open_page(browser, page)
    assert_band_shaded(browser, episodes["ops"], cliffs["episodes"])


BAND_PIXELS = """
const chart = window.openslobCharts[arguments[0]];
chart.stop();
chart.update('none');  // drawn now, at its final size, with no animation frame pending
const start = arguments[1], end = arguments[2], first = arguments[3];
const {chartArea: a, scales: {x}} = chart, c = chart.canvas, ctx = c.getContext('2d');
const ratio = c.width / c.clientWidth;
function shaded(from, to) {  // pixels of the band's colour (rgba(214, 39, 40, 0.12))
  const left = Math.round(Math.max(a.left, from) * ratio);
  const width = Math.round((Math.min(a.right, to) - Math.max(a.left, from)) * ratio);
  if (width <= 0) return 0;
  const data = ctx.getImageData(left, Math.round(a.top * ratio), width,
                                Math.round((a.bottom - a.top) * ratio)).data;
  let n = 0;
  for (let i = 0; i < data.length; i += 4)
    if (data[i] > 200 && data[i + 1] < 80 && data[i + 3] > 20 && data[i + 3] < 200) n++;
  return n / (width * (a.bottom - a.top) * ratio);
}
return [shaded(x.getPixelForValue(start), x.getPixelForValue(end)),
        shaded(a.left, x.getPixelForValue(first) - 2),
        chart.canvas.parentNode._spec.bands];
"""


def assert_band_shaded(
    driver: Any, episode: dict[str, Any], episodes: list[dict[str, Any]]
) -> None:
    """The chart's spec has the episode's band, and its span is painted: most of it in the
    band's colour, almost nothing before the first band."""
    open_all_details(driver)
    index, _canvas = chart_box(driver, "I/O per second")
    time.sleep(0.5)  # drawn once in view
    first = min(e["start_s"] for e in episodes)  # before every band: no shade
    for _ in range(30):  # a chart just scrolled into view may still be sized and drawn
        inside, before, bands = driver.execute_script(
            BAND_PIXELS, index, episode["start_s"], episode["start_s"] + 5, first
        )
        if inside > 0.5:
            break
        time.sleep(0.1)
    ours = [b for b in bands if b[0] == episode["start_s"] and b[2].startswith("cliff ")]
    assert ours and "ops -" in ours[0][2], bands
    assert inside > 0.5 and before < 0.05, (inside, before)
