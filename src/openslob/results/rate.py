"""What a RATE run's results say about its schedule: the saturation warning of run.json.

A point that could not keep the rate is never reported as if it had: run.json `warnings`
names offered and achieved rates, the late ops and the backlog, and the rule
(model/rate.py) that made the verdict. Closed-loop runs (RATE=0) get nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openslob.config.resolve import Config
from openslob.model import rate


def rate_warnings(
    config: Config, warmup_service_us: float | None, metrics: Mapping[str, Any]
) -> list[str]:
    if not config.p.rate:
        return []
    warnings = []
    if metrics.get("saturated"):
        offered, achieved = metrics.get("offered_rate"), metrics.get("achieved_rate")
        kept = achieved / offered * 100 if offered and achieved is not None else None
        late, backlog = metrics.get("late_ops_10ms") or 0, metrics.get("backlog_ops") or 0
        warnings.append(
            f"saturated: offered {offered:,.1f} SLOBops/s, achieved "
            + ("n/a" if achieved is None else f"{achieved:,.1f}")
            + ("" if kept is None else f" ({kept:.1f} %)")
            + f"; {late:,} ops started more than 10 ms late, {backlog:,.0f} were due but not "
            f"started at the window's end ({rate.RULE}). The latencies describe a point "
            "beyond what these sessions can deliver: lower RATE or add sessions"
        )
    if warmup_service_us is None and not config.p.warmup:
        warnings.append(
            "no warm-up: SESSIONS was not checked against RATE (Little's law needs the "
            "warm-up's service time)"
        )
    return warnings
