"""IntervalBook, Schedule and merge_results without a server: the rules by which sessions'
per-CALL results become the time series (runner/intervals.py's contract)."""

from __future__ import annotations

import copy
import random

import pytest

from openslob.runner.intervals import (
    Interval,
    IntervalBook,
    Schedule,
    fold_pairs,
    merge_into,
    merge_many,
    merge_results,
)


def test_schedule_boundaries_and_indexes() -> None:
    sched = Schedule(100.0, 102.5, 1.0)
    assert [sched.boundary(k) for k in (1, 2, 3, 4)] == [101.0, 102.0, 102.5, 102.5]
    assert sched.last_index() == 3
    # a boundary belongs to the interval it starts; past the end is the last interval
    assert [sched.index_at(t) for t in (100.0, 100.99, 101.0, 102.4, 103.0, 99.0)] == [
        1, 1, 2, 3, 3, 1,
    ]  # fmt: skip


def test_a_phase_without_a_planned_end_goes_on() -> None:
    sched = Schedule(0.0, None, 0.5)
    assert sched.boundary(7) == 3.5
    assert sched.index_at(10.2) == 21
    with pytest.raises(ValueError, match="no last interval"):
        sched.last_index()


def test_merge_results_sums_counts_and_buckets_keeps_the_span() -> None:
    first = {
        "ops_select": 3, "lio": 10, "hist_select": {"5": 2, "6": 1}, "began_epoch": 1.0,
        "ended_epoch": 2.0, "max_lag_us": 7.0, "next": 9, "pid": 11, "behind_s": 0.5,
    }  # fmt: skip
    second = {
        "ops_select": 2, "lio": 5, "hist_select": {"6": 4, "9": 1}, "began_epoch": 2.0,
        "ended_epoch": 3.0, "max_lag_us": 3.0, "next": 10, "pid": 12, "behind_s": 0.1,
    }  # fmt: skip
    merged = merge_results(merge_results(None, first), second)
    assert merged["ops_select"] == 5 and merged["lio"] == 15
    assert merged["hist_select"] == {"5": 2, "6": 5, "9": 1}
    assert merged["began_epoch"] == 1.0 and merged["ended_epoch"] == 3.0
    assert merged["max_lag_us"] == 7.0  # the largest lag, not a sum
    assert merged["pid"] == 12 and merged["behind_s"] == 0.1  # the last CALL's
    assert "next" not in merged
    assert first["ops_select"] == 3 and first["hist_select"] == {"5": 2, "6": 1}  # unchanged


def test_merge_into_is_merge_results_in_place_and_leaves_the_parts_alone() -> None:
    # an open interval's sum grows in place (no copy of the sum per CALL): the same figures
    # as merge_results in any order, histograms owned by the sum, the CALLs' dicts untouched
    parts = [
        {"ops_select": 3, "hist_select": {"5": 2}, "hist_update": None, "began_epoch": 1.0,
         "ended_epoch": 2.0, "max_lag_us": None, "next": {"op_base": 3}, "pid": 11},
        {"ops_select": 2, "hist_select": {"5": 1, "9": 4}, "hist_update": {"7": 1},
         "began_epoch": 2.0, "ended_epoch": 3.0, "max_lag_us": 4.0, "pid": 12},
        {"ops_select": 0, "hist_select": {}, "hist_update": None, "began_epoch": 3.0,
         "ended_epoch": 3.5, "max_lag_us": 2.0, "pid": 13, "lio": 9},
    ]  # fmt: skip
    before = copy.deepcopy(parts)
    for order in ([0, 1, 2], [2, 1, 0], [1, 0, 2]):
        by_copy, in_place = None, None
        for i in order:
            by_copy = merge_results(by_copy, parts[i])
            in_place = merge_into(in_place, parts[i])
        assert in_place == by_copy, order
        assert parts == before
    assert in_place is not None and in_place["hist_select"] == {"5": 3, "9": 4}
    # counts only (a checkpoint's session sums): the same figures without any histogram
    counts, full = None, None
    for part in parts:
        counts = merge_into(counts, part, histograms=False)
        full = merge_into(full, part)
    assert full is not None and full["hist_update"] == {"7": 1}
    assert counts == {k: v for k, v in full.items() if not k.startswith("hist_")}
    assert parts == before


