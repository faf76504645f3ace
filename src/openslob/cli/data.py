"""`slob setup|verify|doctor|destroy`: the SLOB data set on each target."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from openslob.cli.app import (
    CONTEXT,
    cli,
    data_dir_option,
    echo_json,
    err,
    friendly_errors,
    notice,
    out,
    print_config_messages,
    target_option,
    titled,
)
from openslob.cli.params import add_options, config_from_click
from openslob.config.resolve import Config, defaults
from openslob.engines import registry
from openslob.engines.api import Engine, SetupResult, Target, VerifyResult
from openslob.runner import dataset
from openslob.runner.precondition import remove_work_dir
from openslob.runner.prepare import hold_dataset, one_per_data_group, parallel, setup_dataset
from openslob.runner.targets import resolve_targets


def _engines_for(
    targets: tuple[str, ...], config: Config, data_dir: Path | None
) -> list[tuple[Engine, Target]]:
    resolved = resolve_targets(targets, config, data_dir)
    return [(registry.plugin(t.engine).engine(t), t) for t in resolved]


@cli.command(context_settings=CONTEXT)
@add_options("setup")
@target_option
@data_dir_option
@friendly_errors
def setup(targets: tuple[str, ...], data_dir: Path | None, **params: Any) -> None:
    """Create the SLOB data set: schemas user1..userN with cf1 (SCALE rows) and cf2.

    As few rows per block as the engine allows (one per 8 KiB page on PostgreSQL), keys
    shuffled independently per schema, a unique index on custid. Valid data is left
    untouched; changed parameters, an interrupted load, tables changed by hand or bloated
    by an earlier run are rebuilt. Parameters come from ./slob.conf (or --conf), overridden
    by flags.

    \b
    Examples:
      slob setup
      slob setup --schemas 8 --scale 1G
      slob setup --conf ~/SLOB/slob.conf --load-parallel-degree 4
    """
    config = config_from_click(params, "setup")  # validates before anything is touched
    print_config_messages(config)
    engines = one_per_data_group(_engines_for(targets, config, data_dir))
    rows = config.p.schemas * (config.p.scale + config.p.scan_table_sz)
    total_mb = engines[0][0].data_bytes(rows) / 2**20
    where = engines[0][1].label if len(engines) == 1 else f"{len(engines)} instances at once"
    err.print(
        f"setup on {where}: {config.p.schemas} schemas x {config.p.scale} rows "
        f"(+ {config.p.scan_table_sz} scan rows), {total_mb:,.0f} MB"
        f"{' each' if len(engines) > 1 else ''}, "
        f"{config.p.load_parallel_degree} load streams",
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
        _print_setup(result, titled("Load summary", resolved.label, len(engines)))


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
        notice(note)


@cli.command(context_settings=CONTEXT)
@add_options("verify")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@target_option
@data_dir_option
@friendly_errors
def verify(targets: tuple[str, ...], data_dir: Path | None, as_json: bool, **params: Any) -> None:
    """Measure the data set: rows, pages, rows per page, shuffle, indexes. Exit 1 if off.

    SCHEMAS, SCALE, SCAN_TABLE_SZ and SEED not given (flag or slob.conf) are the data set's
    as `slob setup` recorded them (one line says so); given ones are checked as given.

    \b
    Examples:
      slob verify
      slob verify --json
      slob verify --schemas 8 --scale 1G
    """
    config = config_from_click(params, "verify")
    print_config_messages(config)
    config, line = dataset.for_config(config, targets, data_dir)
    if line:
        err.print(line, highlight=False)
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
        echo_json(docs)
    else:
        for resolved, result in results:
            _print_verify(result, titled("Data set verification", resolved.label, len(results)))
    sys.exit(0 if all(result.ok for _, result in results) else 1)


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
@add_options("run")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@target_option
@data_dir_option
@friendly_errors
def doctor(targets: tuple[str, ...], data_dir: Path | None, as_json: bool, **params: Any) -> None:
    """Check a server for openslob: version, privileges, settings that change the numbers.

    Each finding says what it measured, a verdict (ok / warn / fail) and what to change.
    Run options (--sessions, --schemas, --scale ...) set what capacity and data size are
    checked against; SCHEMAS, SCALE, SCAN_TABLE_SZ and SEED not given are the data set's, as
    for `slob run` (one line says so). Exit 1 when something fails (setup or the run cannot
    work).

    \b
    Examples:
      slob doctor --sessions 64
      slob doctor --target embedded --scale 1G --json
    """
    config = config_from_click(params, "run")
    # the data set that is there decides the data size and default sessions checked
    config, line = dataset.for_doctor(config, targets, data_dir)
    if line:
        err.print(line, highlight=False)
    resolved_targets = resolve_targets(targets, config, data_dir)
    # Each instance is checked for the sessions it gets (round robin over the instances).
    share = -(-config.session_count // len(resolved_targets))
    checked = [(t, registry.plugin(t.engine).diagnose(t, config, share)) for t in resolved_targets]
    if as_json:
        echo_json([[f.__dict__ for f in findings] for _, findings in checked])
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
    engines = _engines_for(targets, defaults(), data_dir)
    for engine, resolved in engines:
        if not yes:
            click.confirm(f"Drop the SLOB schemas on {resolved.label}?", abort=True)
        lock = hold_dataset(engine, resolved, "destroy", notice)
        try:
            dropped = engine.destroy()
        finally:
            lock.release()
        on = f" on {resolved.label}" if len(engines) > 1 else ""
        out.print(f"dropped {', '.join(dropped)}{on}" if dropped else f"nothing to drop{on}")
        if resolved.server is not None and remove_work_dir(resolved.server.instance_dir):
            out.print(f"removed the files of `slob precondition`{on}")
