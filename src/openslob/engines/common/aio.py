"""Waiting in the run's event loop for a work session's socket, for engines whose client
library reads without blocking once bytes are there (libpq) or whose answers openslob reads
itself (MariaDB's wire.py): no thread per session, no periodic wake-up."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def until_ready(add: Any, remove: Any, fd: int) -> None:
    """Sleep until `fd` is ready (add_reader/add_writer of the running loop)."""
    ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    add(fd, wake)
    try:
        await ready
    finally:
        remove(fd)


class Readable:
    """A session socket's waits for bytes, its registration with the event loop kept
    between them: an add_reader and a remove_reader per wait were two epoll_ctl calls, ~45 us
    of client CPU per answer (a CALL's, or a streamed interval's).

    The registration is level-triggered, which asks for two cares:
    - The turn of the loop that resumes a woken session has polled the socket before the
      session reads it: that readiness comes as a second, stale wake-up after the session
      has read and waits again. So a wait takes wake-ups from the next callback on
      (call_soon), and one with nobody waiting is let pass.
    - Bytes that arrive while nobody waits (the session busy elsewhere) would wake the loop
      at every turn until read: a second wake-up with nobody waiting lets the socket go,
      and the next wait registers it again.
    A wake-up may still be spurious: callers read without blocking and wait again when
    nothing came. Whoever else reads the socket (the driver itself) or closes it calls
    release() first: a closed descriptor left registered would stand for the next socket
    given its number."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._waiter: asyncio.Future[None] | None = None
        self._idle_wakes = 0  # wake-ups with nobody waiting, since the last wait began

    async def wait(self, fd: int) -> None:
        """Sleep until `fd` has bytes to read (or, rarely, spuriously)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._fd != fd:
            self.release()
            loop.add_reader(fd, self._wake)
            self._loop, self._fd = loop, fd
        waiter: asyncio.Future[None] = loop.create_future()
        loop.call_soon(self._arm, waiter)  # after a stale wake-up queued in this turn
        try:
            await waiter
        finally:
            self._waiter = None

    def _arm(self, waiter: asyncio.Future[None]) -> None:
        if not waiter.done():  # (cancelled meanwhile)
            self._waiter, self._idle_wakes = waiter, 0

    def _wake(self) -> None:
        if self._waiter is None:
            self._idle_wakes += 1
            if self._idle_wakes > 1:
                self.release()
        elif not self._waiter.done():
            self._waiter.set_result(None)

    def release(self) -> None:
        """Let the socket go (nothing when it is not registered)."""
        if self._loop is not None:
            with contextlib.suppress(Exception):  # a loop already closed holds nothing
                self._loop.remove_reader(self._fd)
            self._loop, self._fd = None, -1
