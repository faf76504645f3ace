"""Issue 28: AWR / Statspack layouts and rules found on real reports, each on a constructed
excerpt in the real layout (the fixture's header says which layout and version it copies).

Expected figures are computed by hand from the fixture's printed cells (the arithmetic is in
each test's comments).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from openslob.oracle import awr_rows, parse_report

DATA = Path(__file__).parent / "data" / "oracle"
AWR11204 = DATA / "awr11204" / "awr.20.8.txt"


def _row(path: Path) -> dict:
    report = parse_report(path.read_text(encoding="utf-8"), str(path))
    assert report.problems == []
    return awr_rows([report])[0]


# --- item 1: 11.2.0.4 / 12c split the activity statistics into Key and Other ----------------


def test_key_and_other_instance_activity_stats_are_read() -> None:
    report = parse_report(AWR11204.read_text(encoding="utf-8"), str(AWR11204))
    # Key Instance Activity Stats
    assert report.stat("user commits") == 6400
    assert report.stat("session logical reads", "per_second") == 8591.2
    # Other Instance Activity Stats
    assert report.stat("physical read IO requests", "per_second") == 45.8
    assert report.stat("redo synch writes") == 97
    row = awr_rows([report])[0]
    assert row["PREADS"] == 45  # awr_info truncates 45.8
    # 'physical read total bytes' 499,712.0/s / 2^20 = 0.4766 -> %.1f 0.5
    assert row["READ_MBS"] == 0.5
    # 'physical read bytes' 375,125.3/s / 2^20 = 0.35774 -> 0.358
    assert row["DB_READ_MBS"] == 0.358
    # 'physical write bytes' 259,413.3/s / 2^20 = 0.24740 -> 0.247
    assert row["DB_WRITE_MBS"] == 0.247
