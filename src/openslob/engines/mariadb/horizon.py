"""InnoDB's purge lag: the history list length and who keeps purge from catching up.

InnoDB updates rows in place and keeps old versions in undo logs; purge frees them once no
read view may still need them. The history list length counts the committed transactions
whose undo purge has not processed yet. It stays small (hundreds) while purge keeps up; a
transaction with an old read view (another session's consistent snapshot, a long query)
stops purge and the list grows by one per update commit. cf1 keeps its size (updates stay
in place), but undo grows and purge then competes with the run for I/O. The sampler reads
the list length (SHOW GLOBAL STATUS Innodb_history_list_length) and the oldest transaction
(information_schema.INNODB_TRX) every interval (plugin.window_warnings says when purge fell
behind).
"""

from __future__ import annotations

from typing import Any

import pymysql


def oldest_holder(conn: pymysql.connections.Connection) -> dict[str, Any]:
    """{history_length, kind, holder, xmin (its trx id), role, application, state, since,
    query}; holder fields None when no other transaction is open."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
            " WHERE VARIABLE_NAME = 'INNODB_HISTORY_LIST_LENGTH'"
        )
        row = cur.fetchone()
        history = int(row[0]) if row else None
        cur.execute(
            "SELECT t.trx_mysql_thread_id, t.trx_id, p.USER, a.ATTR_VALUE, t.trx_state,"
            "  t.trx_started, LEFT(t.trx_query, 120)"
            " FROM information_schema.INNODB_TRX t"
            " LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id"
            " LEFT JOIN performance_schema.session_connect_attrs a"
            "  ON a.PROCESSLIST_ID = t.trx_mysql_thread_id AND a.ATTR_NAME = 'program_name'"
            " WHERE t.trx_mysql_thread_id <> CONNECTION_ID()"
            " ORDER BY t.trx_started LIMIT 1"
        )
        trx = cur.fetchone()
    sample: dict[str, Any] = {"history_length": history}
    if trx is not None:
        thread, trx_id, user, program, state, started, query = trx
        sample.update(
            kind="transaction of connection",
            holder=str(thread),
            # What it holds: its trx id; read-only transactions all show 0, so for them the
            # start time tells one transaction from the next.
            xmin=int(trx_id) or int(started.timestamp()),
            role=user,
            application=program,
            state=state,
            since=str(started),
            query=query,
        )
    return sample


def advice(holder: dict[str, Any]) -> str:
    return (
        f"commit or roll back that transaction, or end its connection (KILL {holder.get('holder')})"
    )
