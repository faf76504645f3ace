"""`slob analyze|plot|report`: over run directories, sweeps and Oracle AWR reports; they
read results only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from openslob.cli.app import CONTEXT, cli, err, friendly_errors
from openslob.cli.params import FloatRange
from openslob.model.errors import OpenslobError

paths_argument = click.argument(
    "paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path)
)


def _oracle_names(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    from openslob.oracle.model import name_pattern

    if value is None:
        return None
    try:
        return name_pattern(value)
    except OpenslobError as exc:
        raise click.BadParameter(str(exc).split(": ", 1)[-1]) from exc


oracle_names_option = click.option(
    "--oracle-names",
    metavar="REGEX",
    default=None,
    callback=_oracle_names,
    help="Oracle reports: where UPDATE_PCT and sessions are in each report's path, as named "
    "groups, e.g. 'run_(?P<sessions>\\d+)s_(?P<pct>\\d+)u/awr\\.txt' "
    "[default: SLOB/flashdba's awr.<pct>.<sessions>.txt].",
)


@cli.command(context_settings=CONTEXT)
@paths_argument
@click.option("--csv", "as_csv", is_flag=True, help="CSV instead of the aligned table.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of the aligned table.")
@click.option(
    "--events",
    is_flag=True,
    help="flashdba's per-event view: run, event, waits, time, latency, IOPS.",
)
@click.option(
    "--timeseries",
    is_flag=True,
    help="Sustained throughput: find the steady level and degradation episodes.",
)
@click.option(
    "--awr",
    is_flag=True,
    help="PATHS are Oracle AWR / Statspack text reports (or directories of them), e.g. "
    "SLOB's awr.<pct>.<sessions>.txt; detected by content for .txt files.",
)
@click.option(
    "--iops-drop-pct",
    type=FloatRange(0, 100),
    default=20.0,
    show_default=True,
    help="--timeseries: IOPS this far below the steady level is degraded.",
)
@click.option(
    "--latency-rise-pct",
    type=FloatRange(0),
    default=50.0,
    show_default=True,
    help="--timeseries: latency this far above the steady level is degraded.",
)
@click.option(
    "--p99-rise-pct",
    type=FloatRange(0),
    default=100.0,
    show_default=True,
    help="--timeseries: SLOBop p99 (SELECT; UPDATE without SELECTs) this far above the steady "
    "level is degraded.",
)
@click.option(
    "--min-seconds",
    type=FloatRange(0),
    default=30.0,
    show_default=True,
    help="--timeseries: shortest episode reported.",
)
@click.option(
    "--baseline-seconds",
    type=FloatRange(1),
    default=60.0,
    show_default=True,
    help="--timeseries: length of the early steady level (median).",
)
@click.option(
    "--skip-seconds",
    type=FloatRange(0),
    default=30.0,
    show_default=True,
    help="--timeseries: ramp-up ignored before the steady level.",
)
@click.option(
    "--max-cv",
    "max_cv",
    type=FloatRange(0),
    default=10.0,
    show_default=True,
    help="Repeated points: flag those where a figure's coefficient of variation (standard "
    "deviation / mean over the repeats) exceeds this many %.",
)
@click.option(
    "--each-run",
    is_flag=True,
    help="Repeated points: one line per run instead of per point (the table).",
)
@click.option(
    "--summary",
    is_flag=True,
    help="--csv/--json: one row per point and figure (median, min, max, CV over its runs: "
    "summary.csv's shape) instead of one row per run.",
)
@click.option(
    "--wide",
    is_flag=True,
    help="The table with every column; by default it keeps the columns that fit 100 "
    "characters and names the others.",
)
@oracle_names_option
@friendly_errors
def analyze(
    paths: tuple[Path, ...],
    as_csv: bool,
    as_json: bool,
    events: bool,
    timeseries: bool,
    awr: bool,
    iops_drop_pct: float,
    latency_rise_pct: float,
    p99_rise_pct: float,
    min_seconds: float,
    baseline_seconds: float,
    skip_seconds: float,
    max_cv: float,
    each_run: bool,
    summary: bool,
    wide: bool,
    oracle_names: Any,
) -> None:
    """One line per run with the columns SLOB users know from awr_info.

    PATHS are run directories, sweep directories or trees holding them; runs from other
    machines and tool versions are read by their schema_version. Unmeasured figures are n/a.
    Points run several times (--repeat) get one line each in the table: median (min–max)
    over their runs, N, and the figures whose CV exceeds --max-cv (--each-run: a line per
    run). --csv and --json have one shape each, whatever the input: one row per run (its
    REPEAT column says which), or with --summary one row per point and figure (summary.csv).

    \b
    Examples:
      slob analyze slob-results/sweep-ssd
      slob analyze slob-results/sweep-ssd slob-results/sweep-hdd --csv > both.csv
      slob analyze --events slob-results/sweep-ssd
      slob analyze --timeseries --iops-drop-pct 25 slob-results/20261122T050000Z-soak
      slob analyze --awr ~/SLOB/awr.*.txt
      slob analyze slob-results/sweep-a --max-cv 5
      slob analyze slob-results/sweep-a --csv --summary > points.csv
    """
    from dataclasses import asdict

    from openslob.analysis import awrinfo as an
    from openslob.analysis import repeats, sustained
    from openslob.results.collect import oracle_reports

    refs = _find_runs_noting(list(paths), oracle_names)
    oracle = oracle_reports(refs)
    if awr and not oracle:
        plain = next(ref for ref in refs if ref.oracle is None)
        raise OpenslobError(f"--awr: {plain.path} is an openslob run, not an Oracle report")
    if oracle and not timeseries:
        _analyze_oracle(oracle, as_csv, as_json, events)
        return
    if timeseries:
        reports = []
        for ref in refs:
            report_ = sustained.detect_degradation(
                sustained.load_timeseries(ref.path),
                iops_drop_pct=iops_drop_pct,
                latency_rise_pct=latency_rise_pct,
                p99_rise_pct=p99_rise_pct,
                min_seconds=min_seconds,
                baseline_seconds=baseline_seconds,
                skip_seconds=skip_seconds,
            )
            reports.append((ref, report_))
        if as_json:
            click.echo(
                json.dumps(
                    [{"run": r.name, **asdict(d)} for r, d in reports], indent=2, default=str
                )
            )
        else:
            for ref, report_ in reports:
                click.echo(f"{ref.name}: {sustained.render_degradation(report_)}")
        return
    if events:
        rows = an.event_rows(refs)
        if as_csv:
            click.echo(an.render_csv(rows, an.EVENT_COLUMNS), nl=False)
        elif as_json:
            click.echo(an.render_json(rows))
        else:
            click.echo(an.render_events(rows))
        return
    points = repeats.group_points(refs)
    if summary and (as_csv or as_json):
        if as_csv:
            click.echo(repeats.render_summary_csv(repeats.summary_rows(points)), nl=False)
        else:
            click.echo(repeats.render_summary_json(points), nl=False)
        return
    if summary:
        raise click.UsageError("--summary shapes --csv or --json output: give one of them")
    if repeats.repeated(points) and not each_run and not (as_csv or as_json):
        click.echo(repeats.render_point_table(points, max_cv, wide=wide), nl=False)
        return
    rows = an.analyze_rows(refs)
    if as_csv:
        click.echo(an.render_csv(rows), nl=False)
    elif as_json:
        click.echo(an.render_json(rows))
    else:
        click.echo(an.render_table(rows, an.shown_columns(rows), wide=wide))


def _find_runs_noting(
    paths: list[Path], oracle_names: Any = None, problems: list[str] | None = None
) -> list[Any]:
    """Runs under the paths; an Oracle report that cannot be read (fully) is named on stderr
    with the section at fault, not fatal; the lines are also added to `problems`."""
    from openslob.results.collect import find_runs

    problems = [] if problems is None else problems
    refs = find_runs(paths, problems, oracle_names)
    for problem in problems:
        err.print(f"slob: {problem}", highlight=False)
    return refs


def _analyze_oracle(reports: list[Any], as_csv: bool, as_json: bool, events: bool) -> None:
    """awr_info's columns (or flashdba's event table) over Oracle text reports."""
    from openslob.analysis import awrinfo as an
    from openslob.oracle import awr_rows, event_rows

    # CSV and JSON are read by programs: the figures as the reports print them, not awr_info's
    # truncated text (PREADS 45.8, not 45)
    rows = event_rows(reports) if events else awr_rows(reports, exact=as_csv or as_json)
    if as_csv:
        click.echo(an.render_csv(rows, an.plain_columns(rows)), nl=False)
    elif as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo(an.render_table(rows, an.plain_columns(rows)), nl=False)


@cli.command(context_settings=CONTEXT)
@paths_argument
@click.option(
    "--kind",
    type=click.Choice(["petal", "timeseries", "latency", "rate", "all"]),
    default="all",
    show_default=True,
    help="petal: latency vs IOPS and MB/s per update %; timeseries: per run over "
    "time; latency: histogram and percentiles per op type; rate: p50/p99 from the intended "
    "start vs offered and achieved SLOBops/s of RATE runs, a curve per update %.",
)
@click.option(
    "--latency",
    "latency_kind",
    type=click.Choice(["db_read", "op_p50", "op_p99", "device_read"]),
    default="db_read",
    show_default=True,
    help="Petal y axis.",
)
@click.option("--log-x", is_flag=True, help="Logarithmic x axis (petal).")
@click.option("--log-y", is_flag=True, help="Logarithmic y axis (petal).")
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("slob-plots"),
    show_default=True,
    help="Directory for the files.",
)
@click.option(
    "--format", "formats", default="png,svg", show_default=True, help="Comma list of png, svg."
)
@oracle_names_option
@friendly_errors
def plot(
    paths: tuple[Path, ...],
    kind: str,
    latency_kind: str,
    log_x: bool,
    log_y: bool,
    output: Path,
    formats: str,
    oracle_names: Any,
) -> None:
    """Draw petal plots, time series and latency histograms (PNG and SVG).

    Several sweeps overlay in one petal plot, with a legend from their labels.

    \b
    Examples:
      slob plot slob-results/sweep-ssd
      slob plot slob-results/sweep-ssd slob-results/sweep-hdd --kind petal --latency op_p99
      slob plot slob-results/20261122T050000Z-soak --kind timeseries -o soak-plots
      slob plot slob-results/sweep-rate --kind rate
    """
    from openslob.analysis.sustained import detect_degradation, load_timeseries
    from openslob.report import plots

    chosen = tuple(f.strip() for f in formats.split(",") if f.strip())
    bad = [f for f in chosen if f not in ("png", "svg")]
    if bad or not chosen:
        raise OpenslobError(f"--format={formats}: allowed png, svg")
    refs = _find_runs_noting(list(paths), oracle_names)
    written: list[Path] = []
    if kind in ("petal", "all"):
        for x in ("iops", "mbps"):
            fig = plots.petal(refs, x=x, latency=latency_kind, log_x=log_x, log_y=log_y)
            written += plots.save(fig, output / f"petal_{x}_{latency_kind}", chosen)
    if kind in ("timeseries", "all"):
        for ref in refs:
            rows = load_timeseries(ref.path)
            if not rows:
                continue
            report_ = detect_degradation(rows)
            marks = [(e.start_s, e.end_s, e.kind) for e in report_.episodes]
            terms = (ref.run.get("engine") or {}).get("terms")
            fig = plots.timeseries(rows, title=ref.name, marks=marks, terms=terms)
            written += plots.save(fig, output / f"timeseries_{ref.name}", chosen)
    paced = [ref for ref in refs if (ref.run.get("config") or {}).get("RATE")]
    if kind == "rate" or (kind == "all" and paced):
        from openslob.report.rateplot import latency_at_load

        written += plots.save(latency_at_load(refs), output / "latency_at_load", chosen)
    if kind in ("latency", "all"):
        for ref in refs:
            if any((ref.run.get("latency") or {}).values()):
                fig = plots.latency_histogram(ref.run, title=ref.name)
                written += plots.save(fig, output / f"latency_{ref.name}", chosen)
    for path in written:
        click.echo(str(path))


def _attach_series(path: Path, series: Path) -> None:
    """Import `series` into the run directory `path` (run.json and report.txt rewritten)."""
    from openslob.model.errors import ConfigError
    from openslob.report.text import render_text
    from openslob.results.external import reattach
    from openslob.results.rundir import REPORT_KEYS, load_run, write_run

    if not (path / "run.json").is_file():
        raise ConfigError(f"--external-series: {path} is not a run directory (no run.json)")
    run = load_run(path, REPORT_KEYS)
    reattach(run, series)
    write_run(path, run, render_text(run))


@cli.command(context_settings=CONTEXT)
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--html",
    "as_html",
    is_flag=True,
    help="Write one self-contained HTML file (interactive plots, sortable tables, works offline).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="HTML file to write (default PATH/report.html).",
)
@click.option(
    "--wide",
    is_flag=True,
    help="Every column of the wide tables (I/O breakdown, statements); the default fits 100 "
    "columns.",
)
@click.option(
    "--external-series",
    "external_series",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Attach series measured outside this host (as `slob run --external-series`) to the "
    "run in PATH: its run.json and report.txt are rewritten with them (any imported before "
    "are replaced), then the report is rendered.",
)
@oracle_names_option
@friendly_errors
def report(
    path: Path,
    as_html: bool,
    output: Path | None,
    wide: bool,
    external_series: Path | None,
    oracle_names: Any,
) -> None:
    """Re-render a run's AWR-like text report from run.json, or an HTML report.

    PATH is a run directory (text or HTML), or for HTML a sweep directory, a tree of runs or
    an Oracle AWR directory (the summary, the analyze table, the plots and every run's
    report).

    \b
    Examples:
      slob report slob-results/20261122T050000Z-readonly
      slob report slob-results/20261122T050000Z-readonly --wide
      slob report slob-results/sweep-ssd --html
    """
    from openslob.results.rundir import REPORT_KEYS, load_run, require_keys

    if external_series is not None:
        _attach_series(path, external_series)
    if as_html:
        from openslob.report.html import write_html

        target = output or (path if path.is_dir() else path.parent) / "report.html"
        problems: list[str] = []
        refs = _find_runs_noting([path], oracle_names, problems)
        for ref in refs:  # each run's text report is in the page
            if ref.oracle is None:
                require_keys(ref.run, REPORT_KEYS, ref.path / "run.json")
        click.echo(str(write_html(refs, target, problems=problems)))
        return
    from openslob.report.text import render_text

    click.echo(render_text(load_run(path, REPORT_KEYS), wide=wide), nl=False)
