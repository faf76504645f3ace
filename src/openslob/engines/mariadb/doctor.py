"""`slob doctor` for MariaDB/MySQL: what the server lets openslob do and measure, and what to
change. Every finding is read from the server; verdicts as for PostgreSQL (ok / warn / fail)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymysql

from openslob.config.resolve import Config
from openslob.engines.api import Finding
from openslob.engines.common import doctor
from openslob.engines.common.rows import one
from openslob.engines.mariadb.connection import check_version, connect, global_variables
from openslob.engines.mariadb.layout import layout_for
from openslob.engines.mariadb.stats import DATA_FILE
from openslob.model.errors import OpenslobError, SetupError
from openslob.model.plan import CACHE_RATIO

# What setup and the run do: databases, tables, the loop procedures, and the metadata table.
SETUP_PRIVILEGES = ("CREATE", "DROP", "INDEX", "ALTER", "CREATE ROUTINE", "ALTER ROUTINE")
DIRECT_FLUSH = ("O_DIRECT", "O_DIRECT_NO_FSYNC")


def diagnose_target(
    connect_kwargs: dict[str, Any], config: Config, sessions: int | None = None
) -> list[Finding]:
    """Connect and diagnose; a server that cannot be reached is one clear error."""
    try:
        conn = connect(connect_kwargs, connect_timeout=10)
    except SetupError as exc:
        raise OpenslobError(str(exc)) from exc
    with conn:
        return diagnose(conn, config, sessions or config.session_count)


def _status(conn: pymysql.connections.Connection, name: str) -> int:
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE %s", [name])
        row = cur.fetchone()
    return int(row[1]) if row else 0


def diagnose(conn: pymysql.connections.Connection, config: Config, sessions: int) -> list[Finding]:
    try:
        version = check_version(conn)
    except SetupError as exc:
        return [Finding("server version", conn.get_server_info(), "fail", str(exc))]
    findings = [Finding("server version", version, "ok")]
    if "mariadb" not in version.lower():
        findings[0] = Finding(
            "server version",
            version,
            "warn",
            "MySQL is accepted but openslob was tested on MariaDB",
        )
    settings = global_variables(conn)
    findings += _privileges(conn)
    findings += _statistics(conn, settings)
    findings += _io_path(settings, config)
    findings += _durability(settings)
    findings.append(_capacity(conn, settings, sessions))
    findings.append(_host(settings))
    return findings


def _privileges(conn: pymysql.connections.Connection) -> list[Finding]:
    with conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        (user,) = one(cur.fetchone())
        cur.execute(
            "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = %s",
            ["'{}'@'{}'".format(*user.rsplit("@", 1))],
        )
        granted = {row[0] for row in cur.fetchall()}
    missing = [p for p in SETUP_PRIVILEGES if p not in granted]
    findings = [
        Finding(
            "setup privileges (global)",
            f"{user}: " + ("all" if not missing else "missing " + ", ".join(missing)),
            "ok" if not missing else "warn",
            ""
            if not missing
            else f"setup creates the databases user1..userN and openslob: GRANT ALL ON *.* TO "
            f"{user} (or these privileges on `user%` and `openslob`); database-level grants "
            "are not visible here, so this may still work",
        )
    ]
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM performance_schema.file_summary_by_event_name LIMIT 1")
        readable = True
    except pymysql.err.MySQLError:
        readable = False
    findings.append(
        Finding(
            "read performance_schema",
            f"{user}: {'yes' if readable else 'no'}",
            "ok" if readable else "warn",
            ""
            if readable
            else f"GRANT SELECT ON performance_schema.* TO {user}: without it read/write "
            "latencies are null",
        )
    )
    return findings


def _statistics(conn: pymysql.connections.Connection, settings: dict[str, str]) -> list[Finding]:
    on = settings.get("performance_schema") == "ON"
    findings = [
        Finding(
            "performance_schema",
            settings.get("performance_schema", "?"),
            "ok" if on else "warn",
            ""
            if on
            else "performance_schema = ON in my.cnf (restart): else database read/write "
            "latencies are null",
        )
    ]
    if on:
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT ENABLED, TIMED FROM performance_schema.setup_instruments"
                    " WHERE NAME = %s",
                    [DATA_FILE],
                )
                row = cur.fetchone()
        except pymysql.err.MySQLError:
            row = None
        timed = row is not None and row[0] == "YES" and row[1] == "YES"
        findings.append(
            Finding(
                "data file I/O instrument",
                "enabled and timed" if timed else "off" if row else "not readable",
                "ok" if timed else "warn",
                ""
                if timed
                else "performance_schema_instrument = 'wait/io/file/innodb/%=ON' in my.cnf: "
                "else read/write latencies are null",
            )
        )
    return findings


def _io_path(settings: dict[str, str], config: Config) -> list[Finding]:
    method = settings.get("innodb_flush_method", "?")
    direct = method in DIRECT_FLUSH
    findings = [
        Finding(
            "direct I/O",
            f"innodb_flush_method = {method}",
            "ok" if direct else "warn",
            ""
            if direct
            else "innodb_flush_method = O_DIRECT (restart): else reads may come from the OS "
            "page cache, not the device",
        )
    ]
    threshold = settings.get("innodb_read_ahead_threshold")
    random_ahead = settings.get("innodb_random_read_ahead")
    no_ahead = threshold == "0" and random_ahead == "OFF"
    findings.append(
        Finding(
            "read-ahead",
            f"innodb_read_ahead_threshold = {threshold}, innodb_random_read_ahead = {random_ahead}",
            "ok" if no_ahead else "warn",
            ""
            if no_ahead
            else "innodb_read_ahead_threshold = 0 and innodb_random_read_ahead = OFF: "
            "read-ahead turns SLOB's single-page reads into extent reads",
        )
    )
    page = int(settings.get("innodb_page_size", "16384"))
    layout = layout_for(page)
    data = config.p.schemas * layout.table_bytes(config.p.scale)
    pool = int(settings.get("innodb_buffer_pool_size", "0"))
    ok = data >= CACHE_RATIO * pool
    findings.append(
        Finding(
            "data set vs buffer pool",
            f"{data / 2**20:,.0f} MB ({page // 1024} KiB pages, {layout.rows_per_page} rows "
            f"each) vs {pool / 2**20:,.0f} MB",
            "ok" if ok else "warn",
            ""
            if ok
            else f"physical I/O tests want the data set >= {CACHE_RATIO}x the buffer pool: "
            "raise SCALE or SCHEMAS, or lower innodb_buffer_pool_size",
        )
    )
    return findings


def _durability(settings: dict[str, str]) -> list[Finding]:
    flush = settings.get("innodb_flush_log_at_trx_commit")
    findings = [
        Finding(
            "innodb_flush_log_at_trx_commit",
            str(flush),
            "ok" if flush == "1" else "warn",
            ""
            if flush == "1"
            else "= 1: else commits do not wait for the redo flush and update latency "
            "understates a durable system",
        )
    ]
    doublewrite = settings.get("innodb_doublewrite")
    findings.append(
        Finding(
            "innodb_doublewrite",
            str(doublewrite),
            "ok",
            "each flushed page is written twice (doublewrite buffer, then its place): "
            "physical writes count both"
            if doublewrite == "ON"
            else "off: page writes are single, torn pages are not protected",
        )
    )
    if settings.get("log_bin") == "ON":
        findings.append(
            Finding(
                "binary log",
                f"log_bin = ON, sync_binlog = {settings.get('sync_binlog')}",
                "warn",
                "every commit also writes (and with sync_binlog = 1 syncs) the binary log: "
                "redo figures leave that I/O out",
            )
        )
    return findings


def _capacity(
    conn: pymysql.connections.Connection, settings: dict[str, str], sessions: int
) -> Finding:
    limit = int(settings.get("max_connections", "0"))
    free = limit - _status(conn, "Threads_connected")
    return doctor.capacity(limit, free, sessions, restart=False)


def _host(settings: dict[str, str]) -> Finding:
    datadir = settings.get("datadir", "")
    local = bool(datadir) and Path(datadir).exists()
    return Finding(
        "device counters",
        f"datadir {datadir} {'is on this host' if local else 'not on this host'}",
        "ok" if local else "warn",
        "" if local else "device and OS figures are null for a server on another host",
    )
