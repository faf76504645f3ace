"""`slob run` as a library call: prepare the targets, run once, write the run directory.

The run directory gets run.json and timeseries.csv; whatever else a caller wants there (the
text report) it renders itself and hands in (`Observers.render`): orchestration renders
nothing. Who hears about the run as it goes is one Observers object (runner/observers.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from openslob.config.resolve import Config
from openslob.engines import registry
from openslob.engines.api import EnginePlugin, RunBackend, Target
from openslob.host import counters as host_counters
from openslob.host import devices as host_devices
from openslob.host import ebpf, priority
from openslob.host import snapshot as host_snapshot
from openslob.model.errors import ConfigError
from openslob.model.plan import session_schemas
from openslob.model.states import RunStatus
from openslob.results.build import InstanceInfo, build_run_json
from openslob.results.external import add_layers
from openslob.results.histlog import HlogWriter, PercentileCsv
from openslob.results.layers import latency_layers
from openslob.results.record import InstanceRecord, RunRecord
from openslob.results.rundir import RUN_FILE, run_directory, write_atomic, write_run
from openslob.results.stream import TIMESERIES_FILE, TimeseriesWriter, interval_table
from openslob.runner.calibrate import (
    DEFAULT_BLOCK_BYTES,
    CalibrationError,
    compare,
    require_fio,
    run_fio,
)
from openslob.runner.controller import RunController
from openslob.runner.loopconf import external_script
from openslob.runner.observers import Observers
from openslob.runner.prepare import Notice, Prepared, PreparedInstance, prepare
from openslob.runner.record import RunInstance
from openslob.runner.sampler import CHECKPOINT_EVERY_S, Sink
from openslob.runner.steadysink import SteadySink
from openslob.runner.targets import target_strings

# "database": read host counters through the connection even when the data directory is
# visible here (a server in a container; the tests of that path).
HOST_COUNTERS_ENV = "SLOB_HOST_COUNTERS"
# Seconds between checkpoints (default CHECKPOINT_EVERY_S); tests make it short.
CHECKPOINT_ENV = "SLOB_CHECKPOINT_S"
_NO_HOST = ("hostname", "cpus", "cpu_model", "memory_bytes", "kernel", "os")


def _server_host(
    plugin: EnginePlugin, backend: RunBackend, settings: dict[str, str]
) -> tuple[list[str], dict[str, Any], str | None]:
    """Devices and host description of a server on another host, read through the database;
    nulls and the reason when the role (or the engine) may not read its files."""
    reason = backend.host_files_reason()
    if reason is not None:
        return [], {**dict.fromkeys(_NO_HOST), "devices": []}, reason
    monitor = backend.monitor("host")
    try:
        read = monitor.read_file
        devices = host_devices.devices_from_texts(
            plugin.data_directory(settings) or "",
            read("/proc/self/mountinfo") or "",
            read("/proc/diskstats") or "",
        )
        how = plugin.capabilities.terms.get("host_files", "the database's file reader")
        return devices, host_snapshot.read_host_info(read, devices, how), None
    finally:
        monitor.close()


def local_server(
    plugin: EnginePlugin, target: Target, settings: dict[str, str]
) -> tuple[str | None, int | None]:
    """(data directory, server pid) when the server runs on this host, else (None, None)."""
    if target.server is not None:
        return str(target.server.files_dir), target.server.status().pid
    data_dir, pid_file = plugin.data_directory(settings), plugin.pid_file(settings)
    if not data_dir or not pid_file:
        return None, None
    try:
        pid = int(Path(data_dir, pid_file).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None, None
    return (data_dir, pid) if host_counters.pid_alive(pid) else (None, None)


def _run_instance(
    prepared: PreparedInstance, application_name: str, sessions: int, prefetch: bool = False
) -> tuple[RunInstance, InstanceInfo, list[str]]:
    """How the run reaches and watches one instance, and what it knows of it up front."""
    resolved = prepared.target
    plugin = registry.plugin(resolved.engine)
    backend = plugin.run_backend(resolved, application_name, sessions, prefetch=prefetch)
    settings = backend.settings()
    local_data_dir, server_pid = local_server(plugin, resolved, settings)
    notes = []
    via_database = False
    if local_data_dir and os.environ.get(HOST_COUNTERS_ENV) != "database":
        devices = host_devices.devices_for_path(local_data_dir)
        host_info = host_snapshot.host_info(local_data_dir)
        host_key = f"local {' '.join(devices)}"
    else:
        devices, host_info, reason = _server_host(plugin, backend, settings)
        via_database = reason is None
        notes.append(reason or "host counters read through the database")
        server_pid = None  # not ours to watch or measure: DB CPU is null
        # Unknown hosts are taken as distinct: their counters (null or read) count per instance.
        host_key = f"{host_info.get('hostname')} {' '.join(devices)}" if devices else resolved.label
    instance = RunInstance(
        backend=backend,
        record=InstanceRecord(target=resolved.label),
        window=plugin.window(),
        settings=settings,
        engine_metrics=tuple(m.key for m in plugin.metrics if m.live),
        devices=devices,
        host_key=host_key,
        server_pid=server_pid,
        server_alive=None if server_pid is None else partial(host_counters.pid_alive, server_pid),
        on_server_death=resolved.server.kill_orphans if resolved.server else None,
        host_via_database=via_database,
        guard=prepared.lock.guard,
        wait_sampling=plugin.capabilities.wait_sampling,
        streams_intervals=plugin.capabilities.streams_intervals,
        batches_intervals=plugin.capabilities.batches_intervals,
        rows_per_mb=plugin.rows_per_mb(settings),
    )
    info = InstanceInfo(
        engine={**prepared.description, **plugin.run_description(settings)},
        settings=settings,
        host_info=host_info,
        profile=_profile(resolved),
        devices_local=bool(local_data_dir) or via_database,
        host_key=host_key,
        engine_view=plugin,
    )
    return instance, info, notes


def _check_hotspot(config: Config, instances: list[RunInstance]) -> None:
    """ConfigError when the hot region, in the keys of an engine whose pages hold more rows
    per MB than SLOB's 8 KiB blocks (config/resolve.py checks it in those), passes SCALE."""
    if not config.p.do_hotspot:
        return
    end_mb = config.p.hotspot_offset_mb + config.p.hotspot_mb
    for instance in instances:
        if end_mb * instance.rows_per_mb > config.p.scale:
            for each in instances:
                each.backend.shutdown()
            raise ConfigError(
                f"HOTSPOT_OFFSET_MB={config.p.hotspot_offset_mb} + HOTSPOT_MB="
                f"{config.p.hotspot_mb} ends at {end_mb} MB, beyond the table on "
                f"{instance.record.target} (SCALE={config.p.scale} rows = "
                f"{config.p.scale / instance.rows_per_mb:,.1f} MB at its "
                f"{instance.rows_per_mb} rows per MB)"
            )


