"""The SLOB data set on MariaDB/InnoDB: DDL, parallel load, bookkeeping, repair.

Shape (per schema = database userN):
  cf1(pk, custid, c2..c20)  SCALE rows; clustered on pk, UNIQUE index on custid
  cf2(same columns)         SCAN_TABLE_SZ rows, no secondary index, for full scans
InnoDB stores rows in primary-key order, so the primary key is the shuffle: pk is a
permutation of 1..SCALE, the rank of md5(seed:custid). Rows are inserted in pk order, by one
statement per table, which fills each leaf page before the next (see layout.py: 2 rows per
page at 4k..32k). A SLOBop
on custid (k-WORK_UNIT, k] walks the small custid index and then fetches WORK_UNIT rows
scattered over ~WORK_UNIT random leaf pages: one single-block read each on a cache miss.
Padding is AES-128 of a counter string under a key from (seed, custid): reproducible,
different in every row and column, and incompressible for storage-level compression or dedupe.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import pymysql

from openslob.engines.api import ProgressCallback, SetupResult, TableLoad
from openslob.engines.common import tables
from openslob.engines.common.load import drain
from openslob.engines.common.rows import one
from openslob.engines.mariadb.connection import connect, ident, page_size
from openslob.engines.mariadb.datafiles import flush_tables
from openslob.engines.mariadb.layout import PAD_COLUMNS, RowLayout, layout_for
from openslob.model.errors import SetupError
from openslob.model.plan import schema_order

# Bump when the table layout changes: setup then rebuilds data made by older versions.
LAYOUT_VERSION = 1
META_DB = "openslob"
META_TABLE = "datasets"
LOAD_TAG = "openslob-load"  # leading SQL comment of every load statement (for KILL)


@dataclass(frozen=True)
class TableSpec(tables.TableSpec):
    @property
    def name(self) -> str:
        return ident(self.schema, self.table)


# ------------------------------------------------------------------------------- SQL

META_DDL = (
    f"CREATE DATABASE IF NOT EXISTS {ident(META_DB)}",
    f"CREATE TABLE IF NOT EXISTS {ident(META_DB, META_TABLE)} ("
    "  schema_name VARCHAR(64) NOT NULL, table_name VARCHAR(64) NOT NULL,"
    "  n_rows BIGINT NOT NULL, seed BIGINT NOT NULL, layout INT NOT NULL,"
    "  page_size INT NOT NULL, pad INT NOT NULL, status VARCHAR(16) NOT NULL,"
    "  started_at DATETIME(6), finished_at DATETIME(6), load_seconds DOUBLE,"
    "  PRIMARY KEY (schema_name, table_name)) ENGINE=InnoDB",
    # Added with COMPRESS_RATIO: an older openslob's rows read as 1 (random padding).
    f"ALTER TABLE {ident(META_DB, META_TABLE)}"
    " ADD COLUMN IF NOT EXISTS compress_ratio DOUBLE NOT NULL DEFAULT 1",
)


def create_table_sql(spec: TableSpec, layout: RowLayout) -> list[str]:
    columns = ", ".join(f"{ident(c)} VARBINARY({layout.pad}) NOT NULL" for c in PAD_COLUMNS)
    return [
        f"CREATE DATABASE IF NOT EXISTS {ident(spec.schema)}",
        f"DROP TABLE IF EXISTS {spec.name}",
        # DYNAMIC: no compression; STATS_PERSISTENT: exact n_leaf_pages in innodb_index_stats.
        f"CREATE TABLE {spec.name} (pk BIGINT UNSIGNED NOT NULL,"
        f" custid BIGINT UNSIGNED NOT NULL, {columns}, PRIMARY KEY (pk))"
        " ENGINE=InnoDB ROW_FORMAT=DYNAMIC STATS_PERSISTENT=1 STATS_AUTO_RECALC=0",
    ]


def counter_blocks(column_index: int, pad: int) -> bytes:
    """Distinct 16-byte blocks for one column: AES-ECB over them is a CTR-mode stream."""
    blocks = -(-pad // 16)
    return b"".join(b"%016d" % (column_index * 100_000 + j) for j in range(blocks))


# COMPRESS_RATIO > 1: each pad column is random bytes then zeros; zlib-1 and lz4 store the
# random bytes plus a few bytes per zero run (calibrated on real pages).
_RUN_COST_BYTES = 8.0
# The loop's updates splice 16 random bytes into the start of a column (workload.py).
_SPLICED_BYTES = 16


def random_share(pad: int, ratio: float) -> int:
    """Random bytes at the start of each pad column for this compression ratio."""
    if ratio <= 1.0:
        return pad
    return max(_SPLICED_BYTES, min(pad, round(pad / ratio - _RUN_COST_BYTES)))


def pad_expressions(pad: int, ratio: float, salt: str) -> list[str]:
    """c2..c20 of a row: AES-128 of counter blocks %(ctrN)s under a key from (%(<salt>)s,
    custid), cut to the random share of `pad`, then zeros (COMPRESS_RATIO)."""
    random = random_share(pad, ratio)
    zeros = f", REPEAT(0x00, {pad - random})" if random < pad else ""
    return [
        f"CONCAT(LEFT(AES_ENCRYPT(%(ctr{i})s, UNHEX(SHA2(CONCAT_WS(':', %({salt})s, custid),"
        f" 256))), {random}){zeros})"
        for i in range(len(PAD_COLUMNS))
    ]


def load_sql(spec: TableSpec, layout: RowLayout) -> str:
    """Insert all rows in pk order.

    The rank (pk) comes from a window over the bare keys, sorted small; the wide padding is
    computed in the outer select list, after the sort, so it never goes through a filesort.
    """
    pads = ", ".join(pad_expressions(layout.pad, spec.ratio, "seed"))
    cols = ", ".join(ident(c) for c in PAD_COLUMNS)
    seq = ident(spec.schema, f"seq_1_to_{spec.rows}")
    return (
        f"/* {LOAD_TAG} {spec.schema}.{spec.table} */ INSERT INTO {spec.name} (pk, custid, {cols})"
        f" SELECT pk, custid, {pads} FROM ("
        "  SELECT seq AS custid, ROW_NUMBER() OVER ("
        "    ORDER BY CONV(LEFT(MD5(CONCAT_WS(':', %(seed)s, seq)), 15), 16, 10), seq) AS pk"
        f"  FROM {seq}) ranked"
        " ORDER BY pk"
    )


def load_args(spec: TableSpec, layout: RowLayout) -> dict[str, Any]:
    args: dict[str, Any] = {"seed": spec.seed}
    for i in range(len(PAD_COLUMNS)):
        args[f"ctr{i}"] = counter_blocks(i, layout.pad)
    return args


# ------------------------------------------------------------------- the table as it is

_PAGE_COMPRESSED = re.compile(r"`?page_compressed`?\s*=\s*'?(\w+)", re.I)
_KEY_BLOCK_SIZE = re.compile(r"key_block_size\s*=\s*'?(\d+)", re.I)


def storage_problem(row_format: str | None, create_options: str | None) -> str | None:
    """Why the table's options no longer give the layout (None: they do): DYNAMIC rows keep
    every pad column on the leaf page; row or page compression would shrink the padding."""
    options = create_options or ""
    page_compressed = _PAGE_COMPRESSED.search(options)
    key_block = _KEY_BLOCK_SIZE.search(options)
    if row_format != "Dynamic":
        return f"ROW_FORMAT={row_format}, not Dynamic"
    if page_compressed and page_compressed[1].upper() not in ("0", "OFF", "NO"):
        return "PAGE_COMPRESSED is on"
    if key_block and int(key_block[1]):
        return f"KEY_BLOCK_SIZE={key_block[1]} (compressed)"
    return None


def _catalog(conn: pymysql.connections.Connection, spec: TableSpec, pad: int) -> tuple | None:
    """(row format, create options, data length, unique custid index?, pad columns as
    created) from information_schema, or None when the table is missing."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT t.ROW_FORMAT, t.CREATE_OPTIONS, t.DATA_LENGTH,"
            "  (SELECT COUNT(*) FROM information_schema.STATISTICS s"
            "    WHERE s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME"
            "      AND s.INDEX_NAME = 'custid' AND s.NON_UNIQUE = 0),"
            "  (SELECT COUNT(*) FROM information_schema.COLUMNS c"
            "    WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME"
            "      AND c.DATA_TYPE = 'varbinary' AND c.CHARACTER_OCTET_LENGTH = %s"
            f"      AND c.COLUMN_NAME IN ({', '.join(['%s'] * len(PAD_COLUMNS))}))"
            " FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s",
            [pad, *PAD_COLUMNS, spec.schema, spec.table],
        )
        return cur.fetchone()


