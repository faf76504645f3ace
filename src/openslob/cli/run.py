"""`slob run|sweep|calibrate`: the work loop once, as a matrix, and the raw device with fio."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from openslob.cli.app import (
    CONTEXT,
    cli,
    data_dir_option,
    err,
    exit_code,
    friendly_errors,
    notice,
    out,
    print_config_messages,
    target_option,
)
from openslob.cli.params import FloatRange, add_options, add_server_options, server_config
from openslob.config.options import options_for
from openslob.config.resolve import resolve
from openslob.model.errors import ConfigError, OpenslobError
from openslob.model.metrics import METRICS, progress_keys
from openslob.report.sweepfiles import finish_sweep
from openslob.report.text import render_text
from openslob.results.rundir import NotSaved, check_results_place, path_name
from openslob.runner import dataset
from openslob.runner import sweep as harness
from openslob.runner.execute import run_benchmark
from openslob.runner.progress import ProgressEvery
from openslob.runner.targets import target_strings

if TYPE_CHECKING:
    from openslob.results.openmetrics import OpenMetricsExporter


class IpAddress(click.ParamType):
    """An IPv4 or IPv6 address, checked before anything starts (no names: no lookups)."""

    name = "address"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return str(ipaddress.ip_address(str(value)))
        except ValueError:
            self.fail(f"{value!r} is not an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0)", param, ctx)


def _check_textfile(_ctx: click.Context, _param: click.Parameter, value: Path | None) -> Any:
    if value is not None:
        from openslob.results.openmetrics import textfile_problem

        problem = textfile_problem(value)
        if problem:
            raise click.BadParameter(problem)
    return value


results_dir_option = click.option(
    "--results-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("slob-results"),
    show_default=True,
    help="Parent directory of the run (or sweep) directories.",
)


@cli.command(context_settings=CONTEXT)
@add_options("run")
@results_dir_option
@click.option("--label", default=None, help="Label appended to the run directory name.")
@click.option(
    "--calibrate",
    is_flag=True,
    help="After the run, read the same file system with fio (random reads of the database's "
    "page size, direct, one job per session, same duration) and report the database as % "
    "of it.",
)
@click.option(
    "--calibrate-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for fio's file (default: the private server's data directory).",
)
@click.option(
    "--progress-interval",
    type=FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="A progress line per this many seconds (figures over that span: rates averaged, "
    "percentiles from the merged histograms), like pgbench -P. Default: one per sampling "
    "interval. Lines go to stderr, also when it is not a terminal.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    metavar="PORT",
    help="Serve live metrics (OpenMetrics / Prometheus text) at http://ADDR:PORT/metrics "
    "during the run: the latest interval's figures, op latency, ops counters (README: Live "
    "metrics).",
)
@click.option(
    "--metrics-address",
    type=IpAddress(),
    default=None,
    metavar="ADDR",
    help="Address --metrics-port listens on (default 127.0.0.1, this host only; 0.0.0.0 or "
    ":: for every interface).",
)
@click.option(
    "--metrics-textfile",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    callback=_check_textfile,
    metavar="FILE.prom",
    help="Rewrite this file each sampling interval with the same metrics, for node_exporter's "
    "textfile collector (written beside it, then renamed).",
)
@target_option
@data_dir_option
@friendly_errors
def run(
    targets: tuple[str, ...],
    data_dir: Path | None,
    results_dir: Path,
    label: str | None,
    calibrate: bool,
    calibrate_dir: Path | None,
    progress_interval: float | None,
    metrics_port: int | None,
    metrics_address: str | None,
    metrics_textfile: Path | None,
    **params: Any,
) -> None:
    """Run the SLOB work loop and write run.json, report.txt and timeseries.csv.

    Each session runs the loop inside the database (one CALL per sampling interval, so
    every interval has its own latency percentiles). It runs on the data set that is there:
    SCHEMAS, SCALE, SCAN_TABLE_SZ and SEED not given (flag or slob.conf) are the data set's
    (one line says so). With no data set yet, the default one is created first (4 x 64 MiB).
    Defaults: one session per schema, UPDATE_PCT=20, WORK_UNIT=64, WARMUP=5 s, RUN_TIME=300 s.

    \b
    Examples:
      slob run
      slob run --run-time 60
      slob run --sessions 8 --update-pct 0 --run-time 30 --label readonly
      slob run --schemas 4 --threads-per-schema 2 --run-time 30
      nohup slob run --run-time 2h --progress-interval 60 --label soak > run.log 2>&1 &
      slob run --run-time 2h --metrics-port 9464   # Prometheus scrapes 127.0.0.1:9464
      slob run --run-time 60 --repeat 5 --label noise

    With --repeat N the run is made N times into RESULTS_DIR/repeat-LABEL (repeat-1/ …,
    resumable by rerunning the command), with summary.csv and the median (min–max) table.
    """
    if metrics_address is not None and metrics_port is None:
        raise click.BadOptionUsage("metrics_address", "--metrics-address needs --metrics-port")
    flags = {o.name: params.pop(o.param, None) for o in options_for("run")}
    conf = params.pop("conf", None)
    config = resolve(flags, conf, scope="run")
    target_strings(targets, config)  # a bad combination fails here, before anything else
    if config["REPEAT"] > 1:
        if calibrate:
            raise ConfigError("--calibrate compares one run with fio: give it without --repeat")
        plan = harness.plan_sweep(flags, conf, Path.cwd(), single=True)
        path = results_dir / f"repeat-{path_name(label, 'default')}"
        check_results_place(path, label)
        print_config_messages(config)
        _run_plan(plan, path, label, targets, data_dir, plots=True, kind="repeated run")
        return
    check_results_place(results_dir, label)
    # The metrics port is bound (or refused, in one line) before anything is printed or touched.
    with live_metrics(metrics_port, metrics_address, metrics_textfile) as exporters:
        print_config_messages(config)
        config, line = dataset.for_config(config, targets, data_dir)  # before prepare()
        if line:
            err.print(line, highlight=False)
        sessions = config.session_count
        loops = config["WORK_LOOP"]
        span = f"{loops:,} SLOBops per session" if loops else f"{config['RUN_TIME']:g} s"
        err.print(
            f"run: {sessions} sessions, UPDATE_PCT={config['UPDATE_PCT']}, "
            f"warm-up {config['WARMUP']:g} s, window {span}",
            highlight=False,
        )
        for exporter in exporters:
            if exporter.url:
                notice(f"live metrics: {exporter.url}")

        def progress(row: dict[str, Any]) -> None:
            # On a terminal the line is rewritten in place; in a log (nohup, CI) each is a line.
            err.print(
                progress_line(row),
                highlight=False,
                soft_wrap=True,
                end="\r" if err.is_terminal else "\n",
            )

        every = progress_interval if progress_interval is not None else 0.0
        try:
            run_dir, result = run_benchmark(
                config,
                target=targets,
                data_dir=data_dir,
                results_parent=results_dir,
                label=label,
                notice=notice,
                calibrate=calibrate,
                calibrate_dir=calibrate_dir,
                render=render_text,
                sinks=[ProgressEvery(every, progress), *exporters],
            )
        except NotSaved as exc:  # a full disk: the report is all that is left of the run
            out.print(exc.report, highlight=False, markup=False, end="")
            raise
    out.print((run_dir / "report.txt").read_text(), highlight=False, markup=False, end="")
    out.print(f"results: {run_dir}", highlight=False)
    if result["status"] != "complete":
        err.print(f"run {result['status']}: {result.get('error')}", highlight=False)
        sys.exit(exit_code(result))


@contextlib.contextmanager
def live_metrics(
    port: int | None, address: str | None, textfile: Path | None
) -> Iterator[list[OpenMetricsExporter]]:
    """The exporter the --metrics-* options ask for (none: []), serving until the block ends."""
    if port is None and textfile is None:
        yield []
        return
    from openslob.results.openmetrics import DEFAULT_ADDRESS, OpenMetricsExporter

    exporter = OpenMetricsExporter(
        port=port, address=address or DEFAULT_ADDRESS, textfile=textfile, notice=notice
    )
    with exporter:
        yield [exporter]


def progress_line(row: dict[str, Any]) -> str:
    """One interval of the time series, in the metrics table's live figures (brief names)."""

    def num(key: str) -> str:
        value = row.get(key)
        return "n/a" if value is None else f"{value:,.{METRICS[key].digits}f}"

    figures = "  ".join(f"{METRICS[key].brief} {num(key)}" for key in progress_keys())
    return f"{row['phase']:>6} {row['elapsed_s']:7.1f} s ({row['seconds']:g} s)  {figures}   "