def execute(
    prepared: Prepared,
    config: Config,
    run_dir: Path,
    *,
    label: str | None = None,
    calibrate_dir: Path | None = None,
    observers: Observers | None = None,
) -> dict[str, Any]:
    """One run into `run_dir` (created if needed); returns the run.json dict it wrote
    (`observers.render`: the text report, written beside it as report.txt;
    `observers.sinks`: more receivers of each closed interval's row, e.g. progress lines
    and metrics exporters).

    With `calibrate_dir`, fio then reads that file system with the run's concurrency and
    duration, and run.json carries both sides (see calibrate.py).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    sessions = len(session_schemas(config))
    application_name = f"openslob-run {run_dir.name}"
    parts = [
        _run_instance(p, application_name, sessions, config.p.prefetch) for p in prepared.instances
    ]
    _check_hotspot(config, [instance for instance, _, _ in parts])
    script_env = {"SLOB_RUN_DIR": str(run_dir), "SLOB_SESSIONS": str(sessions)}
    infos = [info for _, info, _ in parts]
    files: list[TimeseriesWriter | HlogWriter | PercentileCsv] = [
        TimeseriesWriter(run_dir / TIMESERIES_FILE),
        HlogWriter(run_dir),
        PercentileCsv(run_dir),
    ]
    checkpoint = Checkpoint(run_dir, config, infos, label)
    observers = observers or Observers()
    notice, sinks = observers.notice, observers.sinks
    steady = SteadySink.of(config)  # first: the sinks after it see its columns
    # before the warm-up, so the window's first interval has a reading to count from
    tracer, untraced = ebpf.start_tracing(
        [(i.server_pid, i.devices) for i, _, _ in parts], asked=config.p.trace_layers
    )
    layers = ebpf.LayerSeries(tracer) if tracer is not None else None
    controller = RunController(
        config,
        [i for i, _, _ in parts],
        dataclasses.replace(
            observers, sinks=(*([steady] if steady else []), *files, *sinks), checkpoint=checkpoint
        ),
        script_env=script_env,
        layers=layers,
    )
    if steady is not None:
        steady.end_window = controller.stopping.end_window_early
    for _, _, notes in parts:
        controller.record.notes.extend(n for n in notes if n not in controller.record.notes)
    begin_sinks(sinks, run_dir, [info.engine for _, info, _ in parts])
    try:
        needed = any(
            registry.plugin(info.engine.get("name")).capabilities.session_processes
            for info in infos
        )
        with priority.raised(config.p.client_priority, needed) as client_priority:
            record = controller.run()
    finally:
        checkpoint.closed = True  # a late checkpoint must not replace the final run.json
        for file in files:
            file.close()
        skipped = tracer.skipped() if tracer is not None else None
        if tracer is not None:
            controller.record.notes.append(tracer.note())
            tracer.stop()
    for info, prep in zip(infos, prepared.instances, strict=True):
        info.profile = _profile(prep.target)
    run = build_run_json(record=record, config=config, instances=infos, label=label)
    run["intervals"] = interval_table(run_dir / TIMESERIES_FILE)
    run["steady_state"] = steady.block() if steady is not None else None
    run["latency_layers"], disagree = latency_layers(
        run, layers.window if layers is not None else None, untraced, skipped
    )
    run["warnings"].extend(disagree)
    run["client"] = client = client_writes(
        sum(f.bytes_written for f in files) + checkpoint.bytes_written, run
    )
    client["priority"] = client_priority.to_json()
    client.update(client_cpu(record, run["window"].get("seconds")))
    run["notes"].append(client_priority.note())
    if client["cpu_pct"] is not None:
        run["notes"].append(
            f"the client used {client['cpu_pct']:.3g} % of one CPU in the window "
            f"({client['cpu_s']:.3g} s: its CALLs, results, monitors and files)"
            + _monitors_note(client)
        )
    lost = [name for file in files for name in file.lost]
    if lost:
        run["warnings"].append(
            f"not all of the time series was saved (the results disk failed): {', '.join(lost)}"
        )
    share = client["pct_of_device_writes"]
    run["notes"].append(
        f"the client wrote {client['bytes_written'] / 1024:,.0f} KiB of results as the run went "
        "(time series, histogram logs, checkpoints; page cache, no fsync)"
        + ("" if share is None else f": {share:.3g} % of the device's writes in the window")
    )
    add_layers(run, config.p.external_series)
    if calibrate_dir is not None and run["status"] == RunStatus.COMPLETE:
        run["calibration"] = calibration(calibrate_dir, sessions, run, notice)
    try:
        report = observers.render(run) if observers.render is not None else None
        write_run(run_dir, run, report or "", cut_short=lost)  # NotSaved: disk full
    finally:
        error = external_script(config.p.external_script, "end", script_env)
        if error:
            notice(error)
    return run


def checkpoint_every_s() -> float:
    """Seconds between checkpoints: SLOB_CHECKPOINT_S, else CHECKPOINT_EVERY_S."""
    text = os.environ.get(CHECKPOINT_ENV)
    if not text:
        return CHECKPOINT_EVERY_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise ConfigError(f"{CHECKPOINT_ENV}={text}: seconds, a number > 0")
    return seconds


class Checkpoint:
    """The window so far as a provisional run.json (status "interrupted"): a client killed
    after hours leaves valid results of every interval up to its last checkpoint (every
    CHECKPOINT_EVERY_S, or later when one costs more: sampler.checkpoint_gap_s;
    timeseries.csv has every interval). Written compact and without
    fsync: our own I/O in the window stays page-cache writes, ~100 KB per checkpoint."""

    def __init__(
        self, run_dir: Path, config: Config, infos: list[InstanceInfo], label: str | None
    ) -> None:
        self.run_dir, self.config, self.infos, self.label = run_dir, config, infos, label
        self.every_s = checkpoint_every_s()
        # the sampler spaces checkpoints further when one costs more than
        # sampler.CHECKPOINT_CPU_SHARE of a CPU, unless the spacing was asked for
        self.adapts = not os.environ.get(CHECKPOINT_ENV)
        self.closed = False
        self.bytes_written = 0

    def __call__(self, record: RunRecord) -> None:
        if self.closed:
            return
        run = build_run_json(
            record=record, config=self.config, instances=self.infos, label=self.label
        )
        run["intervals"] = None  # the final run.json's; timeseries.csv has them all
        # compact (~1/3 the bytes), by orjson: json.dumps took 4 of a checkpoint's ~11 ms of
        # client CPU at 256 sessions, orjson 0.6 (the same text, 250 KB)
        text = orjson.dumps(run, default=str, option=orjson.OPT_NON_STR_KEYS)
        try:
            write_atomic(self.run_dir / RUN_FILE, text, sync=False)
        except OSError:
            return  # a full disk ends no run: the final run.json is tried, and named if lost
        self.bytes_written += len(text)


def client_writes(written: int, run: dict[str, Any]) -> dict[str, Any]:
    """What the client itself wrote during the run (results as they go), beside what the
    devices wrote in the window: our own I/O, which a reader may want to take out."""
    seconds = (run.get("window") or {}).get("seconds")
    device_mb_s = (run.get("metrics") or {}).get("device_write_mb_per_s")
    # device MB/s are MiB/s (host/counters.py)
    device_bytes = device_mb_s * 2**20 * seconds if device_mb_s and seconds else None
    share = round(100 * written / device_bytes, 4) if device_bytes else None
    return {"bytes_written": written, "pct_of_device_writes": share}


def client_cpu(record: RunRecord, seconds: float | None) -> dict[str, Any]:
    """What measuring cost over the window (the window's host snapshots read it): the
    client's own CPU, in seconds and in % of one CPU; its monitor connections' CPU in a
    local server (Monitor.server_task), and how many were counted; both as a share of the
    host's CPU time."""
    first = record.instances[0] if record.instances else None
    before = first.host_before.client_cpu_seconds if first and first.host_before else None
    after = first.host_after.client_cpu_seconds if first and first.host_after else None
    spent = None if before is None or after is None or after < before else round(after - before, 3)
    monitors, counted, cpus = None, 0, None
    for inst in record.instances:
        if inst.host_before and inst.host_after:
            cpu_s, n = host_snapshot.tasks_cpu_delta(
                inst.host_before.monitors_cpu_seconds, inst.host_after.monitors_cpu_seconds
            )
            if cpu_s is not None:  # a local server: its host is the client's
                monitors, counted = (monitors or 0.0) + cpu_s, counted + n
                cpus = inst.host_after.proc_stat.cpus
    share = None
    if spent is not None and monitors is not None and seconds and cpus:
        share = round(100 * (spent + monitors) / (seconds * cpus), 3)
    return {
        "cpu_s": spent,
        "cpu_pct": round(100 * spent / seconds, 3) if spent is not None and seconds else None,
        "monitors_server_cpu_s": None if monitors is None else round(monitors, 3),
        "monitors_counted": counted,
        "measuring_pct_of_host": share,
    }


def _monitors_note(client: dict[str, Any]) -> str:
    if client["monitors_server_cpu_s"] is None:
        return "; its monitors' CPU in the server: n/a (a server on another host, or unknown)"
    share = client["measuring_pct_of_host"]
    return (
        f"; its {client['monitors_counted']} monitor connections used "
        f"{client['monitors_server_cpu_s']:.3g} s of the server's CPU: measuring took "
        + ("n/a" if share is None else f"{share:.3g}")
        + " % of the host's CPU time"
    )


def begin_sinks(sinks: Sequence[Sink], run_dir: Path, engines: list[dict[str, Any]]) -> None:
    """Tell the sinks that have a `begin` (the metrics exporter) which run this is: its
    directory's name, its engine(s) and their terms (a multi-instance run may mix versions)."""

    def distinct(key: str) -> str:
        return ",".join(dict.fromkeys(str(e.get(key) or "") for e in engines))

    run = {
        "run": run_dir.name,
        "engine": distinct("name"),
        "engine_version": distinct("version"),
        "terms": dict(registry.plugin(engines[0].get("name")).capabilities.terms),
        "targets": [str(e.get("target") or "") for e in engines],  # the instances, in order
    }
    for sink in sinks:
        begin = getattr(sink, "begin", None)
        if begin is not None:
            begin(run)


def calibration(
    directory: Path, sessions: int, run: dict[str, Any], notice: Notice
) -> dict[str, Any]:
    """fio at the run's concurrency and duration, and how the database compares."""
    seconds = run["window"]["seconds"] or 1.0
    # one read of the database's own page size (measured: the engine's page_size_bytes)
    block = (run.get("engine") or {}).get("page_size_bytes") or DEFAULT_BLOCK_BYTES
    notice(
        f"calibrating: fio {block // 1024} KiB random reads, {sessions} jobs, "
        f"{seconds:.0f} s in {directory}"
    )
    try:
        fio = run_fio(directory, sessions, seconds, block_bytes=block).as_dict()
    except CalibrationError as exc:
        notice(str(exc))
        return {"fio": None, "error": str(exc)}
    return {"fio": fio, **compare(run["metrics"], fio)}


def calibration_dir(target: Target, explicit: Path | None) -> Path:
    """Where fio reads: the private server's data directory, or a directory the user names."""
    if explicit is not None:
        return explicit
    if target.server is not None:
        return target.server.instance_dir / "calibrate"
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
    calibrate: bool = False,
    calibrate_dir: Path | None = None,
    observers: Observers | None = None,
) -> tuple[Path, dict[str, Any]]:
    """`slob run`: prepare the target, run once into a new timestamped directory."""
    observers = observers or Observers()
    checkpoint_every_s()  # a bad SLOB_CHECKPOINT_S fails here, before anything is touched
    if calibrate and len(target_strings(target, config)) > 1:  # before anything is touched
        raise ConfigError(
            "--calibrate compares one instance with fio on its file system; "
            "calibrate each instance with its own run"
        )
    prepared = prepare(
        config,
        target=target,
        data_dir=data_dir,
        notice=observers.notice,
        setup_progress=observers.setup_progress,
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
                calibrate_dir=fio_dir,
                observers=observers,
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
