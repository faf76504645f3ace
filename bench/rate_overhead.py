#!/usr/bin/env python3
"""rate_overhead: SLOBops/s of the loop with the RATE schedule code ÷ the loop before it, at RATE=0.

The schedule (RATE) adds a few tests per op to the PL/pgSQL loop even when RATE=0: whether
the session is paced, whether to time the op. What that costs a closed-loop run is measured
here against the loop as it was before the schedule existed (git BASELINE's
engines/postgres/workload.py, installed in its place), on the same data set, alternated
(A B A B ...) so that the host's drift does not look like a difference; each pair gives one
ratio. The default profile keeps the data set in shared_buffers ("lio"): ops are then short
and CPU-bound, the worst case for a per-op cost. Reads only, as in interval_overhead.py (a
fast update run outgrows the table's layout and would make the later runs differ).
Goal: ratio >= 0.99.

    python bench/rate_overhead.py --sessions 2 --seconds 20 --repeats 5
"""

from __future__ import annotations

import subprocess
import tempfile
import types
from pathlib import Path

import psycopg
from _common import Bench, ints, parse_args, spread
from psycopg import sql

from openslob.model.plan import session_schemas
from openslob.runner.execute import execute, prepare

# The loop before the schedule code (main before issue 16), read from git.
BASELINE = "c1df354"
LOOP_FILE = "src/openslob/engines/postgres/workload.py"


def baseline_loop() -> types.ModuleType:
    root = Path(__file__).resolve().parents[1]
    try:
        text = subprocess.run(
            ["git", "show", f"{BASELINE}:{LOOP_FILE}"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"rate_overhead: needs the git history ({BASELINE}): {exc}") from exc
    module = types.ModuleType("baseline_workload")
    exec(compile(text, f"{BASELINE}:{LOOP_FILE}", "exec"), module.__dict__)  # our own code
    return module


def install(loop: types.ModuleType, bench: Bench, schemas: list[str]) -> None:
    """`loop`'s procedure in place of each schema's (checked: the schedule code is gone)."""
    with psycopg.connect(bench.server.conninfo(), autocommit=True) as conn:
        for schema in schemas:
            # the current loop answers json, the baseline jsonb: both would make the CALL
            # run either one (the next prepare drops the baseline's again)
            conn.execute(
                sql.SQL("DROP PROCEDURE IF EXISTS {}(jsonb, json)").format(
                    sql.Identifier(schema, "slob_work")
                )
            )
            conn.execute(loop.procedure_ddl(schema, conn.info.server_version))
        installed = conn.execute(
            "SELECT prosrc FROM pg_proc WHERE proname = 'slob_work'"
            " AND pronamespace::regnamespace::text = ANY(%s)",
            (schemas,),
        ).fetchall()
    assert len(installed) == len(schemas)
    assert all("paced" not in row[0] for row in installed)


def main() -> None:
    args = parse_args(
        __doc__,
        {"sessions": "2", "seconds": 20.0, "repeats": 5, "profile": "lio", "warmup": 2.0},
        {"sessions": "2", "seconds": 1.0, "repeats": 1, "warmup": 0.0},
    )
    old = baseline_loop()
    bench = Bench(args.data_dir, args.profile)
    # the other scripts' data set: bench scripts share a server (tests) without reloading
    data = {
        "SCHEMAS": 4,
        "SCALE": 8192,
        "SCAN_TABLE_SZ": 128,
        "WARMUP": args.warmup,
        "UPDATE_PCT": 0,
    }
    results = Path(tempfile.mkdtemp(prefix="rate-overhead-"))
    try:
        for n in ints(args.sessions):
            config = bench.config(**data, SESSIONS=n, RUN_TIME=args.seconds)
            ops: dict[str, list[float]] = {"previous": [], "schedule": []}
            for i in range(args.repeats):
                for loop in ops:  # alternated: A B A B ...
                    prepared = prepare(config, target=None, data_dir=bench.server.data_dir)
                    try:
                        if loop == "previous":  # prepare installed the current loop
                            install(old, bench, sorted(set(session_schemas(config))))
                        run = execute(prepared, config, results / f"n{n}-{loop}-{i}")
                    finally:
                        prepared.release()
                    ops[loop].append(run["metrics"]["slobops_per_s"])
            ratios = [a / b for a, b in zip(ops["schedule"], ops["previous"], strict=True) if b]
            print(
                f"rate_overhead: {n:>3} sessions ({args.profile}, RATE=0)  "
                f"previous loop {spread(ops['previous'], 1)} ops/s  "
                f"with schedule {spread(ops['schedule'], 1)} ops/s  "
                f"ratio {spread(ratios, 3)}   goal >= 0.99"
            )
    finally:
        bench.close()


if __name__ == "__main__":
    main()
