"""What the engine-independent run lifecycle needs from PostgreSQL.

Work sessions are async connections (hundreds start in parallel from one thread). Monitor
connections are synchronous, each used by one sampler thread, and each stays inside one open
read-only transaction for the whole run: their queries then add no commits to the window's
pg_stat_database counts (pg_stat_clear_snapshot() keeps each read fresh).

No monitor may hold back the xmin horizon: a snapshot held across the window stops HOT
pruning, every update then moves its row to a new page, and the data set the run measures
grows (one row per page is lost). An open transaction without an xid holds no horizon by
itself, but a statement sent with parameters over the extended protocol leaves its unnamed
portal, and the portal's snapshot, open until the next statement: the monitors therefore
speak the simple query protocol (ClientCursor, parameters bound client-side), which drops
the portal when the statement ends. The wait sampler, whose one statement lasts the whole
window, runs connected to another database of the cluster (ash._ASH_DO).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq
from psycopg.conninfo import make_conninfo

from openslob.engines.api import KeptIntervals, WaitSamples
from openslob.engines.common.aio import Readable, until_ready
from openslob.engines.common.kept import BySnapshot
from openslob.engines.common.leftovers import still_there
from openslob.engines.common.rows import one
from openslob.engines.postgres import horizon, stats
from openslob.engines.postgres.ash import ASH_NOTICE, ash_block
from openslob.engines.postgres.workload import (
    CLIENT_CHECK,
    CLIENT_CHECK_VERSION,
    PENDING_SETTING,
    PREFETCH_IO_CONCURRENCY,
    call_statement,
    session_settings,
)
from openslob.model.loop import Answer, parse_answer

CONNECT_TIMEOUT_S = 30
# Where the wait sampler connects: any database of the cluster but the SLOB one.
OTHER_DATABASES = ("postgres", "template1")
# pg_read_file's length for /proc files (their size reads as 0): sysctl files refuse a read
# buffer far larger than this (ENOMEM), and 1 MiB holds any diskstats or mountinfo here.
PROC_READ_BYTES = 1 << 20
FORCE_FLUSH_VERSION = 150000  # pg_stat_force_next_flush()


@dataclass
class WorkSession:
    id: int
    schema: str
    conn: psycopg.AsyncConnection
    pid: int
    in_flight: int = 0  # CALLs sent, their results not yet read (libpq pipeline mode)
    # the CALL's text, and the last conf sent with its JSON: a later CALL of a phase gets
    # the same conf dict again (runner/phase.py), encoded once (client CPU per CALL)
    call_query: bytes | None = None
    last_conf: tuple[dict[str, Any], bytes] | None = None
    # its socket stays registered with the event loop while CALLs are in flight
    readable: Readable = field(default_factory=Readable)


class Monitor:
    """One sampler's connection: snapshots (whole, or per interval), wait samples.

    `in_transaction`: one read-only transaction for the whole run (no commits of ours in the
    window); the wait sampler's connection is autocommit instead, because its procedure
    commits after each sample."""

    same_database = True  # the waits monitor may be elsewhere (PostgresRunBackend.monitor)

    def __init__(
        self, conninfo: str, application_name: str, *, in_transaction: bool = True
    ) -> None:
        self.conn = psycopg.connect(
            conninfo,
            autocommit=not in_transaction,
            application_name=application_name,
            connect_timeout=CONNECT_TIMEOUT_S,
            cursor_factory=psycopg.ClientCursor,  # simple protocol: no portal left open
        )
        if in_transaction:
            self.conn.read_only = True
        self.with_statements = stats.has_statements(self.conn)
        self._task = self.conn.info.backend_pid  # from the connection's start: no query
        # the horizon's holder is read with each interval snapshot when it can be read at
        # all (a failure inside that statement would end the monitor's transaction), and
        # kept by the snapshot it came with until the sampler's row asks (rows come up to
        # RESULTS_PER_S's k intervals after their snapshots: several may wait)
        self._horizon_in_snapshot = in_transaction and bool(self._read_horizon())
        self._horizons = BySnapshot()

    def server_task(self) -> int | None:
        """The backend process serving this connection."""
        return self._task

    def snapshot(self) -> stats.Snapshot:
        return stats.take_snapshot(self.conn, with_statements=self.with_statements)

    def interval_snapshot(self) -> stats.Snapshot:
        """pg_stat_database, pg_stat_io, pg_stat_wal, the checkpointer and the WAL position:
        shared-memory views, no table of this database read. Also who holds the horizon,
        kept for horizon(snapshot)."""
        snap = stats.take_snapshot(
            self.conn,
            with_statements=False,
            with_tables=False,
            with_horizon=self._horizon_in_snapshot,
        )
        sample = snap.pop("horizon", None)
        if sample is not None:
            self._horizons.put(snap, sample)
        return snap

    def horizon(self, snapshot: stats.Snapshot | None = None) -> dict[str, Any]:
        """Who holds the oldest xmin of the database now (horizon.oldest_holder), with the
        time series' figure; only the figure (null) when it cannot be read. With the
        interval snapshot of the row: the holder that snapshot's statement read (the same
        moment as the row's counters), else read now."""
        sample = self._horizons.pop(snapshot)
        if sample is None:
            sample = {**self._read_horizon(), "read_epoch": time.time()}
        return {**sample, "figures": {"horizon_age_xids": sample.get("age_xids")}}

    def _read_horizon(self) -> dict[str, Any]:
        """The holder read on its own, in a savepoint, so a failure leaves the monitor's
        transaction usable ({} then)."""
        if self.conn.info.server_version < horizon.OLDEST_VERSION:
            return {}
        try:
            with self.conn.transaction():
                return horizon.oldest_holder(self.conn)
        except psycopg.Error:
            return {}

    def read_file(self, path: str) -> str | None:
        """A file of the server's host (pg_read_file; None when missing). Check with
        host_files_reason first: a permission error would abort this monitor's transaction."""
        row = self.conn.execute(
            "SELECT pg_read_file(%s, 0, %s, true)", [path, PROC_READ_BYTES]
        ).fetchone()
        return None if row is None else row[0]

    def clock_epoch(self) -> float:
        """clock_timestamp(), the loop's clock (now() is the transaction's start)."""
        row = one(
            self.conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        )
        return float(row[0])

    def sample_waits(
        self, application_name: str, start_epoch: float, end_epoch: float | None, hz: float
    ) -> WaitSamples:
        """The in-database sampler's result; returns when the window ends (see
        ash._ASH_DO). Cancel the connection to stop it sooner. Its commits count in
        the window only when it ran in the SLOB database itself (`same_database`)."""
        notices: list[str] = []
        self.conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        if self.conn.info.server_version >= CLIENT_CHECK_VERSION:
            self.conn.execute(CLIENT_CHECK)  # it ends itself when this client dies
        block = ash_block(
            application_name, start_epoch, end_epoch, hz, self.conn.info.server_version
        )
        self.conn.execute(block)
        found = [n.removeprefix(ASH_NOTICE) for n in notices if n.startswith(ASH_NOTICE)]
        if not found:
            raise RuntimeError("the wait sampler returned no result")
        result = json.loads(found[-1])
        return WaitSamples(
            int(result["samples"]),
            {e: int(n) for e, n in result["waits"].items()},
            # its COMMITs, and the DO statement's own last transaction
            int(result["commits"]) + 1 if self.same_database else 0,
        )

    def cancel(self) -> None:
        with contextlib.suppress(psycopg.Error, OSError):
            self.conn.cancel_safe(timeout=3)

    def close(self) -> None:
        try:
            self.conn.rollback()
        finally:
            self.conn.close()


