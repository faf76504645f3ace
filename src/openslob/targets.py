"""Where the database is: a private server (PostgreSQL, or MariaDB per InnoDB page size), or
existing PostgreSQL / MariaDB / MySQL instances.

Several targets make a multi-instance run: repeated --target, or SLOB's SQLNET_SERVICE_BASE
and SQLNET_SERVICE_MAX, which name the libpq services BASE1..BASEN (pg_service.conf).
"""

from __future__ import annotations

import getpass
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import psycopg
from psycopg.conninfo import make_conninfo

from openslob.errors import ConfigError
from openslob.servers.embedded import EmbeddedServer
from openslob.servers.mariadb import EmbeddedMariaDB, Secret

EMBEDDED = "embedded"
EMBEDDED_MARIADB = "embedded-mariadb"
MYSQL_SCHEMES = ("mysql://", "mariadb://")


def redact(conninfo: str) -> str:
    """A connection string safe to print or store: passwords removed in both libpq forms."""
    without_uri_password = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1@", conninfo)
    without_kw_password = re.sub(
        r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1********", without_uri_password
    )
    return re.sub(r"(?i)([?&]password=)[^&]*", r"\1********", without_kw_password)


@dataclass
class Target:
    """A resolved target: its engine, how to connect, and the private server when it is ours.

    conninfo is libpq's string for PostgreSQL; for MariaDB a printable URI, the connection
    itself being connect_kwargs (pymysql.connect arguments)."""

    conninfo: str
    server: EmbeddedServer | EmbeddedMariaDB | None = None
    engine: str = "postgresql"
    connect_kwargs: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        if isinstance(self.server, EmbeddedMariaDB):
            return f"embedded MariaDB ({self.server.page_size} pages) in {self.server.dir}"
        if self.server is not None:
            return f"embedded PostgreSQL in {self.server.data_dir}"
        return redact(self.conninfo)


def private_server(
    engine: str, page_size: str, data_dir: Path | None
) -> EmbeddedServer | EmbeddedMariaDB:
    """The private server of an engine (not started): `slob server …`."""
    if engine == "mariadb":
        return EmbeddedMariaDB(data_dir, page_size)
    return EmbeddedServer(data_dir)


def resolve_target(
    target: str | None, data_dir: Path | None, *, start: bool = True, page_size: str = "16k"
) -> Target:
    """`embedded` (the default) starts the private PostgreSQL if needed, `embedded-mariadb`
    the private MariaDB of `page_size`; mysql:// and mariadb:// URIs are existing MariaDB or
    MySQL servers; anything else is libpq (with its PG* variables, service files and .pgpass),
    plus a password prompt at a terminal when the server asks for a password libpq could not
    find."""
    if target in (None, "", EMBEDDED):
        server = EmbeddedServer(data_dir)
        if start:
            server.start()
        return Target(server.conninfo(), server)
    if target == EMBEDDED_MARIADB:
        maria = EmbeddedMariaDB(data_dir, page_size)
        if start:
            maria.start()
        return Target(maria.conninfo(), maria, "mariadb", maria.connect_kwargs())
    if target.startswith(MYSQL_SCHEMES):
        return Target(redact(target), None, "mariadb", mysql_kwargs(target))
    return Target(with_prompted_password(target))


def mysql_kwargs(uri: str) -> dict[str, Any]:
    """pymysql.connect arguments of mysql://user:password@host:port/?unix_socket=PATH."""
    parts = urlsplit(uri)
    query = parse_qs(parts.query)
    kwargs: dict[str, Any] = {"user": unquote(parts.username or "") or getpass.getuser()}
    if parts.password:
        kwargs["password"] = Secret(unquote(parts.password))
    if "unix_socket" in query:
        kwargs["unix_socket"] = query["unix_socket"][0]
    else:
        kwargs["host"] = parts.hostname or "localhost"
        try:
            kwargs["port"] = parts.port or 3306
        except ValueError as exc:
            raise ConfigError(f"--target {redact(uri)}: {exc}") from exc
    return kwargs


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


def target_strings(
    targets: tuple[str, ...] | list[str] | str | None, config: Mapping[str, Any]
) -> list[str]:
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
    for private in (EMBEDDED, EMBEDDED_MARIADB):
        if len(given) > 1 and private in given:
            raise ConfigError(
                f"--target {private} cannot be combined with other targets; give each private "
                "server's connection string instead (slob server status shows it)"
            )
    if len({t.startswith(MYSQL_SCHEMES) or t == EMBEDDED_MARIADB for t in given}) > 1:
        raise ConfigError("--target: the instances of one run must all be PostgreSQL or MariaDB")
    seen: set[str] = set()
    for target in given:
        if target in seen:
            raise ConfigError(f"--target {redact(target)} is given twice")
        seen.add(target)
    return given


def resolve_targets(
    targets: tuple[str, ...] | list[str] | str | None,
    config: Mapping[str, Any],
    data_dir: Path | None,
    *,
    start: bool = True,
) -> list[Target]:
    page_size = str(config.get("PAGE_SIZE") or "16k").lower()
    return [
        resolve_target(t, data_dir, start=start, page_size=page_size)
        for t in target_strings(targets, config)
    ]
