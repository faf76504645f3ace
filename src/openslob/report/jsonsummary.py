"""`slob run --json`: one JSON object on stdout summarising a run, for scripts.

Read from run.json only (the file beside it holds everything, histograms and time series
included): where the results are, status, the configuration, every metric (null when not
measured), the latency figures per op type without their histograms, the warnings and notes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SUMMARY_VERSION = 1


def _latency(blocks: dict[str, Any] | None) -> dict[str, Any] | None:
    if blocks is None:
        return None
    return {
        kind: None if block is None else {k: v for k, v in block.items() if k != "histogram"}
        for kind, block in blocks.items()
    }


def run_summary(run: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    engine = run.get("engine") or {}
    return {
        "summary_version": SUMMARY_VERSION,
        "results": str(run_dir),
        "run_json": str(run_dir / "run.json"),
        "status": run.get("status"),
        "error": run.get("error"),
        "label": run.get("label"),
        "engine": {k: engine.get(k) for k in ("name", "version", "target", "profile")},
        "sessions": len(run.get("sessions") or []),
        "window_seconds": (run.get("window") or {}).get("seconds"),
        "config": run.get("config"),
        "metrics": run.get("metrics"),
        "latency": _latency(run.get("latency")),
        "latency_intended": _latency(run.get("latency_intended")),
        "work_per_op": run.get("work_per_op"),
        "warnings": run.get("warnings") or [],
        "notes": run.get("notes") or [],
    }


def render_summary(run: dict[str, Any], run_dir: Path) -> str:
    return json.dumps(run_summary(run, run_dir), indent=2, default=str) + "\n"
