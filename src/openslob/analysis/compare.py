"""Is B better than A? Two sides, point by point and figure by figure, with noise bounds.

A side is whatever `results.collect.find_runs` reads under one path: a run, a repeated run,
a sweep, a tree of them, or a directory of Oracle AWR reports. Its points are its complete
runs grouped by what they measured: the workload (figures.workload) plus the parameters of
the sweep point they belong to (a page size, say). Runs of one point are its repeats.

1. Differences: every configuration parameter, engine field and setting, tool version, host
   field and device field whose values are not the same on both sides, listed first.
2. Pairing: points pair when they agree on every identity key both sides record. A key
   whose values on the two sides have nothing in common is set aside: a setting (PAGE_SIZE)
   silently, since it is what is being compared; a workload key (WORK_UNIT 64 vs 8) only
   with `force`, else `compare` refuses (ConfigError), because the sides then did different
   work. Points of one side without a partner are named.
3. Per pair and figure (figures.value addresses): each side's Spread (median, min, max, CV),
   the change of the medians in %, and with 2 or more runs on each side the interval of
   stats.ratio_interval and a verdict: "better" / "worse" when the interval excludes no
   change (by the metrics table's `better`; "higher" / "lower" for a figure without a
   direction), "within noise" when it includes it, NO_REPEATS with one run on a side (its
   change is printed, but nothing tells it from noise; ONE_MEASURED when the side has
   repeats but only one measured the figure), "n/a" when a side did not measure
   the figure, "n/a (base 0)" when the base median is 0 (no ratio), "n/a (a base run is
   0)" when the interval's pairwise ratios cannot be formed, SAME when every run of both
   sides measured exactly 0 (no interval: there is no noise to bound), and INVALID ("no
   verdict: base 3/3 runs: other I/O shared the device") in place of any of these when runs
   of a side carry a warning that invalidates the figure (analysis/validity.py).
4. Each side's warnings (side_warnings) are listed before everything else.

The figures compared by default are the metrics table's rows marked `compared`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from openslob.analysis import validity
from openslob.analysis.figures import (
    SESSIONS_KEY,
    WORKLOAD_OPTIONS,
    metric_for,
    point_identity,
    point_text,
    value,
)
from openslob.analysis.stats import METHOD, Interval, Spread, ratio_interval, spread
from openslob.config.options import OPTIONS_BY_NAME
from openslob.model.compressibility import compare_key
from openslob.model.errors import ConfigError
from openslob.model.metrics import METRICS
from openslob.model.states import RunStatus
from openslob.results.collect import RunRef, find_runs

NO_REPEATS = "no repeats: cannot separate from noise"
# Repeats ran, but only one of a side's runs measured the figure (reads of a cached run)
ONE_MEASURED = "one run measured it: cannot separate from noise"
SAME = "same: 0 on every run"
# A figure that runs of a side warned invalid (analysis/validity.py): no verdict on it
INVALID = "no verdict"
# A closed loop (RATE 0: the most the storage does) and a target rate (latency at a load)
# measure different things: RATE is part of every point's identity, and a workload key.
RATE_KEY = "RATE"
WORKLOAD_KEYS = frozenset((*WORKLOAD_OPTIONS, SESSIONS_KEY, RATE_KEY))
# SLOB's own coordinates of a point, shown when no key varies between the points.
POINT_KEYS = ("UPDATE_PCT", SESSIONS_KEY)
NOT_RECORDED = "(not recorded)"


def default_figures() -> tuple[str, ...]:
    """The figures compared unless others are asked for (read when asked: engines may add
    rows to the table)."""
    return METRICS.keys_where(compared=True)


@dataclass
class SidePoint:
    params: dict[str, Any]  # identity: workload + the sweep point's parameters
    refs: list[RunRef] = field(default_factory=list)


@dataclass
class Side:
    path: Path
    label: str
    points: list[SidePoint]
    left_out: list[str] = field(default_factory=list)  # runs not complete
    problems: list[str] = field(default_factory=list)  # files that could not be read

    @property
    def refs(self) -> list[RunRef]:
        return [ref for point in self.points for ref in point.refs]


def identity(ref: RunRef) -> dict[str, Any]:
    params = point_identity(ref.run, ref.point)
    params.setdefault(RATE_KEY, (ref.run.get("config") or {}).get(RATE_KEY) or 0)
    return params


def load_side(path: Path, oracle_names: re.Pattern[str] | None = None) -> Side:
    """The complete runs under `path`, grouped into points."""
    problems: list[str] = []
    return make_side(path, find_runs([path], problems, oracle_names), problems)


def make_side(path: Path, refs: Sequence[RunRef], problems: Sequence[str] = ()) -> Side:
    """The side of runs already found under `path` (problems: files that were not read)."""
    points: dict[str, SidePoint] = {}
    left_out = []
    for ref in refs:
        if ref.run.get("status") != RunStatus.COMPLETE:  # no status: no run ({"schema_version": 2})
            left_out.append(f"{ref.path} ({ref.run.get('status')})")
            continue
        params = identity(ref)
        key = json.dumps(params, sort_keys=True, default=str)
        points.setdefault(key, SidePoint(params)).refs.append(ref)
    if not points:
        raise ConfigError(f"{path}: no complete run to compare")
    labels = {ref.sweep or ref.run.get("label") for point in points.values() for ref in point.refs}
    label = labels.pop() if len(labels) == 1 and None not in labels else path.name
    return Side(path, str(label or path.name), list(points.values()), left_out, list(problems))


# --- differences ------------------------------------------------------------------------


@dataclass
class Difference:
    key: str  # config.RUN_TIME, engine.settings.shared_buffers, host.devices.vda.model
    base: list[str]
    cand: list[str]
    workload: bool = False


def _text(value_: Any) -> str:
    return value_ if isinstance(value_, str) else json.dumps(value_, sort_keys=True, default=str)


def _flatten(prefix: str, data: Any, out: dict[str, str]) -> None:
    if isinstance(data, Mapping):
        for key, item in data.items():
            _flatten(f"{prefix}.{key}", item, out)
    elif isinstance(data, list) and data and all(isinstance(d, Mapping) for d in data):
        for i, item in enumerate(data):  # devices by name, else by position
            _flatten(f"{prefix}.{item.get('name', i)}", item, out)
    else:
        out[prefix] = _text(data)


def described(run: Mapping[str, Any]) -> dict[str, str]:
    """What a run says about how it was made: configuration, tool, engine, host."""
    out: dict[str, str] = {}
    config = run.get("config") or {}
    for name, item in config.items():
        if name in OPTIONS_BY_NAME:  # not an Oracle report's SOURCE_FILE: a file name
            out[f"config.{name}"] = _text(item)
    out["tool.version"] = _text((run.get("tool") or {}).get("version"))
    skipped = ("terms", "dataset_compressibility")  # wording; a measurement (below)
    engine = {k: v for k, v in (run.get("engine") or {}).items() if k not in skipped}
    _flatten("engine", engine, out)  # terms are wording, not a setting
    storage = compare_key((run.get("engine") or {}).get("dataset_compressibility"))
    if storage is not None:
        out["engine.dataset_compression"] = storage
    _flatten("host", run.get("host") or {}, out)
    return out


def differences(base: Side, cand: Side) -> list[Difference]:
    """Every described key whose values differ between the sides (in first-seen order)."""
    base_desc = [described(r.run) for r in base.refs]
    cand_desc = [described(r.run) for r in cand.refs]
    keys = list(dict.fromkeys(k for d in [*base_desc, *cand_desc] for k in d))
    found = []
    for key in keys:
        b = list(dict.fromkeys(d[key] for d in base_desc if key in d)) or [NOT_RECORDED]
        c = list(dict.fromkeys(d[key] for d in cand_desc if key in d)) or [NOT_RECORDED]
        if set(b) != set(c):
            name = key.removeprefix("config.")
            found.append(Difference(key, b, c, key.startswith("config.") and name in WORKLOAD_KEYS))
    return found


# --- pairing ----------------------------------------------------------------------------


@dataclass
class Pairing:
    keys: list[str]  # the identity keys points are matched on
    set_aside: dict[str, tuple[list[Any], list[Any]]]  # disjoint keys: base, cand values
    pairs: list[tuple[SidePoint, SidePoint]]
    only_base: list[SidePoint]
    only_cand: list[SidePoint]


def _common_keys(points: Sequence[SidePoint]) -> set[str]:
    keys = set(points[0].params)
    for point in points[1:]:
        keys &= set(point.params)
    return keys


def _ordered(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(_text(v) for v in values))


def pair_points(base: Side, cand: Side, force: bool) -> Pairing:
    """Match the points (module text, step 2); ConfigError for a workload difference
    without `force`, or when no point has a partner."""
    common = _common_keys(base.points) & _common_keys(cand.points)
    keys = [k for k in base.points[0].params if k in common]
    set_aside: dict[str, tuple[list[Any], list[Any]]] = {}
    for key in list(keys):
        b = _ordered(p.params[key] for p in base.points)
        c = _ordered(p.params[key] for p in cand.points)
        if not set(b) & set(c):
            set_aside[key] = (b, c)
            keys.remove(key)
    workload_keys = [k for k in set_aside if k in WORKLOAD_KEYS]
    if workload_keys and not force:
        shown = "; ".join(
            f"{k} {', '.join(set_aside[k][0])} vs {', '.join(set_aside[k][1])}"
            for k in workload_keys
        )
        raise ConfigError(
            f"the two sides ran different workloads ({shown}); --force compares them anyway"
        )
    pairs: list[tuple[SidePoint, SidePoint]] = []
    for b_point in base.points:
        for c_point in cand.points:
            if all(_text(b_point.params[k]) == _text(c_point.params[k]) for k in keys):
                pairs.append((b_point, c_point))
    if not pairs:
        raise ConfigError(
            f"no point of {base.path} matches a point of {cand.path} on "
            f"{', '.join(keys) or 'anything'}"
        )
    paired_b = {id(b) for b, _ in pairs}
    paired_c = {id(c) for _, c in pairs}
    return Pairing(
        keys,
        set_aside,
        pairs,
        [p for p in base.points if id(p) not in paired_b],
        [p for p in cand.points if id(p) not in paired_c],
    )


# --- changes ----------------------------------------------------------------------------


@dataclass
class Change:
    figure: str
    label: str
    unit: str
    digits: int
    better: str | None
    base: Spread
    cand: Spread
    change_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    confidence: float | None  # of this interval (exact; may be below the level asked)
    verdict: str
    # why no verdict is given: runs of a side warned the figure invalid (analysis/validity);
    # `verdict` then says so, and `numbers_say` keeps what the numbers alone would say
    invalid: str | None = None
    numbers_say: str = ""


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else (ratio - 1) * 100


def verdict(
    better: str | None,
    interval: Interval | None,
    measured: tuple[int, int],
    ratio: float | None,
    runs: tuple[int, int],
) -> str:
    """The word for one change (module text, step 3); `measured`: the runs per side that
    measured the figure, `runs`: the runs per side."""
    if not all(measured):
        return "n/a"
    if ratio is None:
        return "n/a (base 0)"  # no ratio to a median of 0
    if min(measured) < 2:
        return NO_REPEATS if min(runs) < 2 else ONE_MEASURED
    if interval is None:
        return "n/a (a base run is 0)"  # the pairwise ratios need every base run > 0
    if interval.low <= 1 <= interval.high:
        return "within noise"
    up = interval.low > 1
    if better is None:
        return "higher" if up else "lower"
    return "better" if up == (better == "higher") else "worse"


def _terms(refs: Sequence[RunRef]) -> Mapping[str, str] | None:
    """The base engine's own words for its labels ({log}: WAL or the redo log)."""
    engine = refs[0].run.get("engine") if refs else None
    terms = engine.get("terms") if isinstance(engine, Mapping) else None
    return terms if isinstance(terms, Mapping) else None


