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

from openslob.engines.mariadb.connection import ident
from openslob.model.compressibility import (
    SAMPLE_BYTES,
    Compressibility,
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


def table_compressibility(
    conn: pymysql.connections.Connection,
    schema: str,
    table: str,
    page_bytes: int,
    sample_bytes: int = SAMPLE_BYTES,
) -> Compressibility:
    with conn.cursor() as cur:
        cur.execute("SELECT @@datadir, @@innodb_file_per_table")
        datadir, per_table = cur.fetchone()
        cur.execute(
            "SELECT FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = %s",
            [f"{schema}/{table}"],
        )
        row = cur.fetchone()
    if not per_table or row is None:
        return Compressibility.unmeasured("table not in a file of its own (innodb_file_per_table)")
    path = os.path.join(str(datadir), schema, f"{table}.ibd")
    file_bytes = int(row[0])
    if not os.access(path, os.R_OK) or os.path.getsize(path) != file_bytes:
        return Compressibility.unmeasured(
            "data files not on this host (InnoDB files are not readable through SQL)"
        )
    return measure(
        reader_from_file(path, file_bytes, sample_bytes), file_bytes, "local file", page_bytes
    )
