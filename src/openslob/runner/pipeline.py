"""What pipelined CALLs need besides the phase's loop (runner/phase.py): whether an interval
is the phase's last, and how a stopped session's CALLs still in flight are ended.

A session keeps QUEUED CALLs waiting in the server behind the one running (RunBackend.send):
the client may then be late by QUEUED intervals (a starved CPU, a long pause) before a loop
waits for it. A cancel request ends the running CALL only; one that arrives before a queued
CALL has started is lost (the backend is between statements), so a stopped session cancels
again until each CALL in flight has answered (a streaming CALL: until its last result).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from openslob.model.loop import Answer, call_goes_on
from openslob.runner.intervals import Schedule

QUEUED = 2  # CALLs waiting behind the running one: intervals the client may be late by
DRAIN_ROUNDS, DRAIN_WAIT_S = 20, 0.25  # how a stopped session's queued CALL is cancelled


def past(schedule: Schedule, index: int) -> bool:
    """Interval `index` is the phase's last one, or later (never, without a planned end)."""
    return schedule.end is not None and index >= schedule.last_index()


async def drain(backend: Any, session: Any, in_flight: int) -> tuple[list[Answer], bool]:
    """The CALLs still in flight after a stop or a failure, cancelled until each has
    answered: a cancel that reaches the server before the queued CALL has started is
    lost, so it is repeated (at most DRAIN_ROUNDS times: a dead server answers none).
    Returns the answers that came all the same (a CALL that ended before its cancel), and
    whether every CALL answered (False: one still runs, so its connection cannot be asked
    for what the loop kept: runner/phase.py)."""
    answers: list[Answer] = []
    while in_flight > 0:
        answer = asyncio.ensure_future(backend.receive(session))
        for _ in range(DRAIN_ROUNDS):
            if answer.done():
                break
            await backend.cancel(session)
            await asyncio.wait({answer}, timeout=DRAIN_WAIT_S)
        if not answer.done():
            answer.cancel()
            return answers, False
        in_flight -= 1
        with contextlib.suppress(Exception):
            answers.append(answer.result())
            if call_goes_on(answers[-1]):
                in_flight += 1  # a streamed interval came first: the CALL goes on
    return answers, True
