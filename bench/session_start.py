#!/usr/bin/env python3
"""session_start: seconds from the start of a run until every session is connected and ready.

Sessions connect in parallel (asyncio, 64 at a time) and apply their session settings; the
figure is run.json's window.connect_seconds. Goal: <= 10 s for 512 sessions.

    python bench/session_start.py --counts 64,256,512 --repeats 3
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _common import Bench, ints, parse_args, spread

from openslob.runner.execute import run_benchmark


def main() -> None:
    args = parse_args(
        __doc__, {"counts": "64,256,512", "repeats": 3}, {"counts": "8,32", "repeats": 1}
    )
    counts = ints(args.counts)
    bench = Bench(args.data_dir, "pio")
    data = {
        "SCHEMAS": 4,
        "SCALE": 8192,
        "SCAN_TABLE_SZ": 128,
        "UPDATE_PCT": 0,
        "WARMUP": 0,
        "WORK_LOOP": 1,
    }
    bench.ensure_data(bench.config(**data, SESSIONS=max(counts)), max(counts))
    results = Path(tempfile.mkdtemp(prefix="session-start-"))
    try:
        for n in counts:
            seconds = []
            for _ in range(args.repeats):
                _, run = run_benchmark(
                    bench.config(**data, SESSIONS=n),
                    target=None,
                    data_dir=bench.server.data_dir,
                    results_parent=results,
                )
                seconds.append(run["window"]["connect_seconds"])
            print(
                f"session_start: {n:>4} sessions ready in {spread(seconds, 3)} s"
                + ("   goal <= 10 s" if n >= 512 else "")
            )
    finally:
        bench.close()


if __name__ == "__main__":
    main()
