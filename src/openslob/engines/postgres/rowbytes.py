"""The bytes of a SLOB row on PostgreSQL, as SQL expressions: random, reproducible, and as
compressible as COMPRESS_RATIO asks (1: not at all).

Every byte comes from sha512 of (key, column tag, salt): the load's salt is the schema's seed
(reproducible), the loop's a random uuid per op (an update writes new bytes even when a run
replays the same seed). sha512 output carries 8 bits per byte; hex (the former padding)
carried 4.
"""

from __future__ import annotations

from psycopg import sql

from openslob.engines.postgres.layout import (
    NARROW_COLUMNS,
    PAD_COLUMNS,
    WIDE_BYTES,
    WIDE_COLUMNS,
    fill_c2_bytes,
)

SHA512_BYTES = 64

# COMPRESS_RATIO > 1: each 128-byte piece (two sha512 outputs) keeps `random_share` random
# bytes and the rest zeros. zlib-1 and lz4 then store the random bytes plus ~4.5 bytes per
# zero run (measured on random data: both codecs within 2 % of the target from 1.5 to 8).
_PIECE_BYTES = 128
_RUN_COST_BYTES = 8.0


def random_share(ratio: float) -> int:
    """Random bytes per 128-byte piece for this compression ratio (128: incompressible)."""
    if ratio <= 1.0:
        return _PIECE_BYTES
    return max(1, min(_PIECE_BYTES, round(_PIECE_BYTES / ratio - _RUN_COST_BYTES)))


def _piece(key: str, tag: sql.Composable, salt: str, ratio: float) -> sql.Composable:
    def digest(half: int) -> sql.Composable:
        return sql.SQL("sha512(int8send({k}) || int4send({tag} + {half}) || {salt})").format(
            k=sql.SQL(key), tag=tag, half=sql.Literal(half), salt=sql.SQL(salt)
        )

    share = random_share(ratio)
    if share == _PIECE_BYTES:
        return sql.SQL("{} || {}").format(digest(0), digest(32768))
    zeros = sql.Literal(bytes(_PIECE_BYTES - share))
    if share <= SHA512_BYTES:
        return sql.SQL("(substr({d}, 1, {n}) || {z})").format(
            d=digest(0), n=sql.Literal(share), z=zeros
        )
    return sql.SQL("({d} || substr({e}, 1, {n}) || {z})").format(
        d=digest(0), e=digest(32768), n=sql.Literal(share - SHA512_BYTES), z=zeros
    )


def random_bytes(
    key: str, column: int, width: int, salt: str = "salt", ratio: float = 1.0
) -> sql.Composable:
    """`width` bytes of sha512 output for (key, column, salt): full entropy, reproducible;
    with `ratio` > 1, zero runs make them compress that much."""
    if ratio <= 1.0:  # 64-byte pieces: one sha512 each
        pieces: list[sql.Composable] = [
            sql.SQL("sha512(int8send({k}) || int4send({tag}) || {salt})").format(
                k=sql.SQL(key), tag=sql.Literal(column * 65536 + i), salt=sql.SQL(salt)
            )
            for i in range(-(-width // SHA512_BYTES))
        ]
        piece_agg: sql.Composable = sql.SQL(
            "sha512(int8send({k}) || int4send({tag} + i) || {salt})"
        ).format(k=sql.SQL(key), tag=sql.Literal(column * 65536), salt=sql.SQL(salt))
    else:
        count = -(-width // _PIECE_BYTES)
        pieces = [_piece(key, sql.Literal(column * 65536 + i), salt, ratio) for i in range(count)]
        tag = sql.SQL("{} + i").format(sql.Literal(column * 65536))
        piece_agg = _piece(key, tag, salt, ratio)
    if len(pieces) > 8:  # a wide filler: aggregate instead of a long expression
        return sql.SQL(
            "(SELECT substr(string_agg({piece}, ''::bytea ORDER BY i), 1, {w})"
            " FROM generate_series(0, {n}) i)"
        ).format(piece=piece_agg, w=sql.Literal(width), n=sql.Literal(len(pieces) - 1))
    joined = sql.SQL(" || ").join(pieces)
    if width % SHA512_BYTES or (ratio > 1.0 and width % _PIECE_BYTES):
        return sql.SQL("substr({}, 1, {})").format(joined, sql.Literal(width))
    return joined


# Columns of a row's page-wide first version get other tags than the real ones: no byte of
# the wide version (left in the free space) repeats the live row.
_FILL_TAG = 32


def first_version_expressions(ratio: float = 1.0) -> sql.Composable:
    """c2..c20 of a row's page-wide first version (c2 widened to fill the page)."""
    parts = [
        random_bytes("k", _FILL_TAG + 2, fill_c2_bytes(), ratio=ratio),
        random_bytes("k", _FILL_TAG + 3, WIDE_BYTES, ratio=ratio),
    ]
    parts += [sql.SQL("''::bytea") for _ in NARROW_COLUMNS]
    return sql.SQL(", ").join(parts)


def pad_expressions(*, aliased: bool = False, key: str = "k", ratio: float = 1.0) -> sql.Composable:
    """c2..c20 of the real row for key k: c2 and c3 random, c4..c20 empty."""
    parts = []
    for col_no, name in enumerate(PAD_COLUMNS, start=2):
        if name in WIDE_COLUMNS:
            expr = random_bytes(key, col_no, WIDE_BYTES, ratio=ratio)
        else:
            expr = sql.SQL("''::bytea")
        parts.append(sql.SQL("{} AS {}").format(expr, sql.Identifier(name)) if aliased else expr)
    return sql.SQL(", ").join(parts)
