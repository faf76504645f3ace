"""One self-contained HTML file for a run, a sweep or a comparison: inline SVG and CSS,
works offline.

Reads only results (run.json, timeseries.csv, sweep.json) through collect.py, or a
comparison built from them (analysis/compare.py); the plots and tables come from the same
functions the CLI uses.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from openslob import __version__
from openslob.analysis import repeats
from openslob.analysis.awrinfo import analyze_rows, plain_columns, render_table
from openslob.analysis.compare import Comparison
from openslob.analysis.rules import RuleResult
from openslob.analysis.sustained import detect_degradation, load_timeseries, render_degradation
from openslob.oracle import awr_rows
from openslob.report import plots
from openslob.report.comparison import render_text as comparison_text
from openslob.report.text import render_text
from openslob.results.collect import RunRef, oracle_reports
from openslob.results.rundir import write_atomic

_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 2rem auto;
       max-width: 1200px; color: #1d1d1f; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2rem;
     border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.meta { color: #666; font-size: .9rem; }
pre { background: #f6f8fa; padding: .8rem; overflow-x: auto; font-size: .78rem;
      line-height: 1.35; border-radius: 6px; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; }
.warn { background: #fff4e5; border-left: 4px solid #f0a020; padding: .5rem .8rem; }
details summary { cursor: pointer; font-weight: 600; margin: .4rem 0; }
"""


def _page(title: str, body: list[str]) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f'<p class="meta">openslob {__version__} · generated {stamp}</p>'
        + "\n".join(body)
        + "</body></html>\n"
    )


def _figure(fig: object, caption: str) -> str:
    return (
        f"<figure>{plots.figure_svg(fig)}<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def _warnings(run: dict) -> str:
    items = run.get("warnings") or []
    if not items:
        return ""
    lis = "".join(f"<li>{html.escape(w)}</li>" for w in items)
    return f'<div class="warn"><strong>Warnings</strong><ul>{lis}</ul></div>'


def _summary(refs: list[RunRef]) -> str:
    """The analyze table; awr_info's own columns when every run is an Oracle report, one
    line per point (median (min–max)) when points were repeated, as `slob analyze` does."""
    reports = oracle_reports(refs)
    if reports:
        rows = awr_rows(reports)
        return render_table(rows, plain_columns(rows))
    points = repeats.group_points(refs)
    if repeats.repeated(points):
        return repeats.render_point_table(points, repeats.DEFAULT_MAX_CV_PCT)
    return render_table(analyze_rows(refs))


def _report_text(ref: RunRef) -> str:
    """The AWR-like text of a run; an Oracle report is shown as Oracle wrote it."""
    if ref.oracle is not None:
        return ref.path.read_text(encoding="utf-8", errors="replace")
    return render_text(ref.run)


def run_html(ref: RunRef) -> str:
    run = ref.run
    body = [_warnings(run), "<h2>Summary (analyze)</h2>", _pre(_summary([ref]))]
    rows = load_timeseries(ref.path)
    if rows:
        found = detect_degradation(rows)
        marks = [(e.start_s, e.end_s, e.kind) for e in found.episodes]
        terms = (run.get("engine") or {}).get("terms")
        body += [
            "<h2>Time series</h2>",
            _pre(render_degradation(found)),
            _figure(
                plots.timeseries(rows, marks=marks, terms=terms),
                "IOPS, MB/s, I/O latency and SLOBop p50/p99 per sampling interval",
            ),
        ]
    if any(run.get("latency", {}).get(kind) for kind in ("select", "update", "scan")):
        body += [
            "<h2>SLOBop latency</h2>",
            _figure(plots.latency_histogram(run), "in-loop histograms per op type"),
        ]
    body += ["<h2>Report</h2>", _pre(_report_text(ref))]
    return _page(f"openslob run {ref.name}", body)


def sweep_html(refs: list[RunRef], title: str) -> str:
    body = ["<h2>Runs (analyze)</h2>", _pre(_summary(refs))]
    for x, caption in (
        ("iops", "latency vs physical I/O per second"),
        ("mbps", "latency vs MB per second"),
    ):
        body.append(
            _figure(
                plots.petal(refs, x=x),
                f"Petal plot: {caption}; one curve per update %, points labelled by session count",
            )
        )
    body.append("<h2>Reports per run</h2>")
    for ref in refs:
        body.append(
            f"<details><summary>{html.escape(ref.name)}</summary>"
            f"{_warnings(ref.run)}{_pre(_report_text(ref))}</details>"
        )
    return _page(title, body)


def compare_html(comparison: Comparison, rules: Sequence[RuleResult] = ()) -> str:
    """The comparison's text (differences, method, every point's changes, the rules), the
    overlaid petal plots and the bar chart of the changes, then each side's runs."""
    from openslob.report import compareplots

    body = ["<h2>Comparison</h2>", _pre(comparison_text(comparison, rules))]
    body.append(
        _figure(
            compareplots.changes_chart(comparison),
            "Change of the median per figure and point; whiskers: the interval",
        )
    )
    for x, caption in (("iops", "physical I/O per second"), ("mbps", "MB per second")):
        body.append(
            _figure(
                compareplots.overlay_petal(comparison, x=x),
                f"Petal plots of both sides overlaid: latency vs {caption}; points are "
                "medians, bars min–max over their runs",
            )
        )
    for role, side in (("Base", comparison.base), ("Candidate", comparison.cand)):
        body.append(f"<h2>{role}: {html.escape(side.label)} (analyze)</h2>")
        body.append(_pre(_summary(side.refs)))
    title = f"openslob compare: {comparison.base.label} vs {comparison.cand.label}"
    return _page(title, body)


def write_compare_html(
    comparison: Comparison, output: Path, rules: Sequence[RuleResult] = ()
) -> Path:
    return write_atomic(output, compare_html(comparison, rules))


def _problems(problems: list[str]) -> str:
    """Files (or sections of them) that could not be read: named, as on stderr."""
    if not problems:
        return ""
    lis = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    return f'<div class="warn"><strong>Not read (fully)</strong><ul>{lis}</ul></div>'


def write_html(
    refs: list[RunRef], output: Path, title: str | None = None, problems: list[str] | None = None
) -> Path:
    """A run's page when there is one run, else the sweep/collection page; `problems` (files
    or report sections that could not be read) are listed at the top."""
    if len(refs) == 1 and refs[0].sweep is None:
        text = run_html(refs[0])
    else:
        text = sweep_html(refs, title or f"openslob sweep {refs[0].label}")
    if problems:
        marker = "</p>"  # after the page's meta line
        text = text.replace(marker, marker + _problems(problems), 1)
    return write_atomic(output, text)  # whole or not at all (a full disk)
