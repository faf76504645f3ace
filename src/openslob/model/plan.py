"""Where each session of a run goes: its schema and its instance (SLOB's two round robins),
and its reproducible random seed."""

from __future__ import annotations

from typing import Protocol


class _Counts(Protocol):
    @property
    def schemas(self) -> int: ...
    @property
    def session_count(self) -> int: ...


class Config(Protocol):
    """A config.resolve.Config, as far as placing sessions needs it (model sits below
    config): its typed parameters."""

    @property
    def p(self) -> _Counts: ...


# Physical-I/O tests want the data set at least this many times the database's cache (the
# run's warning and both doctors).
CACHE_RATIO = 10


def schema_name(index: int) -> str:
    return f"user{index}"


def schema_order(name: str) -> tuple[int, str]:
    """Sort key of schema names in natural order: user2 before user10."""
    return len(name), name


def session_schemas(config: Config) -> list[str]:
    """Schema of each session: SLOB's round robin over user1..userN."""
    return [schema_name((i % config.p.schemas) + 1) for i in range(config.p.session_count)]


def session_instances(sessions: int, instances: int) -> list[int]:
    """Instance of each session: SLOB's round robin over SQLNET_SERVICE_BASE1..MAX."""
    return [i % instances for i in range(sessions)]


def instance_schemas(config: Config, instances: int) -> list[list[str]]:
    """The schemas the sessions of each instance use."""
    schemas = session_schemas(config)
    placed = session_instances(len(schemas), instances)
    return [
        sorted({s for s, i in zip(schemas, placed, strict=True) if i == k})
        for k in range(instances)
    ]


def session_seed(seed: int, session_id: int) -> float:
    """setseed() takes [-1, 1]; spread sessions so their key streams differ but repeat."""
    mixed = (seed * 2_654_435_761 + (session_id + 1) * 40_503) % 1_000_003
    return mixed / 1_000_003 * 2 - 1
