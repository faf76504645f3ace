"""The SLOB work loop as a MariaDB stored procedure, one per schema: `userN`.slob_work(conf).

Same semantics as the PL/pgSQL loop (engines/postgres/workload.py), driven by the same JSON
conf (runner/loopconf.py): per op a key k in [WORK_UNIT, SCALE] (or in the hotspot every
hotspot_frequency-th op), user1 every hot_schema_frequency-th op; UPDATE with probability
update_pct (then COMMIT: one per update), else a full scan of cf2 with probability scan_pct,
else SELECT COUNT(c2) over custid (k-WORK_UNIT, k]. Think-time sleeps, a start barrier, and
ops until `until_epoch` (one sampling interval: the runner sends the next CALL at once) or
`loops` ops, whichever comes first. With `stream`, one CALL runs the whole phase: at each
interval's end its SELECT sends that interval's result (a result set of the CALL's answer,
which reaches the client at once) and the loop goes on (runner/phase.py); with `batch` k > 1
it answers only every k-th boundary (staggered by `batch_offset`), at the phase's end or
when WORK_LOOP's count is done, with a JSON array of the intervals' results since its last
answer, kept until then in the session's PENDING_VARIABLE. A CALL carries
on where the previous one stopped: the op counter from `op_base`, the random stream from
`rng_state` (`result.next`).

MariaDB specifics:
- Static SQL only; a procedure's statements are parsed once per session and reused.
- FORCE INDEX (custid): the custid range is found through the secondary index and each row
  is fetched from the clustered index, one leaf page at a time (single-block reads; MRR,
  which would sort and batch those fetches, is off in the session and by default).
- Random numbers come from a Park-Miller generator (MINSTD, 48271) kept in a variable:
  RAND(seed) reseeds on every statement, so a per-session reproducible stream is made here.
  The seed (a float in [-1, 1], as PostgreSQL's setseed) picks the start state; the next
  CALL continues the stream from the state the previous one returned.
- Timing uses SYSDATE(6) (NOW() is frozen for the whole CALL) in UTC. Per-op latencies go
  into a MEMORY temporary table (no I/O, no redo), bucketed with openslob.model.histogram's formula.
- A procedure cannot return a value: it ends each interval with SELECT of one JSON document,
  the same keys as the PostgreSQL loop's result.
- LITE updates c2 and c3, HEAVY all 19 pad columns; each new value splices 16 bytes of
  md5(state, clock) into the column at the same length, so the update is in place and a
  replay of the same seed still changes every row.
"""

from __future__ import annotations

import textwrap

import pymysql

from openslob.engines.common.loopsql import next_pairs, pair_list, result_pairs
from openslob.engines.mariadb.connection import ident
from openslob.engines.mariadb.dataset import META_DB
from openslob.engines.mariadb.layout import PAD_COLUMNS
from openslob.model.histogram import LINEAR_LIMIT, SLOTS, SUB_BUCKETS
from openslob.model.loop import LOOP_PARAMS, LOOP_RESULT
from openslob.model.rate import LATE_1MS_US, LATE_10MS_US

PROCEDURE = "slob_work"
BUCKET_FUNCTION = "slob_bucket"
LITE_COLUMNS = ("c2", "c3")
HIST_TABLE = "slob_hist"

# The histogram bucket of v_us into v_idx: openslob.histogram.bucket_index in SQL.
# e = floor(log2(us)) - 6 through a double (cheap), then corrected for rounding.
_BUCKET = """
IF v_us < {linear} THEN
    SET v_idx = GREATEST(v_us, 0);
ELSE
    SET v_e = FLOOR(LOG2(v_us)) - 6;
    IF v_us >= ({sub2} << v_e) THEN
        SET v_e = v_e + 1;
    ELSEIF v_us < ({sub} << v_e) THEN
        SET v_e = v_e - 1;
    END IF;
    SET v_idx = LEAST({sub} * v_e + (v_us >> v_e), {slots} - 1);
END IF;
"""

