"""Steady-state rules and their evaluation (model/steady.py), on constructed series."""

from __future__ import annotations

import random

import pytest

from openslob.config.resolve import resolve
from openslob.model import steady
from openslob.model.errors import ConfigError
from openslob.model.histogram import Histogram
from openslob.runner.steadysink import SteadySink


def test_parse_rules_merges_criteria_per_figure() -> None:
    rules = steady.parse_rules("iops:slope<10%, p99:dev<20 ,IOPS:dev<5%")
    assert [r.figure for r in rules] == ["iops", "p99"]
    assert rules[0].criteria == (
        steady.Criterion(steady.Measure.SLOPE, 10.0),
        steady.Criterion(steady.Measure.DEV, 5.0),
    )
    assert steady.rules_text(rules) == "iops:slope<10%,iops:dev<5%,p99:dev<20%"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("iops", "is not FIGURE:MEASURE<PCT%"),
        ("tps:slope<10%", "unknown figure 'tps'"),
        ("iops:mean<10%", "unknown criterion 'mean'"),
        ("iops:slope<0%", "limit 0% is not in"),
        ("iops:slope<10%,", "(empty item)"),
    ],
)
def test_parse_rules_refuses(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=None) as err:
        steady.parse_rules(text)
    assert says in str(err.value)


def test_config_error_names_the_parameter_and_the_forms() -> None:
    with pytest.raises(ConfigError) as err:
        resolve({"STEADY_STATE": "iops:slop<3"}, None, scope="run")
    text = str(err.value)
    assert text.startswith("STEADY_STATE=iops:slop<3: unknown criterion 'slop'")
    assert "FIGURE:slope<PCT%" in text and "\n" not in text
    with pytest.raises(ConfigError, match="STOP_ON_STEADY=TRUE needs STEADY_STATE"):
        resolve({"STOP_ON_STEADY": "on"}, None, scope="run")
    config = resolve({"STEADY_STATE": "p99:dev<20%", "SS_WINDOW": "4"}, None, scope="sweep")
    assert config.p.steady_state == "p99:dev<20%" and config.p.ss_window == 4.0


def test_slope_is_the_relative_drift_across_the_window() -> None:
    flat = [100.0] * 10
    assert steady.slope_pct(flat, [1.0] * 10) == pytest.approx(0.0)
    ramp = [100.0 + 2 * i for i in range(10)]  # 2/s over 10 s = 20 at a mean of 109
    assert steady.slope_pct(ramp, [1.0] * 10) == pytest.approx(20 / 109 * 100)
    falling = list(reversed(ramp))
    assert steady.slope_pct(falling, [1.0] * 10) == pytest.approx(20 / 109 * 100)
    assert steady.slope_pct([5.0], [1.0]) is None
    assert steady.slope_pct([0.0, 0.0], [1.0, 1.0]) is None


def test_deviation_is_the_largest_distance_from_the_mean() -> None:
    assert steady.dev_pct([90.0, 100.0, 110.0]) == pytest.approx(10.0)
    assert steady.dev_pct([]) is None


def _feed(state: steady.SteadyState, values: list[float], figure: str = "iops") -> list[bool]:
    return [state.add(steady.Point(1.0, {figure: v})) for v in values]


def test_a_steady_series_is_steady_exactly_after_ramp_plus_window() -> None:
    rules = steady.parse_rules("iops:slope<10%,iops:dev<20%")
    state = steady.SteadyState(rules, ramp_s=2, window_s=4)
    said = _feed(state, [1000.0] * 10)
    assert said == [False] * 5 + [True] * 5  # 2 s ramp + 4 s window: the 6th interval
    assert state.reached_at_s == 6.0
    assert state.reached is not None and state.reached.iops == 1000.0
    assert state.reached.seconds == 4.0


def test_a_ramping_series_is_never_steady() -> None:
    state = steady.SteadyState(steady.parse_rules("iops:slope<10%"), 0, 5)
    assert not any(_feed(state, [100.0 * 1.1**i for i in range(30)]))
    assert state.reached_at_s is None
    assert state.evaluations[0].slope_pct is not None
    assert state.evaluations[0].slope_pct > 10


def test_a_noisy_series_fails_on_deviation_but_not_on_slope() -> None:
    rng = random.Random(7)
    values = [1000.0 * (1 + rng.uniform(-0.4, 0.4)) for _ in range(40)]
    by_slope = steady.SteadyState(steady.parse_rules("iops:slope<30%"), 0, 20)
    by_dev = steady.SteadyState(steady.parse_rules("iops:dev<10%"), 0, 20)
    assert any(_feed(by_slope, values))
    assert not any(_feed(by_dev, values))


