"""HTML tables for the report: the awr_info table as a real table, sortable in the page.

Each cell carries its raw value in `data-v` (a number, or text) so report.js sorts by value,
not by the formatted text ("1,234" < "987" as text). Number columns are right-aligned and
their header shows the unit; a figure that was not measured shows "n/a" and sorts last.
Reads rows that analysis/awrinfo.py and analysis/repeats.py build: the same rows as
`slob analyze`, so the page and the terminal never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from openslob.analysis import repeats
from openslob.analysis.awrinfo import COLUMNS, Column, shown_columns
from openslob.analysis.stats import spread
from openslob.report import escape

SortValue = float | str | None


def _attr(value: SortValue) -> str:
    if value is None:
        return ""
    return escape.text(repr(float(value)) if isinstance(value, int | float) else str(value))


def _header(column: Column) -> str:
    unit = f'<span class="unit">{escape.text(column.unit)}</span>' if column.unit else ""
    kind = "num" if column.digits is not None else "text"
    return (
        f'<th scope="col" class="{kind}" data-type="{kind}" tabindex="0" '
        f'title="sort by {escape.text(column.header)}">{escape.text(column.header)}{unit}</th>'
    )


def table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[Column],
    *,
    sort_value: Callable[[dict[str, Any], Column], SortValue] | None = None,
    caption: str = "",
    css: str = "data",
) -> str:
    """A sortable table; `sort_value` gives a cell's raw value when the row holds text."""
    head = "".join(_header(c) for c in columns)
    body = []
    for row in rows:
        cells = []
        for column in columns:
            raw = row.get(column.key)
            shown = column.cell(raw)
            key = sort_value(row, column) if sort_value else raw
            if isinstance(key, bool):
                key = str(key)
            kind = "num" if column.digits is not None else "text"
            na = " na" if shown == column.missing else ""
            cells.append(f'<td class="{kind}{na}" data-v="{_attr(key)}">{escape.text(shown)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{escape.text(caption)}</caption>" if caption else ""
    return (
        f'<div class="table-wrap"><table class="{css} sortable">{cap}<thead><tr>{head}</tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _useful(columns: Sequence[Column], rows: Sequence[dict[str, Any]]) -> list[Column]:
    """Without SWEEP when every row is of one sweep (the page's title names it): a narrower
    table that fits the page."""
    sweeps = {row.get("sweep") for row in rows}
    return [c for c in columns if c.key != "sweep" or len(sweeps) > 1]


def runs_table(rows: list[dict[str, Any]], caption: str = "") -> str:
    """The analyze table of single runs (one row per run)."""
    return table(rows, _useful(shown_columns(rows), rows), caption=caption)


def points_table(points: Sequence[repeats.PointRuns], max_cv_pct: float) -> str:
    """One row per repeated point: "median (min–max)" cells, sorted by the median."""
    columns = [c for c in COLUMNS if c.key != "repeat"]
    as_text = [Column(c.key, c.header, c.unit, digits=c.digits, missing=c.missing) for c in columns]
    as_text.insert(1, Column("n", "N", "runs", digits=0))
    as_text.append(Column("spread", f"SPREAD (CV > {max_cv_pct:g}%)", ""))
    rows = [{**repeats.point_row(p, max_cv_pct), "_point": p} for p in points]
    by_key = {c.key: c for c in columns}

    def sort_value(row: dict[str, Any], column: Column) -> SortValue:
        """A number column sorts by the median its cell shows; text by the text."""
        point, source = row["_point"], by_key.get(column.key)
        if column.key == "n":
            return len(point.refs)
        if source is None or source.digits is None:
            return row.get(column.key)
        if source.metric is not None:
            return point.spread(source.metric).median
        return spread([source.compute(r) for r in point.refs] if source.compute else []).median

    # the cells are text already ("median (min–max)"); Column.cell shows text as it is, and
    # a column with digits keeps its right alignment
    return table(rows, _useful(as_text, rows), sort_value=sort_value)
