"""Statuses and phases are StrEnums whose values are the strings run.json, sweep.json and
timeseries.csv always held: the files stay byte for byte what they were."""

from __future__ import annotations

import csv
import io
import json

from openslob.model.states import Phase, PointStatus, RunStatus
from openslob.results.record import RunRecord
from openslob.results.rundir import run_text


def test_values_are_the_strings_of_the_files() -> None:
    assert [s.value for s in RunStatus] == ["complete", "interrupted", "failed"]
    assert [s.value for s in PointStatus] == [
        "pending",
        "running",
        "complete",
        "interrupted",
        "failed",
    ]
    assert [p.value for p in Phase] == ["warmup", "window"]
    assert RunRecord().status == "complete" and RunRecord().status is RunStatus.COMPLETE


def test_run_json_text_is_unchanged() -> None:
    plain = {
        "status": "interrupted",
        "intervals": {"columns": ["phase"], "rows": [["warmup"], ["window"]]},
        "points": [{"status": "pending"}, {"status": "failed"}],
    }
    typed = {
        "status": RunStatus.INTERRUPTED,
        "intervals": {"columns": ["phase"], "rows": [[Phase.WARMUP], [Phase.WINDOW]]},
        "points": [{"status": PointStatus.PENDING}, {"status": PointStatus.FAILED}],
    }
    assert run_text(typed) == run_text(plain)
    assert json.dumps(typed, indent=2, default=str) == json.dumps(plain, indent=2, default=str)
    assert json.dumps(typed, sort_keys=True) == json.dumps(plain, sort_keys=True)


def test_read_back_and_csv_compare_equal() -> None:
    back = json.loads(json.dumps({"status": RunStatus.COMPLETE}))["status"]
    assert type(back) is str and back == RunStatus.COMPLETE
    assert {"window": 1}[Phase.WINDOW] == 1 and {Phase.WARMUP: 2}["warmup"] == 2
    buffer = io.StringIO()
    csv.writer(buffer).writerow([Phase.WINDOW, RunStatus.FAILED])
    assert buffer.getvalue() == "window,failed\r\n"
    assert f"{RunStatus.COMPLETE}|{Phase.WARMUP:>8}" == "complete|  warmup"