class PostgresRunBackend:
    def __init__(self, conninfo: str, application_name: str, *, prefetch: bool = False) -> None:
        self.conninfo = conninfo
        self.application_name = application_name
        self.prefetch = prefetch

    async def open_session(self, session_id: int, schema: str) -> WorkSession:
        conn = await psycopg.AsyncConnection.connect(
            self.conninfo,
            autocommit=True,
            application_name=self.application_name,
            connect_timeout=CONNECT_TIMEOUT_S,
        )
        await conn.execute(session_settings(conn.info.server_version, self.prefetch))
        return WorkSession(session_id, schema, conn, conn.info.backend_pid)

    async def call(self, session: WorkSession, conf: dict[str, Any]) -> Answer:
        """One CALL and its result (send, then receive)."""
        await self.send(session, conf)
        return await self.receive(session)

    async def send(self, session: WorkSession, conf: dict[str, Any]) -> None:
        """Queue the session's next CALL behind the one running (libpq pipeline mode: each
        CALL with its own Sync, so each is its own transaction and a cancelled one leaves
        the next alone). The server starts it the moment the running one ends."""
        conn, pgconn = session.conn, session.conn.pgconn
        if pgconn.pipeline_status == pq.PipelineStatus.OFF:
            pgconn.enter_pipeline_mode()
        if session.call_query is None:
            session.call_query = call_statement(session.schema, placeholder="$1").as_bytes(conn)
        if session.last_conf is None or session.last_conf[0] is not conf:
            session.last_conf = (conf, json.dumps(conf).encode())
        pgconn.send_query_params(session.call_query, [session.last_conf[1]])
        pgconn.pipeline_sync()
        session.in_flight += 1
        loop = asyncio.get_running_loop()
        while pgconn.flush():  # nonblocking: the rest of the message once writable
            await until_ready(loop.add_writer, loop.remove_writer, pgconn.socket)

    async def receive(self, session: WorkSession) -> Answer:
        """The result of the session's oldest CALL in flight, awaited on its socket alone.

        psycopg's async wait wakes every 0.1 s while a statement runs (to notice signals):
        10 wake-ups a second per session for a whole run, a client CPU cost that grows with
        the session count. So this goes through libpq (psycopg.pq) and sleeps until the
        server answers; cancels and a dead server still end it. The last result read
        leaves pipeline mode, so that other statements may use the connection.
        """
        conn, pgconn = session.conn, session.conn.pgconn
        if session.in_flight <= 0:
            raise RuntimeError("no CALL in flight on this session")
        results: list[pq.abc.PGresult] = []
        ended = False  # the CALL's results are all in: its Sync's comes next
        try:
            while True:
                pgconn.consume_input()  # raises OperationalError when the server is gone
                if pgconn.is_busy():
                    await session.readable.wait(pgconn.socket)
                    continue
                result = pgconn.get_result()
                if result is None:
                    if ended:  # libpq has nothing more queued: not a CALL of ours
                        raise RuntimeError("the pipeline holds no Sync after the CALL")
                    ended = True
                    continue
                ended = False
                if result.status == pq.ExecStatus.PIPELINE_SYNC:
                    break
                results.append(result)
        finally:
            session.in_flight -= 1
            if session.in_flight == 0:  # psycopg may use the connection now: its own waits
                session.readable.release()
                with contextlib.suppress(psycopg.Error):
                    pgconn.exit_pipeline_mode()
        for result in results:
            if result.status == pq.ExecStatus.FATAL_ERROR:
                raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
        rows = [r for r in results if r.status == pq.ExecStatus.TUPLES_OK and r.ntuples]
        value = rows[0].get_value(0, 0) if rows else None
        return parse_answer(value)

    async def pending(self, session: WorkSession) -> KeptIntervals:
        """The intervals the cancelled CALL had kept for its answer (batch > 1): its loop
        commits them into a setting of the session at each boundary, so the cancel, which
        rolls back only the loop's open transaction, leaves them; read and cleared here,
        in one transaction of ours."""
        try:
            cursor = await session.conn.execute(_PENDING_QUERY)
            row = await cursor.fetchone()
        except (psycopg.Error, OSError):
            return KeptIntervals([], 0, fetched=False)
        return KeptIntervals(list(row[0]) if row and row[0] else [], 1)

    async def publish_stats(self, session: WorkSession) -> bool:
        """Make the session publish its statistics now; True when it ran one transaction.

        A backend adds a statement's active time to pg_stat_database only when it goes idle,
        after it has flushed its counters, so without this the window's DB time would show
        up one phase late (a warm-up's worth). pg_stat_force_next_flush() (15+) makes the next
        flush, at the end of this tiny statement, publish everything and wait for locks
        rather than skip contended entries; the one-page catalog scan gives that flush
        something pending, without which it returns before publishing the active time.
        Its own commit (and one logical read) is known: the commit is subtracted.
        """
        if session.conn.info.server_version < FORCE_FLUSH_VERSION:
            return False
        try:
            await session.conn.execute(
                "SELECT pg_stat_force_next_flush() FROM pg_catalog.pg_am LIMIT 1"
            )
        except (psycopg.Error, OSError):
            return False
        return True

    async def cancel(self, session: WorkSession) -> None:
        with contextlib.suppress(psycopg.Error, OSError):
            await session.conn.cancel_safe(timeout=3)

    @staticmethod
    def cancel_now(session: WorkSession) -> None:
        """Synchronous cancel request, for the second Ctrl-C that exits at once."""
        with contextlib.suppress(psycopg.Error, OSError, AttributeError):
            session.conn.pgconn.get_cancel().cancel()

    async def close(self, session: WorkSession) -> None:
        session.readable.release()
        with contextlib.suppress(psycopg.Error, OSError):
            await session.conn.close()

    def shutdown(self) -> None:
        """Nothing to release: sessions are async connections on the run's event loop."""

    def connection_lost(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.OperationalError)

    def monitor(self, role: str) -> Monitor:
        """A monitor connection; the "waits" one in another database of the cluster when one
        can be reached (its statement lasts the whole window and would hold back this
        database's horizon), else here, autocommit (its procedure commits)."""
        name = f"{self.application_name} {role}"
        if role != "waits":
            return Monitor(self.conninfo, name)
        here = self._database()
        for other in OTHER_DATABASES:
            if other == here:
                continue
            try:
                monitor = Monitor(
                    make_conninfo(self.conninfo, dbname=other), name, in_transaction=False
                )
            except psycopg.Error:
                continue
            monitor.same_database = False
            return monitor
        return Monitor(self.conninfo, name, in_transaction=False)

    def _database(self) -> str:
        with psycopg.connect(self.conninfo, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            return str(one(conn.execute("SELECT current_database()").fetchone())[0])

    def host_files_reason(self) -> str | None:
        """None when this role can read the server host's /proc through pg_read_file (superuser
        or pg_read_server_files); else why not, for the results' notes."""
        try:
            with psycopg.connect(
                self.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            ) as conn:
                (text,) = one(
                    conn.execute(
                        "SELECT pg_read_file('/proc/diskstats', 0, %s, true)", [PROC_READ_BYTES]
                    ).fetchone()
                )
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return (
                f"cannot read the server host's /proc through the database: {exc.sqlstate} {first}"
            )
        return None if text else "the server's host has no /proc/diskstats"

    def terminate_leftovers(self) -> int:
        """Backends of this run still alive after it ended (must be none), looked at again
        for a moment (common/leftovers.py); kill them."""
        try:
            with psycopg.connect(
                self.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            ) as conn:

                def look() -> list[int]:  # autocommit: each look reads the activity anew
                    return [
                        r[0]
                        for r in conn.execute(
                            "SELECT pid FROM pg_stat_activity"
                            " WHERE application_name = %s AND pid <> pg_backend_pid()",
                            [self.application_name],
                        ).fetchall()
                    ]

                pids = still_there(look)
                for pid in pids:
                    conn.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
        except psycopg.Error:
            return 0
        return len(pids)

    def settings(self) -> dict[str, str]:
        """Settings the run's figures depend on (timing on/off, cache size, data dir)."""
        with psycopg.connect(self.conninfo, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            rows = conn.execute(
                "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
                [list(_RUN_SETTINGS)],
            ).fetchall()
            (shared_buffers,) = one(
                conn.execute(
                    "SELECT setting::bigint * current_setting('block_size')::bigint"
                    " FROM pg_settings WHERE name = 'shared_buffers'"
                ).fetchone()
            )
        extra = {"prefetch": "on" if self.prefetch else "off"}
        if self.prefetch:  # what the work sessions set, not the server's default
            extra["effective_io_concurrency"] = str(PREFETCH_IO_CONCURRENCY)
        return {**dict(rows), "shared_buffers_bytes": str(shared_buffers), **extra}


# The kept intervals in order (PENDING_SETTING counts them, each in a setting of its own),
# and the count set back to 0: one statement, one transaction.
_PENDING_QUERY = (
    f"SELECT (SELECT jsonb_agg(current_setting('{PENDING_SETTING}_' || i)::jsonb ORDER BY i)"
    f" FROM generate_series(1, coalesce(nullif(current_setting('{PENDING_SETTING}', true),"
    f" '')::int, 0)) i), set_config('{PENDING_SETTING}', '0', false)"
)

_RUN_SETTINGS = (
    "track_io_timing",
    "track_wal_io_timing",
    "shared_buffers",
    "max_connections",
    "data_directory",
    "block_size",
    "debug_io_direct",
    # What PREFETCH can do on this server (PG 18: io_method, io_workers, io_combine_limit)
    "io_method",
    "io_workers",
    "io_combine_limit",
    "effective_io_concurrency",
)
