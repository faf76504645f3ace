"""Every openslob parameter, in one declarative table.

slob.conf parsing (slobconf.py), CLI flags, ``--help`` text, validation (option.py) and the
``config`` block of run.json (resolve.py) all come from :data:`OPTIONS`, so a parameter is
added or changed in exactly one place. Precedence is SLOB's own: built-in defaults <
slob.conf < command-line flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from openslob.config.option import (
    BLOCK_SIZE,
    DATA_SCOPES,
    DAY,
    MAX_SESSIONS,
    RUN_SCOPES,
    SCOPES,
    SETUP_SCOPES,
    Option,
)

OPTIONS: tuple[Option, ...] = (
    # --- data set (setup, verify, destroy, run) ---
    Option(
        "SCHEMAS", "int", 4,
        "Number of SLOB schemas (user1..userN); SLOB takes this as the setup.sh/runit.sh "
        "argument.",
        DATA_SCOPES, slob=False, minimum=1, maximum=MAX_SESSIONS, metavar="N", workload=True,
    ),
    Option(
        "SCALE", "blocks", 8192,
        "Rows per schema in table CF1; one row fills one 8 KiB block, so this is also blocks "
        "per schema (a size such as 1G is divided by the block size).",
        DATA_SCOPES, minimum=100, maximum=2**40, workload=True,
    ),
    Option(
        "SCAN_TABLE_SZ", "blocks", 128,
        "Size of each schema's unindexed scan table CF2, read by full scans when SCAN_PCT > 0; "
        "0 creates no scan table.",
        DATA_SCOPES, minimum=0, maximum=2**40, workload=True, needs="SCAN_PCT",
    ),
    Option(
        "LOAD_PARALLEL_DEGREE", "int", 2,
        "Concurrent load streams used by setup.",
        SETUP_SCOPES, minimum=1, maximum=64,
    ),
    Option(
        "SEED", "int", 1,
        "Seed of the random streams (load order and work-loop keys) so that runs are "
        "reproducible.",
        DATA_SCOPES, slob=False, minimum=0, maximum=2**31 - 1,
    ),
    Option(
        "COMPRESS_RATIO", "float", 1.0,
        "Compression ratio the storage below sees in the data files (as fio's "
        "buffer_compress_percentage, vdbench's compratio): 1 is incompressible (random bytes, "
        "the default, also what SLOB's OBFUSCATE_COLUMNS asks for); 2 halves what zlib-1 and "
        "lz4 store. Setup writes it, updates keep it, verify measures it (within 10 %).",
        DATA_SCOPES, slob=False, minimum=1.0, maximum=4.0, metavar="RATIO", workload=True,
    ),
    # --- the work loop (run) ---
    Option(
        "UPDATE_PCT", "int", 20,
        "Percent of SLOBops that UPDATE WORK_UNIT rows and COMMIT, the rest being SELECTs "
        "(any whole percent, where SLOB allows only 0-50 or 100).",
        RUN_SCOPES, minimum=0, maximum=100, unit="%", metavar="PCT", workload=True,
    ),
    Option(
        "SCAN_PCT", "int", 0,
        "Percent of SELECTs that are full scans of the scan table CF2 instead of index range "
        "scans.",
        RUN_SCOPES, minimum=0, maximum=100, unit="%", metavar="PCT", workload=True,
    ),
    Option(
        "RUN_TIME", "seconds", 300.0,
        "Length of the run; when WORK_LOOP > 0 the run ends after WORK_LOOP SLOBops instead.",
        RUN_SCOPES, minimum=1, maximum=30 * DAY,
    ),
    Option(
        "WORK_LOOP", "int", 0,
        "SLOBops per session; 0 runs for RUN_TIME instead.",
        RUN_SCOPES, minimum=0, maximum=10**12,
    ),
    Option(
        "WORK_UNIT", "int", 64,
        "Rows (one block each) that every SELECT or UPDATE visits through one index range scan.",
        RUN_SCOPES, minimum=1, maximum=1024, unit="rows", metavar="ROWS", workload=True,
    ),
    Option(
        "PREFETCH", "bool", False,
        "off: SLOB's one single-block read per row. on: the WORK_UNIT rows are read with "
        "read-ahead (PostgreSQL: bitmap heap scan with effective_io_concurrency, concurrent "
        "reads when io_method is worker or io_uring; MariaDB: InnoDB linear and random "
        "read-ahead for the run), as the Exadata seed's prefetch study.",
        RUN_SCOPES, slob=False, metavar="on|off", workload=True,
    ),
    Option(
        "RATE", "float", 0.0,
        "Target rate: total SLOBops per second over all sessions, each session following its "
        "own schedule (a share of RATE) inside the database loop; latency is then also "
        "measured from each op's intended start. 0 keeps SLOB's closed loop (each op starts "
        "when the last ends). A sweep also takes percentages of a closed-loop maximum it "
        "measures first (--rate 10%,50%,100%).",
        RUN_SCOPES, slob=False, minimum=0, maximum=10**7, unit="SLOBops/s", metavar="OPS/S",
    ),
    Option(
        "RATE_DIST", "choice", "POISSON",
        "Arrivals of a RATE schedule: POISSON (random, exponential gaps, reproducible with "
        "SEED) or UNIFORM (fixed spacing, sessions evenly staggered).",
        RUN_SCOPES, slob=False, choices=("POISSON", "UNIFORM"),
    ),
    Option(
        "REDO_STRESS", "choice", "LITE",
        "LITE updates two columns per row; HEAVY updates every pad column and writes far more "
        "WAL (redo).",
        RUN_SCOPES, choices=("LITE", "HEAVY"), workload=True,
    ),
    Option(
        "THREADS_PER_SCHEMA", "int", 1,
        "Sessions connected to each schema.",
        RUN_SCOPES, minimum=1, maximum=MAX_SESSIONS, workload=True,
    ),
    Option(
        "SESSIONS", "int", 0,
        "Total sessions of the run, spread over the schemas; 0 means SCHEMAS x "
        "THREADS_PER_SCHEMA.",
        RUN_SCOPES, slob=False, minimum=0, maximum=MAX_SESSIONS, workload=True,
    ),
    Option(
        "HOT_SCHEMA_FREQUENCY", "int", 0,
        "Every Nth SLOBop goes to schema user1 instead of the session's own schema; 0 disables "
        "the hot schema.",
        RUN_SCOPES, minimum=0, maximum=10**6, workload=True,
    ),
    Option(
        "DO_HOTSPOT", "bool", False,
        "Send every HOTSPOT_FREQUENCY-th SLOBop into a small hot region of each table.",
        RUN_SCOPES, workload=True,
    ),
    Option(
        "HOTSPOT_MB", "mb", 8,
        "Size of the hot region used when DO_HOTSPOT is TRUE.",
        RUN_SCOPES, minimum=1, workload=True, needs="DO_HOTSPOT",
    ),
    Option(
        "HOTSPOT_OFFSET_MB", "mb", 16,
        "Where the hot region starts, measured from the start of the table.",
        RUN_SCOPES, minimum=0, workload=True, needs="DO_HOTSPOT",
    ),
    Option(
        "HOTSPOT_FREQUENCY", "int", 3,
        "With DO_HOTSPOT, every Nth SLOBop picks its keys inside the hot region.",
        RUN_SCOPES, minimum=1, maximum=10**6, workload=True, needs="DO_HOTSPOT",
    ),
    Option(
        "THINK_TM_FREQUENCY", "int", 0,
        "Every Nth SLOBop is followed by think time; 0 disables think time.",
        RUN_SCOPES, minimum=0, maximum=10**6, workload=True,
    ),
    Option(
        "THINK_TM_MIN", "float", 0.1,
        "Shortest think time in seconds.",
        RUN_SCOPES, minimum=0, maximum=3600, unit="seconds", metavar="SECONDS",
        workload=True, needs="THINK_TM_FREQUENCY",
    ),
    Option(
        "THINK_TM_MAX", "float", 0.5,
        "Longest think time in seconds; each pause is drawn uniformly between THINK_TM_MIN and "
        "THINK_TM_MAX.",
        RUN_SCOPES, minimum=0, maximum=3600, unit="seconds", metavar="SECONDS",
        workload=True, needs="THINK_TM_FREQUENCY",
    ),
    Option(
        "PAGE_SIZE", "choice", "16K",
        "Database page size of a private server that chooses it per data directory (each "
        "size has its own server); a sweep over several sizes is the block-size study.",
        DATA_SCOPES, slob=False, choices=("4K", "8K", "16K", "32K", "64K"),
    ),
    Option(
        "SQLNET_SERVICE_BASE", "str", "",
        "Multi-instance runs as in SLOB: with SQLNET_SERVICE_MAX=N the instances are the libpq "
        "services BASE1..BASEN (pg_service.conf) when no --target is given.",
        DATA_SCOPES,
    ),
    Option(
        "SQLNET_SERVICE_MAX", "int", 0,
        "Number of instances BASE1..BASEN of SQLNET_SERVICE_BASE; sessions go round robin over "
        "them. 0: one instance (--target).",
        DATA_SCOPES, minimum=0, maximum=64,
    ),
    Option(
        "INSTANCES", "int", 0,
        "Run on the first N of the instances (--target given N or more times, or "
        "SQLNET_SERVICE_MAX); a sweep over 1,2,3 is the scale-out study. 0: all of them.",
        RUN_SCOPES, slob=False, minimum=0, maximum=64,
    ),
    Option(
        "SESSIONS_PER_INSTANCE", "int", 0,
        "Sessions on each instance: SESSIONS becomes this x the instances (INSTANCES, else "
        "SQLNET_SERVICE_MAX), so each instance's load stays the same across an instance "
        "sweep. 0: SESSIONS is the total.",
        RUN_SCOPES, slob=False, minimum=0, maximum=MAX_SESSIONS,
    ),
    Option(
        "EXTERNAL_SCRIPT", "path", "",
        "Executable called with pre, post and end around the run; empty for none.",
        RUN_SCOPES,
    ),
    Option(
        "WARMUP", "seconds", 5.0,
        "Load applied before the measured window opens; nothing is recorded during warm-up.",
        RUN_SCOPES, slob=False, minimum=0, maximum=DAY,
    ),
    Option(
        "REPEAT", "int", 1,
        "Runs of every point (of `slob run`: of the one run), interleaved across points "
        "(A B C A B C) so that drift does not look like a difference; each repeat is a run "
        "directory of its own and the point's summary gives median, min, max and CV.",
        RUN_SCOPES, slob=False, minimum=1, maximum=100, listable=False,
    ),
    Option(
        "SAMPLE_INTERVAL", "seconds", 1.0,
        "Length of a sampling interval: each session's CALL ends at its boundary, so every "
        "interval has its own op latency percentiles and exact I/O (rows of timeseries.csv).",
        RUN_SCOPES, slob=False, minimum=0.1, maximum=60,
    ),
    Option(
        "RESULTS_PER_S", "int", 16,
        "Most interval results a second each instance's sessions send the client (0: no "
        "limit). Above it each session keeps k intervals' results and answers every k-th "
        "boundary, staggered (k = sessions / (RESULTS_PER_S x SAMPLE_INTERVAL), rounded up, "
        "at most 16): "
        "each result costs the client ~0.3 ms and a PostgreSQL CALL end ~0.25 ms of server "
        "CPU, taken from CPU-bound sessions. Rows then come up to k intervals late, and a "
        "row's database counters are read at its boundary (PostgreSQL's: those the sessions "
        "published in it, each every k intervals; the window's total stays exact).",
        RUN_SCOPES, slob=False, minimum=0, maximum=1_000_000,
    ),
    # --- steady state (issue 27; model/steady.py) ---
    Option(
        "STEADY_STATE", "str", "",
        "Steady-state rules on the time series, as fio's ss= but on latency too: "
        "FIGURE:slope<PCT% or FIGURE:dev<PCT%, comma separated (iops:slope<10%,p99:dev<20%); "
        "FIGURE is slobops (SLOBops/s), iops (database physical reads + writes/s), mbps "
        "(database physical read + write MB/s) or p99 (op latency p99). Empty: no rule.",
        RUN_SCOPES, slob=False, metavar="RULES", listable=False,
    ),
    Option(
        "SS_WINDOW", "seconds", 30.0,
        "Length of the trailing window over which the steady-state rules are evaluated.",
        RUN_SCOPES, slob=False, minimum=1, maximum=DAY, listable=False,
    ),
    Option(
        "SS_RAMP", "seconds", 0.0,
        "Seconds into the measured window before steady-state evaluation collects intervals.",
        RUN_SCOPES, slob=False, minimum=0, maximum=DAY, listable=False,
    ),
    Option(
        "STOP_ON_STEADY", "bool", False,
        "End the window two interval boundaries after steady state is reached (the CALLs "
        "for them are queued; never before SS_RAMP + SS_WINDOW); complete, with a note.",
        RUN_SCOPES, slob=False, metavar="on|off", listable=False,
    ),
    Option(
        "EXTERNAL_SERIES", "path", "",
        "Latency or IOPS measured outside this host (array, hypervisor): a CSV time,name,value "
        "(epoch seconds or ISO 8601 with zone; the name's suffix _us, _ms or _per_s is its "
        "unit) or a Prometheus query_range JSON dump; aligned to the run's intervals and "
        "drawn in the latency waterfall. Empty for none.",
        RUN_SCOPES, slob=False,
    ),
    Option(
        "TRACE_LAYERS", "bool", False,
        "on: trace the database's read calls, its log syncs and the block device in the "
        "kernel (BPF programs of openslob's; root on the database's host, libbpf) as latency "
        "distributions per interval. Off by default: tracing every I/O costs ~2-3 % of "
        "SLOBops/s at 32 sessions on the 2-vCPU test VM (bench/ebpf_cost.py), and a monitor "
        "must not change what it measures.",
        RUN_SCOPES, slob=False, metavar="on|off",
    ),
    Option(
        "CLIENT_PRIORITY", "bool", True,
        "on: for the run the client takes nice -20 for its threads and its autogroup (root or "
        "CAP_SYS_NICE; PostgreSQL, whose sessions are processes) and runs them as SCHED_BATCH "
        "(run.json client.priority says what it got), so that no session waits for it or is "
        "preempted by it where the sessions saturate the CPUs; its CPU use is the same. off: "
        "as started.",
        RUN_SCOPES, slob=False, metavar="on|off", listable=False,
    ),
    # --- a cliff seen as it happens (model/cliff.py) ---
    Option(
        "CLIFF", "str", "ops:drop>30%,iops:drop>30%,p99:rise>100%",
        "Live cliff detection after each sampling interval of the window, against the median "
        "of the previous CLIFF_WINDOW calm intervals: FIGURE:drop>N% (ops = SLOBops/s, iops = "
        "database physical IOPS) or p99:rise>N% (op p99), joined by commas; off for none. A "
        "cliff is printed when it happens, exported, and kept in timeseries.csv and run.json.",
        RUN_SCOPES, slob=False, metavar="RULE|off", listable=False,
    ),
    Option(
        "CLIFF_WINDOW", "int", 5,
        "Sampling intervals in the trailing baseline of CLIFF (the median of the previous N "
        "calm intervals); judging starts once N are known.",
        RUN_SCOPES, slob=False, minimum=2, maximum=1000, metavar="N", listable=False,
    ),
)  # fmt: skip

OPTIONS_BY_NAME: Mapping[str, Option] = MappingProxyType({o.name: o for o in OPTIONS})

SLOB_KEYS_NOT_IMPLEMENTED: tuple[tuple[str, str], ...] = (
    ("DATABASE_STATISTICS_TYPE", "openslob always snapshots the database's own statistics"),
    ("ADMIN_SQLNET_SERVICE", "Oracle SQL*Net setting; openslob has its own connection options"),
    ("DBA_PRIV_USER", "Oracle admin account; openslob has its own connection options"),
    ("SYSDBA_PASSWD", "Oracle admin password; ignored and never recorded"),
    ("ADMIN_CONNECT_STRING", "Oracle connect string; openslob has its own connection options"),
    ("NON_ADMIN_CONNECT_STRING", "Oracle connect string; openslob has its own connection options"),
    ("BLOCK_SZ", f"sizes such as SCALE=1G are always converted with {BLOCK_SIZE}-byte blocks"),
    ("UNIQUE_INDEX", "openslob decides the index type of CF1 itself"),
    ("SHARED_DATA_MODULUS", "option of older SLOB 2.x releases, not in current SLOB"),
    ("DO_UPDATE_HOTSPOT", "option of older SLOB 2.x releases; use DO_HOTSPOT"),
    ("HOTSPOT_PCT", "option of older SLOB 2.x releases; use HOTSPOT_FREQUENCY"),
    ("THINK_TM_MODULUS", "option of older SLOB 2.x releases; use THINK_TM_FREQUENCY"),
)
NOT_IMPLEMENTED = dict(SLOB_KEYS_NOT_IMPLEMENTED)


def options_for(scope: str) -> tuple[Option, ...]:
    """The options a command uses, in table order; a typo in ``scope`` fails loudly."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; known: {', '.join(sorted(SCOPES))}")
    return tuple(o for o in OPTIONS if scope in o.scopes)
