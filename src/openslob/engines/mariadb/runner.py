"""What the engine-independent run lifecycle needs from MariaDB (PostgresRunBackend's twin).

PyMySQL is synchronous, so each blocking call of a work session (connecting, sending its
CALL) runs in a worker thread from a pool sized for the run's sessions, so that none waits
behind another for a thread. The CALL's answers (one result per interval, or a batch of
them) are read in the event loop as they arrive (wire.py): no thread is woken per result.
Cancelling is KILL QUERY <thread id> from a separate connection: the CALL ends with error
1317 (query interrupted) and the session stays usable.
Work sessions carry the program name (connection attribute) `application_name`, and
terminate_leftovers kills any of them still connected after the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysql.constants import COMMAND

from openslob.engines.api import KeptIntervals, WaitSamples
from openslob.engines.common.kept import BySnapshot
from openslob.engines.common.leftovers import still_there
from openslob.engines.common.rows import one
from openslob.engines.mariadb import horizon, stats
from openslob.engines.mariadb.connection import SHAPING_SETTINGS, connect, global_variables
from openslob.engines.mariadb.wire import AnswerReader
from openslob.engines.mariadb.workload import PENDING_VARIABLE, SESSION_SETTINGS, call_statement
from openslob.model.errors import SetupError
from openslob.model.loop import Answer, call_goes_on, interval_results, parse_answer

QUERY_INTERRUPTED = 1317  # ER_QUERY_INTERRUPTED: the answer to KILL QUERY


@dataclass
class WorkSession:
    id: int
    schema: str
    conn: pymysql.connections.Connection
    pid: int  # the server's thread (connection) id
    reader: AnswerReader  # its answers, read in the event loop (wire.py)
    in_flight: int = 0  # CALLs sent, their answers not yet read


def _os_thread(conn: pymysql.connections.Connection) -> int | None:
    """This connection's server thread as the OS knows it; None when performance_schema is
    off or not readable, or a thread pool runs connections on any of its threads (its CPU
    is then not counted, and run.json says how many were)."""
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT IF(@@thread_handling = 'one-thread-per-connection', THREAD_OS_ID, NULL)"
                " FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()"
            )
            row = cur.fetchone()
    except pymysql.err.MySQLError:
        return None
    return int(row[0]) if row and row[0] is not None else None


class Monitor:
    """One sampler's connection: snapshots. InnoDB counters move while statements run, so
    no transaction tricks are needed (unlike PostgreSQL's end-of-statement publishing)."""

    def __init__(self, connect_kwargs: dict[str, Any], application_name: str) -> None:
        self.connect_kwargs = connect_kwargs
        self.conn = connect(connect_kwargs, program_name=application_name)
        self._task = _os_thread(self.conn)
        # the horizon's holder, read right after each interval snapshot (its history length
        # is the snapshot's) and kept by it until the sampler's row asks; who the holders'
        # connections are, looked up once each
        self._horizons = BySnapshot()
        self._who: dict[int, horizon.Who] = {}
        self._holder_readable = True

    def server_task(self) -> int | None:
        """The server thread serving this connection (performance_schema's THREAD_OS_ID)."""
        return self._task

    def snapshot(self) -> stats.Snapshot:
        return stats.take_snapshot(self.conn)

    def interval_snapshot(self) -> stats.Snapshot:
        """The global status its rows read and the file I/O summaries (no table of the data
        set read); then who holds purge back (INNODB_TRX), kept for horizon(snapshot)."""
        snap = stats.take_snapshot(self.conn, interval=True)
        history = snap["status"].get("Innodb_history_list_length")
        if history is None:  # not in this snapshot: read when the row asks
            return snap
        sample = {"history_length": int(history)}  # no holder readable: the length still is
        if self._holder_readable:
            try:
                sample = horizon.oldest_holder(self.conn, self._who, history)
            except pymysql.err.MySQLError:  # e.g. no PROCESS for INNODB_TRX: not tried again
                self._holder_readable = False
        self._horizons.put(snap, sample)
        return snap

    def horizon(self, snapshot: stats.Snapshot | None = None) -> dict[str, Any]:
        """The history list length and the oldest open transaction (horizon.oldest_holder),
        with the time series' figure; only the figure (null) when it cannot be read. With
        the interval snapshot of the row: what was read with it, else read now."""
        sample = self._horizons.pop(snapshot)
        if sample is None:
            try:
                sample = horizon.oldest_holder(self.conn, self._who)
            except pymysql.err.MySQLError:
                sample = {}
            sample["read_epoch"] = time.time()
        return {**sample, "figures": {"history_length": sample.get("history_length")}}

    def read_file(self, path: str) -> str | None:
        """The server host's files are not readable through MariaDB: always None."""
        return None

    def clock_epoch(self) -> float:
        """SYSDATE(6), the loop's clock (NOW() is the statement's start)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT UNIX_TIMESTAMP(SYSDATE(6))")
            return float(one(cur.fetchone())[0])

    def sample_waits(
        self, application_name: str, start_epoch: float, end_epoch: float | None, hz: float
    ) -> WaitSamples:
        """Never called: MariaDB's Capabilities say no wait sampling (no wait events per
        session that a sampler could read without a snapshot of its own)."""
        raise SetupError("MariaDB has no wait sampling (Capabilities.wait_sampling is off)")

    def cancel(self) -> None:
        with (
            contextlib.suppress(pymysql.err.MySQLError, OSError, SetupError),
            connect(self.connect_kwargs, connect_timeout=3) as admin,
            admin.cursor() as cur,
        ):
            cur.execute(f"KILL QUERY {int(self.conn.thread_id())}")

    def close(self) -> None:
        with contextlib.suppress(pymysql.err.MySQLError, OSError):
            self.conn.close()


class MariaDBRunBackend:
    def __init__(
        self,
        connect_kwargs: dict[str, Any],
        application_name: str,
        max_sessions: int = 1024,
        *,
        prefetch: bool = False,
    ) -> None:
        self.connect_kwargs = connect_kwargs
        self.application_name = application_name
        self.prefetch = prefetch
        # The read-ahead variables as they were before the run (PREFETCH=on), to put back
        self._saved_read_ahead: dict[str, str] | None = None
        # One thread per blocking call in flight (a session's connect or CALL sent, a TLS
        # session's read: wire.py), plus slack.
        self._threads = ThreadPoolExecutor(
            max_workers=max_sessions + 8, thread_name_prefix="slob-mariadb"
        )

    async def _run(self, func: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._threads, func, *args)

    def _open(self, session_id: int, schema: str) -> WorkSession:
        conn = connect(self.connect_kwargs, program_name=self.application_name)
        with conn.cursor() as cur:
            for statement in SESSION_SETTINGS:
                cur.execute(statement)
        raw: Any = conn  # PyMySQL's socket is not in its type stubs
        reader = AnswerReader(raw._sock, self._threads)
        return WorkSession(session_id, schema, conn, conn.thread_id(), reader)

    async def open_session(self, session_id: int, schema: str) -> WorkSession:
        return await self._run(self._open, session_id, schema)

    @staticmethod
    def _send(session: WorkSession, conf: dict[str, Any]) -> None:
        """COM_QUERY of the CALL, written behind the one running: the server reads it when
        that one has ended (the protocol answers commands in order). PyMySQL reads an
        answer right after each command, so this uses its packet layer to write only; the
        answers are read by the session's AnswerReader (wire.py)."""
        conn: Any = session.conn  # its packet layer is not in PyMySQL's type stubs
        query = call_statement(session.schema) % conn.escape(json.dumps(conf))
        conn._execute_command(COMMAND.COM_QUERY, query)

    @staticmethod
    def _rollback(session: WorkSession) -> None:
        """After a kill: one can land between the loop's UPDATE and its COMMIT, and the
        transaction then stays open with its row locks (other sessions' UPDATEs wait on
        them, their own kills not yet arrived) until this session's next statement. Only
        when no other CALL of the session is queued behind (its answer would come first)."""
        with contextlib.suppress(pymysql.err.MySQLError, OSError):
            session.conn.query("ROLLBACK")

    async def call(self, session: WorkSession, conf: dict[str, Any]) -> Answer:
        """One CALL and its answer (send, then receive)."""
        await self.send(session, conf)
        return await self.receive(session)

    async def send(self, session: WorkSession, conf: dict[str, Any]) -> None:
        """Queue the session's next CALL behind the one running (the server starts it the
        moment the running one ends)."""
        await self._run(self._send, session, conf)
        session.in_flight += 1

    async def receive(self, session: WorkSession) -> Answer:
        """The JSON result of the session's oldest CALL in flight, keys as PostgreSQL's
        loop (a streaming CALL's: its next interval's; the CALL stays in flight until its
        last). With conf `batch` > 1 a streaming CALL's answer is a list of its intervals'
        results since its last answer, in order (its last one's `call_ended` says whether
        the CALL goes on: model.loop.call_goes_on). A cancelled CALL raises
        pymysql.err.OperationalError 1317."""
        if session.in_flight <= 0:
            raise RuntimeError("no CALL in flight on this session")
        ended = True  # the CALL's answer is whole (or it failed)
        try:
            value, more = await session.reader.result()  # the CALL's SELECT (the interval's)
            result = parse_answer(value)
            if call_goes_on(result):
                ended = False  # a streamed interval: more follow in this answer
                return result
            while more:  # the CALL's own status result
                _, more = await session.reader.result()
            return result
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] == QUERY_INTERRUPTED and session.in_flight == 1:
                session.reader.release()  # PyMySQL reads the ROLLBACK's answer itself
                await self._run(self._rollback, session)
            raise
        finally:
            if ended:
                session.in_flight -= 1
                if session.in_flight == 0:  # PyMySQL may use the connection now
                    session.reader.release()

    @staticmethod
    def _take_pending(session: WorkSession) -> list[dict[str, Any]]:
        with session.conn.cursor() as cur:
            cur.execute(f"SELECT {PENDING_VARIABLE}")
            kept = one(cur.fetchone())[0]
            cur.execute(f"SET {PENDING_VARIABLE} = NULL")
        if isinstance(kept, bytes | bytearray):
            kept = kept.decode("utf-8")
        return interval_results(parse_answer(kept))

    async def pending(self, session: WorkSession) -> KeptIntervals:
        """After a stop: the interval results a streaming CALL cancelled by KILL QUERY had
        completed but not yet answered (conf `batch` > 1), in order. The loop keeps them in
        the session's user variable PENDING_VARIABLE, which the kill leaves; read and
        cleared on the session's own connection, so that the stop loses only the interval
        it cut (a second call: none). Nothing when nothing was kept; not fetched when a CALL
        is still in flight (its answer holds the connection) or the connection is gone.
        No transaction: no own commit (a SELECT and a SET of a user variable)."""
        if session.in_flight > 0:
            return KeptIntervals([], 0, fetched=False)
        try:
            kept: list[dict[str, Any]] = await self._run(self._take_pending, session)
        except (pymysql.err.MySQLError, OSError, ValueError):
            return KeptIntervals([], 0, fetched=False)
        return KeptIntervals(kept, 0)

    async def publish_stats(self, session: WorkSession) -> bool:
        """InnoDB publishes its counters as it goes: nothing to flush, no own commit."""
        return False

    def _kill_query(self, thread_id: int) -> None:
        with connect(self.connect_kwargs, connect_timeout=3) as admin, admin.cursor() as cur:
            cur.execute(f"KILL QUERY {int(thread_id)}")

    async def cancel(self, session: WorkSession) -> None:
        with contextlib.suppress(pymysql.err.MySQLError, OSError, SetupError):
            await asyncio.to_thread(self._kill_query, session.pid)

    def cancel_now(self, session: WorkSession) -> None:
        """Synchronous cancel, for the second Ctrl-C that exits at once."""
        with contextlib.suppress(pymysql.err.MySQLError, OSError, SetupError):
            self._kill_query(session.pid)

    async def close(self, session: WorkSession) -> None:
        session.reader.release()
        with contextlib.suppress(pymysql.err.MySQLError, OSError):
            await asyncio.to_thread(session.conn.close)

    def monitor(self, role: str) -> Monitor:
        return Monitor(self.connect_kwargs, f"{self.application_name} {role}")

    def host_files_reason(self) -> str | None:
        return "MariaDB cannot read the server host's /proc: host counters need a local server"

    def terminate_leftovers(self) -> int:
        """Work sessions of this run still connected after it ended (must be none), looked
        at again for a moment (common/leftovers.py): kill."""
        try:
            with connect(self.connect_kwargs) as conn, conn.cursor() as cur:

                def look() -> list[int]:
                    cur.execute(
                        "SELECT DISTINCT PROCESSLIST_ID"
                        " FROM performance_schema.session_connect_attrs"
                        " WHERE ATTR_NAME = 'program_name' AND ATTR_VALUE = %s"
                        " AND PROCESSLIST_ID <> CONNECTION_ID()",
                        [self.application_name],
                    )
                    return [r[0] for r in cur.fetchall()]

                ids = still_there(look)
                for thread_id in ids:
                    with contextlib.suppress(pymysql.err.MySQLError):
                        cur.execute(f"KILL {int(thread_id)}")
        except (pymysql.err.MySQLError, OSError, SetupError):
            return 0
        return len(ids)

    def settings(self) -> dict[str, str]:
        """Settings the run's figures depend on (timing on/off, cache size, data dir)."""
        with connect(self.connect_kwargs) as conn:
            return global_variables(conn, RUN_SETTINGS)

    def connection_lost(self, exc: BaseException) -> bool:
        return isinstance(exc, pymysql.err.OperationalError | pymysql.err.InterfaceError)

    def shutdown(self) -> None:
        """Release the worker threads (after every session is closed); put the read-ahead
        variables back."""
        self._threads.shutdown(wait=False, cancel_futures=True)
        self.restore_read_ahead()

    def enable_read_ahead(self) -> None:
        """PREFETCH=on: InnoDB's linear and random read-ahead for this run.

        They are global (dynamic) variables, not session ones: set for the run and restored
        by shutdown(), so the server's own configuration (the private server's, which turns
        them off for SLOB's single-page reads) stays as it was. A run killed before it
        restores leaves them on until set back by hand or a server restart (README)."""
        with connect(self.connect_kwargs) as conn, conn.cursor() as cur:
            self._saved_read_ahead = global_variables(conn, READ_AHEAD_SETTINGS)
            for name, value in PREFETCH_READ_AHEAD.items():
                cur.execute(f"SET GLOBAL {name} = {value}")

    def restore_read_ahead(self) -> None:
        saved, self._saved_read_ahead = self._saved_read_ahead, None
        if not saved:
            return
        with (
            contextlib.suppress(pymysql.err.MySQLError, OSError, SetupError),
            connect(self.connect_kwargs) as conn,
            conn.cursor() as cur,
        ):
            for name, value in saved.items():
                cur.execute(f"SET GLOBAL {name} = %s", [int(value) if value.isdigit() else value])


RUN_SETTINGS = (*SHAPING_SETTINGS, "datadir", "pid_file", "version")
READ_AHEAD_SETTINGS = ("innodb_read_ahead_threshold", "innodb_random_read_ahead")
# PREFETCH=on: linear read-ahead at InnoDB's default threshold (56 sequential pages of an
# extent read) and random read-ahead (13 pages of an extent in the pool: read the rest).
PREFETCH_READ_AHEAD = {"innodb_read_ahead_threshold": "56", "innodb_random_read_ahead": "ON"}
