"""A stop inside the window: the interval it cuts is not counted (runner/stopping.py cut,
runner/phase.py), and run.json says how much that was (results/build.py), a warning that
refuses verdicts from 1 % of the window (analysis/validity.py), a note below."""

from __future__ import annotations

import pytest

from openslob.analysis.validity import reasons
from openslob.model.states import RunStatus
from openslob.results.build import CUT_BY_STOP, _cut_by_stop
from openslob.results.record import RunRecord
from openslob.runner.intervals import Schedule
from openslob.runner.stopping import Stopping

START = 1_800_000_000.0


def stopped(
    after_s: float,
    status: RunStatus = RunStatus.INTERRUPTED,
    step: float = 1.0,
    planned_s: float = 600.0,
) -> RunRecord:
    """The record of a window stopped `after_s` into it, as the controller fills it in (the
    cut measured on the window's schedule by Stopping.cut_s; a complete run has none)."""
    stopping = Stopping(RunRecord(), [], [])
    stopping.stopped_at = START + after_s
    schedule = Schedule(START, START + planned_s, step)
    return RunRecord(
        status=status,
        window_start=START,
        window_end=min(START + after_s, START + planned_s),
        planned_end=START + planned_s,
        cut_s=0.0 if status == RunStatus.COMPLETE else stopping.cut_s(schedule),
    )


def test_a_stop_inside_an_interval_says_what_it_cut() -> None:
    sentence, pct = _cut_by_stop(stopped(5.64)) or ("", 0.0)
    assert pct == pytest.approx(0.64 / 5.64 * 100)
    assert sentence.startswith(f"{CUT_BY_STOP} (0.64 s, 11.3 % of the 5.6 s window)")
    assert "by up to 11.3 %" in sentence
    _, pct = _cut_by_stop(stopped(300.5)) or ("", 0.0)  # a long run: a note's share
    assert pct == pytest.approx(0.5 / 300.5 * 100) and pct < 1
    _, pct = _cut_by_stop(stopped(7.5, step=5.0)) or ("", 0.0)  # 5 s intervals: 2.5 s cut
    assert pct == pytest.approx(2.5 / 7.5 * 100)


def test_nothing_cut_says_nothing() -> None:
    assert _cut_by_stop(stopped(6.0)) is None  # on a boundary
    assert _cut_by_stop(stopped(5.64, RunStatus.COMPLETE)) is None
    assert _cut_by_stop(stopped(600.0)) is None  # at the planned end
    # a RUN_TIME of 5.5 s ends on a short last interval: stopped after it, nothing was cut
    short = stopped(5.5, planned_s=5.5)
    assert _cut_by_stop(short) is None
    assert _cut_by_stop(stopped(5.7, planned_s=5.5)) is None  # stopped after the end
    assert _cut_by_stop(stopped(-0.2)) is None  # before the window opened
    assert _cut_by_stop(RunRecord(status=RunStatus.INTERRUPTED)) is None  # no window


def test_the_warning_refuses_verdicts() -> None:
    sentence, _ = _cut_by_stop(stopped(5.64)) or ("", 0.0)
    assert reasons([sentence], "slobops_per_s") and reasons([sentence], "lio_per_s")
    assert not reasons(["another warning"], "slobops_per_s")


def test_a_result_of_the_interval_the_stop_cut_is_not_the_windows() -> None:
    stopping = Stopping(RunRecord(), [], [])
    schedule = Schedule(START, START + 60, 1.0)
    assert not stopping.cut(schedule, 6)  # not stopped
    stopping.stopped_at = START + 5.64
    assert not stopping.cut(schedule, 5)  # ended at START + 5: before the stop
    assert stopping.cut(schedule, 6) and stopping.cut(schedule, 7)