class _Closed(list):
    def append_pair(self, interval: Interval, attach: dict) -> None:
        self.append((interval, attach))


def _new_book(sessions: list[int], end: float | None = 3.0) -> tuple[IntervalBook, _Closed]:
    closed = _Closed()
    return IntervalBook("window", Schedule(0.0, end, 1.0), sessions, closed.append_pair), closed


def test_histograms_sent_as_pairs_of_lists_sum_like_objects_when_the_interval_closes() -> None:
    """PostgreSQL's loop sends [[idx, ...], [count, ...]], MariaDB's {"idx": count}: an
    interval collects the pairs and sums them once it closes, to the same buckets as the
    objects would give (mixed forms, several instances); the results stay as they came."""
    from openslob.model.histogram import Histogram, sparse

    pair_a = {"ops_select": 3, "hist_select": [[5, 6], [2, 1]], "hist_update": None}
    pair_b = {"ops_select": 5, "hist_select": [[6, 9], [4, 1]], "hist_update": [[7], [2]]}
    obj_c = {"ops_select": 2, "hist_select": {"5": 1, "700": 1}, "hist_update": {}}
    kept = copy.deepcopy([pair_a, pair_b, obj_c])
    closed: list[Interval] = []
    book = IntervalBook(
        "window", Schedule(0.0, 10.0, 1.0), [1, 2, 3], lambda i, a: closed.append(i)
    )
    for session, result in enumerate((pair_a, pair_b, obj_c), start=1):
        book.starting(session, 0.1)
        book.returned(session, 0, 1, result)
    book.returned(3, 1, 1, copy.deepcopy(pair_b))  # another instance of its own
    assert not book.open[1].results and len(book.open[1].parts[0]) == 3  # not summed yet
    book.close_ready(through=1)
    (interval,) = closed
    assert interval.results[0]["hist_select"] == {"5": 3, "6": 5, "9": 1, "700": 1}
    assert interval.results[0]["hist_update"] == {"7": 2}
    assert interval.results[0]["ops_select"] == 10
    assert interval.results[1]["hist_select"] == {"6": 4, "9": 1}
    assert not any(interval.parts.values()), "folded once"
    assert [pair_a, pair_b, obj_c] == kept
    # outside an interval (phase totals, a second CALL of a session) pairs merge as objects
    assert merge_results(pair_a, pair_b)["hist_select"] == {"5": 2, "6": 5, "9": 1}
    assert sparse(pair_b["hist_update"]) == {"7": 2} and sparse(None) is None
    assert Histogram.from_json(pair_a["hist_select"]).counts == {5: 2, 6: 1}


def test_an_interval_closes_once_every_session_covered_it_and_one_started_later() -> None:
    book, closed = _new_book([1, 2])
    assert book.starting(1, 0.0) == (1, 1.0)
    assert book.starting(2, 0.0) == (1, 1.0)
    book.returned(1, 0, 1, {"ops_select": 4})
    book.starting(1, 1.01)
    book.close_ready()
    assert closed == []  # session 2 is still in interval 1
    book.returned(2, 0, 1, {"ops_select": 6})
    book.close_ready()
    assert [(iv.index, iv.total()["ops_select"]) for iv, _ in closed] == [(1, 10)]
    interval = closed[0][0]
    assert (interval.start, interval.end) == (0.0, 1.0)
    assert interval.by_session[1]["ops_select"] == 4 and interval.by_session[2]["ops_select"] == 6


def test_two_calls_of_one_session_in_an_interval_sum_without_changing_either_result() -> None:
    """A session's first result is kept as it came (no copy per CALL); a second CALL in the
    same interval (one that ended early) is summed into a copy, never into a result."""
    book, closed = _new_book([1])
    first = {"ops_select": 4, "hist_select": {"3": 2}}
    second = {"ops_select": 1, "hist_select": {"3": 1, "9": 1}}
    book.starting(1, 0.0)
    book.returned(1, 0, 1, first)
    book.returned(1, 0, 1, second)
    book.starting(1, 1.0)
    book.close_ready()
    mine = closed[0][0].by_session[1]
    assert mine["ops_select"] == 5 and mine["hist_select"] == {"3": 3, "9": 1}
    assert first == {"ops_select": 4, "hist_select": {"3": 2}}
    assert second == {"ops_select": 1, "hist_select": {"3": 1, "9": 1}}