def change(
    address: str, base_refs: Sequence[RunRef], cand_refs: Sequence[RunRef], level: float
) -> Change:
    """One figure of one pair of points."""
    metric = metric_for(address)
    b = [v for v in (value(r.run, address) for r in base_refs) if v is not None]
    c = [v for v in (value(r.run, address) for r in cand_refs) if v is not None]
    b_stats, c_stats = spread(b), spread(c)
    zeros = bool(b and c) and not any(b) and not any(c)
    ratio = None
    if zeros:
        ratio = 1.0  # e.g. writes of a read-only run: exactly no change, not "n/a"
    elif b and c and b_stats.median and c_stats.median is not None:  # c: a median
        ratio = c_stats.median / b_stats.median
    interval = ratio_interval(b, c, level) if ratio is not None and not zeros else None
    invalid = validity.invalid_by(
        address,
        [list(r.run.get("warnings") or []) for r in base_refs],
        [list(r.run.get("warnings") or []) for r in cand_refs],
    )
    word = (
        SAME
        if zeros
        else verdict(
            metric.better, interval, (len(b), len(c)), ratio, (len(base_refs), len(cand_refs))
        )
    )
    return Change(
        address,
        metric.label_for(_terms(base_refs)),
        metric.unit,
        metric.digits,
        metric.better,
        b_stats,
        c_stats,
        _pct(ratio),
        _pct(interval.low) if interval else None,
        _pct(interval.high) if interval else None,
        interval.confidence if interval else None,
        f"{INVALID}: {invalid}" if invalid else word,
        invalid,
        word,
    )


