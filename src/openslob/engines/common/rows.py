"""The one row of a query that always returns one (an aggregate, SHOW, a function call).

DB-API's fetchone() is typed "a row or None" because a cursor can be exhausted; for these
queries it cannot be, and one() says so once, typed, instead of at every call. Should it
happen anyway, it raises the TypeError that indexing or unpacking None raised before.
"""

from __future__ import annotations

from typing import TypeVar

Row = TypeVar("Row")


def one(row: Row | None) -> Row:
    """`row`, known to be there (fetchone() of a query that returns exactly one row)."""
    if row is None:
        raise TypeError("the query returned no row")
    return row