@cli.command(context_settings=CONTEXT)
@add_options("sweep")
@results_dir_option
@click.option(
    "--label",
    default=None,
    help="Names the sweep directory (sweep-LABEL); rerun with the same label to resume.",
)
@click.option(
    "--sweep-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Use this sweep directory instead of RESULTS_DIR/sweep-LABEL.",
)
@click.option(
    "--plots/--no-plots",
    default=True,
    show_default=True,
    help="Draw the petal plots when the sweep is complete.",
)
@target_option
@data_dir_option
@friendly_errors
def sweep(
    targets: tuple[str, ...],
    data_dir: Path | None,
    results_dir: Path,
    label: str | None,
    sweep_dir: Path | None,
    plots: bool,
    **params: Any,
) -> None:
    """Run a matrix of SLOB runs: any option may be a comma list. Resumable.

    For each UPDATE_PCT (in the order given), sessions ascending, one run directory per
    point in the sweep directory, plus sweep.json (plan and status), sweep.csv (the
    analyze table) and plots/ (petal plots). Rerunning the same command skips the
    complete points and redoes interrupted or failed ones. --repeat N runs every point N
    times in rounds (A B C A B C) and writes summary.csv (median, min, max, CV per
    point); a rerun with a larger --repeat adds rounds. Every point runs on the data set that
    is there, as `slob run` does (SCHEMAS, SCALE, SCAN_TABLE_SZ, SEED not given).

    \b
    Examples:
      slob sweep --sessions 1,2,4,8 --update-pct 0,10,20,30 --run-time 60 --label ssd
      slob sweep --sessions 4,16,64 --work-unit 16,64 --update-pct 0 --label wu
      slob sweep --sessions 1,4 --update-pct 0,20 --run-time 60 --repeat 3 --label a
      slob sweep --sessions 8 --update-pct 0,20 --rate 10%,50%,100% --run-time 60 --label rate
    """
    conf = params.pop("conf", None)
    options = {option.name: option for option in options_for("sweep")}
    flags = {name: params.pop(option.param) for name, option in options.items()}
    plan = harness.plan_sweep(flags, conf, Path.cwd())  # every point validated up front
    for point in plan.points:
        target_strings(targets, point.config)
    path = sweep_dir or harness.sweep_directory(results_dir, label)
    check_results_place(path, label, "--sweep-dir" if sweep_dir else "--results-dir")
    print_config_messages(plan.points[0].config)  # slob.conf's: the same for every point
    _run_plan(plan, path, label, targets, data_dir, plots=plots, kind="sweep")


