"""The text layer under every Oracle report parser: numbers, lines, titles and column tables.

Contract:
- parse_number / parse_duration_ms turn one printed cell into a float (None when the cell is
  blank, '####' overflow or N/A); printed_error gives the half-unit rounding error of a cell.
- Doc holds a report's lines, cleaned the way every layout needs: CR/LF, the SQL*Plus 'OUTPUT'
  page heading, our fixtures' '#' provenance header, and form feeds. 11g AWR and Statspack put
  the page break (\\f) at the start of a section's title line ('\\fInstance Activity Stats');
  12c+ print it on a line of its own. Removed, the title starts in column 0 like any other.
- Tables are read by column position: the dashed rule under a table's header gives the spans
  and every data line is sliced on them (AWR leaves cells blank, e.g. %Time-outs in 19c, so
  splitting on whitespace would shift columns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from openslob.model.errors import OpenslobError


class OracleReportError(OpenslobError):
    """An Oracle report file that cannot be read at all (not a report, or no header)."""


# --- numbers --------------------------------------------------------------------------------

_SUFFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_NUM = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
# 'm' is milliseconds cut to the column width ('2997.68m' beside '2997.69ms' in the same 19c
# global report), never minutes: AWR prints waits in ns/us/ms/s only.
_DURATION = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+))\s*(ns|us|ms|m|s)$")
_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "m": 1.0, "s": 1e3}


def parse_number(text: str | None) -> float | None:
    """'1,234' 1234.0, '.7', '2.5M' 2.5e6, '1,234K', '1.2E+05'; '', '####', 'N/A' -> None.

    Suffixes are decimal, as AWR states ("K is 1000, M is 1000000, G is 1000000000").
    """
    if text is None:
        return None
    s = text.strip().replace(",", "")
    if not s or set(s) == {"#"} or s.upper() in ("N/A", "NA", "-"):
        return None
    mult = 1.0
    if s[-1].upper() in _SUFFIX and len(s) > 1:
        mult = _SUFFIX[s[-1].upper()]
        s = s[:-1]
    if not _NUM.match(s):
        return None
    return float(s) * mult


def parse_duration_ms(text: str | None) -> float | None:
    """An 'Avg wait' cell in ms: a bare number is ms (10g-12.1); 12.2+ prints '3.23ms',
    '709.52us', '52.86 s'."""
    if text is None:
        return None
    s = text.strip().replace(",", "")
    m = _DURATION.match(s)
    if m:
        return float(m.group(1)) * _UNIT_MS[m.group(2)]
    return parse_number(s)


def printed_error(text: str | None, unit_ms: bool = False) -> float | None:
    """Half a unit of the last printed digit of a cell, in the cell's unit (ms when unit_ms and
    the cell carries a unit): '1' -> 0.5, '42,909.09' -> 0.005, '8.64ms' -> 0.005, '1.2K' -> 50.
    None when the cell is no number."""
    if text is None:
        return None
    s = text.strip().replace(",", "")
    scale = 1.0
    m = _DURATION.match(s) if unit_ms else None
    if m:
        s, scale = m.group(1), _UNIT_MS[m.group(2)]
    elif s and s[-1].upper() in _SUFFIX:
        s, scale = s[:-1], _SUFFIX[s[-1].upper()]
    if not _NUM.match(s):
        return None
    exponent = Decimal(s).as_tuple().exponent
    return 0.5 * 10.0 ** int(exponent) * scale


# --- lines ----------------------------------------------------------------------------------

RULE = re.compile(r"^[\s~-]*-{2,}[\s~-]*$")  # a column rule: dash groups (statspack: ~ too)
END_RULE = re.compile(r"^\s+-{20,}\s*$")  # the end-of-section rule, one indented dash run
END_OF_REPORT = re.compile(r"^\s*End of Report\b")
SECTION_MARK = re.compile(r"DB/Inst:|Snaps:")  # the right half of 10g-19c section title lines


def spans(rule: str) -> list[tuple[int, int]]:
    """Column spans from a rule line; each runs to the next column's start (gaps included)."""
    starts = [m.start() for m in re.finditer(r"[-~]+", rule)]
    return [(s, starts[i + 1] if i + 1 < len(starts) else 10_000) for i, s in enumerate(starts)]


def cells(line: str, spans_: list[tuple[int, int]]) -> list[str]:
    return [line[a:b].strip() for a, b in spans_]


def is_title(line: str, title: str) -> bool:
    """A section title at column 0, followed by nothing or by 2+ spaces / 'DB/Inst:'."""
    if not line.startswith(title):
        return False
    rest = line[len(title) :]
    return not rest.strip() or rest.startswith("  ") or rest.lstrip().startswith("DB/Inst")


def clean_lines(text: str) -> list[str]:
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff").replace("\f", "")
    lines = [ln.rstrip() for ln in text.split("\n")]
    while lines and lines[0].startswith("#"):  # our fixtures' provenance header
        lines.pop(0)
    # SQL*Plus prints the column heading OUTPUT on every page when the report is spooled
    # from SELECT * FROM TABLE(dbms_workload_repository.awr_report_text(...)).
    return [ln for ln in lines if ln.strip() != "OUTPUT"]


