"""`slob doctor`: what an existing PostgreSQL lets openslob do and measure, and what to change.

Every finding is read from the server (version, role attributes, settings, catalog); none is
assumed. Verdicts: "ok"; "warn" (the run works, a figure is null or can mislead); "fail"
(setup or run cannot work as asked).
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from openslob.config.option import BLOCK_SIZE
from openslob.config.resolve import Config
from openslob.engines.api import Finding
from openslob.engines.common import doctor
from openslob.engines.common.rows import one
from openslob.engines.postgres import layout
from openslob.model.errors import OpenslobError
from openslob.model.plan import CACHE_RATIO, session_schemas

MIN_VERSION = 130000


def _setting(conn: psycopg.Connection, name: str) -> str | None:
    row = conn.execute("SELECT setting FROM pg_settings WHERE name = %s", [name]).fetchone()
    return None if row is None else str(row[0])


def _bytes(conn: psycopg.Connection, name: str) -> int | None:
    row = conn.execute(
        "SELECT setting::bigint * coalesce(pg_size_bytes(nullif(unit, '')), 1)"
        " FROM pg_settings WHERE name = %s",
        [name],
    ).fetchone()
    return None if row is None else int(row[0])


def diagnose_target(conninfo: str, config: Config, sessions: int | None = None) -> list[Finding]:
    """Connect and diagnose; a server that cannot be reached is one clear error.
    `sessions`: what this instance gets (of a multi-instance run); default all of them."""
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            return diagnose(conn, config, sessions)
    except psycopg.OperationalError as exc:
        detail = " ".join(line.strip() for line in str(exc).strip().splitlines())
        raise OpenslobError(f"cannot connect: {detail}") from exc


def diagnose(
    conn: psycopg.Connection, config: Config, sessions: int | None = None
) -> list[Finding]:
    version = conn.info.server_version
    findings = [_version(conn, version)]
    if version < MIN_VERSION:
        return findings
    findings += _privileges(conn)
    findings += _statistics(conn, version)
    findings += _io_path(conn, version, config)
    findings += _durability(conn)
    findings.append(_capacity(conn, sessions or len(session_schemas(config))))
    findings.append(_host(conn))
    findings.append(_update_limit())
    return findings


def _update_limit() -> Finding:
    """The update rate the one-row-per-page layout holds, as measured (README)."""
    versions = layout.HOT_VERSIONS_PER_PAGE - 1
    return Finding(
        "updates the layout holds",
        f"{versions} old versions of a row per page between two prunes",
        "ok",
        "measured on a cached 2 x 2,048-row data set, UPDATE_PCT=100: 16 sessions (~25 "
        "updates per row per second) kept cf1 at SCALE pages, 64 sessions (~17 per row per "
        "second, waiting on each other's row locks, which holds their snapshots) did not; a "
        f"snapshot held for more than {versions} updates of a row moves it out of its page",
    )


def _version(conn: psycopg.Connection, version: int) -> Finding:
    text = one(conn.execute("SHOW server_version").fetchone())[0]
    if version < MIN_VERSION:
        return Finding("server version", text, "fail", "openslob needs PostgreSQL 13 or later")
    if version < 160000:
        return Finding(
            "server version",
            text,
            "warn",
            "before 16 there is no pg_stat_io (physical writes and write latency are null) "
            "and no direct I/O",
        )
    return Finding("server version", text, "ok")


def _privileges(conn: psycopg.Connection) -> list[Finding]:
    role, superuser, create, stats = one(
        conn.execute(
            "SELECT current_user, rolsuper,"
            " has_database_privilege(current_database(), 'CREATE'),"
            " rolsuper OR pg_has_role('pg_read_all_stats', 'USAGE')"
            " FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
    )
    findings = [
        Finding(
            "create schemas (setup)",
            f"{role}: {'yes' if create else 'no'}",
            "ok" if create else "fail",
            "" if create else f"GRANT CREATE ON DATABASE {conn.info.dbname} TO {role}",
        ),
        Finding(
            "read all statistics",
            f"{role}: {'yes' if stats else 'no'}",
            "ok" if stats else "warn",
            ""
            if stats
            else f"GRANT pg_read_all_stats TO {role} (or pg_monitor): without it other "
            "sessions' wait events and statements are hidden",
        ),
    ]
    if not superuser:
        findings.append(
            Finding(
                "superuser",
                f"{role}: no",
                "ok",
                "fine for setup and runs; host counters of a remote server need "
                "pg_read_server_files",
            )
        )
    return findings


def _statistics(conn: psycopg.Connection, version: int) -> list[Finding]:
    findings = []
    for name, lost in (
        ("track_io_timing", "database read/write latency is null"),
        ("track_wal_io_timing", "WAL sync latency is null"),
    ):
        value = _setting(conn, name)
        if value is None:  # track_wal_io_timing is 14+
            continue
        findings.append(
            Finding(
                name,
                value,
                "ok" if value == "on" else "warn",
                ""
                if value == "on"
                else f"ALTER SYSTEM SET {name} = on; SELECT pg_reload_conf() (else {lost})",
            )
        )
    preload = _setting(conn, "shared_preload_libraries") or ""
    installed = conn.execute(
        "SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'"
    ).fetchone()
    loaded = "pg_stat_statements" in preload
    findings.append(
        Finding(
            "pg_stat_statements",
            f"preloaded: {'yes' if loaded else 'no'}, installed: {'yes' if installed else 'no'}",
            "ok" if loaded and installed else "warn",
            ""
            if loaded and installed
            else "add pg_stat_statements to shared_preload_libraries (restart) and "
            "CREATE EXTENSION pg_stat_statements: else no time series, no top statements and "
            "no op counts for an interrupted run",
        )
    )
    if version < 150000:
        findings.append(
            Finding(
                "DB time",
                "not measurable",
                "warn",
                "pg_stat_force_next_flush() is 15+: DB time is null before 15",
            )
        )
    return findings


def _io_path(conn: psycopg.Connection, version: int, config: Config) -> list[Finding]:
    findings = []
    direct = _setting(conn, "debug_io_direct") if version >= 160000 else None
    if direct is not None and "data" in direct.split(","):
        findings.append(Finding("direct I/O", f"debug_io_direct = {direct}", "ok"))
    else:
        findings.append(
            Finding(
                "direct I/O",
                "off" if version >= 160000 else "not available before 16",
                "warn",
                "reads may come from the OS page cache, not the device: "
                + (
                    "debug_io_direct = data (restart)"
                    if version >= 160000
                    else "use a data set far larger than RAM"
                ),
            )
        )
    method = _setting(conn, "io_method")
    if method is not None:
        findings.append(
            Finding(
                "io_method",
                method,
                "ok" if method == "sync" else "warn",
                ""
                if method == "sync"
                else "io_method = sync makes each miss one pread by the session (SLOB's "
                "single-block read); worker/io_uring hand reads to other processes",
            )
        )
    shared_buffers = _bytes(conn, "shared_buffers") or 0
    data = config.p.schemas * config.p.scale * BLOCK_SIZE
    ok = data >= CACHE_RATIO * shared_buffers
    findings.append(
        Finding(
            "data set vs shared_buffers",
            f"{data / 2**20:,.0f} MB vs {shared_buffers / 2**20:,.0f} MB",
            "ok" if ok else "warn",
            ""
            if ok
            else f"physical I/O tests want the data set >= {CACHE_RATIO}x shared_buffers: raise "
            "SCALE or SCHEMAS, or lower shared_buffers",
        )
    )
    return findings


def _durability(conn: psycopg.Connection) -> list[Finding]:
    findings = []
    for name, why in (
        ("fsync", "commits and checkpoints do not reach the device: WAL figures are fiction"),
        (
            "synchronous_commit",
            "commits do not wait for the WAL flush: update latency "
            "and WAL syncs understate a real system",
        ),
        ("full_page_writes", "WAL volume is smaller than a production server's"),
    ):
        value = _setting(conn, name)
        ok = value == "on"
        findings.append(
            Finding(name, str(value), "ok" if ok else "warn", "" if ok else f"{name} = on ({why})")
        )
    return findings


def _capacity(conn: psycopg.Connection, sessions: int) -> Finding:
    limit = int(_setting(conn, "max_connections") or 0)
    reserved = int(_setting(conn, "superuser_reserved_connections") or 0)
    busy = one(
        conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
        ).fetchone()
    )[0]
    free = limit - reserved - busy
    return doctor.capacity(limit, free, sessions, restart=True)


def _host(conn: psycopg.Connection) -> Finding:
    try:
        data_dir = one(conn.execute("SHOW data_directory").fetchone())[0]
    except psycopg.Error:
        conn.rollback()
        return Finding(
            "device counters",
            "data_directory hidden",
            "warn",
            "the role may not read data_directory (pg_read_all_settings): device figures null",
        )
    local = Path(data_dir).exists()
    return Finding(
        "device counters",
        f"data_directory {data_dir} {'is on this host' if local else 'not on this host'}",
        "ok" if local else "warn",
        "" if local else "device and OS figures are null for a server on another host",
    )
