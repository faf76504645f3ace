"""The AWR-like text report. Reads only a run.json dict: no engine, no database.

Every latency is computed from totals (time ÷ count), never rounded to whole milliseconds as
AWR does, and printed with its unit: us below 10 ms, ms from 10 ms (blocks.fmt_us). A figure
that was not measured prints as n/a. Lines fit WIDTH (100) columns: the wide tables (the I/O
breakdown, statements) keep their key columns unless rendered wide (`slob report --wide`);
run.json has them all.
"""

from __future__ import annotations

import textwrap
from typing import Any

from openslob.analysis.figures import value as figure_value
from openslob.model.loop import LOOP_RESULT
from openslob.model.metrics import DEFAULT_TERMS, label
from openslob.report.blocks import NA, WIDTH, fmt, fmt_us, latency_table, per_op, section, table
from openslob.report.cliff import cliff_section
from openslob.report.clocktext import clock_lines
from openslob.report.cluster import cluster_section
from openslob.report.intervaltext import interval_section
from openslob.report.ioshape import ioshape_lines
from openslob.report.layers import layers_section
from openslob.report.rate import rate_section
from openslob.report.steadytext import steady_section
from openslob.report.storage import storage_lines
from openslob.report.waterfall import waterfall_section


def _gib(size: int | None) -> float | None:
    return None if size is None else size / 2**30


def _header(run: dict[str, Any]) -> list[str]:
    engine, host, window, config = run["engine"], run["host"], run["window"], run["config"]
    sessions = run["sessions"]
    status = run["status"] + (f" ({run['error']})" if run.get("error") else "")
    head = [
        "openslob report".center(WIDTH).rstrip(),
        "=" * WIDTH,
        f"Status        : {status}",
        f"Label         : {run.get('label') or '-'}",
        f"Engine        : {engine.get('name')} {engine.get('version')}"
        f"   profile: {engine.get('profile') or '-'}   target: {engine.get('target')}",
        f"Host          : {host.get('hostname')}  {host.get('cpus')} CPUs  "
        f"{fmt(_gib(host.get('memory_bytes')), 1)} GiB  kernel {host.get('kernel')}",
        f"Devices       : {_devices(host.get('devices') or [])}",
        f"Window        : {window.get('start')} .. {window.get('end')}  "
        f"{fmt(window.get('seconds'), 1)} s (asked {fmt(window.get('requested_seconds'), 0)} s;"
        f" warm-up {fmt(window.get('warmup_seconds'), 0)} s)",
        f"Sessions      : {len(sessions)} over {len({s['schema'] for s in sessions})} schemas"
        f"{_on_instances(run)};"
        f" connected in {fmt(window.get('connect_seconds'), 2)} s",
        f"Work          : UPDATE_PCT={config.get('UPDATE_PCT')} SCAN_PCT={config.get('SCAN_PCT')}"
        f" WORK_UNIT={config.get('WORK_UNIT')} REDO_STRESS={config.get('REDO_STRESS')}"
        f" SCALE={fmt(config.get('SCALE'))} WORK_LOOP={config.get('WORK_LOOP')}"
        f" SEED={config.get('SEED')}",
    ]
    lines = [*head[:2], *(w for line in head[2:] for w in _wrap(line, WIDTH, indent=16))]
    extras = []
    if config.get("HOT_SCHEMA_FREQUENCY"):
        extras.append(f"HOT_SCHEMA_FREQUENCY={config['HOT_SCHEMA_FREQUENCY']}")
    if config.get("DO_HOTSPOT"):
        extras.append(
            f"HOTSPOT {config['HOTSPOT_MB']} MB at {config['HOTSPOT_OFFSET_MB']} MB "
            f"every {config['HOTSPOT_FREQUENCY']} ops"
        )
    if config.get("THINK_TM_FREQUENCY"):
        extras.append(
            f"THINK {config['THINK_TM_MIN']}-{config['THINK_TM_MAX']} s every "
            f"{config['THINK_TM_FREQUENCY']} ops"
        )
    if extras:
        lines.append(f"              : {'; '.join(extras)}")
    settings = engine.get("settings") or {}
    if settings:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))
        lines += _wrap(f"Settings      : {shown}", WIDTH, indent=16)
    return lines


