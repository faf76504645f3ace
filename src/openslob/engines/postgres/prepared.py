"""Statements the monitors run every sampling interval, PREPAREd once per connection.

Planning was most of what they cost the server: the horizon query took 1.0-2.2 ms of its
backend's CPU a call and 0.17 ms once prepared (300 calls each, a lone monitor). The
monitors speak the simple protocol (ClientCursor: no portal left open between queries),
so these are SQL PREPAREs, named after their text, and EXECUTEs. A prepared statement lasts
as long as its connection, whatever becomes of the transaction that prepared it.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import Any

import psycopg

_PREPARED: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[str]] = (
    weakref.WeakKeyDictionary()
)


def execute(cur: psycopg.Cursor[Any], sql: str) -> psycopg.Cursor[Any]:
    """Run `sql` (no parameters) as a statement prepared on the cursor's connection."""
    name = "openslob_" + hashlib.blake2b(sql.encode(), digest_size=8).hexdigest()
    done = _PREPARED.setdefault(cur.connection, set())
    if name not in done:
        cur.execute(f"PREPARE {name} AS {sql}")
        done.add(name)
    return cur.execute(f"EXECUTE {name}")
