"""One self-contained HTML file for a run, a sweep, an Oracle AWR directory or a comparison:
the report a storage engineer sends. Works offline: CSS, Chart.js (with its zoom plugin and
hammer.js, from npm, in report/assets/ with their licences) and the data are inline.

The page: the summary first (peaks with their latency, the knee of each petal curve, latency
at the target rates, warnings, what was tested; websummary.py), the awr_info table as a real
sortable table (webtable.py), interactive plots (webcharts.py specs drawn by assets/report.js:
hover for values, legend toggles, drag to zoom), then per run its AWR-like report, time series
and histograms. A print stylesheet opens every section and keeps charts at paper width.

Reads only results (run.json, timeseries.csv, sweep.json) through collect.py, or a comparison
built from them (analysis/compare.py); the tables come from the same rows as `slob analyze`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from openslob import __version__
from openslob.analysis import repeats
from openslob.analysis.awrinfo import analyze_rows, plain_columns
from openslob.analysis.compare import Comparison
from openslob.analysis.rules import RuleResult
from openslob.analysis.sustained import detect_degradation, load_timeseries, render_degradation
from openslob.oracle import awr_rows
from openslob.report import (
    escape,
    webcharts,
    webscaling,
    websteady,
    websummary,
    webtable,
    webwaterfall,
)
from openslob.report.cliff import cliff_marks
from openslob.report.comparison import csv_rows
from openslob.report.comparison import render_text as comparison_text
from openslob.report.text import render_text
from openslob.results.collect import RunRef, oracle_reports
from openslob.results.rundir import write_atomic

# Loaded in this order: hammer.js and Chart.js before the zoom plugin that uses both.
SCRIPTS = ("hammer.min.js", "chart.umd.min.js", "chartjs-plugin-zoom.min.js", "report.js")
HINT = (
    "Hover a plot for its values; click a legend entry to hide or show a curve; drag a box to "
    "zoom (ctrl + wheel too, shift + drag pans), double-click to reset; click a column header "
    "to sort."
)


@cache
def _asset(name: str) -> str:
    return (resources.files("openslob.report") / "assets" / name).read_text(encoding="utf-8")


def _page(title: str, sections: Sequence[tuple[str, str, str]], intro: str = "") -> str:
    """sections: (anchor, heading, body html); a table of contents links them."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    toc = " ".join(f'<a href="#{a}">{escape.text(h)}</a>' for a, h, _ in sections if h)
    parts = [
        f'<section id="{a}">{f"<h2>{escape.text(h)}</h2>" if h else ""}{body}</section>'
        for a, h, body in sections
    ]
    scripts = "".join(f"<script>{_asset(name)}</script>" for name in SCRIPTS)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="openslob {__version__}">'
        f"<title>{escape.text(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f"<h1>{escape.text(title)}</h1>"
        f'<p class="meta">openslob {__version__} · generated {stamp}</p>{intro}'
        f'<nav class="toc">{toc}</nav><p class="hint">{escape.text(HINT)}</p>'
        + "\n".join(parts)
        + f"\n{scripts}</body></html>\n"
    )


def chart(spec: dict[str, Any]) -> str:
    """A chart's box: its canvas, tooltip and spec (JSON made safe inside <script>)."""
    data = escape.script_json(spec)
    note = spec.get("note")
    return (
        '<figure class="chart-fig"><div class="chart">'
        '<button class="reset" type="button">reset zoom</button>'
        f'<canvas role="img" aria-label="{escape.text(spec["title"])}"></canvas>'
        '<div class="chart-tip"></div>'
        f'<script type="application/json" class="chart-spec">{data}</script></div>'
        + (f'<figcaption class="chart-note">{escape.text(note)}</figcaption>' if note else "")
        + "</figure>"
    )


def _charts(specs: Sequence[dict[str, Any]]) -> str:
    return f'<div class="charts">{"".join(chart(s) for s in specs)}</div>' if specs else ""


def _pre(text: str) -> str:
    return f"<pre>{escape.text(text)}</pre>"


