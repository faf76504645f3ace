"""The SLOB layout on PostgreSQL as the catalog and the statistics show it, and what it costs.

A healthy cf1 holds one row per 8 KiB page, SCALE pages (fillfactor 10, 448-byte rows). An
update stays HOT: the new row version goes into the same page, and the old one is pruned at
the page's next visit, once no snapshot anywhere still needs it (the xmin horizon). A
snapshot held across an update run (a monitor's, another user's, a prepared transaction, a
replication slot, a standby's hot_standby_feedback) stops the pruning: the page fills, the
next updates move their rows to new pages, and the table, its dead row versions and the work
of every SLOBop grow. Such a table is bloated, and no longer the data set SLOB measures.

Measured on the private server (4 x 8,192 rows, WORK_UNIT 64): after a 60 s UPDATE_PCT=100
run with nothing holding the horizon, cf1 had 8,192-8,194 pages and ~1.02 dead row versions
per row (the last update of each page, pruned at its next visit); with a REPEATABLE READ
snapshot held across a 30 s run, 23,276 pages and 8.9 dead versions per row.

Everything here reads the catalog and the cumulative statistics (pg_class, pg_index,
pg_stat_user_tables, relation sizes): no table is scanned, so `slob run` checks the layout
before every window and `slob setup` before it calls a table valid.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from openslob.engines.common.rows import one
from openslob.engines.common.tables import TableSpec

PAD_COLUMNS = tuple(f"c{i}" for i in range(2, 21))  # SLOB's CF1 has c2..c20
FILLFACTOR = 10  # one 448-byte row per page, room for ~17 HOT versions of it beside it

# The row: custid, then c2 and c3 holding WIDE_BYTES random bytes each (bytea, STORAGE
# PLAIN), c4..c20 empty (1-byte short varlena headers). Every update rewrites c2 and c3, so
# a dead row version left in a page's free space shares only ~40 bytes (header, custid, the
# empty columns) with the live row: the free space stays incompressible after updates.
# A row of 448 bytes keeps one row per page at fillfactor 10 (a second insert needs
# 448 + 7,372 bytes free, a page with one row has 7,712) and leaves room for ~17 HOT
# versions before a page must be pruned (a 1.9 KB row left room for 3).
WIDE_COLUMNS = ("c2", "c3")
NARROW_COLUMNS = PAD_COLUMNS[len(WIDE_COLUMNS) :]
WIDE_BYTES = 192  # 3 sha512 outputs
PAGE_HEADER_BYTES = 24
LINE_POINTER_BYTES = 4
TUPLE_HEADER_BYTES = 24  # MAXALIGN(23): no null bitmap
PAGE_BYTES = 8192


def _maxalign(n: int) -> int:
    return (n + 7) & ~7


def row_bytes(c2_bytes: int, c3_bytes: int = WIDE_BYTES) -> int:
    """Stored size of a row (MAXALIGNed) with these widths of c2 and c3: header, custid,
    c2 and c3 with 4-byte varlena headers (int-aligned), 17 empty 1-byte varlenas."""
    c3_at = TUPLE_HEADER_BYTES + 8 + 4 + c2_bytes
    c3_at = (c3_at + 3) & ~3
    return _maxalign(c3_at + 4 + c3_bytes + len(NARROW_COLUMNS))


ROW_BYTES = row_bytes(WIDE_BYTES)


def fill_c2_bytes() -> int:
    """Width of c2 in a row's first version, so that it and the row's real version fill the
    page to the last byte: setup inserts the wide first version (one per page: it cannot
    share one), updates it in place to the real row (HOT), and VACUUM prunes it. Pruning
    does not zero freed space, so the page's free space keeps the wide version's random
    bytes instead of zeros."""
    room = PAGE_BYTES - PAGE_HEADER_BYTES - 2 * LINE_POINTER_BYTES - ROW_BYTES
    width = room - row_bytes(0)
    while row_bytes(width) > room:
        width -= 1
    return width - width % 4


# A cf1 may hold this many pages over one per row: a few empty pages are left by two load
# streams extending the file at once; more means rows moved out of their pages.
MAX_EXTRA_PAGES_PCT = 2.0
MIN_EXTRA_PAGES = 8
# Dead row versions per row beyond which a table is bloated: more than one page holds. With
# the horizon free, a page keeps at most the versions of its row that fit beside it until
# its next visit prunes them (measured: ~1.3 per row after a 60 s UPDATE_PCT=100 run at
# 16 sessions on 2 x 2,048 rows); more can only sit in other pages (rows moved).
HOT_VERSIONS_PER_PAGE = (PAGE_BYTES - PAGE_HEADER_BYTES) // (ROW_BYTES + LINE_POINTER_BYTES)
MAX_DEAD_PER_ROW = float(HOT_VERSIONS_PER_PAGE - 1)

# B-tree geometry of the unique bigint index: a tuple is 16 bytes plus a 4-byte line pointer,
# 8,152 usable bytes per page; an index build fills inner pages to 70 %.
INDEX_ENTRY_BYTES = 20
INDEX_PAGE_BYTES = 8152
INNER_FANOUT = int(INDEX_PAGE_BYTES * 0.70 / INDEX_ENTRY_BYTES)
# pg_stat_statements counts buffer accesses: an UPDATE visits each row's page three times
# (the index scan's fetch, the old version re-read to build the new one, heap_update).
UPDATE_PAGE_VISITS = 3


@dataclass
class TableFacts:
    """One SLOB table as the catalog and statistics show it."""

    schema: str
    table: str
    pages: int
    live_rows: int | None  # n_live_tup; None without statistics (reset, crash)
    dead_rows: int | None  # n_dead_tup
    estimated_rows: int | None  # reltuples (VACUUM/ANALYZE; survives a statistics reset)
    fillfactor: int | None
    autovacuum: bool | None
    index_pages: int | None  # None: no index
    index_valid: bool | None
    index_unique: bool | None
    plain_columns: int
    inserted_rows: int | None = None  # n_tup_ins: since the load, unless statistics were reset
    counted: bool = False  # live_rows and the key range counted from the table itself
    min_key: int | None = None
    max_key: int | None = None

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def rows(self) -> int | None:
        return self.live_rows if self.live_rows is not None else self.estimated_rows

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def max_pages(rows: int) -> int:
    """The most pages a valid table of `rows` rows may have."""
    return rows + max(MIN_EXTRA_PAGES, math.ceil(rows * MAX_EXTRA_PAGES_PCT / 100))


def bloat(facts: TableFacts, rows: int) -> str | None:
    """Why the table is bloated, or None: pages over the one-row-per-page bound, or too many
    dead row versions."""
    parts = []
    if facts.pages > max_pages(rows):
        extra = (facts.pages - rows) / rows * 100 if rows else 0.0
        parts.append(f"{facts.pages:,} pages for {rows:,} rows (+{extra:,.0f} %)")
    if facts.dead_rows is not None and facts.dead_rows > MAX_DEAD_PER_ROW * rows:
        parts.append(
            f"{facts.dead_rows:,} dead row versions ({facts.dead_rows / rows:.1f} per row)"
        )
    return f"bloated: {', '.join(parts)}" if parts else None


def problems(facts: TableFacts | None, spec: TableSpec) -> list[str]:
    """What makes a table unusable for the run its spec describes (empty: valid)."""
    if facts is None:
        return ["missing"]
    found = []
    if facts.rows is not None and facts.rows != spec.rows:
        found.append(f"{facts.rows:,} rows, not {spec.rows:,}")
    if facts.counted and (facts.min_key, facts.max_key) != (1, spec.rows):
        found.append(f"keys {facts.min_key}..{facts.max_key}, not 1..{spec.rows}")
    if facts.pages < spec.rows:
        found.append(f"{facts.pages:,} pages for {spec.rows:,} rows")
    if (why := bloat(facts, spec.rows)) is not None:
        found.append(why)
    if facts.fillfactor != FILLFACTOR:
        found.append(f"fillfactor {facts.fillfactor or 100}, not {FILLFACTOR}")
    if facts.plain_columns != len(WIDE_COLUMNS):
        found.append("padding (c2, c3) not STORAGE PLAIN")
    if spec.indexed and not (facts.index_valid and facts.index_unique):
        found.append("no valid unique index on custid")
    return found


_FACTS = """
SELECT n.nspname AS schema, c.relname AS table,
  pg_relation_size(c.oid) / current_setting('block_size')::int AS pages,
  CASE WHEN s.vacuum_count + s.analyze_count + s.autovacuum_count + s.autoanalyze_count
            + s.n_tup_ins > 0 THEN s.n_live_tup END AS live_rows,
  CASE WHEN s.vacuum_count + s.analyze_count + s.autovacuum_count + s.autoanalyze_count
            + s.n_tup_ins > 0 THEN s.n_dead_tup END AS dead_rows,
  nullif(c.reltuples, -1)::bigint AS estimated_rows,
  (SELECT o.option_value::int FROM pg_options_to_table(c.reloptions) o
    WHERE o.option_name = 'fillfactor') AS fillfactor,
  (SELECT o.option_value::bool FROM pg_options_to_table(c.reloptions) o
    WHERE o.option_name = 'autovacuum_enabled') AS autovacuum,
  pg_relation_size(i.indexrelid) / current_setting('block_size')::int AS index_pages,
  i.indisvalid AND i.indisready AND i.indislive AS index_valid,
  i.indisunique AS index_unique,
  (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = ANY(%(pads)s)
    AND a.attstorage = 'p')::int AS plain_columns
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
LEFT JOIN pg_index i ON i.indrelid = c.oid
WHERE c.relkind = 'r' AND n.nspname ~ '^user[0-9]+$' AND c.relname IN ('cf1', 'cf2')
"""


def statistics_cover_load(facts: TableFacts, rows: int) -> bool:
    """Whether the statistics saw the load: its inserts are still counted. A statistics reset
    (pg_stat_reset) or a crash clears them, and with them every delete since: the rows must
    then be counted from the table."""
    return facts.live_rows is not None and (facts.inserted_rows or 0) >= rows


def count_rows(conn: psycopg.Connection, facts: TableFacts) -> None:
    """Rows and key range from the table itself (through the custid index where there is
    one: an index-only scan on a vacuumed table)."""
    from psycopg import sql

    table = sql.Identifier(facts.schema, facts.table)
    rows, low, high = one(
        conn.execute(
            sql.SQL("SELECT count(*), min(custid), max(custid) FROM {}").format(table)
        ).fetchone()
    )
    facts.live_rows, facts.min_key, facts.max_key = int(rows), low, high
    facts.counted = True


def table_facts(conn: psycopg.Connection) -> dict[str, TableFacts]:
    """Every SLOB table of the database ("userN.cf1" -> facts), from the catalog alone."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(_FACTS, {"pads": list(WIDE_COLUMNS)}).fetchall()
    facts = [TableFacts(**row) for row in rows]
    return {f.name: f for f in facts}


