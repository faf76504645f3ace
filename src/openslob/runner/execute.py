"""`slob run` as a library call: target → data check → run → run directory."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from openslob.config.options import Config
from openslob.engines import registry
from openslob.engines.api import DatasetLock, Engine, ProgressCallback, SetupResult
from openslob.engines.common.tables import schema_order
from openslob.host import counters as host_counters
from openslob.host import devices as host_devices
from openslob.host import snapshot as host_snapshot
from openslob.model.errors import BusyError, ConfigError, SetupError
from openslob.report.text import render_text
from openslob.results.build import InstanceInfo, build_run_json, run_directory, write_run
from openslob.runner.calibrate import CalibrationError, compare, require_fio, run_fio
from openslob.runner.controller import (
    InstanceRecord,
    ProgressFn,
    RunController,
    RunInstance,
    external_script,
    instance_schemas,
    session_schemas,
)
from openslob.runner.targets import Target, resolve_targets, target_strings

# Connections besides the work sessions: snapshots, sampler, waits, setup checks, slack.
EXTRA_CONNECTIONS = 10
# Below this a buffered-I/O restart (two restarts and a checkpoint, ~2 s) gains nothing.
LOAD_RESTART_MIN_BYTES = 128 << 20

Notice = Callable[[str], None]


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
    engine: Engine,
    target: Target,
    config: Config,
    notice: Notice = lambda _msg: None,
    progress: ProgressCallback | None = None,
    lock: DatasetLock | None = None,
) -> SetupResult:
    """engine.setup; a large load into the private PostgreSQL runs with buffered I/O, after
    which the server is back in its test profile (EmbeddedServer.buffered_for_load). The
    data set's lock is taken again after each restart."""
    buffered = getattr(target.server, "buffered_for_load", None)
    if buffered is None or engine.bytes_to_load(config) < LOAD_RESTART_MIN_BYTES:
        return engine.setup(config, progress)
    with buffered(notice):
        if lock is not None:
            lock.ensure()
        result = engine.setup(config, progress)
    if lock is not None:
        lock.ensure()
    return result


def ensure_data(
    engine: Engine,
    target: Target,
    config: Config,
    schemas: list[str],
    notice: Notice,
    setup_progress: ProgressCallback | None,
    lock: DatasetLock | None = None,
) -> None:
    """Use the data set as loaded; create the default one only when there is none at all.

    Every table the run uses is checked first (catalog and statistics only, no scan): a
    table changed since setup, or bloated by an earlier update run, is refused with what is
    wrong and `slob setup` to repair it, before anything runs."""
    todo = engine.missing_tables(config, schemas)
    if not todo:
        return
    if not engine.has_data():
        size_mb = engine.bytes_to_load(config) / 2**20
        notice(
            f"no SLOB data set yet: creating {config['SCHEMAS']} schemas x "
            f"{config['SCALE']:,} rows ({size_mb:,.0f} MB) first"
        )
        setup_dataset(engine, target, config, notice, setup_progress, lock)
        return
    raise SetupError(unusable_tables_message(todo, config))


def unusable_tables_message(todo: dict[str, str], config: Config) -> str:
    """One line: which tables a run cannot use, why, and what repairs them."""
    shown = "; ".join(f"{name}: {why}" for name, why in list(todo.items())[:3])
    more = f"; {len(todo) - 3} more" if len(todo) > 3 else ""
    if all(why.startswith("bloated") for why in todo.values()):
        return (
            f"the data set is bloated ({shown}{more}): an earlier update run could not "
            "prune old row versions (see its report's warnings); run `slob setup` to reload it"
        )
    return (
        f"the data set does not match this run ({shown}{more}); run `slob setup` with "
        f"the same parameters (SCHEMAS, SCALE={config['SCALE']}, "
        f"SCAN_TABLE_SZ={config['SCAN_TABLE_SZ']}, SEED={config['SEED']}) first"
    )


