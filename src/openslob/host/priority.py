"""The client's CPU priority during a run: no session may wait for the client.

At the knee the sessions saturate the CPUs, and each session still needs this client once
an interval: it reads the CALL's result and queues the next (runner/phase.py). Each
PostgreSQL backend is a session leader (setsid), so with the kernel's autogroups
(`kernel.sched_autogroup_enabled`, on in most distributions) every backend is a scheduling
group of its own, and the client is one group among 257 at 256 sessions: it got ~30 ms of
CPU a second on 2 vCPUs, less than the ~80 ms it needs for 256 results a second, so the
queued CALLs ran out and sessions waited 27 % of their time (bench/interval_overhead.py).
nice alone does not help there: it weighs threads within one autogroup. So for the run the
client takes nice -20 for its threads and, with autogroups, for its autogroup (root or
CAP_SYS_NICE), and gives both back at the end. Its CPU is the same; it no longer waits for
one. Without the right it runs as started and says why (run.json client.priority).

The client's threads also run as SCHED_BATCH (sched(7)) for the run: the same CPU share,
but a batch thread that wakes never preempts the thread running on the CPU (the kernel's
wake-up preemption skips it); it runs at the next tick or on an idle CPU. Each session's
answer wakes the client, and at the knee the thread it preempted was that very session in
its boundary, which then waited for a CPU behind every other runnable one: MariaDB at 256
lio sessions (threads, the client at nice 0), the slowest tenth of the sessions each lost
0.6-231 ms in a gap between intervals in 4 runs, 0.2 ms in 4 runs as SCHED_BATCH (time
outside the loop 0.04-0.57 % -> 0.01-0.17 %). The client's own lateness is the tick's (a
few ms); the loops never wait for it (two CALLs queued, runner/pipeline.py). A client
started under another policy (chrt) keeps it.

The autogroup is the login session's (the shell's too) while the run lasts; a client killed
outright leaves it raised until that session ends. One found already raised (another run of
the same session) is left to whoever raised it. CLIENT_PRIORITY=off leaves all of it alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from openslob.host.procfs import PROC, _read_optional

CLIENT_NICE = -20  # the highest: the client's CPU is small, its latency is what matters
AUTOGROUP_ENABLED = PROC / "sys/kernel/sched_autogroup_enabled"
SELF_AUTOGROUP = PROC / "self/autogroup"
NOT_NEEDED = "not needed: the sessions are threads of the server process"


@dataclass(frozen=True)
class Priority:
    """What the client ran at (run.json client.priority): None where it was left alone."""

    nice: int | None  # the client's threads' nice value during the run
    autogroup_nice: int | None  # its autogroup's, when the kernel schedules by autogroup
    reason: str | None  # why one was not raised (no right, off, no autogroups)
    policy: str | None = None  # "SCHED_BATCH" when its threads ran so (None: as started)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def note(self) -> str:
        """The run's note: what the client ran at, and why not higher."""
        took = [
            f"{what} {value}"
            for what, value in (("nice", self.nice), ("autogroup nice", self.autogroup_nice))
            if value is not None
        ]
        said = f"the client ran at {' and '.join(took)}" if took else "the client ran"
        if self.policy:
            said += f" as {self.policy}" + ("" if took else ", its nice as started")
        elif not took:
            said += " as started"
        if self.reason:
            said += f" ({self.reason})"
        reasons = (self.reason or "").split("; ")
        short = self.nice is None or any(r.startswith("autogroup nice") for r in reasons)
        if short and NOT_NEEDED not in reasons:  # (a policy's reason is not the nice's)
            said += (
                "; where the sessions saturate the CPUs they may wait for it between CALLs"
                " (window.call_gap_pct)"
            )
        elif self.policy is None:
            said += (
                "; where the sessions saturate the CPUs its wake-ups may preempt them between"
                " intervals (window.call_gap_pct)"
            )
        return said


def autogroup_nice(path: Path = SELF_AUTOGROUP) -> int | None:
    """The autogroup's nice ("/autogroup-42 nice 0"), or None when there is none to set."""
    if _read_optional(AUTOGROUP_ENABLED) != "1":
        return None
    text = _read_optional(path)
    fields = text.split() if text else []
    try:
        return int(fields[fields.index("nice") + 1])
    except (ValueError, IndexError):
        return None


