"""The HTML report in a real headless browser (Debian's chromium with its chromedriver).

Real runs on the session's private server: a 2 × 2 sweep, a target-rate sweep, one run on
its own, a comparison and the Oracle AWR reports of SLOB's 11g kit. Each page must load with
no console error, draw every chart, show the summary, sort its table by value, show values
on hover, toggle a curve from the legend, zoom the charts of one run together, and print.
Full-page screenshots are saved as test artifacts (SLOB_TEST_ARTIFACTS, default
./test-artifacts); the README's picture is the sweep page's.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import time
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from openslob.engines.postgres.server import EmbeddedServer
from tests.conftest import invoke
from tests.integration.conftest import ARTIFACTS

ORACLE = Path(__file__).parents[1] / "data" / "oracle"
# test_layout.py's data set (setup is then a no-op there): 2 × 62.5 MB, above shared_buffers,
# so the short update runs keep one row per page (a cached table updated every few ms bloats).
DATA = ["--schemas", "2", "--scale", "8000", "--scan-table-sz", "16", "--seed", "31"]
SHORT = ["--run-time", "2", "--warmup", "0", "--sample-interval", "0.5", "--no-plots"]


@pytest.fixture(scope="module")
def results(server: EmbeddedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html")
    env = {"SLOB_DATA_DIR": str(server.data_dir)}

    def slob(*args: str) -> None:
        result = invoke(*args, cwd=root, env=env)
        assert result.exit_code == 0, result.output

    slob("setup", *DATA)
    common = [*DATA, *SHORT, "--results-dir", str(root)]
    slob("sweep", *common, "--sessions", "1,2", "--update-pct", "0,20", "--label", "html")
    slob(
        "sweep",
        *common,
        "--sessions",
        "2",
        "--rate",
        "40,80",
        "--update-pct",
        "0",
        "--label",
        "rate",
    )
    return root


def write_page(*args: str) -> Path:
    out = Path(args[args.index("-o") + 1] if "-o" in args else args[args.index("--html") + 1])
    result = invoke(*args, cwd=out.parent)
    assert result.exit_code == 0, result.output
    return out


def open_page(driver: webdriver.Chrome, page: Path) -> None:
    """Load the page; fail on any console error; every chart box has its Chart."""
    text = page.read_text()
    assert not re.search(r"<(script|link|img)[^>]*\b(src|href)=", text)  # all inline
    driver.get_log("browser")  # drop what an earlier page left
    driver.get(page.as_uri())
    boxes = text.count('<div class="chart">')
    for _ in range(50):
        if driver.execute_script("return document.body.dataset.ready") is not None:
            break
        time.sleep(0.1)
    assert driver.execute_script("return document.body.dataset.ready") == str(boxes)
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert not errors, errors
    # works offline: the page fetched nothing (no script, style, font or image from anywhere)
    assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0


def open_all_details(driver: webdriver.Chrome) -> None:
    driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    time.sleep(0.3)  # ResizeObserver: charts in opened sections get their size


DRAWN = """
const out = [];
for (const chart of window.openslobCharts) {
  const c = chart.canvas, ctx = c.getContext('2d');
  const data = ctx.getImageData(0, 0, c.width, c.height).data;
  let inked = 0;
  for (let i = 3; i < data.length; i += 16) if (data[i] > 0) inked++;
  out.push([chart.options.plugins.title.text, c.width, c.height, inked]);
}
return out;
"""


def assert_all_drawn(driver: webdriver.Chrome, at_least: int) -> None:
    drawn = driver.execute_script(DRAWN)
    assert len(drawn) >= at_least
    for title, width, height, inked in drawn:
        assert width > 200 and height > 150 and inked > 500, (title, width, height, inked)


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    """The whole page, as tall as it is (up to 8,000 px)."""
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1400, min(height + 40, 8000))
    time.sleep(0.3)
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    assert path.stat().st_size > 30_000
    return path


def chart_box(driver: webdriver.Chrome, title_part: str) -> tuple[int, WebElement]:
    index = driver.execute_script(
        "return window.openslobCharts.findIndex(c => c.options.plugins.title.text.includes("
        "arguments[0]))",
        title_part,
    )
    assert index >= 0, title_part
    canvas = driver.execute_script("return window.openslobCharts[arguments[0]].canvas", index)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    return index, canvas


def move_to(driver: webdriver.Chrome, canvas: WebElement, x: float, y: float) -> ActionChains:
    """Selenium's offsets are from the element's centre; x, y from its top left corner."""
    size = canvas.size
    actions = ActionChains(driver)
    actions.move_to_element_with_offset(
        canvas, round(x - size["width"] / 2), round(y - size["height"] / 2)
    )
    return actions


def column_values(driver: webdriver.Chrome, table: WebElement, header: str) -> list[float]:
    heads = [th.text.split("\n")[0] for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    col = heads.index(header)
    cells = table.find_elements(By.CSS_SELECTOR, f"tbody tr td:nth-child({col + 1})")
    return [float(c.get_attribute("data-v")) for c in cells]


# --- the sweep page -----------------------------------------------------------------------


def test_sweep_report_in_a_browser(results: Path, browser: webdriver.Chrome) -> None:
    sweep = results / "sweep-html"
    page = write_page("report", str(sweep), "--html", "-o", str(results / "sweep.html"))
    open_page(browser, page)
    assert browser.title == "openslob sweep html"

    # The summary: the peak is the highest DB physical I/O of the four runs, measured.
    runs = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/run.json"))]
    peak = max(r["metrics"]["pio_reads_per_s"] + r["metrics"]["pio_writes_per_s"] for r in runs)
    cards = browser.find_element(By.CSS_SELECTOR, "#summary .cards").text
    assert f"{peak:,.0f} IOPS" in cards and "SLOBop p99" in cards
    assert (
        "peak physical i/o" in cards.lower()  # (CSS writes card titles in capitals)
        and "device" in browser.find_element(By.CSS_SELECTOR, "#summary p.explain").text
    )  # what the database's IOPS count, beside the device's
    knees = browser.find_elements(By.CSS_SELECTOR, "#summary table.data")[0]
    rows = knees.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 2  # one per update %
    for row in rows:  # a knee is shown only where the curve bent before its last point
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        knee_at, last = cells[2], cells[5]
        assert knee_at == "not reached" or int(knee_at) < int(last), cells
    tested = browser.find_element(By.ID, "summary").text
    assert "PostgreSQL" in tested and "shared_buffers" in tested and "Varies between" in tested
    # what ran, in readable words: the session counts that ran (not SESSIONS=0), the page
    # size the engine reported (not the PAGE_SIZE option of another engine)
    assert "Sessions (as run) (SESSIONS) 1, 2" in tested and "PAGE_SIZE" not in tested
    assert "Page size (page_size_bytes) 8 KiB" in tested

    # The awr_info table sorts by value, both ways; n/a never sorts as a number.
    table = browser.find_element(By.CSS_SELECTOR, "#table table.sortable")
    header = next(
        th
        for th in table.find_elements(By.CSS_SELECTOR, "thead th")
        if th.text.startswith("PREADS")
    )
    header.click()
    ascending = column_values(browser, table, "PREADS/s")
    assert ascending == sorted(ascending) and len(ascending) == 4
    header.click()
    assert column_values(browser, table, "PREADS/s") == sorted(ascending, reverse=True)

    # Petal points carry their session count, drawn beside them; both axes start at 0.
    index, canvas = chart_box(browser, "Petal: DB read latency")
    tags = browser.execute_script(
        "return window.openslobCharts[arguments[0]].data.datasets.map(d => d.data.map(p => "
        "[p.tag, p.note]))",
        index,
    )
    for curve in tags:
        assert [t for t, _ in curve] == ["1", "2"], curve
        assert all(note.startswith(f"{t} session") for t, note in curve)
    axes = "const c = window.openslobCharts[arguments[0]]; return [c.scales.x.min, c.scales.y.min]"
    assert browser.execute_script(axes, index) == [0, 0]

    # Hover on a petal point: the tooltip shows its coordinates and which run it is.
    point = browser.execute_script(
        "const c = window.openslobCharts[arguments[0]];"
        "const p = c.getDatasetMeta(0).data[0]; const d = c.data.datasets[0].data[0];"
        "return [p.x, p.y, d.x, d.y, d.note]",
        index,
    )
    move_to(browser, canvas, point[0], point[1]).perform()
    tip = browser.find_element(
        By.CSS_SELECTOR, f"#petals .chart-fig:nth-child({index + 1}) .chart-tip"
    )
    time.sleep(0.2)
    assert tip.is_displayed()
    assert f"{point[2]:,.0f}" in tip.text and point[4].split(" · ")[1] in tip.text
    browser.save_screenshot(str(ARTIFACTS / "html-report-hover.png"))  # the tooltip, seen

    # A legend click hides a curve, a second shows it again.
    box = browser.execute_script(
        "const h = window.openslobCharts[arguments[0]].legend.legendHitBoxes[0];"
        "return [h.left + h.width / 2, h.top + h.height / 2]",
        index,
    )
    visible = "return window.openslobCharts[arguments[0]].isDatasetVisible(0)"
    # (Chart.js handles pointer events once per animation frame: the pointer rests first)
    move_to(browser, canvas, *box).pause(0.2).click().pause(0.2).perform()
    assert browser.execute_script(visible, index) is False
    move_to(browser, canvas, *box).pause(0.2).click().pause(0.2).perform()
    assert browser.execute_script(visible, index) is True

    # The top of the page as a reader first sees it (the README's picture).
    browser.execute_script("window.scrollTo(0, 0)")
    browser.set_window_size(1400, 2200)
    time.sleep(0.3)
    browser.save_screenshot(str(ARTIFACTS / "html-report-sweep-top.png"))
    browser.set_window_size(1400, 1000)

    # The charts of the closed run sections wait (a sweep of many runs loads as fast as one);
    # printing opens every section and draws them all at once.
    boxes = page.read_text().count('<div class="chart">')
    count = "return window.openslobCharts.length"
    assert browser.execute_script(count) == 3 < boxes  # the petals
    browser.execute_script("window.dispatchEvent(new Event('beforeprint'))")
    assert browser.execute_script(count) == boxes
    assert browser.execute_script(
        "return [...document.querySelectorAll('details')].every(d => d.open)"
    )
    time.sleep(0.3)
    assert_all_drawn(browser, at_least=3 + 4 * 6)
    screenshot(browser, "html-report-sweep.png")  # asserts a real picture (> 30 KB)


def test_run_time_series_zoom_together_and_print(results: Path, browser: webdriver.Chrome) -> None:
    run_dir = results / "one-run"
    shutil.copytree(sorted((results / "sweep-html").glob("update_pct-20_sessions-2"))[0], run_dir)
    page = write_page("report", str(run_dir), "--html", "-o", str(results / "run.html"))
    open_page(browser, page)
    # the run's I/O shape block (PREFETCH) is in the page's report
    assert "I/O shape (PREFETCH=off)" in browser.execute_script("return document.body.textContent")
    assert_all_drawn(browser, at_least=6)  # 5 time series + histogram + percentiles
    # one run: its I/O, not a "peak"; and how the database's IOPS and the device's relate
    cards = browser.find_element(By.CSS_SELECTOR, "#summary .cards").text
    assert "peak" not in cards.lower() and "database physical i/o" in cards.lower()
    explain = browser.find_element(By.CSS_SELECTOR, "#summary p.explain").text
    assert "This run: database" in explain and "device" in explain

    # Drag a box over the middle of the IOPS chart: the run's other time series follow.
    index, canvas = chart_box(browser, "I/O per second")
    area = browser.execute_script(
        "const a = window.openslobCharts[arguments[0]].chartArea;"
        "return [a.left, a.right, a.top, a.bottom]",
        index,
    )
    left, right, top, bottom = area
    start = left + (right - left) * 0.3
    end = left + (right - left) * 0.6
    actions = move_to(browser, canvas, start, top + 10)
    actions.click_and_hold().move_by_offset(round(end - start), round(bottom - top - 20))
    actions.release().perform()
    ranges = browser.execute_script(
        "return window.openslobCharts.filter(c => c.options.plugins.zoom && "
        "c.canvas.closest('.chart')._spec.group).map(c => [c.scales.x.min, c.scales.x.max])"
    )
    assert len(ranges) >= 4
    assert all(r == pytest.approx(ranges[0], rel=1e-6) for r in ranges), ranges
    full = browser.execute_script(
        "const c = window.openslobCharts[arguments[0]];"
        "c.resetZoom('none'); return [c.scales.x.min, c.scales.x.max]",
        index,
    )
    assert full[1] - full[0] > ranges[0][1] - ranges[0][0]

    # Print: the print stylesheet hides the controls; printing gives a PDF of several pages.
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    hint = "return getComputedStyle(document.querySelector('.hint')).display"
    assert browser.execute_script(hint) == "none"
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    pdf = base64.b64decode(browser.print_page())
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") + pdf.count(b"/Type/Page") > 2
    screenshot(browser, "html-report-run.png")


def test_rate_sweep_states_latency_at_the_target_rates(
    results: Path, browser: webdriver.Chrome
) -> None:
    page = write_page(
        "report", str(results / "sweep-rate"), "--html", "-o", str(results / "r.html")
    )
    open_page(browser, page)
    summary = browser.find_element(By.ID, "summary").text
    assert "Latency at the target rates" in summary and "p99 intended" in summary
    rows = browser.find_elements(
        By.XPATH, "//h3[text()='Latency at the target rates']/following-sibling::div[1]//tbody/tr"
    )
    offered = sorted(
        float(r.find_element(By.CSS_SELECTOR, "td:nth-child(2)").get_attribute("data-v"))
        for r in rows
    )
    assert offered == [40.0, 80.0]
    # the latency-at-load curves, against the offered and the achieved rate
    titles = browser.execute_script(
        "return window.openslobCharts.map(c => c.options.plugins.title.text)"
    )
    assert sum(t.startswith("Latency at load") for t in titles) == 2
    open_all_details(browser)  # each section's charts are made when it opens
    boxes = page.read_text().count('<div class="chart">')
    assert browser.execute_script("return window.openslobCharts.length") == boxes
    assert_all_drawn(browser, at_least=boxes)


def test_comparison_and_awr_pages(results: Path, browser: webdriver.Chrome) -> None:
    page = results / "compare.html"
    twice = results / "twice"  # the sweep twice: a candidate whose points have 2 runs each
    for copy in ("a", "b"):
        shutil.copytree(results / "sweep-html", twice / copy)
    result = invoke(
        "compare", str(results / "sweep-html"), str(twice), "--html", str(page),
        "--no-plots", cwd=results,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    open_page(browser, page)
    assert_all_drawn(browser, at_least=3)  # changes + two overlaid petals
    table = browser.find_element(By.CSS_SELECTOR, "#changes table.sortable")
    verdicts = {td.text for td in table.find_elements(By.CSS_SELECTOR, "tbody td:last-child")}
    # a sweep compared with itself: nothing is better or worse
    assert verdicts and not verdicts & {"better", "worse", "higher", "lower"}, verdicts
    # the overlaid petal: each side in colours of its own, named once, and the candidate's
    # repeated points with their min–max bars
    index, _ = chart_box(browser, "Base vs candidate")
    sets = browser.execute_script(
        "return window.openslobCharts[arguments[0]].data.datasets.map(d => "
        "[d.label, d.borderColor, d.data.map(p => p.range)])",
        index,
    )
    base = [s for s in sets if s[0].startswith("base: ")]
    cand = [s for s in sets if s[0].startswith("candidate: ")]
    assert len(base) == len(cand) == 2 and len(sets) == 4
    assert not any("base: base" in s[0] or "candidate: cand" in s[0] for s in sets)
    assert not {s[1] for s in base} & {s[1] for s in cand}
    assert all(r is None for s in base for r in s[2])  # one run each: no bars
    assert all(r is not None and len(r) == 4 for s in cand for r in s[2])
    assert browser.find_element(By.ID, "warnings").text.startswith("Warnings of each side")

    # SLOB's awr.txt files named awr.<UPDATE_PCT>.<SESSIONS>.txt place them on a petal curve;
    # the directory's name, in the title and every chart's spec, would open a script-data
    # comment that swallows the page's scripts unless escaped inside <script> too
    reports = results / "awr-<!--<script>x\u2028"
    reports.mkdir()
    shutil.copy(ORACLE / "slob11g" / "awr.txt.32", reports / "awr.0.32.txt")
    shutil.copy(ORACLE / "awr_19c_pdb_racdb1.txt", reports / "awr.0.8.txt")
    awr = write_page("report", str(reports), "--html", "-o", str(results / "awr.html"))
    open_page(browser, awr)
    assert "Oracle AWR reports" in browser.title and "<!--<script>" in browser.title
    table = browser.find_element(By.CSS_SELECTOR, "#table table.sortable")
    assert len(table.find_elements(By.CSS_SELECTOR, "tbody tr")) == 2
    assert "PREADS" in table.text and "DFSR_LAT" in table.text
    assert_all_drawn(browser, at_least=2)  # the petals of awr_info's figures
    screenshot(browser, "html-report-awr.png")


def test_script_json_and_text_escaping() -> None:
    """What the page embeds parses back to the same values and holds nothing the HTML
    parser acts on inside <script> (a comment opener, a tag, an entity, a line separator)."""
    from openslob.report import escape

    hostile = "</script><!--<script>&amp;\u2028\u2029'\""
    data = escape.script_json({"title": hostile})
    assert json.loads(data) == {"title": hostile}
    assert not set(data) & set("<>&\u2028\u2029")
    assert escape.text(hostile) == (
        "&lt;/script&gt;&lt;!--&lt;script&gt;&amp;amp;\u2028\u2029&#x27;&quot;"
    )


def test_a_huge_oracle_report_is_shown_in_part(tmp_path: Path) -> None:
    """A 3 MB "AWR report" (a spool gone wrong) is embedded up to 2 MiB, saying so."""
    from openslob.report import html
    from openslob.results.collect import RunRef

    big = tmp_path / "awr.0.8.txt"
    big.write_text((ORACLE / "awr_19c_pdb_racdb1.txt").read_text() + "x" * (3 << 20))
    text = html._report_text(RunRef(big, {}, oracle=object()))  # type: ignore[arg-type]
    assert len(text) < html.MAX_EMBEDDED_REPORT_BYTES + 1000
    assert text.endswith(f"shown; the whole report: {big}]\n")


def test_every_string_reaches_the_page_through_report_escape() -> None:
    """One escaping path (report/escape.py): no module of the report escapes on its own or
    puts JSON into the page otherwise."""
    import openslob.report

    root = Path(openslob.report.__file__).parent
    for module in root.glob("*.py"):
        if module.name == "escape.py":
            continue
        text = module.read_text()
        assert "html.escape(" not in text and "import html\n" not in text, module.name
        if module.name == "html.py" or module.name.startswith("web"):  # the page's makers
            assert "json.dumps(" not in text, module.name
