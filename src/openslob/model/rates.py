"""Per-second rates and ratios of counter deltas: None (null) when nothing was measured."""

from __future__ import annotations


def per_s(value: float | None, seconds: float) -> float | None:
    return None if value is None or seconds <= 0 else value / seconds


def ratio(num: float | None, den: float | None, scale: float = 1.0) -> float | None:
    """num / den * scale, or None when either is missing or the denominator is zero."""
    if num is None or not den:
        return None
    return num / den * scale
