"""The clock offset's arithmetic without a server: the minimum-RTT choice, the conversions of
a loop's conf and result, and the warnings' bounds (the real servers: integration/test_clocks)."""

from __future__ import annotations

import itertools

import pytest

from openslob.model import clockoffset
from openslob.model.clockoffset import ClockReading
from openslob.runner import clocks


def test_the_fastest_round_trip_gives_the_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    # client clock: (sent, received) pairs; the second round trip is the fastest (2 ms)
    ticks = itertools.chain.from_iterable([(0.0, 0.010), (1.0, 1.002), (2.0, 2.008)])
    monkeypatch.setattr(clocks.time, "time", lambda: next(ticks))
    server = iter([100.009, 101.0005, 102.001])  # 100 s ahead, read mid-flight or not
    reading = clocks.measure(lambda: next(server), round_trips=3)
    assert reading.rtt_s == pytest.approx(0.002)
    assert reading.offset_s == pytest.approx(101.0005 - 1.001)
    assert reading.uncertainty_s == pytest.approx(0.001)


def test_conf_goes_to_the_server_clock_and_results_come_back() -> None:
    conf = {"start_epoch": 10.0, "until_epoch": None, "loops": 5, "next_start": 3.0}
    assert clocks.to_server(conf, 0.25) == {
        "start_epoch": 10.25,
        "until_epoch": None,
        "loops": 5,
        "next_start": 3.0,  # the server's own carry: it goes back to the same server
    }
    result = {"began_epoch": 10.26, "ended_epoch": 11.25, "ops": 7, "next": {"next_start": 1}}
    back = clocks.to_client(result, 0.25)
    assert back["began_epoch"] == pytest.approx(10.01) and back["ended_epoch"] == 11.0
    assert back["ops"] == 7 and back["next"] == {"next_start": 1}


def test_warnings_name_the_server_and_keep_quiet_below_the_bounds() -> None:
    quiet = ClockReading(offset_s=0.004, rtt_s=0.0005, round_trips=16)
    assert clockoffset.warnings("db1", quiet, quiet) == []
    off = ClockReading(offset_s=0.250, rtt_s=0.0005, round_trips=16)
    (said,) = clockoffset.warnings("db1", off, ClockReading(0.2501, 0.0004, 16))
    assert "db1" in said and "+250.0 ms" in said and "corrected" in said
    slow = ClockReading(offset_s=0.0, rtt_s=0.030, round_trips=16)
    (said,) = clockoffset.warnings("db2", slow, None)
    assert "±15.0 ms" in said
    # moved 20 ms between the barriers, beyond both estimates' ±0.25 ms: stepped or drifting
    before, after = ClockReading(-0.017, 0.0005, 16), ClockReading(0.003, 0.0005, 16)
    moved = clockoffset.warnings("db3", after, before)
    assert len(moved) == 1 and "moved 20.0 ms" in moved[0]


def test_run_json_block() -> None:
    block = clockoffset.as_json(ClockReading(0.25, 0.0004, 16), None, [0.001, 0.0021])
    assert block == {
        "offset_ms": 250.0,
        "rtt_ms": 0.4,
        "round_trips": 16,
        "warmup_offset_ms": None,
        "start_lag_ms_min": 1.0,
        "start_lag_ms_max": 2.1,
    }
    assert clockoffset.as_json(None, None, []) is None
