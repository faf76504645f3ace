"""The report's "What the storage sees" block: the data set's measured compression and
dedupe ratios (run.json engine.dataset_compressibility, measured before the run from a sample
of the tables' data files). n/a with the reason when they could not be read."""

from __future__ import annotations

from typing import Any

from openslob.report.blocks import NA, fmt, section, table

RATIOS = (
    ("zlib_4k", "zlib-1, 4 KiB chunks"),
    ("lz4_4k", "lz4, 4 KiB chunks"),
    ("zlib_8k", "zlib-1, 8 KiB chunks"),
    ("lz4_8k", "lz4, 8 KiB chunks"),
    ("dedupe_4k", "dedupe, 4 KiB chunks"),
)


def measured(run: dict[str, Any]) -> dict[str, Any] | None:
    """The measurement a run.json holds (None: a run from before it was measured)."""
    found = (run.get("engine") or {}).get("dataset_compressibility")
    return found if isinstance(found, dict) else None


def storage_lines(run: dict[str, Any]) -> list[str]:
    found = measured(run)
    if found is None:
        return []
    lines = section("What the storage sees (data set, measured before the run)")
    if found.get("reason"):
        return [*lines, f"Compression and dedupe ratios: {NA} ({found['reason']})"]
    rows = [[name, f"{fmt(found.get(key), 2)}:1"] for key, name in RATIOS]
    rows.append(["zero bytes", fmt(found.get("zero_bytes_pct"), 1, " %")])
    lines += table(["ratio (raw : stored)", "value"], rows)
    sampled = (found.get("sampled_bytes") or 0) / 2**20
    total = (found.get("file_bytes") or 0) / 2**20
    lines.append(
        f"Sampled {sampled:,.1f} MiB of {total:,.1f} MiB of table files ({found.get('source')}); "
        "1.00:1 is incompressible."
    )
    return lines