class Doc:
    """A report's cleaned lines, and the sections that could not be read fully (problems)."""

    def __init__(self, text: str, name: str) -> None:
        self.lines = clean_lines(text)
        self.name = name
        self.problems: list[str] = []

    def error(self, section: str, what: str) -> OracleReportError:
        return OracleReportError(f"{self.name}: section '{section}': {what}")

    def note(self, section: str, what: str) -> None:
        """A section read only in part (or not at all): its figures stay None."""
        self.problems.append(f"{self.name}: section '{section}': {what}")

    def find(self, *titles: str, start: int = 0) -> int | None:
        for i in range(start, len(self.lines)):
            if any(is_title(self.lines[i], t) for t in titles):
                return i
        return None

    def find_all(self, title: str) -> list[int]:
        return [i for i, line in enumerate(self.lines) if is_title(line, title)]

    def ended(self) -> bool:
        return any(END_OF_REPORT.match(line) for line in self.lines[-400:])

    def last_section(self) -> str:
        """The title of the last section that starts in the file (where a cut file stops)."""
        for line in reversed(self.lines):
            if line and not line[0].isspace() and SECTION_MARK.search(line):
                return SECTION_MARK.split(line)[0].strip()
        return "header"

    def table(self, title_idx: int, section: str, *, ended: bool) -> list[list[str]] | None:
        """Rows of the table under a title, sliced on its column rule.

        ended=True: the table must close with the indented end rule (AWR/Statspack print one
        under every section); reaching the end of the file first means the file was cut: the
        section is noted as a problem and the rows before the cut are returned (each row is
        read as printed; the rows after the cut are unknown, not absent).
        ended=False (Top N events): the table ends at the first blank or non-row line.
        """
        lines = self.lines
        i, spans_ = title_idx + 1, None
        while i < len(lines) and i < title_idx + 40:
            if RULE.match(lines[i]) and not END_RULE.match(lines[i]) and len(spans(lines[i])) > 1:
                spans_ = spans(lines[i])
                break
            if END_RULE.match(lines[i]):
                return []  # "No data exists for this section of the report."
            i += 1
        if spans_ is None:
            self.note(section, "no column header (file cut short or not a report)")
            return None
        rows: list[list[str]] = []
        for line in lines[i + 1 :]:
            if END_RULE.match(line):
                return rows
            if not ended:
                if not line.strip():
                    if rows:
                        return rows
                    continue
                row = cells(line, spans_)
                if not any(parse_duration_ms(c) is not None for c in row[1:]):
                    return rows
                rows.append(row)
                continue
            if not line.strip() or line.startswith("->") or RULE.match(line):
                continue
            if is_title(line, section):  # page break repeats the title and header
                continue
            rows.append(cells(line, spans_))
        if ended:
            self.note(section, "ends before its closing rule (file truncated)")
        return rows

    def grid(self, title_idx: int, section: str, *, closed: bool = True) -> Grid:
        """A 12c+ RAC table with group headings over its column header: the spans come from
        the last rule before the first line holding a number; a page break that repeats the
        title and headings is skipped. closed=True: rows run to the closing rule (None and a
        problem noted when the file ends first, the rows before the cut kept); closed=False: to
        the first blank line or the next title."""
        grid = Grid([], [])
        spans_: list[tuple[int, int]] | None = None
        prev = ""
        repeat = False  # inside a repeated title's headings, until its column rule
        for n, line in enumerate(self.lines[title_idx + 1 :]):
            if not grid.rows and n > 40:
                return grid  # no rows under the headings: "No data exists ..."
            if is_title(line, section):
                repeat = True
                continue
            if repeat:  # a page break's title and headings, up to its first column rule
                repeat = not (RULE.match(line) and len(spans(line)) > 1)
                continue
            if END_RULE.match(line) and grid.rows:
                return grid
            if RULE.match(line) or line.lstrip().startswith("~"):
                if RULE.match(line) and len(spans(line)) > 1 and not grid.rows:
                    spans_, grid.header = spans(line), cells(prev, spans(line))
                prev = line
                continue
            if not closed and grid.rows and (not line.strip() or not line[0].isspace()):
                return grid  # a blank line or the next title ends an unclosed table
            prev = line if line.strip() else prev
            if not line.strip() or line.startswith("->") or spans_ is None:
                continue
            row = cells(line, spans_)
            if row == grid.header:  # a page's column headings again
                continue
            if grid.rows or any(parse_duration_ms(c) is not None for c in row):
                grid.rows.append(row)
        if closed:
            self.note(section, "ends before its closing rule (file truncated)")
        return grid


@dataclass
class Grid:
    """A RAC table: the column headings (cells of the line above the rule) and the rows."""

    header: list[str]
    rows: list[list[str]]

    def col(self, *names: str) -> int | None:
        """Index of the first heading equal to one of the names (case and spaces ignored)."""
        wanted = {" ".join(n.lower().split()) for n in names}
        for i, head in enumerate(self.header):
            if " ".join(head.lower().split()) in wanted:
                return i
        return None
