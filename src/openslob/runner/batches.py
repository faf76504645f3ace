"""How many intervals a session's loop keeps before it answers (the loop conf's `batch`).

Each interval result costs CPU outside the loop: the client ~0.3 ms (its socket wake-up,
JSON and merge; README, interval_overhead) and, on PostgreSQL, the CALL's end and the next
one's start ~0.25 ms of server CPU, both taken from CPU-bound sessions: at 256 sessions
and 1 s intervals that was 5-7 % of a 2-vCPU host. So above RESULTS_PER_S (16) interval results
a second per instance, each session keeps k intervals' results in the server and answers
every k-th boundary, and the sessions are staggered (session i answers at boundaries b with
(b + i) % k == 0) so that about 1/k of them answer at each boundary: the client gets about
RESULTS_PER_S answers a second whatever the session count, each still one row's worth per
interval. The price: a row closes once every session has answered it, up to k intervals
late, and the database counters are read at each boundary (runner/sampler.py) rather than
when the interval closes.
"""

from __future__ import annotations

import math

from openslob.config.resolve import Config
from openslob.runner.record import RunInstance

# The most intervals an answer covers: rows come up to k intervals late (the live view, a
# checkpoint), and MariaDB's loop appends each kept result to a text it holds (O(k^2) a
# CALL). 256 sessions at the default 16 answers a second give 16; `--results-per-s 1`
# would have given 256. Past the cap the client gets more than RESULTS_PER_S a second.
MAX_BATCH = 16


def batch_size(sessions: int, results_per_s: int, interval_s: float) -> int:
    """k: the intervals a session's answer covers, for `sessions` on one instance (1: an
    answer every interval; also when RESULTS_PER_S is 0, no limit), at most MAX_BATCH."""
    if results_per_s <= 0 or sessions <= 0 or interval_s <= 0:
        return 1
    return min(MAX_BATCH, max(1, math.ceil(sessions / (results_per_s * interval_s) - 1e-9)))


def batch_offset(position: int, batch: int) -> int:
    """The stagger of the instance's `position`-th session (0, 1, ...): its answers come at
    the boundaries b with (b + offset) % batch == 0."""
    return position % batch if batch > 1 else 0


def positions(instances: list[int]) -> dict[int, int]:
    """Each session's place among its instance's sessions, from the sessions' instances in
    session order (session i is instances[i]'s)."""
    seen: dict[int, int] = {}
    places = {}
    for session, instance in enumerate(instances):
        places[session] = seen.get(instance, 0)
        seen[instance] = places[session] + 1
    return places


def assign(config: Config, instances: list[RunInstance], session_instances: list[int]) -> None:
    """Each instance's `batch` for the run (RunInstance.batch): 1 when its engine cannot
    batch (Capabilities.batches_intervals) or when the steady-state watch may end the
    window early (STOP_ON_STEADY moves the end, which a CALL already running would not see
    for up to k intervals)."""
    p = config.p
    for at, instance in enumerate(instances):
        count = sum(1 for i in session_instances if i == at)
        can = instance.batches_intervals and not p.stop_on_steady
        instance.batch = batch_size(count, p.results_per_s, p.sample_interval) if can else 1
        instance.record.batch = instance.batch
