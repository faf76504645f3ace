"""The files a sweep (or a repeated run) leaves beside its run directories once it ends.

    sweep.csv              the analyze table, one row per run (with its repeat)
    summary.csv / .json    per point and figure: runs, median, min, max, CV (analysis.repeats)
    plots/petal_iops|mbps  petal plots, each point its median with min–max bars
    scaling.csv / .json    a sweep over the number of instances: per N the totals, the
                           per-instance min/median/max and the efficiency; the USL fit
                           (analysis/scaling.py); plots/scaling (report/scalingplot.py)

They are rendered from the run directories only, so rerunning a sweep rewrites them whole.
"""

from __future__ import annotations

from pathlib import Path

from openslob.analysis.awrinfo import analyze_rows, render_csv
from openslob.analysis.repeats import group_points, write_summary
from openslob.model.errors import OpenslobError
from openslob.results.collect import RunRef, find_runs
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
    return written + write_scaling(path, refs, plots)


def write_scaling(path: Path, refs: list[RunRef], plots: bool) -> list[Path]:
    """scaling.csv / .json (and plots/scaling) when the runs cover several instance counts."""
    from openslob.analysis.scaling import curves
    from openslob.report.scalingtable import render_csv, render_json

    found = curves(refs)
    if not found:
        return []
    written = [
        write_atomic(path / "scaling.csv", render_csv(found)),
        write_atomic(path / "scaling.json", render_json(found)),
    ]
    if plots:
        from openslob.report.plots import save
        from openslob.report.scalingplot import scaling

        written += save(scaling(found), path / "plots" / "scaling")
    return written
