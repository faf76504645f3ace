"""Results on a full disk (issue 20): a run that cannot save its files still prints its
report, says which files were not written and leaves no truncated file; plots and HTML
reports are written whole or not at all.

The full disk is real when we are root: a 64 KiB tmpfs, unmounted afterwards. Otherwise the
child process runs under RLIMIT_FSIZE (64 KiB), so its writes beyond that fail with EFBIG
through the same write path (Python ignores SIGXFSZ, so write() returns the error).
"""

from __future__ import annotations

import csv
import io
import json
import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from openslob.engines.postgres.server import EmbeddedServer
from tests.conftest import invoke, slob_subprocess

LIMIT = 64 * 1024
DATA = ["--schemas", "2", "--scale", "1000", "--scan-table-sz", "16", "--seed", "43"]
GOOD_RUN = Path(__file__).parents[1] / "data" / "runs" / "20261122T052706Z"


@dataclass
class SmallDisk:
    path: Path
    tmpfs: bool
    limit: int = LIMIT

    def fill(self) -> None:
        """No room left at all (tmpfs: a filler file; else a 1-byte file size limit)."""
        if not self.tmpfs:
            self.limit = 1
            return
        with (self.path / "filler").open("wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass

    def child_limits(self) -> Callable[[], None] | None:
        if self.tmpfs:
            return None
        limit = self.limit
        return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    @property
    def full_error(self) -> str:
        return os.strerror(28 if self.tmpfs else 27)  # ENOSPC / EFBIG


@pytest.fixture()
def disk(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SmallDisk]:
    limit = getattr(request, "param", LIMIT)
    path = tmp_path / "disk"
    path.mkdir()
    mounted = os.geteuid() == 0 and shutil.which("mount") is not None
    if mounted:
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={limit},mode=0755", "tmpfs", str(path)],
            capture_output=True,
            check=False,
        )
        mounted = proc.returncode == 0
    try:
        yield SmallDisk(path, tmpfs=mounted, limit=limit)
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], check=True)


def run_child(disk: SmallDisk, *args: str, data_dir: Path, cwd: Path) -> tuple[int, str, str]:
    proc = slob_subprocess(*args, data_dir=data_dir, cwd=cwd, preexec_fn=disk.child_limits())
    stdout, stderr = proc.communicate(timeout=300)
    return proc.returncode, stdout, stderr


def leftovers(directory: Path) -> list[Path]:
    """Temporary files of an interrupted write (they start with a dot, end with .tmp)."""
    return list(directory.rglob(".*.tmp"))


def test_a_full_results_disk_still_prints_the_report(
    server: EmbeddedServer, disk: SmallDisk, tmp_path: Path
) -> None:
    setup = invoke("setup", *DATA, cwd=tmp_path, env={"SLOB_DATA_DIR": str(server.data_dir)})
    assert setup.exit_code == 0, setup.output
    code, stdout, stderr = run_child(
        disk,
        "run",
        *DATA,
        "--update-pct",
        "0",
        "--run-time",
        "1",
        "--warmup",
        "0",
        "--results-dir",
        str(disk.path),
        data_dir=server.data_dir,
        cwd=tmp_path,
    )
    assert code == 1, stderr
    assert "Traceback" not in stderr
    assert "openslob report" in stdout and "Status        : complete" in stdout
    last = stderr.strip().splitlines()[-1]
    (run_dir,) = [p for p in disk.path.iterdir() if p.is_dir()]
    assert last.startswith(
        f"slob: error: the run finished, but not all of its results were saved in {run_dir}: "
    )
    assert f"run.json ({disk.full_error})" in last and "the report is printed above" in last
    # run.json (~280 KB) did not fit: it is absent, not truncated; what fit is whole
    assert not (run_dir / "run.json").exists()
    saved = (run_dir / "report.txt").read_text()
    assert saved.split() == stdout.split()  # the terminal's copy is wrapped at its width
    assert not leftovers(disk.path)
    analyzed = invoke("analyze", str(run_dir), cwd=tmp_path)
    assert analyzed.exit_code == 1 and str(run_dir) in analyzed.stderr
    assert "Traceback" not in analyzed.output


@pytest.mark.parametrize("disk", [12 * 1024], indirect=True)
def test_a_disk_that_fills_mid_run_keeps_what_was_written(
    server: EmbeddedServer, disk: SmallDisk, tmp_path: Path
) -> None:
    """12 KiB fill up in the window's first intervals: the run goes on to its end, prints its
    report, names every file it could not write, and what was written is whole rows."""
    setup = invoke("setup", *DATA, cwd=tmp_path, env={"SLOB_DATA_DIR": str(server.data_dir)})
    assert setup.exit_code == 0, setup.output
    code, stdout, stderr = run_child(
        disk, "run", *DATA, "--update-pct", "0", "--run-time", "3", "--warmup", "0",
        "--results-dir", str(disk.path), data_dir=server.data_dir, cwd=tmp_path,
    )  # fmt: skip
    assert code == 1, stderr
    assert "Traceback" not in stderr
    assert "openslob report" in stdout and "Status        : complete" in stdout
    last = stderr.strip().splitlines()[-1]
    (run_dir,) = [p for p in disk.path.iterdir() if p.is_dir()]
    assert last.startswith(
        f"slob: error: the run finished, but not all of its results were saved in {run_dir}: "
    )
    assert f"({disk.full_error}" in last and "the report is printed above" in last
    assert "timeseries.csv" in last or ".hlog" in last or "percentiles.csv" in last, last
    assert "not all of the time series was saved" in stdout  # the report's warning says so
    for name in ("timeseries.csv", "percentiles.csv"):
        if (run_dir / name).exists():  # whole rows only: no line cut by the full disk
            text = (run_dir / name).read_text()
            assert not text or text.endswith("\n"), name
            widths = {len(row) for row in csv.reader(io.StringIO(text))}
            assert len(widths) <= 1, (name, widths)
    assert not leftovers(disk.path)


def test_plots_and_html_on_a_full_disk_leave_no_truncated_file(
    disk: SmallDisk, tmp_path: Path
) -> None:
    disk.fill()
    plots = disk.path / "plots"
    code, _, stderr = run_child(
        disk, "plot", str(GOOD_RUN), "-o", str(plots), data_dir=tmp_path, cwd=tmp_path
    )
    assert code == 1 and "Traceback" not in stderr
    (line,) = stderr.strip().splitlines()
    assert line.startswith(f"slob: error: {plots}/") and line.endswith(disk.full_error)
    assert not [p for p in plots.rglob("*") if p.is_file()]  # nothing half written
    html = disk.path / "report.html"
    code, _, stderr = run_child(
        disk, "report", "--html", str(GOOD_RUN), "-o", str(html), data_dir=tmp_path, cwd=tmp_path
    )
    assert code == 1 and stderr.strip() == f"slob: error: {html}: {disk.full_error}"
    assert not html.exists() and not leftovers(disk.path)


def test_run_json_keeps_the_interval_table_one_row_per_line() -> None:
    """An 8 h run at 1 s intervals: 28,800 rows, each one line, and the file still JSON."""
    from openslob.results.rundir import run_text

    rows = [[i, 1.0, 300.5, None] for i in range(28_800)]
    run = {"status": "complete", "intervals": {"columns": ["i", "s", "ops", "p99"], "rows": rows}}
    text = run_text(run)
    assert json.loads(text) == run
    assert len(text.splitlines()) < 28_800 + 20
