"""The effective configuration (Config): defaults < slob.conf < flags, validated as a whole,
and the checks of parameter combinations that cannot run.

Each value keeps its source: "default", "file" (slob.conf), "flag", or "dataset" when a
command took a parameter left at its default from the data set in the database
(runner/dataset.py, through Config.with_values). "file" and "flag" are the given ones.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from openslob.config.option import (
    BLOCK_SIZE,
    MAX_SESSIONS,
    MIB,
    Option,
    check_range,
    number_text,
    parse_value,
    range_text,
    shown_value,
)
from openslob.config.options import OPTIONS, OPTIONS_BY_NAME
from openslob.config.params import Params, typed_value
from openslob.config.slobconf import read_slob_conf
from openslob.model import steady
from openslob.model.cliff import parse_rule
from openslob.model.errors import ConfigError
from openslob.results.external import read_series

Source = Literal["default", "file", "flag", "dataset"]
GIVEN: frozenset[Source] = frozenset({"file", "flag"})


@dataclass(frozen=True, eq=False)
class Config(Mapping[str, Any]):
    """Every parameter's effective value by slob.conf name, and where each came from.

    Read the values through ``p`` (typed, config/params.py); the mapping by slob.conf name
    is for config/ itself and run.json's ``config`` block."""

    params: Mapping[str, Any]
    sources: Mapping[str, Source]
    conf_path: Path | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    scope: str | None = None  # the command whose cross-parameter checks apply (resolve)
    p: Params = field(init=False, repr=False)  # the values, typed

    def __post_init__(self) -> None:
        # Read-only views: a Config is shared by the runner, the engine and the report.
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "p", Params.from_values(self.params))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "warnings", tuple(self.warnings))

    def __getitem__(self, name: str) -> Any:
        return self.params[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    @property
    def session_count(self) -> int:
        """Sessions the run connects: SESSIONS, or SCHEMAS x THREADS_PER_SCHEMA when 0."""
        return self.p.session_count

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict in table order (run.json's ``config`` block)."""
        return {o.name: self.params[o.name] for o in OPTIONS if o.name in self.params}

    def given(self, name: str) -> bool:
        """Whether the user set this parameter (a flag or slob.conf), not a default."""
        return self.sources.get(name) in GIVEN

    def sources_given(self) -> dict[str, Source]:
        """Where each value that is not a built-in default came from, in table order
        (run.json's ``config_sources``)."""
        return {
            o.name: self.sources[o.name]
            for o in OPTIONS
            if self.sources.get(o.name, "default") != "default"
        }

    def with_values(self, values: Mapping[str, Any], source: Source) -> Config:
        """A copy with these values from `source`, checked as a given one would be: each
        against its option's kind and range, then all as a whole (a value taken from the
        data set must fit the others: SCALE > 2 x WORK_UNIT). The one way a parameter
        changes after resolve (the data set's values, a rate sweep's measured rate)."""
        for name, value in values.items():
            option = OPTIONS_BY_NAME[name]
            try:
                typed_value(name, value)
            except TypeError:
                raise ConfigError(
                    f"{name}={value!r} is not {option.kind} (allowed: {range_text(option)})"
                ) from None
            check_range(option, value)
        config = replace(
            self,
            params={**self.params, **values},
            sources={**self.sources, **dict.fromkeys(values, source)},
        )
        check_combination(config, scope=self.scope)
        return config


def defaults() -> Config:
    """Every parameter at its built-in default, no slob.conf read: for a command that takes
    no parameters (`slob destroy`) but passes a Config on (targets, servers)."""
    params = {o.name: o.default for o in OPTIONS}
    return Config(params=params, sources=dict.fromkeys(params, "default"))


def _find_conf(conf: Path | str | None, cwd: Path) -> Path | None:
    """The slob.conf to read: the one asked for (must exist) or ./slob.conf if present."""
    if conf is not None:
        path = cwd / Path(conf).expanduser()
        if not path.is_file():
            raise ConfigError(f"--conf {conf}: no such file")
        return path
    default = cwd / "slob.conf"
    return default if default.is_file() else None


def _parse_at(option: Option, raw: str, origin: str) -> Any:
    """parse_value, with the error prefixed by where the value came from."""
    try:
        return parse_value(option, raw)
    except ConfigError as err:
        raise ConfigError(f"{origin}: {err}") from None


def _anchor(value: str, directory: Path) -> str:
    """A relative EXTERNAL_SCRIPT in slob.conf is relative to slob.conf (SLOB runs from
    the directory holding it), not to wherever openslob was started."""
    if not value:
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else directory / path)


def resolve(
    flags: Mapping[str, str | None],
    conf: Path | str | None,
    *,
    cwd: Path | None = None,
    scope: str | None = None,
) -> Config:
    """Effective configuration: defaults < slob.conf < flags, validated as a whole.

    ``flags`` maps option names to raw strings (None = not given). ``conf`` is an explicit
    slob.conf (must exist); without it ``./slob.conf`` in ``cwd`` is used when present.
    ``scope`` limits cross-parameter checks to the ones the command depends on.
    """
    unknown = sorted(set(flags) - set(OPTIONS_BY_NAME))
    if unknown:
        raise ValueError(f"unknown option names: {', '.join(unknown)}")
    base = cwd if cwd is not None else Path.cwd()
    conf_path = _find_conf(conf, base)
    conf_file = read_slob_conf(conf_path) if conf_path is not None else None

    params = {o.name: o.default for o in OPTIONS}
    sources: dict[str, Source] = dict.fromkeys(params, "default")
    if conf_file is not None:
        for name, raw in conf_file.values.items():
            option = OPTIONS_BY_NAME[name]
            if not raw.strip() and option.kind not in ("str", "path"):
                continue  # SLOB's scripts use ${KEY:=default}: an empty value means default
            if flags.get(name) is not None:
                continue  # overridden: a bad value in the file must not block the flag
            value = _parse_at(option, raw, f"{conf_file.path}:{conf_file.lines[name]}")
            params[name] = _anchor(value, conf_file.path.parent) if option.kind == "path" else value
            sources[name] = "file"
    for name, given in flags.items():
        if given is not None:
            params[name] = _parse_at(OPTIONS_BY_NAME[name], given, OPTIONS_BY_NAME[name].flag)
            sources[name] = "flag"

    _sessions_per_instance(params, sources)
    config = Config(
        params=params,
        sources=sources,
        conf_path=conf_path,
        notes=tuple(conf_file.notes) if conf_file else (),
        warnings=tuple(conf_file.warnings) if conf_file else (),
        scope=scope,
    )
    check_combination(config, scope=scope)
    return config


def _sessions_per_instance(params: dict[str, Any], sources: dict[str, Source]) -> None:
    """SESSIONS = SESSIONS_PER_INSTANCE x the instances, when their number is known here
    (INSTANCES, else SQLNET_SERVICE_MAX); runner/targets.py refuses the option when it is
    not. The effective SESSIONS is what run.json records, so every reader counts the load
    of the run it reads."""
    per = params["SESSIONS_PER_INSTANCE"]
    count = params["INSTANCES"] or params["SQLNET_SERVICE_MAX"]
    if not per or not count:
        return
    if params["SESSIONS"] and sources["SESSIONS"] != "default":
        raise ConfigError(
            f"SESSIONS={params['SESSIONS']} and SESSIONS_PER_INSTANCE={per}: give one of them"
        )
    params["SESSIONS"] = per * count
    sources["SESSIONS"] = sources["SESSIONS_PER_INSTANCE"]


# --------------------------------------------------------------------------- cross checks


def _check_work_unit(c: Config) -> str | None:
    # Keys are drawn from [WORK_UNIT+1, SCALE-WORK_UNIT]; that range must not be empty.
    if c["SCALE"] > 2 * c["WORK_UNIT"]:
        return None
    return (
        f"SCALE={c['SCALE']} must be greater than 2 x WORK_UNIT={c['WORK_UNIT']} "
        f"(keys are drawn from WORK_UNIT+1 to SCALE-WORK_UNIT)"
    )


def _check_think_time(c: Config) -> str | None:
    if c["THINK_TM_MIN"] <= c["THINK_TM_MAX"]:
        return None
    return (
        f"THINK_TM_MIN={number_text(c['THINK_TM_MIN'])} must not exceed "
        f"THINK_TM_MAX={number_text(c['THINK_TM_MAX'])}"
    )


def _check_rate(c: Config) -> str | None:
    # Think time would push every later op of the schedule back: the two pace a session
    # in contradicting ways.
    if not c["RATE"] or not c["THINK_TM_FREQUENCY"]:
        return None
    return (
        f"RATE={number_text(c['RATE'])} paces the sessions itself; it excludes think time "
        f"(THINK_TM_FREQUENCY={c['THINK_TM_FREQUENCY']}: set it to 0)"
    )


def _check_scan_table(c: Config) -> str | None:
    if c["SCAN_PCT"] == 0 or c["SCAN_TABLE_SZ"] > 0:
        return None
    return f"SCAN_PCT={c['SCAN_PCT']} needs a scan table, but SCAN_TABLE_SZ=0"


def _check_hotspot(c: Config) -> str | None:
    if not c["DO_HOTSPOT"]:
        return None
    end_mb = c["HOTSPOT_OFFSET_MB"] + c["HOTSPOT_MB"]
    table_bytes = c["SCALE"] * BLOCK_SIZE
    if end_mb * MIB <= table_bytes:
        return None
    return (
        f"HOTSPOT_OFFSET_MB={c['HOTSPOT_OFFSET_MB']} + HOTSPOT_MB={c['HOTSPOT_MB']} ends at "
        f"{end_mb} MB, beyond the table (SCALE={c['SCALE']} rows = "
        f"{number_text(round(table_bytes / MIB, 1))} MB)"
    )


def _check_sessions(c: Config) -> str | None:
    if c["SESSIONS"] or c.session_count <= MAX_SESSIONS:
        return None
    return (
        f"SCHEMAS={c['SCHEMAS']} x THREADS_PER_SCHEMA={c['THREADS_PER_SCHEMA']} = "
        f"{c.session_count} sessions, more than {MAX_SESSIONS}"
    )


def _check_external_script(c: Config) -> str | None:
    """The hook must be there and executable before the run, not found missing at its end."""
    script = c["EXTERNAL_SCRIPT"]
    if not script or shutil.which(script):  # a bare name is looked up on PATH, as bash does
        return None
    path = Path(script)
    if "/" not in script:
        problem = "no such command on PATH"
    elif not path.exists():
        problem = "no such file"
    elif path.is_dir():
        problem = "a directory, not a program"
    else:
        problem = f"not executable (chmod +x {shown_value(script)})"
    return f"EXTERNAL_SCRIPT={shown_value(script)}: {problem}"


def _check_steady_state(c: Config) -> str | None:
    """STEADY_STATE parses (model/steady.py); STOP_ON_STEADY needs a rule."""
    text = c.p.steady_state
    if not text:
        return "STOP_ON_STEADY=TRUE needs STEADY_STATE rules" if c.p.stop_on_steady else None
    try:
        steady.parse_rules(text)
    except ValueError as err:
        return f"STEADY_STATE={shown_value(text)}: {err} (allowed: {steady.FORMS})"
    return None


def _check_external_series(c: Config) -> str | None:
    """The imported series are read before the run: a bad line fails here (exit 2), not
    after an hour of measuring."""
    if c.p.external_series:
        read_series(Path(c.p.external_series))  # ExternalSeriesError: file, line, what
    return None


def _check_cliff(c: Config) -> str | None:
    """The live cliff rule must parse before the run, not fail at its first interval."""
    try:
        parse_rule(c.p.cliff, c.p.cliff_window)
    except ValueError as err:
        return f"CLIFF={shown_value(c.p.cliff)}: {err}"
    return None


# Each check with the parameters it reads: a command runs only the checks whose parameters it
# uses, so `setup` is not refused over, say, think times it never applies.
_CHECKS: tuple[tuple[tuple[str, ...], Callable[[Config], str | None]], ...] = (
    (("SCALE", "WORK_UNIT"), _check_work_unit),
    (("THINK_TM_MIN", "THINK_TM_MAX"), _check_think_time),
    (("RATE", "THINK_TM_FREQUENCY"), _check_rate),
    (("SCAN_PCT", "SCAN_TABLE_SZ"), _check_scan_table),
    (("DO_HOTSPOT", "HOTSPOT_MB", "HOTSPOT_OFFSET_MB", "SCALE"), _check_hotspot),
    (("SESSIONS", "SCHEMAS", "THREADS_PER_SCHEMA"), _check_sessions),
    (("EXTERNAL_SCRIPT",), _check_external_script),
    (("STEADY_STATE", "STOP_ON_STEADY"), _check_steady_state),
    (("EXTERNAL_SERIES",), _check_external_series),
    (("CLIFF", "CLIFF_WINDOW"), _check_cliff),
)


def check_combination(config: Config, *, scope: str | None = None) -> None:
    """Reject parameter combinations that cannot run; one line naming the parameters."""
    for names, check in _CHECKS:
        if scope is not None and not all(scope in OPTIONS_BY_NAME[n].scopes for n in names):
            continue
        problem = check(config)
        if problem:
            raise ConfigError(problem)
