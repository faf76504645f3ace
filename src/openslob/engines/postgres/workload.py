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
from openslob.engines.postgres.rowbytes import random_bytes
from openslob.model.histogram import LINEAR_LIMIT, SLOTS, SUB_BUCKETS
from openslob.model.loop import LOOP_PARAMS, LOOP_RESULT
from openslob.model.rate import LATE_1MS_US, LATE_10MS_US

PROCEDURE = "slob_work"
LITE_COLUMNS = ("c2", "c3")

_BUCKET = """
IF us < {linear} THEN
    idx := greatest(us, 0)::int;
ELSE
    -- e = floor(log2(us)) - 6 in float8 (cheap), then corrected for rounding.
    e := floor(ln(us::float8) / 0.6931471805599453)::int - 6;
    IF us >= ({sub2}::bigint << e) THEN
        e := e + 1;
    ELSIF us < ({sub}::bigint << e) THEN
        e := e - 1;
    END IF;
    idx := least({sub} * e + (us >> e)::int, {slots} - 1);
END IF;
"""

_TEMPLATE = """
CREATE OR REPLACE PROCEDURE {proc}(p_conf jsonb, INOUT result json DEFAULT NULL)
LANGUAGE plpgsql AS $body$
DECLARE
    update_pct  float8  := (p_conf->>'update_pct')::float8;
    scan_pct    float8  := (p_conf->>'scan_pct')::float8;
    work_unit   bigint  := (p_conf->>'work_unit')::bigint;
    scale       bigint  := (p_conf->>'scale')::bigint;
    heavy       boolean := (p_conf->>'heavy')::boolean;
    loops       bigint  := coalesce((p_conf->>'loops')::bigint, 0);
    bounded     boolean := coalesce((p_conf->>'loops')::bigint, 0) > 0;
    op_base     bigint  := coalesce((p_conf->>'op_base')::bigint, 0);
    until_e     float8  := (p_conf->>'until_epoch')::float8;
    interval_s  float8  := (p_conf->>'interval_s')::float8;
    -- batch: answer (end the CALL) at the first boundary b with (b + b_off) % batch = 0
    batch       bigint  := greatest(coalesce((p_conf->>'batch')::bigint, 1), 1);
    b_off       bigint  := coalesce((p_conf->>'batch_offset')::bigint, 0);
    call_end    float8  := (p_conf->>'until_epoch')::float8;
    ival_op     bigint;  -- the op counter at the interval's start
    held        text[] := '{{}}';  -- the CALL's intervals before its last (the answer's head)
    r           json;
    r_last      boolean;
    carry       boolean := coalesce((p_conf->>'carry')::boolean, false);
    kept        jsonb;
    nxt         json;
    ival        bigint;
    start_e     float8  := (p_conf->>'start_epoch')::float8;
    record      boolean := (p_conf->>'record')::boolean;
    hot_freq    bigint  := (p_conf->>'hot_schema_frequency')::bigint;
    spot_freq   bigint  := (p_conf->>'hotspot_frequency')::bigint;
    spot_lo     bigint  := (p_conf->>'hotspot_first_key')::bigint;
    spot_hi     bigint  := (p_conf->>'hotspot_last_key')::bigint;
    think_freq  bigint  := (p_conf->>'think_frequency')::bigint;
    think_min   float8  := (p_conf->>'think_min')::float8;
    think_max   float8  := (p_conf->>'think_max')::float8;
    release_s   float8  := coalesce((p_conf->>'release_s')::float8, 0.01);
    -- RATE: this session's ops/s (0: closed loop), its next intended start, its arrivals
    rate        float8  := coalesce((p_conf->>'rate')::float8, 0);
    paced       boolean := coalesce((p_conf->>'rate')::float8, 0) > 0;
    uniform     boolean := p_conf->>'rate_dist' = 'UNIFORM';
    sched       float8  := (p_conf->>'next_start')::float8;
    wake        float8;
    nap_s       float8  := coalesce((p_conf->>'nap_s')::float8, 0.05);
    timed       boolean;
    intended float8; lag bigint; max_lag bigint; late1 bigint := 0; late10 bigint := 0;
    busy_us bigint := 0; behind float8 := 0;
    h_isel  int[]; h_iupd  int[]; h_iscan int[];
    h_sel   int[] := array_fill(0, ARRAY[{slots}]);
    h_upd   int[] := array_fill(0, ARRAY[{slots}]);
    h_scan  int[] := array_fill(0, ARRAY[{slots}]);
    -- the buckets each histogram has used, in the order first used (the result reads these)
    t_sel int[] := '{{}}'; t_upd int[] := '{{}}'; t_scan int[] := '{{}}';
    n_sel bigint := 0; n_upd bigint := 0; n_scan bigint := 0;
    n_hot bigint := 0; n_spot bigint := 0; n_think bigint := 0; think_s float8 := 0;
    rows_sel bigint := 0; rows_upd bigint := 0;
    op bigint := op_base; k bigint; lo bigint; cnt bigint; changed bigint; v bytea;
    hot boolean; kind int; pause float8;
    t0 float8; t1 float8; us bigint; e int; idx int;
    began float8; ended float8; now_e float8; opened float8; n_release bigint := 0;
    j_sel json := '{{}}'; j_upd json := '{{}}'; j_scan json := '{{}}';
    ji_sel json; ji_upd json; ji_scan json;  -- the intended-start histograms (RATE)
BEGIN
    IF p_conf ? 'seed' THEN
        PERFORM setseed((p_conf->>'seed')::float8);
    END IF;
    IF carry THEN
        -- A phase's later CALLs were sent before the previous one ended (pipelined): what
        -- they carry on from is the session's, kept in the server by the previous CALL.
        kept := nullif(current_setting('{next_setting}', true), '')::jsonb;
        op_base := coalesce((kept->>'op_base')::bigint, op_base);
        op := op_base;
        sched := (kept->>'next_start')::float8;
        IF kept->>'loops_left' IS NOT NULL THEN
            loops := (kept->>'loops_left')::bigint;
            bounded := true;
        END IF;
    END IF;
    -- The barrier: every session starts its first op at the same instant.
    pause := start_e - date_part('epoch', clock_timestamp());
    IF pause > 0 THEN
        PERFORM pg_sleep(pause);
    END IF;
    began := date_part('epoch', clock_timestamp());
    opened := began;
    IF interval_s IS NOT NULL THEN
        -- The sampling interval this CALL runs in, and its end (runner/intervals.py's
        -- Schedule): the one `began` falls in, a boundary belonging to the interval it starts.
        ival := greatest(floor((began - start_e) / interval_s + 1e-9)::bigint + 1, 1);
        IF until_e IS NULL OR start_e + ival * interval_s < until_e THEN
            until_e := start_e + ival * interval_s;
        END IF;
        k := ival + (batch - (ival + b_off) % batch) % batch;  -- the answering boundary
        IF call_end IS NULL OR start_e + k * interval_s < call_end THEN
            call_end := start_e + k * interval_s;
        END IF;
    END IF;
    ival_op := op;
    timed := record OR paced;  -- a paced warm-up times its ops too: Little's law needs them
    IF paced THEN
        h_isel := array_fill(0, ARRAY[{slots}]);
        h_iupd := array_fill(0, ARRAY[{slots}]);
        h_iscan := array_fill(0, ARRAY[{slots}]);
        IF sched IS NULL THEN  -- a phase's first CALL: its schedule starts at its barrier
            sched := start_e + CASE WHEN uniform THEN coalesce((p_conf->>'rate_offset')::float8, 0)
                                    ELSE -ln(1 - random()) / rate END;
        END IF;
    END IF;
    <<intervals>>
    LOOP  -- the CALL's intervals (one unless batch > 1), each with its own result
    LOOP
        -- WORK_LOOP's ops, and the interval's end: whichever comes first.
        EXIT WHEN bounded AND op - op_base >= loops;
        IF paced THEN
            -- The next op is due at `sched`: one due after the interval is the next CALL's,
            -- and this one waits for the interval's end (the next is queued behind it).
            wake := least(sched, coalesce(until_e, sched));
            now_e := date_part('epoch', clock_timestamp());
            WHILE wake > now_e LOOP
                -- A sleep holds a snapshot (it is a statement): nap_s at most, then the
                -- transaction ends as a read's does (counted; taken out of the commits).
                PERFORM pg_sleep(least(wake - now_e, nap_s));
                now_e := date_part('epoch', clock_timestamp());
                IF now_e - opened >= release_s THEN
                    COMMIT;
                    n_release := n_release + 1;
                    opened := now_e;
                END IF;
            END LOOP;
            EXIT WHEN until_e IS NOT NULL AND sched >= until_e;
        END IF;
        EXIT WHEN until_e IS NOT NULL AND date_part('epoch', clock_timestamp()) >= until_e;
        IF paced THEN
            intended := sched;
            sched := sched + CASE WHEN uniform THEN 1 / rate ELSE -ln(1 - random()) / rate END;
        END IF;
        op := op + 1;
        IF spot_freq > 0 AND op % spot_freq = 0 THEN
            k := spot_lo + floor(random() * (spot_hi - spot_lo + 1))::bigint;
            n_spot := n_spot + 1;
        ELSE
            k := work_unit + floor(random() * (scale - work_unit + 1))::bigint;
        END IF;
        lo := k - work_unit + 1;
        hot := hot_freq > 0 AND op % hot_freq = 0;
        IF hot THEN
            n_hot := n_hot + 1;
        END IF;
        IF random() * 100 < update_pct THEN
            kind := 1;
        ELSIF scan_pct > 0 AND random() * 100 < scan_pct THEN
            kind := 2;
        ELSE
            kind := 0;
        END IF;
        IF timed THEN  -- only the window records (and a paced warm-up its busy time)
            t0 := date_part('epoch', clock_timestamp());
        END IF;
        IF kind = 0 THEN
            IF hot THEN
                SELECT count(c2) INTO cnt FROM {hot_cf1} WHERE custid BETWEEN lo AND k;
            ELSE
                SELECT count(c2) INTO cnt FROM {cf1} WHERE custid BETWEEN lo AND k;
            END IF;
            rows_sel := rows_sel + cnt;
        ELSIF kind = 1 THEN
            -- Random per op (not random()'s replayable state): a replay of the same seed
            -- still writes new bytes; each row's bytes are sha512 of v and its key.
            v := uuid_send(gen_random_uuid());
            IF heavy THEN
                IF hot THEN
                    UPDATE {hot_cf1} SET {heavy_set} WHERE custid BETWEEN lo AND k;
                ELSE
                    UPDATE {cf1} SET {heavy_set} WHERE custid BETWEEN lo AND k;
                END IF;
            ELSE
                IF hot THEN
                    UPDATE {hot_cf1} SET {lite_set} WHERE custid BETWEEN lo AND k;
                ELSE
                    UPDATE {cf1} SET {lite_set} WHERE custid BETWEEN lo AND k;
                END IF;
            END IF;
            GET DIAGNOSTICS changed = ROW_COUNT;
            rows_upd := rows_upd + changed;
            COMMIT;
        ELSE
            IF hot THEN
                SELECT count(c2) INTO cnt FROM {hot_cf2};
            ELSE
                SELECT count(c2) INTO cnt FROM {cf2};
            END IF;
        END IF;
        IF timed THEN
            t1 := date_part('epoch', clock_timestamp());
            us := round((t1 - t0) * 1000000)::bigint;
            IF record THEN
{bucket}
                IF kind = 0 THEN
                    h_sel[idx + 1] := h_sel[idx + 1] + 1;  n_sel := n_sel + 1;
                    IF h_sel[idx + 1] = 1 THEN t_sel := t_sel || idx; END IF;
                ELSIF kind = 1 THEN
                    h_upd[idx + 1] := h_upd[idx + 1] + 1;  n_upd := n_upd + 1;
                    IF h_upd[idx + 1] = 1 THEN t_upd := t_upd || idx; END IF;
                ELSE
                    h_scan[idx + 1] := h_scan[idx + 1] + 1;  n_scan := n_scan + 1;
                    IF h_scan[idx + 1] = 1 THEN t_scan := t_scan || idx; END IF;
                END IF;
            END IF;
            IF paced THEN
                busy_us := busy_us + us;
                IF record THEN
                    -- How late the op started, and its latency from its intended start.
                    lag := round((t0 - intended) * 1000000)::bigint;
                    max_lag := greatest(max_lag, lag);
                    IF lag > {late1} THEN
                        late1 := late1 + 1;
                        IF lag > {late10} THEN
                            late10 := late10 + 1;
                        END IF;
                    END IF;
                    us := round((t1 - intended) * 1000000)::bigint;
{bucket}
                    IF kind = 0 THEN
                        h_isel[idx + 1] := h_isel[idx + 1] + 1;
                    ELSIF kind = 1 THEN
                        h_iupd[idx + 1] := h_iupd[idx + 1] + 1;
                    ELSE
                        h_iscan[idx + 1] := h_iscan[idx + 1] + 1;
                    END IF;
                END IF;
            END IF;
        END IF;
        -- A transaction holds the snapshot of its first statement until it ends (the
        -- procedure's portal snapshot), and that snapshot holds back the xmin horizon:
        -- a stretch of reads between two updates would keep other sessions' old row
        -- versions from being pruned. Reads end their transaction once it is release_s
        -- old (counted: these commits are taken out of the window's commits).
        now_e := date_part('epoch', clock_timestamp());
        IF kind = 1 THEN
            opened := now_e;
        ELSIF now_e - opened >= release_s THEN
            COMMIT;
            n_release := n_release + 1;
            opened := now_e;
        END IF;
        IF think_freq > 0 AND op % think_freq = 0 THEN
            pause := think_min + random() * (think_max - think_min);
            PERFORM pg_sleep(pause);  -- holds a snapshot while it sleeps: see the README
            n_think := n_think + 1;
            think_s := think_s + pause;
            COMMIT;
            n_release := n_release + 1;
            opened := date_part('epoch', clock_timestamp());
        END IF;
    END LOOP;
    ended := date_part('epoch', clock_timestamp());
    IF paced THEN  -- due before the interval's end but not started: the schedule's backlog
        behind := greatest(least(ended, coalesce(until_e, ended)) - sched, 0);
    END IF;
    -- What the session's next CALL carries on from, kept in the server for a pipelined one.
    nxt := json_build_object(
        {next});
    r_last := batch = 1 OR interval_s IS NULL OR until_e >= call_end - 1e-9
              OR (bounded AND op - op_base >= loops);
    -- The histograms as [[idx, ...], [count, ...]] of their non-empty buckets (the two
    -- aggregates read the same rows in the same order), from the buckets each has used:
    -- this runs once per interval, and a pass over all {slots} slots cost 0.25-0.6 ms of
    -- CPU a CALL (64 sessions: 1-4 % of the host's CPU). Lists, not {{"idx": count}}: the
    -- client parses and sums them for a third of the CPU (model/histogram.py). json, not
    -- jsonb (which sorts an object's keys: 55 buckets took 18 us, not 8); a kind without
    -- ops runs no query.
    IF cardinality(t_sel) > 0 THEN
        SELECT json_build_array(array_agg(i), array_agg(h_sel[i + 1])) INTO j_sel
          FROM unnest(t_sel) i;
    END IF;
    IF cardinality(t_upd) > 0 THEN
        SELECT json_build_array(array_agg(i), array_agg(h_upd[i + 1])) INTO j_upd
          FROM unnest(t_upd) i;
    END IF;
    IF cardinality(t_scan) > 0 THEN
        SELECT json_build_array(array_agg(i), array_agg(h_scan[i + 1])) INTO j_scan
          FROM unnest(t_scan) i;
    END IF;
    IF paced THEN  -- (without a query in it, the result below is a plain expression)
        ji_sel := {sparse_sel};
        ji_upd := {sparse_upd};
        ji_scan := {sparse_scan};
    END IF;
    -- The interval's result: RESULT_SQL, the fields model/loop.py declares (json text as
    -- built: the client parses it, the kept copy is that text).
    r := json_build_object(
        {result});
    EXIT intervals WHEN r_last;
    -- batch > 1: the interval is kept for the CALL's answer, and in the session: a setting
    -- of its own (one of the whole batch cost ~55 us more a boundary, growing with it) and
    -- the count kept, committed: a cancel at a stop leaves them to RunBackend.pending. That
    -- COMMIT is its own_commits' 1.
    held := held || r::text;
    r := NULL;
    PERFORM set_config('{pending_setting}_' || cardinality(held), held[cardinality(held)], false);
    PERFORM set_config('{pending_setting}', cardinality(held)::text, false);
    COMMIT;
    PERFORM set_config('{next_setting}', nxt::text, false);
    began := date_part('epoch', clock_timestamp());
    opened := began;
    -- The next interval: the one `began` falls in (an op may have outlasted a boundary).
    ival := greatest(floor((began - start_e) / interval_s + 1e-9)::bigint + 1, ival + 1);
    EXIT intervals WHEN start_e + (ival - 1) * interval_s >= call_end - 1e-9;
    until_e := least(start_e + ival * interval_s, call_end);
    ival_op := op;
    n_sel := 0; n_upd := 0; n_scan := 0; n_hot := 0; n_spot := 0; n_think := 0;
    think_s := 0; rows_sel := 0; rows_upd := 0; n_release := 0;
    busy_us := 0; behind := 0; late1 := 0; late10 := 0; max_lag := NULL;
    h_sel := array_fill(0, ARRAY[{slots}]); t_sel := '{{}}'; j_sel := '{{}}';
    h_upd := array_fill(0, ARRAY[{slots}]); t_upd := '{{}}'; j_upd := '{{}}';
    h_scan := array_fill(0, ARRAY[{slots}]); t_scan := '{{}}'; j_scan := '{{}}';
    IF paced THEN
        h_isel := array_fill(0, ARRAY[{slots}]);
        h_iupd := array_fill(0, ARRAY[{slots}]);
        h_iscan := array_fill(0, ARRAY[{slots}]);
    END IF;
    END LOOP intervals;
    PERFORM set_config('{next_setting}', nxt::text, false);
    {flush}
    IF batch = 1 THEN
        result := r;
    ELSE
        -- the kept intervals are answered now: none left for RunBackend.pending (checked
        -- before the last one is taken back, which may leave none in `held`)
        IF cardinality(held) > 0 THEN
            PERFORM set_config('{pending_setting}', '0', false);
        END IF;
        IF r IS NULL THEN  -- its last interval was kept before the CALL's end showed
            r := jsonb_set(held[cardinality(held)]::jsonb, '{{{call_ended}}}', 'true')::json;
            held := held[1:cardinality(held) - 1];
        END IF;
        result := ('[' || array_to_string(held || r::text, ',') || ']')::json;
    END IF;
END
$body$
"""


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
    return sql.SQL(_TEMPLATE).format(
        proc=sql.Identifier(schema, PROCEDURE),
        cf1=sql.Identifier(schema, "cf1"),
        cf2=sql.Identifier(schema, "cf2"),
        hot_cf1=sql.Identifier(hot_schema, "cf1"),
        hot_cf2=sql.Identifier(hot_schema, "cf2"),
        heavy_set=_set_list(PAD_COLUMNS, ratio),
        lite_set=_set_list(LITE_COLUMNS, ratio),
        slots=sql.SQL(str(SLOTS)),
        bucket=_bucket_code(indent=16),
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


def _bucket_code(indent: int) -> sql.Composable:
    """The histogram bucket of `us` into `idx` (the formula of openslob.model.histogram)."""
    code = _BUCKET.format(linear=LINEAR_LIMIT, sub=SUB_BUCKETS, sub2=2 * SUB_BUCKETS, slots=SLOTS)
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
