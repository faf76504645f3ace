"""`slob verify` on PostgreSQL: measure the data set, compare with what the config asks for.

Every check reads the real table: rows and pages from a scan of ctids, the key/page
correlation of this schema (the shuffle) and against user1 (shuffles must be independent
between schemas, the weakness of pgio's single shuffle), index validity from the catalog and,
where the amcheck extension can be used, an index-vs-heap check.
"""

from __future__ import annotations

import contextlib

import psycopg
from psycopg import sql

from openslob.engines.api import Check
from openslob.engines.common.rows import one
from openslob.engines.common.verify import (
    VerifierBase,
    compression_check,
    correlation_check,
    index_compression_check,
)
from openslob.engines.postgres import layout
from openslob.engines.postgres.datafiles import relation_compressibility
from openslob.engines.postgres.dataset import (
    LAYOUT_VERSION,
    META_SCHEMA,
    META_TABLE,
    TableSpec,
)
from openslob.engines.postgres.layout import WIDE_COLUMNS


def _page_map(spec: TableSpec) -> sql.Composed:
    return sql.SQL("SELECT (ctid::text::point)[0]::bigint AS blk, custid FROM {}").format(
        sql.Identifier(spec.schema, spec.table)
    )


class TableVerifier(VerifierBase):
    def __init__(self, conn: psycopg.Connection, amcheck: bool) -> None:
        self.conn = conn
        self.amcheck = amcheck
        self.facts = layout.table_facts(conn)
        # Data files as current as the buffers for the compression checks (a role without
        # pg_checkpoint reads the files as the server last wrote them).
        with contextlib.suppress(psycopg.Error):
            conn.execute("CHECKPOINT")

    def exists(self, spec: TableSpec) -> bool:
        found = self.conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", [f"{spec.schema}.{spec.table}"]
        ).fetchone()
        return bool(found and found[0])

    def table_checks(self, spec: TableSpec) -> list[Check]:
        checks = self._layout(spec) + self._bloat(spec) + self._meta(spec) + self._storage(spec)
        measured = relation_compressibility(self.conn, f"{spec.schema}.{spec.table}")
        name = f"{spec.table} compression"
        return [*checks, compression_check(spec.schema, name, measured, spec.ratio)]

    def _layout(self, spec: TableSpec) -> list[Check]:
        rows, used, max_per_page, min_key, max_key, corr, pages = one(
            self.conn.execute(
                sql.SQL(
                    "WITH per_page AS (SELECT blk, count(*) AS n, min(custid) AS k"
                    "  FROM ({map}) m GROUP BY blk)"
                    " SELECT coalesce(sum(n), 0)::bigint, count(*), coalesce(max(n), 0),"
                    "  (SELECT min(custid) FROM {t}), (SELECT max(custid) FROM {t}),"
                    "  corr(k, blk), pg_relation_size({name}::regclass)"
                    "   / current_setting('block_size')::int FROM per_page"
                ).format(
                    map=_page_map(spec),
                    t=sql.Identifier(spec.schema, spec.table),
                    name=sql.Literal(f"{spec.schema}.{spec.table}"),
                )
            ).fetchone()
        )
        table = spec.table
        rows_per_page = rows / used if used else 0.0
        checks = [
            Check(spec.schema, f"{table} rows", rows, f"= {spec.rows}", rows == spec.rows),
            Check(
                spec.schema,
                f"{table} pages",
                pages
                if pages == spec.rows
                else f"{pages} ({pages - spec.rows:+d}: rows moved out of their pages, or "
                "empty pages a parallel load's relation extension left)",
                f"{spec.rows}..{layout.max_pages(spec.rows)}",
                spec.rows <= pages <= layout.max_pages(spec.rows),
            ),
            Check(
                spec.schema,
                f"{table} rows per page",
                round(rows_per_page, 3),
                "= 1 (max 1)",
                used == rows and max_per_page == 1,
            ),
            Check(
                spec.schema,
                f"{table} key range",
                f"{min_key}..{max_key}",
                f"1..{spec.rows}",
                min_key == 1 and max_key == spec.rows,
            ),
        ]
        if spec.indexed:
            name = f"{table} key/page correlation"
            checks.append(correlation_check(spec.schema, name, corr, rows))
        return checks

    def _bloat(self, spec: TableSpec) -> list[Check]:
        """Dead row versions (statistics) and the storage options the layout depends on."""
        facts = self.facts.get(f"{spec.schema}.{spec.table}")
        if facts is None:
            return []
        dead, limit = facts.dead_rows, int(layout.MAX_DEAD_PER_ROW * spec.rows)
        options = f"fillfactor={facts.fillfactor}, autovacuum_enabled={facts.autovacuum}"
        wanted = f"fillfactor={layout.FILLFACTOR}, autovacuum_enabled=False"
        return [
            Check(
                spec.schema,
                f"{spec.table} dead row versions",
                "n/a (no statistics)" if dead is None else dead,
                f"<= {limit} ({layout.MAX_DEAD_PER_ROW:g} per row)",
                dead is None or dead <= limit,
            ),
            Check(spec.schema, f"{spec.table} storage options", options, wanted, options == wanted),
        ]

    def _meta(self, spec: TableSpec) -> list[Check]:
        row = self.conn.execute(
            sql.SQL(
                "SELECT status, layout FROM {} WHERE schema_name = %s AND table_name = %s"
            ).format(sql.Identifier(META_SCHEMA, META_TABLE)),
            [spec.schema, spec.table],
        ).fetchone()
        status = row[0] if row else "unrecorded"
        ok = row is not None and row[0] == "complete" and row[1] == LAYOUT_VERSION
        return [Check(spec.schema, f"{spec.table} load", status, "complete", ok)]

    def _storage(self, spec: TableSpec) -> list[Check]:
        """Padding (c2, c3) must never be compressed or moved out of line (TOAST)."""
        plain, toast_pages = one(
            self.conn.execute(
                "SELECT (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid"
                "   AND a.attname = ANY(%s) AND a.attstorage = 'p'),"
                "  coalesce(pg_relation_size(nullif(c.reltoastrelid, 0)), 0)"
                "   / current_setting('block_size')::int"
                " FROM pg_class c WHERE c.oid = %s::regclass",
                [list(WIDE_COLUMNS), f"{spec.schema}.{spec.table}"],
            ).fetchone()
        )
        wide = len(WIDE_COLUMNS)
        return [
            Check(
                spec.schema,
                f"{spec.table} padding uncompressed",
                f"{plain}/{wide} plain, {toast_pages} TOAST pages",
                f"{wide}/{wide} plain, 0 TOAST pages",
                plain == wide and toast_pages == 0,
            )
        ]

    def index_checks(self, spec: TableSpec) -> list[Check]:
        row = self.conn.execute(
            "SELECT i.indexrelid::regclass::text, i.indisvalid AND i.indisready AND i.indislive,"
            "  i.indisunique FROM pg_index i WHERE i.indrelid = %s::regclass",
            [f"{spec.schema}.{spec.table}"],
        ).fetchone()
        if row is None:
            return [Check(spec.schema, f"{spec.table} index", "missing", "valid, unique", False)]
        name, valid, unique = row
        checks = [
            Check(
                spec.schema,
                f"{spec.table} index",
                ("valid" if valid else "INVALID") + (", unique" if unique else ""),
                "valid, unique",
                bool(valid and unique),
            )
        ]
        measured = relation_compressibility(self.conn, name)
        checks.append(
            index_compression_check(spec.schema, f"{spec.table} index compression", measured)
        )
        if self.amcheck and valid:
            try:
                self.conn.execute("SELECT bt_index_check(%s::regclass, true)", [name])
                checks.append(
                    Check(
                        spec.schema,
                        f"{spec.table} index vs heap",
                        "consistent",
                        "amcheck passes",
                        True,
                    )
                )
            except psycopg.Error as exc:
                first = str(exc).splitlines()[0]
                checks.append(
                    Check(
                        spec.schema, f"{spec.table} index vs heap", first, "amcheck passes", False
                    )
                )
        return checks

    def independence(self, spec: TableSpec, reference: TableSpec) -> Check:
        """Page of each key here vs in the reference schema: independent shuffles ⇒ r ≈ 0."""
        (corr,) = one(
            self.conn.execute(
                sql.SQL(
                    "SELECT corr(a.blk, b.blk) FROM ({a}) a JOIN ({b}) b USING (custid)"
                ).format(a=_page_map(spec), b=_page_map(reference))
            ).fetchone()
        )
        where = f"{spec.table} page order vs {reference.schema}"
        return correlation_check(spec.schema, where, corr, spec.rows)


def amcheck_available(conn: psycopg.Connection) -> bool:
    """Use amcheck when it is installed or installable here; verify works without it."""
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        return True
    except psycopg.Error:
        return False
