"""The SLOB data set as both engines plan it: which tables each schema holds, and seeds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from openslob.config.resolve import Config

# Physical-I/O tests want the data set at least this many times the database's cache (the
# run's warning and both doctors).
CACHE_RATIO = 10


def schema_name(index: int) -> str:
    return f"user{index}"


def schema_order(name: str) -> tuple[int, str]:
    """Sort key of schema names in natural order: user2 before user10."""
    return len(name), name


def correlation_limit(rows: int) -> float:
    """|r| a random shuffle stays under: 5 standard errors (1/sqrt(n)), at least 0.05."""
    return max(0.05, 5 / math.sqrt(max(rows, 1)))


def schema_seed(seed: int, schema_index: int) -> int:
    """Independent, reproducible seed per schema (a large odd multiplier spreads them)."""
    return (seed * 1_000_003 + schema_index * 7_919) % (1 << 62)


@dataclass(frozen=True)
class TableSpec:
    """What one table of the data set must hold."""

    schema: str
    table: str  # "cf1" | "cf2"
    rows: int
    seed: int

    @property
    def indexed(self) -> bool:
        return self.table == "cf1"


Spec = TypeVar("Spec", bound=TableSpec)


def wanted_tables(
    schemas: int, scale: int, scan_rows: int, seed: int, spec: type[Spec] = TableSpec
) -> list[Spec]:
    specs: list[Spec] = []
    for index in range(1, schemas + 1):
        name = schema_name(index)
        specs.append(spec(name, "cf1", scale, schema_seed(seed, index)))
        if scan_rows > 0:
            specs.append(spec(name, "cf2", scan_rows, schema_seed(seed, index)))
    return specs


def config_tables(config: Config, spec: type[Spec]) -> list[Spec]:
    """The tables `slob setup` with this config creates."""
    return wanted_tables(
        config["SCHEMAS"], config["SCALE"], config["SCAN_TABLE_SZ"], config["SEED"], spec
    )


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
    if not config["SCAN_PCT"]:
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