# Next value of the MINSTD generator in v_rng and a uniform [0, 1) in v_u.
_RAND = "SET v_rng = v_rng * 48271 % 2147483647; SET v_u = (v_rng - 1) / 2147483646e0;"

# The controlling client is gone once the lock it holds for the run (guard.DatasetLock) is no
# longer held by its connection: MariaDB does not notice a vanished client while a statement
# runs, so the loop looks (IS_USED_LOCK, no I/O) at most once a second and ends itself.
_GUARD = (
    "IF v_guard_lock IS NOT NULL AND NOT (IS_USED_LOCK(v_guard_lock) <=> v_guard_id) THEN "
    "SIGNAL SQLSTATE '70100' SET MYSQL_ERRNO = 1317, "
    "MESSAGE_TEXT = 'openslob: the controlling client is gone'; END IF;"
)

# KILL QUERY during SLEEP() only makes SLEEP() return 1: the procedure would go on looping.
# Raising the interruption error ends the CALL as a kill anywhere else does. Sleeps last at
# most a second at a time, so that the guard is looked at in between.
_SLEEP = (
    "SET v_left = v_pause; WHILE v_left > 0 DO "
    "IF SLEEP(LEAST(v_left, 1)) = 1 THEN SIGNAL SQLSTATE '70100' SET MYSQL_ERRNO = 1317, "
    "MESSAGE_TEXT = 'Query execution was interrupted'; END IF; "
    f"SET v_left = v_left - 1; {_GUARD} END WHILE;"
)

