"""Find runs on disk: run directories, sweep directories, or any tree holding them.

A run directory holds run.json (and report.txt, timeseries.csv). A sweep directory holds
sweep.json and one run directory per point:

    SWEEP/sweep.json     {"schema_version": 1, "kind": "sweep", "label": str | None,
                          "created": ISO time, "axes": {"UPDATE_PCT": [0, 10], "SESSIONS": [1, 2]},
                          "base": {fixed parameters by slob.conf name},
                          "points": [{"name": "update_pct-0_sessions-1",
                                      "params": {"UPDATE_PCT": 0, "SESSIONS": 1},
                                      "status": "pending" | "running" | "complete" |
                                                "interrupted" | "failed",
                                      "run_dir": "update_pct-0_sessions-1",
                                      "started": ISO | None, "finished": ISO | None,
                                      "error": str | None}, ...]}
    SWEEP/sweep.csv      the analyze table of the complete points
    SWEEP/<point name>/  a run directory
Reports and analyses read only these files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openslob.errors import OpenslobError
from openslob.results import load_run

SWEEP_FILE = "sweep.json"
RUN_FILE = "run.json"


@dataclass
class RunRef:
    """One run found on disk, with the sweep it belongs to (if any)."""

    path: Path
    run: dict[str, Any]
    sweep: str | None = None  # the sweep's label (or directory name)
    point: dict[str, Any] = field(default_factory=dict)  # the varied params of its point

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def label(self) -> str:
        """Legend text: sweep label, else the run's own label, else its directory name."""
        return self.sweep or self.run.get("label") or self.path.name


def load_sweep(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / SWEEP_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise OpenslobError(f"{path / SWEEP_FILE}: not a readable sweep file ({exc})") from exc


def sweep_label(path: Path, sweep: dict[str, Any]) -> str:
    return sweep.get("label") or path.name


def find_runs(paths: list[Path]) -> list[RunRef]:
    """Every run under the given paths, sweeps in plan order, others sorted by path."""
    found: list[RunRef] = []
    seen: set[Path] = set()
    for path in paths:
        if not path.exists():
            raise OpenslobError(f"{path}: no such file or directory")
        for ref in _runs_under(path):
            key = ref.path.resolve()
            if key not in seen:
                seen.add(key)
                found.append(ref)
    if not found:
        names = ", ".join(str(p) for p in paths)
        raise OpenslobError(f"no run.json found under {names}")
    return found


def _runs_under(path: Path) -> list[RunRef]:
    if path.is_file():
        if path.name == SWEEP_FILE:
            return _sweep_runs(path.parent)
        return [RunRef(path.parent, load_run(path))]
    if (path / SWEEP_FILE).exists():
        return _sweep_runs(path)
    if (path / RUN_FILE).exists():
        return [RunRef(path, load_run(path))]
    refs: list[RunRef] = []
    for child in sorted(p for p in path.iterdir() if p.is_dir()):
        refs.extend(_runs_under(child))
    return refs


def _sweep_runs(path: Path) -> list[RunRef]:
    sweep = load_sweep(path)
    label = sweep_label(path, sweep)
    refs = []
    for point in sweep.get("points", []):
        run_dir = path / point["run_dir"]
        if (run_dir / RUN_FILE).exists():
            refs.append(RunRef(run_dir, load_run(run_dir), label, dict(point["params"])))
    return refs
