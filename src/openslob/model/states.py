"""The states a run, a sweep point and a phase can be in, as enums.

StrEnum: each member is its string ("complete" == RunStatus.COMPLETE), so run.json,
sweep.json and timeseries.csv hold the very same text as before, and a status read back from
a file (a plain str) compares equal to the member.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """run.json's ``status``: how the run ended."""

    COMPLETE = "complete"
    INTERRUPTED = "interrupted"  # a signal (Ctrl-C, kill) or a lost client: what was measured
    FAILED = "failed"  # an error ended it (a session, the server, a hook)


class PointStatus(StrEnum):
    """A sweep point's (a run of the plan's) ``status`` in sweep.json."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class Phase(StrEnum):
    """A phase of the run's load: warm-up (not recorded), then the measured window."""

    WARMUP = "warmup"
    WINDOW = "window"