_TEMPLATE = """
CREATE PROCEDURE {proc}(IN p_conf LONGTEXT)
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_update_pct DOUBLE DEFAULT JSON_VALUE(p_conf, '$.update_pct');
    DECLARE v_scan_pct DOUBLE DEFAULT JSON_VALUE(p_conf, '$.scan_pct');
    DECLARE v_work_unit BIGINT DEFAULT JSON_VALUE(p_conf, '$.work_unit');
    DECLARE v_scale BIGINT DEFAULT JSON_VALUE(p_conf, '$.scale');
    DECLARE v_heavy BOOLEAN DEFAULT JSON_VALUE(p_conf, '$.heavy') IN ('1', 'true');
    DECLARE v_loops BIGINT DEFAULT COALESCE(JSON_VALUE(p_conf, '$.loops'), 0);
    DECLARE v_op_base BIGINT DEFAULT COALESCE(JSON_VALUE(p_conf, '$.op_base'), 0);
    DECLARE v_rng_state BIGINT DEFAULT JSON_VALUE(p_conf, '$.rng_state');
    DECLARE v_until DOUBLE DEFAULT JSON_VALUE(p_conf, '$.until_epoch');
    DECLARE v_interval DOUBLE DEFAULT JSON_VALUE(p_conf, '$.interval_s');
    DECLARE v_carry BOOLEAN DEFAULT JSON_VALUE(p_conf, '$.carry') IN ('1', 'true');
    DECLARE v_stream BOOLEAN DEFAULT JSON_VALUE(p_conf, '$.stream') IN ('1', 'true');
    DECLARE v_more BOOLEAN DEFAULT FALSE;  -- streaming: another interval follows in this CALL
    -- streaming: the intervals an answer covers, and this session's stagger among them
    DECLARE v_batch BIGINT DEFAULT COALESCE(JSON_VALUE(p_conf, '$.batch'), 1);
    DECLARE v_batch_offset BIGINT DEFAULT COALESCE(JSON_VALUE(p_conf, '$.batch_offset'), 0);
    DECLARE v_obj, v_kept LONGTEXT;  -- an interval's result; the batch's so far ('[a,b,')
    DECLARE v_end DOUBLE;  -- the phase's end (v_until: the interval's)
    DECLARE v_ival_op BIGINT;  -- the op counter at the interval's start
    DECLARE v_bounded BOOLEAN DEFAULT COALESCE(JSON_VALUE(p_conf, '$.loops'), 0) > 0;
    DECLARE v_ival BIGINT DEFAULT NULL;
    DECLARE v_next LONGTEXT;
    DECLARE v_start DOUBLE DEFAULT JSON_VALUE(p_conf, '$.start_epoch');
    DECLARE v_record BOOLEAN DEFAULT JSON_VALUE(p_conf, '$.record') IN ('1', 'true');
    DECLARE v_hot_freq BIGINT DEFAULT COALESCE(JSON_VALUE(p_conf, '$.hot_schema_frequency'), 0);
    DECLARE v_spot_freq BIGINT DEFAULT COALESCE(JSON_VALUE(p_conf, '$.hotspot_frequency'), 0);
    DECLARE v_spot_lo BIGINT DEFAULT JSON_VALUE(p_conf, '$.hotspot_first_key');
    DECLARE v_spot_hi BIGINT DEFAULT JSON_VALUE(p_conf, '$.hotspot_last_key');
    DECLARE v_think_freq BIGINT DEFAULT COALESCE(JSON_VALUE(p_conf, '$.think_frequency'), 0);
    DECLARE v_think_min DOUBLE DEFAULT COALESCE(JSON_VALUE(p_conf, '$.think_min'), 0);
    DECLARE v_think_max DOUBLE DEFAULT COALESCE(JSON_VALUE(p_conf, '$.think_max'), 0);
    DECLARE v_seed DOUBLE DEFAULT JSON_VALUE(p_conf, '$.seed');
    DECLARE v_guard_lock VARCHAR(64) DEFAULT JSON_VALUE(p_conf, '$.guard_lock');
    DECLARE v_guard_id BIGINT DEFAULT JSON_VALUE(p_conf, '$.guard_id');
    -- RATE: this session's ops/s (0: closed loop), its next intended start, its arrivals
    DECLARE v_rate DOUBLE DEFAULT COALESCE(JSON_VALUE(p_conf, '$.rate'), 0);
    DECLARE v_uniform BOOLEAN DEFAULT JSON_VALUE(p_conf, '$.rate_dist') <=> 'UNIFORM';
    DECLARE v_sched DOUBLE DEFAULT JSON_VALUE(p_conf, '$.next_start');
    DECLARE v_paced, v_timed BOOLEAN DEFAULT FALSE;
    DECLARE v_intended, v_behind DOUBLE DEFAULT 0;
    DECLARE v_lag, v_max_lag BIGINT DEFAULT NULL;
    DECLARE v_late1, v_late10, v_busy_us BIGINT DEFAULT 0;
    DECLARE v_checked, v_now, v_left DOUBLE DEFAULT 0;
    DECLARE v_rng BIGINT;
    DECLARE v_u DOUBLE;
    DECLARE n_sel, n_upd, n_scan, n_hot, n_spot, n_think BIGINT DEFAULT 0;
    DECLARE rows_sel, rows_upd, v_op BIGINT DEFAULT 0;
    DECLARE v_think_s DOUBLE DEFAULT 0;
    DECLARE v_k, v_lo, v_cnt, v_changed, v_us BIGINT;
    DECLARE v_e, v_idx, v_kind INT;
    DECLARE v_hot BOOLEAN;
    DECLARE v_pause, v_t0, v_began, v_ended DOUBLE;
    DECLARE v_new VARBINARY(16);
    DECLARE v_aborted BOOLEAN DEFAULT FALSE;
    -- A Galera node aborts an update that lost a certification conflict (1213 at COMMIT, or
    -- a brute-force abort): the window's wsrep counters count it (cluster_cert_failures,
    -- cluster_bf_aborts) and the session goes on. Anywhere else a deadlock ends the run.
    DECLARE CONTINUE HANDLER FOR 1213
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM information_schema.GLOBAL_VARIABLES
                       WHERE VARIABLE_NAME = 'WSREP_ON' AND VARIABLE_VALUE = 'ON') THEN
            RESIGNAL;
        END IF;
        ROLLBACK;
        SET v_aborted = TRUE;
    END;

    SET SESSION time_zone = '+00:00';
    SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;
    CREATE TEMPORARY TABLE IF NOT EXISTS {hist} (
        kind TINYINT NOT NULL, idx SMALLINT NOT NULL, n BIGINT NOT NULL,
        PRIMARY KEY (kind, idx)) ENGINE = MEMORY;
    DELETE FROM {hist};
    SET {pending_var} = NULL;  -- what a cancelled CALL had kept was fetched, or is stale
    IF NOT v_stream OR v_batch < 1 THEN  -- a CALL of one interval answers at its end
        SET v_batch = 1;
    END IF;
    IF v_carry AND {next_var} IS NOT NULL THEN
        -- A phase's later CALLs were sent before the previous one ended (pipelined): what
        -- they carry on from is the session's, kept in the server by the previous CALL.
        SET v_op_base = COALESCE(JSON_VALUE({next_var}, '$.op_base'), v_op_base);
        SET v_rng_state = JSON_VALUE({next_var}, '$.rng_state');
        SET v_sched = IF(JSON_TYPE(JSON_EXTRACT({next_var}, '$.next_start')) <> 'NULL',
                         JSON_VALUE({next_var}, '$.next_start'), NULL);
        IF JSON_TYPE(JSON_EXTRACT({next_var}, '$.loops_left')) <> 'NULL' THEN
            SET v_loops = JSON_VALUE({next_var}, '$.loops_left');
            SET v_bounded = TRUE;
        END IF;
    END IF;
    SET v_op = v_op_base;
    SET v_ival_op = v_op_base;
    IF v_rng_state IS NOT NULL THEN
        SET v_rng = v_rng_state;
    ELSEIF v_seed IS NULL THEN
        SET v_rng = 1 + FLOOR(RAND() * 2147483645);
    ELSE
        SET v_rng = 1 + FLOOR((LEAST(GREATEST(v_seed, -1), 1) + 1) / 2 * 2147483645);
    END IF;
    -- The barrier: every session starts its first op at the same instant.
    SET v_pause = v_start - UNIX_TIMESTAMP(SYSDATE(6));
    IF v_pause > 0 THEN
        {sleep}
    END IF;
    SET v_began = UNIX_TIMESTAMP(SYSDATE(6));
    SET v_end = v_until;
    IF v_interval IS NOT NULL THEN
        -- The sampling interval this CALL runs in, and its end (runner/intervals.py's
        -- Schedule): the one v_began falls in, a boundary belonging to the interval it starts.
        SET v_ival = GREATEST(FLOOR((v_began - v_start) / v_interval + 1e-9) + 1, 1);
        IF v_until IS NULL OR v_start + v_ival * v_interval < v_until THEN
            SET v_until = v_start + v_ival * v_interval;
        END IF;
    END IF;
    SET v_paced = v_rate > 0;
    SET v_timed = v_record OR v_paced;  -- a paced warm-up times its ops: for Little's law
    IF v_paced AND v_sched IS NULL THEN  -- a phase's first CALL: from its barrier
        IF v_uniform THEN
            SET v_sched = v_start + COALESCE(JSON_VALUE(p_conf, '$.rate_offset'), 0);
        ELSE
            {rand}
            SET v_sched = v_start - LN(1 - v_u) / v_rate;
        END IF;
    END IF;
    intervals: LOOP  -- one pass without `stream`; else the phase's intervals, one result each
    work: LOOP
        -- WORK_LOOP's ops, and the interval's end: whichever comes first.
        IF v_bounded AND v_op - v_op_base >= v_loops THEN
            LEAVE work;
        END IF;
        IF v_paced THEN
            -- The next op is due at v_sched: one due after the interval is the next CALL's,
            -- and this one waits for the interval's end (the next is queued behind it).
            SET v_pause = LEAST(v_sched, COALESCE(v_until, v_sched)) - UNIX_TIMESTAMP(SYSDATE(6));
            IF v_pause > 0 THEN  -- outside any transaction: no read view is held
                {sleep}
            END IF;
            IF v_until IS NOT NULL AND v_sched >= v_until THEN
                LEAVE work;
            END IF;
        END IF;
        SET v_now = UNIX_TIMESTAMP(SYSDATE(6));
        IF v_until IS NOT NULL AND v_now >= v_until THEN
            LEAVE work;
        END IF;
        IF v_now - v_checked >= 1 THEN
            {guard}
            SET v_checked = v_now;
        END IF;
        IF v_paced THEN
            SET v_intended = v_sched;
            IF v_uniform THEN
                SET v_sched = v_sched + 1 / v_rate;
            ELSE
                {rand}
                SET v_sched = v_sched - LN(1 - v_u) / v_rate;
            END IF;
        END IF;
        SET v_op = v_op + 1;
        {rand}
        IF v_spot_freq > 0 AND v_op % v_spot_freq = 0 THEN
            SET v_k = v_spot_lo + FLOOR(v_u * (v_spot_hi - v_spot_lo + 1));
            SET n_spot = n_spot + 1;
        ELSE
            SET v_k = v_work_unit + FLOOR(v_u * (v_scale - v_work_unit + 1));
        END IF;
        SET v_lo = v_k - v_work_unit + 1;
        SET v_hot = v_hot_freq > 0 AND v_op % v_hot_freq = 0;
        IF v_hot THEN
            SET n_hot = n_hot + 1;
        END IF;
        {rand}
        IF v_u * 100 < v_update_pct THEN
            SET v_kind = 1;
        ELSE
            {rand}
            IF v_scan_pct > 0 AND v_u * 100 < v_scan_pct THEN
                SET v_kind = 2;
            ELSE
                SET v_kind = 0;
            END IF;
        END IF;
        IF v_timed THEN  -- only the window records (and a paced warm-up its busy time)
            SET v_t0 = UNIX_TIMESTAMP(SYSDATE(6));
        END IF;
        IF v_kind = 0 THEN
            IF v_hot THEN
                SELECT COUNT(c2) INTO v_cnt FROM {hot_cf1} FORCE INDEX (custid)
                    WHERE custid BETWEEN v_lo AND v_k;
            ELSE
                SELECT COUNT(c2) INTO v_cnt FROM {cf1} FORCE INDEX (custid)
                    WHERE custid BETWEEN v_lo AND v_k;
            END IF;
            SET rows_sel = rows_sel + v_cnt;
        ELSEIF v_kind = 1 THEN
            -- The clock makes a replay of the same seed still change every row it updates.
            SET v_new = UNHEX(MD5(CONCAT(v_rng, ':', SYSDATE(6))));
            START TRANSACTION;
            IF v_heavy THEN
                IF v_hot THEN
                    UPDATE {hot_cf1} FORCE INDEX (custid) SET {heavy_set}
                        WHERE custid BETWEEN v_lo AND v_k;
                ELSE
                    UPDATE {cf1} FORCE INDEX (custid) SET {heavy_set}
                        WHERE custid BETWEEN v_lo AND v_k;
                END IF;
            ELSE
                IF v_hot THEN
                    UPDATE {hot_cf1} FORCE INDEX (custid) SET {lite_set}
                        WHERE custid BETWEEN v_lo AND v_k;
                ELSE
                    UPDATE {cf1} FORCE INDEX (custid) SET {lite_set}
                        WHERE custid BETWEEN v_lo AND v_k;
                END IF;
            END IF;
            SET v_changed = ROW_COUNT();
            COMMIT;
            IF v_aborted THEN  -- rolled back: no row changed
                SET v_changed = 0;
                SET v_aborted = FALSE;
            END IF;
            SET rows_upd = rows_upd + v_changed;
        ELSE
            IF v_hot THEN
                SELECT COUNT(c2) INTO v_cnt FROM {hot_cf2};
            ELSE
                SELECT COUNT(c2) INTO v_cnt FROM {cf2};
            END IF;
        END IF;
        IF v_timed THEN
            SET v_now = UNIX_TIMESTAMP(SYSDATE(6));
            SET v_us = ROUND((v_now - v_t0) * 1000000);
            IF v_record THEN
{bucket}
                INSERT INTO {hist} (kind, idx, n) VALUES (v_kind, v_idx, 1)
                    ON DUPLICATE KEY UPDATE n = n + 1;
                IF v_kind = 0 THEN
                    SET n_sel = n_sel + 1;
                ELSEIF v_kind = 1 THEN
                    SET n_upd = n_upd + 1;
                ELSE
                    SET n_scan = n_scan + 1;
                END IF;
            END IF;
            IF v_paced THEN
                SET v_busy_us = v_busy_us + v_us;
                IF v_record THEN
                    -- How late the op started, and its latency from its intended start
                    -- (kinds 3-5 of the histogram table).
                    SET v_lag = ROUND((v_t0 - v_intended) * 1000000);
                    SET v_max_lag = GREATEST(COALESCE(v_max_lag, v_lag), v_lag);
                    IF v_lag > {late1} THEN
                        SET v_late1 = v_late1 + 1;
                        IF v_lag > {late10} THEN
                            SET v_late10 = v_late10 + 1;
                        END IF;
                    END IF;
                    SET v_us = ROUND((v_now - v_intended) * 1000000);
{bucket}
                    INSERT INTO {hist} (kind, idx, n) VALUES (v_kind + 3, v_idx, 1)
                        ON DUPLICATE KEY UPDATE n = n + 1;
                END IF;
            END IF;
        END IF;
        IF v_think_freq > 0 AND v_op % v_think_freq = 0 THEN
            {rand}
            SET v_pause = v_think_min + v_u * (v_think_max - v_think_min);
            {sleep}
            SET n_think = n_think + 1;
            SET v_think_s = v_think_s + v_pause;
        END IF;
    END LOOP;
    SET v_ended = UNIX_TIMESTAMP(SYSDATE(6));
    IF v_paced THEN  -- due before the interval's end but not started: the schedule's backlog
        SET v_behind = GREATEST(LEAST(v_ended, COALESCE(v_until, v_ended)) - v_sched, 0);
    END IF;
    -- What the session's next CALL carries on from, kept in the server for a pipelined one.
    SET v_next = JSON_OBJECT(
        {next}
    );
    SET {next_var} = v_next;
    -- Streaming, the CALL goes on to the next interval unless the phase or WORK_LOOP is done:
    -- InnoDB's counters move while a statement runs, so the sampler's reads as each interval
    -- closes are that interval's without a CALL ending there.
    SET v_more = v_stream AND v_interval IS NOT NULL AND v_until IS NOT NULL
        AND (v_end IS NULL OR v_until < v_end)
        AND NOT (v_bounded AND v_op - v_op_base >= v_loops);
    -- The result: RESULT_SQL, the fields model/loop.py declares. A procedure's SELECT goes
    -- to the client as it runs (a result set of the CALL's answer), not when the CALL ends.
    SET v_obj = JSON_OBJECT(
        {result}
    );
    IF v_batch = 1 THEN
        SELECT v_obj AS result;
    ELSEIF v_more AND (v_ival + v_batch_offset) % v_batch <> 0 THEN
        -- Kept for the batch's answer: in the user variable first (a KILL QUERY leaves it,
        -- RunBackend.pending), then in the CALL's copy, one append an interval.
        SET {pending_var} = CONCAT(COALESCE(v_kept, '['), v_obj, ']');
        SET v_kept = CONCAT(COALESCE(v_kept, '['), v_obj, ',');
    ELSE
        -- The batch's answer, a JSON array; the same statement clears what it answers.
        SELECT CONCAT(COALESCE(v_kept, '['), v_obj, ']') AS result,
            {pending_var} := NULL AS cleared;
        SET v_kept = NULL;
    END IF;
    IF NOT v_more THEN
        LEAVE intervals;
    END IF;
    -- The next interval: its counts from zero; it starts now (Schedule's rule, as above).
    SET n_sel = 0, n_upd = 0, n_scan = 0, n_hot = 0, n_spot = 0, n_think = 0;
    SET rows_sel = 0, rows_upd = 0, v_think_s = 0, v_busy_us = 0, v_behind = 0;
    SET v_late1 = 0, v_late10 = 0, v_max_lag = NULL, v_ival_op = v_op;
    DELETE FROM {hist};
    SET v_began = UNIX_TIMESTAMP(SYSDATE(6));
    SET v_ival = GREATEST(FLOOR((v_began - v_start) / v_interval + 1e-9) + 1, v_ival + 1);
    SET v_until = v_start + v_ival * v_interval;
    IF v_end IS NOT NULL AND v_until > v_end THEN
        SET v_until = v_end;
    END IF;
    END LOOP intervals;
END
"""


