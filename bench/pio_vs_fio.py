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

import statistics
import tempfile
from pathlib import Path

from _common import Bench, ints, parse_args, read_only_data, spread

from openslob.runner.execute import run_benchmark

CPU_BOUND_PCT = 90  # user+sys of all CPUs: the CPUs are the limit
# /proc/pressure/cpu "some": share of the time a runnable task waited for a CPU. Past this
# the sessions' reads are stretched by the run queue, not by the device.
CPU_CONTENDED_PCT = 20


def main() -> None:
    args = parse_args(
        __doc__,
        {"sessions": "1,2,4,8,16", "seconds": 20.0, "repeats": 3, "warmup": 2.0},
        {"sessions": "1", "seconds": 2.0, "repeats": 1, "warmup": 0.0},
    )
    counts = ints(args.sessions)
    bench = Bench(args.data_dir, "pio")
    data = read_only_data(args.warmup)
    bench.ensure_data(bench.config(**data, SESSIONS=max(counts)), max(counts))
    results = Path(tempfile.mkdtemp(prefix="pio-vs-fio-"))
    print(
        f"pio_vs_fio: read-only, {args.seconds:g} s per side, {args.repeats} repeats, "
        f"sessions {counts}"
    )
    print(
        f"{'sessions':>8}  {'DB reads/s':>22}  {'fio IOPS':>22}  {'reads ratio':>26}  "
        f"{'DB us / fio us':>24}  {'CPU %':>6}  {'CPU wait %':>10}  {'srv CPU us/read':>15}"
    )
    try:
        for n in counts:
            db, fio, ratio, lat, cpu, wait, per_read = [], [], [], [], [], [], []
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
                # unmeasured figures (no PSI, no server CPU) stay out: printed as n/a, not 0
                if m["cpu_user_pct"] is not None and m["cpu_sys_pct"] is not None:
                    cpu.append(m["cpu_user_pct"] + m["cpu_sys_pct"])
                if m.get("psi_cpu_some_pct") is not None:
                    wait.append(m["psi_cpu_some_pct"])
                reads = m["pio_reads_per_s"] * run["window"]["seconds"]
                if m["db_cpu_s"] is not None and reads:
                    per_read.append(m["db_cpu_s"] / reads * 1e6)
            limit = ""
            if cpu and max(cpu) >= CPU_BOUND_PCT:
                limit = " CPU-bound"
            elif wait and statistics.median(wait) >= CPU_CONTENDED_PCT:
                limit = " CPU-contended"
            print(
                f"{n:>8}  {spread(db, 0):>22}  {spread(fio, 0):>22}  {spread(ratio):>26}  "
                f"{spread(lat):>24}  {_median(cpu, 0, max):>6}  {_median(wait, 0):>10}  "
                f"{_median(per_read, 1):>15}{limit}"
            )
    finally:
        bench.close()
    print("goal: reads ratio >= 0.90 at every N where the device, not the CPU, is the limit")
    print(
        "CPU % = user+sys of all CPUs; CPU wait % = /proc/pressure/cpu 'some' (a runnable task "
        "waited for a CPU); srv CPU us/read = server processes' CPU / physical reads"
    )


def _median(values: list[float], digits: int, pick=statistics.median) -> str:
    return "n/a" if not values else f"{pick(values):,.{digits}f}"


if __name__ == "__main__":
    main()
