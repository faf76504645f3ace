"""The non-root path, exercised from a root test run: an ordinary user with its own venv.

Run as a normal user, the whole suite already takes this path; as root (CI), this test
installs the package into a venv an unprivileged account can execute and drives the real
`slob` command as that account.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from openslob.engines.common.fsperm import ensure_service_user
from tests.conftest import make_base_dir

REPO = Path(__file__).resolve().parents[2]
USER = "slobtester"
SYSTEM_PYTHON = Path("/usr/bin/python3")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not SYSTEM_PYTHON.exists(),
    reason="as a normal user every other test already runs this path",
)


@pytest.fixture(scope="module")
def nonroot_slob() -> Iterator[tuple[Path, Path]]:
    ensure_service_user(USER)
    base = make_base_dir("openslob-nonroot-")
    venv = base / "venv"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", str(venv)], check=True)
    # A copy of the source: the checkout may sit under a directory the user cannot read.
    source = base / "src-copy"
    shutil.copytree(
        REPO, source, ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", "build")
    )
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(source)], check=True)
    work = base / "work"
    work.mkdir()
    entry = pwd.getpwnam(USER)
    os.chown(work, entry.pw_uid, entry.pw_gid)
    yield venv / "bin" / "slob", work
    subprocess.run(
        [
            "runuser",
            "-u",
            USER,
            "--",
            str(venv / "bin" / "slob"),
            "server",
            "destroy",
            "--yes",
            "--data-dir",
            str(work / "srv"),
        ],
        capture_output=True,
    )
    shutil.rmtree(base, ignore_errors=True)


def _as_user(slob: Path, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", USER, "--", str(slob), *args, "--data-dir", str(work / "srv")],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=300,
    )


def test_normal_user_runs_server_setup_and_verify(nonroot_slob: tuple[Path, Path]) -> None:
    slob, work = nonroot_slob
    started = _as_user(slob, work, "server", "start")
    assert started.returncode == 0, started.stderr
    uid = pwd.getpwnam(USER).pw_uid
    data_dir = work / "srv"
    pid = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
    assert Path(f"/proc/{pid}").stat().st_uid == uid  # runs as the user itself
    assert not (data_dir / "pgsql").exists()  # no copy needed: the user's own wheel is used
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((data_dir / "run").stat().st_mode) == 0o700
    args = ("--schemas", "2", "--scale", "600", "--scan-table-sz", "8")
    setup = _as_user(slob, work, "setup", *args)
    assert setup.returncode == 0, setup.stderr
    verify = _as_user(slob, work, "verify", *args)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert _as_user(slob, work, "server", "stop").returncode == 0
