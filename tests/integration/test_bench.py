"""Every bench/ script runs from a clean checkout in --quick mode (proof it works; the ratios
themselves are for people to read, never asserted: tests do not judge speed)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openslob.engines.postgres.server import EmbeddedServer
from tests.conftest import make_base_dir

BENCH = Path(__file__).resolve().parents[2] / "bench"
EXPECTED = {
    "setup_speed.py": "ratio setup/CTAS",
    "pio_vs_fio.py": "reads ratio",
    "lio_efficiency.py": "(b) loop / pgbench",
    "driver_overhead.py": "ratio",
    "session_start.py": "sessions ready in",
    "sweep_overhead.py": "sweep_overhead:",
    "rate_overhead.py": "rate_overhead:",
    "interval_overhead.py": "accounted ratio",
    "client_memory.py": "client_memory:",
    "prefetch.py": "reads/s",
    "ebpf_cost.py": "ratio = median on / median off",
}


@pytest.fixture(scope="module")
def bench_server() -> Iterator[EmbeddedServer]:
    base = make_base_dir("openslob-benchtest-")
    srv = EmbeddedServer(base / "srv")
    srv.start("pio")
    yield srv
    srv.destroy()
    shutil.rmtree(base, ignore_errors=True)  # the directory make_base_dir made, too


def test_every_script_is_covered() -> None:
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(EXPECTED)


# setup_speed.py drops the data set every other script shares: it runs last, or the script
# after it loads those 4 x 8,192 rows again (~9 s)
SCRIPTS = sorted(EXPECTED, key=lambda name: (name == "setup_speed.py", name))


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_quick(script: str, bench_server: EmbeddedServer) -> None:
    args = [sys.executable, str(BENCH / script), "--data-dir", str(bench_server.data_dir)]
    args += ["--size", "16M", "--repeats", "1"] if script == "setup_speed.py" else ["--quick"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert EXPECTED[script] in proc.stdout, proc.stdout
    if script == "interval_overhead.py":  # read within each run: a figure, never n/a here
        assert re.search(r"accounted ratio \([^)]*\) [0-9]", proc.stdout), proc.stdout
