"""The HTML report's steady-state section: per run, the verdict, each ruled figure and the
steady window's figures beside the whole window's (the text report's tables,
report/steadytext.py, as HTML tables). Empty when no run has a STEADY_STATE rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openslob.report import escape
from openslob.report.steadytext import COMPARE_HEADERS, FIGURE_HEADERS, steady_tables, verdict


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f'<th scope="col">{escape.text(h)}</th>' for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape.text(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f'<table class="data steady"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def run_steady(name: str, run: dict[str, Any]) -> str:
    block = run.get("steady_state")
    if not block:
        return ""
    figures, compare = steady_tables(run)
    never = "" if block.get("reached") else " never"
    return (
        f'<div class="steady{never}"><h3>{escape.text(name)}</h3>'
        f"<p>{escape.text(verdict(block))}</p>"
        f"{_table(FIGURE_HEADERS, figures)}{_table(COMPARE_HEADERS, compare)}</div>"
    )


def steady_html(runs: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """Every run's block that has one (name, run.json)."""
    return "".join(run_steady(name, run) for name, run in runs)
