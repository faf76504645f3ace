"""A run's sessions still connected after it ended, looked at again before they are killed.

A closed session's backend (PostgreSQL) or server thread (MariaDB) ends a moment after its
close, and on a saturated host that moment can come after the run looks: MariaDB showed 1
session of 16 in one run of two at 96 % CPU, PostgreSQL 7 of 16 after a 60 s update run at
100 % CPU. Counted then, they made a false warning that the run left backends alive.
"""

from __future__ import annotations

import time
from collections.abc import Callable

LEFTOVER_WAIT_S = 2.0  # how long a closed session's backend or thread may take to go
_LOOK_EVERY_S = 0.1


def still_there(look: Callable[[], list[int]], wait_s: float = LEFTOVER_WAIT_S) -> list[int]:
    """What `look` finds (the run's sessions' ids) once it finds none, or when `wait_s`
    has passed: those are the leftovers."""
    deadline = time.monotonic() + wait_s
    while True:
        found = look()
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(_LOOK_EVERY_S)
