"""The harness: a matrix of runs, resumable, as flashdba's loops did by hand.

Any run parameter may be given as a comma list (`--update-pct 0,10,20,30 --sessions 1,2,4,8
--work-unit 16,64`). Points run for each UPDATE_PCT in the order given, then the other lists,
with SESSIONS innermost and ascending (flashdba's order: each petal grows point by point), and
RATE innermost of all (percentages of a measured maximum: ratesweep.py). The number of
instances (INSTANCES, SQLNET_SERVICE_MAX) is outermost after PAGE_SIZE: each value is its
own set of instances, prepared once, and its runs (repeats too) are consecutive.
Every point's full configuration is resolved and validated before the first run starts.

The sweep directory (collect.py has the contract) is named after the label, not the time, so
rerunning the same command finds it: complete points are skipped, interrupted or failed ones
are run again, and a different plan in the same directory is refused.

REPEAT > 1 runs every point that many times, each repeat a run directory of its own, in
rounds: every point once, then every point again (A B C A B C, not A A A B B B), so that a
drift of the machine over the sweep (a filling SSD, a neighbour's load) spreads over all
points instead of looking like a difference between them. Rounds are interleaved within one
private server's points (a page size): switching servers at every run would restart them. A
sweep may be rerun with a larger REPEAT: the new rounds are added and run after the old ones.
A repeated `slob run` is a plan of one point without axes (`plan_sweep(..., single=True)`).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openslob.config.option import parse_value
from openslob.config.options import OPTIONS_BY_NAME
from openslob.config.resolve import Config, resolve
from openslob.engines import registry
from openslob.model.errors import ConfigError, OpenslobError, Terminated
from openslob.model.plan import session_schemas
from openslob.model.states import PointStatus, RunStatus
from openslob.results.collect import SWEEP_FILE
from openslob.results.rundir import load_run, path_name, write_atomic
from openslob.runner import ratesweep
from openslob.runner.execute import execute
from openslob.runner.observers import Observers
from openslob.runner.prepare import Notice, Prepared, prepare, restore_layout
from openslob.runner.targets import target_strings

SCHEMA_VERSION = 1
# Options whose values may legitimately contain commas are never split into lists.
_NOT_LISTABLE = {"str", "path"}
_OUTER = "UPDATE_PCT"
_SERVER_AXIS = "PAGE_SIZE"  # a private server per value: switching back and forth costs
# Each value runs on its own set of instances (prepared once, runner.sweep.run_sweep): the
# points of one value are consecutive, like a page size's.
_INSTANCE_AXES = ("INSTANCES", "SQLNET_SERVICE_MAX")
_SERVER_AXES = (_SERVER_AXIS, *_INSTANCE_AXES)
_INNER = "SESSIONS"


@dataclass
class Point:
    name: str
    params: dict[str, Any]  # the varied parameters, parsed
    config: Config


@dataclass
class SweepPlan:
    axes: dict[str, list[Any]]
    base: dict[str, Any]
    points: list[Point] = field(default_factory=list)
    repeat: int = 1

    def as_json_plan(self) -> dict[str, Any]:
        return {"axes": self.axes, "base": self.base}

    def runs(self) -> list[tuple[Point, int]]:
        """(point, repeat) in the order they run: rounds over the points of each private
        server or set of instances (a PAGE_SIZE or INSTANCES value: its points are
        consecutive, the axis is outermost)."""
        blocks: list[list[Point]] = []
        for point in self.points:
            server = _server_values(point)
            if blocks and _server_values(blocks[-1][0]) == server:
                blocks[-1].append(point)
            else:
                blocks.append([point])
        return [
            (point, repeat)
            for block in blocks
            for repeat in range(1, self.repeat + 1)
            for point in block
        ]


def _server_values(point: Point) -> tuple[Any, ...]:
    return tuple(point.params.get(name) for name in _SERVER_AXES)


def run_name(point: str, repeat: int) -> str:
    """The run directory of one repeat: the point's name (a sweep of REPEAT=1 is named as
    before repeats existed), `_repeat-K` from the second on; repeat-K for a repeated run."""
    if not point:
        return f"repeat-{repeat}"
    return point if repeat == 1 else f"{point}_repeat-{repeat}"


def split_axes(
    flags: Mapping[str, str | None],
) -> tuple[dict[str, str | None], dict[str, list[str]]]:
    """Separate single-valued flags from comma lists (the sweep's axes)."""
    single: dict[str, str | None] = {}
    axes: dict[str, list[str]] = {}
    for name, raw in flags.items():
        option = OPTIONS_BY_NAME.get(name)
        if raw is not None and "," in raw and option is not None:
            if option.kind in _NOT_LISTABLE:
                single[name] = raw
                continue
            if not option.listable:
                raise ConfigError(f"{name}={raw}: takes one value, not a list")
            values = [v.strip() for v in raw.split(",")]
            if any(not v for v in values):
                raise ConfigError(f"{name}={raw}: empty value in the list")
            axes[name] = values
        else:
            single[name] = raw
    return single, axes


def _ordered_axes(parsed: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """PAGE_SIZE (one server and data set each) outermost, then the number of instances
    (one set of instances each), then UPDATE_PCT; SESSIONS innermost ascending; the rest in
    the order given."""
    ordered: dict[str, list[Any]] = {}
    for name in _SERVER_AXES:
        if name in parsed:
            ordered[name] = parsed[name]
    if _OUTER in parsed:
        ordered[_OUTER] = parsed[_OUTER]
    for name, values in parsed.items():
        if name not in (*_SERVER_AXES, _OUTER, _INNER, ratesweep.AXIS):
            ordered[name] = values
    if _INNER in parsed:
        ordered[_INNER] = sorted(parsed[_INNER])
    if ratesweep.AXIS in parsed:  # innermost: each latency-at-load curve point by point
        ordered[ratesweep.AXIS] = parsed[ratesweep.AXIS]
    return ordered


def point_name(params: Mapping[str, Any]) -> str:
    """update_pct-0_sessions-1: stable, shell-friendly, sorted as the plan runs."""
    return "_".join(f"{name.lower()}-{_text(value)}" for name, value in params.items())


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).lower()


def plan_sweep(
    flags: Mapping[str, str | None], conf: Path | None, cwd: Path, *, single: bool = False
) -> SweepPlan:
    """Resolve and validate every point before anything runs (`single`: one point, no
    axes: a repeated `slob run`)."""
    fixed, raw_axes = split_axes(flags) if not single else (dict(flags), {})
    percents = ratesweep.percent_axis(fixed, raw_axes)  # RATE as % of a measured maximum
    if not raw_axes and not percents and not single:
        raise ConfigError(
            "a sweep needs at least one list, e.g. --sessions 1,2,4,8 --update-pct 0,10,20,30"
        )
    parsed: dict[str, list[Any]] = {}
    for name, values in raw_axes.items():
        items = [parse_value(OPTIONS_BY_NAME[name], v) for v in values]
        if len(set(map(repr, items))) != len(items):
            raise ConfigError(f"{name}={','.join(values)}: a value is listed twice")
        parsed[name] = items
    if percents:  # resolved with RATE=0 until their maximum is measured (ratesweep.py)
        parsed[ratesweep.AXIS] = percents
        raw_axes[ratesweep.AXIS] = [ratesweep.placeholder(v) for v in percents]
    axes = _ordered_axes(parsed)
    base_config = resolve(fixed, conf, cwd=cwd)
    plan = SweepPlan(
        axes=axes,
        base={k: v for k, v in base_config.as_dict().items() if k not in axes},
        repeat=base_config.p.repeat,
    )
    for combo in _combinations(list(axes.items())):
        point_flags = dict(fixed)
        point_flags.update(
            {name: raw_axes[name][parsed[name].index(v)] for name, v in combo.items()}
        )
        plan.points.append(Point(point_name(combo), combo, resolve(point_flags, conf, cwd=cwd)))
    return plan


def _combinations(axes: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    if not axes:
        return [{}]
    (name, values), rest = axes[0], axes[1:]
    return [{name: v, **tail} for v in values for tail in _combinations(rest)]


# ------------------------------------------------------------------------ the directory


def sweep_directory(results_dir: Path, label: str | None) -> Path:
    return results_dir / f"sweep-{path_name(label, 'default')}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _entry(point: Point, repeat: int) -> dict[str, Any]:
    name = run_name(point.name, repeat)
    return {
        "name": name,
        "point": point.name,
        "repeat": repeat,
        "params": point.params,
        "status": PointStatus.PENDING,
        "run_dir": name,
        "started": None,
        "finished": None,
        "error": None,
    }


def load_or_create(
    path: Path, plan: SweepPlan, label: str | None, notice: Notice = lambda _msg: None
) -> dict[str, Any]:
    """The sweep.json to work from: the existing one when the plan matches (with the runs a
    larger REPEAT adds), else a new one. A damaged one is refused, naming it; a "complete"
    run whose run.json is missing or damaged is run again."""
    file = path / SWEEP_FILE
    fresh = [_entry(point, repeat) for point, repeat in plan.runs()]
    if file.exists():
        existing = _read_sweep(file, plan)
        _rerun_lost(path, existing, notice)
        if _comparable(existing) != _comparable({"axes": plan.axes, "base": plan.base}):
            raise ConfigError(
                f"{path} holds a sweep with a different plan; use another --label "
                "(or --sweep-dir) for this one"
            )
        _merge_repeats(existing, fresh, plan)
        save(path, existing)
        return existing
    path.mkdir(parents=True, exist_ok=True)
    sweep = {
        "schema_version": SCHEMA_VERSION,
        "kind": "sweep",
        "label": label,
        "created": _now(),
        "axes": plan.axes,
        "base": plan.base,
        "repeat": plan.repeat,
        "points": fresh,
    }
    save(path, sweep)
    return sweep


def _read_sweep(file: Path, plan: SweepPlan) -> dict[str, Any]:
    """sweep.json as this plan can resume it; OpenslobError naming the file and what is
    wrong (never a run directory outside the sweep's: it is replaced when rerun)."""
    problem: str | None
    try:
        sweep = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problem = f"not readable ({exc})"
    else:
        problem = _sweep_problem(sweep, {p.name for p in plan.points})
    if problem:
        raise OpenslobError(
            f"{file}: a damaged sweep.json ({problem}); move it away to start this sweep "
            "again, or use another --label"
        )
    return sweep


def _sweep_problem(sweep: Any, points: set[str]) -> str | None:
    if not isinstance(sweep, dict) or not isinstance(sweep.get("points"), list):
        return "no list of points"
    if not isinstance(sweep.get("base", {}), dict):
        return "base is not an object"
    for entry in sweep["points"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            return "a point without a name"
        name, point = entry["name"], entry.get("point", entry["name"])
        repeat = entry.get("repeat", 1)
        if point not in points or not isinstance(repeat, int) or isinstance(repeat, bool):
            return f"point {name!r} is not one of this plan's"
        if not isinstance(entry.get("status"), str):
            return f"point {name!r} has status {entry.get('status')!r}"
        if entry.get("run_dir") != run_name(point, repeat) or name != entry["run_dir"]:
            return f"point {name!r} has run_dir {entry.get('run_dir')!r}"
    return None


def _rerun_lost(path: Path, sweep: dict[str, Any], notice: Notice) -> None:
    """A "complete" run whose run.json is gone or damaged is pending again."""
    for entry in sweep["points"]:
        if entry["status"] != PointStatus.COMPLETE:
            continue
        try:
            status = load_run(path / entry["run_dir"]).get("status")
        except OpenslobError:
            status = None
        if status != RunStatus.COMPLETE:
            notice(f"{entry['name']}: its run.json is missing or damaged: running it again")
            entry.update(status=PointStatus.PENDING, error="run.json missing or damaged: rerun")


def _merge_repeats(sweep: dict[str, Any], fresh: list[dict[str, Any]], plan: SweepPlan) -> None:
    """A different REPEAT on a rerun: new rounds are appended (run after the old ones);
    with a smaller one, runs beyond it that are not complete are dropped (complete ones
    were measured and stay)."""
    known = {entry["name"] for entry in sweep["points"]}
    for entry in sweep["points"]:  # sweeps written before repeats: each entry is a point
        entry.setdefault("point", entry["name"])
        entry.setdefault("repeat", 1)
    sweep["points"] = [
        e
        for e in sweep["points"]
        if e["repeat"] <= plan.repeat or e["status"] == PointStatus.COMPLETE
    ]
    sweep["points"] += [entry for entry in fresh if entry["name"] not in known]
    sweep["repeat"] = plan.repeat
    sweep["base"]["REPEAT"] = plan.repeat


def _comparable(sweep: Mapping[str, Any]) -> str:
    # Through JSON so that tuples/lists and int/float spellings compare the way they're stored.
    # REPEAT is how often, not what: a rerun may add rounds (_merge_repeats). A parameter
    # at its default is left out: a sweep.json written before an option existed (INSTANCES)
    # still resumes, and a value that differs from the default still tells plans apart.
    base = {
        k: v
        for k, v in (sweep.get("base") or {}).items()
        if k != "REPEAT" and not (k in OPTIONS_BY_NAME and v == OPTIONS_BY_NAME[k].default)
    }
    return json.dumps({"axes": sweep.get("axes"), "base": base}, sort_keys=True, default=str)


def save(path: Path, sweep: dict[str, Any]) -> None:
    """sweep.json whole or not at all (a full disk leaves the previous one)."""
    write_atomic(path / SWEEP_FILE, json.dumps(sweep, indent=2, default=str) + "\n")


# ------------------------------------------------------------------------------ running


@dataclass
class SweepOutcome:
    path: Path
    sweep: dict[str, Any]
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    stopped: str | None = None  # status of the point that stopped the sweep
    stopped_by: str | None = None  # the signal that stopped it (run.json stopped_by)
    wall_seconds: float = 0.0
    run_seconds: float = 0.0  # Σ (warm-up + window) of the points run now


PointDone = Callable[[dict[str, Any], dict[str, Any] | None], None]


@dataclass
class _Sweep:
    """What every point of one sweep shares."""

    path: Path
    sweep: dict[str, Any]
    label: str | None
    observers: Observers
    point_started: Callable[[dict[str, Any]], None] | None


def run_sweep(
    plan: SweepPlan,
    *,
    path: Path,
    label: str | None,
    target: str | list[str] | tuple[str, ...] | None,
    data_dir: Path | None,
    observers: Observers | None = None,
    point_started: Callable[[dict[str, Any]], None] | None = None,
    point_done: PointDone | None = None,
) -> SweepOutcome:
    """The points not yet complete, in order (`observers.render`: each point's text report;
    `observers.progress`: each point's closed intervals)."""
    started = time.monotonic()
    observers = observers or Observers()
    notice = observers.notice
    sweep = load_or_create(path, plan, label, notice)
    by_point = {p.name: p for p in plan.points}
    shared = _Sweep(path, sweep, label, observers, point_started)
    outcome = SweepOutcome(path, sweep)
    by_name = {entry["name"]: by_point[entry["point"]] for entry in sweep["points"]}
    todo = [p for p in sweep["points"] if p["status"] != PointStatus.COMPLETE]
    outcome.skipped = [p["name"] for p in sweep["points"] if p["status"] == PointStatus.COMPLETE]
    # One preparation per private server: an engine that keeps one server per value of an
    # option (a page size) has one server and data set per value, prepared before its first
    # point runs.
    groups: dict[str, list[Point]] = {}
    for entry in todo:
        point = by_name[entry["name"]]
        group = groups.setdefault(server_key(target, point), [])
        if point not in group:  # once per point, however many repeats
            group.append(point)
    prepared_by_key: dict[str, Prepared] = {}
    try:
        for entry in todo:
            key = server_key(target, by_name[entry["name"]])
            if key not in prepared_by_key:
                # The previous group's private servers are stopped: their background
                # flushing and purge must not share the device with the next points.
                for done in prepared_by_key.values():
                    done.release()
                    _stop_private_servers(done, notice)
                prepared_by_key[key] = _prepare_once(plan, groups[key], target, data_dir, notice)
            result = _run_point(prepared_by_key[key], shared, entry, by_name[entry["name"]])
            outcome.ran.append(entry["name"])
            config = by_name[entry["name"]].config
            outcome.run_seconds += config.p.warmup + (
                (result or {}).get("window", {}).get("seconds") or 0.0
            )
            if point_done:
                point_done(entry, result)
            if entry["status"] != PointStatus.COMPLETE:
                outcome.stopped = entry["status"]
                outcome.stopped_by = (result or entry).get("stopped_by")
                break
    finally:
        for prepared in prepared_by_key.values():
            prepared.release()  # the data sets' locks
    outcome.wall_seconds = time.monotonic() - started
    return outcome


def _stop_private_servers(prepared: Prepared, notice: Notice) -> None:
    for instance in prepared.instances:
        server = instance.target.server
        if server is not None and server.stop():
            notice(f"stopped {instance.target.label}")


def server_key(target: str | list[str] | tuple[str, ...] | None, point: Point) -> str:
    """Points with the same key run on the same servers: the same targets (an instance
    sweep's first 1, 2, ... of them differ) and the engines' own key (a private server per
    page size, say)."""
    targets = [target] if isinstance(target, str) else list(target or [])
    names = target_strings(targets, point.config)
    return "\n".join(
        f"{t}\t{registry.plugin_for_target(t).server_key(point.config)}" for t in names
    )


def _prepare_once(
    plan: SweepPlan,
    points: list[Point],
    target: str | list[str] | tuple[str, ...] | None,
    data_dir: Path | None,
    notice: Notice,
) -> Prepared:
    """Servers, capacity for the largest point, data and procedures: checked once."""
    widest = max(points, key=lambda p: (p.config.p.schemas, len(session_schemas(p.config))))
    return prepare(
        widest.config,
        target=target,
        data_dir=data_dir,
        notice=notice,
        also=tuple(p.config for p in points if p is not widest),
        purpose="sweep",
    )


def _run_point(
    prepared: Prepared, shared: _Sweep, entry: dict[str, Any], point: Point
) -> dict[str, Any] | None:
    path, sweep = shared.path, shared.sweep
    run_dir = path / entry["run_dir"]
    if run_dir.exists():  # an earlier attempt that did not complete: ours to replace
        shutil.rmtree(run_dir)
    entry.update(status=PointStatus.RUNNING, started=_now(), finished=None, error=None)
    save(path, sweep)
    if shared.point_started:
        shared.point_started(entry)
    result: dict[str, Any] | None = None
    try:
        # Every point starts on the layout SLOB describes; what had to be reloaded is kept.
        entry["reloaded"] = restore_layout(prepared, point.config, shared.observers.notice)
        config = ratesweep.point_config(sweep, entry, point.config)
        save(path, sweep)
        result = execute(
            prepared,
            config,
            run_dir,
            label=shared.label,
            observers=shared.observers,
        )
        entry.update(status=result["status"], error=result.get("error"))
        ratesweep.record_max(sweep, entry, result)
    except KeyboardInterrupt as exc:
        signame = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
        entry.update(
            status=PointStatus.INTERRUPTED, error=f"interrupted ({signame})", stopped_by=signame
        )
    except Exception as exc:  # record it; the rerun will try this point again
        entry.update(
            status=PointStatus.FAILED, error=str(exc).splitlines()[0] if str(exc) else repr(exc)
        )
    entry["finished"] = _now()
    save(path, sweep)
    return result
