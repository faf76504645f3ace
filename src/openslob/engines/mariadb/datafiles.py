"""Read a sample of an InnoDB table's .ibd file and measure what the storage sees.

With innodb_file_per_table, a table (its clustered rows and its secondary indexes) is one
file, @@datadir/<schema>/<table>.ibd. It is read locally when this host holds it (the size
the server reports matches the local file's); a remote server's files are not readable
through SQL without FILE privileges and secure_file_priv, so the ratio is then n/a with the
reason. Preallocated pages InnoDB never wrote (all zeros) are left out and counted.
`flush` first writes the table's dirty pages (FLUSH TABLES ... FOR EXPORT, a moment's
read lock): for `slob verify` and the end of setup, never during a run.
"""

from __future__ import annotations

import os
from contextlib import suppress

import pymysql

from openslob.engines.common.rows import one
from openslob.engines.mariadb.connection import ident
from openslob.model.compressibility import (
    SAMPLE_BYTES,
    Compressibility,
    PageFilter,
    measure,
    reader_from_file,
)


def flush_tables(conn: pymysql.connections.Connection, names: list[tuple[str, str]]) -> None:
    """Dirty pages of these tables to their files (best effort: privileges may lack)."""
    if not names:
        return
    with suppress(pymysql.MySQLError), conn.cursor() as cur:
        cur.execute(f"FLUSH TABLES {', '.join(ident(s, t) for s, t in names)} FOR EXPORT")
        cur.execute("UNLOCK TABLES")


# InnoDB page header fields (storage/innobase/include/fil0fil.h, page0page.h).
FIL_PAGE_TYPE_AT = 24
FIL_PAGE_INDEX = 17855
PAGE_LEVEL_AT = 38 + 26
PAGE_INDEX_ID_AT = 38 + 28


def rows_filter(clustered_index_id: int, rows: bool) -> PageFilter:
    """Pages holding the table's rows (leaf pages of its clustered index) or, `rows` False,
    every other page of the file (B-tree nodes, the custid index, file bookkeeping)."""

    def keep(page: bytes) -> bool:
        kind = int.from_bytes(page[FIL_PAGE_TYPE_AT : FIL_PAGE_TYPE_AT + 2], "big")
        level = int.from_bytes(page[PAGE_LEVEL_AT : PAGE_LEVEL_AT + 2], "big")
        index_id = int.from_bytes(page[PAGE_INDEX_ID_AT : PAGE_INDEX_ID_AT + 8], "big")
        is_row_page = kind == FIL_PAGE_INDEX and level == 0 and index_id == clustered_index_id
        return is_row_page == rows

    return keep


def table_compressibility(
    conn: pymysql.connections.Connection,
    schema: str,
    table: str,
    page_bytes: int,
    sample_bytes: int = SAMPLE_BYTES,
    rows: bool = True,
) -> Compressibility:
    """The file's leaf pages of rows (`rows`), or the rest of it (index nodes, the custid
    index): the storage sees both; the rows are the data set."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@datadir, @@innodb_file_per_table")
        datadir, per_table = one(cur.fetchone())
        cur.execute(
            "SELECT FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = %s",
            [f"{schema}/{table}"],
        )
        row = cur.fetchone()
        cur.execute(
            "SELECT i.INDEX_ID FROM information_schema.INNODB_SYS_INDEXES i"
            " JOIN information_schema.INNODB_SYS_TABLES t ON t.TABLE_ID = i.TABLE_ID"
            " WHERE t.NAME = %s AND i.NAME IN ('PRIMARY', 'GEN_CLUST_INDEX')",
            [f"{schema}/{table}"],
        )
        clustered = cur.fetchone()
    if not per_table or row is None or clustered is None:
        return Compressibility.unmeasured("table not in a file of its own (innodb_file_per_table)")
    path = os.path.join(str(datadir), schema, f"{table}.ibd")
    file_bytes = int(row[0])
    if not os.access(path, os.R_OK) or os.path.getsize(path) != file_bytes:
        return Compressibility.unmeasured(
            "data files not on this host (InnoDB files are not readable through SQL)"
        )
    runs = reader_from_file(path, file_bytes, sample_bytes)
    keep = rows_filter(int(clustered[0]), rows)
    return measure(runs, file_bytes, "local file", page_bytes, keep)
