"""Params: every parameter's effective value as a typed, frozen record (``config.p``).

One attribute per option of the table (options.py), named as the option in lower case
(UPDATE_PCT -> ``update_pct``), typed by its kind: int, float, bool, a Literal of the choices,
or str. Code outside ``config/`` reads parameters through it, so mypy checks every read; the
unit test tests/unit/test_params.py checks the fields against OPTIONS, so an option added
without its field fails there.

Values are the ones the table's parsers produced; a float option given as a whole number
(a data set's ratio read back as 1) is held as a float, so RATE is always SLOBops/s as float.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from openslob.config.options import OPTIONS_BY_NAME

RateDist = Literal["POISSON", "UNIFORM"]
RedoStress = Literal["LITE", "HEAVY"]
PageSize = Literal["4K", "8K", "16K", "32K", "64K"]

# The Python type each kind of option parses to (option.py's parsers).
KIND_TYPES: Mapping[str, type] = {
    "int": int,
    "blocks": int,
    "mb": int,
    "float": float,
    "seconds": float,
    "bool": bool,
    "choice": str,
    "str": str,
    "path": str,
}


@dataclass(frozen=True, slots=True)
class Params:
    """The effective parameters, one typed attribute per option (see the module docstring)."""

    # data set
    schemas: int
    scale: int  # rows (8 KiB blocks) per schema
    scan_table_sz: int  # rows
    load_parallel_degree: int
    seed: int
    compress_ratio: float
    # the work loop
    update_pct: int
    scan_pct: int
    run_time: float  # seconds
    work_loop: int
    work_unit: int  # rows
    prefetch: bool  # read-ahead for the WORK_UNIT rows (off: SLOB's single-block reads)
    rate: float  # SLOBops/s over all sessions; 0 = closed loop
    rate_dist: RateDist
    redo_stress: RedoStress
    threads_per_schema: int
    sessions: int
    hot_schema_frequency: int
    do_hotspot: bool
    hotspot_mb: int
    hotspot_offset_mb: int
    hotspot_frequency: int
    think_tm_frequency: int
    think_tm_min: float  # seconds
    think_tm_max: float  # seconds
    page_size: PageSize
    sqlnet_service_base: str
    sqlnet_service_max: int
    instances: int
    sessions_per_instance: int
    external_script: str
    warmup: float  # seconds
    repeat: int
    sample_interval: float  # seconds
    results_per_s: int  # interval results a second per instance before sessions batch them
    # steady state (model/steady.py)
    steady_state: str  # rules text; "" = none
    ss_window: float  # seconds
    ss_ramp: float  # seconds
    stop_on_steady: bool
    external_series: str  # a file path; "" for none
    trace_layers: bool  # kernel-traced latency layers (host/ebpf.py); they cost, so opt-in
    client_priority: bool  # nice -20 for the client during a run (host/priority.py)
    cliff: str  # the live cliff rule (model/cliff.py), "off" for none
    cliff_window: int  # intervals in the cliff rule's trailing baseline

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Params:
        """The record of a Config's values by slob.conf name; TypeError when a value is not
        of its option's kind (a program error: parsed values always are)."""
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            name = f.name.upper()
            kwargs[f.name] = typed_value(name, values[name])
        return cls(**kwargs)

    @property
    def session_count(self) -> int:
        """Sessions the run connects: SESSIONS, or SCHEMAS x THREADS_PER_SCHEMA when 0."""
        return self.sessions or self.schemas * self.threads_per_schema


def typed_value(name: str, value: Any) -> Any:
    """`value` as option `name`'s kind holds it (a whole number for a float option becomes a
    float); TypeError when it is of another kind."""
    option = OPTIONS_BY_NAME[name]
    wanted = KIND_TYPES[option.kind]
    if wanted is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if wanted is int and isinstance(value, bool):
        raise TypeError(f"{name}={value!r}: not {option.kind}")
    if not isinstance(value, wanted):
        raise TypeError(f"{name}={value!r}: not {option.kind}")
    if option.choices and value not in option.choices:
        raise TypeError(f"{name}={value!r}: not one of {', '.join(option.choices)}")
    return value
