#!/usr/bin/env python3
"""setup_speed: MB/s of `slob setup` vs a plain generate_series CTAS of the same rows.

Both run on the same private server, side by side, REPEATS times; prints each figure, the
spread, and the ratio (goal >= 0.5). The CTAS reference writes the same rows (same padding
expression, fillfactor 10, one row per page) in key order with no shuffle, index or vacuum:
what PostgreSQL itself can load on the server as configured for tests (pio, direct I/O).
`slob setup` restarts a private server with buffered I/O for a large load and back into
pio after a checkpoint (all counted in its time); a second reference, CTAS on the buffered
server (its restarts not counted), shows what that configuration allows.

    python bench/setup_speed.py --size 512M --repeats 3 [--degree 2] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

from openslob.config.option import BLOCK_SIZE, parse_size_bytes
from openslob.config.resolve import resolve
from openslob.engines.api import Target
from openslob.engines.postgres.dataset import PAD_COLUMNS, DatasetLoader
from openslob.engines.postgres.engine import PostgresEngine
from openslob.engines.postgres.rowbytes import pad_expressions
from openslob.engines.postgres.server import EmbeddedServer
from openslob.runner.prepare import setup_dataset


def slob_load(server: EmbeddedServer, rows: int, degree: int, seed: int) -> float:
    """`slob setup`'s path: a large load restarts the server with buffered I/O and back."""
    conninfo = server.conninfo()
    DatasetLoader(conninfo).drop_all()
    flags = {"SCHEMAS": "1", "SCALE": str(rows), "SCAN_TABLE_SZ": "0", "SEED": str(seed)}
    config = resolve({**flags, "LOAD_PARALLEL_DEGREE": str(degree)}, None, cwd=Path("/"))
    started = time.monotonic()
    target = Target("postgresql", conninfo, conninfo, server)
    setup_dataset(PostgresEngine(conninfo), target, config)
    return time.monotonic() - started


def ctas_load(conninfo: str, rows: int) -> float:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.ctas_reference")
        started = time.monotonic()
        conn.execute(
            sql.SQL(
                "CREATE TABLE public.ctas_reference WITH (fillfactor = 10) AS"
                " SELECT k AS custid, {pads} FROM generate_series(1, %s::bigint) k,"
                " (SELECT int8send(1::bigint) AS salt) s"
            ).format(pads=pad_expressions(aliased=True)),
            [rows],
        )
        seconds = time.monotonic() - started
        pages = conn.execute("SELECT pg_relation_size('public.ctas_reference') / 8192").fetchone()[
            0
        ]
        assert pages == rows, f"reference table has {pages} pages for {rows} rows"
        conn.execute("DROP TABLE public.ctas_reference")
    return seconds


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} (min {min(values):.1f}, max {max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="256M", help="table size (K/M/G suffix)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--degree", type=int, default=2, help="LOAD_PARALLEL_DEGREE")
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()
    rows = parse_size_bytes(args.size) // BLOCK_SIZE
    mb = rows * BLOCK_SIZE / 2**20
    data_dir = args.data_dir
    if data_dir is None:
        base = Path(tempfile.mkdtemp(prefix="openslob-bench-", dir="/tmp"))
        base.chmod(0o755)
        data_dir = base / "srv"
    server = EmbeddedServer(data_dir)
    server.start("pio")
    conninfo = server.conninfo()
    print(
        f"setup_speed: {rows:,} rows = {mb:,.0f} MB, {len(PAD_COLUMNS)} pad columns, "
        f"degree {args.degree}, {args.repeats} repeats, profile pio (direct I/O)"
    )
    slob_rates, ctas_rates = [], []
    buffered_rates: list[float] = []
    for repeat in range(1, args.repeats + 1):
        slob_s = slob_load(server, rows, args.degree, seed=repeat)
        DatasetLoader(conninfo).drop_all()  # the same free space for the CTAS
        ctas_s = ctas_load(conninfo, rows)
        with server.bulk_load() as restarted:
            buffered_s = ctas_load(conninfo, rows) if restarted else None
        slob_rates.append(mb / slob_s)
        ctas_rates.append(mb / ctas_s)
        line = (
            f"  repeat {repeat}: slob setup {mb / slob_s:7.1f} MB/s ({slob_s:.1f} s)   "
            f"CTAS {mb / ctas_s:7.1f} MB/s ({ctas_s:.1f} s)"
        )
        if buffered_s:
            buffered_rates.append(mb / buffered_s)
            line += f"   CTAS buffered {mb / buffered_s:7.1f} MB/s ({buffered_s:.1f} s)"
        print(line)
    ratios = [s / c for s, c in zip(slob_rates, ctas_rates, strict=True)]
    print(f"slob setup MB/s : {spread(slob_rates)}  (incl. restarts into and out of buffered I/O)")
    print(f"CTAS MB/s       : {spread(ctas_rates)}  (the pio server as configured for tests)")
    print(
        f"ratio setup/CTAS: {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f})   goal >= 0.50"
    )
    if buffered_rates:
        vs_buffered = [s / c for s, c in zip(slob_rates, buffered_rates, strict=True)]
        print(
            f"ratio setup/CTAS buffered (no restart counted for CTAS): "
            f"{statistics.median(vs_buffered):.2f} "
            f"(min {min(vs_buffered):.2f}, max {max(vs_buffered):.2f})"
        )
    if args.data_dir is None:
        server.destroy()


if __name__ == "__main__":
    main()
