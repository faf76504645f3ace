"""The SLOB work loop as a PL/pgSQL procedure, one per schema.

Each schema gets its own `userN.slob_work` so that every statement is static SQL naming its
tables: PL/pgSQL prepares each once per session and reuses the plan (no EXECUTE of a built
string per op, pgio's cost). The hot-schema statements name user1's tables the same way.

One CALL runs one sampling interval of a phase (warm-up, or the measurement window) for one
session and returns that interval's counts and latency histograms as json; the runner sends
the next CALL at once (runner/intervals.py). PostgreSQL publishes a backend's I/O and
transaction statistics only when a statement ends, so each CALL's end publishes exactly its
interval's I/O (pg_stat_force_next_flush), and the warm-up's last CALL flushes its I/O
before the window's "before" snapshot. With `batch` k > 1 (runner/batches.py) a CALL runs
until its session's k-th boundary instead, keeps each earlier interval's result in the
session's PENDING_SETTING slots (committed, so a cancel at a stop leaves them) and returns them all
as a json array: its I/O is then published every k intervals. A CALL carries on where the
previous one stopped:
`op_base` continues the op counter (the every-Nth-op patterns), random() keeps its state in
the backend, and `result.next` says what the next CALL's conf takes over.

LITE updates c2 and c3, HEAVY all 19 pad columns. c2 and c3 hold nearly all of a row's bytes
(dataset.py; c4..c20 are empty), so both rewrite ~400 bytes per row: the dead versions an
update leaves in the page then share almost nothing with the live row, and the page stays
incompressible. New values are sha512 of 16 bytes from gen_random_uuid() per op and the
key: full entropy, different in every row and every update, even when a run replays the same
seed, and the row keeps its length (its HOT update still fits in the page).
"""

from __future__ import annotations

import textwrap

import psycopg
from psycopg import sql

from openslob.engines.common.loopsql import next_pairs, pair_list, result_pairs
from openslob.engines.common.rows import one
from openslob.engines.postgres.dataset import META_SCHEMA, PAD_COLUMNS
from openslob.engines.postgres.layout import WIDE_BYTES, WIDE_COLUMNS
from openslob.engines.postgres.looptext import BUCKET_TEXT, LOOP_TEXT
from openslob.engines.postgres.rowbytes import random_bytes
from openslob.model.histogram import LINEAR_LIMIT, SLOTS, SUB_BUCKETS
from openslob.model.loop import LOOP_PARAMS, LOOP_RESULT
from openslob.model.rate import LATE_1MS_US, LATE_10MS_US

PROCEDURE = "slob_work"
LITE_COLUMNS = ("c2", "c3")


def _set_list(columns: tuple[str, ...], ratio: float = 1.0) -> sql.Composable:
    """New c2 and c3: WIDE_BYTES of sha512(v, key, column) (at the data set's
    COMPRESS_RATIO); empty columns stay empty."""
    sets = []
    for c in columns:
        if c in WIDE_COLUMNS:
            column = PAD_COLUMNS.index(c) + 2
            value = random_bytes("custid", column, WIDE_BYTES, salt="v", ratio=ratio)
        else:
            value = sql.SQL("''::bytea")
        sets.append(sql.SQL("{} = {}").format(sql.Identifier(c), value))
    return sql.SQL(", ").join(sets)


def procedure_ddl(
    schema: str, server_version: int, hot_schema: str = "user1", ratio: float = 1.0
) -> sql.Composed:
    """CREATE OR REPLACE PROCEDURE userN.slob_work for one schema."""
    return sql.SQL(LOOP_TEXT).format(
        proc=sql.Identifier(schema, PROCEDURE),
        cf1=sql.Identifier(schema, "cf1"),
        cf2=sql.Identifier(schema, "cf2"),
        hot_cf1=sql.Identifier(hot_schema, "cf1"),
        hot_cf2=sql.Identifier(hot_schema, "cf2"),
        heavy_set=_set_list(PAD_COLUMNS, ratio),
        lite_set=_set_list(LITE_COLUMNS, ratio),
        slots=sql.SQL(str(SLOTS)),
        bucket=_bucket_code(indent=16),
        hist_add=_hist_add_code(indent=16),
        late1=sql.SQL(str(LATE_1MS_US)),
        late10=sql.SQL(str(LATE_10MS_US)),
        result=sql.SQL(pair_list(result_pairs(RESULT_SQL), indent=8)),
        flush=sql.SQL(flush_sql(server_version)),
        next=sql.SQL(pair_list(next_pairs(NEXT_SQL), indent=8)),
        next_setting=sql.SQL(NEXT_SETTING),
        pending_setting=sql.SQL(PENDING_SETTING),
        call_ended=sql.SQL(LOOP_RESULT.call_ended.key),
        sparse_sel=sql.SQL(_sparse("h_isel")),
        sparse_upd=sql.SQL(_sparse("h_iupd")),
        sparse_scan=sql.SQL(_sparse("h_iscan")),
    )


