"""ASH-like wait sampling inside PostgreSQL: one DO block per run samples pg_stat_activity
at the run's rate (runner/sampler.wait_sample_hz: 10 Hz up to 16 sessions) and returns its
counts as a NOTICE (Monitor.sample_waits), so the client spends no CPU on the samples."""

from __future__ import annotations

from psycopg import sql

from openslob.engines.postgres.workload import flush_sql

ASH_NOTICE = "openslob-ash "

# ASH-like wait sampling inside the database, as the work loop is: the client makes one call
# per run and spends no CPU on the samples. Samples every 1/hz s from start_epoch until
# end_epoch (NULL: no planned end), and stops early once none of the run's sessions is
# active any more (the window's CALLs returned: the end of an op-count run, or a Ctrl-C).
# "CPU" is active without a wait event. The result {"samples", "waits": {event: count},
# "commits"} comes back as a NOTICE: a DO block returns nothing, and creates nothing.
# It must not hold back the SLOB database's xmin horizon, which a statement does for as long
# as it runs (its pg_sleep too): it runs connected to another database of the cluster
# (pg_stat_activity shows them all, and a backend of another database holds no horizon for
# this one's tables), and commits after every sample, which ends every snapshot it held
# (the fallback when no other database can be reached: then its commits are counted and
# pg_stat_force_next_flush() (15+) publishes them before it returns, so that they can be
# taken out of the window's commits).
_ASH_DO = """
DO $ash$
DECLARE
    app text := {app};
    start_epoch float8 := {start};
    end_epoch float8 := {end};
    hz float8 := {hz};
    counts jsonb := '{{}}';
    samples int := 0;
    commits int := 0;
    active int;
    tick float8;
    r record;
BEGIN
    COMMIT;  -- the DO statement's own snapshot goes here
    commits := commits + 1;
    PERFORM pg_sleep(greatest(0, start_epoch - extract(epoch FROM clock_timestamp())));
    LOOP
        tick := extract(epoch FROM clock_timestamp());
        EXIT WHEN end_epoch IS NOT NULL AND tick >= end_epoch;
        active := 0;
        FOR r IN
            SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS event,
                   count(*)::int AS n
            FROM pg_stat_activity WHERE application_name = app AND state = 'active'
            GROUP BY 1
        LOOP
            counts := jsonb_set(
                counts, ARRAY[r.event], to_jsonb(coalesce((counts ->> r.event)::int, 0) + r.n));
            active := active + r.n;
        END LOOP;
        EXIT WHEN active = 0 AND samples > 0;
        samples := samples + 1;
        COMMIT;  -- a new transaction: fresh pg_stat_activity, no snapshot kept
        commits := commits + 1;
        PERFORM pg_sleep(greatest(0, 1.0 / hz - (extract(epoch FROM clock_timestamp()) - tick)));
    END LOOP;
    {flush}
    RAISE NOTICE '%', {notice} || jsonb_build_object(
        'samples', samples, 'waits', counts, 'commits', commits)::text;
END
$ash$
"""


def ash_block(
    app: str, start_epoch: float, end_epoch: float | None, hz: float, server_version: int
) -> sql.Composed:
    """The wait sampler's DO block (its values inlined: a DO block takes no parameters)."""
    return sql.SQL(_ASH_DO).format(
        app=sql.Literal(app),
        start=sql.Literal(start_epoch),
        end=sql.SQL("NULL") if end_epoch is None else sql.Literal(end_epoch),
        hz=sql.Literal(hz),
        flush=sql.SQL(flush_sql(server_version)),
        notice=sql.Literal(ASH_NOTICE),
    )
