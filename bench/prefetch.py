#!/usr/bin/env python3
"""prefetch: PIO/s and latency with PREFETCH off vs on at WORK_UNIT 16 and 64 (Exadata seed).

Read-only runs on the private servers (pio profile: direct I/O, a cache far smaller than the
data set). For each engine (and, on PostgreSQL, each io_method: the server is restarted with
ALTER SYSTEM SET io_method and put back after) and each WORK_UNIT: off and on alternated
(off on off on ...) `--repeats` times, so that drift does not look like prefetch. Prints the
median (min, max) of database reads/s, the mean SELECT latency, the database's read latency,
reads in flight per session at the device, blocks per read request and read-ahead pages, and
the on/off ratio of the medians. Numbers for people to read; the machine may be shared.
With --data-dir, a PostgreSQL io_method set by ALTER SYSTEM there is RESET afterwards.

    python bench/prefetch.py --engines postgresql,mariadb --io_methods sync,worker \\
        --work_units 16,64 --sessions 4 --seconds 10 --repeats 3
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import psycopg
from _common import Bench, ints, parse_args, print_ab, read_only_data
from psycopg import sql

from openslob.engines.mariadb.server import EmbeddedMariaDB
from openslob.runner.execute import prepare, run_benchmark

TARGETS = {"postgresql": None, "mariadb": "embedded-mariadb"}
COLUMNS = (
    ("reads/s", lambda r: r["metrics"]["pio_reads_per_s"], 0),
    ("select mean us", lambda r: (r["latency"].get("select") or {}).get("mean_us"), 0),
    ("db read us", lambda r: r["metrics"]["db_read_latency_us"], 0),
    ("in flight/session", lambda r: r["io_shape"]["device_in_flight_per_session"], 2),
    ("blocks/request", lambda r: r["io_shape"]["blocks_per_request"], 3),
    ("read-ahead pages", lambda r: r["io_shape"]["read_ahead_pages"], 0),
)


def main() -> None:
    args = parse_args(
        __doc__,
        {
            "engines": "postgresql,mariadb",
            "io_methods": "sync,worker",
            "work_units": "16,64",
            "sessions": 4,
            "seconds": 10.0,
            "repeats": 3,
            "warmup": 1.0,
        },
        {"engines": "postgresql", "io_methods": "", "work_units": "16", "seconds": 1.0,
         "repeats": 1, "warmup": 0.0},
    )  # fmt: skip
    bench = Bench(args.data_dir, "pio")
    data = read_only_data(args.warmup)
    data["SESSIONS"] = args.sessions
    results = Path(tempfile.mkdtemp(prefix="prefetch-bench-"))
    print(
        f"prefetch: read-only, {args.sessions} sessions, {args.seconds:g} s per run, "
        f"{args.repeats} repeats (off/on alternated); median (min, max) of each"
    )
    try:
        for engine in [e for e in args.engines.split(",") if e]:
            target = TARGETS[engine]
            prepare(bench.config(**data), target=target, data_dir=bench.server.data_dir).release()
            methods = [m for m in args.io_methods.split(",") if m] if engine == "postgresql" else []
            for method in methods or [None]:
                if method is not None:
                    _io_method(bench, method)
                for unit in ints(args.work_units):
                    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
                    for _ in range(args.repeats):
                        for prefetch in ("off", "on"):
                            config = bench.config(
                                **data, WORK_UNIT=unit, RUN_TIME=args.seconds, PREFETCH=prefetch
                            )
                            _, run = run_benchmark(
                                config,
                                target=target,
                                data_dir=bench.server.data_dir,
                                results_parent=results,
                            )
                            runs[prefetch].append(run)
                    _print(engine, method, unit, runs)
    finally:
        if "worker" in args.io_methods or "io_uring" in args.io_methods:
            _io_method(bench, None)
        if "mariadb" in args.engines:  # the private mariadbd run_benchmark started
            maria = EmbeddedMariaDB(bench.server.data_dir, "16k")
            maria.destroy() if bench.own else maria.stop()
        bench.close()
    print("ratio = median on / median off; in flight counts every process's I/O on the device")


def _io_method(bench: Bench, method: str | None) -> None:
    """ALTER SYSTEM SET io_method (None: RESET) and restart the private PostgreSQL."""
    with psycopg.connect(bench.server.conninfo(), autocommit=True) as conn:
        if method is None:
            conn.execute("ALTER SYSTEM RESET io_method")
        else:
            conn.execute(sql.SQL("ALTER SYSTEM SET io_method = {}").format(sql.Literal(method)))
    bench.server.stop()
    bench.server.start("pio")


def _print(engine: str, method: str | None, unit: int, runs: dict[str, list]) -> None:
    where = f"{engine}" + (f" io_method={method}" if method else "")
    print(f"\n{where}, WORK_UNIT {unit}")
    print_ab(runs, COLUMNS)


if __name__ == "__main__":
    main()