def _on_instances(run: dict[str, Any]) -> str:
    count = len(run.get("instances") or [])
    return f" on {count} instances (round robin)" if count > 1 else ""


def _devices(devices: list[dict[str, Any]]) -> str:
    if not devices:
        return NA
    parts = []
    for d in devices:
        size = d.get("size_bytes")
        parts.append(
            f"{d.get('name')} ({fmt(size / 2**30 if size else None, 0)} GiB, "
            f"scheduler {d.get('scheduler') or NA})"
        )
    return ", ".join(parts)


def _wrap(text: str, width: int, indent: int) -> list[str]:
    """`text` in lines of at most `width`, the next ones indented; a word longer than a line
    (a target's URL) is cut."""
    return textwrap.wrap(text, width, subsequent_indent=" " * indent, break_on_hyphens=False) or [
        ""
    ]


def _terms(run: dict[str, Any]) -> dict[str, str]:
    """The engine's own words for what the report names (run.json engine.terms)."""
    return {**DEFAULT_TERMS, **((run.get("engine") or {}).get("terms") or {})}


def _log(run: dict[str, Any]) -> str:
    """The engine's name for its write-ahead log."""
    return _terms(run)["log"]


# The Load Profile's rows: metrics table keys, an indent for the op kinds under SLOBops.
LOAD_PROFILE = (
    ("slobops_per_s", 0),
    ("selects_per_s", 2),
    ("updates_per_s", 2),
    ("scans_per_s", 2),
    ("lio_per_s", 0),
    ("pio_reads_per_s", 0),
    ("pio_read_mb_per_s", 0),
    ("pio_writes_per_s", 0),
    ("pio_write_mb_per_s", 0),
    ("wal_mb_per_s", 0),
    ("wal_records_per_s", 0),
    ("wal_fpi_per_s", 0),
    ("commits_per_s", 0),
    ("device_reads_per_s", 0),
    ("device_writes_per_s", 0),
)


def _profile_label(key: str, run: dict[str, Any]) -> str:
    """The table's label in the engine's terms; "/s" dropped (the column is per second)."""
    return label(key, _terms(run)).removesuffix("/s")


def _load_profile(run: dict[str, Any]) -> list[str]:
    m = run["metrics"]
    ops = m.get("slobops_per_s")
    rows = [(" " * indent + _profile_label(key, run), m.get(key)) for key, indent in LOAD_PROFILE]
    lines = section("Load Profile")
    lines += table(
        ["", "Per Second", "Per SLOBop"],
        [[name, fmt(v), fmt(per_op(v, ops), 2)] for name, v in rows],
    )
    seconds = run["window"].get("seconds")
    db_cpu = m.get("db_cpu_s")
    lines.append("")
    lines.append(
        f"DB CPU: {fmt(db_cpu, 1, ' s')} ({fmt(per_op(db_cpu, seconds), 2)} CPUs busy)"
        f"   DB time (active sessions): {fmt(m.get('db_time_s'), 1, ' s')}"
    )
    return lines


def _latency(run: dict[str, Any]) -> list[str]:
    lines = section("SLOBop latency (measured inside the loop)")
    lines += latency_table(run["latency"])
    lines.append("Histogram buckets: 1 us below 128 us, then 64 per power of two (<= 0.8 % error).")
    return lines


