"""The text report's RATE block: offered vs achieved, lag, the verdict, both latencies.

Reads only run.json. Nothing for a closed-loop run (RATE=0, or a run.json from before RATE
existed). The verdict is run.json's `metrics.saturated`, made by model/rate.py's rule, which
the block prints with it: a saturated point is said to be one.
"""

from __future__ import annotations

import textwrap
from typing import Any

from openslob.model.rate import RULE
from openslob.report.blocks import WIDTH, fmt, latency_table, section


def _wrap_rule() -> list[str]:
    return textwrap.wrap(f"rule: {RULE}", WIDTH, subsequent_indent="      ")


def _pct(part: float | None, whole: float | None) -> str:
    if part is None or not whole:
        return "n/a"
    return f"{part / whole * 100:.1f} %"


def _mean_lag(run: dict[str, Any]) -> tuple[float | None, float | None]:
    """(Mean lag, mean service time) µs over all ops, from run.json's two latency blocks."""

    def total(blocks: dict[str, Any] | None) -> tuple[float, int]:
        parts = [b for b in (blocks or {}).values() if b and b.get("mean_us") is not None]
        return sum(b["mean_us"] * b["count"] for b in parts), sum(b["count"] for b in parts)

    (service_sum, ops), (intended_sum, timed) = (
        total(run.get("latency")),
        total(run.get("latency_intended")),
    )
    if not ops or ops != timed:
        return None, None
    return max(intended_sum - service_sum, 0.0) / ops, service_sum / ops


def rate_section(run: dict[str, Any]) -> list[str]:
    config, m = run.get("config") or {}, run.get("metrics") or {}
    if not config.get("RATE"):
        return []
    offered, achieved = m.get("offered_rate"), m.get("achieved_rate")
    seconds = (run.get("window") or {}).get("seconds")
    started = None if achieved is None or not seconds else round(achieved * seconds)
    dist = str(config.get("RATE_DIST") or "POISSON").lower()
    lines = section(f"Target rate (RATE={fmt(offered)} SLOBops/s, {dist} arrivals)")
    lines.append(
        f"offered {fmt(offered)}/s   achieved {fmt(achieved)}/s ({_pct(achieved, offered)})"
        f"   due but not started at the end: {fmt(m.get('backlog_ops'), 0)} ops"
    )
    late1, late10 = m.get("late_ops_1ms"), m.get("late_ops_10ms")
    lines.append(
        f"started late: > 1 ms {fmt(late1)} ({_pct(late1, started)})"
        f"   > 10 ms {fmt(late10)} ({_pct(late10, started)})"
        f"   largest lag {fmt(m.get('max_lag_us'), 0)} us"
    )
    lag, service = _mean_lag(run)
    if lag is not None and service:
        lines.append(
            f"mean lag {fmt(lag, 0)} us = {lag / service:.2f}x the mean service time "
            f"({fmt(service, 0)} us)"
        )
    verdict = m.get("saturated")
    if verdict is None:
        lines.append("verdict: n/a (no op was measured)")
    elif verdict:
        lines.append("verdict: SATURATED - the sessions could not keep this rate;")
        lines.append("         the latencies below describe an overloaded point")
    else:
        lines.append("verdict: kept up")
    lines += _wrap_rule()
    lines += section("SLOBop latency from the intended start (coordinated-omission corrected, us)")
    lines += latency_table(run.get("latency_intended"))
    lines.append(
        "From each op's scheduled start: what a user arriving on schedule waited. The table "
        "above is the service time, from the op's actual start."
    )
    return lines
