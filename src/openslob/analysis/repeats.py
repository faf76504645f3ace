"""Repeated points: a sweep point's runs together, with median, min, max and CV per figure.

- `group_points`: the runs of each sweep point (its repeats, sweep.json "point"/"repeat")
  together; a run outside a sweep, or of a sweep written before repeats, is a point alone.
  Runs are grouped by the sweep's own point, not by equal parameters: two points of a
  page-size sweep have the same workload and are still two points.
- `summary_rows` / `render_summary_csv` / `render_summary_json`: per point and figure of the
  metrics table, the runs that measured it, median, min, max and CV (summary.csv).
- `render_point_table`: `slob analyze`'s table with one row per point, every figure as
  "median (min–max)", and the figures whose CV exceeds a limit named in SPREAD.

Only complete runs count: an interrupted or failed repeat is named, not averaged in.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openslob.analysis.awrinfo import COLUMNS, TABLE_WIDTH, Column, analyze_row, render_table
from openslob.analysis.figures import value
from openslob.analysis.stats import Spread, range_text, spread
from openslob.model.metrics import METRICS
from openslob.model.states import RunStatus
from openslob.results.collect import RunRef
from openslob.results.rundir import write_atomic

DEFAULT_MAX_CV_PCT = 10.0  # `slob analyze --max-cv`: a point noisier than this is flagged
SUMMARY_FIELDS = ("sweep", "point", "figure", "unit", "n", "median", "min", "max", "cv_pct")


@dataclass
class PointRuns:
    """The runs of one point (one run when it was not repeated)."""

    name: str
    sweep: str | None
    params: dict[str, Any]
    refs: list[RunRef] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)  # runs left out: not complete

    def spread(self, address: str) -> Spread:
        return spread([value(ref.run, address) for ref in self.refs])


def _key(ref: RunRef) -> tuple[str, ...]:
    if ref.repeat is None:
        return ("run", str(ref.path.resolve()))
    return ("point", str(ref.path.parent.resolve()), json.dumps(ref.point, sort_keys=True))


def _point_name(ref: RunRef) -> str:
    if ref.repeat is None:
        return ref.name
    return ref.point_name or ref.sweep or ref.path.parent.name


def group_points(refs: Iterable[RunRef]) -> list[PointRuns]:
    """Points in the order their first run comes (a sweep's plan order)."""
    points: dict[tuple[str, ...], PointRuns] = {}
    for ref in refs:
        point = points.get(_key(ref))
        if point is None:
            point = points[_key(ref)] = PointRuns(_point_name(ref), ref.sweep, dict(ref.point))
        if ref.run.get("status", RunStatus.COMPLETE) == RunStatus.COMPLETE:
            point.refs.append(ref)
        else:
            point.incomplete.append(ref.name)
    return list(points.values())


def repeated(points: Sequence[PointRuns]) -> bool:
    return any(len(p.refs) + len(p.incomplete) > 1 for p in points)


def summary_figures(points: Sequence[PointRuns]) -> list[str]:
    """The metrics table's figures some run of these points measured, in table order."""
    return [
        key
        for key in METRICS
        if any(value(ref.run, key) is not None for p in points for ref in p.refs)
    ]


def summary_rows(points: Sequence[PointRuns]) -> list[dict[str, Any]]:
    """Per point and figure: n, median, min, max, cv_pct (None: not measured / one run)."""
    rows = []
    for point in points:
        for key in summary_figures(points):
            stats = point.spread(key)
            rows.append(
                {
                    "sweep": point.sweep,
                    "point": point.name,
                    "figure": key,
                    "unit": METRICS[key].unit,
                    **stats.as_dict(),
                }
            )
    return rows


def render_summary_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, SUMMARY_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in SUMMARY_FIELDS})
    return buf.getvalue()