def _content(conn: pymysql.connections.Connection, spec: TableSpec) -> tuple[int, Any, Any]:
    """(rows, lowest key, highest key). cf1 is counted over its custid index (a few bytes a
    row: ~1,500 16k pages per million rows), cf2 over its rows: the scan table, which every
    SCAN op reads whole anyway."""
    index = "custid" if spec.indexed else "PRIMARY"
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT COUNT(*), MIN(custid), MAX(custid) FROM {spec.name} FORCE INDEX ({index})"
        )
        rows, low, high = one(cur.fetchone())
    return int(rows), low, high


def table_problems(
    conn: pymysql.connections.Connection, spec: TableSpec, layout: RowLayout
) -> list[str]:
    """What makes a table unusable as the bookkeeping describes it (empty: valid), from the
    catalog and a count of its rows: missing, its options or pad columns changed, fewer pages
    than its rows need, no unique custid index, rows deleted or added, keys changed."""
    facts = _catalog(conn, spec, layout.pad)
    if facts is None:
        return ["missing"]
    row_format, options, data_length, custid_index, pad_columns = facts
    found = []
    if (why := storage_problem(row_format, options)) is not None:
        found.append(why)
    if pad_columns != len(PAD_COLUMNS):
        found.append(f"pad columns changed ({pad_columns} of {len(PAD_COLUMNS)} as created)")
    pages = int(data_length or 0) // layout.page_size
    min_pages = spec.rows // layout.rows_per_page
    if pages < min_pages:
        found.append(f"{pages:,} pages for {spec.rows:,} rows (at least {min_pages:,})")
    if spec.indexed and custid_index != 1:
        return [*found, "no unique index on custid"]  # the count below would scan the table
    rows, low, high = _content(conn, spec)
    if rows != spec.rows:
        found.append(f"{rows:,} rows, not {spec.rows:,}")
    elif (low, high) != (1, spec.rows):
        found.append(f"keys {low}..{high}, not 1..{spec.rows}")
    return found


