"""Rate sweeps: latency-at-load curves (`slob sweep --rate 2000,4000,8000` or `--rate 10%,…`).

Absolute rates are an ordinary axis. Percentages are of a closed-loop maximum that the sweep
measures first (vdbench's curve): every combination of the other axes (UPDATE_PCT, SESSIONS,
…) gets a point `…_rate-max` run at RATE=0, then its percentage points, RATE innermost, at
that fraction of the maximum's SLOBops/s. sweep.json records each maximum (`rate_max`: point
group → {"point", "slobops_per_s"}) and each percentage point the rate it ran at
(`rate`); a rerun resumes from them. A percentage point whose maximum was not measured (the
max point failed) fails with that reason rather than run at a guessed rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openslob.config.resolve import Config
from openslob.model.errors import ConfigError
from openslob.model.states import RunStatus

AXIS = "RATE"
MAX = "max"  # the closed-loop point of a percentage axis
MAX_PCT = 1000  # 10x the maximum: enough to probe overload, a typo beyond it


def percent_axis(single: dict[str, str | None], axes: dict[str, list[str]]) -> list[str] | None:
    """The RATE axis as percentages ("10%", …; a single "50%" too), taken out of `single`
    and `axes`; None when RATE is absolute (or not given). Bad values: one-line errors."""
    one = single.get(AXIS)
    values = axes.get(AXIS) or ([one] if one else [])
    marked = [v for v in values if v and v.strip().endswith("%")]
    if not marked:
        return None
    if len(marked) != len(values):
        raise ConfigError(
            f"{AXIS}={','.join(values)}: either all percentages (of the measured maximum) "
            "or all SLOBops/s"
        )
    pcts = []
    for value in values:
        number = value.strip()[:-1].strip()
        try:
            pct = float(number)
        except ValueError:
            pct = -1.0
        if not 0 < pct <= MAX_PCT or number.lower() in ("nan", "inf"):
            raise ConfigError(
                f"{AXIS}={value} is not a percentage of the maximum "
                f"(allowed: more than 0 up to {MAX_PCT} %)"
            )
        pcts.append(f"{pct:g}%")
    if len(set(pcts)) != len(pcts):
        raise ConfigError(f"{AXIS}={','.join(values)}: a value is listed twice")
    single.pop(AXIS, None)
    axes.pop(AXIS, None)
    return [MAX, *pcts]


def placeholder(value: str) -> str:
    """What a percentage point's config is resolved with until its maximum is known."""
    return "0" if value == MAX or value.endswith("%") else value


def group_of(params: Mapping[str, Any]) -> str:
    """The point group sharing one maximum: every varied parameter but RATE."""
    return "_".join(f"{k.lower()}-{v}" for k, v in params.items() if k != AXIS) or "all"


def point_config(sweep: dict[str, Any], entry: dict[str, Any], config: Config) -> Config:
    """The config a point runs with: a percentage point's RATE from its group's maximum."""
    value = str(entry["params"].get(AXIS, ""))
    if not value.endswith("%"):
        return config
    measured = (sweep.get("rate_max") or {}).get(group_of(entry["params"]))
    if not measured or not measured.get("slobops_per_s"):
        raise ConfigError(
            f"{entry['name']}: no closed-loop maximum was measured for "
            f"{group_of(entry['params'])} (its {MAX} point did not complete)"
        )
    rate = round(float(value[:-1]) / 100 * measured["slobops_per_s"], 1)
    entry["rate"] = rate
    # Checked as a given rate is (range, and no think time alongside): Config.with_values.
    return config.with_values({AXIS: rate}, config.sources.get(AXIS, "flag"))


def record_max(sweep: dict[str, Any], entry: dict[str, Any], run: dict[str, Any] | None) -> None:
    """A complete max point's SLOBops/s becomes its group's maximum."""
    if entry["params"].get(AXIS) != MAX or not run or run.get("status") != RunStatus.COMPLETE:
        return
    sweep.setdefault("rate_max", {})[group_of(entry["params"])] = {
        "point": entry["name"],
        "slobops_per_s": (run.get("metrics") or {}).get("slobops_per_s"),
    }
