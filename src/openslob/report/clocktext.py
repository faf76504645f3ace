"""The servers' clocks in the text report: each instance's measured offset against the
client's (run.json instances[].clock, runner/clocks.py) and when its sessions' first window
ops started after the barrier."""

from __future__ import annotations

import textwrap
from typing import Any

from openslob.report.blocks import NA, WIDTH, fmt


def clock_lines(run: dict[str, Any]) -> list[str]:
    """One line per instance (its number and target when there are several)."""
    instances = run.get("instances") or []
    lines = []
    for k, inst in enumerate(instances):
        clock = inst.get("clock")
        name = f"{k + 1} {inst['target']}: " if len(instances) > 1 else ""
        if not clock:
            lines.append(f"clock {name}n/a (not measured: a run.json from before clocks were)")
            continue
        lo, hi = clock.get("start_lag_ms_min"), clock.get("start_lag_ms_max")
        starts = NA if lo is None or hi is None else f"{fmt(lo, 1)}-{fmt(hi, 1)} ms"
        text = (
            f"clock {name}server {clock['offset_ms']:+.1f} ms against the client "
            f"(±{clock['rtt_ms'] / 2:.2f} ms, fastest of {clock['round_trips']} round trips); "
            f"first window ops {starts} after the barrier"
        )
        lines += textwrap.wrap(text, WIDTH, subsequent_indent=" " * 6, break_on_hyphens=False)
    return lines