def _sparse(array: str) -> str:
    """{"idx": count} of a histogram array; NULL when there is no array (closed loop)."""
    return (
        f"CASE WHEN {array} IS NOT NULL THEN (SELECT coalesce(json_object_agg(i - 1,"
        f" {array}[i]), '{{}}') FROM generate_subscripts({array}, 1) i WHERE {array}[i] > 0) END"
    )


R, P = LOOP_RESULT, LOOP_PARAMS
# The loop's result (model/loop.py): each declared field's expression at the procedure's end.
RESULT_SQL: dict[str, str | None] = {
    R.ops.key: "op - ival_op",
    R.ops_select.key: "n_sel",
    R.ops_update.key: "n_upd",
    R.ops_scan.key: "n_scan",
    R.rows_selected.key: "rows_sel",
    R.rows_updated.key: "rows_upd",
    R.ops_hot_schema.key: "n_hot",
    R.ops_hotspot.key: "n_spot",
    R.think_count.key: "n_think",
    R.think_seconds.key: "think_s",
    R.released.key: "n_release",
    # Transactions of our own in the window: the snapshot releases and the CALL's last
    # transaction, which ends with it (the update COMMITs are the workload's).
    R.own_commits.key: "n_release + 1",
    R.next.key: "nxt",
    R.interval.key: "ival",
    R.busy_us.key: "busy_us",
    R.behind_s.key: "behind",
    R.late_1ms.key: "CASE WHEN paced AND record THEN late1 END",
    R.late_10ms.key: "CASE WHEN paced AND record THEN late10 END",
    R.max_lag_us.key: "max_lag",
    R.began_epoch.key: "began",
    R.ended_epoch.key: "ended",
    R.pid.key: "pg_backend_pid()",
    R.call_ended.key: "r_last",  # false: an interval the CALL kept, and went on (batch)
    R.hist_select.key: "j_sel",
    R.hist_update.key: "j_upd",
    R.hist_scan.key: "j_scan",
    R.hist_select_intended.key: "ji_sel",
    R.hist_update_intended.key: "ji_upd",
    R.hist_scan_intended.key: "ji_scan",
}
# The result's `next` (NEXT_SETTING keeps it in the server too).
NEXT_SQL = {
    P.op_base.key: "op",
    P.next_start.key: "sched",
    P.loops_left.key: "CASE WHEN bounded THEN greatest(loops - (op - op_base), 0) END",
}
# A session's custom setting: what its next CALL carries on from (the `carry` conf key).
NEXT_SETTING = "openslob.next"
# A session's custom setting: how many intervals its running CALL has kept for its answer
# (batch > 1), each in PENDING_SETTING_n (n = 1, 2, ...); RunBackend.pending reads them
# after a stop.
PENDING_SETTING = "openslob.pending"
# Conf keys this loop does not read, and why.
PARAMS_NOT_READ = {
    P.rng_state.key: "random() keeps its state in the backend between CALLs",
    P.guard_lock.key: "the server cancels a lost client's CALL (client_connection_check)",
    P.guard_id.key: "as guard_lock",
    P.stream.key: "a backend publishes its I/O only when a statement ends: one CALL an interval",
}


# The op kinds' histograms in the loop (kind 0, 1, 2): their variables' suffix
HIST_KINDS = ("sel", "upd", "scan")


def _hist_add_code(indent: int) -> sql.Composable:
    """The op's bucket `idx` into its kind's histogram: its count, or a new bucket in the
    order first used (LOOP_TEXT declares p_*, t_* and c_*)."""
    heads = ["IF kind = 0 THEN", "ELSIF kind = 1 THEN", "ELSE"]
    branches = [
        f"""{head}
    at_b := p_{kind}[idx + 1];  n_{kind} := n_{kind} + 1;
    IF at_b > 0 THEN
        c_{kind}[at_b] := c_{kind}[at_b] + 1;
    ELSE
        t_{kind} := t_{kind} || idx;  c_{kind} := c_{kind} || 1;
        p_{kind}[idx + 1] := cardinality(t_{kind});
    END IF;"""
        for head, kind in zip(heads, HIST_KINDS, strict=True)
    ]
    return sql.SQL(textwrap.indent("\n".join(branches) + "\nEND IF;\n", " " * indent))


def _bucket_code(indent: int) -> sql.Composable:
    """The histogram bucket of `us` into `idx` (the formula of openslob.model.histogram)."""
    code = BUCKET_TEXT.format(
        linear=LINEAR_LIMIT, sub=SUB_BUCKETS, sub2=2 * SUB_BUCKETS, slots=SLOTS
    )
    return sql.SQL(textwrap.indent(code, " " * indent))


