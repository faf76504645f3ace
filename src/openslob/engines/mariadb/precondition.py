"""`slob precondition --mode engine` on MariaDB: every row of cf1 and cf2 written over by
InnoDB itself.

Units are rows by primary key (pk 1..rows: the clustered order, so a batch walks the leaf
pages in file order). A batch is one committed UPDATE setting every pad column to new
AES-counter bytes under a fresh random salt, the same length and COMPRESS_RATIO as the load
wrote (dataset.pad_expressions): the update is in place, rows per page hold. flush() writes
the tables' dirty pages to their files (FLUSH TABLES ... FOR EXPORT, a moment's read lock).
cancel() (another thread, Ctrl-C) sends KILL QUERY for the statement in flight.
"""

from __future__ import annotations

import os
from contextlib import suppress
from typing import Any

import pymysql

from openslob.engines.api import RewriteExtent
from openslob.engines.mariadb.connection import connect, ident, page_size
from openslob.engines.mariadb.datafiles import flush_tables
from openslob.engines.mariadb.dataset import DatasetLoader, counter_blocks, pad_expressions
from openslob.engines.mariadb.layout import PAD_COLUMNS, RowLayout, layout_for
from openslob.model.errors import SetupError

TAG = "openslob-precondition"


def rewrite_sql(relation: str, pad: int, ratio: float) -> str:
    schema, table = relation.split(".")
    sets = ", ".join(
        f"{ident(c)} = {value}"
        for c, value in zip(PAD_COLUMNS, pad_expressions(pad, ratio, "salt"), strict=True)
    )
    return (
        f"/* {TAG} */ UPDATE {ident(schema, table)} SET {sets}"
        " WHERE pk >= %(first)s AND pk < %(last)s"
    )


class RowRewriter:
    def __init__(self, connect_kwargs: dict[str, Any]) -> None:
        self.connect_kwargs = connect_kwargs
        self._conn: pymysql.connections.Connection | None = None
        self._thread_id: int | None = None
        self._layout: RowLayout | None = None
        self._ratios: dict[str, float] = {}

    def _connection(self) -> pymysql.connections.Connection:
        if self._conn is None or not self._conn.open:
            self._conn = connect(self.connect_kwargs)
            self._thread_id = self._conn.thread_id()
            self._layout = layout_for(page_size(self._conn))
            recorded = DatasetLoader(self.connect_kwargs).recorded_tables()
            self._ratios = {f"{t.schema}.{t.table}": t.ratio for t in recorded}
        return self._conn

    def plan(self, relations: list[str]) -> list[RewriteExtent]:
        conn = self._connection()
        assert self._layout is not None
        unit_bytes = self._layout.page_size // self._layout.rows_per_page
        extents = []
        with conn.cursor() as cur:
            for relation in relations:
                cur.execute(f"SELECT COALESCE(MAX(pk), 0) FROM {ident(*relation.split('.'))}")
                row = cur.fetchone()
                extents.append(RewriteExtent(relation, int(row[0]) if row else 0, unit_bytes))
        return extents

    def rewrite(self, extent: RewriteExtent, first: int, count: int) -> None:
        conn = self._connection()
        assert self._layout is not None
        args: dict[str, Any] = {"first": first + 1, "last": first + count + 1}  # pk from 1
        args["salt"] = os.urandom(16).hex()
        for i in range(len(PAD_COLUMNS)):
            args[f"ctr{i}"] = counter_blocks(i, self._layout.pad)
        query = rewrite_sql(
            extent.relation, self._layout.pad, self._ratios.get(extent.relation, 1.0)
        )
        try:
            with conn.cursor() as cur:
                cur.execute(query, args)
        except BaseException:
            self.cancel()  # Ctrl-C in the middle of a statement: the server stops it too
            self.close()
            raise

    def flush(self, extents: list[RewriteExtent]) -> None:
        names = [(e.relation.split(".")[0], e.relation.split(".")[1]) for e in extents]
        flush_tables(self._connection(), names)

    def cancel(self) -> None:
        if self._thread_id is None:
            return
        with suppress(pymysql.err.MySQLError, SetupError):
            admin = connect(self.connect_kwargs, connect_timeout=5)
            try:
                with admin.cursor() as cur:
                    cur.execute(f"KILL QUERY {int(self._thread_id)}")
            finally:
                admin.close()

    def close(self) -> None:
        if self._conn is not None:
            with suppress(pymysql.err.Error):
                self._conn.close()
            self._conn = None
            self._thread_id = None
