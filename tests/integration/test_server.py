"""Lifecycle of the private server: start/stop/status/destroy, recovery, permissions."""

from __future__ import annotations

import json
import os
import pwd
import signal
import stat
import time
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from openslob.cli import cli
from openslob.config.option import BLOCK_SIZE
from openslob.config.resolve import resolve
from openslob.engines.postgres.server import SERVICE_USER, EmbeddedServer, wheel_install_dir
from openslob.model.errors import ConfigError, ServerError
from tests.conftest import make_base_dir


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _setting(server: EmbeddedServer, name: str) -> str:
    with psycopg.connect(server.conninfo()) as conn:
        return conn.execute("SELECT current_setting(%s)", [name]).fetchone()[0]


def _bytes_setting(server: EmbeddedServer, name: str) -> int:
    with psycopg.connect(server.conninfo()) as conn:
        return int(
            conn.execute(
                "SELECT setting::bigint * coalesce(pg_size_bytes(nullif(unit, '')), 1)"
                " FROM pg_settings WHERE name = %s",
                [name],
            ).fetchone()[0]
        )


def test_start_is_idempotent_and_status_reports(fresh_server: EmbeddedServer) -> None:
    first = fresh_server.start()
    second = fresh_server.start()
    assert first.state == second.state == "running"
    assert first.pid == second.pid  # no restart when nothing changed
    assert second.version and second.version.startswith("18")
    assert second.profile == "pio"
    runner = CliRunner()
    result = runner.invoke(
        cli, ["server", "status", "--json", "--data-dir", str(fresh_server.data_dir)]
    )
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["state"] == "running"
    assert status["data_dir"] == str(fresh_server.data_dir)
    assert status["uri"].startswith("postgresql://")
    with psycopg.connect(status["uri"]) as conn:  # the printed URI really connects
        assert conn.execute("SELECT current_database()").fetchone()[0] == "slob"


def test_stop_then_status_exit_code(fresh_server: EmbeddedServer) -> None:
    fresh_server.start()
    runner = CliRunner()
    args = ["--data-dir", str(fresh_server.data_dir)]
    assert runner.invoke(cli, ["server", "stop", *args]).output.strip() == "stopped"
    result = runner.invoke(cli, ["server", "status", *args])
    assert result.exit_code == 3
    assert "stopped" in result.output
    assert runner.invoke(cli, ["server", "stop", *args]).output.strip() == "not running"


def test_private_socket_directory(server: EmbeddedServer) -> None:
    socket_dir = server.socket_dir
    assert _mode(socket_dir) == 0o700
    assert (socket_dir / ".s.PGSQL.5432").is_socket()
    assert _setting(server, "listen_addresses") == ""
    if os.geteuid() == 0:
        assert socket_dir.stat().st_uid == pwd.getpwnam(SERVICE_USER).pw_uid
    assert not server.passfile.exists()  # no password unless TCP was asked for


def test_pio_profile_settings(server: EmbeddedServer) -> None:
    assert _setting(server, "debug_io_direct") == "data"
    assert _setting(server, "track_io_timing") == "on"
    assert _setting(server, "track_wal_io_timing") == "on"
    assert "pg_stat_statements" in _setting(server, "shared_preload_libraries")
    with psycopg.connect(server.conninfo()) as conn:
        conn.execute("SELECT count(*) FROM pg_stat_statements").fetchone()
    defaults = resolve({}, None, cwd=Path("/"))
    default_data = defaults["SCHEMAS"] * defaults["SCALE"] * BLOCK_SIZE
    shared_buffers = _bytes_setting(server, "shared_buffers")
    assert default_data >= 10 * shared_buffers, (default_data, shared_buffers)


def test_profile_change_restarts_with_new_settings(fresh_server: EmbeddedServer) -> None:
    pio = fresh_server.start("pio")
    small = _bytes_setting(fresh_server, "shared_buffers")
    lio = fresh_server.start("lio")
    assert lio.pid != pio.pid
    assert lio.profile == "lio"
    assert _bytes_setting(fresh_server, "shared_buffers") > 20 * small
    assert _setting(fresh_server, "debug_io_direct") == ""
    redo = fresh_server.start("redo")
    assert redo.profile == "redo"
    assert _setting(fresh_server, "wal_buffers") == "64MB"
    # The profile sticks: a plain start keeps it rather than reverting to pio.
    assert fresh_server.start().profile == "redo"


def test_buffered_load_profile_and_back(fresh_server: EmbeddedServer) -> None:
    fresh_server.start("redo")
    with fresh_server.bulk_load() as restarted:
        assert restarted and fresh_server.status().profile == "load"
        assert _setting(fresh_server, "debug_io_direct") == ""  # buffered while loading
        with psycopg.connect(fresh_server.conninfo(), autocommit=True) as conn:
            conn.execute("CREATE TABLE loaded AS SELECT g FROM generate_series(1, 1000) g")
    assert fresh_server.status().profile == "redo"
    assert _setting(fresh_server, "debug_io_direct") == "data"
    with psycopg.connect(fresh_server.conninfo()) as conn:
        assert conn.execute("SELECT count(*) FROM loaded").fetchone()[0] == 1000
    # an error inside still restores the test profile
    with pytest.raises(RuntimeError), fresh_server.bulk_load():
        raise RuntimeError("load failed")
    assert fresh_server.status().profile == "redo"
    # a setup killed inside it leaves the load profile: the next plain start undoes that
    fresh_server.start("load")
    info = json.loads(fresh_server.instance_file.read_text())
    fresh_server._save_instance({**info, "profile_after_load": "redo"})
    fresh_server.stop()
    assert fresh_server.start().profile == "redo"
    # a buffered server (lio) is left alone
    fresh_server.start("lio")
    with fresh_server.bulk_load() as restarted:
        assert not restarted and fresh_server.status().profile == "lio"