# The op counter of each histogram kind (kinds 3-5: the same ops from their intended start)
_KIND_COUNTS = ("n_sel", "n_upd", "n_scan")


def _hist_json(kind: int) -> str:
    """{"idx": count, ...} of one op type, as a JSON value (not a quoted string). Built at
    every interval of every session, so cheaply: JSON_OBJECTAGG makes it JSON at once (a
    GROUP_CONCAT of its text parsed again by JSON_EXTRACT took twice the server's CPU: 23
    against 12 us for 60 buckets), and a kind with no op this interval (its counter is
    counted where its buckets are) reads no table (5 us each). The keys come in no order:
    the client reads them into a dict. The whole result, 60 buckets of reads: 47 -> 26 us."""
    agg = f"(SELECT JSON_OBJECTAGG(idx, n) FROM {HIST_TABLE} WHERE kind = {kind})"
    return f"IF({_KIND_COUNTS[kind % 3]} = 0, JSON_OBJECT(), {agg})"


R, P = LOOP_RESULT, LOOP_PARAMS
# The loop's result (model/loop.py): each declared field's expression at the procedure's end.
# "+ 0": JSON_OBJECT would quote a procedure variable as a string.
RESULT_SQL: dict[str, str | None] = {
    R.ops.key: "v_op - v_ival_op",
    R.ops_select.key: "n_sel + 0",
    R.ops_update.key: "n_upd + 0",
    R.ops_scan.key: "n_scan + 0",
    R.rows_selected.key: "rows_sel + 0",
    R.rows_updated.key: "rows_upd + 0",
    R.ops_hot_schema.key: "n_hot + 0",
    R.ops_hotspot.key: "n_spot + 0",
    R.think_count.key: "n_think + 0",
    R.think_seconds.key: "v_think_s + 0e0",
    # No snapshot to release: each statement of this loop is its own transaction (READ
    # COMMITTED, autocommit), and a sleep holds no read view.
    R.released.key: None,
    R.own_commits.key: "0",
    R.next.key: "JSON_EXTRACT(v_next, '$')",
    R.interval.key: "v_ival + 0",
    R.busy_us.key: "v_busy_us + 0",
    R.behind_s.key: "v_behind + 0e0",
    R.late_1ms.key: "IF(v_paced AND v_record, v_late1 + 0, NULL)",
    R.late_10ms.key: "IF(v_paced AND v_record, v_late10 + 0, NULL)",
    R.max_lag_us.key: "v_max_lag + 0",
    R.began_epoch.key: "v_began + 0e0",
    R.ended_epoch.key: "v_ended + 0e0",
    R.pid.key: "CONNECTION_ID()",
    R.call_ended.key: "JSON_EXTRACT(IF(v_more, 'false', 'true'), '$')",  # JSON's own boolean
    R.hist_select.key: _hist_json(0),
    R.hist_update.key: _hist_json(1),
    R.hist_scan.key: _hist_json(2),
    # kinds 3-5: from the intended start, paced loops only
    R.hist_select_intended.key: f"IF(v_paced, {_hist_json(3)}, NULL)",
    R.hist_update_intended.key: f"IF(v_paced, {_hist_json(4)}, NULL)",
    R.hist_scan_intended.key: f"IF(v_paced, {_hist_json(5)}, NULL)",
}
# The result's `next` (NEXT_VARIABLE keeps it in the server too). "+ 0": see RESULT_SQL.
NEXT_SQL = {
    P.op_base.key: "v_op + 0",
    P.next_start.key: "v_sched + 0e0",
    P.rng_state.key: "v_rng + 0",
    P.loops_left.key: "IF(v_bounded, GREATEST(v_loops - (v_op - v_op_base), 0), NULL)",
}
# A session's user variable: what its next CALL carries on from (the `carry` conf key).
NEXT_VARIABLE = "@openslob_next"
# A session's user variable: the streamed intervals' results not yet answered (conf `batch`),
# a JSON array; a KILL QUERY leaves it for RunBackend.pending.
PENDING_VARIABLE = "@openslob_pending"
# Conf keys this loop does not read, and why.
PARAMS_NOT_READ = {
    P.release_s.key: "no snapshot is held across statements (READ COMMITTED, autocommit)",
    P.nap_s.key: "a sleep outside a transaction holds no read view: one sleep per wait",
}


