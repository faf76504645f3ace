"""The loop contract (model/loop.py) as the engines' SQL spells it: the result object's
key/expression pairs and the `next` object's, in declared order, from an engine's map.

An engine maps every declared result field to the SQL expression that computes it, or to
None with the reason in a comment (it leaves the key out: its loop has no such figure); a
map that misses a declared field, or names an undeclared one, fails here when the
procedure's DDL is built, and in tests/unit/test_loop_contract.py without a server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

from openslob.model.loop import LOOP_PARAMS, RESULT_KEYS, Source

T = TypeVar("T")
_KEY = re.compile(r"[a-z][a-z0-9_]*")
NEXT_KEYS = tuple(p.key for p in LOOP_PARAMS if p.source is Source.NEXT)


def result_pairs(exprs: Mapping[str, T | None]) -> list[tuple[str, T]]:
    """(key, expression) of every result field the engine provides, in declared order."""
    missing = [k for k in RESULT_KEYS if k not in exprs]
    extra = [k for k in exprs if k not in RESULT_KEYS]
    if missing or extra:
        raise ValueError(f"loop result: missing {missing}, undeclared {extra}")
    return [(k, e) for k in RESULT_KEYS if (e := exprs[k]) is not None]


def next_pairs(exprs: Mapping[str, T]) -> list[tuple[str, T]]:
    """(key, expression) of the result's `next`: the conf keys the next CALL carries on
    from (Source.NEXT), in declared order."""
    extra = [k for k in exprs if k not in NEXT_KEYS]
    if extra:
        raise ValueError(f"loop result next: undeclared {extra}")
    return [(k, exprs[k]) for k in NEXT_KEYS if k in exprs]


def quoted(key: str) -> str:
    """A declared key as an SQL string literal (keys are lower-case identifiers)."""
    if not _KEY.fullmatch(key):
        raise ValueError(f"not a loop key: {key!r}")
    return f"'{key}'"


def pair_list(pairs: list[tuple[str, str]], indent: int) -> str:
    """`'key', expr` pairs, one a line, for jsonb_build_object / JSON_OBJECT."""
    sep = ",\n" + " " * indent
    return sep.join(f"{quoted(k)}, {e}" for k, e in pairs)
