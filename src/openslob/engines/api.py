"""The interface every database engine implements; the runner and CLI see only this."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from openslob.config.options import Config

# Called with (rows loaded so far, rows to load in total) while setup runs.
ProgressCallback = Callable[[int, int], None]


@dataclass
class TableLoad:
    """One line of the load summary."""

    schema: str
    table: str
    rows: int
    pages: int
    bytes: int
    seconds: float
    action: str  # "loaded" | "valid" (already there, untouched)

    @property
    def mb_per_s(self) -> float | None:
        if self.action != "loaded" or self.seconds <= 0:
            return None
        return self.bytes / (1 << 20) / self.seconds


@dataclass
class SetupResult:
    tables: list[TableLoad]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Check:
    """One verification finding: what was measured, what was expected, and the verdict."""

    schema: str
    name: str
    measured: Any
    expected: str
    ok: bool


@dataclass
class Finding:
    """One `slob doctor` finding: what was read from the server, the verdict, what to do."""

    check: str
    value: str
    verdict: str  # ok | warn | fail
    advice: str = ""


@dataclass
class VerifyResult:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)


class DatasetLock(Protocol):
    """One run, setup or destroy per data set at a time (engines' guard modules)."""

    guard: dict[str, Any]  # what the work loop needs to see its client (passed in its conf)

    def ensure(self) -> None:
        """Hold the lock again if a restart of the server ended its connection."""

    def release(self) -> None: ...


class Engine(ABC):
    name: str

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """{name, version, target (no password), settings {...}}."""

    @abstractmethod
    def setup(self, config: Config, progress: ProgressCallback | None = None) -> SetupResult:
        """Create or repair the SLOB data set; leave valid data untouched."""

    @abstractmethod
    def bytes_to_load(self, config: Config) -> int:
        """What setup would write: the tables that are missing, stale or half loaded."""

    @abstractmethod
    def verify(self, config: Config) -> VerifyResult:
        """Measure the data set against what the config asks for."""

    @abstractmethod
    def destroy(self) -> list[str]:
        """Drop everything setup created; returns the schemas dropped."""

    @abstractmethod
    def cancel(self) -> None:
        """Cancel server-side work of this engine (from another thread, e.g. on Ctrl-C)."""

    @abstractmethod
    def missing_tables(self, config: Config, schemas: list[str]) -> dict[str, str]:
        """`schema.table` -> why, for the tables of `schemas` a run with this config needs and
        cannot use as they are (absent, half loaded, loaded with other parameters, changed
        by hand, bloated)."""

    @abstractmethod
    def has_data(self) -> bool:
        """Whether any SLOB schema exists (a first run creates the default data set)."""

    @abstractmethod
    def install_procedures(self, schemas: list[str]) -> None:
        """(Re)create the work loop of each schema (and helpers the run needs)."""

    @abstractmethod
    def data_bytes(self, rows: int) -> int:
        """Bytes that `rows` SLOB rows occupy on this server (pages times page size)."""

    @abstractmethod
    def identity(self) -> tuple[str, str]:
        """(server, database): equal for two targets that reach the same data."""

    @abstractmethod
    def lock_dataset(self, purpose: str) -> DatasetLock:
        """Hold the data set for this process ("run", "setup", ...); BusyError names the
        holder when another openslob process has it."""

    @abstractmethod
    def lock_holder(self) -> str | None:
        """Who holds the data set now (None: nobody)."""

    @abstractmethod
    def leftover_loops(self) -> list[tuple[int, str]]:
        """(session id, application) of openslob run sessions still connected: call with
        the lock held, when they belong to no live run."""

    @abstractmethod
    def end_loops(self, ids: list[int]) -> str:
        """End those sessions (a private server's); returns how, for a message."""

    @abstractmethod
    def end_loops_advice(self, ids: list[int]) -> str:
        """The statement that ends them, for the owner of an existing server."""
