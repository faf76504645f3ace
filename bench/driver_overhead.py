#!/usr/bin/env python3
"""driver_overhead: CPU seconds of the slob process ÷ CPU seconds of the server during runs.

The client only connects, samples counters and writes results; the work loop runs in the
database. Both sides are measured over the same span, the whole run (connect, warm-up,
window, results): the client's CPU is getrusage(RUSAGE_SELF) (all its threads), the
server's the postmaster tree's utime+stime (children that exited included).
Goal: <= 0.01.

    python bench/driver_overhead.py --sessions 4,32 --seconds 20 --repeats 3
"""

from __future__ import annotations

import resource
import tempfile
from pathlib import Path

from _common import Bench, ints, parse_args, spread

from openslob.host.counters import server_cpu_seconds
from openslob.runner.execute import execute, prepare


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    args = parse_args(
        __doc__,
        {"sessions": "4,32", "seconds": 20.0, "repeats": 3, "warmup": 2.0},
        {"sessions": "2", "seconds": 1.0, "repeats": 1, "warmup": 0.0},
    )
    counts = ints(args.sessions)
    bench = Bench(args.data_dir, "pio")
    data = {
        "SCHEMAS": 4,
        "SCALE": 8192,
        "SCAN_TABLE_SZ": 128,
        "UPDATE_PCT": 20,
        "WARMUP": args.warmup,
    }
    results = Path(tempfile.mkdtemp(prefix="driver-overhead-"))
    try:
        for n in counts:
            config = bench.config(**data, SESSIONS=n, RUN_TIME=args.seconds)
            prepared = prepare(config, target=None, data_dir=bench.server.data_dir)
            try:
                ratios, clients, servers = [], [], []
                for i in range(args.repeats):
                    pid = bench.server.status().pid
                    before, server_before = cpu_seconds(), server_cpu_seconds(pid)
                    execute(prepared, config, results / f"n{n}-{i}")
                    client = cpu_seconds() - before
                    server_after = server_cpu_seconds(pid)
                    server = (
                        None
                        if server_before is None or server_after is None
                        else server_after - server_before
                    )
                    clients.append(client)
                    if server is not None:  # unreadable: left out (n/a), never printed as 0
                        servers.append(server)
                    if server:
                        ratios.append(client / server)
            finally:
                prepared.release()
            print(
                f"driver_overhead: {n:>3} sessions  client CPU {spread(clients)} s  "
                f"server CPU {spread(servers)} s  ratio {spread(ratios, 4)}   goal <= 0.01"
            )
    finally:
        bench.close()


if __name__ == "__main__":
    main()
