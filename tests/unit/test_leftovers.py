"""Leftover sessions are looked at again before they are counted (engines/common/leftovers)."""

from __future__ import annotations

import time

from openslob.engines.common.leftovers import still_there


def test_sessions_that_go_a_moment_later_are_no_leftovers() -> None:
    looks = iter([[11, 12], [12], []])
    assert still_there(lambda: next(looks)) == []


def test_sessions_still_there_after_the_wait_are_leftovers() -> None:
    began = time.monotonic()
    assert still_there(lambda: [7], wait_s=0.3) == [7]
    assert time.monotonic() - began >= 0.3


def test_nothing_there_is_not_waited_for() -> None:
    began = time.monotonic()
    assert still_there(lambda: [], wait_s=5.0) == []
    assert time.monotonic() - began < 0.5
