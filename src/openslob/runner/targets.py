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
from difflib import get_close_matches
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from openslob.engines.mariadb.server import EmbeddedMariaDB, Secret
from openslob.engines.postgres.server import EmbeddedServer
from openslob.model.errors import ConfigError

EMBEDDED = "embedded"
EMBEDDED_MARIADB = "embedded-mariadb"
MYSQL_SCHEMES = ("mysql://", "mariadb://")


# A URI's user:password@ (the password up to the last @ of the URI: an unencoded / or @ in
# it must not leave its tail behind), and a keyword string's password=value.
_URI_PASSWORD = re.compile(r"(://[^:/@\s]*):(\S*)@")
_KW_PASSWORD = re.compile(r"(?i)((?<![?&\w])password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)([^&\s]*)")
HIDDEN = "********"


def redact(conninfo: str) -> str:
    """A connection string safe to print or store: passwords removed in both libpq forms."""
    without_uri_password = _URI_PASSWORD.sub(r"\1@", conninfo)
    without_query_password = _QUERY_PASSWORD.sub(rf"\1{HIDDEN}", without_uri_password)
    return _KW_PASSWORD.sub(rf"\1{HIDDEN}", without_query_password)


def secrets_of(target: str) -> set[str]:
    """The passwords a target string holds, as written and percent-decoded, with the parts
    of one that a parser may quote on its own (a piece before an unencoded / or @)."""
    found: set[str] = set()
    for pattern in (_URI_PASSWORD, _KW_PASSWORD, _QUERY_PASSWORD):
        for match in pattern.finditer(target):
            value = match[2].strip("'")
            found |= {value, unquote(value), *re.split(r"[/?#@]", value)}
    return {secret for secret in found if len(secret) >= 3}


def scrub(text: str, targets: tuple[str, ...] | list[str] = ()) -> str:
    """`text` (an error message) with every password of the given targets, and any a
    connection string in it carries, replaced: drivers quote a target they cannot parse."""
    for target in targets:
        text = text.replace(target, redact(target))
        for secret in sorted(secrets_of(target), key=len, reverse=True):
            text = text.replace(secret, HIDDEN)
    return redact(text)


def check_target(target: str) -> None:
    """Refuse (exit 2), before anything connects, a --target that is none of the forms we
    take; the message never holds its password."""
    if target in (EMBEDDED, EMBEDDED_MARIADB):
        return
    if target.startswith(MYSQL_SCHEMES):
        mysql_kwargs(target)
        return
    try:
        conninfo_to_dict(target)
    except psycopg.ProgrammingError as exc:
        close = get_close_matches(target, (EMBEDDED, EMBEDDED_MARIADB), n=1)
        advice = (
            f"did you mean {close[0]}?"
            if close
            else f"allowed: {EMBEDDED}, {EMBEDDED_MARIADB}, a postgresql:// or mysql:// URI, "
            "or libpq keywords such as 'host=db1 dbname=slob'"
        )
        raise ConfigError(
            f"--target {redact(target)}: {scrub(str(exc), [target])} ({advice})"
        ) from None


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
    try:
        parts = urlsplit(uri)
    except ValueError as exc:  # "Invalid IPv6 URL": names no part of the URI
        raise ConfigError(f"--target {redact(uri)}: not a valid URI ({exc})") from None
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
        except ValueError:  # its message would quote the "port": maybe a piece of a password
            raise ConfigError(f"--target {redact(uri)}: the port is not a number") from None
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
    for target in given:
        check_target(target)
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
