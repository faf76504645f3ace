"""The private mariadbd: page sizes, profiles, restarts, credentials; a real server, no mocks."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from openslob.config.resolve import resolve
from openslob.engines.common.server import SERVICE_USER
from openslob.engines.mariadb import server as mariadb_server
from openslob.engines.mariadb.engine import MariaDBEngine
from openslob.engines.mariadb.layout import layout_for
from openslob.engines.mariadb.server import (
    MARIADBD,
    EmbeddedMariaDB,
    malloc_arenas,
    parse_page_size,
    pio_buffer_pool_mb,
)
from openslob.model.errors import ConfigError, ServerError
from tests.conftest import make_base_dir

pytestmark = pytest.mark.skipif(not MARIADBD.exists(), reason="mariadb-server not installed")


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    path = make_base_dir("openslob-mariadb-srv-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def server_4k(base: Path) -> Iterator[EmbeddedMariaDB]:
    srv = EmbeddedMariaDB(base / "data", "4k")
    srv.start("pio", max_connections=50)
    yield srv
    srv.destroy()


def test_bad_page_size_is_one_line_naming_parameter_and_allowed_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        EmbeddedMariaDB(tmp_path, "12k")
    message = str(err.value)
    assert "\n" not in message
    assert message == "page_size=12k is not an InnoDB page size (allowed: 4k, 8k, 16k, 32k, 64k)"
    assert parse_page_size(16384) == "16k" and parse_page_size("4K") == "4k"


def test_missing_mariadbd_names_the_debian_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mariadb_server, "MARIADBD", tmp_path / "no-such-mariadbd")
    with pytest.raises(ServerError, match="mariadb-server"):
        EmbeddedMariaDB(tmp_path / "d", "16k").start()


def test_4k_server_reports_its_page_size_from_the_server(server_4k: EmbeddedMariaDB) -> None:
    state = server_4k.status()
    assert state.state == "running" and state.page_size == "4k"
    assert state.settings["innodb_page_size"] == "4096"  # read from the server
    assert state.settings["innodb_flush_method"] == "O_DIRECT"
    assert state.settings["innodb_doublewrite"] == "ON"
    assert state.settings["performance_schema"] == "ON"
    assert state.settings["innodb_read_ahead_threshold"] == "0"
    pool_mb = pio_buffer_pool_mb("4k", 50)  # 1024 + 8 x 50 pages of 4 KiB -> 6 MiB
    assert int(state.settings["innodb_buffer_pool_size"]) == pool_mb << 20
    assert Path(state.data_dir).name == "mariadb-4k"
    # Runs as the unprivileged server user when we are root.
    owner = Path(f"/proc/{state.pid}").stat().st_uid
    assert owner == (pwd.getpwnam(SERVICE_USER).pw_uid if os.geteuid() == 0 else os.geteuid())


def test_4k_setup_two_rows_per_leaf_page(server_4k: EmbeddedMariaDB) -> None:
    layout = layout_for(4096)
    assert (layout.pad, layout.record_bytes, layout.rows_per_page) == (99, 1934, 2)
    engine = MariaDBEngine(server_4k.connect_kwargs())
    config = resolve({"SCHEMAS": "1", "SCALE": "3000", "SCAN_TABLE_SZ": "0"}, None)
    engine.setup(config)
    result = engine.verify(config)
    assert result.ok, [c for c in result.checks if not c.ok]
    (per_page,) = [c for c in result.checks if c.name == "cf1 rows per leaf page"]
    assert per_page.measured.endswith("max 2")
    assert 1.99 <= float(per_page.measured.split()[0]) <= 2.0
    (record,) = [c for c in result.checks if c.name == "cf1 record bytes on page"]
    assert record.measured == pytest.approx(layout.record_bytes, abs=16)


def test_start_is_idempotent_and_restarts_only_to_change(server_4k: EmbeddedMariaDB) -> None:
    pid = server_4k.status().pid
    assert server_4k.start().pid == pid  # same settings: untouched
    changed = server_4k.start("lio")
    assert changed.pid != pid and changed.profile == "lio"
    assert int(changed.settings["innodb_buffer_pool_size"]) >= 128 << 20
    assert server_4k.start("pio", max_connections=50).profile == "pio"


def _arena_max(pid: int) -> str | None:
    """The MALLOC_ARENA_MAX the running server process has in its environment."""
    for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        name, _, value = entry.decode().partition("=")
        if name == "MALLOC_ARENA_MAX":
            return value
    return None


def test_the_server_gets_a_malloc_arena_a_thread(server_4k: EmbeddedMariaDB) -> None:
    """mariadbd runs with an arena per connection and server thread (its sessions do not
    queue on 16 shared arenas at an interval's end), follows max_connections, and the
    setting never restarts a running server by itself."""
    pid = server_4k.status().pid
    assert _arena_max(pid) == str(malloc_arenas(50)) == str(50 + mariadb_server.SERVER_THREADS)
    assert not server_4k.would_restart("pio", max_connections=50)
    bigger = server_4k.start("pio", max_connections=80)
    assert bigger.pid != pid and _arena_max(bigger.pid) == str(malloc_arenas(80))
    assert server_4k.start("pio", max_connections=80).pid == bigger.pid
    assert server_4k.start("pio", max_connections=50).pid != bigger.pid


def test_tcp_password_is_generated_private_and_never_shown(server_4k: EmbeddedMariaDB) -> None:
    server_4k.start(tcp=True)
    kwargs = server_4k.connect_kwargs()
    password = str(kwargs["password"])
    assert kwargs["host"] == "127.0.0.1"
    assert password not in repr(kwargs) and password not in server_4k.conninfo()
    assert stat.S_IMODE(server_4k.password_file.stat().st_mode) == 0o600
    with pymysql.connect(**kwargs) as conn, conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        assert cur.fetchone()[0] == "openslob@127.0.0.1"
    for path in (server_4k.log_file, server_4k.instance_file, server_4k.cnf):
        assert password not in path.read_text()
    state = server_4k.status()
    assert password not in str(state.as_dict())
    server_4k.start(tcp=False)


def test_failed_start_shows_the_server_log_tail(server_4k: EmbeddedMariaDB) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ServerError) as err:
            server_4k.start(tcp=True, port=port)
    message = str(err.value)
    assert "\n" not in message
    assert "mariadbd did not start" in message and "[ERROR]" in message
    assert str(server_4k.log_file) in message
    assert server_4k.start(tcp=False).state == "running"


def test_stop_and_start_again(server_4k: EmbeddedMariaDB) -> None:
    assert server_4k.stop() is True
    assert server_4k.status().state == "stopped"
    assert server_4k.stop() is False
    assert server_4k.start().state == "running"
