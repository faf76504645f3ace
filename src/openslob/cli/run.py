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
from openslob.cli.console import RunProgress, point_lines
from openslob.cli.params import FloatRange, add_options, add_server_options, server_config
from openslob.config.options import OPTIONS_BY_NAME, options_for
from openslob.config.resolve import resolve
from openslob.model.errors import ConfigError, OpenslobError
from openslob.model.states import PointStatus, RunStatus
from openslob.report.jsonsummary import render_summary
from openslob.report.sweepfiles import finish_sweep
from openslob.report.text import render_text
from openslob.results.rundir import NotSaved, check_results_place, path_name
from openslob.runner import dataset
from openslob.runner import sweep as harness
from openslob.runner.execute import run_benchmark
from openslob.runner.observers import Observers
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


def _slob_habits(schemas_arg: str | None, s: str | None, t: str | None, flags: dict) -> None:
    """SLOB's `runit.sh N` (N schemas, a session each) and SLOB 2.5's `runit.sh -s N -t T`
    (N schemas, T threads each): what they ask, as --schemas / --threads-per-schema."""
    given = {
        name: f"{OPTIONS_BY_NAME[name].flag} {flags[name]}"
        for name in ("SCHEMAS", "THREADS_PER_SCHEMA")
        if flags.get(name) is not None
    }
    for value, name, what in (
        (schemas_arg, "SCHEMAS", f"N={schemas_arg}"),
        (s, "SCHEMAS", f"-s {s}"),
        (t, "THREADS_PER_SCHEMA", f"-t {t}"),
    ):
        if value is None:
            continue
        if flags.get(name) not in (None, value):
            flag = OPTIONS_BY_NAME[name].flag
            raise ConfigError(f"{given[name]} and {what} ({flag}) differ: give one")
        flags[name] = value
        given.setdefault(name, what)


