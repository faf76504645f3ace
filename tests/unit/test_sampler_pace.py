"""How often the sampler saves a checkpoint and samples waits (runner/sampler.py)."""

import time

from openslob.model.states import Phase
from openslob.results.record import RunRecord
from openslob.runner.intervals import Interval, Schedule
from openslob.runner.sampler import (
    CHECKPOINT_CPU_SHARE,
    CHECKPOINT_EVERY_S,
    Sampler,
    checkpoint_due,
    checkpoint_gap_s,
)


def test_a_cheap_checkpoint_keeps_the_set_spacing() -> None:
    assert checkpoint_gap_s(CHECKPOINT_EVERY_S, 0.002) == CHECKPOINT_EVERY_S


def test_a_costly_checkpoint_waits_until_it_is_a_thousandth_of_a_cpu() -> None:
    # 64 sessions on the 2-vCPU VM: a checkpoint took 16.5 ms of the client's CPU
    gap = checkpoint_gap_s(CHECKPOINT_EVERY_S, 0.0165)
    assert gap == 0.0165 / CHECKPOINT_CPU_SHARE
    assert abs(0.0165 / gap - CHECKPOINT_CPU_SHARE) < 1e-12


def test_wait_samples_keep_to_a_budget_of_session_samples_between_1_and_10_hz() -> None:
    from openslob.runner.sampler import WAIT_SESSION_SAMPLES_PER_S, wait_sample_hz

    assert [wait_sample_hz(n) for n in (1, 2, 16)] == [10.0, 10.0, 10.0]
    assert wait_sample_hz(64) == 2.5 and wait_sample_hz(64) * 64 == WAIT_SESSION_SAMPLES_PER_S
    assert wait_sample_hz(160) == wait_sample_hz(256) == wait_sample_hz(4096) == 1.0


def test_no_checkpoint_before_its_gap_nor_once_the_window_has_ended() -> None:
    end = 1_000_000.0
    assert checkpoint_due(10.0, 10.0, end - 5, end)  # due, inside the window
    assert not checkpoint_due(9.9, 10.0, end - 5, end)  # too soon
    assert not checkpoint_due(30.0, 10.0, end, end)  # the window is over: run.json follows
    assert not checkpoint_due(30.0, 10.0, end + 3, end)
    assert checkpoint_due(30.0, 10.0, end + 3, None)  # WORK_LOOP: no planned end


def test_the_first_checkpoint_comes_a_gap_into_the_window() -> None:
    """Not at the window's first row: a checkpoint is due its gap after the window began,
    as each later one is after the last (the sampler's own methods, no thread, no server)."""
    saved: list[RunRecord] = []

    def checkpoint(record: RunRecord) -> None:
        saved.append(record)

    checkpoint.every_s = 0.3  # type: ignore[attr-defined]
    sampler = Sampler([], RunRecord(), checkpoint=checkpoint)
    start = time.time()
    sampler._begin(Phase.WINDOW, Schedule(start, start + 60, 0.1), [], {})
    for index in (1, 2):
        interval = Interval(Phase.WINDOW, index, start + 0.1 * (index - 1), start + 0.1 * index)
        sampler._window_progress(interval, [], {}, None)
    assert saved == []
    time.sleep(0.35)
    sampler._window_progress(Interval(Phase.WINDOW, 3, start + 0.2, start + 0.3), [], {}, None)
    assert len(saved) == 1 and saved[0].status == "interrupted"
