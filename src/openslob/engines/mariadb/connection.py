"""Connections, versions and identifier quoting shared by the MariaDB modules."""

from __future__ import annotations

from typing import Any

import pymysql

from openslob.model.errors import SetupError

CONNECT_TIMEOUT_S = 30
# 10.6.6: MDEV-27018 (10.6.0-10.6.5) let JSON that passes through IF() or a one-row
# subquery lose its type, so JSON_OBJECT quoted the loop's histograms as strings. Fixed in
# the January 2022 releases: the 10.7 and 10.8 previews before them (10.7.0-10.7.1,
# 10.8.0) have it too.
MIN_MARIADB = (10, 6, 6)
FIXED_IN_SERIES = {(10, 7): 2, (10, 8): 1}
MIN_MYSQL = (8, 0, 0)


def ident(*parts: str) -> str:
    """`db`.`table` with backticks doubled inside names (MySQL's identifier quoting)."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def describe_target(kwargs: dict[str, Any]) -> str:
    """mysql://user@host:port/ or the socket, never the password."""
    user = kwargs.get("user", "")
    if kwargs.get("unix_socket"):
        return f"mysql://{user}@localhost/?unix_socket={kwargs['unix_socket']}"
    return f"mysql://{user}@{kwargs.get('host', 'localhost')}:{kwargs.get('port', 3306)}/"


def connect(kwargs: dict[str, Any], **extra: Any) -> pymysql.connections.Connection:
    """A PyMySQL connection (autocommit) or a one-line SetupError naming the target."""
    options: dict[str, Any] = {
        "autocommit": True,
        "charset": "utf8mb4",
        "connect_timeout": CONNECT_TIMEOUT_S,
    }
    options.update(kwargs)
    options.update(extra)
    if options.get("unix_socket"):
        # TLS means nothing on a local socket, and PyMySQL's preferred-TLS default builds a
        # context with the system's CA store for every connection: 36 ms of CPU each, here
        # (0.3 ms without), paid per session at start and per KILL QUERY at a stop
        options.setdefault("ssl_disabled", True)
    try:
        return pymysql.connect(**options)
    except pymysql.err.MySQLError as exc:
        reason = exc.args[1] if len(exc.args) > 1 else str(exc)
        raise SetupError(f"cannot connect to {describe_target(kwargs)}: {reason}") from exc


def server_version(conn: pymysql.connections.Connection) -> tuple[str, tuple[int, int]]:
    """('10.11.19-MariaDB-...', (10, 11)) from the handshake."""
    # MariaDB prefixes its handshake version with "5.5.5-" for old MySQL clients.
    text = conn.get_server_info().removeprefix("5.5.5-")
    return text, version_triple(text)[:2]


def version_triple(text: str) -> tuple[int, int, int]:
    """(10, 11, 19) from '10.11.19-MariaDB-...' (a missing or odd patch level: 0)."""
    parts = text.removeprefix("5.5.5-").split("-", 1)[0].split(".")
    digits = ["".join(ch for ch in part if ch.isdigit()) or "0" for part in parts[:3]]
    major, minor, patch = (int(d) for d in [*digits, "0", "0"][:3])
    return major, minor, patch


def too_old(text: str) -> str | None:
    """Why a server of handshake version `text` cannot run openslob, else None."""
    is_mariadb = "mariadb" in text.lower()
    version = version_triple(text)
    minimum = MIN_MARIADB if is_mariadb else MIN_MYSQL
    if is_mariadb and version[:2] in FIXED_IN_SERIES:
        minimum = (*version[:2], FIXED_IN_SERIES[version[:2]])
    if version >= minimum:
        return None
    name = "MariaDB" if is_mariadb else "MySQL"
    return f"{name} {text} is too old (need {'.'.join(map(str, minimum))} or later)"


def check_version(conn: pymysql.connections.Connection) -> str:
    text, _ = server_version(conn)
    reason = too_old(text)
    if reason is not None:
        raise SetupError(reason)
    return text


def scalar(conn: pymysql.connections.Connection, query: str, args: Any = None) -> Any:
    with conn.cursor() as cur:
        cur.execute(query, args)
        row = cur.fetchone()
    return None if row is None else row[0]


def page_size(conn: pymysql.connections.Connection) -> int:
    return int(scalar(conn, "SELECT @@innodb_page_size"))


# The server settings that shape openslob's numbers: status, describe and the run read these.
SHAPING_SETTINGS = (
    "innodb_page_size",
    "innodb_buffer_pool_size",
    "innodb_flush_method",
    "innodb_flush_log_at_trx_commit",
    "innodb_doublewrite",
    "innodb_read_ahead_threshold",
    "innodb_random_read_ahead",
    "innodb_change_buffering",
    "innodb_adaptive_hash_index",
    "innodb_flush_neighbors",
    "innodb_log_file_size",
    "innodb_log_buffer_size",
    "performance_schema",
    "max_connections",
)


def global_variables(
    conn: pymysql.connections.Connection, names: tuple[str, ...] | None = None
) -> dict[str, str]:
    """{name: value} of the server's global variables (lower-case names); all without names."""
    with conn.cursor() as cur:
        if names is None:
            cur.execute("SHOW GLOBAL VARIABLES")
        else:
            cur.execute(
                "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE"
                " FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME IN %s",
                [tuple(name.upper() for name in names)],
            )
        return {name.lower(): str(value) for name, value in cur.fetchall()}
