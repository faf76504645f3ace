"""What both engines' Engine does the same way around their loader, verifier and guard.

An engine's Engine (engines/<name>/engine.py) subclasses SlobEngine with its own pieces: the
TableSpec type its loader plans with, the loader, a guard module (DatasetLock, lock_holder,
leftover_loops, end_loops: see engines/*/guard.py), how it checks the server before anything
is changed, and a verifier. The data set's lifecycle around them is written once here.
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from types import ModuleType
from typing import Any

from openslob.config.resolve import Config
from openslob.engines.api import (
    Check,
    DatasetLock,
    Engine,
    ProgressCallback,
    RewriteExtent,
    SetupResult,
    VerifyResult,
)
from openslob.engines.common import tables
from openslob.model.compressibility import Compressibility, combine, per_table_sample
from openslob.model.plan import schema_order


class SlobEngine(Engine):
    """`target`: how the engine's guard and loader connect (a conninfo, driver keywords)."""

    table_spec: type[tables.TableSpec] = tables.TableSpec
    guard: ModuleType

    def __init__(self, target: Any, loader: Any, rewriter: Any) -> None:
        self._target = target
        self._loader = loader
        # plan(relations), rewrite(extent, first, count), flush(), cancel(), close():
        # engines/<name>/precondition.py
        self._rewriter = rewriter

    # ------------------------------------------------------------- what an engine adds

    @abstractmethod
    def check_server(self) -> None:
        """Version, page size: raise SetupError before anything is changed."""

    @abstractmethod
    def verifier(self) -> contextlib.AbstractContextManager[Any]:
        """A context giving an object with check(spec, reference) -> list[Check]."""

    def relation_compressibility(self, relations: list[str], sample_bytes: int) -> list[Any]:
        """Measured Compressibility of each relation ("schema.table") of the data set."""
        return [Compressibility.unmeasured("not measured by this engine") for _ in relations]

    def install_after_load(self, schemas: list[str]) -> None:
        """What setup (re)creates after the load besides the tables (the loader may have)."""

    # ------------------------------------------------------------------ the data set

    def specs(self, config: Config) -> list[Any]:
        return tables.config_tables(config, self.table_spec)

    def setup(self, config: Config, progress: ProgressCallback | None = None) -> SetupResult:
        """Load what is missing or stale; leave valid tables as they are."""
        self.check_server()
        specs = self.specs(config)
        result = self._loader.load(specs, config.p.load_parallel_degree, progress)
        wanted = sorted({spec.schema for spec in specs}, key=schema_order)
        self.install_after_load(wanted)
        extra = [s for s in self._loader.existing_schemas() if s not in wanted]
        if extra:
            result.notes.append(
                f"schemas {', '.join(extra)} from an earlier setup are left as they are; "
                "`slob destroy` drops them"
            )
        return result

    def bytes_to_load(self, config: Config) -> int:
        todo = self._loader.plan(self.specs(config)).todo
        return sum(self.data_bytes(spec.rows) for spec in todo)

    def verify(self, config: Config) -> VerifyResult:
        checks: list[Check] = []
        with self.verifier() as verifier:
            for spec, reference in tables.with_references(self.specs(config)):
                checks += verifier.check(spec, reference)
        return VerifyResult(checks)

    def compressibility(self, config: Config, schemas: list[str]) -> Compressibility:
        names = [f"{s.schema}.{s.table}" for s in self.specs(config) if s.schema in schemas]
        parts = self.relation_compressibility(names, per_table_sample(len(names)))
        return combine(parts)

    def destroy(self) -> list[str]:
        self.check_server()
        return self._loader.drop_all()

    def cancel(self) -> None:
        self._loader.cancel()
        self._rewriter.cancel()

    # ----------------------------------------------------- slob precondition --mode engine

    def rewrite_plan(self, config: Config) -> list[RewriteExtent]:
        self.check_server()
        relations = [f"{s.schema}.{s.table}" for s in self.specs(config)]
        return list(self._rewriter.plan(relations))

    def rewrite(self, extent: RewriteExtent, first: int, count: int) -> None:
        self._rewriter.rewrite(extent, first, count)

    def flush_writes(self, extents: list[RewriteExtent]) -> None:
        """The checkpoint ends a pass: its connection goes too (the next pass opens one)."""
        try:
            self._rewriter.flush(extents)
        finally:
            self._rewriter.close()

    def missing_tables(self, config: Config, schemas: list[str]) -> dict[str, str]:
        return tables.missing_tables(self._loader, config, self.table_spec, schemas)

    def recorded_dataset(self) -> dict[str, float] | None:
        return tables.recorded_parameters(self._loader.recorded_tables())

    def has_data(self) -> bool:
        return bool(self._loader.existing_schemas())

    # ------------------------------------------------------------ one user at a time

    def lock_dataset(self, purpose: str) -> DatasetLock:
        return self.guard.DatasetLock(self._target, purpose)

    def lock_holder(self) -> str | None:
        return self.guard.lock_holder(self._target)

    def leftover_loops(self) -> list[tuple[int, str]]:
        return self.guard.leftover_loops(self._target)
