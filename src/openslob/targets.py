"""Where the database is: the private embedded server, or existing PostgreSQL instances.

Several targets make a multi-instance run: repeated --target, or SLOB's SQLNET_SERVICE_BASE
and SQLNET_SERVICE_MAX, which name the libpq services BASE1..BASEN (pg_service.conf).
"""

from __future__ import annotations

import getpass
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from openslob.errors import ConfigError
from openslob.options import Config
from openslob.servers.embedded import EmbeddedServer

EMBEDDED = "embedded"


def redact(conninfo: str) -> str:
    """A connection string safe to print or store: passwords removed in both libpq forms."""
    without_uri_password = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1@", conninfo)
    without_kw_password = re.sub(
        r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1********", without_uri_password
    )
    return re.sub(r"(?i)([?&]password=)[^&]*", r"\1********", without_kw_password)


@dataclass
class Target:
    """A resolved target: a conninfo, and the private server when it is ours."""

    conninfo: str
    server: EmbeddedServer | None = None

    @property
    def label(self) -> str:
        if self.server is not None:
            return f"embedded PostgreSQL in {self.server.data_dir}"
        return redact(self.conninfo)


def resolve_target(target: str | None, data_dir: Path | None, *, start: bool = True) -> Target:
    """`embedded` (the default) starts the private server if needed; anything else is libpq
    (with its PG* variables, service files and .pgpass), plus a password prompt at a
    terminal when the server asks for a password libpq could not find."""
    if target in (None, "", EMBEDDED):
        server = EmbeddedServer(data_dir)
        if start:
            server.start()
        return Target(server.conninfo(), server)
    return Target(with_prompted_password(target))


def _needs_password(conninfo: str) -> bool:
    try:
        psycopg.connect(conninfo, connect_timeout=10).close()
    except psycopg.OperationalError as exc:
        return "no password supplied" in str(exc)
    return False


def with_prompted_password(conninfo: str) -> str:
    """The conninfo, with a password typed at the terminal when the server wants one and
    none was found. The password lives only in this process's memory (never echoed, logged
    or stored: every printed form goes through redact)."""
    if not sys.stdin.isatty() or not _needs_password(conninfo):
        return conninfo
    password = getpass.getpass(f"password for {redact(conninfo)}: ")
    return make_conninfo(conninfo, password=password)


def target_strings(targets: tuple[str, ...] | list[str] | str | None, config: Config) -> list[str]:
    """The targets of a command: --target (repeatable), else SQLNET_SERVICE_BASE1..MAX, else
    the private server. A target named twice, or `embedded` among several, is refused."""
    if isinstance(targets, str):
        targets = [targets]
    given = [t for t in targets or () if t]
    explicit = [t for t in given if t != EMBEDDED] or (given if len(given) > 1 else [])
    count, base = config.get("SQLNET_SERVICE_MAX", 0), config.get("SQLNET_SERVICE_BASE", "")
    if count and not explicit:
        if not base:
            raise ConfigError(
                "SQLNET_SERVICE_MAX needs SQLNET_SERVICE_BASE: the libpq service name "
                "the instances' services start with (BASE1..BASEN in pg_service.conf)"
            )
        return [f"service={base}{n}" for n in range(1, count + 1)]
    if not given:
        return [EMBEDDED]
    if len(given) > 1 and EMBEDDED in given:
        raise ConfigError(
            "--target embedded cannot be combined with other targets; give each private "
            "server's connection string instead (slob server status shows it)"
        )
    seen: set[str] = set()
    for target in given:
        if target in seen:
            raise ConfigError(f"--target {redact(target)} is given twice")
        seen.add(target)
    return given


def resolve_targets(
    targets: tuple[str, ...] | list[str] | str | None,
    config: Config,
    data_dir: Path | None,
    *,
    start: bool = True,
) -> list[Target]:
    return [resolve_target(t, data_dir, start=start) for t in target_strings(targets, config)]