def _run_plan(
    plan: harness.SweepPlan,
    path: Path,
    label: str | None,
    targets: tuple[str, ...],
    data_dir: Path | None,
    *,
    plots: bool,
    kind: str,
) -> None:
    """A sweep, or a repeated run (a sweep of one point): run what is not complete yet,
    then write sweep.csv, the summary and the plots, and say how it went."""
    line = dataset.for_plan(plan, targets, data_dir)  # before sweep.json and prepare()
    if line:
        err.print(line, highlight=False)
    runs = plan.runs()
    per_point = float(plan.points[0].config["WARMUP"]) + float(plan.points[0].config["RUN_TIME"])
    axes = ", ".join(f"{k}={','.join(map(str, v))}" for k, v in plan.axes.items())
    shape = f"{len(plan.points)} points ({axes})" if plan.axes else "1 point"
    if plan.repeat > 1:
        shape += f" x {plan.repeat} repeats, interleaved"
    err.print(f"{kind} {path}: {shape}, ~{per_point:g} s each run", highlight=False)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    ) as bar:
        task = bar.add_task(kind, total=len(runs))

        def started(entry: dict[str, Any]) -> None:
            bar.update(task, description=f"{entry['name']}")

        def done(entry: dict[str, Any], result: dict[str, Any] | None) -> None:
            bar.advance(task)
            bar.console.print(_point_line(entry, result), highlight=False)

        outcome = harness.run_sweep(
            plan,
            path=path,
            label=label,
            target=targets,
            data_dir=data_dir,
            notice=lambda msg: bar.console.print(f"[dim]note:[/] {msg}", highlight=False),
            point_started=started,
            point_done=done,
            render=render_text,
        )
        bar.update(task, completed=len(outcome.ran) + len(outcome.skipped))
    if outcome.skipped:
        what = "point(s)" if plan.repeat == 1 else "run(s)"
        err.print(f"{len(outcome.skipped)} {what} already complete, skipped", highlight=False)
    written = finish_sweep(path, plots)
    if plots and written:
        err.print(f"plots: {path / 'plots'}", highlight=False)
    if plan.repeat > 1 and written:
        _print_point_table(path)
    if outcome.run_seconds:
        err.print(
            f"wall {outcome.wall_seconds:.1f} s for {outcome.run_seconds:.1f} s of warm-up "
            f"and windows ({outcome.wall_seconds / outcome.run_seconds:.2f}x)",
            highlight=False,
        )
    if outcome.stopped:
        err.print(
            f"{kind} stopped: a point ended {outcome.stopped}; rerun the same command to resume",
            highlight=False,
        )
        sys.exit(exit_code({"status": outcome.stopped, "stopped_by": outcome.stopped_by}))


