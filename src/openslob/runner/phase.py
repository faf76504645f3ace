"""One phase of a run (warm-up or window): every session's CALLs, cut into intervals.

Each session runs CALL after CALL, one per sampling interval (runner/intervals.py), until
the phase's end or its WORK_LOOP ops. What a session's next CALL continues from (its RATE
schedule, its random stream) is carried from one CALL to the next and from the warm-up into
the window. Intervals every session has covered go to the sampler as they close; the
phase's last one is closed by the timeline, with the snapshots that end the phase.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from openslob.config.resolve import Config
from openslob.model.loop import LOOP_PARAMS, LOOP_RESULT
from openslob.model.plan import session_seed
from openslob.model.rate import littles_law_warning
from openslob.model.states import Phase, RunStatus
from openslob.results.record import RunRecord
from openslob.runner import clocks
from openslob.runner.intervals import IntervalBook, Schedule, merge_results
from openslob.runner.loopconf import loop_conf
from openslob.runner.prepare import Notice
from openslob.runner.record import RunInstance, first_line
from openslob.runner.sampler import Sampler
from openslob.runner.stopping import Stopping

Session = Any  # an engine's work session (RunBackend.open_session)


class Calls:
    """The sessions' CALLs, phase after phase, and what each session carries between them."""

    def __init__(
        self,
        config: Config,
        instances: list[RunInstance],
        record: RunRecord,
        sessions: list[Session],
        sampler: Sampler,
        stopping: Stopping,
        offsets_s: list[float],
    ) -> None:
        self.config, self.instances, self.record = config, instances, record
        self.sessions, self.sampler, self.stopping = sessions, sampler, stopping
        self.offsets_s = offsets_s  # each server's clock minus the client's (Snapshots)
        self.seeds = {s.id: session_seed(config.p.seed, s.id) for s in sessions}
        self.carry: dict[int, dict[str, Any]] = {}  # what each session's next CALL continues from

    async def phase(self, name: str, schedule: Schedule, loops: int) -> IntervalBook:
        """Each session runs CALL after CALL, one per interval, until the phase's end (or
        its WORK_LOOP ops); the first failure stops the run. Intervals every session has
        covered go to the sampler as they close; the phase's last one is closed by the
        caller, with the snapshots that end the phase."""
        sampler = self.sampler
        book = IntervalBook(
            name,
            schedule,
            [s.id for s in self.sessions],
            lambda interval, attach: sampler.close(interval, **attach),
        )
        for state in self.carry.values():  # a RATE schedule starts again at each phase's barrier
            state.pop(LOOP_PARAMS.next_start.key, None)
        await asyncio.gather(
            *(self._session(s, name, schedule, loops, book) for s in self.sessions)
        )
        return book

    async def _session(
        self, session: Session, name: str, schedule: Schedule, loops: int, book: IntervalBook
    ) -> None:
        """One session's CALLs of the phase."""
        carry, seeds, stopping = self.carry, self.seeds, self.stopping
        outcome = self.record.sessions[session.id]
        instance = self.instances[outcome.instance]
        backend = instance.backend
        left = loops
        previous_end = None  # the end of this session's last CALL of the phase
        try:
            while not stopping.is_set():  # stopped: start no further CALL
                index, until = book.starting(session.id, time.time())
                # The intervals before it may close now: with one session nobody else
                # starts a later one, and waiting for this CALL's return would read the
                # counters one interval late (its work in the previous row).
                book.close_ready()
                conf = loop_conf(
                    self.config,
                    record=name == Phase.WINDOW,
                    start_epoch=schedule.start,
                    until_epoch=until,
                    loops=left,
                    seed=seeds.pop(session.id, None),
                    session_id=session.id,
                    rows_per_mb=instance.rows_per_mb,
                )
                conf.update(carry.get(session.id, {}))
                conf.update(instance.guard)
                offset = self.offsets_s[outcome.instance]
                conf = clocks.to_server(conf, offset)
                result = clocks.to_client(await backend.call(session, conf), offset)
                carry[session.id] = result.get(LOOP_RESULT.next.key) or {}
                book.returned(session.id, outcome.instance, index, result)
                setattr(outcome, name, merge_results(getattr(outcome, name), result))
                if name == Phase.WINDOW:  # the loop's own transactions (released snapshots)
                    instance.record.own_commits += int(result.get(LOOP_RESULT.own_commits.key) or 0)
                    outcome.add_call(result, previous_end)
                    previous_end = result.get(LOOP_RESULT.ended_epoch.key)
                book.close_ready()
                if loops:
                    left -= int(result.get(LOOP_RESULT.ops.key) or 0)
                    if left <= 0:
                        break
                # the planned end may move earlier (Stopping.end_window_early)
                if schedule.end is not None and index >= schedule.last_index():
                    break
        except Exception as exc:
            outcome.error = first_line(exc)
            if not stopping.is_set():
                stopping.fail(
                    RunStatus.FAILED, f"session {session.id} ({session.schema}): {outcome.error}"
                )
        finally:  # also after a cancel: the interrupted window's counts are published
            book.finished(session.id)
            if not stopping.is_set():
                book.close_ready()  # what waited for this session alone
            if await backend.publish_stats(session) and name == Phase.WINDOW:
                instance.record.own_commits += 1
                book.own_commit(outcome.instance)


def check_rate(config: Config, record: RunRecord, notice: Notice) -> None:
    """Too few sessions for RATE at the warm-up's measured service time: said before
    the window opens (model/rate.py, Little's law)."""
    warmups = [o.warmup or {} for o in record.sessions]
    warning, service_us = littles_law_warning(
        config.p.rate,
        len(record.sessions),
        sum(float(w.get(LOOP_RESULT.busy_us.key) or 0) for w in warmups),
        sum(int(w.get(LOOP_RESULT.ops.key) or 0) for w in warmups),
    )
    record.warmup_service_us = service_us
    if warning:
        record.early_warnings.append(warning)
        notice(f"warning: {warning}")