# An Oracle report is shown as Oracle wrote it up to this size: an AWR report of a few MB is
# whole; a 200 MB file (a spool gone wrong) would make a page no browser opens.
MAX_EMBEDDED_REPORT_BYTES = 2 << 20


def _report_text(ref: RunRef) -> str:
    """The AWR-like text of a run; an Oracle report as Oracle wrote it (its beginning when
    it is larger than MAX_EMBEDDED_REPORT_BYTES, saying so)."""
    if ref.oracle is None:
        return render_text(ref.run)
    with ref.path.open("rb") as fh:
        head = fh.read(MAX_EMBEDDED_REPORT_BYTES + 1)
    text = head[:MAX_EMBEDDED_REPORT_BYTES].decode("utf-8", errors="replace")
    if len(head) <= MAX_EMBEDDED_REPORT_BYTES:
        return text
    size_mb = ref.path.stat().st_size / 2**20
    return (
        f"{text}\n\n[... the first {MAX_EMBEDDED_REPORT_BYTES >> 20} MiB of {size_mb:,.1f} MiB "
        f"shown; the whole report: {ref.path}]\n"
    )


def _table(refs: list[RunRef]) -> str:
    """The analyze table: awr_info's own columns when every run is an Oracle report, one
    row per point (median (min–max)) when points were repeated, as `slob analyze` does."""
    reports = oracle_reports(refs)
    if reports:
        rows = awr_rows(reports)
        return webtable.table(rows, plain_columns(rows))
    points = repeats.group_points(refs)
    if repeats.repeated(points):
        return webtable.points_table(points, repeats.DEFAULT_MAX_CV_PCT) + webtable.runs_table(
            analyze_rows(refs), caption="every run"
        )
    return webtable.runs_table(analyze_rows(refs))


def _run_detail(ref: RunRef, key: str) -> str:
    """A run's time series (with the degradation analysis), histograms and its report."""
    parts = []
    rows = load_timeseries(ref.path) if ref.oracle is None else []
    if rows:
        found = detect_degradation(rows)
        marks = [(e.start_s, e.end_s, e.kind) for e in found.episodes]
        marks += cliff_marks(ref.run, rows)  # the episodes the run saw live
        parts.append(_pre(render_degradation(found)))
        parts.append(_charts(webcharts.timeseries(rows, ref.run, f"ts-{key}", marks)))
    parts.append(_charts(webcharts.latency(ref.run)))
    parts.append(webwaterfall.table_html(ref.run) + _charts(webwaterfall.specs(ref.run)))
    parts.append("<h3>Report</h3>" + _pre(_report_text(ref)))
    return "".join(parts)


def _petals(refs: list[RunRef]) -> str:
    specs = [webcharts.petal(refs, x="iops"), webcharts.petal(refs, x="mbps")]
    if any(r.run.get("latency") for r in refs):
        specs.append(webcharts.petal(refs, x="iops", latency="op_p99"))
    specs += webcharts.latency_at_load(refs)  # RATE runs: the latency-at-load curves
    specs += webscaling.scaling(refs)  # an instance sweep: throughput and efficiency by N
    return _charts([s for s in specs if s["series"]])


def run_html(ref: RunRef) -> str:
    sections = [
        ("summary", "", websummary.summary([ref])),
        ("table", "Run (analyze)", _table([ref])),
        ("detail", "Time series, latency and report", _run_detail(ref, "run")),
    ]
    return _page(f"openslob run {ref.name}", _with_steady(sections, [ref]))


def sweep_html(refs: list[RunRef], title: str) -> str:
    details = "".join(
        f"<details><summary>{escape.text(ref.name)}</summary>"
        f"{websummary.warnings([ref])}{_run_detail(ref, str(n))}</details>"
        for n, ref in enumerate(refs)
    )
    sections = [
        ("summary", "", websummary.summary(refs)),
        ("table", "Runs (analyze)", _table(refs)),
        ("petals", "Petal plots", _petals(refs)),
        ("runs", "Runs in detail", details),
    ]
    return _page(title, _with_steady(sections, refs))


