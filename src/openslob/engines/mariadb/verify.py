"""`slob verify` on MariaDB: measure the data set from the server, compare with the config.

Every figure is read from the server, not assumed:
- rows, custid range and pk range (pk must be a permutation of 1..rows: the shuffle);
- rows per leaf page: the table is scanned through its primary key, then the buffer pool's
  page directory (information_schema.INNODB_BUFFER_PAGE) gives the record count and record
  bytes of every leaf page it holds. When the whole table fits, that census is exact; else it
  is a sample (max rows per page, record size) and the leaf page count comes from
  mysql.innodb_index_stats n_leaf_pages after ANALYZE (exact for more than a few dozen pages);
- record size on the page (DATA_SIZE / records), which decides the rows per page;
- key/pk correlation (|r| below 5 standard errors: a shuffle) and pk order against user1
  (independent shuffles per schema);
- the custid index unique, and CHECK TABLE (every index against the clustered index);
- row format DYNAMIC without page compression: padding is never compressed.
"""

from __future__ import annotations

import math
from typing import Any

import pymysql

from openslob.engines.api import Check
from openslob.engines.common.rows import one
from openslob.engines.common.verify import (
    VerifierBase,
    compression_check,
    correlation_check,
    index_compression_check,
)
from openslob.engines.mariadb.connection import ident
from openslob.engines.mariadb.datafiles import flush_tables, table_compressibility
from openslob.engines.mariadb.dataset import (
    LAYOUT_VERSION,
    META_DB,
    META_TABLE,
    TableSpec,
    storage_problem,
)
from openslob.engines.mariadb.layout import RowLayout

RECORD_SIZE_TOLERANCE = 16  # bytes between the estimated and the measured record size
# Internal (non-leaf) records are ~20 bytes; leaf records of the SLOB tables are > 1 KB.
LEAF_RECORD_MIN_BYTES = 200
STATS_EXACT_FROM_PAGES = 64  # below this innodb_index_stats reports n_leaf_pages loosely


