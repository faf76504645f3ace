"""The work loop's contract, declared once: its parameters (the conf JSON every engine's
loop reads) and its per-CALL result (the JSON every engine's loop returns).

Every other module names a loop key through this declaration (`LOOP_RESULT.ops.key`,
`LOOP_PARAMS.seed.key`), never as a literal string; the engines' SQL reads and builds
exactly these keys (tests/unit/test_loop_contract.py checks both engines). Adding a field is
one line here: the test then fails for every engine that neither provides it nor says why
it leaves it out.

A phase's CALLs are pipelined (runner/phase.py): the next is sent while one runs, so it
cannot carry on from that one's result. The loop therefore cuts its own CALL at the next
boundary start_epoch + k x interval_s (returning `interval` = k), and keeps its `next` in
the session (each engine's setting or variable) for a CALL sent with `carry`; the phase's
first CALL takes `next` from the previous phase's last result instead. An engine whose
counters move while a statement runs (Capabilities.streams_intervals) gets `stream`: its
CALL then runs the whole phase and returns each interval's result as the interval ends
(`call_ended` false), so its loop never stops at a boundary.

With `batch` k > 1 the loop answers only at the end of an interval k with
(k + batch_offset) % batch == 0, at the phase's end, or when WORK_LOOP's count is done: the
answer is then a JSON array of the interval results since its last one, in order (a single
object when batch is 1). PostgreSQL's CALL ends there (its statistics are published then);
a streaming CALL sends the array and goes on. Until answered, the intervals' results are
kept in the session (each engine's `pending`: a committed setting, a user variable), so a
CALL cancelled at a stop loses only the interval it was in (RunBackend.pending).

Each field says its Python type, its SQL type (SqlType: each engine spells it), and:
- a parameter, the value the loop takes when the conf leaves it out (None: none), and where
  the conf gets it (`Source`);
- a result, how the intervals of a session and the sessions of an interval merge it
  (`Merge`: sum, max, first, last, histogram; per-call fields are not merged).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson


class SqlType(enum.Enum):
    """The SQL side of a field; each engine spells it (float8 / DOUBLE, ...)."""

    FLOAT = "float"
    BIGINT = "bigint"
    BOOLEAN = "boolean"
    TEXT = "text"
    JSON = "json"


class Source(enum.Enum):
    """Who puts a parameter into the conf."""

    CONF = "conf"  # runner/loopconf.py, from the run's parameters (LoopParams)
    NEXT = "next"  # the previous CALL's result `next`: the next CALL carries on from it
    GUARD = "guard"  # the engine's guard of the controlling client (MariaDB)


class Merge(enum.Enum):
    """How two results of the loop become one (runner/intervals.py)."""

    SUM = "sum"  # counts and durations add up
    MAX = "max"  # the largest (a None leaves the other)
    FIRST = "first"  # the first CALL's (the span's start)
    LAST = "last"  # the last CALL's (the span's end, the backend, the backlog)
    HISTOGRAM = "histogram"  # {"bucket": count} summed per bucket
    PER_CALL = "per_call"  # belongs to one CALL only, not merged (`next`)


@dataclass(frozen=True)
class Param:
    key: str
    py_type: type[object]
    sql_type: SqlType
    default: object  # what the loop takes when the conf leaves the key out (None: none)
    source: Source = Source.CONF
    doc: str = ""


@dataclass(frozen=True)
class ResultField:
    key: str
    py_type: type[object]
    sql_type: SqlType
    merge: Merge
    doc: str = ""


class _Params:
    """The conf's keys, in the order runner/loopconf.py writes them."""

    update_pct = Param("update_pct", float, SqlType.FLOAT, None, doc="UPDATE_PCT")
    scan_pct = Param("scan_pct", float, SqlType.FLOAT, None, doc="SCAN_PCT")
    work_unit = Param("work_unit", int, SqlType.BIGINT, None, doc="rows per op")
    scale = Param("scale", int, SqlType.BIGINT, None, doc="rows per schema")
    heavy = Param("heavy", bool, SqlType.BOOLEAN, None, doc="REDO_STRESS=HEAVY")
    loops = Param("loops", int, SqlType.BIGINT, 0, doc="ops left (0: until until_epoch)")
    until_epoch = Param(
        "until_epoch",
        float,
        SqlType.FLOAT,
        None,
        doc="the phase's end (the CALL's without interval_s)",
    )
    interval_s = Param(
        "interval_s", float, SqlType.FLOAT, None, doc="the CALL ends at start + k x interval_s"
    )
    start_epoch = Param("start_epoch", float, SqlType.FLOAT, None, doc="the barrier")
    record = Param("record", bool, SqlType.BOOLEAN, None, doc="the window: ops are timed")
    hot_schema_frequency = Param("hot_schema_frequency", int, SqlType.BIGINT, 0)
    hotspot_frequency = Param("hotspot_frequency", int, SqlType.BIGINT, 0)
    hotspot_first_key = Param("hotspot_first_key", int, SqlType.BIGINT, None)
    hotspot_last_key = Param("hotspot_last_key", int, SqlType.BIGINT, None)
    think_frequency = Param("think_frequency", int, SqlType.BIGINT, 0)
    think_min = Param("think_min", float, SqlType.FLOAT, 0.0, doc="seconds")
    think_max = Param("think_max", float, SqlType.FLOAT, 0.0, doc="seconds")
    release_s = Param("release_s", float, SqlType.FLOAT, 0.01, doc="snapshot release age")
    rate = Param("rate", float, SqlType.FLOAT, 0.0, doc="this session's ops/s (0: closed)")
    rate_dist = Param("rate_dist", str, SqlType.TEXT, None, doc="UNIFORM or POISSON")
    rate_offset = Param("rate_offset", float, SqlType.FLOAT, 0.0, doc="a UNIFORM start")
    nap_s = Param("nap_s", float, SqlType.FLOAT, 0.05, doc="longest sleep in one statement")
    seed = Param("seed", float, SqlType.FLOAT, None, doc="left out: no reseed")
    carry = Param(
        "carry", bool, SqlType.BOOLEAN, False, doc="the NEXT keys: the server's, not the conf's"
    )
    stream = Param(
        "stream",
        bool,
        SqlType.BOOLEAN,
        False,
        doc="one CALL for the phase: each interval's result returned as the interval ends",
    )
    batch = Param(
        "batch",
        int,
        SqlType.BIGINT,
        1,
        doc="intervals per answer: results kept in the session, returned every batch-th",
    )
    batch_offset = Param(
        "batch_offset", int, SqlType.BIGINT, 0, doc="the session's stagger: (k + it) % batch"
    )
    op_base = Param("op_base", int, SqlType.BIGINT, 0, Source.NEXT, "ops before this CALL")
    next_start = Param("next_start", float, SqlType.FLOAT, None, Source.NEXT, "next due op")
    rng_state = Param("rng_state", int, SqlType.BIGINT, None, Source.NEXT, "a loop's RNG")
    loops_left = Param("loops_left", int, SqlType.BIGINT, None, Source.NEXT, "WORK_LOOP's rest")
    guard_lock = Param("guard_lock", str, SqlType.TEXT, None, Source.GUARD, "lock name")
    guard_id = Param("guard_id", int, SqlType.BIGINT, None, Source.GUARD, "its holder")

    def __iter__(self) -> Iterator[Param]:
        return iter(_declared(type(self), Param))


