"""Find runs on disk: run directories, sweep directories, or any tree holding them.

A run directory holds run.json (and report.txt, timeseries.csv). A sweep directory holds
sweep.json and one run directory per point:

    SWEEP/sweep.json     {"schema_version": 1, "kind": "sweep", "label": str | None,
                          "created": ISO time, "repeat": runs per point,
                          "axes": {"UPDATE_PCT": [0, 10], "SESSIONS": [1, 2]},
                          "base": {fixed parameters by slob.conf name},
                          "points": [{"name": "update_pct-0_sessions-1",
                                      "point": "update_pct-0_sessions-1",
                                      "repeat": 1,
                                      "params": {"UPDATE_PCT": 0, "SESSIONS": 1},
                                      "status": "pending" | "running" | "complete" |
                                                "interrupted" | "failed",
                                      "run_dir": "update_pct-0_sessions-1",
                                      "started": ISO | None, "finished": ISO | None,
                                      "error": str | None}, ...]}
    SWEEP/sweep.csv      the analyze table of the complete runs (with their repeat)
    SWEEP/summary.csv    per point and figure: runs, median, min, max, CV % (summary.json too)
    SWEEP/<run name>/    a run directory: the point's name, and _repeat-K from the second
                         repeat on (REPEAT > 1: each point runs REPEAT times, interleaved)
A repeated `slob run` (REPEAT > 1) is a sweep of one point: RESULTS_DIR/repeat-LABEL with
repeat-1/, repeat-2/, … (its point has no name and no params).
Older sweep.json files have no "point" and "repeat": each entry is then its own point.
Oracle AWR / Statspack text reports (SLOB's awr.<pct>.<sessions>.txt, awr.txt.<sessions>) are
runs too: a report file, or a directory holding them, becomes run.json-shaped dicts
(oracle.to_run) labelled by the directory, so a directory of them plots as one sweep. RAC: a
global report, or instance reports of one snapshot pair, make one run of cluster figures
(oracle.combine). A report read only in part is still a run; its unread sections are named
in `errors`, like the files that could not be read at all.
Reports and analyses read only these files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from openslob.model.errors import OpenslobError
from openslob.oracle import (
    OracleReport,
    combine,
    looks_like_oracle_report,
    parse_report,
    to_run,
)
from openslob.oracle.model import label as label_report
from openslob.results.rundir import load_run

SWEEP_FILE = "sweep.json"
RUN_FILE = "run.json"
# where a directory is searched for Oracle reports: runit.sh writes awr.txt, older kits keep
# awr.txt.<sessions>, Statspack's spreport writes sp_<begin>_<end>.lst
ORACLE_NAMES = re.compile(r"\.(?:txt|lst)(?:\.\d+)?$", re.I)


@dataclass
class RunRef:
    """One run found on disk, with the sweep it belongs to (if any)."""

    path: Path
    run: dict[str, Any]
    sweep: str | None = None  # the sweep's label (or directory name)
    point: dict[str, Any] = field(default_factory=dict)  # the varied params of its point
    oracle: OracleReport | None = None  # the parsed report when the run is an Oracle report
    repeat: int | None = None  # which repeat of its sweep point (sweep.json), 1-based
    point_name: str | None = None  # the sweep point's name ("" for a repeated run's point)

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


def find_runs(
    paths: list[Path],
    errors: list[str] | None = None,
    oracle_names: re.Pattern[str] | None = None,
) -> list[RunRef]:
    """Every run under the given paths, sweeps in plan order, others sorted by path.

    A damaged run.json or sweep.json, or an Oracle report that cannot be read (or only in
    part), is appended to `errors` (one line naming the file, and the section) when a list is
    given, so the other files still count; else it raises. When nothing at all could be
    read, the error says why for every file.
    oracle_names: where an Oracle report's UPDATE_PCT and sessions are in its path (named
    groups pct, sessions); default SLOB/flashdba's awr.<pct>.<sessions>.txt and SLOB kits'
    awr.txt.<sessions>.
    """
    found: list[RunRef] = []
    seen: set[Path] = set()
    problems: list[str] = []
    for path in paths:
        if not path.exists():
            raise OpenslobError(f"{path}: no such file or directory")
        for ref in _runs_under(path, problems, oracle_names):
            key = ref.path.resolve()
            if key not in seen:
                seen.add(key)
                found.append(ref)
    if not found:
        names = ", ".join(str(p) for p in paths)
        if problems:  # say why each file was refused, not only that nothing was found
            raise OpenslobError(f"nothing could be read under {names}: " + "; ".join(problems))
        raise OpenslobError(f"no run.json or Oracle AWR/Statspack report found under {names}")
    if problems and errors is None:
        raise OpenslobError(problems[0])
    if errors is not None:
        errors.extend(problems)
    return found


def _runs_under(
    path: Path, errors: list[str], names: re.Pattern[str] | None = None
) -> list[RunRef]:
    if path.is_file():
        if path.name == SWEEP_FILE:
            return _readable(partial(_sweep_runs, errors=errors), path.parent, errors)
        if path.suffix == ".json":
            return _readable(_plain_run, path, errors)
        return _oracle_runs([path], errors, names)
    if (path / SWEEP_FILE).exists():
        return _readable(partial(_sweep_runs, errors=errors), path, errors)
    if (path / RUN_FILE).exists():
        return _readable(_plain_run, path, errors)
    reports = [p for p in sorted(path.iterdir()) if is_oracle_report_file(p)]
    refs = _oracle_runs(reports, errors, names)
    for child in sorted(p for p in path.iterdir() if p.is_dir()):
        refs.extend(_runs_under(child, errors, names))
    return refs


def _plain_run(path: Path) -> list[RunRef]:
    return [RunRef(path.parent if path.is_file() else path, load_run(path))]


def _readable(read: Callable[[Path], list[RunRef]], path: Path, errors: list[str]) -> list[RunRef]:
    """The runs `read` finds at `path`; a damaged run.json or sweep.json (a full disk, an
    editor) is named in `errors` instead, so the other runs of a tree still count."""
    try:
        return read(path)
    except OpenslobError as exc:
        errors.append(str(exc))
        return []


def oracle_reports(refs: list[RunRef]) -> list[OracleReport]:
    """The parsed reports when every run is an Oracle report (awr_info's own columns then
    apply), else []."""
    reports = [ref.oracle for ref in refs if ref.oracle is not None]
    return reports if reports and len(reports) == len(refs) else []


def is_oracle_report_file(path: Path) -> bool:
    if not path.is_file() or not ORACLE_NAMES.search(path.name):
        return False
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return looks_like_oracle_report(f.read(20_000))
    except OSError:
        return False


def _oracle_runs(
    files: list[Path], errors: list[str], names: re.Pattern[str] | None
) -> list[RunRef]:
    """Oracle reports as runs, labelled by their directory (one sweep per directory); RAC
    reports of one snapshot pair make one cluster run."""
    reports: list[OracleReport] = []
    for file in files:
        try:
            report = parse_report(file.read_text(encoding="utf-8", errors="replace"), str(file))
        except OSError as exc:
            errors.append(f"{file}: cannot read ({exc.strerror or exc})")
            continue
        except OpenslobError as exc:
            errors.append(str(exc))
            continue
        errors.extend(report.problems)
        label_report(report, file, names)
        reports.append(report)
    refs = []
    for report in combine(reports):
        file = Path(report.name.split(" + ")[0])
        run = to_run(report, file)
        point = {
            k: run["config"][k] for k in ("UPDATE_PCT", "SESSIONS") if run["config"][k] is not None
        }
        refs.append(RunRef(file, run, file.resolve().parent.name, point, oracle=report))
    return refs


def _sweep_runs(path: Path, errors: list[str]) -> list[RunRef]:
    sweep = load_sweep(path)
    label = sweep_label(path, sweep)
    refs = []
    for point in sweep.get("points", []):
        run_dir = path / point["run_dir"]
        if (run_dir / RUN_FILE).exists():

            def read(run_dir: Path, point: dict[str, Any] = point) -> list[RunRef]:
                return [
                    RunRef(
                        run_dir,
                        load_run(run_dir),
                        label,
                        dict(point["params"]),
                        repeat=point.get("repeat"),
                        point_name=point.get("point", point["name"]),
                    )
                ]

            refs += _readable(read, run_dir, errors)
    return refs
