"""`slob run` as a library call: target → data check → run → run directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from openslob import host
from openslob.calibrate import CalibrationError, compare, require_fio, run_fio
from openslob.engines.base import ProgressCallback, SetupResult
from openslob.engines.postgres.dataset import DatasetLoader, wanted_tables
from openslob.engines.postgres.engine import PostgresEngine
from openslob.engines.postgres.runner import PostgresRunBackend
from openslob.engines.postgres.workload import install_procedures
from openslob.errors import SetupError
from openslob.options import BLOCK_SIZE, Config
from openslob.report.text import render_text
from openslob.results import build_run_json, run_directory, write_run
from openslob.run import ProgressFn, RunController, external_script, session_schemas
from openslob.targets import Target, resolve_target

# Connections besides the work sessions: snapshots, sampler, waits, setup checks, slack.
EXTRA_CONNECTIONS = 10
# Below this a buffered-I/O restart (two restarts and a checkpoint, ~2 s) gains nothing.
LOAD_RESTART_MIN_BYTES = 128 << 20

Notice = Callable[[str], None]


def needed_schemas(config: Config) -> list[str]:
    schemas = sorted(set(session_schemas(config)), key=lambda n: (len(n), n))
    if config["HOT_SCHEMA_FREQUENCY"] and "user1" not in schemas:
        schemas.insert(0, "user1")
    return schemas


def ensure_capacity(target: Target, sessions: int, notice: Notice) -> None:
    """Raise the private server's max_connections when the run needs more."""
    if target.server is None:
        return
    wanted = sessions + EXTRA_CONNECTIONS
    info = target.server.status()
    current = int((info.settings or {}).get("max_connections", 0))
    if current < wanted:
        notice(
            f"restarting the private server with max_connections={wanted} "
            f"(was {current}) for {sessions} sessions"
        )
        target.server.start(max_connections=wanted)


def setup_dataset(
    engine: PostgresEngine,
    target: Target,
    config: Config,
    notice: Notice = lambda _msg: None,
    progress: ProgressCallback | None = None,
) -> SetupResult:
    """engine.setup; a large load into the private server runs with buffered I/O, after
    which the server is back in its test profile (EmbeddedServer.buffered_for_load)."""
    if target.server is None or engine.bytes_to_load(config) < LOAD_RESTART_MIN_BYTES:
        return engine.setup(config, progress)
    with target.server.buffered_for_load(notice):
        return engine.setup(config, progress)


def ensure_data(
    engine: PostgresEngine,
    target: Target,
    config: Config,
    schemas: list[str],
    notice: Notice,
    setup_progress: ProgressCallback | None,
) -> None:
    """Use the data set as loaded; create the default one only when there is none at all."""
    loader = DatasetLoader(engine.conninfo)
    scan_rows = config["SCAN_TABLE_SZ"]
    specs = [
        s
        for s in wanted_tables(config["SCHEMAS"], config["SCALE"], scan_rows, config["SEED"])
        if s.schema in schemas
    ]
    if not config["SCAN_PCT"]:
        specs = [s for s in specs if s.table == "cf1"]
    todo, _ = loader.plan(specs)
    if not todo:
        return
    if not loader.existing_schemas():
        size_mb = config["SCHEMAS"] * (config["SCALE"] + scan_rows) * BLOCK_SIZE / 2**20
        notice(
            f"no SLOB data set yet: creating {config['SCHEMAS']} schemas x "
            f"{config['SCALE']:,} rows ({size_mb:,.0f} MB) first"
        )
        setup_dataset(engine, target, config, notice, setup_progress)
        return
    names = ", ".join(f"{s.schema}.{s.table}" for s in todo[:4])
    raise SetupError(
        f"the data set does not match this run ({names}{' ...' if len(todo) > 4 else ''} "
        f"not loaded with SCALE={config['SCALE']}, SCAN_TABLE_SZ={scan_rows}, "
        f"SEED={config['SEED']}); run `slob setup` with the same parameters first"
    )


# "database": read host counters through the connection even when the data directory is
# visible here (a server in a container; the tests of that path).
HOST_COUNTERS_ENV = "SLOB_HOST_COUNTERS"
_NO_HOST = ("hostname", "cpus", "cpu_model", "memory_bytes", "kernel", "os")


def _server_host(
    backend: PostgresRunBackend, settings: dict[str, str]
) -> tuple[list[str], dict[str, Any], str | None]:
    """Devices and host description of a server on another host, read through the database;
    nulls and the reason when the role may not read its files."""
    reason = backend.host_files_reason()
    if reason is not None:
        return [], {**dict.fromkeys(_NO_HOST), "devices": []}, reason
    monitor = backend.monitor("host")
    try:
        read = monitor.read_file
        devices = host.devices_from_texts(
            settings.get("data_directory", ""),
            read("/proc/self/mountinfo") or "",
            read("/proc/diskstats") or "",
        )
        return devices, host.read_host_info(read, devices), None
    finally:
        monitor.close()


