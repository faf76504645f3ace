"""MariaDB's interval statement texts without a server: the data files' I/O summaries as
GROUP_CONCAT returns them (engines/mariadb/stats.py summaries_of)."""

from __future__ import annotations

import pytest

from openslob.engines.mariadb.stats import (
    _FILE_COLUMNS,
    _SEPARATOR,
    DATA_FILE,
    LOG_FILE,
    summaries_of,
)

_BIG = 2**64 - 1  # BIGINT UNSIGNED's largest: picosecond timers reach it in long uptimes


def _item(event: str, values: list[int]) -> str:
    return f"{event}={','.join(map(str, values))}"


def test_two_events_as_the_separate_statement_gives_them() -> None:
    data = list(range(1, len(_FILE_COLUMNS) + 1))
    log = [_BIG, *range(len(_FILE_COLUMNS) - 1)]
    text = _SEPARATOR.join([_item(DATA_FILE, data), _item(LOG_FILE, log)])
    got = summaries_of(text.encode())  # PyMySQL hands over bytes for a binary collation
    assert got == {
        DATA_FILE: {c: float(v) for c, v in zip(_FILE_COLUMNS, data, strict=True)},
        LOG_FILE: {c: float(v) for c, v in zip(_FILE_COLUMNS, log, strict=True)},
    }
    assert got[LOG_FILE][_FILE_COLUMNS[0]] == float(_BIG)  # what float(int) of the row gives


def test_no_text_is_no_summary_and_a_short_item_is_an_error() -> None:
    assert summaries_of(None) == {} and summaries_of("") == {}  # performance_schema OFF
    short = _item(DATA_FILE, list(range(len(_FILE_COLUMNS) - 1)))
    with pytest.raises(ValueError):
        summaries_of(short)
    with pytest.raises(ValueError):
        summaries_of(_item(DATA_FILE, [1] * (len(_FILE_COLUMNS) - 1)) + ",x")
