"""The order of a table's checks, the same for both engines' verifiers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from openslob.engines.api import Check
from openslob.engines.common.tables import correlation_limit


class VerifierBase(ABC):
    """check(spec, reference): existence first, then the engine's checks of the table, then
    (cf1 only) its index and its independence from the reference schema's cf1."""

    @abstractmethod
    def exists(self, spec: Any) -> bool: ...

    @abstractmethod
    def table_checks(self, spec: Any) -> list[Check]:
        """Content, layout, bloat, recorded parameters, storage: what the engine measures."""

    @abstractmethod
    def index_checks(self, spec: Any) -> list[Check]: ...

    @abstractmethod
    def independence(self, spec: Any, reference: Any) -> Check:
        """This cf1's keys are not the reference schema's in another order."""

    def check(self, spec: Any, reference: Any | None) -> list[Check]:
        if not self.exists(spec):
            return [Check(spec.schema, f"{spec.table} exists", "missing", "present", False)]
        checks = self.table_checks(spec)
        if spec.indexed:
            checks += self.index_checks(spec)
            if reference is not None and self.exists(reference):
                checks.append(self.independence(spec, reference))
        return checks


def correlation_check(schema: str, name: str, corr: float | None, rows: int) -> Check:
    """Keys shuffled over the table: |r| between a key and where its row sits stays under
    what a random order gives (correlation_limit); an unmeasured r fails."""
    limit = correlation_limit(rows)
    measured = None if corr is None else round(float(corr), 4)
    return Check(
        schema,
        name,
        measured,
        f"|r| < {limit:.3f}",
        measured is not None and abs(measured) < limit,
    )