def test_a_step_is_unsteady_until_the_new_level_fills_the_window() -> None:
    state = steady.SteadyState(steady.parse_rules("iops:dev<10%"), 0, 4)
    said = _feed(state, [1000.0] * 6 + [500.0] * 6)
    # steady at 4 s; the step at 7 s breaks it; steady again once 4 s of the new level hold
    assert said == [False] * 3 + [True] * 3 + [False] * 3 + [True] * 3
    assert state.reached_at_s == 4.0  # the first time is the one recorded
    assert state.reached is not None and state.reached.iops == 1000.0


def test_a_missing_figure_is_not_met() -> None:
    state = steady.SteadyState(steady.parse_rules("iops:dev<10%"), 0, 2)
    assert _feed(state, [100.0]) == [False]
    assert not state.add(steady.Point(1.0, {"iops": None}))
    assert state.evaluations[0] == steady.Evaluation("iops", None, None, False)


def test_window_figures_take_percentiles_from_merged_histograms() -> None:
    fast = Histogram.from_values([100] * 99 + [200])
    slow = Histogram.from_values([1000] * 100)
    points = [
        steady.Point(1.0, {"slobops": 10.0, "iops": 100.0, "mbps": 1.0}, fast),
        steady.Point(3.0, {"slobops": 30.0, "iops": 300.0, "mbps": None}, slow),
    ]
    figures = steady.window_figures(points)
    assert figures.slobops_per_s == pytest.approx(25.0)  # seconds-weighted
    assert figures.mb_per_s is None  # one interval lacks it: unknown, not a guess
    assert figures.op_p99_us == pytest.approx(Histogram().merge(fast).merge(slow).percentile_us(99))


def test_the_sink_adds_its_columns_and_the_progress_words() -> None:
    sink = SteadySink("slobops:dev<20%,p99:slope<50%", ramp_s=0, window_s=2, stop=False)
    asked: list[str] = []
    sink.end_window = asked.append
    warm = {"phase": "warmup", "seconds": 1.0, "slobops_per_s": 5.0}
    sink(warm, {})
    assert warm[steady.STEADY_COLUMN] is None and "ss_p99_slope_pct" in warm
    rows = []
    for ops in (100.0, 100.0, 300.0):
        row = {"phase": "window", "seconds": 1.0, "slobops_per_s": ops}
        sink(row, {"select": Histogram.from_values([500] * 50)})
        rows.append(row)
    assert [r[steady.STEADY_COLUMN] for r in rows] == [None, 1, 0]
    assert steady.row_status(sink.rules, rows[1]) == "steady"
    assert steady.row_status(sink.rules, rows[2]) == "not steady (slobops dev 50 %)"
    assert asked == []  # no --stop-on-steady
    block = sink.block()
    assert block["reached"] and block["reached_at_s"] == 2.0 and not block["steady_at_end"]
    assert block["steady"]["slobops_per_s"] == 100.0 and block["steady"]["iops"] is None


def test_the_sink_asks_once_to_end_the_window() -> None:
    sink = SteadySink("slobops:dev<20%", ramp_s=1, window_s=2, stop=True)
    asked: list[str] = []
    sink.end_window = asked.append
    for _ in range(6):
        sink({"phase": "window", "seconds": 1.0, "slobops_per_s": 50.0}, {})
    assert len(asked) == 1 and asked[0].startswith("ended at steady state")
    assert "3 s into the window" in asked[0]


def test_never_reached_is_said_plainly() -> None:
    from openslob.report.steadytext import steady_section

    sink = SteadySink("iops:slope<10%", ramp_s=5, window_s=30, stop=False)
    run = {"steady_state": sink.block(), "metrics": {}, "window": {}, "latency": {}}
    text = "\n".join(steady_section(run))
    assert "Steady state was NEVER reached" in text
    assert "steady window" in text and "n/a" in text


def test_the_windows_stretched_last_interval_is_not_evaluated() -> None:
    sink = SteadySink("slobops:dev<10%", ramp_s=0, window_s=2, stop=False, step_s=1.0)
    for _ in range(3):
        sink({"phase": "window", "seconds": 1.0, "slobops_per_s": 100.0}, {})
    tail = {"phase": "window", "seconds": 1.2, "slobops_per_s": 83.3}
    sink(tail, {})
    assert tail[steady.STEADY_COLUMN] == 1 and sink.state.elapsed_s == 3.0
