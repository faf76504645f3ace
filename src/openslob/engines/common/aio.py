"""Waiting in the run's event loop for a work session's socket, for engines whose client
library reads without blocking once bytes are there (libpq) or whose answers openslob reads
itself (MariaDB's wire.py): no thread per session, no periodic wake-up."""

from __future__ import annotations

import asyncio
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
