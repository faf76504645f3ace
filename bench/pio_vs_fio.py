#!/usr/bin/env python3
"""pio_vs_fio: database physical reads/s and read latency vs fio at the same concurrency.

For each session count: a read-only `slob run` (pio profile: direct I/O, io_method=sync)
immediately followed by fio (8 KiB randread, psync, direct, one job per session, same
duration, same file system) - `slob run --calibrate` - repeated. Prints DB reads/s ÷ fio
IOPS and DB read latency ÷ fio mean latency, with the spread, and CPU busy % so you can see
where the CPU, not the device, becomes the limit. Goal: >= 0.90 where the device limits.

    python bench/pio_vs_fio.py --sessions 1,2,4,8,16 --seconds 20 --repeats 3
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _common import Bench, ints, parse_args, spread

from openslob.benchmark import run_benchmark

CPU_BOUND_PCT = 90


def main() -> None:
    args = parse_args(
        __doc__,
        {"sessions": "1,2,4,8,16", "seconds": 20.0, "repeats": 3},
        {"sessions": "1,2", "seconds": 2.0, "repeats": 1},
    )
    counts = ints(args.sessions)
    bench = Bench(args.data_dir, "pio")
    data = {"SCHEMAS": 4, "SCALE": 8192, "SCAN_TABLE_SZ": 128, "UPDATE_PCT": 0, "WARMUP": 2}
    bench.ensure_data(bench.config(**data, SESSIONS=max(counts)), max(counts))
    results = Path(tempfile.mkdtemp(prefix="pio-vs-fio-"))
    print(
        f"pio_vs_fio: read-only, {args.seconds:g} s per side, {args.repeats} repeats, "
        f"sessions {counts}"
    )
    print(
        f"{'sessions':>8}  {'DB reads/s':>22}  {'fio IOPS':>22}  {'reads ratio':>26}  "
        f"{'DB us / fio us':>24}  {'CPU %':>6}"
    )
    try:
        for n in counts:
            db, fio, ratio, lat, cpu = [], [], [], [], []
            for _ in range(args.repeats):
                config = bench.config(**data, SESSIONS=n, RUN_TIME=args.seconds)
                _, run = run_benchmark(
                    config,
                    target=None,
                    data_dir=bench.server.data_dir,
                    results_parent=results,
                    calibrate=True,
                )
                m, cal = run["metrics"], run["calibration"]
                db.append(m["pio_reads_per_s"])
                fio.append(cal["fio"]["iops"])
                ratio.append(cal["pio_reads_pct_of_fio"] / 100)
                lat.append(cal["db_read_latency_vs_fio"])
                cpu.append((m["cpu_user_pct"] or 0) + (m["cpu_sys_pct"] or 0))
            limit = " CPU-bound" if max(cpu) >= CPU_BOUND_PCT else ""
            print(
                f"{n:>8}  {spread(db, 0):>22}  {spread(fio, 0):>22}  {spread(ratio):>26}  "
                f"{spread(lat):>24}  {max(cpu):>5.0f}{limit}"
            )
    finally:
        bench.close()
    print("goal: reads ratio >= 0.90 at every N where the device, not the CPU, is the limit")


if __name__ == "__main__":
    main()
