"""stop_process / wait_until_stopped on a process this one launched (as `_launch` starts
mariadbd): when stop returns, the pid is gone, not left a zombie until the client exits."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from openslob.engines.common.server import stop_process

IGNORE_TERM = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "


def _child(*, ignore_term: bool = False) -> subprocess.Popen[str]:
    """A child that says ready, then sleeps a minute (SIGTERM ignored when asked)."""
    code = (IGNORE_TERM if ignore_term else "") + "import time; print('ready', flush=True); "
    proc = subprocess.Popen(
        [sys.executable, "-c", code + "time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_stopped_child_is_reaped_before_stop_returns() -> None:
    proc = _child()
    started = time.monotonic()
    stop_process(proc.pid, 10)
    assert not Path(f"/proc/{proc.pid}").exists()  # no zombie of ours left behind
    assert time.monotonic() - started < 2  # reaped at once, not after the zombie's grace
    assert proc.poll() is not None  # the Popen object copes with a pid reaped elsewhere


def test_a_child_that_ignores_sigterm_is_killed_and_gone_before_stop_returns() -> None:
    proc = _child(ignore_term=True)
    stop_process(proc.pid, 0.5)
    assert not Path(f"/proc/{proc.pid}").exists()
    assert proc.poll() is not None
