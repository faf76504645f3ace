"""Batched answers (runner/batches.py): how many intervals an answer covers, the sessions'
stagger, and when a boundary's counters may be read (IntervalBook.on_publish)."""

from __future__ import annotations

import pytest

from openslob.model.loop import call_goes_on, interval_results
from openslob.runner.batches import MAX_BATCH, batch_offset, batch_size, positions
from openslob.runner.intervals import IntervalBook, Schedule


@pytest.mark.parametrize(
    ("sessions", "per_s", "interval_s", "batch"),
    [
        (2, 64, 1.0, 1),
        (64, 64, 1.0, 1),  # the limit itself: an answer an interval
        (65, 64, 1.0, 2),
        (256, 64, 1.0, 4),
        (256, 32, 1.0, 8),
        (64, 64, 0.5, 2),  # shorter intervals, more answers a second
        (256, 0, 1.0, 1),  # 0: no limit
        (0, 64, 1.0, 1),
        (512, 32, 1.0, 16),
        (513, 32, 1.0, 16),  # capped: rows at most 16 intervals late
        (256, 1, 1.0, 16),
    ],
)
def test_the_batch_keeps_the_answers_a_second_under_the_limit(
    sessions: int, per_s: int, interval_s: float, batch: int
) -> None:
    assert batch_size(sessions, per_s, interval_s) == batch
    if per_s and batch < MAX_BATCH:
        assert sessions / batch / interval_s <= per_s


def test_each_instances_sessions_are_staggered_over_the_batch() -> None:
    places = positions([0, 1, 0, 1, 0, 1, 0, 1])  # two instances, sessions alternating
    assert places == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}
    offsets = [batch_offset(places[s], 4) for s in range(0, 8, 2)]
    assert sorted(offsets) == [0, 1, 2, 3]  # one of the instance's sessions per boundary
    assert batch_offset(5, 1) == 0


def test_an_answer_is_one_result_or_a_batch_whose_last_says_whether_the_call_goes_on() -> None:
    assert interval_results({}) == []
    assert interval_results({"interval": 1}) == [{"interval": 1}]
    batch = [{"interval": 1, "call_ended": False}, {"interval": 2, "call_ended": True}]
    assert interval_results(batch) == batch and not call_goes_on(batch)
    assert call_goes_on([{"interval": 1, "call_ended": False}])
    assert not call_goes_on({})


def test_a_boundary_is_published_once_the_sessions_due_at_it_have_answered() -> None:
    """Two sessions, batch 2: session 1 answers at odd boundaries, session 2 at even ones.
    Boundary 1's counters may be read once session 1 has answered interval 1, before
    session 2 (which answers 1 and 2 together) has; the interval itself closes only when
    both have it."""
    published: list[int] = []
    closed: list[int] = []
    book = IntervalBook(
        "window",
        Schedule(0.0, 6.0, 1.0),
        [1, 2],
        lambda interval, attach: closed.append(interval.index),
        due={1: (2, 1), 2: (2, 0)},
        on_publish=published.append,
    )
    for session in (1, 2):
        book.starting(session, 0.0)
    book.returned(1, 0, 1, {"ops_select": 3})
    book.starting(1, 1.0)
    book.close_ready()
    assert published == [1] and closed == []
    book.returned(2, 0, 1, {"ops_select": 2})
    book.returned(2, 0, 2, {"ops_select": 2})
    book.starting(2, 2.0)
    book.close_ready()
    assert published == [1, 2] and closed == [1]  # session 1 is inside interval 2's batch
    book.returned(1, 0, 2, {"ops_select": 3})
    book.returned(1, 0, 3, {"ops_select": 3})
    book.starting(1, 3.0)
    book.close_ready()
    assert published == [1, 2, 3] and closed == [1, 2]


def test_without_batches_nothing_is_published() -> None:
    """No on_publish (no batches: the sampler reads at each boundary itself): the book
    tracks no publishing; the same answers with a listener publish boundary 1."""
    published: list[int] = []
    for listener in (None, published.append):
        book = IntervalBook(
            "window", Schedule(0.0, 3.0, 1.0), [1], lambda i, a: None, on_publish=listener
        )
        book.starting(1, 0.0)
        book.returned(1, 0, 1, {"ops_select": 1})
        book.starting(1, 1.0)
        book.close_ready()
        assert book.published == (0 if listener is None else 1)
    assert published == [1]
