"""Plain-text building blocks of the reports: numbers (n/a when not measured), sections,
aligned tables."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

WIDTH = 100
NA = "n/a"


def fmt(value: Any, digits: int = 1, unit: str = "") -> str:
    if value is None:
        return NA
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}{unit}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{unit}"
    return f"{value}{unit}"


# Latencies: microseconds below this, milliseconds from it (a 348,159.0 us figure reads as
# 348.2 ms); every cell carries its unit, so a column may mix the two.
MS_FROM_US = 10_000.0


def fmt_us(value_us: float | None) -> str:
    """A latency given in µs: "775.6 us" below 10 ms, "14.8 ms" from 10 ms; n/a if unknown."""
    if value_us is None:
        return NA
    if abs(value_us) < MS_FROM_US:
        return f"{value_us:,.1f} us"
    return f"{value_us / 1000:,.1f} ms"


def per_op(value: float | None, ops_per_s: float | None) -> float | None:
    if value is None or not ops_per_s:
        return None
    return value / ops_per_s


def section(title: str) -> list[str]:
    return ["", title, "~" * len(title)]


def table(headers: list[str], rows: Iterable[list[Any]], align: str | None = None) -> list[str]:
    text_rows = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]
    align = align or "l" + "r" * (len(headers) - 1)

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if a == "l" else c.rjust(w)
            for c, w, a in zip(cells, widths, align, strict=False)
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(row) for row in text_rows]
    return out


def latency_table(blocks: dict[str, Any] | None) -> list[str]:
    """run.json "latency" (or "latency_intended"): a row per op type (us below 10 ms, ms
    above)."""
    rows = []
    for kind in ("select", "update", "scan"):
        s = (blocks or {}).get(kind)
        if not s:
            rows.append([kind, "0", NA, NA, NA, NA, NA, NA])
            continue
        stats = ("mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us")
        name = kind + (" + commit" if kind == "update" else "")
        rows.append([name, fmt(s["count"]), *(fmt_us(s[key]) for key in stats)])
    return table(["op", "count", "mean", "p50", "p90", "p99", "p99.9", "max"], rows)