class _Result:
    """The result's keys, in the order the loops return them."""

    ops = ResultField("ops", int, SqlType.BIGINT, Merge.SUM, "ops started")
    ops_select = ResultField("ops_select", int, SqlType.BIGINT, Merge.SUM, "timed SELECTs")
    ops_update = ResultField("ops_update", int, SqlType.BIGINT, Merge.SUM, "timed UPDATEs")
    ops_scan = ResultField("ops_scan", int, SqlType.BIGINT, Merge.SUM, "timed scans")
    rows_selected = ResultField("rows_selected", int, SqlType.BIGINT, Merge.SUM)
    rows_updated = ResultField("rows_updated", int, SqlType.BIGINT, Merge.SUM)
    ops_hot_schema = ResultField("ops_hot_schema", int, SqlType.BIGINT, Merge.SUM)
    ops_hotspot = ResultField("ops_hotspot", int, SqlType.BIGINT, Merge.SUM)
    think_count = ResultField("think_count", int, SqlType.BIGINT, Merge.SUM)
    think_seconds = ResultField("think_seconds", float, SqlType.FLOAT, Merge.SUM)
    released = ResultField("released", int, SqlType.BIGINT, Merge.SUM, "snapshot releases")
    own_commits = ResultField("own_commits", int, SqlType.BIGINT, Merge.SUM, "not the load's")
    next = ResultField("next", dict, SqlType.JSON, Merge.PER_CALL, "the next CALL's conf")
    interval = ResultField("interval", int, SqlType.BIGINT, Merge.PER_CALL, "k: ran until k's end")
    busy_us = ResultField("busy_us", int, SqlType.BIGINT, Merge.SUM, "paced: time in ops")
    behind_s = ResultField("behind_s", float, SqlType.FLOAT, Merge.LAST, "paced: backlog")
    late_1ms = ResultField("late_1ms", int, SqlType.BIGINT, Merge.SUM, "paced window")
    late_10ms = ResultField("late_10ms", int, SqlType.BIGINT, Merge.SUM, "paced window")
    max_lag_us = ResultField("max_lag_us", int, SqlType.BIGINT, Merge.MAX, "paced window")
    began_epoch = ResultField("began_epoch", float, SqlType.FLOAT, Merge.FIRST)
    ended_epoch = ResultField("ended_epoch", float, SqlType.FLOAT, Merge.LAST)
    pid = ResultField("pid", int, SqlType.BIGINT, Merge.LAST, "the backend")
    call_ended = ResultField(
        "call_ended", bool, SqlType.BOOLEAN, Merge.PER_CALL, "false: a streamed interval"
    )
    # {"idx": count} or [[idx, ...], [count, ...]] (model/histogram.py sparse())
    hist_select = ResultField("hist_select", object, SqlType.JSON, Merge.HISTOGRAM)
    hist_update = ResultField("hist_update", object, SqlType.JSON, Merge.HISTOGRAM)
    hist_scan = ResultField("hist_scan", object, SqlType.JSON, Merge.HISTOGRAM)
    # RATE runs: the same ops timed from their intended starts (null in closed-loop runs)
    hist_select_intended = ResultField("hist_select_intended", dict, SqlType.JSON, Merge.HISTOGRAM)
    hist_update_intended = ResultField("hist_update_intended", dict, SqlType.JSON, Merge.HISTOGRAM)
    hist_scan_intended = ResultField("hist_scan_intended", dict, SqlType.JSON, Merge.HISTOGRAM)

    def __iter__(self) -> Iterator[ResultField]:
        return iter(_declared(type(self), ResultField))

    def hist(self, kind: str, intended: bool = False) -> ResultField:
        """The latency histogram of an op kind (model.metrics.OP_KINDS), or its latency
        from the intended start."""
        return self._field(f"hist_{kind}" + ("_intended" if intended else ""))

    def ops_of(self, kind: str) -> ResultField:
        """The timed ops of an op kind (model.metrics.OP_KINDS)."""
        return self._field(f"ops_{kind}")

    def _field(self, key: str) -> ResultField:
        field = getattr(self, key, None)
        if not isinstance(field, ResultField):
            raise KeyError(f"no loop result field {key}")
        return field