# "database": read host counters through the connection even when the data directory is
# visible here (a server in a container; the tests of that path).
HOST_COUNTERS_ENV = "SLOB_HOST_COUNTERS"
_NO_HOST = ("hostname", "cpus", "cpu_model", "memory_bytes", "kernel", "os")


def _server_host(
    backend: Any, settings: dict[str, str]
) -> tuple[list[str], dict[str, Any], str | None]:
    """Devices and host description of a server on another host, read through the database;
    nulls and the reason when the role may not read its files."""
    reason = backend.host_files_reason()
    if reason is not None:
        return [], {**dict.fromkeys(_NO_HOST), "devices": []}, reason
    monitor = backend.monitor("host")
    try:
        read = monitor.read_file
        devices = host_devices.devices_from_texts(
            settings.get("data_directory", ""),
            read("/proc/self/mountinfo") or "",
            read("/proc/diskstats") or "",
        )
        return devices, host_snapshot.read_host_info(read, devices), None
    finally:
        monitor.close()


def local_server(target: Target, settings: dict[str, str]) -> tuple[str | None, int | None]:
    """(data directory, server pid) when the server runs on this host, else (None, None)."""
    if target.server is not None:
        state = target.server.status()
        return str(target.server.files_dir), state.pid
    # PostgreSQL: data_directory and its postmaster.pid; MariaDB: datadir and pid_file
    data_dir = settings.get("data_directory") or settings.get("datadir")
    if not data_dir:
        return None, None
    pid_file = settings.get("pid_file") or str(Path(data_dir, "postmaster.pid"))
    try:
        pid = int(Path(data_dir, pid_file).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None, None
    if not host_counters.pid_alive(pid):
        return None, None
    return data_dir, pid


@dataclass
class PreparedInstance:
    """One instance made ready for runs: server up, capacity, data checked, procedures in,
    and its data set held for this process (lock) until release()."""

    target: Target
    engine: Engine
    description: dict[str, Any]
    lock: DatasetLock


@dataclass
class Prepared:
    """The instances of a run, in session placement order (session i -> instance i % n)."""

    instances: list[PreparedInstance]

    @property
    def target(self) -> Target:
        return self.instances[0].target

    def release(self) -> None:
        for instance in self.instances:
            instance.lock.release()


def hold_dataset(engine: Engine, target: Target, purpose: str, notice: Notice) -> DatasetLock:
    """The data set for this process alone, with no openslob loop left running on it.

    Another run, setup or destroy holding it is refused (BusyError names it). Run sessions
    found while the lock is ours belong to no live run: a client killed a moment ago, or an
    older openslob's. The private server's are ended; an existing server's are named, with
    the statement that ends them, and the run is refused."""
    lock = engine.lock_dataset(purpose)
    try:
        leftovers = engine.leftover_loops()
        if leftovers:
            ids = [i for i, _ in leftovers]
            shown = ", ".join(str(i) for i in ids[:8]) + (" ..." if len(ids) > 8 else "")
            if target.server is None:
                raise BusyError(
                    f"{len(ids)} openslob session(s) of an earlier run still run on "
                    f"{target.label} ({shown}); end them first: {engine.end_loops_advice(ids)}"
                )
            how = engine.end_loops(ids)
            notice(f"ended {len(ids)} openslob session(s) left by an earlier run ({how} {shown})")
    except BaseException:
        lock.release()
        raise
    return lock


def parallel(work: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """work(item) for each item at once (one thread each); the first error is raised."""
    if len(items) == 1:
        return [work(items[0])]
    with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="slob-instance") as pool:
        return list(pool.map(work, items))


def prepare(
    config: Config,
    *,
    target: str | list[str] | tuple[str, ...] | None,
    data_dir: Path | None,
    notice: Notice = lambda _msg: None,
    setup_progress: ProgressCallback | None = None,
    max_sessions: int | None = None,
    also: tuple[Config, ...] = (),
    purpose: str = "run",
) -> Prepared:
    """Everything before the first run, on every instance at once; a sweep does it once
    for all its points (`also`: the other points' configs, whose schemas must be there too)."""
    targets = resolve_targets(target, config, data_dir)
    count = len(targets)
    configs = (config, *also)
    fewest = min(len(session_schemas(c)) for c in configs)
    if count > 1 and fewest < count:
        raise ConfigError(
            f"SESSIONS={fewest} (or SCHEMAS x THREADS_PER_SCHEMA) cannot reach all {count} "
            f"instances: sessions go round robin over the instances; run at least as many "
            f"sessions as instances ({count} or more)"
        )
    schemas = [set() for _ in range(count)]
    for c in configs:
        for k, names in enumerate(instance_schemas(c, count)):
            schemas[k].update(names)
            if c["HOT_SCHEMA_FREQUENCY"]:
                schemas[k].add("user1")
    sessions = max_sessions or max(len(session_schemas(c)) for c in configs)
    engines = [registry.engine_for(t) for t in targets]
    if count > 1:
        _refuse_same_database(targets, engines)

    def one(k: int) -> PreparedInstance:
        resolved, engine = targets[k], engines[k]
        say = notice if count == 1 else (lambda msg: notice(f"{resolved.label}: {msg}"))
        lock = hold_dataset(engine, resolved, purpose, say)  # before anything is changed
        try:
            ensure_capacity(resolved, -(-sessions // count), say)  # its share, rounded up
            lock.ensure()  # a restart ended its connection
            description = engine.describe()
            names = sorted(schemas[k], key=schema_order)
            progress = setup_progress if count == 1 else None
            ensure_data(engine, resolved, config, names, say, progress, lock)
            engine.install_procedures(names)
        except BaseException:
            lock.release()
            raise
        return PreparedInstance(resolved, engine, description, lock)

    done: list[PreparedInstance] = []

    def tracked(k: int) -> PreparedInstance:
        instance = one(k)
        done.append(instance)  # released if another instance fails
        return instance

    try:
        return Prepared(parallel(tracked, list(range(count))))
    except BaseException:
        Prepared(done).release()
        raise


def restore_layout(prepared: Prepared, config: Config, notice: Notice) -> list[str]:
    """Before a sweep point: every table the point uses must still be valid, and is reloaded
    when it is not (a point with updates whose horizon was held leaves its tables bloated,
    and the next point would measure them). Returns what was reloaded and why."""
    count = len(prepared.instances)
    reloaded = []
    for names, instance in zip(instance_schemas(config, count), prepared.instances, strict=True):
        wanted = sorted({*names, *(["user1"] if config["HOT_SCHEMA_FREQUENCY"] else [])})
        todo = instance.engine.missing_tables(config, sorted(wanted, key=schema_order))
        if not todo:
            continue
        why = [f"{name}: {reason}" for name, reason in todo.items()]
        notice(f"reloading before this point ({'; '.join(why[:3])})")
        setup_dataset(instance.engine, instance.target, config, notice, lock=instance.lock)
        reloaded += why
    return reloaded


def refuse_while_in_use(target: Target, action: str) -> None:
    """`slob server stop|destroy` of a private server an openslob run, sweep or setup is
    using: refused (BusyError) unless --force."""
    if target.server is None or target.server.status().state != "running":
        return
    holder = registry.engine_for(target).lock_holder()
    if holder is not None:
        raise BusyError(
            f"{holder} is using {target.label}: {action} would end it; wait for it to end, "
            f"or add --force"
        )


def _refuse_same_database(targets: list[Target], engines: list[Engine]) -> None:
    """Two targets reaching the same database would run one instance twice as "two"."""
    seen: dict[tuple, str] = {}
    for target, engine in zip(targets, engines, strict=True):
        key = engine.identity()
        if key in seen:
            raise ConfigError(f"targets {seen[key]} and {target.label} are the same database")
        seen[key] = target.label


def _run_instance(
    prepared: PreparedInstance, application_name: str, sessions: int
) -> tuple[RunInstance, InstanceInfo, list[str]]:
    """How the run reaches and watches one instance, and what it knows of it up front."""
    resolved = prepared.target
    backend = registry.run_backend_for(resolved, application_name, sessions)
    settings = backend.settings()
    local_data_dir, server_pid = local_server(resolved, settings)
    notes = []
    if resolved.engine == registry.POSTGRESQL and settings.get("track_io_timing") != "on":
        notes.append("track_io_timing=off")
    via_database = False
    if local_data_dir and os.environ.get(HOST_COUNTERS_ENV) != "database":
        devices = host_devices.devices_for_path(local_data_dir)
        host_info = host_snapshot.host_info(local_data_dir)
        host_key = f"local {' '.join(devices)}"
    else:
        devices, host_info, reason = _server_host(backend, settings)
        via_database = reason is None
        notes.append(reason or "host counters read through the database (pg_read_file)")
        server_pid = None  # not ours to watch or measure: DB CPU is null
        # Unknown hosts are taken as distinct: their counters (null or read) count per instance.
        host_key = f"{host_info.get('hostname')} {' '.join(devices)}" if devices else resolved.label
    instance = RunInstance(
        backend=backend,
        record=InstanceRecord(target=resolved.label),
        devices=devices,
        host_key=host_key,
        server_pid=server_pid,
        server_alive=None if server_pid is None else partial(host_counters.pid_alive, server_pid),
        on_server_death=resolved.server.kill_orphans if resolved.server else None,
        host_via_database=via_database,
        guard=prepared.lock.guard,
    )
    info = InstanceInfo(
        engine=prepared.description,
        settings=settings,
        host_info=host_info,
        profile=_profile(resolved),
        devices_local=bool(local_data_dir) or via_database,
        host_key=host_key,
    )
    return instance, info, notes


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
    run_dir.mkdir(parents=True, exist_ok=True)
    sessions = len(session_schemas(config))
    application_name = f"openslob-run {run_dir.name}"
    parts = [_run_instance(p, application_name, sessions) for p in prepared.instances]
    script_env = {"SLOB_RUN_DIR": str(run_dir), "SLOB_SESSIONS": str(sessions)}
    controller = RunController(
        config, [i for i, _, _ in parts], progress=progress, script_env=script_env
    )
    for _, _, notes in parts:
        controller.record.notes.extend(n for n in notes if n not in controller.record.notes)
    record = controller.run()
    infos = [info for _, info, _ in parts]
    for info, prep in zip(infos, prepared.instances, strict=True):
        info.profile = _profile(prep.target)
    run = build_run_json(record=record, config=config, instances=infos, label=label)
    if calibrate_dir is not None and run["status"] == "complete":
        run["calibration"] = calibration(calibrate_dir, sessions, run, notice)
    try:
        write_run(run_dir, run, record.timeseries, render_text(run))  # NotSaved: disk full
    finally:
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
    target: str | list[str] | tuple[str, ...] | None,
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
    if calibrate and len(target_strings(target, config)) > 1:  # before anything is touched
        raise ConfigError(
            "--calibrate compares one instance with fio on its file system; "
            "calibrate each instance with its own run"
        )
    prepared = prepare(
        config, target=target, data_dir=data_dir, notice=notice, setup_progress=setup_progress
    )
    try:
        fio_dir = calibration_dir(prepared.target, calibrate_dir) if calibrate else None
        if fio_dir is not None:
            require_fio()  # before the run, not after it
        run_dir = run_directory(results_parent, label)
        try:
            run = execute(
                prepared,
                config,
                run_dir,
                label=label,
                notice=notice,
                progress=progress,
                calibrate_dir=fio_dir,
            )
        except KeyboardInterrupt:
            # Ctrl-C before the run could take over the signal: nothing was measured, so no
            # run directory is left behind (one that has files is kept as it is).
            with contextlib.suppress(OSError):
                run_dir.rmdir()
            raise
    finally:
        prepared.release()
    return run_dir, run