@dataclass
class PointComparison:
    params: dict[str, Any]  # the base point's identity
    cand_params: dict[str, Any]
    shown: str  # the point as a line of text (the keys that tell points apart)
    base_runs: list[str]
    cand_runs: list[str]
    changes: list[Change]


@dataclass
class Comparison:
    base: Side
    cand: Side
    differences: list[Difference]
    pairing: Pairing
    points: list[PointComparison]
    level: float
    forced: bool
    method: str = METHOD
    shown_keys: list[str] = field(default_factory=list)  # what tells the points apart

    def point_name(self, params: Mapping[str, Any]) -> str:
        return _point_text(params, self.shown_keys)

    def as_dict(self) -> dict[str, Any]:
        return {
            "base": _side_dict(self.base),
            "cand": _side_dict(self.cand),
            "method": self.method,
            "level": self.level,
            "differences": [asdict(d) for d in self.differences],
            "workload_set_aside": {
                k: {"base": b, "cand": c} for k, (b, c) in self.pairing.set_aside.items()
            },
            "forced": self.forced,
            "paired_on": self.pairing.keys,
            "only_base": [p.params for p in self.pairing.only_base],
            "only_cand": [p.params for p in self.pairing.only_cand],
            "points": [_point_dict(p) for p in self.points],
        }