def _io_profile(run: dict[str, Any], wide: bool) -> list[str]:
    m = run["metrics"]
    lines = section("I/O profile: database vs device")
    lines += table(
        ["", "Reads/s", "Read MB/s", "Read lat", "Writes/s", "Write MB/s", "Write lat"],
        [
            [
                f"Database ({_terms(run)['db_io']})",
                fmt(m.get("pio_reads_per_s")),
                fmt(m.get("pio_read_mb_per_s")),
                fmt_us(m.get("db_read_latency_us")),
                fmt(m.get("pio_writes_per_s")),
                fmt(m.get("pio_write_mb_per_s")),
                fmt_us(m.get("db_write_latency_us")),
            ],
            [
                "Device (/proc/diskstats)",
                fmt(m.get("device_reads_per_s")),
                fmt(m.get("device_read_mb_per_s")),
                fmt_us(m.get("device_read_latency_us")),
                fmt(m.get("device_writes_per_s")),
                fmt(m.get("device_write_mb_per_s")),
                fmt_us(m.get("device_write_latency_us")),
            ],
        ],
    )
    db, dev = m.get("pio_reads_per_s"), m.get("device_reads_per_s")
    if db and dev is not None:
        lines.append(f"Device reads = {dev / db * 100:.1f} % of database physical reads.")
    lines.append(
        f"Device: util {fmt(m.get('device_util_pct'), 1, ' %')}, avg queue "
        f"{fmt(m.get('device_avg_queue'), 2)}, avg read {fmt(m.get('device_avg_read_kb'), 1)} "
        f"KiB, avg write {fmt(m.get('device_avg_write_kb'), 1)} KiB"
    )
    io = run.get("io")
    if io:
        lines.append("")
        lines.append(f"{_terms(run).get('io_breakdown', _terms(run)['db_io'])} (window deltas)")
        lines += _io_table(io, wide)
    return lines


# The I/O breakdown's columns: (header, row key, is a count); the narrow report keeps the
# first KEY_IO_COLUMNS (the rest are often n/a or 0 for SLOB's reads: run.json has them).
IO_COLUMNS = (
    ("reads", "reads", True),
    ("read ms", "read_time", False),
    ("writes", "writes", True),
    ("write ms", "write_time", False),
    ("hits", "hits", True),
    ("evictions", "evictions", True),
    ("extends", "extends", True),
    ("fsyncs", "fsyncs", True),
)
KEY_IO_COLUMNS = 6


def _io_table(io: list[dict[str, Any]], wide: bool) -> list[str]:
    columns = IO_COLUMNS if wide else IO_COLUMNS[:KEY_IO_COLUMNS]
    return table(
        ["backend", "object", "context", *(c[0] for c in columns)],
        [
            [
                r["backend_type"],
                r["object"],
                r["context"],
                *(fmt(_int(r.get(k)) if count else r.get(k)) for _, k, count in columns),
            ]
            for r in io
        ],
        "lll" + "r" * len(columns),
    )


def _work(run: dict[str, Any]) -> list[str]:
    """Blocks per SLOBop against the layout's prediction, the tables before and after, and
    who held the cleanup horizon: whether the window measured SLOB's data set."""
    work, tables = run.get("work_per_op") or {}, run.get("tables")
    horizon, history = run.get("horizon") or {}, run.get("history_length")
    if not (work or tables or horizon or history):
        return []
    lines = section("Data set and work per SLOBop (blocks)")
    kinds = [k for k in ("select", "update", "scan", "all") if work.get(k)]
    if kinds:
        lines += table(
            ["op", "ops", "logical/op", "predicted", "physical/op", "at most"],
            [
                [
                    "all kinds" if k == "all" else k,
                    fmt(work[k]["ops"]),
                    fmt(work[k]["lio"], 1),
                    fmt(work[k]["lio_predicted"], 1),
                    fmt(work[k]["pio"], 1),
                    fmt(work[k]["pio_max_predicted"], 1),
                ]
                for k in kinds
            ],
        )
        lines += _wrap(f"Predicted: {work.get('model') or NA}.", WIDTH, indent=11)
        lines.append(f"Measured: {work.get('source')}.")
    else:
        lines.append("Work per op: n/a")
    cf1 = {n: c for n, c in (tables or {}).items() if n.endswith(".cf1")}
    if cf1:
        lines.append("")
        rows = [
            [
                name,
                fmt((c.get("before") or {}).get("pages")),
                fmt((c.get("after") or {}).get("pages")),
                fmt((c.get("before") or {}).get("dead_rows")),
                fmt((c.get("after") or {}).get("dead_rows")),
            ]
            for name, c in list(cf1.items())[:16]
        ]
        lines += table(["table", "pages before", "after", "dead rows before", "after"], rows)
        if len(cf1) > 16:
            lines.append(f"... {len(cf1) - 16} more tables in run.json")
    lines.append("")
    lines += _horizon_lines(horizon, history, _terms(run))
    return lines