# ----------------------------------------------------------------------- work per SLOBop


def index_levels(index_pages: int) -> int:
    """Levels of the custid B-tree (root to leaf): a root that is a leaf up to one page of
    entries, then one level per INNER_FANOUT-fold growth of the leaf count."""
    leaves = max(index_pages - 1, 1)  # the metapage is not a tree page
    if leaves <= 1:
        return 1
    return 1 + math.ceil(math.log(leaves) / math.log(INNER_FANOUT))


def predicted_work(
    work_unit: int, scan_rows: int, tables: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """What the one-row-per-page layout predicts a SLOBop costs, in blocks.

    SELECT: the index descent (its levels), the leaf pages the range crosses and one heap
    page per row. UPDATE: the same, its heap pages visited UPDATE_PAGE_VISITS times. SCAN: the
    pages of cf2. Physical reads are at most the distinct blocks (each read once per op).
    `tables` are snapshot table facts ("userN.cf1" -> facts as dicts)."""
    cf1 = [t for name, t in tables.items() if name.endswith(".cf1") and t.get("index_pages")]
    if not cf1:
        return {}
    index_pages = max(t["index_pages"] for t in cf1)
    rows = max(t.get("estimated_rows") or t.get("live_rows") or 0 for t in cf1)
    levels = index_levels(index_pages)
    per_leaf = rows / max(index_pages - levels, 1) if rows else 1.0
    crossings = (work_unit - 1) / per_leaf if per_leaf > 1 else 0.0
    index_visits = levels + crossings
    distinct = work_unit + index_visits
    return {
        "index_levels": levels,
        "select": {"lio": distinct, "pio_max": distinct},
        "update": {"lio": UPDATE_PAGE_VISITS * work_unit + index_visits, "pio_max": distinct},
        "scan": {"lio": float(scan_rows), "pio_max": float(scan_rows)},
        "model": (
            f"{work_unit} heap pages (one row per page) + {levels} index levels + "
            f"{crossings:.2f} leaf crossings; UPDATE visits each heap page "
            f"{UPDATE_PAGE_VISITS} times; SCAN reads cf2's {scan_rows:,} pages"
        ),
    }
