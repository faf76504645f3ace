"""The order of a table's checks, the same for both engines' verifiers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from openslob.engines.api import Check
from openslob.engines.common.tables import correlation_limit
from openslob.model.compressibility import (
    DEDUPE_LIMIT,
    INCOMPRESSIBLE_RATIO,
    Compressibility,
    summary,
    worst,
)


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


def compression_check(
    schema: str, name: str, measured: Compressibility, target: float = 1.0
) -> Check:
    """What the storage sees of a table: incompressible (ratios at most INCOMPRESSIBLE_RATIO
    and almost no two equal 4 KiB chunks: DEDUPE_LIMIT), or with COMPRESS_RATIO > 1 the
    4 KiB ratios of zlib-1 and lz4 within 10 % of it. Not measurable (a remote server
    without file access): n/a with the reason, not a failure."""
    dedupe_ok = (measured.dedupe_4k or 1.0) <= DEDUPE_LIMIT
    if target > 1.0:
        low, high = target * 0.9, target * 1.1
        wanted = f"{low:.2f}..{high:.2f}:1 (zlib-1, lz4; 4 KiB), dedupe <= {DEDUPE_LIMIT:.2f}:1"
        if measured.zlib_4k is None or measured.lz4_4k is None:
            return Check(schema, name, summary(measured), wanted, True)
        hits = all(low <= r <= high for r in (measured.zlib_4k, measured.lz4_4k))
        return Check(schema, name, summary(measured), wanted, hits and dedupe_ok)
    wanted = (
        f"<= {INCOMPRESSIBLE_RATIO:.2f}:1 (zlib-1, lz4; 4 and 8 KiB), "
        f"dedupe <= {DEDUPE_LIMIT:.2f}:1"
    )
    worst_ratio = worst(measured)
    if worst_ratio is None:
        return Check(schema, name, summary(measured), wanted, True)
    return Check(
        schema, name, summary(measured), wanted, worst_ratio <= INCOMPRESSIBLE_RATIO and dedupe_ok
    )


def index_compression_check(schema: str, name: str, measured: Compressibility) -> Check:
    """An index's ratio, stated: its keys are the engine's (small integers compress), and
    making them incompressible would change the work per op. Informational."""
    return Check(schema, name, summary(measured), "measured (keys are small integers)", True)
