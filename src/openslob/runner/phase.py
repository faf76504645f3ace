"""One phase of a run (warm-up or window): every session's CALLs, cut into intervals.

Each session runs CALL after CALL, one per sampling interval (runner/intervals.py), until
the phase's end or its WORK_LOOP ops. The CALLs are pipelined (runner/pipeline.py): the next
waits in the server and starts the moment the running one ends, so no loop waits for this
client between intervals (12 % of a session's time at 64 sessions on 2 vCPUs when each CALL
was sent after the previous answer). An engine that streams intervals
(Capabilities.streams_intervals) runs one CALL for the phase instead, which returns each
interval's result as the interval ends (`call_ended` false but for the last): its loop never
stops at a boundary. Above RESULTS_PER_S results a second, each session answers every k-th
boundary with k intervals' results (runner/batches.py). What the next CALL continues from
(RATE schedule, random stream, WORK_LOOP's count) the loop keeps in the server, and returns
in `next` for the next phase's first CALL. Intervals every session has covered go to the
sampler as they close; the phase's last one is closed by the timeline, with the snapshots
that end the phase.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from openslob.config.resolve import Config
from openslob.engines.api import KeptIntervals
from openslob.model.loop import LOOP_PARAMS, LOOP_RESULT, call_goes_on, interval_results
from openslob.model.plan import session_seed
from openslob.model.rate import littles_law_warning
from openslob.model.states import Phase, RunStatus
from openslob.results.record import RunRecord, SessionOutcome
from openslob.runner import clocks
from openslob.runner.batches import batch_offset, positions
from openslob.runner.intervals import IntervalBook, Schedule, merge_into
from openslob.runner.loopconf import loop_conf
from openslob.runner.pipeline import QUEUED, drain, past
from openslob.runner.prepare import Notice
from openslob.runner.record import RunInstance, first_line
from openslob.runner.sampler import Sampler
from openslob.runner.stopping import Stopping

# the result keys read per interval result (LOOP_RESULT's fields, looked up once)
_INTERVAL, _ENDED = LOOP_RESULT.interval.key, LOOP_RESULT.ended_epoch.key
_OPS, _NEXT, _OWN_COMMITS = LOOP_RESULT.ops.key, LOOP_RESULT.next.key, LOOP_RESULT.own_commits.key

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
        self.sent: set[int] = set()  # sessions that have sent a CALL in this phase
        self.parts: dict[int, list[dict[str, Any]]] = {}  # results of the phase, by session
        # each session's last later-CALL conf and what it was made from (_conf)
        self.confs: dict[int, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.ends: dict[int, float | None] = {}  # the end of each session's last result
        # each session's place among its instance's sessions: its stagger (runner/batches.py)
        self.positions = positions([o.instance for o in record.sessions])

    async def phase(self, name: str, schedule: Schedule, loops: int) -> IntervalBook:
        """Each session runs CALL after CALL, one per interval, until the phase's end (or
        its WORK_LOOP ops); the first failure stops the run. Intervals every session has
        covered go to the sampler as they close; the phase's last one is closed by the
        caller, with the snapshots that end the phase."""
        sampler = self.sampler
        due = {s.id: self._due(s.id) for s in self.sessions}
        batched = any(batch > 1 for batch, _ in due.values())
        book = IntervalBook(
            name,
            schedule,
            [s.id for s in self.sessions],
            lambda interval, attach: sampler.close(interval, **attach),
            due=due,
            # batches: the counters are read as each boundary's answers are all in
            on_publish=(lambda index: sampler.publish(name, index)) if batched else None,
        )
        for state in self.carry.values():  # a RATE schedule starts again at each phase's barrier
            state.pop(LOOP_PARAMS.next_start.key, None)
            state.pop(LOOP_PARAMS.loops_left.key, None)  # and WORK_LOOP's count
        self.sent.clear()
        self.ends.clear()
        await asyncio.gather(
            *(self._session(s, name, schedule, loops, book) for s in self.sessions)
        )
        return book

    async def _session(
        self, session: Session, name: str, schedule: Schedule, loops: int, book: IntervalBook
    ) -> None:
        """One session's CALLs of the phase, pipelined: while one runs, the next waits in
        the server (RunBackend.send), so the loop never waits for this client between
        intervals. Each result says the interval it ran in (the loop cuts its CALL at
        start + k x interval_s, Schedule's rule); `ahead` is the interval of the last CALL
        sent, as far as the client can tell (a CALL starts where the one before it ended)."""
        outcome = self.record.sessions[session.id]
        backend = self.instances[outcome.instance].backend
        # a streaming engine's CALL runs the whole phase: nothing to queue behind it
        queued = 0 if self._streams(outcome.instance) else QUEUED
        left, in_flight, ahead = loops, 0, 0
        try:
            book.starting(session.id, time.time())
            book.close_ready()
            while True:
                more = (left > 0 or not loops) and not past(schedule, ahead)
                if in_flight <= queued and more and not self.stopping.is_set():
                    # (a time-bound phase's count is 0: `left` runs negative, and a conf made
                    # from it would differ from the last one every time, its cache never hit)
                    conf = self._conf(session, name, schedule, left if loops else 0)
                    await backend.send(session, conf)
                    now = max(time.time(), schedule.start)
                    ahead = ahead + 1 if in_flight else schedule.index_at(now)
                    in_flight += 1
                    continue
                if not in_flight:
                    break
                offset = self.offsets_s[outcome.instance]
                in_flight -= 1  # answered or failed: either way no longer in flight
                answer = await backend.receive(session)
                if call_goes_on(answer):
                    in_flight += 1  # a streamed interval: its CALL goes on to the next
                left, ended, index = self._take(
                    session, name, schedule, book, interval_results(answer), offset, loops, left
                )
                if ended is not None:
                    outcome.answers += name == Phase.WINDOW
                    # the CALL running now began as this one ended; the queued ones follow
                    # (each covers at least one interval: `ahead` errs low, which costs at
                    # most a CALL that finds the phase over)
                    ahead = schedule.index_at(ended) + in_flight - 1 if in_flight else index
                    if in_flight:  # the queued CALL began as this one ended
                        book.starting(session.id, ended)
                    book.close_ready()
                if in_flight and self.stopping.is_set():
                    break  # drain cancels what still runs (a cancel that missed is repeated)
        except Exception as exc:
            outcome.error = first_line(exc)
            if not self.stopping.is_set():  # not the stop's cancel: a failure, whose
                outcome.results_lost |= name == Phase.WINDOW  # running interval is lost
                self.stopping.fail(
                    RunStatus.FAILED, f"session {session.id} ({session.schema}): {outcome.error}"
                )
        finally:  # also after a cancel: the interrupted window's counts are published
            await self._drained(session, name, schedule, book, loops, left, in_flight)
            if name != Phase.WINDOW:  # the window's: window_totals, once it is measured
                self._total(session, name)
            book.finished(session.id)
            if not self.stopping.is_set():
                book.close_ready()  # what waited for this session alone
            if await backend.publish_stats(session) and name == Phase.WINDOW:
                self._own_commits(outcome, book, 1)

    def _take(
        self,
        session: Session,
        name: str,
        schedule: Schedule,
        book: IntervalBook,
        results: list[dict[str, Any]],
        offset_s: float,
        loops: int,
        left: int,
    ) -> tuple[int, float | None, int]:
        """An answer's interval results (the server's clock, `offset_s` from ours) into
        the books: (WORK_LOOP's ops left, the last kept one's end and interval; None, 0:
        none kept). Not kept: a queued CALL that began with nothing left to do, or an
        interval the stop cut (its ops are not counted; our own commits in it are). What
        does not change within an answer is looked up once (256 results a second at 256
        sessions)."""
        outcome = self.record.sessions[session.id]
        window = name == Phase.WINDOW
        previous = self.ends.get(session.id)
        ended, index = None, 0
        for result in results:
            result = clocks.to_client(result, offset_s)
            at = result.get(_INTERVAL)
            if (
                (loops and left <= 0)
                or at is None
                or past(schedule, int(at) - 1)
                or self.stopping.cut(schedule, int(at))
            ):
                if window:
                    self._own_commits(outcome, book, int(result.get(_OWN_COMMITS) or 0))
                continue
            index = int(at)
            self._returned(session, outcome, window, index, result, book, previous)
            previous = result.get(_ENDED)
            ended = float(previous or time.time())
            left -= int(result.get(_OPS) or 0)
        if ended is not None:
            self.ends[session.id] = previous
        return left, ended, index

    async def _drained(
        self,
        session: Session,
        name: str,
        schedule: Schedule,
        book: IntervalBook,
        loops: int,
        left: int,
        in_flight: int,
    ) -> None:
        """After a stop or a failure: the CALLs still in flight are cancelled (drain); the
        answers that came all the same, and the intervals a cancelled CALL had kept for its
        next answer (RunBackend.pending: batch > 1), go into the books like any answer, so
        that a stop loses only the interval it cut."""
        instance = self.record.sessions[session.id].instance
        backend, offset = self.instances[instance].backend, self.offsets_s[instance]
        outcome = self.record.sessions[session.id]
        # The window's intervals a loop kept (batch > 1) are lost unless fetched here: said
        # before the awaits (a task cancelled in them, at the run's end, stops there) and
        # taken back once they are in (a failed CALL: _session). One CALL an interval, or
        # streamed intervals, lose nothing but the one the stop cut, which is left out
        # anyway; build_metrics counts statements only where results were lost.
        was = outcome.results_lost
        keeps = self.stopping.is_set() and self.instances[instance].batch > 1
        outcome.results_lost |= keeps and name == Phase.WINDOW
        answers, answered = await drain(backend, session, in_flight)
        lost = keeps and not answered  # a CALL still runs: its connection cannot be asked
        if keeps and answered:  # a stop: the CALL cancelled (before or by the drain)
            try:
                kept = await backend.pending(session)
            except Exception:  # an engine's own failure: nothing to fetch
                kept = KeptIntervals([], 0, fetched=False)
            lost = not kept.fetched  # the session gone
            answers.append(kept.results)
            if name == Phase.WINDOW:
                self._own_commits(outcome, book, kept.own_commits)
        outcome.results_lost = was or (lost and name == Phase.WINDOW)
        for answer in answers:
            left, _, _ = self._take(
                session, name, schedule, book, interval_results(answer), offset, loops, left
            )

    def _conf(self, session: Session, name: str, schedule: Schedule, left: int) -> dict[str, Any]:
        """The conf of the session's next CALL, in the server's clock. The phase's first
        carries on from the previous phase's last result (`next`); a later one, sent before
        the one running has ended, from what that one keeps in the server (`carry`)."""
        instance = self.instances[at := self.record.sessions[session.id].instance]
        first = session.id not in self.sent
        self.sent.add(session.id)
        # A later CALL's conf is the same as the one before it unless WORK_LOOP's count
        # moved: the same dict again, which the backend may send as it encoded it before
        # (~50 us of client CPU per CALL, 256 CALLs a second at 256 sessions).
        key = (name, schedule.start, schedule.end, schedule.step, left, self.offsets_s[at])
        cached = None if first else self.confs.get(session.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        conf = loop_conf(
            self.config,
            record=name == Phase.WINDOW,
            start_epoch=schedule.start,
            until_epoch=schedule.end,
            interval_s=schedule.step,
            loops=left,
            seed=self.seeds.pop(session.id, None),
            session_id=session.id,
            rows_per_mb=instance.rows_per_mb,
            carry=not first,
            stream=self._streams(at),
            batch=(due := self._due(session.id))[0],
            batch_offset=due[1],
        )
        if first:
            conf.update(self.carry.get(session.id, {}))
        conf.update(instance.guard)
        conf = clocks.to_server(conf, self.offsets_s[at])
        if not first:
            self.confs[session.id] = (key, conf)
        return conf

    def _due(self, session_id: int) -> tuple[int, int]:
        """The session's (batch, offset): it answers at the boundaries b with
        (b + offset) % batch == 0 (runner/batches.py)."""
        batch = self.instances[self.record.sessions[session_id].instance].batch
        return batch, batch_offset(self.positions[session_id], batch)

    def _streams(self, instance: int) -> bool:
        """Whether the instance's CALLs stream the phase's intervals (Capabilities): not
        when the steady-state watch may end the window early (STOP_ON_STEADY). That moves
        the end in the client's schedule, which a CALL sent since sees; a streaming CALL
        was sent once, with the planned end, and would run on to it."""
        return self.instances[instance].streams_intervals and not self.config.p.stop_on_steady

    def _returned(
        self,
        session: Session,
        outcome: SessionOutcome,
        window: bool,
        index: int,
        result: dict[str, Any],
        book: IntervalBook,
        previous_end: float | None,
    ) -> None:
        """A CALL's result into its interval, the session's phase total and the window's
        own commits; what the next phase's first CALL carries on from."""
        self.carry[session.id] = result.get(_NEXT) or {}
        book.returned(session.id, outcome.instance, index, result)
        # the session's phase total is added up when the session's phase ends (_total):
        # nothing reads it before (a checkpoint reads the sampler's closed intervals), and
        # a merge per result is client CPU inside the window (~25 us at 256 sessions)
        self.parts.setdefault(session.id, []).append(result)
        if window:  # the loop's own transactions (released snapshots)
            own = int(result.get(_OWN_COMMITS) or 0)
            self.instances[outcome.instance].record.own_commits += own
            outcome.add_call(result, previous_end)

    def _total(self, session: Session, name: str) -> None:
        """The session's phase total, from the results it returned in the phase."""
        outcome = self.record.sessions[session.id]
        total = getattr(outcome, name)
        for result in self.parts.pop(session.id, []):
            total = merge_into(total, result)
        setattr(outcome, name, total)

    def window_totals(self) -> None:
        """The sessions' window totals (SessionOutcome.window), once the window has been
        measured (after its "after" snapshots): like building run.json, adding up each
        session's results for the results file is not measuring, and runs when no loop
        does any more (~2 ms/s of the window at 256 sessions, counted in client.cpu_s
        while it ran inside the window's span). Idempotent; the controller also calls it
        on the way out of a failed run."""
        for session in self.sessions:
            if session.id in self.parts:
                self._total(session, Phase.WINDOW)

    def _own_commits(self, outcome: Any, book: IntervalBook, count: int) -> None:
        """Transactions of ours after the session's last op (a statistics flush; a queued
        CALL that found nothing left to do): the window's, in its last interval."""
        for _ in range(count):
            self.instances[outcome.instance].record.own_commits += 1
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
