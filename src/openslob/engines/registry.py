"""The engines openslob knows: the only place that lists them.

Each engine is a plug-in (engines/<name>/plugin.py, api.EnginePlugin); the rest of openslob
asks this module for the plug-in of a run (by run.json engine.name), of a --target string
(the first that claims it; the first engine, PostgreSQL, is the default), or for all of them
(the CLI's --engine choices, the metrics engines add, error hints).
"""

from __future__ import annotations

from difflib import get_close_matches
from pathlib import Path

from openslob.engines.api import ConfigView, EnginePlugin, Target, check_api
from openslob.engines.mariadb.plugin import PLUGIN as MARIADB
from openslob.engines.postgres.plugin import PLUGIN as POSTGRESQL
from openslob.model import engine as engines
from openslob.model.errors import ConfigError
from openslob.model.metrics import METRICS
from openslob.model.secrets import redact

PLUGINS: tuple[EnginePlugin, ...] = (POSTGRESQL, MARIADB)  # the first is the default
for _plugin in PLUGINS:  # one written for another engine API: refused, in one line
    check_api(_plugin)
BY_NAME = {plugin.name: plugin for plugin in PLUGINS}
DEFAULT = PLUGINS[0]

for _plugin in PLUGINS:  # the figures engines add to run.json metrics
    for _metric in _plugin.metrics:
        METRICS.add(_metric)
    engines.announce(_plugin)  # an older run.json's words (results/rundir.py)


def plugin(name: str | None) -> EnginePlugin:
    """The plug-in of an engine name (run.json engine.name); unknown names: ConfigError."""
    if name is None:
        return DEFAULT
    try:
        return BY_NAME[name]
    except KeyError:
        raise ConfigError(f"engine {name!r}: allowed {', '.join(BY_NAME)}") from None


def names() -> tuple[str, ...]:
    return tuple(BY_NAME)


def private_targets() -> tuple[str, ...]:
    return tuple(p.private_target for p in PLUGINS)


def plugin_for_target(target: str) -> EnginePlugin:
    """The engine whose --target string this is (the default engine's when none claims it:
    libpq takes keyword strings and service names)."""
    return next((p for p in PLUGINS if p.claims(target)), DEFAULT)


def check_target(target: str) -> None:
    """ConfigError (exit 2, no password) for a --target none of the engines can take."""
    try:
        plugin_for_target(target).check_target(target)
    except ConfigError as exc:
        close = get_close_matches(target, private_targets(), n=1)
        forms = "; ".join(p.target_help for p in PLUGINS)
        advice = f"did you mean {close[0]}?" if close else f"allowed: {forms}"
        raise ConfigError(f"{exc} ({advice})") from None


def resolve(
    target: str, data_dir: Path | None, config: ConfigView, *, start: bool = True
) -> Target:
    return plugin_for_target(target).resolve(target, data_dir, config, start=start)


def service_targets(base: str, count: int) -> list[str] | None:
    """SLOB's SQLNET_SERVICE_BASE1..MAX, as the default engine names them."""
    return DEFAULT.service_targets(base, count)


def describe_error(exc: BaseException) -> tuple[str, str | None] | None:
    """A driver's error read by the engine it belongs to (model.errors.one_line)."""
    for p in PLUGINS:
        known = p.error_hint(exc)
        if known is not None:
            return known
    return None


def target_label(target: str) -> str:
    return redact(target)
