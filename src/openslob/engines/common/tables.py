"""The SLOB data set as both engines plan it: which tables each schema holds, and seeds.

Setup records every table it (re)loads in the engine's bookkeeping table (rows, the schema's
seed, status); recorded_parameters reads the SCHEMAS, SCALE, SCAN_TABLE_SZ and SEED a data
set was set up with back from those rows (Engine.recorded_dataset), so that a command given
none of them works on the data set that is there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from openslob.config.resolve import Config
from openslob.model.plan import schema_name


def correlation_limit(rows: int) -> float:
    """|r| a random shuffle stays under: 5 standard errors (1/sqrt(n)), at least 0.05."""
    return max(0.05, 5 / math.sqrt(max(rows, 1)))


_SEED_FACTOR = 1_000_003
_SCHEMA_STEP = 7_919


def schema_seed(seed: int, schema_index: int) -> int:
    """Independent, reproducible seed per schema (a large odd multiplier spreads them)."""
    return (seed * _SEED_FACTOR + schema_index * _SCHEMA_STEP) % (1 << 62)


def seed_of(recorded: int, schema_index: int) -> int | None:
    """The SEED whose schema_seed for this schema is `recorded` (None: none is). Exact: SEED
    is below 2**31, so seed x 1,000,003 never reaches the modulus 2**62."""
    seed, rest = divmod(recorded - schema_index * _SCHEMA_STEP, _SEED_FACTOR)
    return seed if rest == 0 and seed >= 0 else None


@dataclass(frozen=True)
class TableSpec:
    """What one table of the data set must hold."""

    schema: str
    table: str  # "cf1" | "cf2"
    rows: int
    seed: int
    ratio: float = 1.0  # COMPRESS_RATIO the data is written with

    @property
    def indexed(self) -> bool:
        return self.table == "cf1"


Spec = TypeVar("Spec", bound=TableSpec)


def wanted_tables(
    schemas: int,
    scale: int,
    scan_rows: int,
    seed: int,
    spec: type[Spec],
    ratio: float = 1.0,
) -> list[Spec]:
    specs: list[Spec] = []
    for index in range(1, schemas + 1):
        name = schema_name(index)
        specs.append(spec(name, "cf1", scale, schema_seed(seed, index), ratio))
        if scan_rows > 0:
            specs.append(spec(name, "cf2", scan_rows, schema_seed(seed, index), ratio))
    return specs


def config_tables(config: Config, spec: type[Spec]) -> list[Spec]:
    """The tables `slob setup` with this config creates."""
    return wanted_tables(
        config.p.schemas,
        config.p.scale,
        config.p.scan_table_sz,
        config.p.seed,
        spec,
        config.p.compress_ratio,
    )


@dataclass(frozen=True)
class RecordedTable:
    """One row of an engine's bookkeeping: what setup loaded (or began to load) there."""

    schema: str
    table: str
    rows: int
    seed: int  # the schema's seed (schema_seed), as the load used it
    ratio: float = 1.0  # COMPRESS_RATIO the load wrote


def recorded_parameters(recorded: list[RecordedTable]) -> dict[str, float] | None:
    """SCHEMAS, SCALE, SCAN_TABLE_SZ and SEED of the data set setup recorded; None when
    there is none (no user1.cf1, or one no SEED explains).

    Setup always (re)loads user1..userN, so the last one's schemas are the run of user1,
    user2, ... whose cf1 share user1's rows and SEED; schemas left from an earlier setup with
    other parameters end it. SCAN_TABLE_SZ is the rows of their cf2 when every one has the
    same, else 0 (no scan table the run could use in every schema). Half-loaded tables count:
    the run then names them, and the parameters that `slob setup` repairs them with."""
    by_name = {(r.schema, r.table): r for r in recorded}
    first = by_name.get((schema_name(1), "cf1"))
    seed = seed_of(first.seed, 1) if first is not None else None
    if first is None or seed is None:
        return None
    schemas = 0
    while True:
        cf1 = by_name.get((schema_name(schemas + 1), "cf1"))
        if cf1 is None or cf1.rows != first.rows or cf1.seed != schema_seed(seed, schemas + 1):
            break
        schemas += 1
    scan_rows = set()
    for index in range(1, schemas + 1):
        cf2 = by_name.get((schema_name(index), "cf2"))
        ok = cf2 is not None and cf2.seed == schema_seed(seed, index)
        scan_rows.add(cf2.rows if ok and cf2 is not None else 0)
    return {
        "SCHEMAS": schemas,
        "SCALE": first.rows,
        "SCAN_TABLE_SZ": scan_rows.pop() if len(scan_rows) == 1 else 0,
        "SEED": seed,
        "COMPRESS_RATIO": first.ratio,
    }


def with_references(specs: list[Spec]) -> list[tuple[Spec, Spec | None]]:
    """Each table with the one verify compares its page order against: another schema's CF1
    (independent shuffles), none for scan tables or a lone schema."""
    cf1 = [spec for spec in specs if spec.table == "cf1"]
    pairs: list[tuple[Spec, Spec | None]] = []
    for spec in specs:
        reference = None
        if spec.table == "cf1" and len(cf1) > 1:
            reference = cf1[1] if spec is cf1[0] else cf1[0]
        pairs.append((spec, reference))
    return pairs


@dataclass
class Plan(Generic[Spec]):
    """What setup must (re)load, what is valid as it is, and why each table must be loaded."""

    todo: list[Spec] = field(default_factory=list)
    valid: list[Spec] = field(default_factory=list)
    reasons: dict[Spec, str] = field(default_factory=dict)

    def add(self, spec: Spec, reason: str | None) -> None:
        if reason is None:
            self.valid.append(spec)
        else:
            self.todo.append(spec)
            self.reasons[spec] = reason


# Reasons a table must be (re)loaded that are not a layout problem of the table itself.
NOT_LOADED = "not loaded"
HALF_LOADED = "half loaded (an interrupted setup)"
OTHER_PARAMETERS = "loaded with other parameters (rows, seed or layout version)"


def recorded_reason(meta: dict[str, Any], wanted: dict[str, Any]) -> str | None:
    """Why the bookkeeping alone rules a table out (None: go on and check the table)."""
    if not meta:
        return NOT_LOADED
    if meta.get("status") != "complete":
        return HALF_LOADED
    if any(meta.get(k) != v for k, v in wanted.items()):
        return OTHER_PARAMETERS
    return None


class Planner(Protocol):
    def plan(self, specs: list[Any]) -> Plan: ...


def missing_tables(
    loader: Planner, config: Config, spec: type[Spec], schemas: list[str]
) -> dict[str, str]:
    """`schema.table` -> why, for the tables of `schemas` a run with this config needs and
    cannot use as they are (the scan table only when the run scans)."""
    specs = [s for s in config_tables(config, spec) if s.schema in schemas]
    if not config.p.scan_pct:
        specs = [s for s in specs if s.table == "cf1"]
    plan = loader.plan(specs)
    return {f"{s.schema}.{s.table}": plan.reasons[s] for s in plan.todo}


def reload_notes(plan: Plan) -> list[str]:
    """Setup's word on each table it reloads for a reason other than a first load."""
    return [
        f"{spec.schema}.{spec.table} reloaded: {reason}"
        for spec, reason in plan.reasons.items()
        if reason != NOT_LOADED
    ]
