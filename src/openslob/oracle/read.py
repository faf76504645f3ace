"""Reading Oracle text reports: which kind a file is, and the parser for it.

An instance's AWR or Statspack report is awr.py's; a RAC global report (awrgrpt) is rac.py's.
"""

from __future__ import annotations

from pathlib import Path

from openslob.oracle.awr import OracleReport, parse_instance, report_kind
from openslob.oracle.rac import parse_global
from openslob.oracle.text import Doc, OracleReportError


def parse_report(text: str, name: str = "") -> OracleReport:
    doc = Doc(text, name or "<report>")
    kind = report_kind(doc)
    return parse_global(doc) if kind == "global" else parse_instance(doc, kind, name)


def parse_files(paths: list[Path] | list[str]) -> tuple[list[OracleReport], list[str]]:
    """Parse every file; one that cannot be read yields an error line, the others still count.
    Reports read only in part are returned and their problems added to the error lines."""
    reports, errors = [], []
    for path in map(Path, paths):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            report = parse_report(text, str(path))
        except OracleReportError as exc:
            errors.append(str(exc))
        except OSError as exc:
            errors.append(f"{path}: cannot read ({exc.strerror or exc})")
        else:
            reports.append(report)
            errors.extend(report.problems)
    return reports, errors
