"""The data set a command works on when SCHEMAS, SCALE, SCAN_TABLE_SZ or SEED are not given.

Contract: a parameter given as a flag or in slob.conf is used as given. One left at its
built-in default is taken from the data set the targets hold, as setup recorded it
(Engine.recorded_dataset), with source "dataset" in the Config (run.json config_sources),
and one line says so. With no data set there the default stays (`slob run` then creates the
default data set). Several targets (the instances of a run, a sweep's private servers) must
agree on every parameter taken, else ConfigError naming it; a target with no data set has
no say. Only bookkeeping is read: nothing in a database changes, so `run`, `verify` and
`sweep` call this before prepare(). A given value that does not match the data set is left
to prepare() and verify, which say so as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from openslob.config.options import OPTIONS_BY_NAME
from openslob.config.resolve import Config
from openslob.engines import registry
from openslob.model.errors import ConfigError
from openslob.runner.sweep import SweepPlan, server_key
from openslob.runner.targets import target_strings

DATASET_PARAMS = ("SCHEMAS", "SCALE", "SCAN_TABLE_SZ", "SEED", "COMPRESS_RATIO")

Targets = str | list[str] | tuple[str, ...] | None


@dataclass(frozen=True)
class Found:
    """One target's data set as its bookkeeping records it (values None: none there)."""

    label: str
    values: dict[str, float] | None
    schema_bytes: int | None  # one schema's cf1 (SCALE rows) on that target


def not_given(config: Config) -> list[str]:
    """The data set's parameters this config leaves at their defaults."""
    return [name for name in DATASET_PARAMS if not config.given(name)]


def read(names: list[str], config: Config, data_dir: Path | None, *, keep: bool) -> list[Found]:
    """Each target's recorded data set. A private server is started to read it; with
    `keep` False one that was not running is stopped again (a sweep's later servers must
    not idle beside the points that run first)."""
    found = []
    for name in names:
        target = registry.resolve(name, data_dir, config, start=False)
        server = target.server
        was_running = server is None or server.status().state == "running"
        if server is not None:
            server.start()  # what resolve(start=True) does: idempotent, recovers a crash
        try:
            engine = registry.plugin(target.engine).engine(target)
            values = engine.recorded_dataset()
            size = engine.data_bytes(int(values["SCALE"])) if values else None
            found.append(Found(target.label, values, size))
        finally:
            if server is not None and not keep and not was_running:
                server.stop()
    return found


def _once(target: str, config: Config, seen: set[tuple[str, str]]) -> bool:
    key = (target, registry.plugin_for_target(target).server_key(config))
    if key in seen:
        return False
    seen.add(key)
    return True


def agreed(found: Sequence[Found], names: Sequence[str]) -> dict[str, float] | None:
    """The values of `names` every data set found agrees on (None: no data set at all)."""
    present = [f for f in found if f.values is not None]
    if not present:
        return None
    first = present[0]
    assert first.values is not None
    for other in present[1:]:
        assert other.values is not None
        for name in names:
            if other.values[name] != first.values[name]:
                flag = OPTIONS_BY_NAME[name].flag
                raise ConfigError(
                    f"{name} is not given and the data sets differ: {first.values[name]} on "
                    f"{first.label}, {other.values[name]} on {other.label}; give {flag} "
                    "(and `slob setup` the targets alike)"
                )
    return {name: first.values[name] for name in names}


def take(config: Config, values: dict[str, float] | None) -> Config:
    """The config with the data set's values for the parameters it was not given."""
    taken = {name: v for name, v in (values or {}).items() if not config.given(name)}
    return config.with_values(taken, "dataset") if taken else config


def _dataset_values(config: Config) -> dict[str, float]:
    """The DATASET_PARAMS' values of this config, by name."""
    p = config.p
    return {
        "SCHEMAS": p.schemas,
        "SCALE": p.scale,
        "SCAN_TABLE_SZ": p.scan_table_sz,
        "SEED": p.seed,
        "COMPRESS_RATIO": p.compress_ratio,
    }


def summary(config: Config, found: Sequence[Found]) -> str | None:
    """The one line saying which values came from the data set, and from where."""
    taken = [name for name in DATASET_PARAMS if config.sources.get(name) == "dataset"]
    if not taken:
        return None
    present = [f for f in found if f.values is not None]
    parts = []
    values = _dataset_values(config)
    for name in taken:
        if name == "COMPRESS_RATIO" and values[name] == 1.0:
            continue  # the default: incompressible
        text = f"{name}={values[name]}"
        if name in ("SCALE", "SCAN_TABLE_SZ"):
            text += " rows"
        if name == "SCALE" and present[0].schema_bytes:
            text += f" ({present[0].schema_bytes / 2**20:,.4g} MiB per schema)"
        parts.append(text)
    where = present[0].label if len(present) == 1 else ", ".join(f.label for f in present)
    return f"data set as set up on {where}: {', '.join(parts)}"


def for_config(
    config: Config, targets: Targets, data_dir: Path | None
) -> tuple[Config, str | None]:
    """`slob run` / `slob verify`: the config with the data set's parameters it was not
    given, and the line to print (None: nothing was taken)."""
    names = not_given(config)
    if not names:
        return config, None  # nothing to read: no connection, no server started
    found = read(target_strings(targets, config), config, data_dir, keep=True)
    filled = take(config, agreed(found, names))
    return filled, summary(filled, found)


def for_doctor(
    config: Config, targets: Targets, data_dir: Path | None
) -> tuple[Config, str | None]:
    """`slob doctor`: as for_config, but a server it cannot reach or bookkeeping its role
    may not read leave the defaults (a driver's error, as an engine recognises it):
    diagnosing those is what doctor is for, so it must still run and say so."""
    try:
        return for_config(config, targets, data_dir)
    except Exception as exc:
        if registry.describe_error(exc) is None:
            raise  # not the database's answer: a defect, not something to diagnose
        return config, None


def for_plan(plan: SweepPlan, targets: Targets, data_dir: Path | None) -> str | None:
    """`slob sweep` and a repeated run: every point, and the plan's base (sweep.json, what a
    rerun resumes by), with the data set's parameters the points were not given; the line
    to print. Each private server the points run on is read (a page size's server has its
    own data set); they must agree."""
    names = sorted({n for p in plan.points for n in not_given(p.config)}, key=DATASET_PARAMS.index)
    if not names:
        return None
    groups: dict[str, Config] = {}  # server key -> the first point's config, in run order
    for point, _ in plan.runs():
        groups.setdefault(server_key(targets, point), point.config)
    found: list[Found] = []
    seen: set[tuple[str, str]] = set()  # an instance sweep's groups share their instances
    for k, config in enumerate(groups.values()):
        fresh = [t for t in target_strings(targets, config) if _once(t, config, seen)]
        found += read(fresh, config, data_dir, keep=k == 0)
    values = agreed(found, names)
    for point in plan.points:
        point.config = take(point.config, values)
    for name in names:
        if name in plan.base and values is not None:
            plan.base[name] = values[name]
    return summary(plan.points[0].config, found)
