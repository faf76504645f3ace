#!/usr/bin/env python3
"""lio_efficiency: logical reads/s of the work loop, (a) timed vs untimed, (b) vs pgbench.

lio profile: the data set sits in shared_buffers (prewarmed), so every SLOBop is the same
WORK_UNIT=64 block visits and ops/s is logical reads/s ÷ 64 on both sides of each ratio.
(a) the loop with per-op timing and histograms (the window) ÷ the same loop without them:
    the cost of measuring. Goal >= 0.95.
(b) the loop ÷ pgbench running the same SELECT back to back (-M prepared, random key, same
    number of sessions; pgbench comes with the wheel): the cost of a client round trip per
    op that the in-database loop avoids. Goal >= 1.0 at every N.
Sides alternate within each repeat so drift on a noisy VM hits both.

    python bench/lio_efficiency.py --sessions 1,2,4 --seconds 10 --repeats 3
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg
from _common import Bench, ints, parse_args, spread

from openslob.engines.postgres.workload import SESSION_SETTINGS, call_statement
from openslob.model.plan import session_schemas
from openslob.runner.loopconf import loop_conf

WORK_UNIT = 64


def loop_ops_per_s(bench: Bench, n: int, seconds: float, timed: bool) -> float:
    # Every session on user1, as pgbench's script: both sides touch the same 64 MB.
    config = bench.config(SCHEMAS=1, SCALE=8192, UPDATE_PCT=0, SESSIONS=n, WORK_UNIT=WORK_UNIT)
    schemas = session_schemas(config)
    start = time.time() + 0.5 + 0.01 * n
    conf = loop_conf(
        config, record=timed, start_epoch=start, until_epoch=start + seconds, loops=0, seed=None
    )
    ops = [0] * n

    def session(i: int) -> None:
        with psycopg.connect(bench.server.conninfo(), autocommit=True) as conn:
            conn.execute("; ".join(SESSION_SETTINGS))
            result = conn.execute(call_statement(schemas[i]), [json.dumps(conf)]).fetchone()[0]
            ops[i] = result["ops"]

    threads = [threading.Thread(target=session, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(ops) / seconds


def pgbench_ops_per_s(bench: Bench, n: int, seconds: float, script: Path) -> float:
    info = json.loads((bench.server.data_dir / "instance.json").read_text())
    command = [
        str(bench.server.bin_dir / "pgbench"),
        "-n",
        "-M",
        "prepared",
        "-c",
        str(n),
        "-j",
        str(n),
        "-T",
        str(max(1, round(seconds))),
        "-f",
        str(script),
        "-h",
        info["socket_dir"],
        "-p",
        str(info["port"]),
        "-U",
        "openslob",
        "slob",
    ]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    match = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
    if not match:
        raise RuntimeError(f"unexpected pgbench output: {out[-300:]}")
    return float(match.group(1))


def prewarm(bench: Bench) -> None:
    with psycopg.connect(bench.server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        for i in range(1, 5):
            conn.execute(
                "SELECT pg_prewarm(%s), pg_prewarm(%s)", [f"user{i}.cf1", f"user{i}.cf1_custid"]
            )


def main() -> None:
    args = parse_args(
        __doc__,
        {"sessions": "1,2,4", "seconds": 10.0, "repeats": 3},
        {"sessions": "1", "seconds": 1.0, "repeats": 1},
    )
    counts = ints(args.sessions)
    bench = Bench(args.data_dir, "lio")
    script = Path(tempfile.mkdtemp(prefix="lio-")) / "select.sql"
    script.write_text(
        f"\\set k random({WORK_UNIT}, 8192)\n"
        f"SELECT count(c2) FROM user1.cf1 WHERE custid BETWEEN :k - {WORK_UNIT - 1}"
        " AND :k;\n"
    )
    try:
        bench.ensure_data(bench.config(SCHEMAS=4, SCALE=8192, SESSIONS=max(counts)), max(counts))
        prewarm(bench)
        loop_ops_per_s(bench, 1, 1, timed=False)  # plans and caches warm
        print(f"lio_efficiency: lio profile, {args.seconds:g} s per side, {args.repeats} repeats")
        for n in counts:
            timed, untimed, pgbench = [], [], []
            for _ in range(args.repeats):
                untimed.append(loop_ops_per_s(bench, n, args.seconds, timed=False))
                timed.append(loop_ops_per_s(bench, n, args.seconds, timed=True))
                pgbench.append(pgbench_ops_per_s(bench, n, args.seconds, script))
            cost = [t / u for t, u in zip(timed, untimed, strict=True)]
            vs_pgbench = [t / b for t, b in zip(timed, pgbench, strict=True)]
            print(
                f"  N={n}: loop {spread([v * WORK_UNIT for v in timed], 0)} LIO/s timed, "
                f"{spread([v * WORK_UNIT for v in untimed], 0)} untimed; pgbench "
                f"{spread([v * WORK_UNIT for v in pgbench], 0)} LIO/s"
            )
            print(f"        (a) timed / untimed = {spread(cost, 3)}   goal >= 0.95")
            print(f"        (b) loop / pgbench  = {spread(vs_pgbench, 2)}   goal >= 1.0")
    finally:
        bench.close()


if __name__ == "__main__":
    main()
