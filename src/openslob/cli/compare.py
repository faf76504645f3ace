"""`slob compare BASE CAND`: is the candidate better than the base, beyond noise?

Parses, calls analysis.compare / analysis.rules, prints a renderer's output; the exit code
is the gate: 1 when a --fail-if rule holds or cannot be judged because runs warned its
figure invalid (analysis/validity.py), 2 for bad input (a malformed rule, sides that ran
different workloads without --force), 0 otherwise. Plots are drawn for the text output, or
where --plots says: --json and --csv write nothing but stdout unless asked.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from openslob.cli.analysis import _find_runs_noting, oracle_names_option
from openslob.cli.app import CONTEXT, cli, err, friendly_errors
from openslob.cli.params import FloatRange
from openslob.model.errors import ConfigError
from openslob.model.metrics import core_keys


@cli.command(context_settings=CONTEXT)
@click.argument("base", type=click.Path(exists=True, path_type=Path))
@click.argument("cand", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--fail-if",
    "fail_if",
    multiple=True,
    metavar="RULE",
    help="Exit 1 when FIGURE changed beyond THRESHOLD beyond noise at some point: "
    "'FIGURE<-N%' or 'FIGURE>+N%' (e.g. 'pio_reads_per_s<-5%', 'select.p99_us>+10%'): "
    "the whole interval of the change lies beyond it (with one run on a side, the change "
    "itself); also exit 1 when runs warned the figure invalid (no verdict). Repeatable.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="FIGURE",
    help="Compare these figures instead of the default set (a run.json metrics key, "
    f"{', '.join(core_keys('derived'))}, or OP.FIELD such as select.p99_us). Repeatable.",
)
@click.option(
    "--confidence",
    type=FloatRange(50, 99.9),
    default=95.0,
    show_default=True,
    help="Confidence of the intervals, in %; fewer runs than it needs give the widest "
    "interval they allow, with its real confidence printed.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Compare points even though the sides ran different workloads (e.g. WORK_UNIT 64 "
    "vs 8): they are paired on the other parameters.",
)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of the text report.")
@click.option("--csv", "as_csv", is_flag=True, help="CSV: one row per point and figure.")
@click.option(
    "--plots",
    "plots_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for the overlaid petal plots and the bar chart of the changes "
    "[default: slob-compare for the text output; none with --json or --csv].",
)
@click.option("--no-plots", is_flag=True, help="Draw no plots.")
@click.option(
    "--wide",
    is_flag=True,
    help="Each point's table on one line per figure, however wide (default: 100 columns; "
    "repeats put base → candidate on a second line).",
)
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the comparison as one self-contained HTML file.",
)
@oracle_names_option
@friendly_errors
def compare(
    base: Path,
    cand: Path,
    fail_if: tuple[str, ...],
    metrics: tuple[str, ...],
    confidence: float,
    force: bool,
    as_json: bool,
    as_csv: bool,
    plots_dir: Path | None,
    no_plots: bool,
    html_file: Path | None,
    wide: bool,
    oracle_names: Any,
) -> None:
    """Compare two sides point by point: is CAND better than BASE, beyond noise?

    BASE and CAND are runs, repeated runs, sweeps or directories of Oracle AWR reports.
    First each side's warnings are listed, then every difference of configuration, engine
    settings, version, host and devices; then per point and figure the base, the candidate
    (median (min–max) over the repeats), the change of the medians, its interval
    (Mann–Whitney / Hodges–Lehmann, distribution-free, with its exact confidence) and a
    verdict: better, worse, within
    noise, or none with one run on a side ("no repeats: cannot separate from noise") or
    when runs of a side warned the figure invalid ("no verdict: base 3/3 runs: other I/O
    shared the device").
    Points that ran a different workload are refused unless --force.

    \b
    Examples:
      slob compare slob-results/sweep-a slob-results/sweep-b
      slob compare slob-results/sweep-a slob-results/sweep-b \\
          --fail-if 'pio_reads_per_s<-5%' --fail-if 'select.p99_us>+10%'
      slob compare slob-results/repeat-8k slob-results/repeat-16k --json > cmp.json
      slob compare ~/SLOB/array-a ~/SLOB/array-b --html compare.html
    """
    from openslob.analysis.compare import compare as build
    from openslob.analysis.compare import default_figures, make_side
    from openslob.analysis.rules import evaluate_all, parse_rule
    from openslob.report import comparison as render

    if as_json and as_csv:
        raise ConfigError("--json and --csv: choose one")
    rules = [parse_rule(text) for text in fail_if]  # malformed: exit 2 before reading
    figures = list(metrics or default_figures()) + [r.figure for r in rules]
    sides = []
    for path in (base, cand):
        problems: list[str] = []
        refs = _find_runs_noting([path], oracle_names, problems)  # unreadable: on stderr
        sides.append(make_side(path, refs, problems))
    comparison = build(*sides, figures=figures, level=confidence / 100, force=force)
    results = evaluate_all(rules, comparison)
    if as_json:
        click.echo(render.render_json(comparison, results), nl=False)
    elif as_csv:
        click.echo(render.render_csv(comparison), nl=False)
    else:
        click.echo(render.render_text(comparison, results, wide), nl=False)
    if plots_dir is None and not (as_json or as_csv):
        plots_dir = Path("slob-compare")
    _write_files(comparison, results, None if no_plots else plots_dir, html_file)
    if any(r.holds or r.refused for r in results):
        sys.exit(1)


def _write_files(
    comparison: Any, results: list[Any], plots_dir: Path | None, html_file: Path | None
) -> None:
    if plots_dir is not None:
        from openslob.report.compareplots import save_comparison_plots

        save_comparison_plots(comparison, plots_dir)
        err.print(f"plots: {plots_dir}", highlight=False)
    if html_file is not None:
        from openslob.report.html import write_compare_html

        err.print(f"html: {write_compare_html(comparison, html_file, results)}", highlight=False)