def _set_list(columns: tuple[str, ...]) -> str:
    return ", ".join(f"{ident(c)} = CONCAT(v_new, SUBSTRING({ident(c)}, 17))" for c in columns)


def bucket_code(indent: int = 0) -> str:
    """The histogram bucket of v_us into v_idx (the formula of openslob.model.histogram)."""
    code = _BUCKET.format(linear=LINEAR_LIMIT, sub=SUB_BUCKETS, sub2=2 * SUB_BUCKETS, slots=SLOTS)
    return textwrap.indent(code.strip("\n"), " " * indent)


def procedure_ddl(schema: str, hot_schema: str = "user1") -> str:
    """CREATE PROCEDURE `userN`.slob_work for one schema (drop it first)."""
    return _TEMPLATE.format(
        proc=ident(schema, PROCEDURE),
        cf1=ident(schema, "cf1"),
        cf2=ident(schema, "cf2"),
        hot_cf1=ident(hot_schema, "cf1"),
        hot_cf2=ident(hot_schema, "cf2"),
        hist=HIST_TABLE,
        heavy_set=_set_list(PAD_COLUMNS),
        lite_set=_set_list(LITE_COLUMNS),
        rand=_RAND,
        sleep=_SLEEP,
        guard=_GUARD,
        bucket=bucket_code(indent=16),
        late1=LATE_1MS_US,
        late10=LATE_10MS_US,
        result=pair_list(result_pairs(RESULT_SQL), indent=8),
        next=pair_list(next_pairs(NEXT_SQL), indent=8),
        next_var=NEXT_VARIABLE,
        pending_var=PENDING_VARIABLE,
    )


