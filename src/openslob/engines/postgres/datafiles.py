"""Read a sample of a table's (or index's) data file and measure what the storage sees.

The bytes are read where the data files are: from the local file when this host holds the
data directory (pg_relation_filepath under data_directory, readable), else through the
server (pg_read_binary_file: superuser or pg_read_server_files), else the ratio is n/a with
the reason. Reads come from the file as the server last wrote it (dirty pages still in
shared buffers are not seen: a CHECKPOINT first makes the file current).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg

from openslob.model.compressibility import (
    SAMPLE_BYTES,
    Compressibility,
    measure,
    sample_offsets,
)

SEGMENT_BYTES = 1 << 30  # PostgreSQL splits a relation into 1 GiB files (default build)


def _where(conn: psycopg.Connection, relation: str) -> tuple[str, str, int] | str:
    """(data_directory, relative path, bytes) of a relation, or why they cannot be known."""
    try:
        row = conn.execute(
            "SELECT current_setting('data_directory'), pg_relation_filepath(%s::regclass),"
            " pg_relation_size(%s::regclass)",
            [relation, relation],
        ).fetchone()
    except psycopg.Error as exc:
        return f"data file location not readable: {str(exc).splitlines()[0]}"
    assert row is not None
    return str(row[0]), str(row[1]), int(row[2])


def _local_runs(base: str, file_bytes: int, sample_bytes: int) -> Iterator[bytes]:
    for offset, length in sample_offsets(file_bytes, sample_bytes):
        segment, within = divmod(offset, SEGMENT_BYTES)
        path = base if segment == 0 else f"{base}.{segment}"
        with open(path, "rb") as handle:
            handle.seek(within)
            yield handle.read(min(length, SEGMENT_BYTES - within))


def _remote_runs(
    conn: psycopg.Connection, rel_path: str, file_bytes: int, sample_bytes: int
) -> Iterator[bytes]:
    for offset, length in sample_offsets(file_bytes, sample_bytes):
        segment, within = divmod(offset, SEGMENT_BYTES)
        path = rel_path if segment == 0 else f"{rel_path}.{segment}"
        row = conn.execute(
            "SELECT pg_read_binary_file(%s, %s, %s)",
            [path, within, min(length, SEGMENT_BYTES - within)],
        ).fetchone()
        assert row is not None
        yield bytes(row[0])


def relation_compressibility(
    conn: psycopg.Connection, relation: str, sample_bytes: int = SAMPLE_BYTES
) -> Compressibility:
    """Measured ratios of one relation's data file (a sample spread over the whole file)."""
    where = _where(conn, relation)
    if isinstance(where, str):
        return Compressibility.unmeasured(where)
    data_dir, rel_path, file_bytes = where
    local = os.path.join(data_dir, rel_path)
    if os.access(local, os.R_OK) and os.path.getsize(local) == min(file_bytes, SEGMENT_BYTES):
        return measure(_local_runs(local, file_bytes, sample_bytes), file_bytes, "local file")
    try:
        conn.execute("SELECT pg_read_binary_file(%s, 0, 0)", [rel_path])
    except psycopg.Error as exc:
        return Compressibility.unmeasured(
            f"data file neither local nor readable through the server ({str(exc).splitlines()[0]})"
        )
    runs = _remote_runs(conn, rel_path, file_bytes, sample_bytes)
    return measure(runs, file_bytes, "pg_read_binary_file")
