"""`slob precondition`: write the data set (or files of our own) over before a sustained test
(runner/precondition.py does the work; this parses, checks, shows progress and the summary)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from openslob.cli.app import (
    CONTEXT,
    cli,
    data_dir_option,
    err,
    friendly_errors,
    notice,
    out,
    print_config_messages,
    target_option,
)
from openslob.cli.params import add_options, config_from_click
from openslob.config.option import parse_size_bytes
from openslob.engines import registry
from openslob.model.errors import ConfigError
from openslob.runner import dataset
from openslob.runner import precondition as pre
from openslob.runner.prepare import hold_dataset
from openslob.runner.prewrite import check_fill_pct, parse_block_bytes
from openslob.runner.targets import resolve_targets

MAX_PASSES = 100


def _size(option: str, raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        size = parse_size_bytes(raw)
    except ValueError:
        size = 0
    if size < 4096:
        raise ConfigError(f"{option} {raw}: a size of at least 4K (e.g. 512M, 2G)")
    return size


@cli.command(context_settings=CONTEXT)
@click.option(
    "--mode",
    type=click.Choice(pre.MODES),
    default="engine",
    show_default=True,
    help="engine: the database rewrites its own pages (cf1, cf2 of every schema); seq or "
    "random: SNIA-style workload-independent writes into files of our own.",
)
@click.option("--passes", type=int, default=2, show_default=True, help="Times over (1..100).")
@click.option(
    "--block-size",
    default="128K",
    show_default=True,
    help="Block of the seq/random and fill writes (4K..64M, multiples of 4K).",
)
@click.option("--size", help="seq/random: bytes per pass (default: the data set's size).")
@click.option(
    "--fill",
    "fill_pct",
    type=float,
    help="Also fill the file system up to this % used (1..95), in files `slob destroy` "
    "removes; refused up front if it would end beyond.",
)
@click.option(
    "--dir",
    "work_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where our files and the state go (default: <private server>/openslob-fill; "
    "needed for a server openslob does not run).",
)
@click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory of precondition.json and precondition.csv "
    "(default ./slob-results/precondition-<UTC time>).",
)
@add_options("verify")
@target_option
@data_dir_option
@friendly_errors
def precondition(
    mode: str,
    passes: int,
    block_size: str,
    size: str | None,
    fill_pct: float | None,
    work_dir: Path | None,
    results: Path | None,
    targets: tuple[str, ...],
    data_dir: Path | None,
    **params: Any,
) -> None:
    """Precondition the storage: write the data set's pages over N times before a test.

    Flash falls off a cliff once garbage collection cannot keep up; SNIA's test
    specification therefore writes the device over before measuring. --mode engine has the
    database rewrite every page of the data set in committed batches (new random bytes, the
    same layout and compressibility), with a checkpoint after each pass; --mode seq|random
    writes files of our own. Progress shows MB/s and the time left; the end prints bytes
    written / data set size and the device's write MB/s (precondition.csv: once a second).
    Ctrl-C stops within seconds; the same command again continues where it stopped.

    \b
    Examples:
      slob precondition --passes 2
      slob precondition --mode seq --passes 1 --block-size 1M
      slob precondition --mode random --size 256M --fill 50
    """
    if not 1 <= passes <= MAX_PASSES:
        raise ConfigError(f"--passes {passes}: allowed 1..{MAX_PASSES}")
    block_bytes = parse_block_bytes(_size("--block-size", block_size) or 0)
    check_fill_pct(fill_pct)
    size_bytes = _size("--size", size)
    if size_bytes is not None and mode == "engine":
        raise ConfigError("--size: only with --mode seq or random (engine rewrites the data set)")
    if len(targets) > 1:
        raise ConfigError("--target: one at a time for slob precondition")
    config = config_from_click(params, "verify")
    print_config_messages(config)
    config, line = dataset.for_config(config, targets, data_dir)
    if line:
        err.print(line, highlight=False)
    (target,) = resolve_targets(targets, config, data_dir)
    engine = registry.plugin(target.engine).engine(target)
    if work_dir is None:
        if target.server is None:
            raise ConfigError("--dir: needed for a server openslob does not run")
        work_dir = pre.work_dir_of(target.server.instance_dir)
    schemas = [f"user{i}" for i in range(1, config.p.schemas + 1)]
    missing = engine.missing_tables(config, schemas)
    if missing and (mode == "engine" or size_bytes is None):
        name, why = next(iter(missing.items()))
        raise ConfigError(f"no usable data set ({name}: {why}): run `slob setup` first")
    # seq/random with --size work without a data set: then bytes / data set size is n/a
    extents = () if missing else tuple(engine.rewrite_plan(config))
    dataset_bytes = sum(e.bytes for e in extents) if extents else None
    per_pass = size_bytes if mode != "engine" and size_bytes else dataset_bytes or 0
    per_pass = -(-per_pass // 4096) * 4096  # whole 4K blocks (O_DIRECT)
    plan = pre.Plan(
        mode, passes, block_bytes, fill_pct, work_dir, dataset_bytes, per_pass,
        extents if mode == "engine" else (),
    )  # fmt: skip
    lock = hold_dataset(engine, target, "precondition", notice) if mode == "engine" else None
    try:
        state, said = pre.start(plan)  # refuses before anything is written
        if said:
            notice(said)
        results = results or Path("slob-results") / time.strftime(
            "precondition-%Y%m%d-%H%M%S", time.gmtime()
        )
        _header(plan, int(state.extra.get("fill_bytes", 0)), target.label)
        summary = _run_with_bar(plan, state, engine, results)
    except KeyboardInterrupt:
        err.print(
            f"precondition interrupted: state kept in {plan.work_dir}; "
            "the same command continues it",
            highlight=False,
        )
        raise
    finally:
        if lock is not None:
            lock.release()
    _print_summary(summary, results)


def _header(plan: pre.Plan, fill: int, label: str) -> None:
    what = "the data set (engine writes)" if plan.mode == "engine" else f"{plan.mode} files"
    fill_text = f", then {fill / 2**20:,.0f} MB fill" if fill else ""
    err.print(
        f"precondition on {label}: {plan.passes} x {plan.size_bytes / 2**20:,.0f} MB of "
        f"{what}{fill_text}; files and state in {plan.work_dir}",
        highlight=False,
    )


def _run_with_bar(
    plan: pre.Plan, state: pre.PreconditionState, engine: Any, results: Path
) -> pre.Summary:
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("writing", total=None, completed=state.bytes_written)
        return pre.run(
            plan,
            state,
            engine if plan.mode == "engine" else None,
            results,
            lambda done, total: bar.update(task, completed=done, total=total),
        )


def _print_summary(s: pre.Summary, results: Path) -> None:
    def mbps(value: float | None) -> str:
        return "n/a" if value is None else f"{value:,.1f} MB/s"

    ratio = "n/a" if s.written_over_dataset is None else f"{s.written_over_dataset:.2f}"
    out.print(
        f"precondition {s.mode}: {s.passes_done}/{s.passes} passes"
        f"{' (resumed)' if s.resumed else ''}, {s.bytes_written / 1e6:,.1f} MB written "
        f"(fill {s.fill_bytes / 1e6:,.1f} MB) = {ratio} x the data set "
        f"({'no data set' if s.dataset_bytes is None else f'{s.dataset_bytes / 1e6:,.1f} MB'});"
        f" this run {s.seconds:.1f} s, {mbps(s.mb_per_s)}",
        highlight=False,
    )
    device = ", ".join(s.devices) or "no device"
    dev_ratio = s.device_written_over_dataset
    out.print(
        f"device writes ({device}, this run, everything on it): "
        + ("n/a" if dev_ratio is None else f"{dev_ratio:.2f} x the data set")
        + f", mean {mbps(s.device_write_mb_per_s)}, max {mbps(s.device_write_mb_per_s_max)}"
        + (f" ({s.device_note})" if s.device_note else "")
        + f"; results in {results}",
        highlight=False,
    )
