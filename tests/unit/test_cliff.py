"""Live cliff detection (model/cliff.py) on constructed interval rows: no server."""

from __future__ import annotations

from typing import Any

import pytest

from openslob.config.resolve import defaults
from openslob.model.cliff import CONFIRM, CliffWatch, parse_rule
from openslob.model.errors import ConfigError
from openslob.report.cliff import cliff_marks, cliff_section


def rows(ops: list[float], **extra: list[Any]) -> list[dict[str, Any]]:
    """Window rows of 1 s intervals after a 5 s warm-up, with SLOBops/s `ops`."""
    out = []
    for k, value in enumerate(ops):
        row: dict[str, Any] = {"elapsed_s": 6.0 + k, "seconds": 1.0, "slobops_per_s": value}
        row.update({key: values[k] for key, values in extra.items()})
        out.append(row)
    return out


def watch(series: list[dict[str, Any]], rule: str = "ops:drop>30%", window: int = 5):
    cliff = CliffWatch(parse_rule(rule, window))
    events = [(k, e) for k, row in enumerate(series) for e in cliff.observe(row)]
    return cliff, events


def test_a_drop_opens_an_episode_after_confirm_intervals_and_closes_when_back() -> None:
    series = rows([1000, 1010, 990, 1005, 995, 1000, 500, 480, 470, 520, 1000, 1001, 999])
    cliff, events = watch(series)
    (k_start, start), (k_end, end) = events
    assert start.kind == "start" and k_start == 6 + CONFIRM - 1  # seen live, within the window
    e = cliff.episodes[0]
    assert start.episode.end_s is None and start.episode.worst == 480
    assert e.figure == "ops" and e.start_s == 11.0 and e.baseline == 1000
    assert end.kind == "end" and k_end == 11 and e.end_s == 15.0
    assert e.worst == 470 and e.size_pct == pytest.approx(-53.0)
    assert "cliff: SLOBops/s -52 %" in start.notice() and "6 s into the window" in start.notice()
    assert "back after 4 s" in end.notice()
    assert cliff.columns() == {"cliff": None, "cliff_episodes": 1}


def test_one_noisy_interval_is_no_cliff_and_the_ramp_is_not_judged() -> None:
    series = rows([10, 1000, 1000, 1000, 1000, 1000, 1000, 400, 1000, 1000, 1000, 990])
    cliff, events = watch(series)
    assert events == [] and cliff.episodes == []


def test_a_lasting_new_level_stays_one_open_episode() -> None:
    cliff, events = watch(rows([1000] * 6 + [300] * 20))
    assert [e.kind for _, e in events] == ["start"]
    assert cliff.episodes[0].open and cliff.columns() == {"cliff": "ops", "cliff_episodes": 1}
    assert cliff.summary().to_json()["episodes"][0]["end_s"] is None


def test_p99_rise_and_iops_drop_are_judged_each_on_its_own() -> None:
    p99 = [200.0] * 6 + [900.0] * 4 + [200.0] * 3
    pio = [5000.0] * 6 + [4900.0] * 7  # held: no iops episode
    series = rows([1000] * 13, select_p99_us=p99, pio_reads_per_s=pio, pio_writes_per_s=[None] * 13)
    cliff, _ = watch(series, "iops:drop>30%,p99:rise>100%")
    (e,) = cliff.episodes
    assert e.figure == "p99" and e.size_pct == pytest.approx(350.0) and not e.open


def test_cause_from_the_same_rows_and_not_measured_without_them() -> None:
    n = 12
    writes = [20.0] * 6 + [90.0] * 6
    cpu = [30.0] * n
    series = rows([1000] * 6 + [400] * 6, device_write_mb_per_s=writes, cpu_user_pct=cpu)
    cliff, _ = watch(series)
    assert cliff.summary().episodes[0].cause.startswith("cause: device write MB/s up (20 -> 90")
    cliff, _ = watch(rows([1000] * 6 + [400] * 6))
    assert cliff.summary().episodes[0].cause == "cause not measured"
    busy = rows([1000] * 6 + [400] * 6, cpu_user_pct=[60.0] * 6 + [97.0] * 6)
    cliff, _ = watch(busy)
    assert "CPU saturated (60 -> 97 % busy)" in cliff.summary().episodes[0].cause
    always = rows([1000] * 6 + [400] * 6, cpu_user_pct=[97.0] * 12)
    cliff, _ = watch(always)  # saturated before too: no new cause
    assert cliff.summary().episodes[0].cause.startswith("no measured cause")


def test_null_figures_are_not_judged() -> None:
    cliff, events = watch(rows([None] * 4 + [1000] * 5 + [None] * 3), "ops:drop>30%")  # type: ignore[list-item]
    assert events == [] and cliff.columns()["cliff"] is None


@pytest.mark.parametrize(
    "text", ["ops:rise>30%", "p99:drop>10%", "ops:drop>100%", "iops", "foo:drop>5%", "ops>3"]
)
def test_bad_rules_say_what_is_allowed(text: str) -> None:
    with pytest.raises(ValueError, match="FIGURE:drop>N%"):
        parse_rule(text)


def test_rule_text_round_trips_and_off_has_no_checks() -> None:
    assert parse_rule("OPS:drop>30, p99:rise>150%").text() == "ops:drop>30%,p99:rise>150%"
    assert parse_rule("off").checks == () and parse_rule("off").text() == "off"


def test_a_bad_cliff_rule_is_refused_before_the_run_naming_the_parameter() -> None:
    with pytest.raises(ConfigError, match=r"^CLIFF=ops:rise>5%: .*FIGURE:drop>N%"):
        defaults().with_values({"CLIFF": "ops:rise>5%"}, "flag")
    assert defaults().with_values({"CLIFF": "off"}, "flag").p.cliff == "off"


def test_report_section_and_chart_bands_from_run_json() -> None:
    # after an episode the calm level builds a new baseline of CLIFF_WINDOW intervals
    cliff, _ = watch(rows([1000] * 6 + [400] * 3 + [1000] * 7 + [300] * 4))
    run = {"cliffs": cliff.summary().to_json(), "window": {"seconds": 20.0}}
    text = "\n".join(cliff_section(run))
    assert "Cliffs (live)" in text and "ops:drop>30%" in text
    assert " 6.0 " in text and "9.0" in text and "open" in text and "cause not measured" in text
    marks = cliff_marks(run, [{"elapsed_s": "25.0"}])
    assert marks == [(11.0, 14.0, "cliff ops -60 %"), (21.0, 25.0, "cliff ops -70 %")]
    assert cliff_section({"cliffs": None}) == []
    both = rows([1000] * 6 + [300] * 4, select_p99_us=[100.0] * 6 + [900.0] * 4)
    cliff, _ = watch(both, "ops:drop>30%,p99:rise>100%")
    run = {"cliffs": cliff.summary().to_json()}
    assert cliff_marks(run, []) == [(11.0, 11.0, "cliff ops -70 %, p99 +800 %")]  # one band


def test_report_lines_fit_the_report_width() -> None:
    series = rows([1000] * 6 + [300] * 4, device_write_mb_per_s=[1.0] * 6 + [900.0] * 4)
    cliff, _ = watch(series, "ops:drop>30%,iops:drop>30%,p99:rise>100%")
    run = {"cliffs": cliff.summary().to_json(), "window": {"seconds": 10.0}}
    lines = cliff_section(run)
    assert max(len(line) for line in lines) <= 100 and any("device write" in x for x in lines)
