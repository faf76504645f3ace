"""Sampling intervals of a phase: one loop result per session per interval, and their books.

A phase (warm-up or window) is cut at boundaries start + k × SAMPLE_INTERVAL (the last one
at the phase's planned end). Each session's CALL runs until the next boundary and returns
that interval's counts and latency histograms; the session sends its next CALL at once.
An op belongs to the interval in which it started (the loop looks at the clock before each
op), so a CALL may end a little after its boundary, by the op in flight.

IntervalBook adds the sessions' results up per interval and says when an interval is
closed: every session still running has either returned its CALL up to that boundary or
started a later one (a session whose op outlasted a whole interval skips it), and some
session has started a later one (the phase's last interval is closed by the caller, with
the snapshots that end the phase). The controller asks after each return and after each
CALL it sends: a single session's interval k closes as its CALL k+1 leaves, not when that
CALL returns (which read interval k+1's work into row k). A closed
interval goes to the sampler (runner/sampler.py), which reads the counters at that moment:
PostgreSQL publishes a CALL's I/O when it ends, so the database counters then hold exactly
the closed intervals' work, as long as no single op outlasts an interval.

Loop results (the `result` JSON of every engine's loop) merge as model/loop.py
declares per key: counts sum, histograms sum per bucket (those sent as pairs of lists in
bulk when the interval closes), the first CALL's start and the last
CALL's end are kept, the largest lag is the largest, `next` is the CALL's own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from operator import add, itemgetter
from typing import Any

import numpy as np

from openslob.model.histogram import sparse
from openslob.model.loop import HISTOGRAM_KEYS, LOOP_RESULT, MERGE_BY_KEY, Merge


def merge_results(total: dict[str, Any] | None, part: dict[str, Any]) -> dict[str, Any]:
    """Two loop results as one (a new dict: readers in other threads see whole values); each
    key merges as model/loop.py declares it (an undeclared number adds up). merge_into on a
    copy of `total` with its own histograms: one set of rules for both."""
    return merge_into(None if total is None else merge_into(None, total), part)


def _keys(how: Merge) -> frozenset[str]:
    return frozenset(k for k, m in MERGE_BY_KEY.items() if m is how)


# The keys by merge rule, as sets: a member of an Enum read per key (Python 3.11 looks it up
# through a descriptor) made merge_into ~24 us a result, the most of the client's CPU per
# interval result after its JSON at 256 sessions.
_HISTOGRAMS, _PER_CALL = HISTOGRAM_KEYS, _keys(Merge.PER_CALL)
_FIRST, _LAST, _MAX = _keys(Merge.FIRST), _keys(Merge.LAST), _keys(Merge.MAX)


def merge_into(
    total: dict[str, Any] | None,
    part: dict[str, Any],
    *,
    histograms: bool = True,
    pairs: Pairs | None = None,
) -> dict[str, Any]:
    """merge_results for an accumulator no other thread reads yet (an open interval's):
    `total` is changed in place and returned (a new one, with its own histograms, when
    None), so adding a CALL costs its own keys and buckets, not a copy of the sum.
    Without `histograms` the latency histograms are left out (counts only). With `pairs`,
    a histogram sent as [[idx, ...], [count, ...]] is collected there rather than merged
    (Interval.add; fold_pairs sums them in bulk when the interval closes)."""
    if total is None:
        total = {k: v for k, v in part.items() if k not in _PER_CALL and k not in _HISTOGRAMS}
        if histograms:
            for key in _HISTOGRAMS.intersection(part):
                _add_histogram(total, key, part[key], pairs)
        return total
    for key, value in part.items():
        if key in _HISTOGRAMS:
            if histograms:
                _add_histogram(total, key, value, pairs)
        elif key in _PER_CALL or (key in _FIRST and key in total):
            continue
        elif key in _LAST or key in _FIRST or (old := total.get(key)) is None:
            total[key] = value
        elif key in _MAX:
            if value is not None:
                total[key] = max(old, value)
        elif value.__class__ is int or value.__class__ is float:  # not a bool, not None
            total[key] = old + value
    return total


# An interval's histograms sent as pairs of lists, by key: every result's buckets and
# counts, one after the other, summed once when the interval closes
Pairs = dict[str, tuple[list[int], list[int]]]


def _add_histogram(total: dict[str, Any], key: str, value: Any, pairs: Pairs | None) -> None:
    """One loop histogram (model/histogram.py: either form) into total[key]."""
    if value.__class__ is list:
        if pairs is not None:
            kept = pairs.get(key)
            if kept is None:
                pairs[key] = (list(value[0]), list(value[1]))
            else:
                kept[0].extend(value[0])
                kept[1].extend(value[1])
            if total.get(key) is None:
                total[key] = {}
            return
        value = sparse(value)
    hist = total.get(key)
    if hist is None:
        total[key] = None if value is None else dict(value)
        return
    if value:
        get = hist.get
        for idx, count in value.items():
            hist[idx] = get(idx, 0) + count


def fold_pairs(total: dict[str, Any], pairs: Pairs) -> None:
    """The collected pairs into total's histograms ({"idx": count}), emptied: one bincount
    over all of the interval's buckets. At 256 sessions a merge of each result's ~50
    buckets in Python was the largest part of the client's CPU per result."""
    for key, (idxs, counts) in pairs.items():
        if not idxs:
            continue
        sums = np.bincount(np.asarray(idxs, dtype=np.int64), weights=np.asarray(counts))
        used = np.flatnonzero(sums)
        hist = total.get(key) or {}
        get = hist.get
        for idx, count in zip(used.tolist(), sums[used].astype(np.int64).tolist(), strict=True):
            name = str(idx)
            hist[name] = get(name, 0) + count
        total[key] = hist
    pairs.clear()


def merge_many(total: dict[str, Any] | None, parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """merge_into of each part in turn (histograms summed with fold_pairs), done key by key
    over all the parts at once when they hold the same keys (one engine's results): at 256
    sessions a merge per result as it came was ~8 us each, 2 ms of the client's CPU a
    second; a key's values summed in one pass cost a few hundred ns a part. Parts with other
    keys, or values other than numbers where a sum is due, take the merge per part."""
    if not parts:
        return total
    first = parts[0]
    keys = first.keys()
    if any(p.keys() != keys for p in parts):
        pairs: Pairs = {}
        for part in parts:
            total = merge_into(total, part, pairs=pairs)
        assert total is not None
        fold_pairs(total, pairs)
        return total
    out: dict[str, Any] = {} if total is None else total
    for key in keys:
        if key in _PER_CALL:
            continue
        values = list(map(itemgetter(key), parts))
        if key in _HISTOGRAMS:
            _merge_histograms(out, key, values)
        elif key in _FIRST:
            if key not in out:
                out[key] = values[0]
        elif key in _LAST:
            out[key] = values[-1]
        elif key in _MAX:
            old = out.get(key)
            out[key] = max(
                [v for v in values if v is not None] + ([] if old is None else [old]),
                default=None,
            )
        elif values.count(None) == len(values):  # a figure this kind of run has not
            if out.get(key) is None:
                out[key] = None
        elif _NUMBERS.issuperset(map(type, values)) and type(out.get(key)) in _SUMMABLE:
            old = out.get(key)
            # left to right, as one merge after another added them (sum() compensates
            # float rounding from Python 3.12: another last bit)
            out[key] = reduce(add, values, old) if old is not None else reduce(add, values)
        else:  # anything else: as merge_into would, value by value
            for value in values:
                merge_into(out, {key: value})
    return out


_NUMBERS = frozenset((int, float))  # summed (a bool is not one: type(), not isinstance)
_SUMMABLE = frozenset((int, float, type(None)))  # what a sum may start from


def _merge_histograms(out: dict[str, Any], key: str, values: list[Any]) -> None:
    """A key's histograms of all parts into out[key], as _add_histogram of each in turn."""
    if values.count(None) == len(values):
        if key not in out:
            out[key] = None
        return
    idxs: list[int] = []
    counts: list[int] = []
    for value in values:
        if value.__class__ is list:
            idxs += value[0]
            counts += value[1]
            if out.get(key) is None:
                out[key] = {}
        elif not value:  # None or {}: no op of the kind in that result
            if out.get(key) is None:
                out[key] = None if value is None else {}
        else:
            _add_histogram(out, key, value, None)
    if idxs:
        fold_pairs(out, {key: (idxs, counts)})


class Schedule:
    """The boundaries of one phase: start + k × step, the last one at `end` (with no planned
    end, boundaries go on: a WORK_LOOP window)."""

    def __init__(self, start: float, end: float | None, step: float) -> None:
        self.start, self.end, self.step = start, end, step

    def begin(self, index: int) -> float:
        """The start of interval `index` (1, 2, ...): the phase's start, or the boundary
        before it."""
        return self.start if index == 1 else self.boundary(index - 1)

    def boundary(self, index: int) -> float:
        """The end of interval `index` (1, 2, ...)."""
        edge = self.start + index * self.step
        return edge if self.end is None else min(edge, self.end)

    def index_at(self, now: float) -> int:
        """The interval `now` falls in (a boundary belongs to the interval it starts)."""
        k = max(1, math.floor((now - self.start) / self.step + 1e-9) + 1)
        if self.end is not None:
            k = min(k, self.last_index())
        return k

    def last_index(self) -> int:
        if self.end is None:
            raise ValueError("a phase without a planned end has no last interval")
        return max(1, math.ceil((self.end - self.start) / self.step - 1e-9))


@dataclass
class Interval:
    """One interval of a phase, its results summed over sessions and instances."""

    phase: str
    index: int  # 1, 2, ... within the phase
    start: float  # epoch seconds
    end: float
    results: dict[int, dict[str, Any]] = field(default_factory=dict)  # by instance
    own_commits: dict[int, int] = field(default_factory=dict)  # by instance
    by_session: dict[int, dict[str, Any]] = field(default_factory=dict)
    # the results as they came, by instance, until fold() sums them into `results` (at the
    # close: merge_many, key by key)
    parts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, instance: int, result: dict[str, Any], session: int | None = None) -> None:
        # kept as it came: an open interval is this event loop's alone until it closes
        self.parts.setdefault(instance, []).append(result)
        if session is not None:
            # the session's CALL of the interval as it came (nothing changes a result after
            # it arrives); a second one (a CALL that ended early) is summed into a copy
            mine = self.by_session.get(session)
            self.by_session[session] = result if mine is None else merge_results(mine, result)
        commits = int(result.get(LOOP_RESULT.own_commits.key) or 0)
        self.own_commits[instance] = self.own_commits.get(instance, 0) + commits

    @property
    def has_results(self) -> bool:
        """Some session's result of this interval came (summed or not yet)."""
        return bool(self.results) or any(self.parts.values())

    def fold(self) -> None:
        """The results that came summed into `results` (before it is read)."""
        for instance, parts in self.parts.items():
            merged = merge_many(self.results.get(instance), parts)
            if merged is not None:
                self.results[instance] = merged
            parts.clear()

    def total(self) -> dict[str, Any] | None:
        self.fold()
        merged: dict[str, Any] | None = None
        for result in self.results.values():
            merged = merge_results(merged, result)
        return merged


class IntervalBook:
    """The intervals of one phase and who has covered them (see the module docstring).

    Called from the run's event loop only; closed intervals go to `on_close(interval,
    attach)` in order. An interval closes by itself once every running session has covered
    it and some session has started a later one; the phase's last interval (no CALL ever
    runs past it) is closed by the caller, with the snapshots that end the phase."""

    def __init__(
        self,
        phase: str,
        schedule: Schedule,
        sessions: list[int],
        on_close: Callable[[Interval, dict[str, Any]], None],
        due: dict[int, tuple[int, int]] | None = None,
        on_publish: Callable[[int], None] | None = None,
    ) -> None:
        self.phase, self.schedule = phase, schedule
        # batches (runner/batches.py): each session's (batch, offset), and who is told when
        # every session that answers at a boundary has answered (its counters are published)
        self.due, self.on_publish = due or {}, on_publish
        self.published = 0  # boundaries 1..published are published
        self.covered: dict[int, int] = {}  # session -> intervals it is done with
        # how many running sessions have covered each count (the floor is the least), and
        # the sessions by (batch, offset): close_ready runs after every answer and CALL,
        # and a pass over 256 sessions for either was most of its ~6 us
        self._levels: Counter[int] = Counter()
        self._answering: dict[int, dict[int, list[int]]] = {}
        for session in sessions:
            self._cover(session, 0)
        self.open: dict[int, Interval] = {}
        self.closed = 0  # intervals 1..closed are closed
        self.started = 0  # the highest interval a CALL has run in
        self.on_close = on_close

    def _interval(self, index: int) -> Interval:
        if index not in self.open:
            begin, end = self.schedule.begin(index), self.schedule.boundary(index)
            self.open[index] = Interval(self.phase, index, begin, end)
        return self.open[index]

    def starting(self, session: int, now: float) -> tuple[int, float]:
        """A session sends a CALL at `now`: (the interval it runs in, its boundary).
        Intervals that ended before `now` get nothing more from this session."""
        index = self.schedule.index_at(now)
        self._cover(session, index - 1)
        self.started = max(self.started, index)
        return index, self.schedule.boundary(index)

    def returned(self, session: int, instance: int, index: int, result: dict) -> None:
        self._interval(index).add(instance, result, session)
        self._cover(session, index)

    def _cover(self, session: int, index: int) -> None:
        """The session is done with intervals 1..index (no step back)."""
        old = self.covered.get(session)
        if old is not None and index <= old:
            return
        if old is None:
            batch, offset = self.due.get(session, (1, 0))
            group = self._answering.setdefault(batch, {}).setdefault(offset, [])
            if session not in group:  # (a session back after it finished is there)
                group.append(session)
        else:
            self._uncount(old)
        self.covered[session] = index
        self._levels[index] += 1

    def _uncount(self, level: int) -> None:
        left = self._levels[level] - 1
        if left:
            self._levels[level] = left
        else:
            del self._levels[level]

    def own_commit(self, instance: int) -> None:
        """A transaction of ours after the session's last CALL (its statistics flush): part
        of the phase's last interval."""
        commits = self._interval(max(self.started, 1)).own_commits
        commits[instance] = commits.get(instance, 0) + 1

    def finished(self, session: int) -> None:
        """The session runs no more CALLs in this phase (its loops are done, or it failed)."""
        level = self.covered.pop(session, None)
        if level is not None:
            self._uncount(level)

    def close_kept(self, attach: dict[str, Any]) -> None:
        """After a stop: close the intervals up to the last one that holds results, with
        `attach` (the window's "after" snapshots) on it, so that the rows add up to the
        window. An interval still open then had a session's CALL cancelled in it (an op
        that began before its boundary was running at the stop) while others' results of it
        came: without this its ops counted in the window with no row of theirs. Our own
        commits booked to a later interval (the one the stop cut) go with the last row."""
        kept = [index for index, interval in self.open.items() if interval.has_results]
        if not kept:
            return
        through = max(kept)
        last = self.open[through]
        for index in [i for i in self.open if i > through]:
            for instance, count in self.open.pop(index).own_commits.items():
                last.own_commits[instance] = last.own_commits.get(instance, 0) + count
        self.close_ready(through=through, attach=attach)

    def _publish_ready(self) -> None:
        """Say, in order, each boundary at which every running session due to answer there
        (batch, offset) has answered: the database counters then hold what they published
        at it (a session between its answers publishes nothing)."""
        if self.on_publish is None:
            return
        while self.published < self.started - 1:
            index = self.published + 1
            for batch, by_offset in self._answering.items():
                # due at `index`: the sessions with (index + offset) % batch == 0
                for session in by_offset.get(-index % batch, ()):
                    covered = self.covered.get(session)
                    if covered is not None and covered < index:
                        return
            self.published = index
            self.on_publish(index)

    def close_ready(
        self, *, through: int | None = None, attach: dict[str, Any] | None = None
    ) -> None:
        """Close, in order, the intervals ready to close, or all up to `through` (the phase
        is over; `attach` goes with the last one). An interval in which no op started (all
        sessions inside longer ops: a stall) closes empty."""
        if through is None:
            self._publish_ready()
            floor = min(self._levels, default=0)
            through = min(floor, self.started - 1)
        while self.closed < through:
            self.closed += 1
            interval = self._interval(self.closed)
            del self.open[self.closed]
            interval.fold()  # its readers (the sampler's thread) see whole histograms
            last = self.closed == through
            self.on_close(interval, (attach or {}) if last else {})