@cli.command(context_settings=CONTEXT)
@click.argument("schemas_arg", required=False, metavar="[N]")
@add_options("run")
@click.option("-s", "slob_s", default=None, hidden=True)  # SLOB 2.5 runit.sh -s: schemas
@click.option("-t", "slob_t", default=None, hidden=True)  # runit.sh -t: threads per schema
@results_dir_option
@click.option("--label", default=None, help="Label appended to the run directory name.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON summary object on stdout instead of the report (report.txt and "
    "run.json are written as always; progress goes to stderr).",
)
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
    as_json: bool,
    schemas_arg: str | None,
    slob_s: str | None,
    slob_t: str | None,
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
    As SLOB's runit.sh: `slob run 4` is --schemas 4 (a session per schema), and SLOB 2.5's
    `-s 4 -t 2` is --schemas 4 --threads-per-schema 2.

    \b
    Examples:
      slob run
      slob run --run-time 60
      slob run --sessions 8 --update-pct 0 --run-time 30 --label readonly
      slob run --schemas 4 --threads-per-schema 2 --run-time 30
      nohup slob run --run-time 2h --progress-interval 60 --label soak > run.log 2>&1 &
      slob run --run-time 2h --metrics-port 9464   # Prometheus scrapes 127.0.0.1:9464
      slob run --run-time 60 --repeat 5 --label noise
      slob run 4 --run-time 60 --json > summary.json

    With --repeat N the run is made N times into RESULTS_DIR/repeat-LABEL (repeat-1/ …,
    resumable by rerunning the command), with summary.csv and the median (min–max) table.
    """
    if metrics_address is not None and metrics_port is None:
        raise click.BadOptionUsage("metrics_address", "--metrics-address needs --metrics-port")
    flags = {o.name: params.pop(o.param, None) for o in options_for("run")}
    _slob_habits(schemas_arg, slob_s, slob_t, flags)
    conf = params.pop("conf", None)
    config = resolve(flags, conf, scope="run")
    target_strings(targets, config)  # a bad combination fails here, before anything else
    if config.p.repeat > 1:
        if as_json:
            raise ConfigError(
                "--json prints one run's summary: give it without --repeat (the repeat "
                "directory's summary.json has every run)"
            )
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
        loops = config.p.work_loop
        span = f"{loops:,} SLOBops per session" if loops else f"{config.p.run_time:g} s"
        err.print(
            f"run: {sessions} sessions, UPDATE_PCT={config.p.update_pct}, "
            f"warm-up {config.p.warmup:g} s, window {span}",
            highlight=False,
        )
        for exporter in exporters:
            if exporter.url:
                notice(f"live metrics: {exporter.url}")

        lines = RunProgress.of(config)

        def progress(row: dict[str, Any]) -> None:
            # On a terminal the line is rewritten in place, within its width (a wrapped line
            # would leave fragments); in a log (nohup, CI) each is a line of its own.
            terminal = err.is_terminal
            text = lines.line(row, err.width - 1 if terminal else None)
            err.print(
                text + (" " * (err.width - 1 - len(text)) if terminal else ""),
                highlight=False,
                soft_wrap=True,
                markup=False,
                end="\r" if terminal else "\n",
            )

        every = progress_interval if progress_interval is not None else 0.0
        try:
            run_dir, result = run_benchmark(
                config,
                target=targets,
                data_dir=data_dir,
                results_parent=results_dir,
                label=label,
                calibrate=calibrate,
                calibrate_dir=calibrate_dir,
                observers=Observers(
                    notice=notice,
                    sinks=(ProgressEvery(every, progress), *exporters),
                    render=render_text,
                ),
            )
        except NotSaved as exc:  # a full disk: the report is all that is left of the run
            out.print(exc.report, highlight=False, markup=False, end="")
            raise
        finally:
            if err.is_terminal:  # the report starts on a line of its own, not over it
                err.print("")
    if as_json:
        click.echo(render_summary(result, run_dir), nl=False)
    else:
        out.print((run_dir / "report.txt").read_text(), highlight=False, markup=False, end="")
        out.print(f"results: {run_dir}", highlight=False)
    if result["status"] != RunStatus.COMPLETE:
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


def planned_seconds(plan: harness.SweepPlan, path: Path) -> list[float]:
    """Warm-up + window of each run not complete yet, in order ([] when a run has no
    planned length: WORK_LOOP)."""
    try:
        entries = json.loads((path / "sweep.json").read_text())["points"]
    except (OSError, ValueError, KeyError):
        entries = [{"point": p.name, "status": "planned"} for p, _ in plan.runs()]
    by_name = {p.name: p.config for p in plan.points}
    configs = [
        by_name.get(e.get("point")) for e in entries if e.get("status") != PointStatus.COMPLETE
    ]
    if any(c is None or c.p.work_loop for c in configs):
        return []
    return [c.p.warmup + c.p.run_time for c in configs if c is not None]


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
    per_point = plan.points[0].config.p.warmup + plan.points[0].config.p.run_time
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
        # The bar counts the plan's seconds (warm-up + window of each run still to do), so
        # its ETA holds from the first interval on; WORK_LOOP runs have no length: runs.
        planned = planned_seconds(plan, path)
        task = bar.add_task(kind, total=sum(planned) if planned else len(runs))
        state: dict[str, Any] = {"done": 0.0, "runs": 0, "point": None, "lines": None}

        def started(entry: dict[str, Any]) -> None:
            config = next(p.config for p in plan.points if p.name == entry["point"])
            state.update(point=entry["name"], lines=RunProgress.of(config))
            bar.update(task, description=f"{entry['name']}")

        def live(row: dict[str, Any]) -> None:  # inside a point: its figures, the bar moves
            text = state["lines"].brief(row) if state["lines"] else ""
            bar.update(task, description=f"{state['point']} {text}")
            if planned:
                bar.advance(task, float(row["seconds"] or 0.0))

        def done(entry: dict[str, Any], result: dict[str, Any] | None) -> None:
            if planned:  # the bar at the plan's count: a longer or shorter run evens out
                state["done"] += planned[state["runs"]]
                state["runs"] += 1
                bar.update(task, completed=state["done"])
            else:
                bar.advance(task)
            for line in point_lines(entry, result):
                bar.console.print(line, highlight=False, markup=False)

        outcome = harness.run_sweep(
            plan,
            path=path,
            label=label,
            target=targets,
            data_dir=data_dir,
            observers=Observers(
                notice=lambda msg: bar.console.print(f"[dim]note:[/] {msg}", highlight=False),
                progress=live,
                render=render_text,
            ),
            point_started=started,
            point_done=done,
        )
        if not outcome.stopped:
            bar.update(task, completed=bar.tasks[0].total)
    if outcome.skipped:
        what = "point(s)" if plan.repeat == 1 else "run(s)"
        err.print(f"{len(outcome.skipped)} {what} already complete, skipped", highlight=False)
    written = finish_sweep(path, plots)
    if plots and written:
        err.print(f"plots: {path / 'plots'}", highlight=False)
    if path / "scaling.csv" in written:  # an instance sweep
        err.print(f"scale-out: {path / 'scaling.csv'} (slob scaling {path})", highlight=False)
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