def _print_point_table(path: Path) -> None:
    """Each point's median (min–max) over its repeats, as `slob analyze` shows it."""
    from openslob.analysis.repeats import DEFAULT_MAX_CV_PCT, group_points, render_point_table
    from openslob.results.collect import find_runs

    out.print(
        render_point_table(group_points(find_runs([path])), DEFAULT_MAX_CV_PCT),
        highlight=False,
        markup=False,
        end="",
    )
    out.print(f"results: {path}", highlight=False)


def _point_line(entry: dict[str, Any], result: dict[str, Any] | None) -> str:
    metrics = (result or {}).get("metrics") or {}

    def num(key: str) -> str:
        value = metrics.get(key)
        return "n/a" if value is None else f"{value:,.0f}"

    status = entry["status"] + (f" ({entry['error']})" if entry.get("error") else "")
    return (
        f"{entry['name']:<32} {status:<10} ops/s {num('slobops_per_s'):>8}  "
        f"reads/s {num('pio_reads_per_s'):>8}  writes/s {num('pio_writes_per_s'):>8}  "
        f"read {num('db_read_latency_us'):>6} us"
    )


@cli.command(context_settings=CONTEXT)
@click.option(
    "--sessions",
    type=click.IntRange(1, 4096),
    default=4,
    show_default=True,
    help="fio jobs (one per database session you want to compare with).",
)
@click.option(
    "--run-time", type=FloatRange(1, 86400), default=30, show_default=True, help="Seconds."
)
@click.option("--size", default="1G", show_default=True, help="Size of fio's file.")
@click.option(
    "--block-size",
    default=None,
    metavar="SIZE",
    help="fio's read size, 512 to 1M in steps of 512 (default: the page size of the "
    "--target's private server, else 8K).",
)
@click.option(
    "--calibrate-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for fio's file (default: the private server's data directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print fio's figures as JSON.")
@add_server_options
@target_option
@data_dir_option
@friendly_errors
def calibrate(
    sessions: int,
    run_time: float,
    size: str,
    block_size: str | None,
    calibrate_dir: Path | None,
    as_json: bool,
    targets: tuple[str, ...],
    data_dir: Path | None,
    **params: Any,
) -> None:
    """Measure the raw device with fio the way the database reads it.

    Random reads of one database page (8 KiB; a private MariaDB's InnoDB page size), psync,
    O_DIRECT, one job per session, on the file system of the database's data directory
    (the private server of --target, or --calibrate-dir).
    `slob run --calibrate` does the same right after a run and puts both side by side in
    the report.

    \b
    Examples:
      slob calibrate --sessions 8 --run-time 60
      slob calibrate --calibrate-dir /tmp/fio --size 256M --run-time 10 --json
      slob calibrate --target embedded-mariadb --page-size 16k --run-time 10
    """
    from openslob.runner.calibrate import DEFAULT_BLOCK_BYTES, fio_block_bytes, run_fio
    from openslob.runner.execute import calibration_dir
    from openslob.runner.targets import resolve_targets

    config = server_config(params)
    block = fio_block_bytes(block_size)  # bad input refused before fio or a server starts
    if calibrate_dir is not None:
        directory = calibrate_dir
    else:
        names = target_strings(targets, config)
        if len(names) > 1:
            raise OpenslobError("calibrate: give one --target (fio reads one file system)")
        (target,) = resolve_targets(names, config, data_dir, start=False)
        directory = calibration_dir(target, None)
        if block is None and target.server is not None:
            block = target.server.page_bytes
    result = run_fio(directory, sessions, run_time, size, block or DEFAULT_BLOCK_BYTES)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
        return
    click.echo(
        f"fio {result.version}: {result.jobs} jobs x {result.block_bytes // 1024} KiB random "
        "reads (psync, direct) "
        f"for {result.seconds:.1f} s on {result.file}"
    )
    click.echo(
        f"  {result.iops:,.0f} IOPS, {result.read_mb_per_s:,.1f} MB/s, latency mean "
        f"{result.mean_latency_us:,.1f} us, p50 {_us(result.p50_latency_us)}, "
        f"p99 {_us(result.p99_latency_us)}"
    )


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f} us"