class TableVerifier(VerifierBase):
    def __init__(self, conn: pymysql.connections.Connection, layout: RowLayout) -> None:
        self.conn = conn
        self.layout = layout

    def _one(self, query: str, args: Any = None) -> tuple:
        with self.conn.cursor() as cur:
            cur.execute(query, args)
            return cur.fetchone() or ()

    def exists(self, spec: TableSpec) -> bool:
        (found,) = self._one(
            "SELECT COUNT(*) FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            [spec.schema, spec.table],
        )
        return bool(found)

    def table_checks(self, spec: TableSpec) -> list[Check]:
        checks = self._content(spec) + self._pages(spec) + self._meta(spec) + self._storage(spec)
        # The file holds the rows (leaf pages of the clustered index) and the B-tree nodes and
        # custid index: the rows are checked, the rest stated (mostly small integer keys).
        flush_tables(self.conn, [(spec.schema, spec.table)])
        size = self.layout.page_size
        measured = table_compressibility(self.conn, spec.schema, spec.table, size)
        nodes = table_compressibility(self.conn, spec.schema, spec.table, size, rows=False)
        name = f"{spec.table} compression"
        return [
            *checks,
            compression_check(spec.schema, name, measured, spec.ratio),
            index_compression_check(spec.schema, f"{spec.table} index pages compression", nodes),
        ]

    def _content(self, spec: TableSpec) -> list[Check]:
        rows, min_key, max_key, min_pk, max_pk, corr = self._one(
            "SELECT COUNT(*), MIN(custid), MAX(custid), MIN(pk), MAX(pk),"
            "  (AVG(custid * pk) - AVG(custid) * AVG(pk))"
            "  / NULLIF(STDDEV_POP(custid) * STDDEV_POP(pk), 0)"
            f" FROM {spec.name} FORCE INDEX (PRIMARY)"
        )
        t, n = spec.table, spec.rows
        checks = [
            Check(spec.schema, f"{t} rows", rows, f"= {n}", rows == n),
            Check(
                spec.schema,
                f"{t} key range",
                f"{min_key}..{max_key}",
                f"1..{n}",
                min_key == 1 and max_key == n,
            ),
            Check(
                spec.schema,
                f"{t} pk permutation",
                f"{min_pk}..{max_pk} over {rows} rows",
                f"1..{n} over {n} rows",
                min_pk == 1 and max_pk == n and rows == n,
            ),
        ]
        if spec.indexed:
            checks.append(correlation_check(spec.schema, f"{t} key/pk correlation", corr, n))
        return checks

    def _pages(self, spec: TableSpec) -> list[Check]:
        """Rows per leaf page and record size, measured (see the module docstring)."""
        layout, t = self.layout, spec.table
        with self.conn.cursor() as cur:
            cur.execute(f"ANALYZE TABLE {spec.name}")
            cur.fetchall()
            cur.execute(f"SELECT COUNT(c2) FROM {spec.name} FORCE INDEX (PRIMARY)")
            cur.fetchall()
            cur.execute(
                "SELECT COUNT(*), COALESCE(SUM(NUMBER_RECORDS), 0), MAX(NUMBER_RECORDS),"
                "  SUM(DATA_SIZE) / NULLIF(SUM(NUMBER_RECORDS), 0)"
                " FROM information_schema.INNODB_BUFFER_PAGE"
                " WHERE TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' AND PAGE_TYPE = 'INDEX'"
                "  AND DATA_SIZE > NUMBER_RECORDS * %s",
                [ident(spec.schema, spec.table), LEAF_RECORD_MIN_BYTES],
            )
            seen_pages, seen_rows, max_per_page, record_bytes = one(cur.fetchone())
            cur.execute(
                "SELECT stat_value FROM mysql.innodb_index_stats WHERE database_name = %s"
                " AND table_name = %s AND index_name = 'PRIMARY' AND stat_name = 'n_leaf_pages'",
                [spec.schema, spec.table],
            )
            stat = cur.fetchone()
        census = int(seen_rows) == spec.rows and spec.rows > 0
        leaf_pages: int | None = int(seen_pages) if census else None
        if leaf_pages is None and stat and int(stat[0]) >= STATS_EXACT_FROM_PAGES:
            leaf_pages = int(stat[0])
        rpp = layout.rows_per_page
        wanted = math.ceil(spec.rows / rpp)
        source = "census of all leaf pages" if census else f"{seen_pages} sampled leaf pages"
        if leaf_pages:
            mean = spec.rows / leaf_pages
            measured = f"{mean:.3f} mean over {leaf_pages} leaf pages, max {max_per_page}"
            pages_ok = wanted <= leaf_pages <= wanted * 1.01 + 2
        else:
            measured = f"max {max_per_page} ({source})"
            pages_ok = True
        checks = [
            Check(
                spec.schema,
                f"{t} rows per leaf page",
                measured,
                f"{rpp} (max {rpp}; {wanted} leaf pages, +1 % slack)",
                pages_ok and max_per_page == rpp if spec.rows >= rpp else pages_ok,
            )
        ]
        measured_record = None if record_bytes is None else round(float(record_bytes), 1)
        checks.append(
            Check(
                spec.schema,
                f"{t} record bytes on page",
                measured_record,
                f"~{layout.record_bytes} (> 1/{rpp + 1} page: {rpp} rows per page at most)",
                measured_record is not None
                and abs(measured_record - layout.record_bytes) <= RECORD_SIZE_TOLERANCE,
            )
        )
        return checks

    def _meta(self, spec: TableSpec) -> list[Check]:
        row = self._one(
            f"SELECT status, layout, page_size, pad FROM {ident(META_DB, META_TABLE)}"
            " WHERE schema_name = %s AND table_name = %s",
            [spec.schema, spec.table],
        )
        status = row[0] if row else "unrecorded"
        ok = bool(row) and row[1:] == (LAYOUT_VERSION, self.layout.page_size, self.layout.pad)
        return [
            Check(
                spec.schema, f"{spec.table} load", status, "complete", ok and status == "complete"
            )
        ]

    def _storage(self, spec: TableSpec) -> list[Check]:
        """Padding must never be compressed (row or page compression) nor moved off-page."""
        row_format, options = self._one(
            "SELECT ROW_FORMAT, CREATE_OPTIONS FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            [spec.schema, spec.table],
        )
        problem = storage_problem(row_format, options)
        return [
            Check(
                spec.schema,
                f"{spec.table} padding uncompressed",
                problem or row_format,
                "Dynamic, no compression",
                problem is None,
            )
        ]

    def index_checks(self, spec: TableSpec) -> list[Check]:
        (unique,) = self._one(
            "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s"
            " AND TABLE_NAME = %s AND INDEX_NAME = 'custid' AND NON_UNIQUE = 0",
            [spec.schema, spec.table],
        )
        checks = [
            Check(
                spec.schema,
                f"{spec.table} custid index",
                "unique" if unique else "missing",
                "unique",
                bool(unique),
            )
        ]
        with self.conn.cursor() as cur:
            cur.execute(f"CHECK TABLE {spec.name}")
            messages = [r[3] for r in cur.fetchall()]
        ok = messages[-1:] == ["OK"] and not any(
            m != "OK" and "error" in m.lower() for m in messages
        )
        checks.append(
            Check(
                spec.schema,
                f"{spec.table} CHECK TABLE",
                "; ".join(messages),
                "OK",
                ok,
            )
        )
        return checks

    def independence(self, spec: TableSpec, reference: TableSpec) -> Check:
        """pk of each key here vs in the reference schema: independent shuffles => r ~ 0."""
        (corr,) = self._one(
            "SELECT (AVG(a.pk * b.pk) - AVG(a.pk) * AVG(b.pk))"
            "  / NULLIF(STDDEV_POP(a.pk) * STDDEV_POP(b.pk), 0)"
            f" FROM {spec.name} a JOIN {reference.name} b USING (custid)"
        )
        where = f"{spec.table} pk order vs {reference.schema}"
        return correlation_check(spec.schema, where, corr, spec.rows)
