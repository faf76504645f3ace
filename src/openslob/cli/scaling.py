"""`slob scaling`: how throughput grew with the instances, and the USL projection.

Reads run directories or sweep directories (an instance sweep: `slob sweep --instances 1,2,3`)
and prints analysis/scaling.py's table through report/scalingtable.py.
"""

from __future__ import annotations

from pathlib import Path

import click

from openslob.cli.app import CONTEXT, cli, friendly_errors
from openslob.model.errors import ConfigError


@cli.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--metric",
    default="slobops_per_s",
    show_default=True,
    help="The throughput figure (a run.json metrics key, e.g. pio_reads_per_s).",
)
@click.option(
    "--project",
    "project_n",
    type=int,
    default=None,
    metavar="N",
    help="Project the fitted throughput at N instances with its 95 % interval (at most 2 x "
    "the largest N measured).",
)
@click.option("--csv", "as_csv", is_flag=True, help="One CSV row per instance count.")
@click.option("--json", "as_json", is_flag=True, help="Curves, fits and projection as JSON.")
@click.option(
    "--plot",
    "plot_to",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Also draw the figure to FILE.png and FILE.svg.",
)
@friendly_errors
def scaling(
    paths: tuple[Path, ...],
    metric: str,
    project_n: int | None,
    as_csv: bool,
    as_json: bool,
    plot_to: Path | None,
) -> None:
    """Scale-out: throughput, per-instance figures and efficiency by number of instances.

    Efficiency = X(N) / (N x X(1)). The Universal Scalability Law
    X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)) is fitted to every run, with 95 %
    intervals (they need more runs than 3: repeat the points or add instance counts).

    \b
    Examples:
      slob sweep --target host=db1 --target host=db2 --target host=db3 \\
          --instances 1,2,3 --sessions-per-instance 4 --update-pct 0 --repeat 2 --label out
      slob scaling slob-results/sweep-out --project 6
      slob scaling slob-results/sweep-out --metric pio_reads_per_s --csv
    """
    from openslob.analysis.figures import metric_for
    from openslob.analysis.scaling import add_projection, curves
    from openslob.report import scalingtable
    from openslob.results.collect import find_runs

    metric_for(metric)  # an unknown figure: one line naming what is allowed
    if project_n is not None and project_n < 1:
        raise ConfigError(f"--project {project_n}: allowed 1 to 2 x the largest N measured")
    found = curves(find_runs(list(paths)), metric)
    if not found:
        raise ConfigError(
            "no runs over 2 or more instance counts under "
            + ", ".join(map(str, paths))
            + " (slob sweep --instances 1,2,…)"
        )
    if project_n is not None:
        for curve in found:
            add_projection(curve, project_n)
    if as_json:
        click.echo(scalingtable.render_json(found), nl=False)
    elif as_csv:
        click.echo(scalingtable.render_csv(found), nl=False)
    else:
        click.echo(scalingtable.render_text(found))  # whole lines: no console wrapping
    if plot_to is not None:
        from openslob.report.plots import save
        from openslob.report.scalingplot import scaling as figure

        for file in save(figure(found), plot_to):
            click.echo(f"plot: {file}", err=True)
