"""The InnoDB row layout of the SLOB tables: how wide a row is at each page size, and why.

InnoDB clusters a table on its primary key and needs at least two records per B-tree page: a
record must stay under half of an empty page's free space, or its longest variable-length
columns move to overflow pages. Free space of an empty COMPACT/DYNAMIC page is
page_size - 132 bytes (page header 120, trailer 8, two directory slots 4), so the largest
record that stays inline is (page_size - 132) / 2: 1982 B at 4k, 4030 at 8k, 8126 at 16k
(the server's "Row size too large (> 8126)"), 16318 at 32k, and 16383 at 64k (14-bit
record offsets cap it there).

SLOB wants as few rows per block as possible, so each record is sized just under that limit
(RECORD_MARGIN bytes of slack). Two such records fill a page and a third never fits: the leaf
level holds exactly 2 rows per page at 4k..32k. At 64k the cap leaves room for 3 (a 4th would
fit physically, but InnoDB splits a leaf page of >= 2 records before an insert would eat the
1/16 it reserves for updates, so ordered inserts stop at 3). Verify measures this from the
server (buffer-pool page census, innodb_index_stats n_leaf_pages) rather than trusting it;
measured on 10.11 with 3000 rows: 1.999 mean / max 2 at 4k, 8k, 16k, 32k; 2.997 / 3 at 64k.

Record bytes: 5 (header) + 8 (pk) + 6 (DB_TRX_ID) + 7 (DB_ROLL_PTR) + 8 (custid) = 34, plus
per pad column its length (1 byte when the column's maximum is <= 255 bytes, else 2) and
`pad` bytes. Verify checks this estimate against the record size the server reports.
Updates rewrite a column with a value of the same length, in place: the layout holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PAD_COLUMNS = tuple(f"c{i}" for i in range(2, 21))  # SLOB's CF1 has c2..c20
RECORD_FIXED = 5 + 8 + 6 + 7 + 8
RECORD_MARGIN = 40  # bytes under the inline limit: slack for the directory slots
PAGE_OVERHEAD = 132
MAX_RECORD_64K = 16383
UPDATE_RESERVE_FRACTION = 1 / 16  # btr_cur_optimistic_insert's reserve for updates


@dataclass(frozen=True)
class RowLayout:
    page_size: int  # bytes
    pad: int  # bytes per pad column
    record_bytes: int  # estimated on-page record size
    rows_per_page: int  # leaf rows per page an ordered load produces (measured by verify)

    def table_bytes(self, rows: int) -> int:
        """Bytes of the leaf pages `rows` rows fill."""
        return math.ceil(rows / self.rows_per_page) * self.page_size


def max_inline_record(page_size: int) -> int:
    limit = (page_size - PAGE_OVERHEAD) // 2
    return min(limit, MAX_RECORD_64K) if page_size >= 65536 else limit


def length_bytes(pad: int) -> int:
    return 1 if pad <= 255 else 2


def record_bytes(pad: int) -> int:
    return RECORD_FIXED + len(PAD_COLUMNS) * (length_bytes(pad) + pad)


def layout_for(page_size: int) -> RowLayout:
    """The widest row that keeps every record on its leaf page, and the rows per page."""
    per_column = (max_inline_record(page_size) - RECORD_MARGIN - RECORD_FIXED) // len(PAD_COLUMNS)
    pad = per_column - 2
    if per_column - 1 <= 255:  # short columns store their length in one byte
        pad = per_column - 1
    record = record_bytes(pad)
    free = page_size - PAGE_OVERHEAD
    reserve = int(page_size * UPDATE_RESERVE_FRACTION)
    rows = 2  # two always fit (record <= half the free space)
    while (rows + 1) * record <= free and rows * record + reserve + record <= free:
        rows += 1
    return RowLayout(page_size, pad, record, rows)


# InnoDB B-tree geometry for the work-per-SLOBop model: a node pointer record is its key
# (8 bytes), the child page number (4) and a 5-byte header; a secondary index leaf record is
# custid and the primary key (16) plus the header. Pages fill to about 15/16.
NODE_POINTER_BYTES = 5 + 8 + 4 + 2  # + its share of the page directory
SECONDARY_RECORD_BYTES = 5 + 8 + 8 + 2
PAGE_FILL = 15 / 16
# An UPDATE also gets each row's undo page and re-positions on the row it changes.
UPDATE_EXTRA_GETS_PER_ROW = 2


def btree_levels(entries: int, per_leaf: float, fanout: float) -> int:
    """Levels of a B-tree holding `entries` records, root to leaf."""
    leaves = max(math.ceil(entries / per_leaf), 1)
    return 1 if leaves <= 1 else 1 + math.ceil(math.log(leaves) / math.log(fanout))


def predicted_work(
    layout: RowLayout, rows: int, work_unit: int, scan_rows: int
) -> dict[str, object]:
    """Page gets of one SLOBop as the InnoDB layout predicts them.

    SELECT: the custid index descent and the leaf pages the range crosses, then one primary
    key descent per row (root to leaf: the row's own leaf page is the physical read). UPDATE:
    the same plus UPDATE_EXTRA_GETS_PER_ROW per row. SCAN: the leaf pages of cf2. Physical
    reads are at most the distinct pages: the row leaves and the secondary index pages."""
    usable = (layout.page_size - PAGE_OVERHEAD) * PAGE_FILL
    fanout = usable / NODE_POINTER_BYTES
    pk_levels = btree_levels(rows, layout.rows_per_page, fanout)
    per_sec_leaf = usable / SECONDARY_RECORD_BYTES
    sec_levels = btree_levels(rows, per_sec_leaf, fanout)
    crossings = (work_unit - 1) / per_sec_leaf
    select = sec_levels + crossings + work_unit * pk_levels
    distinct = sec_levels + crossings + work_unit
    scan_pages = math.ceil(scan_rows / layout.rows_per_page)
    return {
        "index_levels": sec_levels,
        "select": {"lio": select, "pio_max": distinct},
        "update": {"lio": select + UPDATE_EXTRA_GETS_PER_ROW * work_unit, "pio_max": distinct},
        "scan": {"lio": float(scan_pages), "pio_max": float(scan_pages)},
        "model": (
            f"custid index {sec_levels} levels + {crossings:.2f} leaf crossings, then "
            f"{work_unit} primary-key descents of {pk_levels} pages ({layout.rows_per_page} "
            f"rows per leaf page); UPDATE adds {UPDATE_EXTRA_GETS_PER_ROW} page gets per row "
            f"(undo, re-positioning); SCAN reads cf2's {scan_pages:,} leaf pages"
        ),
    }