def _with_steady(
    sections: list[tuple[str, str, str]], refs: list[RunRef]
) -> list[tuple[str, str, str]]:
    """The steady-state section after the table, when a run has a STEADY_STATE rule."""
    body = websteady.steady_html([(ref.name, ref.run) for ref in refs if ref.oracle is None])
    return [*sections[:2], ("steady", "Steady state", body), *sections[2:]] if body else sections


COMPARE_COLUMNS = [
    webtable.Column("point", "Point", ""),
    webtable.Column("figure", "Figure", ""),
    webtable.Column("unit", "Unit", ""),
    webtable.Column("base_median", "Base", "median", digits=1),
    webtable.Column("cand_median", "Candidate", "median", digits=1),
    webtable.Column("change_pct", "Change", "%", digits=1),
    webtable.Column("ci_low_pct", "Interval low", "%", digits=1, missing="-"),
    webtable.Column("ci_high_pct", "Interval high", "%", digits=1, missing="-"),
    webtable.Column("verdict", "Verdict", ""),
]


def compare_html(comparison: Comparison, rules: Sequence[RuleResult] = ()) -> str:
    """Each side's warnings first, the verdicts, every change as a sortable table, the bar
    chart of the changes and the overlaid petals, the comparison's text (differences,
    method), then each side."""
    rows = csv_rows(comparison)
    verdicts: dict[str, int] = {}
    for row in rows:
        verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    said = ", ".join(f"{n} {v}" for v, n in verdicts.items())
    cards = websummary.card_row(
        [("Figures compared", f"{len(rows)}", said or "no figure in common")]
    )
    petals = [webcharts.overlay_petal(comparison, x=x) for x in ("iops", "mbps")]
    warned = "".join(
        f"<h3>{role}</h3>" + (websummary.warnings(side.refs) or "<p>none</p>")
        for role, side in (("Base", comparison.base), ("Candidate", comparison.cand))
    )
    sections = [
        ("warnings", "Warnings of each side", warned),  # first: they can void verdicts
        ("summary", "Summary", cards),
        (
            "changes",
            "Changes",
            webtable.table(rows, COMPARE_COLUMNS) + _charts([webcharts.changes(comparison)]),
        ),
        ("petals", "Petal plots", _charts([s for s in petals if s["series"]])),
        ("text", "Comparison (text)", _pre(comparison_text(comparison, rules))),
    ]
    for role, side in (("base", comparison.base), ("candidate", comparison.cand)):
        sections.append(
            (
                role,
                f"{role.title()}: {side.label}",
                websummary.tested(side.refs) + _table(side.refs),
            )
        )
    title = f"openslob compare: {comparison.base.label} vs {comparison.cand.label}"
    return _page(title, sections)


def write_compare_html(
    comparison: Comparison, output: Path, rules: Sequence[RuleResult] = ()
) -> Path:
    return write_atomic(output, compare_html(comparison, rules))


def _problems(problems: list[str]) -> str:
    """Files (or sections of them) that could not be read: named, as on stderr."""
    if not problems:
        return ""
    lis = "".join(f"<li>{escape.text(p)}</li>" for p in problems)
    return f'<div class="warn"><strong>Not read (fully)</strong><ul>{lis}</ul></div>'


def sweep_title(refs: list[RunRef]) -> str:
    """ "openslob sweep ssd", "openslob Oracle AWR reports in awr-dir": never "sweep sweep"."""
    label = refs[0].label
    if oracle_reports(refs):
        return f"openslob: Oracle AWR reports in {label}"
    if refs[0].sweep is not None:
        return f"openslob sweep {label}" if label != "sweep" else "openslob sweep"
    return f"openslob runs: {label}"


def write_html(refs: list[RunRef], output: Path, problems: list[str] | None = None) -> Path:
    """A run's page when there is one run, else the sweep/collection page; `problems` (files
    or report sections that could not be read) are listed at the top."""
    if len(refs) == 1 and refs[0].sweep is None:
        text = run_html(refs[0])
    else:
        text = sweep_html(refs, sweep_title(refs))
    if problems:
        marker = "</p>"  # after the page's meta line
        text = text.replace(marker, marker + _problems(problems), 1)
    return write_atomic(output, text)  # whole or not at all (a full disk)
