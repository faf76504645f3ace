"""`slob precondition --mode engine` on PostgreSQL: every heap page of cf1 and cf2 written
over by the server itself.

A batch is one committed UPDATE of a range of heap blocks (a TID range scan, PostgreSQL 14+:
sequential through the file) setting c2 and c3 to new sha512 bytes of the same length and
COMPRESS_RATIO, as the work loop's updates do (workload.py): the new version is HOT and fits
beside the row in its page (dataset.py), so one row per page holds and the page stays as
incompressible as it was loaded. flush() is a CHECKPOINT: the dirty pages reach the files.
cancel() (another thread, Ctrl-C) cancels the statement in flight.
"""

from __future__ import annotations

import threading
from contextlib import suppress

import psycopg
from psycopg import sql

from openslob.engines.api import RewriteExtent
from openslob.engines.common.rows import one
from openslob.engines.postgres.dataset import BLOCK_SIZE
from openslob.engines.postgres.layout import PAD_COLUMNS, WIDE_BYTES, WIDE_COLUMNS
from openslob.engines.postgres.rowbytes import random_bytes
from openslob.engines.postgres.workload import recorded_ratios
from openslob.model.errors import ConfigError

APP = "openslob-precondition"
TID_RANGE_SCAN_VERSION = 140000


def rewrite_sql(relation: str, ratio: float) -> sql.Composed:
    schema, table = relation.split(".")
    sets = sql.SQL(", ").join(
        sql.SQL("{} = {}").format(
            sql.Identifier(c),
            random_bytes("custid", PAD_COLUMNS.index(c) + 2, WIDE_BYTES, salt="v", ratio=ratio),
        )
        for c in WIDE_COLUMNS
    )
    return sql.SQL(
        "UPDATE {t} SET {sets} FROM (SELECT uuid_send(gen_random_uuid()) AS v) s"
        " WHERE ctid >= format('(%%s,0)', %(first)s::bigint)::tid"
        " AND ctid < format('(%%s,0)', %(last)s::bigint)::tid"
    ).format(t=sql.Identifier(schema, table), sets=sets)


class PageRewriter:
    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self._conn: psycopg.Connection | None = None
        self._ratios: dict[str, float] = {}
        self._lock = threading.Lock()

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.conninfo, autocommit=True, application_name=APP)
            self._ratios = recorded_ratios(self._conn)
        return self._conn

    def plan(self, relations: list[str]) -> list[RewriteExtent]:
        conn = self._connection()
        if conn.info.server_version < TID_RANGE_SCAN_VERSION:  # else each batch scans all
            raise ConfigError(
                "--mode engine: needs PostgreSQL 14 or later (TID range scans); "
                "use --mode seq or random"
            )
        extents = []
        for relation in relations:
            (size,) = one(
                conn.execute("SELECT pg_relation_size(%s::regclass)", [relation]).fetchone()
            )
            extents.append(RewriteExtent(relation, int(size) // BLOCK_SIZE, BLOCK_SIZE))
        return extents

    def rewrite(self, extent: RewriteExtent, first: int, count: int) -> None:
        conn = self._connection()
        ratio = self._ratios.get(extent.relation.split(".")[0], 1.0)
        conn.execute(rewrite_sql(extent.relation, ratio), {"first": first, "last": first + count})

    def flush(self, extents: list[RewriteExtent]) -> None:
        with suppress(psycopg.Error):  # needs superuser or pg_checkpoint: else the next one
            self._connection().execute("CHECKPOINT")

    def cancel(self) -> None:
        conn = self._conn
        if conn is not None and not conn.closed:
            with suppress(psycopg.Error):
                conn.cancel_safe(timeout=5)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