def _declared(cls: type, kind: type[Any]) -> list[Any]:
    found = [v for v in vars(cls).values() if isinstance(v, kind)]
    for name, value in vars(cls).items():
        if isinstance(value, kind) and value.key != name:
            raise AssertionError(f"loop field {name} declares key {value.key}")
    return found


LOOP_PARAMS = _Params()
LOOP_RESULT = _Result()


# A CALL's answer: one interval's result, or a batch of them (conf `batch` > 1)
Answer = dict[str, Any] | list[dict[str, Any]]


def call_goes_on(answer: Answer) -> bool:
    """The answer (one result, or a batch: its last decides) is a streamed interval's: its
    CALL goes on (`call_ended` false)."""
    last = answer[-1] if isinstance(answer, list) else answer
    return bool(last) and last.get(LOOP_RESULT.call_ended.key) is False


def parse_answer(text: str | bytes | None) -> Answer:
    """A CALL's answer from the JSON text the engine's driver hands over ({} for none).
    The client parses every interval result of every session (256 a second at 256
    sessions and 1 s intervals); orjson takes 14 us for a 4-interval answer where the
    standard library's json took 45 us (timeit, answers of a 256-session run)."""
    return orjson.loads(text) if text else {}


def interval_results(answer: Answer) -> list[dict[str, Any]]:
    """The interval results of a CALL's answer: one object, or a batch (a JSON array)."""
    if isinstance(answer, list):
        return answer
    return [answer] if answer else []


PARAM_KEYS = tuple(p.key for p in LOOP_PARAMS)
RESULT_KEYS = tuple(f.key for f in LOOP_RESULT)
MERGE_BY_KEY = {f.key: f.merge for f in LOOP_RESULT}
HISTOGRAM_KEYS = frozenset(f.key for f in LOOP_RESULT if f.merge is Merge.HISTOGRAM)


@dataclass(frozen=True)
class LoopParams:
    """One phase's conf as runner/loopconf.py builds it (Source.CONF, in declared order)."""

    update_pct: float
    scan_pct: float
    work_unit: int
    scale: int
    heavy: bool
    loops: int
    until_epoch: float | None
    interval_s: float | None
    start_epoch: float
    record: bool
    hot_schema_frequency: int
    hotspot_frequency: int
    hotspot_first_key: int
    hotspot_last_key: int
    think_frequency: int
    think_min: float
    think_max: float
    release_s: float
    rate: float
    rate_dist: str
    rate_offset: float
    nap_s: float
    seed: float | None = None  # left out of the JSON when None: the loop does not reseed
    carry: bool = False  # a phase's CALLs after its first: the server keeps what they carry
    stream: bool = False  # the engine streams intervals (Capabilities.streams_intervals)
    batch: int = 1  # intervals per answer (runner/batches.py)
    batch_offset: int = 0  # the session's place among the batch's boundaries

    def to_json(self) -> dict[str, Any]:
        """The conf the loops read: every key, but `seed` only when there is one."""
        conf = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.seed is None:
            del conf[LOOP_PARAMS.seed.key]
        return conf


def _check_record() -> None:
    names = tuple(f.name for f in dataclasses.fields(LoopParams))
    declared = tuple(p.key for p in LOOP_PARAMS if p.source is Source.CONF)
    if names != declared:
        raise AssertionError(f"LoopParams {names} differs from the declared conf {declared}")


_check_record()
