"""Instants as results print them: ISO 8601 in UTC with milliseconds (run.json, the time
series, the horizon's holds), or null for an instant that was not measured."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
