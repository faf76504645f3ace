"""Everything before a run: the targets' servers, capacity, the data set and its lock.

A sweep prepares once for all its points; `restore_layout` checks each point's tables again.
Engine knowledge comes through the plug-ins (engines/api.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openslob.config.resolve import Config
from openslob.engines import registry
from openslob.engines.api import DatasetLock, Engine, ProgressCallback, SetupResult, Target
from openslob.model.errors import BusyError, ConfigError, SetupError
from openslob.model.plan import instance_schemas, schema_order, session_schemas
from openslob.runner.targets import resolve_targets

# Connections besides the work sessions: snapshots, sampler, waits, setup checks, slack.
EXTRA_CONNECTIONS = 10
# Below this a bulk-load restart of the private server (two restarts and a checkpoint,
# ~2 s) gains nothing.
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
    """engine.setup; a large load into a private server runs inside its bulk_load (e.g.
    buffered I/O, after which the server is back in its test profile). The data set's lock
    is taken again after each restart."""
    if target.server is None or engine.bytes_to_load(config) < LOAD_RESTART_MIN_BYTES:
        return engine.setup(config, progress)
    with target.server.bulk_load(notice):
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
            f"no SLOB data set yet: creating {config.p.schemas} schemas x "
            f"{config.p.scale:,} rows ({size_mb:,.0f} MB) first"
        )
        setup_dataset(engine, target, config, notice, setup_progress, lock)
        return
    raise SetupError(unusable_tables_message(todo, config, engine.recorded_dataset()))


def parameter_differences(config: Config, recorded: Mapping[str, float] | None) -> list[str]:
    """Each data set parameter this run asks other than the data set was set up with, as
    "SCALE 4,000 (this run) vs 3,000 (the data set)" (fewer schemas, or a scan table a run
    that does not scan never reads, are no difference)."""
    if not recorded:
        return []
    found = []
    p = config.p
    asked_values = (
        ("SCHEMAS", p.schemas),
        ("SCALE", p.scale),
        ("SCAN_TABLE_SZ", p.scan_table_sz),
        ("SEED", p.seed),
    )
    for name, asked in asked_values:
        there = recorded.get(name)
        if there is None or asked == there:
            continue
        if name == "SCHEMAS" and asked < there:
            continue
        if name == "SCAN_TABLE_SZ" and not config.p.scan_pct:
            continue
        found.append(f"{name} {asked:,} (this run) vs {there:,} (the data set)")
    return found


def unusable_tables_message(
    todo: dict[str, str], config: Config, recorded: Mapping[str, float] | None = None
) -> str:
    """One line: which tables a run cannot use, why (the parameter and both values when
    the run asks other than the data set's), and what repairs them."""
    differences = parameter_differences(config, recorded)
    if differences:
        return (
            f"the data set does not match this run: {'; '.join(differences)}; leave those "
            "out to run on the data set as it is, or run `slob setup` with this run's "
            f"values (SCHEMAS={config.p.schemas}, SCALE={config.p.scale}, "
            f"SCAN_TABLE_SZ={config.p.scan_table_sz}, SEED={config.p.seed}) first"
        )
    shown = "; ".join(f"{name}: {why}" for name, why in list(todo.items())[:3])
    more = f"; {len(todo) - 3} more" if len(todo) > 3 else ""
    if all(why.startswith("bloated") for why in todo.values()):
        return (
            f"the data set is bloated ({shown}{more}): an earlier update run could not "
            "prune old row versions (see its report's warnings); run `slob setup` to reload it"
        )
    return (
        f"the data set does not match this run ({shown}{more}); run `slob setup` with "
        f"the same parameters (SCHEMAS, SCALE={config.p.scale}, "
        f"SCAN_TABLE_SZ={config.p.scan_table_sz}, SEED={config.p.seed}) first"
    )


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
    if len(items) <= 1:
        return [work(item) for item in items]
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
    schemas: list[set[str]] = [set() for _ in range(count)]
    for c in configs:
        for k, names in enumerate(instance_schemas(c, count)):
            schemas[k].update(names)
            if c.p.hot_schema_frequency:
                schemas[k].add("user1")
    sessions = max_sessions or max(len(session_schemas(c)) for c in configs)
    engines = [registry.plugin(t.engine).engine(t) for t in targets]
    if count > 1:
        _refuse_same_database(targets, engines)
    leaders = _share_data(engines, schemas)

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
            if k in leaders:
                ensure_data(engine, resolved, config, names, say, progress, lock)
                engine.install_procedures(names)  # a cluster's: on every node at once
            else:  # a node of a cluster its first node loaded and installed for
                engine.catch_up()
                ensure_data(engine, resolved, config, names, say, progress, lock)
            # Measured before the run (never in its window): a sample of each table's file.
            measured = engine.compressibility(config, names)
            description["dataset_compressibility"] = measured.as_dict()
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
        # The nodes of one cluster share its data set: loaded through the first, then seen
        # by the others.
        rest = [k for k in range(count) if k not in leaders]
        ready = dict(zip(leaders, parallel(tracked, leaders), strict=True))
        ready.update(zip(rest, parallel(tracked, rest), strict=True))
        return Prepared([ready[k] for k in range(count)])
    except BaseException:
        Prepared(done).release()
        raise


def _share_data(engines: list[Engine], schemas: list[set[str]]) -> list[int]:
    """The instances that load data and install the loop: one per data group
    (engine.data_group), for the schemas of every instance of its group (the others only
    check them, once they have applied what it did)."""
    if len(engines) == 1:
        return [0]
    leaders: dict[str | None, int] = {}
    found = []
    for k, group in enumerate(parallel(lambda e: e.data_group(), engines)):
        if group is None:
            found.append(k)
        elif group in leaders:
            schemas[leaders[group]].update(schemas[k])
        else:
            leaders[group] = k
            found.append(k)
    return found


def one_per_data_group(pairs: list[tuple[Engine, Target]]) -> list[tuple[Engine, Target]]:
    """`slob setup` over several targets: the nodes of one cluster load its data set once,
    through the first of them."""
    if len(pairs) == 1:
        return pairs
    groups = parallel(lambda pair: pair[0].data_group(), pairs)
    seen: set[str] = set()
    kept = []
    for pair, group in zip(pairs, groups, strict=True):
        if group is None or group not in seen:
            kept.append(pair)
        if group is not None:
            seen.add(group)
    return kept


def restore_layout(prepared: Prepared, config: Config, notice: Notice) -> list[str]:
    """Before a sweep point: every table the point uses must still be valid, and is reloaded
    when it is not (a point with updates whose horizon was held leaves its tables bloated,
    and the next point would measure them). Returns what was reloaded and why."""
    count = len(prepared.instances)
    reloaded = []
    for names, instance in zip(instance_schemas(config, count), prepared.instances, strict=True):
        wanted = sorted({*names, *(["user1"] if config.p.hot_schema_frequency else [])})
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
    holder = registry.plugin(target.engine).engine(target).lock_holder()
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
