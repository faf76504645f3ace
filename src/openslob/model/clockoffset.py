"""A server's clock offset against the client's (runner/clocks.py measures it): what run.json
records of it (instances[].clock) and when it warns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Above this the server's clock is not synchronised with the client's (NTP/chrony keep a
# LAN within ~1 ms; one host reads one clock): the barrier is corrected, but the server's own
# timestamps (logs, the horizon's holders) are that far off the report's, and a clock nobody
# synchronises may be stepped or drift during the window. The bound is the barrier's own
# goal: an offset under 5 ms would not move a window start by more than that even uncorrected.
OFFSET_WARN_MS = 5.0
# Above this half-RTT the estimate itself is too uncertain for a 5 ms barrier.
UNCERTAINTY_WARN_MS = 5.0
# The offset moved this much between the warm-up's barrier and the window's (beyond what the
# two estimates' uncertainties explain): the server's clock was stepped or drifts.
DRIFT_WARN_MS = 5.0


@dataclass
class ClockReading:
    """One server's clock offset against the client's (server minus client), from the round
    trip with the smallest RTT among `round_trips`."""

    offset_s: float
    rtt_s: float
    round_trips: int

    @property
    def uncertainty_s(self) -> float:
        return self.rtt_s / 2


def warnings(target: str, window: ClockReading, warmup: ClockReading | None) -> list[str]:
    """What a run.json reader must know about this server's clock (see the bounds above)."""
    out = []
    offset_ms, plus_minus_ms = window.offset_s * 1000, window.uncertainty_s * 1000
    if abs(offset_ms) > OFFSET_WARN_MS:
        out.append(
            f"the server clock of {target} reads {offset_ms:+.1f} ms off the client's "
            f"(more than {OFFSET_WARN_MS:g} ms): the barriers were corrected by it, but the "
            "server's own timestamps (its logs, the horizon's holders) are that far off the "
            "report's; synchronise the clocks (NTP, chrony)"
        )
    if plus_minus_ms > UNCERTAINTY_WARN_MS:
        out.append(
            f"the server clock of {target} is known to ±{plus_minus_ms:.1f} ms only (half "
            f"the fastest of {window.round_trips} round trips): the instances' windows may "
            f"start up to {plus_minus_ms:.1f} ms apart"
        )
    if warmup is not None:
        drift_ms = abs(window.offset_s - warmup.offset_s) * 1000
        slack_ms = (window.uncertainty_s + warmup.uncertainty_s) * 1000
        if drift_ms - slack_ms > DRIFT_WARN_MS:
            out.append(
                f"the server clock of {target} moved {drift_ms:.1f} ms against the client's "
                "during the warm-up (stepped or drifting): the loop times its ops with it"
            )
    return out


def as_json(
    window: ClockReading | None, warmup: ClockReading | None, lags_s: list[float]
) -> dict[str, Any] | None:
    """run.json instances[].clock: the window barrier's estimate, the warm-up's, and when the
    instance's sessions started their first window op (client clock, after the barrier)."""
    if window is None:
        return None
    return {
        "offset_ms": round(window.offset_s * 1000, 3),
        "rtt_ms": round(window.rtt_s * 1000, 3),
        "round_trips": window.round_trips,
        "warmup_offset_ms": None if warmup is None else round(warmup.offset_s * 1000, 3),
        "start_lag_ms_min": round(min(lags_s) * 1000, 3) if lags_s else None,
        "start_lag_ms_max": round(max(lags_s) * 1000, 3) if lags_s else None,
    }