def render_summary_json(points: Sequence[PointRuns]) -> str:
    figures = summary_figures(points)
    data = [
        {
            "sweep": p.sweep,
            "point": p.name,
            "params": p.params,
            "runs": [str(ref.path) for ref in p.refs],
            "not_complete": p.incomplete,
            "figures": {key: p.spread(key).as_dict() for key in figures},
        }
        for p in points
    ]
    return json.dumps(data, indent=2, default=str) + "\n"


# --- the analyze table, one row per point ----------------------------------------------------


def spread_flags(point: PointRuns, max_cv_pct: float) -> list[str]:
    """The figures of the table whose CV exceeds the limit: 'PREADS/s 23%'."""
    flags = []
    for column in COLUMNS:
        if column.metric is None:
            continue
        cv = point.spread(column.metric).cv_pct
        if cv is not None and cv > max_cv_pct:
            flags.append(f"{column.header} {cv:.0f}%")
    return flags


def point_row(point: PointRuns, max_cv_pct: float) -> dict[str, str]:
    rows = [analyze_row(ref) for ref in point.refs]
    cells: dict[str, str] = {}
    for column in COLUMNS:
        values = [row.get(column.key) for row in rows]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if column.key == "run":
            cells["run"] = point.name
        elif column.key == "repeat":
            continue
        elif column.digits is not None and numbers:
            cells[column.key] = range_text(spread(numbers), column.cell)
        else:
            known = list(dict.fromkeys(str(v) for v in values if v is not None))
            cells[column.key] = ", ".join(known) if known else column.missing
    cells["n"] = str(len(point.refs))
    if point.incomplete:
        cells["n"] += f" (+{len(point.incomplete)} not complete)"
    cells["spread"] = ", ".join(spread_flags(point, max_cv_pct)) or "-"
    return cells


NARROW_FLAGS = 2  # SPREAD flags a narrow point table shows (--wide: all)


def render_point_table(
    points: Sequence[PointRuns], max_cv_pct: float, *, wide: bool = False
) -> str:
    """The analyze columns as "median (min–max)" per point, N runs, SPREAD flags; not
    `wide`: the columns that fit 100 columns (awrinfo.fit_columns)."""
    # the cells are text already; numbers keep their right alignment (digits)
    text_columns = [
        Column(c.key, c.header, c.unit, digits=c.digits, missing=c.missing)
        for c in COLUMNS
        if c.key != "repeat"
    ]
    columns = [
        text_columns[0],
        Column("n", "N", ""),
        *text_columns[1:],
        Column("spread", f"SPREAD (CV > {max_cv_pct:g}%)", ""),
    ]
    rows = [point_row(p, max_cv_pct) for p in points]
    if not wide:  # the first flags and how many more: the line stays within the width
        for row, point in zip(rows, points, strict=True):
            flags = spread_flags(point, max_cv_pct)
            if len(flags) > NARROW_FLAGS:
                row["spread"] = (
                    ", ".join(flags[:NARROW_FLAGS]) + f" +{len(flags) - NARROW_FLAGS} more"
                )
    table = render_table(rows, columns, wide=wide, keep=("spread",))
    flagged = sum(1 for p in points if spread_flags(p, max_cv_pct))
    note = (
        f"median (min–max) over each point's complete runs; CV = standard deviation ÷ mean. "
        f"{flagged} of {len(points)} points have a figure with CV > {max_cv_pct:g}%: "
        "more repeats or a longer RUN_TIME narrow them."
        if flagged
        else f"median (min–max) over each point's complete runs; no CV > {max_cv_pct:g}%."
    )
    return table + "\n".join(textwrap.wrap(note, TABLE_WIDTH)) + "\n"


def write_summary(path: Path, points: Sequence[PointRuns]) -> list[Path]:
    """summary.csv and summary.json of a sweep directory (whole or not at all)."""
    return [
        write_atomic(path / "summary.csv", render_summary_csv(summary_rows(points))),
        write_atomic(path / "summary.json", render_summary_json(points)),
    ]
