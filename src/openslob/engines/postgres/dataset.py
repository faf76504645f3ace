"""The SLOB data set on PostgreSQL: DDL, parallel load, bookkeeping, repair.

Shape (per schema userN):
  cf1(custid bigint, c2..c20 bytea)  SCALE rows, exactly one row per 8 KiB heap page
  cf2(same columns)                  SCAN_TABLE_SZ rows, unindexed, for full scans
A row is 448 bytes: c2 and c3 hold 192 random bytes each, c4..c20 are empty (layout.py says
why). One row per page comes from fillfactor=10 with a row wider than 10 % of a page: a page
that already holds a row never has the 90 % free space a second insert would need, yet ~17
HOT versions of the row fit beside it, so updates keep the layout.

What the storage sees: every byte of a page is random (sha512 output, 8 bits per byte, a
function of seed, key and column: reproducible and unique), zeros included. Each row is
inserted first as a page-wide version (c2 widened to fill the page: it cannot share a page,
so it always extends the table by one page), then updated in place to the real row (HOT)
and the wide version pruned by VACUUM. Pruning leaves freed bytes as they were, so the free
space holds the wide version's random bytes, not zeros. c2 and c3 are STORAGE PLAIN and
rows stay under the 2 KB TOAST threshold: PostgreSQL never compresses or moves them.
Keys are inserted in the order of hashint8extended(key, per-schema seed): each schema gets its
own shuffle, so a WORK_UNIT range of keys lands on ~WORK_UNIT random pages in every schema.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from openslob.engines.api import ProgressCallback, SetupResult, TableLoad
from openslob.engines.common import tables
from openslob.engines.common.load import drain
from openslob.engines.common.rows import one
from openslob.engines.postgres import layout
from openslob.engines.postgres.layout import (
    FILLFACTOR,
    PAD_COLUMNS,
    WIDE_BYTES,
    WIDE_COLUMNS,
)
from openslob.engines.postgres.rowbytes import first_version_expressions, random_bytes
from openslob.model.errors import SetupError
from openslob.model.plan import schema_order

BLOCK_SIZE = 8192
# Bump when the table layout changes: setup then rebuilds data made by older versions.
LAYOUT_VERSION = 2
META_SCHEMA = "openslob"
META_TABLE = "datasets"
LOADER_APP = "openslob-load"


@dataclass(frozen=True)
class TableSpec(tables.TableSpec):
    def key(self) -> dict[str, object]:
        return {
            "rows": self.rows,
            "seed": self.seed,
            "layout": LAYOUT_VERSION,
            "compress_ratio": self.ratio,
        }


# ------------------------------------------------------------------------------- SQL


def create_table_sql(spec: TableSpec) -> list[sql.Composed]:
    table = sql.Identifier(spec.schema, spec.table)
    columns = sql.SQL(", ").join(
        sql.SQL("{} bytea NOT NULL").format(sql.Identifier(c)) for c in PAD_COLUMNS
    )
    # c2 and c3 PLAIN: never compressed or moved out of line. The empty c4..c20 MAIN: a
    # 1-byte header each (PLAIN would give each a 4-byte one, 68 bytes repeated in every
    # dead row version).
    storage = sql.SQL(", ").join(
        sql.SQL("ALTER COLUMN {} SET STORAGE {}").format(
            sql.Identifier(c), sql.SQL("PLAIN" if c in WIDE_COLUMNS else "MAIN")
        )
        for c in PAD_COLUMNS
    )
    return [
        sql.SQL("DROP TABLE IF EXISTS {}").format(table),
        sql.SQL(
            "CREATE TABLE {} (custid bigint NOT NULL, {}) "
            "WITH (fillfactor = {}, autovacuum_enabled = false)"
        ).format(table, columns, sql.Literal(FILLFACTOR)),
        sql.SQL("ALTER TABLE {} {}").format(table, storage),
    ]


# Which of a table's `step` load streams a key belongs to: a hash of the key under its own
# salt of the schema's seed, not the key's stride (first, first+step, ...). When the streams
# of a table do not interleave evenly (a busy host serialises them), the pages fill stream by
# stream; with strides, odd keys then came first in every schema alike and the schemas' page
# orders correlated (r = 0.16-0.43 on a loaded host, against |r| < 0.112 for 2,000 rows).
# With a per-schema hash, which keys share a stream is independent between schemas.
STREAM_SALT = 0x5DEECE66D
STREAM_KEYS = (
    "SELECT k FROM generate_series(1, %(last)s::bigint) k"
    " WHERE abs(mod(hashint8extended(k, %(seed)s::bigint # {salt}), %(step)s)) = %(first)s - 1"
    " ORDER BY hashint8extended(k, %(seed)s::bigint) OFFSET 0"
).replace("{salt}", str(STREAM_SALT))


def stream_keys_sql() -> sql.SQL:
    """The keys of load stream `first` (1..step) of a table, in this schema's shuffled order.

    The shuffle sorts bare keys in a subquery (OFFSET 0 keeps it from being flattened) so the
    wide padding is computed after the sort and never spills to disk with it.
    """
    return sql.SQL(STREAM_KEYS)


def load_chunk_sql(spec: TableSpec) -> sql.Composed:
    """Insert the keys of one load stream in this schema's shuffled order, each row as its
    page-wide first version (one page each)."""
    return sql.SQL(
        "INSERT INTO {table} (custid, {cols}) "
        "SELECT k, {pads} FROM ({keys}) keys, (SELECT int8send(%(seed)s::bigint) AS salt) s"
    ).format(
        keys=stream_keys_sql(),
        table=sql.Identifier(spec.schema, spec.table),
        cols=sql.SQL(", ").join(map(sql.Identifier, PAD_COLUMNS)),
        pads=first_version_expressions(spec.ratio),
    )


STREAM_OF = (
    "abs(mod(hashint8extended(custid, %(seed)s::bigint # {salt}), %(step)s)) = %(first)s - 1"
).replace("{salt}", str(STREAM_SALT))


def shrink_chunk_sql(spec: TableSpec) -> sql.Composed:
    """Update the rows of one load stream in place (HOT: no index yet) to the real row."""
    sets = sql.SQL(", ").join(
        sql.SQL("{} = {}").format(
            sql.Identifier(c),
            random_bytes("custid", PAD_COLUMNS.index(c) + 2, WIDE_BYTES, ratio=spec.ratio),
        )
        for c in WIDE_COLUMNS
    )
    return sql.SQL(
        "UPDATE {table} SET {sets} FROM (SELECT int8send(%(seed)s::bigint) AS salt) s"
        " WHERE {stream}"
    ).format(table=sql.Identifier(spec.schema, spec.table), sets=sets, stream=sql.SQL(STREAM_OF))


META_DDL = sql.SQL(
    "CREATE SCHEMA IF NOT EXISTS {schema};"
    "CREATE TABLE IF NOT EXISTS {meta} ("
    "  schema_name text NOT NULL, table_name text NOT NULL,"
    "  rows bigint NOT NULL, seed bigint NOT NULL, layout int NOT NULL,"
    "  status text NOT NULL, started_at timestamptz, finished_at timestamptz,"
    "  load_seconds float8, PRIMARY KEY (schema_name, table_name));"
    # Added with COMPRESS_RATIO: bookkeeping of an older openslob reads as 1 (it wrote hex,
    # and its layout version makes setup reload it anyway). Only when missing: ALTER needs
    # the owner, and a role that may only read must get as far as the first write.
    "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = "
    "'openslob.datasets'::regclass AND attname = 'compress_ratio') THEN "
    "ALTER TABLE {meta} ADD COLUMN compress_ratio float8 NOT NULL DEFAULT 1; END IF; END $$"
).format(schema=sql.Identifier(META_SCHEMA), meta=sql.Identifier(META_SCHEMA, META_TABLE))


# ---------------------------------------------------------------------------- loading


class DatasetLoader:
    """Creates or repairs the SLOB tables with LOAD_PARALLEL_DEGREE concurrent streams."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self._active: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._started: dict[TableSpec, float] = {}

    @contextmanager
    def _connection(self, application_name: str) -> Iterator[psycopg.Connection]:
        conn = psycopg.connect(self.conninfo, autocommit=True, application_name=application_name)
        with self._lock:
            self._active.append(conn)
        try:
            yield conn
        finally:
            with self._lock:
                self._active.remove(conn)
            conn.close()

    def cancel(self) -> None:
        """Cancel every statement in flight (called from another thread on Ctrl-C)."""
        self._cancelled.set()
        with self._lock:
            for conn in list(self._active):
                try:
                    conn.cancel_safe(timeout=5)
                except (psycopg.Error, AttributeError):
                    conn.cancel()

    # -- decisions

    def _current(self, conn: psycopg.Connection) -> dict[tuple[str, str], dict[str, object]]:
        conn.execute(META_DDL)
        rows = conn.execute(
            sql.SQL(
                "SELECT schema_name, table_name, rows, seed, layout, status, compress_ratio FROM {}"
            ).format(sql.Identifier(META_SCHEMA, META_TABLE))
        ).fetchall()
        return {
            (r[0], r[1]): {
                "rows": r[2],
                "seed": r[3],
                "layout": r[4],
                "status": r[5],
                "compress_ratio": r[6],
            }
            for r in rows
        }

    def _why_invalid(
        self, spec: TableSpec, meta: dict, facts: dict[str, layout.TableFacts]
    ) -> str | None:
        """Why a table cannot be used as it is (None: valid), from the bookkeeping and then
        the catalog and statistics of the table itself (layout.problems): rows deleted or
        added by hand, a changed fillfactor, a bloated table, a missing index."""
        reason = tables.recorded_reason(meta, {**spec.key(), "status": "complete"})
        if reason is not None:
            return reason
        found = layout.problems(facts.get(f"{spec.schema}.{spec.table}"), spec)
        return "; ".join(found) or None

    @staticmethod
    def _count_where_unseen(
        conn: psycopg.Connection, specs: list[TableSpec], facts: dict[str, layout.TableFacts]
    ) -> None:
        """Tables whose statistics no longer cover their load (reset, crash): rows and key
        range counted from the table, not taken from statistics that forgot the deletes."""
        for spec in specs:
            found = facts.get(f"{spec.schema}.{spec.table}")
            if found is not None and not layout.statistics_cover_load(found, spec.rows):
                layout.count_rows(conn, found)

    def plan(self, specs: list[TableSpec]) -> tables.Plan[TableSpec]:
        """Split the wanted tables into those to load (with the reason) and the valid ones."""
        with self._connection(LOADER_APP) as conn:
            current = self._current(conn)
            facts = layout.table_facts(conn)
            self._count_where_unseen(conn, specs, facts)
            plan: tables.Plan[TableSpec] = tables.Plan()
            for spec in specs:
                meta = current.get((spec.schema, spec.table), {})
                plan.add(spec, self._why_invalid(spec, meta, facts))
        return plan

    # -- doing

    def load(
        self,
        specs: list[TableSpec],
        degree: int,
        progress: ProgressCallback | None = None,
    ) -> SetupResult:
        """Load what is missing or stale with exactly `degree` concurrent streams.

        Every table is split into `step` streams of keys (a hash of key and seed picks the
        stream: STREAM_KEYS); one pool runs all streams of all tables, and a table's index
        build and vacuum are queued behind its last stream, so the pool stays busy from the
        first row to the last.
        """
        started = time.monotonic()
        plan = self.plan(specs)
        result = SetupResult(tables=[self._describe_valid(spec) for spec in plan.valid])
        result.notes += tables.reload_notes(plan)
        if plan.todo:
            for spec in plan.todo:
                self._prepare_table(spec)
            loaded = self._run_pool(plan.todo, degree, progress)
            result.tables += [loaded[spec] for spec in plan.todo]
            self._checkpoint()
        result.seconds = time.monotonic() - started
        return result

    def _run_pool(
        self, todo: list[TableSpec], degree: int, progress: ProgressCallback | None
    ) -> dict[TableSpec, TableLoad]:
        total_rows = sum(spec.rows for spec in todo)
        strides = {spec: max(1, min(degree, spec.rows // 1000)) for spec in todo}
        remaining = dict(strides)
        loaded: dict[TableSpec, TableLoad] = {}
        with ThreadPoolExecutor(max_workers=degree, thread_name_prefix="slob-load") as pool:
            pending: dict[Future, tuple[str, TableSpec]] = {}
            for spec in todo:
                for first in range(1, strides[spec] + 1):
                    future = pool.submit(self._load_stride, spec, first, strides[spec])
                    pending[future] = ("stride", spec)

            def on_done(key: tuple[str, TableSpec], outcome: Any) -> None:
                kind, spec = key
                if kind == "finish":
                    loaded[spec] = outcome
                    return
                remaining[spec] -= 1
                if remaining[spec] == 0:
                    pending[pool.submit(self._finish_table, spec)] = ("finish", spec)

            def tick() -> None:
                if progress:
                    progress(self._rows_on_disk(todo, loaded), total_rows)

            drain(pending, on_done, tick, self.cancel)
        return loaded

    def _prepare_table(self, spec: TableSpec) -> None:
        """Mark the table 'loading' first: an interruption from here on is seen as such."""
        with self._connection(LOADER_APP) as conn:
            self._terminate_stale_loaders(conn, self._app(spec))
            self._mark(conn, spec, "loading")
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(spec.schema))
            )
            for statement in create_table_sql(spec):
                conn.execute(statement)

    def _checkpoint(self) -> None:
        """The loaded pages to their files now: what the storage (and the compression
        measurement before a run) sees is the data set as loaded, not zero-filled space."""
        with self._connection(LOADER_APP) as conn, suppress(psycopg.Error):
            conn.execute("CHECKPOINT")  # needs superuser or pg_checkpoint: else later

    @staticmethod
    def _app(spec: TableSpec) -> str:
        return f"{LOADER_APP} {spec.schema}.{spec.table}"

    def _rows_on_disk(self, todo: list[TableSpec], loaded: dict[TableSpec, TableLoad]) -> int:
        """Rows loaded so far = pages on disk (one row per page), capped per table."""
        done = sum(spec.rows for spec in loaded)
        busy = [spec for spec in todo if spec not in loaded]
        if not busy:
            return done
        try:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                for spec in busy:
                    pages = one(
                        conn.execute(
                            "SELECT coalesce(pg_relation_size(to_regclass(%s)), 0)"
                            " / current_setting('block_size')::int",
                            [f"{spec.schema}.{spec.table}"],
                        ).fetchone()
                    )[0]
                    done += min(int(pages), spec.rows)
        except psycopg.Error:
            pass  # progress is cosmetic; the load itself reports real errors
        return done

    def _load_stride(self, spec: TableSpec, first: int, step: int) -> None:
        if self._cancelled.is_set():
            raise SetupError("setup interrupted")
        with self._lock:
            self._started.setdefault(spec, time.monotonic())
        with self._connection(self._app(spec)) as conn:
            self._session_settings(conn)
            params = {"first": first, "last": spec.rows, "step": step, "seed": spec.seed}
            conn.execute(load_chunk_sql(spec), params)
            conn.execute(shrink_chunk_sql(spec), params)
            if conn.info.server_version >= 150000:
                # Publish the insert counts now: a backend flushes them when it goes idle,
                # lock permitting, else later. Arriving after the table's VACUUM has set
                # n_live_tup they would add to it, and the layout check would count the
                # rows twice.
                conn.execute("SELECT pg_stat_force_next_flush()")

    def _finish_table(self, spec: TableSpec) -> TableLoad:
        """Index, vacuum, and record the table complete."""
        if self._cancelled.is_set():
            raise SetupError("setup interrupted")
        with self._connection(self._app(spec)) as conn:
            self._session_settings(conn)
            table = sql.Identifier(spec.schema, spec.table)
            if spec.indexed:
                conn.execute(
                    sql.SQL("CREATE UNIQUE INDEX {} ON {} (custid)").format(
                        sql.Identifier(f"{spec.table}_custid"), table
                    )
                )
            # Sets hint bits and the visibility map now, so that the first read of each page
            # during a run does not dirty it (a read-only test must not write).
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
            seconds = time.monotonic() - self._started[spec]
            self._mark(conn, spec, "complete", seconds)
            pages = self._pages(conn, spec)
        return TableLoad(
            spec.schema, spec.table, spec.rows, pages, pages * BLOCK_SIZE, seconds, "loaded"
        )

    @staticmethod
    def _session_settings(conn: psycopg.Connection) -> None:
        conn.execute("SET work_mem = '256MB'")
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute("SET synchronous_commit = off")  # loads are redone if interrupted
        if conn.info.server_version >= 140000:
            # A loader whose client died (Ctrl-C, kill) must not run on for minutes.
            conn.execute("SET client_connection_check_interval = '1s'")

    @staticmethod
    def _terminate_stale_loaders(conn: psycopg.Connection, app: str) -> None:
        """Backends of an interrupted earlier setup may still be loading this table."""
        conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            [app],
        )

    def _mark(
        self, conn: psycopg.Connection, spec: TableSpec, status: str, seconds: float | None = None
    ) -> None:
        conn.execute(META_DDL)
        conn.execute(
            sql.SQL(
                "INSERT INTO {} AS d (schema_name, table_name, rows, seed, layout, status,"
                "  started_at, load_seconds, compress_ratio)"
                " VALUES (%s, %s, %s, %s, %s, %s, now(), %s, %s)"
                " ON CONFLICT (schema_name, table_name) DO UPDATE SET"
                "  rows = excluded.rows, seed = excluded.seed, layout = excluded.layout,"
                "  compress_ratio = excluded.compress_ratio,"
                "  status = excluded.status, load_seconds = excluded.load_seconds,"
                "  started_at = CASE WHEN excluded.status = 'loading'"
                "    THEN excluded.started_at ELSE d.started_at END,"
                "  finished_at = CASE WHEN excluded.status = 'complete' THEN now() END"
            ).format(sql.Identifier(META_SCHEMA, META_TABLE)),
            [
                spec.schema,
                spec.table,
                spec.rows,
                spec.seed,
                LAYOUT_VERSION,
                status,
                seconds,
                spec.ratio,
            ],
        )

    def _pages(self, conn: psycopg.Connection, spec: TableSpec) -> int:
        return int(
            one(
                conn.execute(
                    "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int",
                    [f"{spec.schema}.{spec.table}"],
                ).fetchone()
            )[0]
        )

    def _describe_valid(self, spec: TableSpec) -> TableLoad:
        with self._connection(LOADER_APP) as conn:
            pages = self._pages(conn, spec)
        return TableLoad(spec.schema, spec.table, spec.rows, pages, pages * BLOCK_SIZE, 0, "valid")

    # -- listing and dropping

    def recorded_tables(self) -> list[tables.RecordedTable]:
        """Every table the bookkeeping holds, as setup recorded it; [] without bookkeeping.
        Reads only: nothing is created (a command may still be refused before it changes
        anything). A role that may not read it knows no data set (its first write is then
        refused with the reason)."""
        try:
            return self._recorded_tables()
        except psycopg.errors.InsufficientPrivilege:
            return []

    def _recorded_tables(self) -> list[tables.RecordedTable]:
        with self._connection(LOADER_APP) as conn:
            meta = f"{META_SCHEMA}.{META_TABLE}"
            if one(conn.execute("SELECT to_regclass(%s)", [meta]).fetchone())[0] is None:
                return []
            has_ratio = one(
                conn.execute(
                    "SELECT count(*) FROM pg_attribute WHERE attrelid = %s::regclass"
                    " AND attname = 'compress_ratio' AND NOT attisdropped",
                    [meta],
                ).fetchone()
            )[0]
            ratio = sql.SQL("compress_ratio" if has_ratio else "1::float8")
            rows = conn.execute(
                sql.SQL("SELECT schema_name, table_name, rows, seed, {} FROM {}").format(
                    ratio, sql.Identifier(META_SCHEMA, META_TABLE)
                )
            ).fetchall()
        return [tables.RecordedTable(r[0], r[1], int(r[2]), int(r[3]), float(r[4])) for r in rows]

    def existing_schemas(self) -> list[str]:
        """Schemas that setup recorded, in natural order (user2 before user10)."""
        with self._connection(LOADER_APP) as conn:
            meta = f"{META_SCHEMA}.{META_TABLE}"
            if one(conn.execute("SELECT to_regclass(%s)", [meta]).fetchone())[0] is None:
                return []
            names = [
                r[0]
                for r in conn.execute(
                    sql.SQL("SELECT DISTINCT schema_name FROM {}").format(
                        sql.Identifier(META_SCHEMA, META_TABLE)
                    )
                )
            ]
        return sorted(names, key=schema_order)

    def drop_all(self) -> list[str]:
        schemas = self.existing_schemas()
        with self._connection(LOADER_APP) as conn:
            for name in schemas:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                )
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(META_SCHEMA))
            )
        return schemas
