"""One openslob run (or setup, or destroy) per data set at a time, and no loop left behind.

The lock is a session-level advisory lock of the SLOB database, held by a connection of its
own for as long as the run, sweep, setup or destroy lasts: a second one fails at once and
names the holder (its pid and what it is). A client killed outright (SIGKILL) loses the lock
with its connection; its loops end by themselves (client_connection_check_interval in the
work sessions, workload.SESSION_SETTINGS), so the lock never outlives its owner.
Loops found running while the lock is free are leftovers (an older client's, or one killed
a moment ago): the private server's are ended, an existing server's are named.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg

from openslob.engines.common.rows import one
from openslob.model.errors import BusyError, SetupError
from openslob.model.secrets import redact

LOCK_KEY = (0x534C4F42, 1)  # ("SLOB", 1): advisory locks are per database
LOCK_APP = "openslob-lock"
RUN_APP = "openslob-run"  # work sessions and monitors: "openslob-run <run dir> [role]"
CONNECT_TIMEOUT_S = 30


class DatasetLock:
    """The advisory lock of one SLOB database, held by a connection of its own."""

    def __init__(self, conninfo: str, purpose: str) -> None:
        self.conninfo, self.purpose = conninfo, purpose
        self.guard: dict[str, Any] = {}  # the loop needs nothing: the server sees a dead client
        self.conn: psycopg.Connection | None = None
        self.ensure()

    def ensure(self) -> None:
        """Hold the lock (again, after a restart of the private server ended the connection);
        BusyError names whoever holds it instead."""
        if self.conn is not None and not self.conn.closed and not self.conn.broken:
            try:
                self.conn.execute("SELECT 1")
                return
            except psycopg.Error:
                self.conn.close()
        self.conn = _connect(self.conninfo, f"{LOCK_APP} {self.purpose}")
        (got,) = one(self.conn.execute("SELECT pg_try_advisory_lock(%s, %s)", LOCK_KEY).fetchone())
        if not got:
            holder = holder_text(self.conn)
            self.conn.close()
            raise BusyError(
                f"{holder} is using the SLOB data set on {redact(self.conninfo)}: wait for "
                "it to end (one run, setup or destroy at a time)"
            )

    def release(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(psycopg.Error):
                self.conn.close()
            self.conn = None


def _connect(conninfo: str, application_name: str) -> psycopg.Connection:
    try:
        return psycopg.connect(
            conninfo,
            autocommit=True,
            application_name=application_name,
            connect_timeout=CONNECT_TIMEOUT_S,
        )
    except psycopg.OperationalError as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        raise SetupError(f"cannot connect to {redact(conninfo)}: {reason}") from exc


def holder_text(conn: psycopg.Connection) -> str:
    """'openslob run 20261123T0102Z (pid 4242, since 01:02:03)' for the lock's holder."""
    row = conn.execute(
        "SELECT a.pid, a.application_name, a.backend_start::timestamp(0)::text"
        " FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
        " WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = %s AND l.granted"
        "  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        LOCK_KEY,
    ).fetchone()
    if row is None:
        return "another openslob process"
    pid, app, since = row
    what = app.removeprefix(f"{LOCK_APP} ") if app and app.startswith(LOCK_APP) else app
    return f"openslob {what or 'process'} (pid {pid}, since {since})"


def lock_holder(conninfo: str) -> str | None:
    """Who holds the data set now (for `slob server stop`), None when nobody does."""
    with contextlib.suppress(psycopg.Error, SetupError), _connect(conninfo, LOCK_APP) as conn:
        (free,) = one(conn.execute("SELECT pg_try_advisory_lock(%s, %s)", LOCK_KEY).fetchone())
        return None if free else holder_text(conn)
    return None


def leftover_loops(conninfo: str) -> list[tuple[int, str]]:
    """(pid, application) of openslob run backends in the database (call with the lock held:
    they then belong to no live run)."""
    with _connect(conninfo, LOCK_APP) as conn:
        return conn.execute(
            "SELECT pid, application_name FROM pg_stat_activity"
            " WHERE application_name LIKE %s AND pid <> pg_backend_pid() ORDER BY pid",
            [f"{RUN_APP} %"],
        ).fetchall()


def end_loops(conninfo: str, pids: list[int]) -> None:
    with _connect(conninfo, LOCK_APP) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
