"""The targets of a command: where the database is, for every engine alike.

A target string is an engine's (engines.registry.plugin_for_target): its private server or
one of its connection strings. Several targets make a multi-instance run: repeated --target,
or SLOB's SQLNET_SERVICE_BASE and SQLNET_SERVICE_MAX (the default engine's services
BASE1..BASEN). All the instances of one run are of one engine.
"""

from __future__ import annotations

from pathlib import Path

from openslob.config.resolve import Config
from openslob.engines import registry
from openslob.engines.api import Target
from openslob.model.errors import ConfigError
from openslob.model.secrets import redact


def target_strings(targets: tuple[str, ...] | list[str] | str | None, config: Config) -> list[str]:
    """The targets of a command: --target (repeatable), else SQLNET_SERVICE_BASE1..MAX, else
    the default engine's private server; the first INSTANCES of them when it is set (an
    instance sweep). A target named twice, a private server among several targets, or
    instances of different engines are refused."""
    found = _all_targets(targets, config)
    wanted = config.p.instances
    if config.p.sessions_per_instance and not (wanted or config.p.sqlnet_service_max):
        raise ConfigError(
            "SESSIONS_PER_INSTANCE needs INSTANCES (or SQLNET_SERVICE_MAX): the number of "
            "instances it multiplies"
        )
    if wanted > len(found):
        raise ConfigError(
            f"INSTANCES={wanted}: only {len(found)} instance(s) given (repeat --target, or "
            "SQLNET_SERVICE_MAX); allowed 0 (all) to "
            f"{len(found)}"
        )
    return found[:wanted] if wanted else found


def _all_targets(targets: tuple[str, ...] | list[str] | str | None, config: Config) -> list[str]:
    if isinstance(targets, str):
        targets = [targets]
    given = [t for t in targets or () if t]
    default = registry.DEFAULT.private_target
    explicit = [t for t in given if t != default] or (given if len(given) > 1 else [])
    count, base = config.p.sqlnet_service_max, config.p.sqlnet_service_base
    if count and not explicit:
        if not base:
            raise ConfigError(
                "SQLNET_SERVICE_MAX needs SQLNET_SERVICE_BASE: the service name the "
                "instances' services start with (BASE1..BASEN)"
            )
        return registry.service_targets(base, count) or []
    if not given:
        return [default]
    for private in registry.private_targets():
        if len(given) > 1 and private in given:
            raise ConfigError(
                f"--target {private} cannot be combined with other targets; give each private "
                "server's connection string instead (slob server status shows it)"
            )
    engines = {registry.plugin_for_target(t).title for t in given}
    if len(engines) > 1:
        raise ConfigError(
            f"--target: the instances of one run must all be of one engine "
            f"(given: {', '.join(sorted(engines))})"
        )
    seen: set[str] = set()
    for target in given:
        if target in seen:
            raise ConfigError(f"--target {redact(target)} is given twice")
        seen.add(target)
    for target in given:
        registry.check_target(target)
    return given


def resolve_targets(
    targets: tuple[str, ...] | list[str] | str | None,
    config: Config,
    data_dir: Path | None,
    *,
    start: bool = True,
) -> list[Target]:
    return [
        registry.resolve(t, data_dir, config, start=start) for t in target_strings(targets, config)
    ]


def private_target(engine: str, data_dir: Path | None, config: Config) -> Target:
    """The Target of an engine's private server, not started (`slob server …`)."""
    plugin = registry.plugin(engine)
    return plugin.resolve(plugin.private_target, data_dir, config, start=False)