def _horizon_lines(
    horizon: dict[str, Any], history: dict[str, Any] | None, terms: dict[str, str]
) -> list[str]:
    lines = []
    if history:
        lines.append(
            f"{terms.get('history', 'History length')}: {fmt(history.get('before'))} before, "
            f"{fmt(history.get('after'))} after the window"
        )
    if horizon.get("max_age_xids") is not None:
        lines.append(
            f"Oldest {terms.get('horizon', 'cleanup horizon')}: at most "
            f"{fmt(horizon['max_age_xids'])} transactions old "
            f"({fmt(horizon.get('samples'))} samples)"
        )
    holds = [h for h in horizon.get("holds") or [] if h["held_s"] >= 2.0]
    for hold in holds[:5]:
        lines.append(
            f"Held for {hold['held_s']:.0f} s by {hold['kind']} {hold['holder']}"
            f" ({hold.get('application') or hold.get('role') or '-'}, {hold.get('state') or '-'})"
        )
    if horizon.get("samples") and not holds:
        lines.append("Nothing held the cleanup horizon for 2 s or more.")
    return lines


def _fio_block_kib(fio: dict[str, Any]) -> str:
    """fio's read size; run.json files from before block_bytes was recorded read 8 KiB."""
    return fmt((fio.get("block_bytes") or 8192) // 1024)


def _calibration(run: dict[str, Any]) -> list[str]:
    cal = run.get("calibration")
    if not cal:
        return []
    lines = section("Raw device reference (fio, same concurrency and duration)")
    fio = cal.get("fio")
    if not fio:
        return [*lines, f"not measured: {cal.get('error') or NA}"]
    m = run["metrics"]
    lines += table(
        ["", "Reads/s", "Read MB/s", "Mean us", "p50 us", "p99 us"],
        [
            [
                "Database physical reads",
                fmt(m.get("pio_reads_per_s")),
                fmt(m.get("pio_read_mb_per_s")),
                fmt(m.get("db_read_latency_us")),
                NA,
                NA,
            ],
            [
                f"fio {fio['jobs']} jobs {_fio_block_kib(fio)} KiB randread",
                fmt(fio["iops"]),
                fmt(fio["read_mb_per_s"]),
                fmt(fio["mean_latency_us"]),
                fmt(fio["p50_latency_us"]),
                fmt(fio["p99_latency_us"]),
            ],
        ],
    )
    lines.append(
        f"Database physical reads = {fmt(cal.get('pio_reads_pct_of_fio'))} % of raw "
        f"device IOPS at the same concurrency; DB read latency = "
        f"{fmt(cal.get('db_read_latency_vs_fio'), 2)} x fio's."
    )
    return lines


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _wal(run: dict[str, Any]) -> list[str]:
    m = run["metrics"]
    commits, syncs = m.get("commits_per_s"), m.get("wal_syncs_per_s")
    lines = section(f"{_terms(run).get('log_long', _log(run))} and commits")
    lines += table(
        ["", "Value"],
        [
            ["Commits/s", fmt(commits)],
            [f"{_log(run)} syncs/s (fsync/fdatasync)", fmt(syncs)],
            [
                f"Commits per {_log(run)} sync",
                fmt(commits / syncs if commits and syncs else None, 2),
            ],
            [f"{_log(run)} writes/s", fmt(m.get("wal_writes_per_s"))],
            [f"{_log(run)} MB/s", fmt(m.get("wal_mb_per_s"), 2)],
            [
                f"{_log(run)} bytes per commit",
                fmt(
                    m["wal_mb_per_s"] * 2**20 / commits
                    if commits and m.get("wal_mb_per_s") is not None
                    else None,
                    0,
                ),
            ],
            [f"{_log(run)} sync latency", fmt_us(m.get("wal_sync_latency_us"))],
        ],
    )
    return lines


def _waits(run: dict[str, Any]) -> list[str]:
    hz = run.get("wait_sample_hz")
    rate = f" at {hz:g} Hz" if hz else ""
    lines = section(f"Top wait events (sampled {run.get('wait_samples', 0):,} times{rate})")
    waits = run.get("waits") or []
    if not waits:
        return [*lines, NA]
    lines += table(
        ["event", "samples", "% of samples"],
        [[w["event"], fmt(w["samples"]), fmt(w["pct"], 1)] for w in waits[:10]],
    )
    lines.append("CPU = active with no wait event (on CPU or waiting for it).")
    return lines


def _os(run: dict[str, Any]) -> list[str]:
    m = run["metrics"]
    lines = section("Operating system")
    lines += table(
        ["", "Value"],
        [
            ["CPU user %", fmt(m.get("cpu_user_pct"))],
            ["CPU sys %", fmt(m.get("cpu_sys_pct"))],
            ["CPU iowait %", fmt(m.get("cpu_iowait_pct"))],
            ["CPU idle %", fmt(m.get("cpu_idle_pct"))],
            ["CPU steal %", fmt(m.get("cpu_steal_pct"))],
            ["Server processes CPU %", fmt(m.get("server_cpu_pct"))],
            ["PSI io some %", fmt(m.get("psi_io_some_pct"))],
            ["PSI cpu some %", fmt(m.get("psi_cpu_some_pct"))],
        ],
    )
    return lines


# Characters of a statement's text shown: the narrow report stays within WIDTH.
QUERY_NARROW, QUERY_WIDE = 28, 100


# run.json keeps the top statements by time and every statement of the work loop
TOP_STATEMENTS = 10


def _statements(run: dict[str, Any], wide: bool) -> list[str]:
    source = _terms(run).get("statements")
    if source is None:
        return []  # the engine has no per-statement I/O counters (the notes say so)
    rows = run.get("statements")
    lines = section(f"Top statements by time ({source})")
    if not rows:
        return [*lines, NA]
    log_mb = f"{_log(run)} MB"
    lines += table(
        ["op", "calls", "total ms", "per call", "blks read", "read/blk", log_mb, "query"],
        [
            [
                r.get("slobop") or "-",
                fmt(_int(r.get("calls"))),
                fmt(r.get("total_exec_time"), 0),
                fmt_us(r["total_exec_time"] * 1000 / r["calls"] if r.get("calls") else None),
                fmt(_int(r.get("shared_blks_read"))),
                fmt_us(
                    r["read_time_ms"] * 1000 / r["shared_blks_read"]
                    if r.get("shared_blks_read") and r.get("read_time_ms")
                    else None
                ),
                fmt(None if r.get("wal_bytes") is None else r["wal_bytes"] / 2**20, 2),
                " ".join(r["query"].split())[: QUERY_WIDE if wide else QUERY_NARROW],
            ]
            for r in rows[:TOP_STATEMENTS]
        ],
        "l" + "r" * 6 + "l",
    )
    if len(rows) > TOP_STATEMENTS:  # the work loop's statements that took less time
        lines.append(f"  … and {len(rows) - TOP_STATEMENTS} more statements of the work loop")
    return lines


def _sessions(run: dict[str, Any]) -> list[str]:
    sessions = run["sessions"]
    multi = len(run.get("instances") or []) > 1  # schema@instance
    lines = section("Sessions")
    shown = sessions if len(sessions) <= 64 else sessions[:64]
    lines += table(
        [
            "id",
            "schema",
            "pid",
            "selects",
            "updates",
            "scans",
            "ops/s",
            "mean",
            "p99",
            "error",
        ],
        [
            [
                s["id"],
                s["schema"] + (f"@{s.get('instance', 0) + 1}" if multi else ""),
                s.get("pid") or NA,
                fmt(s.get(LOOP_RESULT.ops_select.key)),  # the loop's own names
                fmt(s.get(LOOP_RESULT.ops_update.key)),
                fmt(s.get(LOOP_RESULT.ops_scan.key)),
                fmt(s.get("ops_per_s")),
                fmt_us(s.get("mean_us")),
                fmt_us(s.get("p99_us")),
                s.get("error") or "",
            ]
            for s in shown
        ],
        "rlr" + "r" * 6 + "l",
    )
    if len(sessions) > len(shown):
        lines.append(f"... {len(sessions) - len(shown)} more sessions in run.json")
    if not multi:  # a run over several instances has them under Instances
        lines += clock_lines(run)
    window = run.get("window") or {}
    if window.get("calls"):
        step, gap = fmt(run["config"].get("SAMPLE_INTERVAL")), window.get
        streamed = window.get("streamed")
        how = (
            f"{streamed:,} of them streamed by a CALL that went on"
            if streamed
            else "each the end of a CALL"
            if streamed == 0
            else "n/a streamed"
        )
        batch, answers = window.get("batch"), window.get("answers")
        batched = (
            f"; in {answers:,} answers, up to {batch} intervals each (RESULTS_PER_S: rows came "
            f"up to {batch} intervals late, each row's database counters read once its "
            "boundary's answers were in)"
            if batch and batch > 1 and answers is not None
            else ""
        )
        lines += _wrap(
            f"Interval results: {window['calls']:,} (one per session per {step} s interval; "
            f"{how}{batched}); between a session's results: mean "
            f"{fmt(gap('call_gap_mean_ms'), 2)} ms, "
            f"max {fmt(gap('call_gap_max_ms'), 2)} ms, {fmt(gap('call_gap_pct'), 3)} % of its "
            "time",
            WIDTH,
            indent=7,
        )
    return lines


def _instances(run: dict[str, Any]) -> list[str]:
    """Each instance of a multi-instance run beside the total (the Load Profile's figures)."""
    instances = run.get("instances") or []
    if len(instances) < 2:
        return []
    columns = (
        ("SLOBops/s", "slobops_per_s", 0),
        ("reads/s", "pio_reads_per_s", 0),
        ("writes/s", "pio_writes_per_s", 0),
        ("read us", "db_read_latency_us", 0),
        (f"{_log(run)} MB/s", "wal_mb_per_s", 1),
        ("commits/s", "commits_per_s", 0),
        ("dev reads/s", "device_reads_per_s", 0),
        ("dev read us", "device_read_latency_us", 0),
        ("DB time s", "db_time_s", 1),
    )

    def row(name: str, sessions: Any, part: dict[str, Any]) -> list[str]:
        metrics = part.get("metrics") or {}
        cells = [fmt(metrics.get(k), d) for _, k, d in columns]
        return [name, str(sessions), *cells, fmt(figure_value(part, "op_p99_us"), 0)]

    lines = section("Instances")
    rows = [
        row(f"{k + 1} {i['target']}", len(i.get("sessions") or []), i)
        for k, i in enumerate(instances)
    ]
    rows.append(row("total", len(run["sessions"]), run))
    lines += table(["instance", "sessions", *(c for c, _, _ in columns), "op p99 us"], rows)
    lines.append(
        "(rates add; read latency is weighted by reads; a host shared by instances counts once "
        "in device figures; op p99: the SLOBops of all types, from the in-loop histograms)"
    )
    return lines + clock_lines(run)


def _warnings(run: dict[str, Any]) -> list[str]:
    items = run.get("warnings") or []
    notes = run.get("notes") or []
    if not items and not notes:
        return []
    lines = section("Warnings")
    lines += [w for item in items for w in _wrap(f"! {item}", WIDTH, indent=2)] or ["none"]
    lines += [w for note in notes for w in _wrap(f"note: {note}", WIDTH, indent=6)]
    return lines


def render_text(run: dict[str, Any], wide: bool = False) -> str:
    """The report; `wide` keeps every column of the wide tables (`slob report --wide`)."""
    parts = [
        _header(run),
        _warnings(run),
        _load_profile(run),
        _instances(run),
        _latency(run),
        layers_section(run),
        waterfall_section(run),
        cluster_section(run),
        interval_section(run),
        cliff_section(run),
        rate_section(run),
        steady_section(run),
        _work(run),
        storage_lines(run),
        _io_profile(run, wide),
        ioshape_lines(run),
        _calibration(run),
        _wal(run),
        _waits(run),
        _os(run),
        _statements(run, wide),
        _sessions(run),
    ]
    return "\n".join(line for part in parts for line in part) + "\n"