def bucket_function_ddl() -> sql.Composed:
    """pg_temp.slob_bucket(us): the loop's bucket code as a function, for tests."""
    return sql.SQL(
        "CREATE FUNCTION pg_temp.slob_bucket(us bigint) RETURNS int LANGUAGE plpgsql AS $f$"
        " DECLARE e int; idx int; BEGIN {code} RETURN idx; END $f$"
    ).format(code=_bucket_code(indent=0))


def recorded_ratios(conn: psycopg.Connection) -> dict[str, float]:
    """COMPRESS_RATIO each schema's cf1 was loaded with (updates write the same)."""
    meta = f"{META_SCHEMA}.datasets"
    if one(conn.execute("SELECT to_regclass(%s)", [meta]).fetchone())[0] is None:
        return {}
    (has_ratio,) = one(
        conn.execute(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = %s::regclass"
            " AND attname = 'compress_ratio' AND NOT attisdropped",
            [meta],
        ).fetchone()
    )
    if not has_ratio:
        return {}
    rows = conn.execute(
        sql.SQL("SELECT schema_name, compress_ratio FROM {} WHERE table_name = 'cf1'").format(
            sql.Identifier(META_SCHEMA, "datasets")
        )
    ).fetchall()
    return {r[0]: float(r[1]) for r in rows}


def install_procedures(conn: psycopg.Connection, schemas: list[str]) -> None:
    ratios = recorded_ratios(conn)
    for schema in schemas:
        # Before 2026-11-29 the answer was jsonb: a procedure of that signature would stay
        # beside this one (an INOUT parameter is part of a procedure's identity), and the
        # CALL's NULL argument would run whichever PostgreSQL picks (checked: no error).
        conn.execute(
            sql.SQL("DROP PROCEDURE IF EXISTS {}(jsonb, jsonb)").format(
                sql.Identifier(schema, PROCEDURE)
            )
        )
        ddl = procedure_ddl(schema, conn.info.server_version, ratio=ratios.get(schema, 1.0))
        conn.execute(ddl)
    # Left by earlier versions, whose wait sampler was a function in this database.
    conn.execute(
        sql.SQL("DROP FUNCTION IF EXISTS {}(text, float8, float8, float8)").format(
            sql.Identifier(META_SCHEMA, "ash_sample")
        )
    )


def flush_sql(server_version: int) -> str:
    """pg_stat_force_next_flush() (15+) makes the idle-time flush after a CALL complete and
    immediate; older servers send their statistics on their own schedule."""
    return "PERFORM pg_stat_force_next_flush();" if server_version >= 150000 else ""


def call_statement(schema: str, placeholder: str = "%s") -> sql.Composed:
    """The work CALL; placeholder "$1" for libpq itself (runner.call)."""
    return sql.SQL("CALL {}(" + placeholder + "::jsonb, NULL)").format(
        sql.Identifier(schema, PROCEDURE)
    )


# Session settings of a work session: SLOB reads one block at a time through the index.
SESSION_SETTINGS = (
    # A bitmap heap scan would prefetch the range's pages concurrently (read streams):
    # not SLOB's single-block read. Seq scans stay possible where nothing else is (cf2).
    "SET enable_bitmapscan = off",
    "SET enable_seqscan = off",
    # Generic plans from the first execution: no re-planning while the run measures.
    "SET plan_cache_mode = force_generic_plan",
    "SET jit = off",
    "SET synchronous_commit = on",
)
# A loop whose client died (kill -9, a lost host) must not run on until its deadline, which
# RUN_TIME may put days away: the server polls the client's socket while a statement runs
# (14+) and cancels it once the client is gone. The wait sampler sets it too.
CLIENT_CHECK = "SET client_connection_check_interval = '1s'"
CLIENT_CHECK_VERSION = 140000
# PREFETCH=on: the WORK_UNIT rows through a bitmap heap scan, whose read stream (PG 18; a
# posix_fadvise hint before) asks for up to effective_io_concurrency pages ahead. With
# io_method=worker/io_uring those reads are in flight together; with io_method=sync they are
# still one synchronous read at a time (and direct I/O makes fadvise a no-op): run notes.
PREFETCH_IO_CONCURRENCY = 64
PREFETCH_SETTINGS = (
    "SET enable_bitmapscan = on",
    "SET enable_indexscan = off",  # the range must take the bitmap path, not the index scan
    f"SET effective_io_concurrency = {PREFETCH_IO_CONCURRENCY}",
)


def session_settings(server_version: int, prefetch: bool = False) -> str:
    """The work session's settings, as one statement list."""
    checks = (CLIENT_CHECK,) if server_version >= CLIENT_CHECK_VERSION else ()
    extra = PREFETCH_SETTINGS if prefetch else ()
    return "; ".join((*SESSION_SETTINGS, *extra, *checks))