def test_unknown_profile_is_rejected(fresh_server: EmbeddedServer) -> None:
    # bad input: a ConfigError (one line naming the parameter), before anything is started
    with pytest.raises(ConfigError, match=r"profile=fast .*allowed: pio, lio, redo"):
        fresh_server.start("fast")


def test_recovers_from_killed_postmaster(fresh_server: EmbeddedServer) -> None:
    pid = fresh_server.start().pid
    assert pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)
    assert fresh_server.status().state == "stopped"  # stale postmaster.pid is not believed
    state = fresh_server.start()
    assert state.state == "running" and state.pid != pid
    with psycopg.connect(fresh_server.conninfo()) as conn:
        assert conn.execute("SELECT 1").fetchone()[0] == 1


def test_recovers_from_stale_pid_file(fresh_server: EmbeddedServer) -> None:
    fresh_server.start()
    fresh_server.stop()
    # A pid file naming a live process that is not our postmaster (this test process).
    (fresh_server.pgdata / "postmaster.pid").write_text(f"{os.getpid()}\n{fresh_server.pgdata}\n")
    assert fresh_server.status().state == "stopped"
    assert fresh_server.start().state == "running"


def test_tcp_uses_generated_password_in_private_file(fresh_server: EmbeddedServer) -> None:
    state = fresh_server.start(tcp=True)
    port = state.tcp_port
    assert port
    assert _mode(fresh_server.passfile) == 0o600
    password = fresh_server.passfile.read_text().strip().rsplit(":", 1)[-1]
    assert len(password) >= 24
    assert _setting(fresh_server, "listen_addresses") == "127.0.0.1"
    with psycopg.connect(fresh_server.conninfo()) as conn:  # via passfile=, no password in URI
        assert conn.execute("SELECT inet_server_addr()::text").fetchone()[0] == "127.0.0.1/32"
    assert password not in fresh_server.conninfo()
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(f"host=127.0.0.1 port={port} user=openslob dbname=slob password=wrong")
    for path in (fresh_server.instance_file, fresh_server.log_file):
        assert password not in path.read_text()
    status = CliRunner().invoke(
        cli, ["server", "status", "--json", "--data-dir", str(fresh_server.data_dir)]
    )
    assert password not in status.output


@pytest.mark.skipif(os.geteuid() != 0, reason="the root path only exists when run as root")
def test_root_runs_server_as_unprivileged_user(fresh_server: EmbeddedServer) -> None:
    wheel = wheel_install_dir()
    modes_before = {p: _mode(p) for p in [wheel, *wheel.parents][:6]}
    pid = fresh_server.start().pid
    owner = Path(f"/proc/{pid}").stat().st_uid
    assert owner == pwd.getpwnam(SERVICE_USER).pw_uid != 0
    assert fresh_server.pgdata.stat().st_uid == owner
    assert _mode(fresh_server.pgdata) == 0o700
    # The server runs from the tool's own copy; nothing above the wheel was loosened.
    assert Path(os.readlink(f"/proc/{pid}/exe")).is_relative_to(fresh_server.data_dir)
    assert {p: _mode(p) for p in modes_before} == modes_before


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create a private directory")
def test_unreachable_data_dir_is_refused_without_chmod() -> None:
    base = make_base_dir("openslob-private-")
    private = base / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    try:
        with pytest.raises(ServerError, match=r"cannot reach .* is mode 0700"):
            EmbeddedServer(private / "srv").start()
        assert _mode(private) == 0o700  # refused, not "fixed"
    finally:
        EmbeddedServer(private / "srv").destroy()
        private.chmod(0o700)
        import shutil

        shutil.rmtree(base)


def test_destroy_removes_everything(fresh_server: EmbeddedServer) -> None:
    pid = fresh_server.start().pid
    result = CliRunner().invoke(
        cli, ["server", "destroy", "--yes", "--data-dir", str(fresh_server.data_dir)]
    )
    assert result.exit_code == 0, result.output
    assert not fresh_server.data_dir.exists()
    assert not Path(f"/proc/{pid}").exists()


def test_a_removed_pid_file_never_makes_a_live_server_look_stopped(
    fresh_server: EmbeddedServer,
) -> None:
    """postmaster.pid removed by hand: status, start and the orphan sweep still see the live
    postmaster (its socket's lock file, its process in PGDATA) and leave it running; stop
    ends it with its own signal."""
    pid = fresh_server.start().pid
    (fresh_server.pgdata / "postmaster.pid").unlink()
    assert fresh_server.status().state == "running" and fresh_server.status().pid == pid
    fresh_server.kill_orphans()
    assert fresh_server.start().pid == pid
    with psycopg.connect(fresh_server.conninfo()) as conn:
        assert conn.execute("SELECT 1").fetchone()[0] == 1
    assert fresh_server.stop() is True
    assert not Path(f"/proc/{pid}").exists() or fresh_server.status().state == "stopped"
    assert fresh_server.start().state == "running"
