"""Oracle AWR / Statspack text reports (what SLOB's runit.sh leaves) read into openslob's model.

parse_report / parse_files / looks_like_oracle_report live in awr.py; to_run, awr_rows and
event_rows (the awr_info table and flashdba's per-event table) in model.py.
"""

from openslob.oracle.awr import (
    OracleReport,
    OracleReportError,
    WaitEvent,
    looks_like_oracle_report,
    parse_files,
    parse_number,
    parse_report,
)
from openslob.oracle.model import awr_rows, event_rows, to_run

__all__ = [
    "OracleReport",
    "OracleReportError",
    "WaitEvent",
    "awr_rows",
    "event_rows",
    "looks_like_oracle_report",
    "parse_files",
    "parse_number",
    "parse_report",
    "to_run",
]