def _tasks() -> list[int]:
    """The client's threads (nice is a thread's on Linux; new threads inherit it)."""
    try:
        return [int(t.name) for t in (PROC / "self/task").iterdir() if t.name.isdigit()]
    except OSError:
        return [0]


def _set_nice(value: int) -> None:
    for tid in _tasks():
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.setpriority(os.PRIO_PROCESS, tid, value)


def _set_autogroup(value: int) -> None:
    SELF_AUTOGROUP.write_text(f"{value}\n")


def _set_policy(tasks: list[int], policy: int) -> None:
    """The threads' scheduling policy (a thread's own on Linux; new threads inherit it)."""
    for tid in tasks:
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setscheduler(tid, policy, os.sched_param(0))


def _give_back(kept: set[int]) -> None:
    """SCHED_OTHER again for every thread but `kept` (the ones under another policy from
    the start), each on its own: one refusal leaves the others' done."""
    for tid in _tasks():
        if tid not in kept:
            with contextlib.suppress(OSError):
                _set_policy([tid], os.SCHED_OTHER)


@contextlib.contextmanager
def _batch(reasons: list[str]) -> Iterator[str | None]:
    """SCHED_BATCH for the client's threads in the block, SCHED_OTHER again after it (any
    user may switch between the two); a client started under another policy keeps it, and
    so does any thread of it started so."""
    kept: set[int] = set()
    refused = None
    try:
        if os.sched_getscheduler(0) == os.SCHED_OTHER:
            tasks = _tasks()
            kept = {tid for tid in tasks if _policy(tid) != os.SCHED_OTHER}
            _set_policy([tid for tid in tasks if tid not in kept], os.SCHED_BATCH)
        else:
            refused = "its scheduling policy kept as started"
    except OSError as exc:  # a sandbox that forbids it
        refused = f"SCHED_BATCH refused ({exc.strerror})"
        _give_back(kept)
    if refused is not None:
        reasons.append(refused)
        yield None
        return
    try:
        yield "SCHED_BATCH"
    finally:
        _give_back(kept)


def _policy(tid: int) -> int | None:
    """A thread's scheduling policy (None: it ended)."""
    try:
        return os.sched_getscheduler(tid)
    except ProcessLookupError:
        return None


@contextlib.contextmanager
def raised(wanted: bool, needed: bool = True) -> Iterator[Priority]:
    """nice -20 for the client's threads and its autogroup for the block, and SCHED_BATCH;
    all are given back after it. Each one that cannot be raised is left as it was, with the
    reason. `needed`: the engine's sessions are processes of their own (Capabilities);
    threads of one server process leave the client its share, and there a raised client
    only preempts the server's threads as each result arrives (MariaDB at 256 sessions: the
    gap between CALLs 1.3 % -> 1.7 %), so its nice is left alone (SCHED_BATCH still)."""
    if not wanted:
        yield Priority(None, None, "CLIENT_PRIORITY is off")
        return
    reasons: list[str] = [] if needed else [NOT_NEEDED]
    if not needed:
        with _batch(reasons) as policy:
            yield Priority(None, None, "; ".join(reasons), policy)
        return
    nice_before = os.getpriority(os.PRIO_PROCESS, 0)
    group_before = autogroup_nice()
    nice: int | None = None
    group: int | None = None
    try:
        _set_nice(CLIENT_NICE)
        nice = CLIENT_NICE
    except OSError as exc:  # EACCES/EPERM: neither root nor CAP_SYS_NICE (nor RLIMIT_NICE)
        reasons.append(f"nice {CLIENT_NICE} refused ({exc.strerror})")
        with contextlib.suppress(OSError):  # threads raised before the refusal go back
            _set_nice(nice_before)
    if group_before is not None and group_before <= CLIENT_NICE:
        group_before = None  # already there (another run of this login session): left alone
        group = CLIENT_NICE
    elif group_before is not None:  # else no autogroups: nice alone weighs
        try:
            _set_autogroup(CLIENT_NICE)
            group = CLIENT_NICE
        except OSError as exc:
            reasons.append(f"autogroup nice {CLIENT_NICE} refused ({exc.strerror})")
    try:
        with _batch(reasons) as policy:
            yield Priority(nice, group, "; ".join(reasons) or None, policy)
    finally:
        if nice is not None:  # raising a nice value back is always allowed
            with contextlib.suppress(OSError):
                _set_nice(nice_before)
        if group is not None and group_before is not None:
            with contextlib.suppress(OSError):
                _set_autogroup(group_before)
