"""InnoDB's purge lag: the history list length and who keeps purge from catching up.

InnoDB updates rows in place and keeps old versions in undo logs; purge frees them once no
read view may still need them. The history list length counts the committed transactions
whose undo purge has not processed yet. It stays small (hundreds) while purge keeps up; a
transaction with an old read view (another session's consistent snapshot, a long query)
stops purge and the list grows by one per update commit. cf1 keeps its size (updates stay
in place), but undo grows and purge then competes with the run for I/O. The sampler reads
the list length (SHOW GLOBAL STATUS Innodb_history_list_length) and the oldest transaction
(information_schema.INNODB_TRX) with every interval snapshot (plugin.window_warnings says
when purge fell behind).
"""

from __future__ import annotations

from typing import Any

import pymysql

# The oldest transaction of another connection. INNODB_TRX alone: joined with PROCESSLIST
# and session_connect_attrs for its user and program, this statement took the server 0.9-1.0
# ms at 64 sessions (PROCESSLIST materializes every connection), 0.08 ms without; who a
# connection is does not change while it lives, so that is looked up once per holder (WHO).
OLDEST_TRX = (
    "SELECT trx_mysql_thread_id, trx_id, trx_state, trx_started, LEFT(trx_query, 120)"
    " FROM information_schema.INNODB_TRX"
    " WHERE trx_mysql_thread_id <> CONNECTION_ID()"
    " ORDER BY trx_started LIMIT 1"
)
WHO = (
    "SELECT p.USER, a.ATTR_VALUE FROM information_schema.PROCESSLIST p"
    " LEFT JOIN performance_schema.session_connect_attrs a"
    "  ON a.PROCESSLIST_ID = p.ID AND a.ATTR_NAME = 'program_name'"
    " WHERE p.ID = %s"
)
HISTORY = (
    "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
    " WHERE VARIABLE_NAME = 'INNODB_HISTORY_LIST_LENGTH'"
)
WHO_KEPT = 4096  # connections whose user and program are remembered (a new run: new ones)
Who = tuple[str | None, str | None]


def oldest_holder(
    conn: pymysql.connections.Connection, known: dict[int, Who], history: float | None = None
) -> dict[str, Any]:
    """{history_length, kind, holder, xmin (its trx id), role, application, state, since,
    query}; holder fields None when no other transaction is open. `known`: the user and
    program of connections seen before (added to here); `history`: the length as an
    interval snapshot read it (Innodb_history_list_length), else read here."""
    with conn.cursor() as cur:
        if history is None:
            cur.execute(HISTORY)
            row = cur.fetchone()
            history = float(row[0]) if row else None
        cur.execute(OLDEST_TRX)
        trx = cur.fetchone()
        if trx is None:
            return {"history_length": None if history is None else int(history)}
        thread, trx_id, state, started, query = trx
        who = known.get(thread) or _who(cur, thread, known)
    return {
        "history_length": None if history is None else int(history),
        "kind": "transaction of connection",
        "holder": str(thread),
        # What it holds: its trx id; read-only transactions all show 0, so for them the
        # start time tells one transaction from the next.
        "xmin": int(trx_id) or int(started.timestamp()),
        "role": who[0],
        "application": who[1],
        "state": state,
        "since": str(started),
        "query": query,
    }


def _who(cur: Any, thread: int, known: dict[int, Who]) -> Who:
    """The user and program of connection `thread`, remembered in `known`; (None, None),
    not remembered, when the lookup fails: the holder itself is still reported."""
    try:
        cur.execute(WHO, (thread,))
        found = cur.fetchone()
    except pymysql.err.MySQLError:
        return (None, None)
    who = (found[0], found[1]) if found else (None, None)
    if len(known) >= WHO_KEPT:
        known.clear()
    known[thread] = who
    return who


def advice(holder: dict[str, Any]) -> str:
    return (
        f"commit or roll back that transaction, or end its connection (KILL {holder.get('holder')})"
    )