def local_server(target: Target, settings: dict[str, str]) -> tuple[str | None, int | None]:
    """(data directory, postmaster pid) when the server runs on this host, else (None, None)."""
    if target.server is not None:
        state = target.server.status()
        return str(target.server.pgdata), state.pid
    data_dir = settings.get("data_directory")
    if not data_dir:
        return None, None
    try:
        pid = int(Path(data_dir, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None, None
    if not host.pid_alive(pid):
        return None, None
    return data_dir, pid


@dataclass
class Prepared:
    """A target made ready for runs: server up, capacity, data checked, procedures in."""

    target: Target
    engine: PostgresEngine
    description: dict[str, Any]


def prepare(
    config: Config,
    *,
    target: str | None,
    data_dir: Path | None,
    notice: Notice = lambda _msg: None,
    setup_progress: ProgressCallback | None = None,
    max_sessions: int | None = None,
) -> Prepared:
    """Everything before the first run; a sweep does it once for all its points."""
    resolved = resolve_target(target, data_dir)
    ensure_capacity(resolved, max_sessions or len(session_schemas(config)), notice)
    engine = PostgresEngine(resolved.conninfo)
    description = engine.describe()
    schemas = needed_schemas(config)
    ensure_data(engine, resolved, config, schemas, notice, setup_progress)
    with engine._connect() as conn:
        install_procedures(conn, schemas)
    return Prepared(resolved, engine, description)


def execute(
    prepared: Prepared,
    config: Config,
    run_dir: Path,
    *,
    label: str | None = None,
    notice: Notice = lambda _msg: None,
    progress: ProgressFn | None = None,
    calibrate_dir: Path | None = None,
) -> dict[str, Any]:
    """One run into `run_dir` (created if needed); returns the run.json dict it wrote.

    With `calibrate_dir`, fio then reads that file system with the run's concurrency and
    duration, and run.json carries both sides (see calibrate.py).
    """
    resolved = prepared.target
    run_dir.mkdir(parents=True, exist_ok=True)
    sessions = len(session_schemas(config))
    backend = PostgresRunBackend(resolved.conninfo, f"openslob-run {run_dir.name}")
    settings = backend.settings()
    local_data_dir, server_pid = local_server(resolved, settings)
    notes = [] if settings.get("track_io_timing") == "on" else ["track_io_timing=off"]
    via_database = False
    if local_data_dir and os.environ.get(HOST_COUNTERS_ENV) != "database":
        devices = host.devices_for_path(local_data_dir)
        host_info = host.host_info(local_data_dir)
    else:
        devices, host_info, reason = _server_host(backend, settings)
        via_database = reason is None
        notes.append(reason or "host counters read through the database (pg_read_file)")
        server_pid = None  # not ours to watch or measure: DB CPU is null
    script_env = {"SLOB_RUN_DIR": str(run_dir), "SLOB_SESSIONS": str(sessions)}
    controller = RunController(
        config,
        backend,
        devices=devices,
        server_pid=server_pid,
        progress=progress,
        script_env=script_env,
        server_alive=None if server_pid is None else partial(host.pid_alive, server_pid),
        on_server_death=resolved.server.kill_orphans if resolved.server else None,
        host_via_database=via_database,
    )
    controller.record.notes.extend(notes)
    record = controller.run()
    profile = _profile(resolved)
    run = build_run_json(
        record=record,
        config=config,
        engine=prepared.description,
        settings=settings,
        host_info=host_info,
        profile=profile,
        label=label,
        devices_local=bool(local_data_dir) or via_database,
    )
    if calibrate_dir is not None and run["status"] == "complete":
        run["calibration"] = calibration(calibrate_dir, sessions, run, notice)
    write_run(run_dir, run, record.timeseries)
    (run_dir / "report.txt").write_text(render_text(run))
    error = external_script(config["EXTERNAL_SCRIPT"], "end", script_env)
    if error:
        notice(error)
    return run


def calibration(
    directory: Path, sessions: int, run: dict[str, Any], notice: Notice
) -> dict[str, Any]:
    """fio at the run's concurrency and duration, and how the database compares."""
    seconds = run["window"]["seconds"] or 1.0
    notice(f"calibrating: fio 8 KiB random reads, {sessions} jobs, {seconds:.0f} s in {directory}")
    try:
        fio = run_fio(directory, sessions, seconds).as_dict()
    except CalibrationError as exc:
        notice(str(exc))
        return {"fio": None, "error": str(exc)}
    return {"fio": fio, **compare(run["metrics"], fio)}


def calibration_dir(target: Target, explicit: Path | None) -> Path:
    """Where fio reads: the private server's data directory, or a directory the user names."""
    if explicit is not None:
        return explicit
    if target.server is not None:
        return target.server.data_dir / "calibrate"
    raise CalibrationError(
        "--calibrate on an external server needs --calibrate-dir: a "
        "directory on the file system of its data directory"
    )


def _profile(target: Target) -> str | None:
    if target.server is None:
        return None
    try:
        return target.server.status().profile
    except Exception:  # the server may have died during the run; the results still count
        return None


def run_benchmark(
    config: Config,
    *,
    target: str | None,
    data_dir: Path | None,
    results_parent: Path,
    label: str | None = None,
    notice: Notice = lambda _msg: None,
    progress: ProgressFn | None = None,
    setup_progress: ProgressCallback | None = None,
    calibrate: bool = False,
    calibrate_dir: Path | None = None,
) -> tuple[Path, dict[str, Any]]:
    """`slob run`: prepare the target, run once into a new timestamped directory."""
    prepared = prepare(
        config, target=target, data_dir=data_dir, notice=notice, setup_progress=setup_progress
    )
    fio_dir = calibration_dir(prepared.target, calibrate_dir) if calibrate else None
    if fio_dir is not None:
        require_fio()  # before the run, not after it
    run_dir = run_directory(results_parent, label)
    run = execute(
        prepared,
        config,
        run_dir,
        label=label,
        notice=notice,
        progress=progress,
        calibrate_dir=fio_dir,
    )
    return run_dir, run