def bucket_function_ddl() -> str:
    """`openslob`.slob_bucket(us): the loop's bucket code as a function, for tests."""
    return (
        f"CREATE FUNCTION {ident(META_DB, BUCKET_FUNCTION)}(v_us BIGINT) RETURNS INT"
        " DETERMINISTIC NO SQL BEGIN DECLARE v_e, v_idx INT;\n"
        f"{bucket_code()}\nRETURN v_idx; END"
    )


def install_procedures(conn: pymysql.connections.Connection, schemas: list[str]) -> None:
    """(Re)create the work procedure of every schema and the bucket function."""
    with conn.cursor() as cur:
        for schema in schemas:
            cur.execute(f"DROP PROCEDURE IF EXISTS {ident(schema, PROCEDURE)}")
            cur.execute(procedure_ddl(schema))
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {ident(META_DB)}")
        cur.execute(f"DROP FUNCTION IF EXISTS {ident(META_DB, BUCKET_FUNCTION)}")
        cur.execute(bucket_function_ddl())


def call_statement(schema: str) -> str:
    """The work CALL; one %s parameter: the JSON conf."""
    return f"CALL {ident(schema, PROCEDURE)}(%s)"


# Session settings of a work session: SLOB reads one block at a time through the index.
SESSION_SETTINGS = (
    # Multi-range read would sort the row fetches by primary key and batch them: not
    # SLOB's one random single-block read per row. (Off by default in MariaDB; made sure.)
    "SET SESSION optimizer_switch = 'mrr=off,mrr_sort_keys=off'",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET SESSION time_zone = '+00:00'",
    "SET SESSION autocommit = 1",
)
