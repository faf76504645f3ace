#!/usr/bin/env python3
"""sweep_overhead: wall time of a sweep ÷ Σ (warm-up + RUN_TIME) of its points.

The dead time between points (connecting sessions, snapshots, writing results, the barrier
lead) is what this measures; server, data and procedures are checked once per sweep.
Goal: <= 1.10.

    python bench/sweep_overhead.py --seconds 20 --repeats 2
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _common import Bench, parse_args, spread

from openslob.runner.sweep import plan_sweep, run_sweep


def main() -> None:
    args = parse_args(
        __doc__,
        {"seconds": 20.0, "warmup": 3.0, "repeats": 2},
        {"seconds": 1.0, "warmup": 0.0, "repeats": 1},
    )
    bench = Bench(args.data_dir, "pio")
    flags = {
        "SCHEMAS": "4",
        "SCALE": "8192",
        "SCAN_TABLE_SZ": "128",
        "UPDATE_PCT": "0,20",
        "SESSIONS": "1,4",
        "RUN_TIME": f"{args.seconds:g}",
        "WARMUP": f"{args.warmup:g}",
    }
    ratios = []
    try:
        bench.ensure_data(bench.config(**{k: v.split(",")[-1] for k, v in flags.items()}), 4)
        for i in range(args.repeats):
            plan = plan_sweep(flags, None, Path("/"))
            nominal = sum(
                float(pt.config["WARMUP"]) + float(pt.config["RUN_TIME"]) for pt in plan.points
            )
            path = Path(tempfile.mkdtemp(prefix="sweep-overhead-")) / f"sweep-{i}"
            outcome = run_sweep(
                plan, path=path, label=f"b{i}", target=None, data_dir=bench.server.data_dir
            )
            ratios.append(outcome.wall_seconds / nominal)
            print(
                f"  repeat {i + 1}: {len(plan.points)} points, wall {outcome.wall_seconds:.1f} s"
                f" for {nominal:.0f} s of warm-up + RUN_TIME"
            )
    finally:
        bench.close()
    print(f"sweep_overhead: wall / Σ(warm-up + RUN_TIME) = {spread(ratios, 3)}   goal <= 1.10")


if __name__ == "__main__":
    main()
