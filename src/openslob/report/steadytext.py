"""The reports' steady-state block: the rule, when it was met (or that it never was), each
figure's slope and deviation, and the figures of the steady window beside the whole window's.

Reads only run.json's `steady_state` (runner/steadysink.py) and the whole window's metrics
and latency. Nothing for a run without a STEADY_STATE rule. `steady_tables` is what the
text and the HTML reports both print.
"""

from __future__ import annotations

import textwrap
from typing import Any

from openslob.model.histogram import merged_ops
from openslob.report.blocks import NA, WIDTH, fmt, fmt_us, section, table

FIGURE_HEADERS = ["figure", "rule", "slope %", "deviation %", "met"]
COMPARE_HEADERS = ["", "seconds", "SLOBops/s", "IOPS", "MB/s", "op p50", "op p99"]


def _sum(*values: Any) -> float | None:
    return None if any(v is None for v in values) else float(sum(values))


def verdict(block: dict[str, Any]) -> str:
    """One sentence: reached when, or plainly never."""
    evaluated = fmt(block.get("evaluated_s"), 1)
    if not block.get("reached"):
        return (
            f"Steady state was NEVER reached ({block['rules']}, ramp {fmt(block['ramp_s'], 0)} s, "
            f"window {fmt(block['window_s'], 0)} s; {evaluated} s of the window evaluated): "
            "only the whole window's figures exist."
        )
    end = "" if block.get("steady_at_end") else "; it did not hold to the end of the window"
    stop = " The run stopped there (--stop-on-steady)." if block.get("stop_on_steady") else ""
    return (
        f"Steady state reached {fmt(block['reached_at_s'], 1)} s into the window "
        f"({block['rules']}, ramp {fmt(block['ramp_s'], 0)} s, window "
        f"{fmt(block['window_s'], 0)} s){end}.{stop}"
    )


def steady_tables(run: dict[str, Any]) -> tuple[list[list[str]], list[list[str]]]:
    """(Each ruled figure's row, [whole window row, steady window row])."""
    block = run["steady_state"]
    figures = [
        [
            f["figure"],
            " and ".join(f"{c['measure']} < {c['limit_pct']:g} %" for c in f["criteria"]),
            fmt(f["slope_pct"], 1),
            fmt(f["dev_pct"], 1),
            "yes" if f["met"] else "no",
        ]
        for f in block["figures"]
    ]
    m, window = run.get("metrics") or {}, run.get("window") or {}
    hist = merged_ops(run.get("latency"))
    whole = [
        "whole window",
        fmt(window.get("seconds"), 1),
        fmt(m.get("slobops_per_s")),
        fmt(_sum(m.get("pio_reads_per_s"), m.get("pio_writes_per_s")), 0),
        fmt(_sum(m.get("pio_read_mb_per_s"), m.get("pio_write_mb_per_s"))),
        fmt_us(hist.percentile_us(50) if hist else None),
        fmt_us(hist.percentile_us(99) if hist else None),
    ]
    s = block.get("steady")
    if s is None:
        steady = ["steady window", *[NA] * 6]
    else:
        start = (block["reached_at_s"] or 0) - s["seconds"]
        steady = [
            f"steady window ({fmt(start, 0)}-{fmt(block['reached_at_s'], 0)} s)",
            fmt(s["seconds"], 1),
            fmt(s["slobops_per_s"]),
            fmt(s["iops"], 0),
            fmt(s["mb_per_s"]),
            fmt_us(s["op_p50_us"]),
            fmt_us(s["op_p99_us"]),
        ]
    return figures, [whole, steady]


def steady_section(run: dict[str, Any]) -> list[str]:
    block = run.get("steady_state")
    if not block:
        return []
    figures, compare = steady_tables(run)
    lines = section("Steady state")
    lines += textwrap.wrap(verdict(block), WIDTH)
    over = "the first steady window" if block.get("reached") else "the last full window"
    measured = any(f["dev_pct"] is not None for f in block["figures"])
    lines.append(f"Each figure over {over}:" if measured else "No full window after the ramp.")
    lines += table(FIGURE_HEADERS, figures, align="llrrl")
    lines.append("")
    lines += table(COMPARE_HEADERS, compare)
    lines += textwrap.wrap(
        "IOPS and MB/s: the database's physical reads + writes; slope: least-squares slope x "
        "window length / mean; deviation: max |x - mean| / mean.",
        WIDTH,
    )
    return lines
