"""The run's sessions: placed on the instances, connected in parallel, started together.

Sessions are spread over the instances (model/plan.py) and connected at most
MAX_CONCURRENT_CONNECTS at a time; one that cannot connect fails the run before anything is
measured. Each phase starts at a barrier: an instant far enough ahead for every session's
first CALL to arrive before it (a clock barrier inside the procedure).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from openslob.config.resolve import Config
from openslob.model.plan import session_instances, session_schemas
from openslob.model.states import RunStatus
from openslob.results.record import RunRecord, SessionOutcome
from openslob.runner.record import RunInstance, first_line

MAX_CONCURRENT_CONNECTS = 64
BARRIER_LEAD_S = 0.2
BARRIER_PER_SESSION_S = 0.004

Session = Any  # an engine's work session (RunBackend.open_session)


async def connect_all(
    config: Config,
    instances: list[RunInstance],
    record: RunRecord,
    sessions: list[Session],
    fail: Callable[[RunStatus, str], None],
) -> None:
    """Open every session of the run into `sessions`; record.sessions says where each went."""
    started = time.monotonic()
    gate = asyncio.Semaphore(MAX_CONCURRENT_CONNECTS)
    schemas = session_schemas(config)
    placed = session_instances(len(schemas), len(instances))
    record.sessions = [
        SessionOutcome(i, s, k) for i, (s, k) in enumerate(zip(schemas, placed, strict=True))
    ]

    async def connect(outcome: SessionOutcome) -> Session:
        async with gate:
            backend = instances[outcome.instance].backend
            return await backend.open_session(outcome.id, outcome.schema)

    results = await asyncio.gather(*(connect(o) for o in record.sessions), return_exceptions=True)
    for outcome, result in zip(record.sessions, results, strict=True):
        if isinstance(result, BaseException):
            outcome.error = f"connect: {first_line(result)}"
        else:
            outcome.pid = result.pid
            sessions.append(result)
    record.connect_seconds = time.monotonic() - started
    failed = [o for o in record.sessions if o.error]
    if failed:
        fail(
            RunStatus.FAILED,
            f"{len(failed)} of {len(results)} sessions could not connect: {failed[0].error}",
        )


def barrier(sessions: int) -> float:
    """An instant far enough ahead for every session's CALL to arrive before it."""
    return time.time() + BARRIER_LEAD_S + BARRIER_PER_SESSION_S * sessions
