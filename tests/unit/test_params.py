"""The typed parameters (config/params.py) match the option table, and every change of a
parameter after resolve is checked as a given value would be."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from openslob.config.options import OPTIONS
from openslob.config.params import KIND_TYPES, Params
from openslob.config.resolve import resolve
from openslob.model.errors import ConfigError
from openslob.runner import ratesweep


def test_params_fields_are_the_option_table() -> None:
    hints = typing.get_type_hints(Params)
    names = [f.name for f in dataclasses.fields(Params)]
    assert names == [o.name.lower() for o in OPTIONS]
    for option in OPTIONS:
        hint = hints[option.name.lower()]
        if option.choices:
            assert typing.get_origin(hint) is typing.Literal, option.name
            assert typing.get_args(hint) == option.choices, option.name
        else:
            assert hint is KIND_TYPES[option.kind], option.name


def test_params_hold_the_resolved_values(tmp_path: Path) -> None:
    config = resolve({"RATE": "2000", "UPDATE_PCT": "30", "SCALE": "8M"}, None, cwd=tmp_path)
    assert config.p.rate == 2000.0 and isinstance(config.p.rate, float)
    assert config.p.update_pct == 30 and config.p.scale == 1024
    assert config.p.redo_stress == "LITE" and config.p.do_hotspot is False
    assert {o.name: getattr(config.p, o.name.lower()) for o in OPTIONS} == config.as_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.p.rate = 1.0  # type: ignore[misc]  # the point: frozen


def test_with_values_keeps_source_and_types(tmp_path: Path) -> None:
    config = resolve({"RATE": "0"}, None, cwd=tmp_path)
    changed = config.with_values({"RATE": 1234.5}, "flag")
    assert changed.p.rate == 1234.5 and changed["RATE"] == 1234.5
    assert changed.sources["RATE"] == "flag" and config.p.rate == 0.0
    taken = config.with_values({"COMPRESS_RATIO": 1}, "dataset")
    assert taken.p.compress_ratio == 1.0 and isinstance(taken.p.compress_ratio, float)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"RATE": 2e7}, "RATE=20000000 is out of range (allowed: 0–10000000)"),
        ({"SCALE": 10}, "SCALE=10 is out of range"),
        ({"UPDATE_PCT": "20"}, "UPDATE_PCT='20' is not int"),
        ({"REDO_STRESS": "MEDIUM"}, "REDO_STRESS='MEDIUM' is not choice"),
    ],
)
def test_with_values_checks_kind_and_range(
    tmp_path: Path, values: dict[str, object], message: str
) -> None:
    config = resolve({}, None, cwd=tmp_path)
    with pytest.raises(ConfigError) as err:
        config.with_values(values, "dataset")
    assert message in str(err.value)


def test_with_values_checks_the_combination(tmp_path: Path) -> None:
    config = resolve({"THINK_TM_FREQUENCY": "5"}, None, cwd=tmp_path)
    with pytest.raises(ConfigError, match="RATE=500 paces the sessions itself"):
        config.with_values({"RATE": 500.0}, "flag")


def test_a_percentage_point_gets_its_rate_through_with_values(tmp_path: Path) -> None:
    config = resolve({"RATE": "0"}, None, cwd=tmp_path)
    sweep = {"rate_max": {"update_pct-20": {"point": "m", "slobops_per_s": 1234.56}}}
    entry = {"name": "p", "params": {"UPDATE_PCT": 20, "RATE": "50%"}}
    point = ratesweep.point_config(sweep, entry, config)
    assert point.p.rate == 617.3 and entry["rate"] == 617.3
    assert point.sources["RATE"] == config.sources["RATE"] == "flag"
    thinking = resolve({"RATE": "0", "THINK_TM_FREQUENCY": "2"}, None, cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"RATE=617\.3 paces the sessions itself"):
        ratesweep.point_config(sweep, entry, thinking)
