"""The files a sweep (or a repeated run) leaves beside its run directories once it ends.

    sweep.csv              the analyze table, one row per run (with its repeat)
    summary.csv / .json    per point and figure: runs, median, min, max, CV (analysis.repeats)
    plots/petal_iops|mbps  petal plots, each point its median with min–max bars

They are rendered from the run directories only, so rerunning a sweep rewrites them whole.
"""

from __future__ import annotations

from pathlib import Path

from openslob.analysis.awrinfo import analyze_rows, render_csv
from openslob.analysis.repeats import group_points, write_summary
from openslob.model.errors import OpenslobError
from openslob.results.collect import find_runs
from openslob.results.rundir import write_atomic


def finish_sweep(path: Path, plots: bool) -> list[Path]:
    """Write the files; returns them ([] when no run of the sweep can be read yet)."""
    try:
        refs = find_runs([path])
    except OpenslobError:
        return []
    written = [write_atomic(path / "sweep.csv", render_csv(analyze_rows(refs)))]
    written += write_summary(path, group_points(refs))
    if plots:
        from openslob.report.plots import petal, save

        for x in ("iops", "mbps"):
            written += save(petal(refs, x=x), path / "plots" / f"petal_{x}")
    return written
