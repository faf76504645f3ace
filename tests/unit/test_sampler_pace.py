"""How often the sampler saves a checkpoint and samples waits (runner/sampler.py)."""

from openslob.runner.sampler import (
    CHECKPOINT_CPU_SHARE,
    CHECKPOINT_EVERY_S,
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
