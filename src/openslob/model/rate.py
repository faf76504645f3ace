"""Target-rate runs (RATE > 0): each session's schedule, lag, and the saturation verdict.

Contract:
- A session's share of RATE is RATE / sessions (`session_rate`); its loop draws the gaps
  between intended starts (exponential for POISSON, 1/rate for UNIFORM) and carries the next
  intended start from one CALL to the next (`next_start`, like `op_base`). UNIFORM
  schedules are staggered by `uniform_offset` so that the run's arrivals are evenly spread
  rather than N at a time.
- Each op is timed twice: the service time (from its actual start) and the latency from its
  intended start (coordinated-omission corrected, as wrk2/YCSB do). The difference is the
  op's lag: how late it started. Ops that started more than 1 ms and 10 ms late are counted,
  and the largest lag is kept.
- At the end of the window a session may be behind its schedule: the ops due by the end but
  never started are the backlog (behind_s × the session's rate: the expected count).
- SATURATION (`saturated`): a point is saturated when the sessions did not keep up with the
  schedule, i.e. either
    * they started fewer than ACHIEVED_MIN_PCT % (98 %) of the ops due in the window
      (started / (started + backlog)), or
    * the ops' mean lag was more than LAG_MAX_SERVICE (10) times their mean service time
      and more than LAG_FLOOR_US (1 ms). Each session is a single-server queue for its own
      arrivals: a wait ten times the service means a utilisation above ~90 % (M/G/1),
      where the queue, not the database, makes the latency. The floor keeps the wake-up
      jitter of sleeping sessions under sub-millisecond ops from counting as saturation.
  The due count is the schedule's own (for POISSON the number of arrivals actually drawn),
  so the randomness of Poisson arrivals (±√n) is not mistaken for saturation. Late ops
  (> 1 ms, > 10 ms) are counted and reported but decide nothing: with Poisson arrivals an op
  that arrives while its session is busy waits for it, so ops of 10 ms or more make some
  ops 10 ms late at any load. None for a closed-loop run: it has no schedule to fall behind.
- Little's law (`littles_law_warning`): sessions busy on average RATE × service time; at
  more than LITTLE_MAX_UTIL of SESSIONS the schedule cannot be kept (queueing grows without
  bound near 100 %); said before the window from the warm-up's measured service time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from openslob.model.histogram import Histogram
from openslob.model.loop import LOOP_RESULT as R
from openslob.model.metrics import OP_KINDS

LATE_1MS_US = 1_000
LATE_10MS_US = 10_000
ACHIEVED_MIN_PCT = 98.0
LAG_MAX_SERVICE = 10.0
LAG_FLOOR_US = 1_000.0
LITTLE_MAX_UTIL = 0.9
RULE = (
    f"saturated when under {ACHIEVED_MIN_PCT:g} % of the ops due in the window started, or "
    f"their mean lag exceeded {LAG_MAX_SERVICE:g}x their mean service time (and 1 ms)"
)
# Result keys of the loops (every engine's) that only a paced run fills.
LAG_KEYS = tuple(f.key for f in (R.late_1ms, R.late_10ms, R.max_lag_us))


def session_rate(rate: float, sessions: int) -> float:
    """One session's share of RATE (ops/s); 0: closed loop."""
    return rate / sessions if rate and sessions else 0.0


def uniform_offset(rate: float, sessions: int, session_id: int) -> float:
    """Seconds after the phase's start of a UNIFORM session's first op: the sessions'
    schedules interleave so that the run's arrivals are evenly 1/RATE apart."""
    per_session = session_rate(rate, sessions)
    return (session_id % sessions) / sessions / per_session if per_session else 0.0


def saturated(
    started: int, backlog: float, mean_lag_us: float | None, mean_service_us: float | None
) -> bool:
    """The verdict of the module docstring's rule."""
    due = started + backlog
    if due <= 0:
        return False
    if started / due * 100 < ACHIEVED_MIN_PCT:
        return True
    if mean_lag_us is None or mean_service_us is None:
        return False
    return mean_lag_us > max(LAG_MAX_SERVICE * mean_service_us, LAG_FLOOR_US)


def mean_lag(results: Iterable[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """(Mean lag, mean service time) in µs of the ops the results timed: the mean latency
    from the intended start minus the mean service time, from the loops' histograms."""
    service, intended = Histogram(), Histogram()
    for result in results:
        for kind in OP_KINDS:
            service.merge(Histogram.from_json(result.get(R.hist(kind).key)))
            intended.merge(Histogram.from_json(result.get(R.hist(kind, intended=True).key)))
    if not service.count or service.count != intended.count:
        return None, None
    service_us, intended_us = service.mean_us(), intended.mean_us()
    assert service_us is not None and intended_us is not None
    return max(intended_us - service_us, 0.0), service_us


def window_figures(
    rate: float,
    share: float,
    per_session_rate: float,
    results: Iterable[Mapping[str, Any] | None],
    seconds: float | None,
) -> dict[str, Any]:
    """run.json's rate metrics of a set of sessions (an instance, `share` of the run's
    sessions) from their window results; all null for a closed-loop run."""
    keys: tuple[str, ...] = ("offered_rate", "achieved_rate", "late_ops_1ms", "late_ops_10ms")
    keys += ("max_lag_us", "backlog_ops", "saturated")
    if not rate:
        return dict.fromkeys(keys)
    done = [r for r in results if r]
    started = sum(int(r.get(R.ops.key) or 0) for r in done)
    backlog = sum(float(r.get(R.behind_s.key) or 0.0) for r in done) * per_session_rate
    lags = [lag for r in done if (lag := r.get(R.max_lag_us.key)) is not None]
    return {
        "offered_rate": rate * share,
        "achieved_rate": started / seconds if seconds else None,
        "late_ops_1ms": sum(int(r.get(R.late_1ms.key) or 0) for r in done),
        "late_ops_10ms": sum(int(r.get(R.late_10ms.key) or 0) for r in done),
        "max_lag_us": max(lags) if lags else None,
        "backlog_ops": round(backlog, 1),
        "saturated": saturated(started, backlog, *mean_lag(done)) if done else None,
    }


def littles_law_warning(
    rate: float, sessions: int, busy_us: float, ops: int
) -> tuple[str | None, float | None]:
    """(A warning when SESSIONS cannot carry RATE at the measured service time, the mean
    service time in µs); (None, None) when nothing was measured."""
    if not rate or not ops:
        return None, None
    service_us = busy_us / ops
    busy = rate * service_us / 1e6  # sessions busy on average (Little's law: L = λW)
    if busy <= LITTLE_MAX_UTIL * sessions:
        return None, service_us
    return (
        f"RATE={rate:,.0f} SLOBops/s at the warm-up's mean service time of "
        f"{service_us:,.0f} us keeps {busy:,.1f} sessions busy on average (Little's law: "
        f"RATE x service time), {busy / sessions * 100:,.0f} % of SESSIONS={sessions}: the "
        "sessions will fall behind their schedule; raise SESSIONS or lower RATE"
    ), service_us
