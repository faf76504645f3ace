#!/usr/bin/env python3
"""client_memory: the slob client's RSS over a long run at a short interval stays flat.

An accelerated sustained run: `slob run` at SAMPLE_INTERVAL 0.1 s (ten times the intervals of
a 1 s run per second of wall time: 10 minutes here are 100 minutes of 1 s intervals) in a
child process; its VmRSS is read every --poll seconds (2). Printed: RSS after the first tenth of
the window and at its end, the growth, and the growth per 1,000 intervals. Every row,
histogram and checkpoint of the run goes through the client, so anything it kept per
interval would show as growth. Goal: growth < 1 MiB per 1,000 intervals (after the start).

    python bench/client_memory.py --seconds 600
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Bench, parse_args

INTERVAL_S = 0.1
DATA = {"SCHEMAS": 4, "SCALE": 8192, "SCAN_TABLE_SZ": 0}


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def main() -> None:
    args = parse_args(
        __doc__, {"seconds": 600.0, "sessions": 4, "poll": 2.0}, {"seconds": 3.0, "poll": 0.5}
    )
    bench = Bench(args.data_dir, "pio")
    bench.ensure_data(bench.config(**DATA, SESSIONS=args.sessions), args.sessions)
    results = Path(tempfile.mkdtemp(prefix="client-memory-"))
    flags = [f"--{k.lower().replace('_', '-')}={v}" for k, v in DATA.items()]
    command = [
        sys.executable, "-m", "openslob", "run", *flags, f"--sessions={args.sessions}",
        "--warmup=0", f"--run-time={args.seconds:g}", f"--sample-interval={INTERVAL_S}",
        "--progress-interval=60", f"--results-dir={results}",
        f"--data-dir={bench.server.data_dir}",
    ]  # fmt: skip
    samples: list[tuple[float, float]] = []
    try:
        with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
            started = time.monotonic()
            while proc.poll() is None:
                rss = rss_mib(proc.pid)
                if rss is not None:
                    samples.append((time.monotonic() - started, rss))
                time.sleep(args.poll)  # --quick: 0.5 s, a few samples in a 3 s window
            err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.returncode != 0:
            raise SystemExit(f"slob run failed ({proc.returncode}): {err.strip()[-500:]}")
        # the window: after connect/setup checks; the first tenth settles the allocator
        early = [rss for t, rss in samples if t >= args.seconds * 0.1]
        if len(early) < 2:
            raise SystemExit("client_memory: too few samples; run longer")
        first, last, peak = early[0], early[-1], max(early)
        intervals = args.seconds / INTERVAL_S
        per_1000 = (last - first) / (intervals * 0.9) * 1000
        print(
            f"client_memory: {args.seconds:g} s at {INTERVAL_S} s intervals "
            f"({intervals:,.0f} intervals, {args.sessions} sessions)  RSS {first:.1f} MiB at "
            f"10 % -> {last:.1f} MiB at the end (peak {peak:.1f})  growth {last - first:+.2f} MiB "
            f"= {per_1000:+.3f} MiB per 1,000 intervals   goal < 1"
        )
    finally:
        bench.close()
        if os.environ.get("KEEP_RESULTS") is None:
            subprocess.run(["rm", "-rf", str(results)], check=False)


if __name__ == "__main__":
    main()