def test_one_session_closes_its_interval_as_its_next_call_leaves() -> None:
    """The 1-session case (issue 31): the interval closes when the next CALL is sent, so the
    counters read at that moment hold exactly that interval's work."""
    book, closed = _new_book([1])
    book.starting(1, 0.0)
    book.returned(1, 0, 1, {"ops_update": 2, "own_commits": 1})
    book.close_ready()
    assert closed == []  # nothing has started past interval 1 yet
    book.starting(1, 1.0)
    book.close_ready()
    assert [iv.index for iv, _ in closed] == [1]
    assert closed[0][0].own_commits == {0: 1}


def test_an_op_that_outlasts_an_interval_leaves_it_empty_and_the_op_where_it_started() -> None:
    book, closed = _new_book([1])
    book.starting(1, 0.0)
    book.returned(1, 0, 1, {"ops_select": 1})  # its op ran until 2.3
    assert book.starting(1, 2.3) == (3, 3.0)
    book.close_ready()
    assert [(iv.index, iv.total()) for iv, _ in closed] == [(1, {"ops_select": 1}), (2, None)]


def test_the_phase_end_closes_the_rest_with_the_attachment_on_the_last() -> None:
    book, closed = _new_book([1, 2])
    book.starting(1, 0.0)
    book.starting(2, 0.0)
    book.returned(1, 0, 1, {"ops_select": 1})
    book.finished(2)  # a session that failed or finished its loops no longer holds closing
    book.own_commit(0)  # a statistics flush after the last CALL: the last interval's
    book.close_ready(through=3, attach={"after": "snapshot"})
    assert [iv.index for iv, _ in closed] == [1, 2, 3]
    assert [attach for _, attach in closed] == [{}, {}, {"after": "snapshot"}]
    assert closed[0][0].own_commits == {0: 1}


def test_a_stop_closes_the_rows_up_to_the_last_interval_with_results() -> None:
    """A stop just after boundary 2: session 1 had returned interval 2, session 2's CALL of
    it was cancelled in its last op (no result), the stop's own commits went to interval 3,
    which the stop cut. Interval 2 never closes by itself; after the stop it closes with the
    "after" snapshots, and interval 3's commits go with it: the rows hold every op and
    commit the window counts."""
    book, closed = _new_book([1, 2], end=5.0)
    for session in (1, 2):
        book.starting(session, 0.0)
        book.returned(session, 0, 1, {"ops_select": 3})
        book.starting(session, 1.0)
    book.returned(1, 0, 2, {"ops_select": 5})
    book.starting(1, 2.0)
    book.close_ready()
    assert [iv.index for iv, _ in closed] == [1]
    book.finished(2)  # cancelled
    book.finished(1)
    book.own_commit(0)  # booked to interval 3, the one the stop cut
    book.close_kept({"after": "snapshot"})
    assert [(iv.index, iv.total()) for iv, _ in closed] == [
        (1, {"ops_select": 6}),
        (2, {"ops_select": 5}),
    ]
    assert closed[-1][1] == {"after": "snapshot"} and closed[-1][0].own_commits == {0: 1}
    assert book.open == {}


def test_a_stop_after_every_row_closed_closes_nothing_more() -> None:
    book, closed = _new_book([1], end=5.0)
    book.starting(1, 0.0)
    book.returned(1, 0, 1, {"ops_select": 3})
    book.starting(1, 1.0)
    book.close_ready()
    book.finished(1)
    book.own_commit(0)
    book.close_kept({"after": "snapshot"})
    assert [iv.index for iv, _ in closed] == [1]


def test_instances_are_kept_apart_and_summed() -> None:
    book, closed = _new_book([1, 2])
    book.starting(1, 0.0)
    book.starting(2, 0.0)
    book.returned(1, 0, 1, {"pio_reads": 5})
    book.returned(2, 1, 1, {"pio_reads": 7})
    book.close_ready(through=1)
    interval = closed[0][0]
    assert interval.results[0]["pio_reads"] == 5 and interval.results[1]["pio_reads"] == 7
    assert interval.total()["pio_reads"] == 12


def _sequential(total: dict | None, parts: list[dict]) -> dict | None:
    """What an interval summed before merge_many: each part in turn, pairs folded at the end."""
    pairs: dict = {}
    for part in parts:
        total = merge_into(total, part, pairs=pairs)
    if total is not None:
        fold_pairs(total, pairs)
    return total


