"""The PL/pgSQL text of the work loop (workload.py fills in its names and fields).

LOOP_TEXT is `userN.slob_work`, a str.format template of psycopg.sql: {proc}, the tables,
{result} (model/loop.py's fields, workload.RESULT_SQL), {next}, the settings' names and the
histogram's geometry. BUCKET_TEXT computes an op's latency bucket `idx` from `us`
(model/histogram.py's log-linear scheme), the same code inside the loop and in its
standalone function. workload.py's docstring says what the loop does; the comments in the
text say why each part is as it is.
"""

BUCKET_TEXT = """
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

LOOP_TEXT = """
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
    held        json[] := '{{}}';  -- the CALL's intervals before its last (the answer's head)
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
    -- Each op kind's histogram: the buckets used, in the order first used (t_*), their
    -- counts (c_*), and each bucket's place in those (p_*: 0 while unused). The result
    -- reads t_* and c_* as they are: a plain expression, no query at the boundary.
    p_sel   int[] := array_fill(0, ARRAY[{slots}]);
    p_upd   int[] := array_fill(0, ARRAY[{slots}]);
    p_scan  int[] := array_fill(0, ARRAY[{slots}]);
    t_sel int[] := '{{}}'; t_upd int[] := '{{}}'; t_scan int[] := '{{}}';
    c_sel int[] := '{{}}'; c_upd int[] := '{{}}'; c_scan int[] := '{{}}';
    at_b int;
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
{hist_add}            END IF;
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
    -- The histograms as [[idx, ...], [count, ...]] of their non-empty buckets, as kept
    -- per op: a pass over all {slots} slots cost 0.25-0.6 ms of CPU a CALL (64 sessions:
    -- 1-4 % of the host's CPU), and a query over the buckets used (unnest, two array_agg)
    -- ~10 us of a kept interval's ~36. Lists, not {{"idx": count}}: the client parses and
    -- sums them for a third of the CPU (model/histogram.py). json, not jsonb (which sorts
    -- an object's keys: 55 buckets took 18 us, not 8).
    IF cardinality(t_sel) > 0 THEN
        j_sel := json_build_array(t_sel, c_sel);
    END IF;
    IF cardinality(t_upd) > 0 THEN
        j_upd := json_build_array(t_upd, c_upd);
    END IF;
    IF cardinality(t_scan) > 0 THEN
        j_scan := json_build_array(t_scan, c_scan);
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
    held := held || r;
    PERFORM set_config('{pending_setting}_' || cardinality(held), r::text, false);
    PERFORM set_config('{pending_setting}', cardinality(held)::text, false);
    r := NULL;
    COMMIT;
    -- (`next` is set once, as the CALL ends: the next CALL starts only then; one a stop's
    -- cancel lets start is cancelled in turn and its results are not the window's)
    began := date_part('epoch', clock_timestamp());
    opened := began;
    -- The next interval: the one `began` falls in (an op may have outlasted a boundary).
    ival := greatest(floor((began - start_e) / interval_s + 1e-9)::bigint + 1, ival + 1);
    EXIT intervals WHEN start_e + (ival - 1) * interval_s >= call_end - 1e-9;
    until_e := least(start_e + ival * interval_s, call_end);
    ival_op := op;
    -- (a kind's buckets are emptied where it had ops: before its count is)
    IF n_sel > 0 THEN
        p_sel := array_fill(0, ARRAY[{slots}]); t_sel := '{{}}'; c_sel := '{{}}'; j_sel := '{{}}';
    END IF;
    IF n_upd > 0 THEN
        p_upd := array_fill(0, ARRAY[{slots}]); t_upd := '{{}}'; c_upd := '{{}}'; j_upd := '{{}}';
    END IF;
    IF n_scan > 0 THEN
        p_scan := array_fill(0, ARRAY[{slots}]); t_scan := '{{}}'; c_scan := '{{}}';
        j_scan := '{{}}';
    END IF;
    n_sel := 0; n_upd := 0; n_scan := 0; n_hot := 0; n_spot := 0; n_think := 0;
    think_s := 0; rows_sel := 0; rows_upd := 0; n_release := 0;
    busy_us := 0; behind := 0; late1 := 0; late10 := 0; max_lag := NULL;
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
        -- json[] to json: each element's text as it was built, none parsed again (a cast
        -- of the joined text to json parsed the whole answer: ~4 % of a kept interval)
        result := array_to_json(held || r);
    END IF;
END
$body$
"""
