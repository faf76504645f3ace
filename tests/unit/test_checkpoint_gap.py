"""The spacing of provisional run.json checkpoints (runner/sampler.checkpoint_gap_s)."""

from openslob.runner.sampler import CHECKPOINT_CPU_SHARE, CHECKPOINT_EVERY_S, checkpoint_gap_s


def test_a_cheap_checkpoint_keeps_the_set_spacing() -> None:
    assert checkpoint_gap_s(CHECKPOINT_EVERY_S, 0.002) == CHECKPOINT_EVERY_S


def test_a_costly_checkpoint_waits_until_it_is_a_thousandth_of_a_cpu() -> None:
    # 64 sessions on the 2-vCPU VM: a checkpoint took 16.5 ms of the client's CPU
    gap = checkpoint_gap_s(CHECKPOINT_EVERY_S, 0.0165)
    assert gap == 0.0165 / CHECKPOINT_CPU_SHARE
    assert abs(0.0165 / gap - CHECKPOINT_CPU_SHARE) < 1e-12
