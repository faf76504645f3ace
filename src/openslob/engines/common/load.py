"""The parallel load's waiting loop, the same for both engines' loaders."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from typing import Any, TypeVar

Key = TypeVar("Key")

TICK_S = 0.5  # how often progress is reported while tables load


def drain(
    pending: dict[Future[Any], Key],
    on_done: Callable[[Key, Any], None],
    tick: Callable[[], None],
    cancel: Callable[[], None],
) -> None:
    """Wait for every future of `pending` (on_done may add more), calling on_done with each
    one's key and result and tick() every TICK_S. On the first error or an interrupt: cancel
    the server-side work (cancel()), drop what has not started, and re-raise."""
    try:
        while pending:
            done, _ = wait(pending, timeout=TICK_S, return_when=FIRST_EXCEPTION)
            for future in done:
                key = pending.pop(future)
                on_done(key, future.result())  # re-raises a loader's error here
            tick()
    except BaseException:
        # A server that died cannot take a cancel ("PQcancel() … error 111"): the error
        # that brought us here says what happened, not the cancel's own failure.
        with contextlib.suppress(Exception):
            cancel()
        for future in pending:
            future.cancel()
        raise