@dataclass
class SideWarning:
    """One kind of warning of a side: the invalidating reason it matches (analysis/validity),
    else its text; how many of the side's runs gave it, and the first run's words."""

    kind: str
    runs: int
    example: str
    invalidating: bool


def side_warnings(side: Side) -> list[SideWarning]:
    """Each kind of warning the side's runs gave, invalidating ones first."""
    found: dict[str, SideWarning] = {}
    for ref in side.refs:
        kinds: dict[str, tuple[str, bool]] = {}
        for text in ref.run.get("warnings") or []:
            reason = validity.reason_of(text)
            kinds.setdefault(reason or text, (text, reason is not None))
        for kind, (text, invalidating) in kinds.items():
            if kind in found:
                found[kind].runs += 1
            else:
                found[kind] = SideWarning(kind, 1, text, invalidating)
    return sorted(found.values(), key=lambda w: not w.invalidating)


def _side_dict(side: Side) -> dict[str, Any]:
    return {
        "path": str(side.path),
        "label": side.label,
        "points": len(side.points),
        "runs": len(side.refs),
        "left_out": side.left_out,
        "problems": side.problems,
        "warnings": [asdict(w) for w in side_warnings(side)],
    }


def _point_dict(point: PointComparison) -> dict[str, Any]:
    return asdict(point)  # Spreads become plain dicts


def _shown_keys(base: Side, cand: Side, pairing: Pairing) -> list[str]:
    """The keys that tell the points apart, over every point of both sides (the unpaired
    ones too: "only in the base: SESSIONS=2")."""
    points = [*base.points, *cand.points]
    varying = [k for k in pairing.keys if len({_text(p.params.get(k)) for p in points}) > 1]
    return varying or [k for k in POINT_KEYS if k in pairing.keys]


def _point_text(params: Mapping[str, Any], keys: Sequence[str]) -> str:
    return point_text({k: params[k] for k in keys if k in params})


def compare(
    base: Side,
    cand: Side,
    *,
    figures: Sequence[str] | None = None,
    level: float = 0.95,
    force: bool = False,
) -> Comparison:
    """The comparison of two loaded sides (module text); `figures`: addresses
    (analysis/figures.py), by default the metrics table's `compared` rows."""
    figures = default_figures() if figures is None else figures
    for address in figures:
        metric_for(address)  # an unknown figure is refused before anything is computed
    pairing = pair_points(base, cand, force)
    keys = _shown_keys(base, cand, pairing)
    points = []
    for b, c in pairing.pairs:
        extra = {k: v for k, v in c.params.items() if k not in pairing.keys}
        shown = _point_text(b.params, keys)
        if len(pairing.pairs) > len(base.points):  # one base point against several
            shown += " vs " + _point_text(extra, list(extra))
        points.append(
            PointComparison(
                b.params,
                c.params,
                shown,
                [str(r.path) for r in b.refs],
                [str(r.path) for r in c.refs],
                [change(a, b.refs, c.refs, level) for a in dict.fromkeys(figures)],
            )
        )
    return Comparison(
        base, cand, differences(base, cand), pairing, points, level, force, shown_keys=keys
    )
