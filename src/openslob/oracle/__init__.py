"""Oracle AWR / Statspack text reports (what SLOB's runit.sh leaves) read into openslob's model.

text.py: numbers, lines and column tables; awr.py: single-instance AWR/Statspack sections
and looks_like_oracle_report; read.py: parse_report / parse_files; rac.py: RAC global
reports and instance
reports added up into cluster figures; idle.py: Oracle's Idle wait class; awrinfo.py: the
awr_info table (awr_info.sh's definitions, openslob's extras); model.py: to_run (run.json-shaped
dicts), flashdba's per-event table and the UPDATE_PCT/sessions a report's path gives.
"""

from openslob.oracle.awr import OracleReport, WaitEvent, looks_like_oracle_report
from openslob.oracle.awrinfo import awr_rows
from openslob.oracle.model import event_rows, to_run
from openslob.oracle.rac import combine
from openslob.oracle.read import parse_files, parse_report
from openslob.oracle.text import OracleReportError, parse_number

__all__ = [
    "OracleReport",
    "OracleReportError",
    "WaitEvent",
    "awr_rows",
    "combine",
    "event_rows",
    "looks_like_oracle_report",
    "parse_files",
    "parse_number",
    "parse_report",
    "to_run",
]