# ---------------------------------------------------------------------------- loading


class DatasetLoader:
    """Creates or repairs the SLOB tables with LOAD_PARALLEL_DEGREE concurrent streams."""

    def __init__(self, connect_kwargs: dict[str, Any]) -> None:
        self.connect_kwargs = connect_kwargs
        self._active: dict[int, pymysql.connections.Connection] = {}
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._rows_done = 0

    @contextmanager
    def _connection(self) -> Iterator[pymysql.connections.Connection]:
        conn = connect(self.connect_kwargs)
        thread_id = conn.thread_id()
        with self._lock:
            self._active[thread_id] = conn
        try:
            yield conn
        finally:
            with self._lock:
                self._active.pop(thread_id, None)
            conn.close()

    def _execute(self, conn: pymysql.connections.Connection, query: str, args: Any = None) -> None:
        if self._cancelled.is_set():
            raise SetupError("setup interrupted")
        try:
            with conn.cursor() as cur:
                cur.execute(query, args)
        except pymysql.err.MySQLError as exc:
            if self._cancelled.is_set():
                raise SetupError("setup interrupted") from exc
            raise

    def cancel(self) -> None:
        """KILL QUERY every statement in flight (from another thread, e.g. on Ctrl-C)."""
        self._cancelled.set()
        with self._lock:
            ids = list(self._active)
        if not ids:
            return
        with suppress(pymysql.err.MySQLError, SetupError), self._admin() as admin:
            for thread_id in ids:
                with suppress(pymysql.err.MySQLError), admin.cursor() as cur:
                    cur.execute(f"KILL QUERY {int(thread_id)}")

    @contextmanager
    def _admin(self) -> Iterator[pymysql.connections.Connection]:
        conn = connect(self.connect_kwargs, connect_timeout=5)
        try:
            yield conn
        finally:
            conn.close()

    def layout(self) -> RowLayout:
        with self._admin() as conn:
            return layout_for(page_size(conn))

    # -- decisions

    def _current(self, conn: pymysql.connections.Connection) -> dict[tuple[str, str], dict]:
        for statement in META_DDL:
            self._execute(conn, statement)
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM {ident(META_DB, META_TABLE)}")
            rows = cur.fetchall()
        return {(r["schema_name"], r["table_name"]): r for r in rows}

    @staticmethod
    def _why_invalid(
        conn: pymysql.connections.Connection, spec: TableSpec, meta: dict, layout: RowLayout
    ) -> str | None:
        """Why a table cannot be used as it is (None: valid): the bookkeeping first, then the
        table itself (table_problems)."""
        wanted = {
            "n_rows": spec.rows,
            "seed": spec.seed,
            "layout": LAYOUT_VERSION,
            "page_size": layout.page_size,
            "pad": layout.pad,
            "compress_ratio": spec.ratio,
            "status": "complete",
        }
        reason = tables.recorded_reason(meta, wanted)
        if reason is not None:
            return reason
        found = table_problems(conn, spec, layout)
        return "; ".join(found) or None

    def plan(self, specs: list[TableSpec]) -> tables.Plan[TableSpec]:
        """Split the wanted tables into those to load (with the reason) and the valid ones."""
        layout = self.layout()
        with self._connection() as conn:
            current = self._current(conn)
            plan: tables.Plan[TableSpec] = tables.Plan()
            for spec in specs:
                meta = current.get((spec.schema, spec.table), {})
                plan.add(spec, self._why_invalid(conn, spec, meta, layout))
        return plan

    def load(
        self, specs: list[TableSpec], degree: int, progress: ProgressCallback | None = None
    ) -> SetupResult:
        """Load what is missing or stale, up to `degree` tables at a time.

        One stream per table, by design: each table is inserted in pk order by a single
        statement, so every leaf page fills before the next one opens. Two streams into one
        table would meet at their range boundary: the lower stream then always inserts just
        before a record of the upper one, which splits pages in the middle (measured: 1.35
        instead of 2 rows per page). LOAD_PARALLEL_DEGREE therefore counts tables in flight.
        """
        started = time.monotonic()
        self._cancelled.clear()
        layout = self.layout()
        plan = self.plan(specs)
        result = SetupResult(tables=[self._describe_valid(spec, layout) for spec in plan.valid])
        result.notes += tables.reload_notes(plan)
        if plan.todo:
            for spec in plan.todo:
                self._prepare_table(spec, layout)
            loaded = self._run_pool(plan.todo, layout, degree, progress)
            result.tables += [loaded[spec] for spec in plan.todo]
        result.notes.append(
            f"InnoDB {layout.page_size // 1024}k pages: {layout.rows_per_page} rows per leaf"
            f" page ({len(PAD_COLUMNS)} x {layout.pad} B of padding per row)"
        )
        result.seconds = time.monotonic() - started
        return result

    def _run_pool(
        self,
        todo: list[TableSpec],
        layout: RowLayout,
        degree: int,
        progress: ProgressCallback | None,
    ) -> dict[TableSpec, TableLoad]:
        total_rows = sum(spec.rows for spec in todo)
        self._rows_done = 0
        loaded: dict[TableSpec, TableLoad] = {}
        with ThreadPoolExecutor(max_workers=max(1, degree), thread_name_prefix="slob-load") as pool:
            pending = {pool.submit(self._load_table, spec, layout): spec for spec in todo}

            def tick() -> None:
                if progress:
                    progress(min(self._rows_done, total_rows), total_rows)

            drain(pending, loaded.__setitem__, tick, self.cancel)
        return loaded

    def _prepare_table(self, spec: TableSpec, layout: RowLayout) -> None:
        """Mark the table 'loading' first: an interruption from here on is seen as such."""
        with self._connection() as conn:
            self._terminate_stale_loaders(conn, spec)
            self._mark(conn, spec, layout, "loading")
            for statement in create_table_sql(spec, layout):
                self._execute(conn, statement)

    def _load_table(self, spec: TableSpec, layout: RowLayout) -> TableLoad:
        """Rows in pk order, then the custid index (a sorted build: compact) and persistent
        statistics (n_leaf_pages for verify), then 'complete'."""
        started = time.monotonic()
        tag = f"/* {LOAD_TAG} {spec.schema}.{spec.table} */ "
        with self._connection() as conn:
            self._session_settings(conn)
            self._execute(conn, load_sql(spec, layout), load_args(spec, layout))
            with self._lock:
                self._rows_done += spec.rows
            if spec.indexed:
                self._execute(
                    conn, f"{tag}ALTER TABLE {spec.name} ADD UNIQUE INDEX custid (custid)"
                )
            self._execute(conn, f"{tag}ANALYZE TABLE {spec.name}")
            flush_tables(conn, [(spec.schema, spec.table)])  # files current: what storage sees
            seconds = time.monotonic() - started
            self._mark(conn, spec, layout, "complete", seconds)
            pages = self._pages(conn, spec, layout)
        return TableLoad(
            spec.schema, spec.table, spec.rows, pages, pages * layout.page_size, seconds, "loaded"
        )

    def _session_settings(self, conn: pymysql.connections.Connection) -> None:
        # Room to sort the bare keys of the rank window (and the index build) in memory.
        self._execute(conn, "SET SESSION sort_buffer_size = 64 * 1024 * 1024")

    def _terminate_stale_loaders(
        self, conn: pymysql.connections.Connection, spec: TableSpec
    ) -> None:
        """Statements of an interrupted earlier setup may still be loading this table."""
        with conn.cursor() as cur:
            cur.execute(
                "SELECT ID FROM information_schema.PROCESSLIST"
                " WHERE INFO LIKE %s AND ID <> CONNECTION_ID()",
                [f"/* {LOAD_TAG} {spec.schema}.{spec.table} */%"],
            )
            for (thread_id,) in cur.fetchall():
                with suppress(pymysql.err.MySQLError):
                    cur.execute(f"KILL {int(thread_id)}")

    def _mark(
        self,
        conn: pymysql.connections.Connection,
        spec: TableSpec,
        layout: RowLayout,
        status: str,
        seconds: float | None = None,
    ) -> None:
        for statement in META_DDL:
            self._execute(conn, statement)
        self._execute(
            conn,
            f"INSERT INTO {ident(META_DB, META_TABLE)} (schema_name, table_name, n_rows, seed,"
            "  layout, page_size, pad, status, started_at, load_seconds, compress_ratio)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, NOW(6), %s, %s)"
            " ON DUPLICATE KEY UPDATE n_rows = VALUES(n_rows), seed = VALUES(seed),"
            "  compress_ratio = VALUES(compress_ratio),"
            "  layout = VALUES(layout), page_size = VALUES(page_size), pad = VALUES(pad),"
            "  status = VALUES(status), load_seconds = VALUES(load_seconds),"
            "  started_at = IF(VALUES(status) = 'loading', VALUES(started_at), started_at),"
            "  finished_at = IF(VALUES(status) = 'complete', NOW(6), NULL)",
            [
                spec.schema,
                spec.table,
                spec.rows,
                spec.seed,
                LAYOUT_VERSION,
                layout.page_size,
                layout.pad,
                status,
                seconds,
                spec.ratio,
            ],
        )

    @staticmethod
    def _pages(conn: pymysql.connections.Connection, spec: TableSpec, layout: RowLayout) -> int:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT DATA_LENGTH FROM information_schema.TABLES"
                " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                [spec.schema, spec.table],
            )
            row = cur.fetchone()
        return 0 if row is None else int(row[0] or 0) // layout.page_size

    def _describe_valid(self, spec: TableSpec, layout: RowLayout) -> TableLoad:
        with self._connection() as conn:
            pages = self._pages(conn, spec, layout)
        return TableLoad(
            spec.schema, spec.table, spec.rows, pages, pages * layout.page_size, 0, "valid"
        )

    # -- listing and dropping

    def recorded_tables(self) -> list[tables.RecordedTable]:
        """Every table the bookkeeping holds, as setup recorded it; [] without bookkeeping.
        Reads only: nothing is created (a command may still be refused before it changes
        anything)."""
        try:
            rows = self._bookkeeping("schema_name, table_name, n_rows, seed, compress_ratio")
        except pymysql.MySQLError:  # bookkeeping of an older openslob: no ratio (random)
            rows = [(*r, 1.0) for r in self._bookkeeping("schema_name, table_name, n_rows, seed")]
        return [tables.RecordedTable(r[0], r[1], int(r[2]), int(r[3]), float(r[4])) for r in rows]

    def _bookkeeping(self, columns: str) -> list[tuple]:
        """Rows of the bookkeeping table; [] when there is none (nothing is created)."""
        with self._connection() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.TABLES"
                " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                [META_DB, META_TABLE],
            )
            if not one(cur.fetchone())[0]:
                return []
            cur.execute(f"SELECT {columns} FROM {ident(META_DB, META_TABLE)}")
            return list(cur.fetchall())

    def existing_schemas(self) -> list[str]:
        """Schemas that setup recorded, in natural order (user2 before user10)."""
        names = [r[0] for r in self._bookkeeping("DISTINCT schema_name")]
        return sorted(names, key=schema_order)

    def drop_all(self) -> list[str]:
        schemas = self.existing_schemas()
        with self._connection() as conn:
            for name in schemas:
                self._execute(conn, f"DROP DATABASE IF EXISTS {ident(name)}")
            self._execute(conn, f"DROP DATABASE IF EXISTS {ident(META_DB)}")
        return schemas
