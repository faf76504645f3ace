"""The client's CPU priority during a run (host/priority.py), on this machine's real kernel:
raised for the block and given back after it, refused without CAP_SYS_NICE (with the
reason), left alone when off. No server: the fast tier."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from openslob.host import priority
from tests.conftest import may_raise_priority

needs_cap = pytest.mark.skipif(not may_raise_priority(), reason="needs CAP_SYS_NICE (root here)")


def _thread_nice(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


@needs_cap
def test_raised_for_the_block_and_given_back() -> None:
    nice_before = os.getpriority(os.PRIO_PROCESS, 0)
    group_before = priority.autogroup_nice()
    started = threading.Event()
    stop = threading.Event()
    seen: dict[str, int] = {}

    def other() -> None:  # a thread that runs before the block: raised too
        seen["tid"] = threading.get_native_id()
        started.set()
        stop.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    started.wait(5)
    try:
        with priority.raised(True) as got:
            assert got.nice == priority.CLIENT_NICE == os.getpriority(os.PRIO_PROCESS, 0)
            assert _thread_nice(seen["tid"]) == priority.CLIENT_NICE
            if group_before is None:  # a kernel without autogroups: nice alone weighs
                assert got.autogroup_nice is None
            else:
                assert got.autogroup_nice == priority.autogroup_nice() == priority.CLIENT_NICE
            assert got.reason is None and "nice -20" in got.note()
            # batch threads, the other one too, at the nice just raised
            assert got.policy == "SCHED_BATCH" and "as SCHED_BATCH" in got.note()
            assert os.sched_getscheduler(0) == os.SCHED_BATCH
            assert os.sched_getscheduler(seen["tid"]) == os.SCHED_BATCH
            assert _thread_nice(seen["tid"]) == priority.CLIENT_NICE
    finally:
        stop.set()
        thread.join()
    assert os.getpriority(os.PRIO_PROCESS, 0) == nice_before
    assert priority.autogroup_nice() == group_before
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_threads_of_the_server_leave_the_nice_alone_and_still_run_as_batch() -> None:
    """MariaDB's sessions are threads of one process: no raised nice, but the client's
    wake-ups must not preempt them either (SCHED_BATCH)."""
    before = (os.getpriority(os.PRIO_PROCESS, 0), priority.autogroup_nice())
    with priority.raised(True, needed=False) as got:
        assert (os.getpriority(os.PRIO_PROCESS, 0), priority.autogroup_nice()) == before
        assert os.sched_getscheduler(0) == os.SCHED_BATCH
        seen: list[int] = []
        inside = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
        inside.start()
        inside.join()
        assert seen == [os.SCHED_BATCH]  # a thread started in the block inherits it
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    assert got.to_json() == {
        "nice": None,
        "autogroup_nice": None,
        "reason": priority.NOT_NEEDED,
        "policy": "SCHED_BATCH",
    }
    assert got.note() == (
        f"the client ran as SCHED_BATCH, its nice as started ({priority.NOT_NEEDED})"
    )


def test_a_client_started_under_another_policy_keeps_it() -> None:
    # `chrt --idle 0 slob run`: the user's choice, neither changed nor given back as OTHER
    code = (
        "import json, os; from openslob.host import priority\n"
        "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
        "with priority.raised(True, needed=False) as got:\n"
        "    inside = os.sched_getscheduler(0)\n"
        "print(json.dumps({'got': got.to_json(), 'note': got.note(), 'inside': inside,"
        " 'after': os.sched_getscheduler(0), 'idle': os.SCHED_IDLE}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-"], input=code, capture_output=True, text=True, check=True, timeout=60
    )
    answer = json.loads(out.stdout)
    assert answer["inside"] == answer["after"] == answer["idle"], answer
    assert answer["got"]["policy"] is None
    assert "its scheduling policy kept as started" in answer["got"]["reason"]
    assert "call_gap_pct" in answer["note"]


def test_off_leaves_the_client_as_started() -> None:
    before = (os.getpriority(os.PRIO_PROCESS, 0), priority.autogroup_nice())
    with priority.raised(False) as got:
        assert (os.getpriority(os.PRIO_PROCESS, 0), priority.autogroup_nice()) == before
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
    assert got.to_json() == {
        "nice": None,
        "autogroup_nice": None,
        "reason": got.reason,
        "policy": None,
    }
    assert "CLIENT_PRIORITY is off" in got.note() and "call_gap_pct" in got.note()


def test_without_cap_sys_nice_it_is_refused_and_said() -> None:
    # root without CAP_SYS_NICE (dropped from the bounding set before exec): both refused
    code = (
        "import json, os; from openslob.host import priority\n"
        "before = (os.getpriority(os.PRIO_PROCESS, 0), priority.autogroup_nice())\n"
        "with priority.raised(True) as got:\n"
        "    inside = (os.getpriority(os.PRIO_PROCESS, 0), priority.autogroup_nice())\n"
        "print(json.dumps({'got': got.to_json(), 'note': got.note(),"
        " 'same': inside == before}))\n"
    )
    out = subprocess.run(
        ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", sys.executable, "-"],
        input=code,  # on stdin: the unit tier refuses command lines that name our programs
        start_new_session=True,  # an autogroup of its own, at nice 0 whatever the tests' is
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    answer = json.loads(out.stdout)
    assert answer["same"], answer
    assert answer["got"]["nice"] is None and answer["got"]["autogroup_nice"] is None
    assert "nice -20 refused" in answer["got"]["reason"]
    assert "call_gap_pct" in answer["note"]


@needs_cap
def test_an_autogroup_already_raised_is_left_to_whoever_raised_it() -> None:
    # two runs of one login session: the second neither raises nor gives back the group
    before = priority.autogroup_nice()
    if before is None:
        pytest.skip("this kernel does not schedule by autogroup")
    priority.SELF_AUTOGROUP.write_text(f"{priority.CLIENT_NICE}\n")  # the first run's
    try:
        with priority.raised(True) as got:
            assert got.autogroup_nice == priority.CLIENT_NICE
        assert priority.autogroup_nice() == priority.CLIENT_NICE  # still the first run's
    finally:
        priority.SELF_AUTOGROUP.write_text(f"{before}\n")


def test_a_thread_under_another_policy_keeps_it_and_the_others_are_given_back() -> None:
    """A thread the client started under SCHED_IDLE (the main thread SCHED_OTHER) is left
    alone in the block and after it; the rest run as SCHED_BATCH and return to OTHER."""
    started, stop = threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def idle() -> None:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        seen["tid"] = threading.get_native_id()
        started.set()
        stop.wait(10)

    thread = threading.Thread(target=idle)
    thread.start()
    try:
        assert started.wait(10)
        with priority.raised(True, needed=False) as got:
            assert got.policy == "SCHED_BATCH"
            assert os.sched_getscheduler(seen["tid"]) == os.SCHED_IDLE
            assert os.sched_getscheduler(0) == os.SCHED_BATCH
        assert os.sched_getscheduler(seen["tid"]) == os.SCHED_IDLE
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
    finally:
        stop.set()
        thread.join()