def _random_part(rng: random.Random, keys: list[str]) -> dict:
    def hist() -> object:
        form = rng.randrange(4)
        if form == 0:
            return None
        used = rng.sample(range(40), rng.randrange(0, 6))
        counts = [rng.randrange(1, 9) for _ in used]
        if form < 3:
            return [used, counts]
        return {str(i): c for i, c in zip(used, counts, strict=True)}

    def number() -> object:
        return rng.choice(
            [rng.randrange(100), rng.random() * 10, None, True, "x"]
            if rng.random() < 0.1
            else [rng.randrange(100), rng.random() * 1e3]
        )

    return {k: hist() if k.startswith("hist_") else number() for k in keys}


def test_merge_many_is_merge_into_of_each_part_in_turn() -> None:
    """The bulk sum at an interval's close gives what merging each result as it came gave:
    every rule (first, last, max, per-call, sums), None, bools and text among the numbers,
    both histogram forms, parts with other keys, onto an empty or an existing sum; floats
    added in the same order (equal to the bit)."""
    rng = random.Random(30)
    names = ["ops_select", "rows_selected", "busy_us", "began_epoch", "ended_epoch", "pid",
             "max_lag_us", "next", "call_ended", "hist_select", "hist_update",
             "hist_scan_intended", "behind_s"]  # fmt: skip
    for trial in range(300):
        keys = rng.sample(names, rng.randrange(1, len(names)))
        parts = [_random_part(rng, keys) for _ in range(rng.randrange(1, 12))]
        if trial % 5 == 0:  # another engine's or a RATE run's keys in one part
            parts.append(_random_part(rng, [*keys, "lio"]))
        start = None if trial % 3 else _sequential(None, [_random_part(rng, keys)])
        before = copy.deepcopy(parts)
        try:
            expected = _sequential(copy.deepcopy(start), copy.deepcopy(parts))
        except TypeError:  # text where a sum is due: both refuse it
            with pytest.raises(TypeError):
                merge_many(copy.deepcopy(start), parts)
            continue
        got = merge_many(copy.deepcopy(start), parts)
        assert got == expected, (trial, parts)
        assert parts == before  # the results stay as they came
    assert merge_many(None, []) is None


def test_the_book_keeps_its_floor_and_publishes_as_a_pass_over_every_session_would() -> None:
    """IntervalBook keeps counts of the sessions per covered interval and the sessions by
    (batch, offset) rather than passing over all of them at every answer: after any mix of
    CALLs sent, results, sessions that finish or come back, the rows it closes and the
    boundaries it publishes are those a pass over every session gives."""
    rng = random.Random(256)
    for trial in range(60):
        sessions = list(range(rng.randrange(1, 40)))
        batch = rng.choice([1, 2, 4, 16])
        due = {s: (batch, s % batch) for s in sessions if rng.random() < 0.9}
        published: list[int] = []
        closed = _Closed()
        book = IntervalBook(
            "window", Schedule(0.0, None, 1.0), sessions,
            closed.append_pair, due=due, on_publish=published.append,
        )  # fmt: skip
        covered = dict.fromkeys(sessions, 0)
        expect_published, expect_closed, started = 0, 0, 0
        for _ in range(300):
            s, now = rng.choice(sessions), rng.random() * 30
            op = rng.random()
            if op < 0.4:
                index = book.starting(s, now)[0]
                covered[s] = max(covered.get(s, 0), index - 1)
                started = max(started, index)
            elif op < 0.9:
                index = max(1, int(now))
                book.returned(s, 0, index, {"ops_select": 1})
                covered[s] = max(covered.get(s, 0), index)
            else:
                book.finished(s)
                covered.pop(s, None)
            book.close_ready()
            while expect_published < started - 1:  # the pass over every session
                index = expect_published + 1
                if any((index + due.get(t, (1, 0))[1]) % due.get(t, (1, 0))[0] == 0
                       and c < index for t, c in covered.items()):  # fmt: skip
                    break
                expect_published = index
            expect_closed = max(expect_closed, min(min(covered.values(), default=0), started - 1))
            assert book.covered == covered, trial
            assert published == list(range(1, expect_published + 1)), trial
            assert [i.index for i, _ in closed] == list(range(1, expect_closed + 1)), trial
