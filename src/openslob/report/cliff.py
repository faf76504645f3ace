"""The report's Cliffs section: run.json `cliffs` (model/cliff.py), one row per episode with
its time into the window, size, duration, detection delay and measured cause. Nothing when
the run has no cliff judgement (CLIFF=off, older runs)."""

from __future__ import annotations

import textwrap
from typing import Any

from openslob.model.cliff import FIGURES
from openslob.report.blocks import WIDTH, fmt, section, table


def _value(figure: str, value: float) -> str:
    unit = " us" if figure == "p99" else "/s"
    return f"{value:,.0f}{unit}"


def cliff_section(run: dict[str, Any]) -> list[str]:
    cliffs = run.get("cliffs")
    if not cliffs:
        return []
    origin = cliffs.get("window_start_s")
    lines = section("Cliffs (live)")
    lines += textwrap.wrap(
        f"Rule {cliffs['rule']}: each interval against the median of the previous "
        f"{cliffs['window_intervals']} calm intervals, {cliffs['confirm_intervals']} in a row "
        "open or close an episode.",
        WIDTH,
    )
    episodes = cliffs.get("episodes") or []
    if not episodes or origin is None:
        lines.append("No cliff in the window.")
        return lines
    window_s = (run.get("window") or {}).get("seconds")
    rows = []
    causes = []
    for n, e in enumerate(episodes, 1):
        start = e["start_s"] - origin
        end = None if e["end_s"] is None else e["end_s"] - origin
        last = end if end is not None else window_s
        rows.append(
            [
                n,
                FIGURES[e["figure"]][1],
                f"{start:,.1f}",
                "open" if end is None else f"{end:,.1f}",
                fmt(None if last is None else last - start, 1),
                f"{e['size_pct']:+.0f} %",
                f"{_value(e['figure'], e['baseline'])} -> {_value(e['figure'], e['worst'])}",
                f"{e['detected_s'] - e['start_s']:,.1f}",
            ]
        )
        causes += textwrap.wrap(f"  {n}: {e['cause']}", WIDTH, subsequent_indent="     ")
    lines += table(
        ["#", "figure", "from s", "to s", "lasted s", "worst", "baseline -> worst", "seen after s"],
        rows,
        "rlrrrrrr",
    )
    lines.append("Times are seconds into the window; open: still below/above at the window's end.")
    lines += causes
    return lines


def cliff_marks(run: dict[str, Any], rows: list[dict[str, str]]) -> list[tuple[float, float, str]]:
    """The live episodes as shaded spans of the time-series charts (start s, end s, text) on
    timeseries.csv's elapsed seconds; an open one runs to the last row's end."""
    episodes = (run.get("cliffs") or {}).get("episodes") or []
    ends = [float(r["elapsed_s"]) for r in rows if r.get("elapsed_s")]
    spans: dict[tuple[float, float], list[str]] = {}  # one band per span: figures together
    for e in episodes:
        end = e["end_s"] if e["end_s"] is not None else (max(ends) if ends else e["start_s"])
        spans.setdefault((e["start_s"], end), []).append(f"{e['figure']} {e['size_pct']:+.0f} %")
    return [(start, end, "cliff " + ", ".join(texts)) for (start, end), texts in spans.items()]
