"""Who holds back the xmin horizon of the SLOB database, sampled during the window.

HOT pruning removes an old row version only once no snapshot anywhere may still see it. The
oldest such snapshot (the horizon) is held by a session's snapshot or open transaction, a
prepared transaction, a replication slot, or a standby's hot_standby_feedback. Held across an
update run, it makes every updated row leave its page: cf1 grows, and so does the work of
each SLOBop (layout.py). The sampler asks every interval who holds the oldest xmin of this
database (sessions of other databases hold no horizon for its tables) and how old it is in
transaction ids; a holder seen with the same xmin over a span of the window held it that
long. Other roles' sessions show their xmin only to a role with pg_read_all_stats
(`slob doctor` checks it).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from openslob.engines.postgres import prepared

# age_xids: xids from the holder's xmin to the next one to be assigned; not PostgreSQL's
# age(), which stays fixed for the whole of the monitor's (one, long) transaction. 32-bit
# xids wrap: the difference is taken modulo 2^32 as a signed number (PostgreSQL's own xid
# comparison), and an xid assigned after our snapshot (a busy update run assigns them every
# microsecond) is 0 old, not -3 read as 4,294,967,293.
# pg_current_snapshot() is 13's: an older server has no horizon figure.
OLDEST = """
SELECT n.next_xid, h.kind, h.holder, h.xmin,
       greatest(0, (n.next_xid % 4294967296 - h.xmin + 6442450944) % 4294967296
                   - 2147483648) AS age_xids,
       h.role, h.application, h.state, h.since, h.query
FROM (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next_xid) n
LEFT JOIN LATERAL (
  SELECT kind, holder, xmin::text::bigint AS xmin, role, application, state,
         since::text AS since, query
  FROM (
    SELECT 'session' AS kind, a.pid::text AS holder, x.xmin, a.usename::text AS role,
           a.application_name AS application, a.state, coalesce(a.xact_start, a.query_start)
           AS since, left(a.query, 120) AS query
    FROM pg_stat_activity a, LATERAL (VALUES (a.backend_xmin), (a.backend_xid)) x(xmin)
    WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND x.xmin IS NOT NULL
    UNION ALL
    SELECT 'prepared transaction', p.gid, p.transaction, p.owner::text, NULL, NULL,
           p.prepared, NULL
    FROM pg_prepared_xacts p WHERE p.database = current_database()
    UNION ALL
    SELECT 'replication slot', s.slot_name::text, s.xmin, NULL, NULL,
           CASE WHEN s.active THEN 'active' ELSE 'inactive' END, NULL, NULL
    FROM pg_replication_slots s WHERE s.xmin IS NOT NULL
    UNION ALL
    SELECT 'standby', r.application_name || ' (walsender pid ' || r.pid || ')', r.backend_xmin,
           r.usename::text, r.application_name, r.state, r.backend_start, NULL
    FROM pg_stat_replication r WHERE r.backend_xmin IS NOT NULL
  ) holders
  ORDER BY age(xmin) DESC LIMIT 1
) h ON true
"""


OLDEST_VERSION = 130000


def oldest_holder(conn: psycopg.Connection) -> dict[str, Any]:
    """{next_xid, kind, holder, xmin, age_xids, role, application, state, since, query}
    (xmin: 32-bit transaction id; age_xids: transactions since);
    the holder's fields are None when nothing holds an xmin."""
    with conn.cursor(row_factory=dict_row) as cur:
        # pg_stat_activity is read once per transaction unless cleared: the monitor's
        # transaction lasts the whole run.
        cur.execute("SELECT pg_stat_clear_snapshot()")
        row = prepared.execute(cur, OLDEST).fetchone()
    return dict(row or {})


def advice(holder: dict[str, Any]) -> str:
    """What to do about a holder, by its kind."""
    kind, name = holder.get("kind"), holder.get("holder")
    if kind == "prepared transaction":
        return f"COMMIT PREPARED '{name}' or ROLLBACK PREPARED '{name}'"
    if kind == "replication slot":
        return (
            f"let the slot's consumer catch up, or drop it: SELECT "
            f"pg_drop_replication_slot('{name}')"
        )
    if kind == "standby":
        return (
            "a query on that standby with hot_standby_feedback = on: end it, or turn "
            "hot_standby_feedback off on the standby for the test"
        )
    return (
        f"end that session's transaction (COMMIT, ROLLBACK, or SELECT pg_terminate_backend({name}))"
    )
