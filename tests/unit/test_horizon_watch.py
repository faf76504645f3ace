"""HorizonWatch without a server: holds from consecutive samples of the same holder, each
stamped when it was read (model/horizon.py)."""

from __future__ import annotations

from openslob.model.horizon import HELD_WARN_S, HorizonWatch


def _sample(holder: str) -> dict:
    return {"kind": "session", "holder": holder, "xmin": 7, "age_xids": 3, "role": "r"}


def test_a_hold_spans_its_samples_stamps_even_when_they_come_out_of_order() -> None:
    """A row read now may come before rows whose samples were read earlier with their
    snapshots: the hold still runs from the earliest to the latest stamp, never negative."""
    watch = HorizonWatch()
    start = 1_000.0
    for epoch in (start + HELD_WARN_S, start, start + HELD_WARN_S + 2, start + 1):
        watch.add(epoch, _sample("42"))
    (hold,) = watch.holds.values()
    assert hold.first_epoch == start and hold.last_epoch == start + HELD_WARN_S + 2
    assert hold.samples == 4 and watch.long_holds() == [hold]


def test_another_holder_ends_the_hold() -> None:
    watch = HorizonWatch()
    watch.add(0.0, _sample("1"))
    watch.add(1.0, _sample("2"))
    watch.add(2.0, _sample("1"))
    assert not watch.holds  # no holder was seen twice in a row
