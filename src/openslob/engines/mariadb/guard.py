"""One openslob run (or setup, or destroy) per MariaDB server at a time, and no loop left behind.

The lock is a user-level lock (GET_LOCK; server-wide, as the SLOB databases are), held by a
connection of its own for as long as the run, sweep, setup or destroy lasts. MariaDB has no
check for a vanished client while a statement runs, so the work loop watches the lock: its
conf carries the lock's name and the holder's connection id, and once IS_USED_LOCK no longer
names that connection (the client died and its connection with it) the loop stops within a
second (workload._GUARD). A second run fails at once and names the holder.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pymysql

from openslob.engines.common.rows import one
from openslob.engines.mariadb.connection import connect, describe_target
from openslob.model.errors import BusyError, SetupError
from openslob.model.loop import LOOP_PARAMS

LOCK_NAME = "openslob-dataset"
LOCK_APP = "openslob-lock"
RUN_APP = "openslob-run"


class DatasetLock:
    """GET_LOCK(LOCK_NAME) on a connection of its own; `guard` is what the loops watch."""

    def __init__(self, connect_kwargs: dict[str, Any], purpose: str) -> None:
        self.connect_kwargs, self.purpose = connect_kwargs, purpose
        self.conn: pymysql.connections.Connection | None = None
        self.guard: dict[str, Any] = {}
        self.ensure()

    def ensure(self) -> None:
        """Hold the lock (again, after a restart of the private server); BusyError names
        whoever holds it instead."""
        if self.conn is not None:
            try:
                self.conn.ping(reconnect=False)
                return
            except pymysql.err.MySQLError:
                self.release()
        self.conn = connect(self.connect_kwargs, program_name=f"{LOCK_APP} {self.purpose}")
        with self.conn.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, 0)", [LOCK_NAME])
            (got,) = one(cur.fetchone())
        if got != 1:
            holder = holder_text(self.conn)
            self.release()
            raise BusyError(
                f"{holder} is using the SLOB data set on {describe_target(self.connect_kwargs)}:"
                " wait for it to end (one run, setup or destroy at a time)"
            )
        self.guard = {
            LOOP_PARAMS.guard_lock.key: LOCK_NAME,
            LOOP_PARAMS.guard_id.key: self.conn.thread_id(),
        }

    def release(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(pymysql.err.MySQLError, OSError):
                self.conn.close()
            self.conn = None


def holder_text(conn: pymysql.connections.Connection) -> str:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT p.ID, a.ATTR_VALUE, p.TIME FROM information_schema.PROCESSLIST p"
            " LEFT JOIN performance_schema.session_connect_attrs a"
            "  ON a.PROCESSLIST_ID = p.ID AND a.ATTR_NAME = 'program_name'"
            " WHERE p.ID = IS_USED_LOCK(%s)",
            [LOCK_NAME],
        )
        row = cur.fetchone()
    if row is None:
        return "another openslob process"
    thread, program, seconds = row
    what = (program or "").removeprefix(f"{LOCK_APP} ") or "process"
    return f"openslob {what} (connection {thread}, for {seconds} s)"


def lock_holder(connect_kwargs: dict[str, Any]) -> str | None:
    """Who holds the data set now (for `slob server stop`), None when nobody does."""
    with (
        contextlib.suppress(pymysql.err.MySQLError, SetupError),
        connect(connect_kwargs, program_name=LOCK_APP) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("SELECT IS_USED_LOCK(%s)", [LOCK_NAME])
        if one(cur.fetchone())[0] is not None:
            return holder_text(conn)
    return None


def leftover_loops(connect_kwargs: dict[str, Any]) -> list[tuple[int, str]]:
    """(connection id, program) of openslob run connections on the server."""
    with connect(connect_kwargs, program_name=LOCK_APP) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT DISTINCT PROCESSLIST_ID, ATTR_VALUE"
            " FROM performance_schema.session_connect_attrs"
            " WHERE ATTR_NAME = 'program_name' AND ATTR_VALUE LIKE %s"
            " AND PROCESSLIST_ID <> CONNECTION_ID() ORDER BY PROCESSLIST_ID",
            [f"{RUN_APP} %"],
        )
        return [(int(thread), str(program)) for thread, program in cur.fetchall()]


def end_loops(connect_kwargs: dict[str, Any], threads: list[int]) -> None:
    with connect(connect_kwargs, program_name=LOCK_APP) as conn, conn.cursor() as cur:
        for thread in threads:
            with contextlib.suppress(pymysql.err.MySQLError):
                cur.execute(f"KILL {int(thread)}")
